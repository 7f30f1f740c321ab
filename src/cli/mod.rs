//! The command line (clap; `fast` for apply's plainest lines).

use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};

mod fast;

/// The heading of the options every command takes.
const GLOBAL: &str = "Global options";

/// The environment variable `--state-dir` is read from when not given.
pub const STATE_DIR_ENV: &str = "ROCE_ROUTE_STATE_DIR";

/// `--lock-timeout`'s default, in seconds.
const LOCK_TIMEOUT: u64 = 30;

/// `apply --settle`'s default and its longest, in seconds.
const SETTLE: u64 = 5;
const SETTLE_MAX: u64 = 600;

/// `apply --confirm`'s longest wait, in seconds.
const CONFIRM_MAX: u64 = 86400;

/// The command line as parsed and documented: its `--help` and every
/// command's end with the exit codes they can return, and the global
/// options are left out of `completions` and `man`, which print text and
/// need none.
pub fn command() -> clap::Command {
    let mut cmd = Cli::command().after_help(crate::exit_codes::overview());
    cmd.build();
    let names: Vec<String> = cmd.get_subcommands().map(|c| c.get_name().to_string()).collect();
    for name in names {
        cmd = cmd.mut_subcommand(&name, |c| {
            let c = c.after_help(crate::exit_codes::help(&name));
            if name == "completions" || name == "man" {
                c.mut_args(|a| if a.is_global_set() { a.hide(true) } else { a })
            } else {
                c
            }
        });
    }
    cmd
}

/// The command line to parse `args` (the program's name first) with:
/// `command()` when they may print help or usage with it (no command,
/// `help`, `-h`, `--help`); else the same options without the help texts
/// `command()` adds to every command, whose building is most of what
/// parsing costs (errors print no help text), and with only the commands
/// named among `args` (`Given`).
pub fn command_for(args: &[std::ffi::OsString]) -> clap::Command {
    let wants_help = |a: &std::ffi::OsString| {
        let a = a.as_encoded_bytes();
        a == b"help" || a == b"--help" || (a.len() > 1 && a[0] == b'-' && a[1] != b'-' && a.contains(&b'h'))
    };
    if args.len() < 2 || args.iter().skip(1).any(wants_help) {
        return command();
    }
    let words = args.iter().skip(1).map(|a| a.as_encoded_bytes().to_vec()).collect();
    ONLY.set(Some(words));
    let cmd = Cli::command();
    ONLY.set(None);
    cmd
}

/// `args` (the program's name first) parsed: apply's plainest lines by
/// `fast`, the others with `command_for(args)`; a usage error is that of
/// the whole command line, every command in it, so it reads as it did (a
/// misspelt command is told its nearest name).
pub fn parse(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    if let Some(cli) = fast::parse(&args, std::env::var_os(STATE_DIR_ENV).as_ref()) {
        return Ok(cli);
    }
    // The matches are read in place: `from_arg_matches` clones them first.
    let parse_with = |cmd: clap::Command, args: Vec<std::ffi::OsString>| {
        cmd.try_get_matches_from(args).and_then(|mut matches| Cli::from_arg_matches_mut(&mut matches))
    };
    match parse_with(command_for(&args), args.clone()) {
        Ok(cli) => Ok(cli),
        Err(e) if !e.use_stderr() => Err(e),
        Err(_) => parse_with(Cli::command(), args),
    }
}

thread_local! {
    /// The words being parsed while `command_for` builds the command line
    /// to parse them with: `Given` adds only the commands they name.
    static ONLY: std::cell::RefCell<Option<Vec<Vec<u8>>>> = const { std::cell::RefCell::new(None) };
}

/// The command given. Its command line (`clap::Subcommand`) has every
/// command, but while `command_for` builds one to parse with (`ONLY`): then
/// only those whose name or alias is one of the words given. clap copies
/// each global option into every command of the line when it builds it,
/// parsed or not (a quarter of a parse's instructions). A parse that
/// succeeds with some of the commands succeeds with all of them, the same:
/// the command it took was named, and no name is a prefix of another's
/// (`infer_subcommands` is off). The commands are taken from a command line
/// of their own: an attribute on `Command` itself (it has none) would not
/// reach the light one.
#[derive(Debug)]
pub struct Given(pub Command);

impl std::ops::Deref for Given {
    type Target = Command;
    fn deref(&self) -> &Command {
        &self.0
    }
}

impl clap::FromArgMatches for Given {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Command::from_arg_matches(matches).map(Given)
    }
    fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        Command::from_arg_matches_mut(matches).map(Given)
    }
    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
}

impl Subcommand for Given {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        ONLY.with_borrow(|only| match only {
            None => Command::augment_subcommands(cmd),
            Some(words) => {
                let named = |c: &clap::Command| {
                    std::iter::once(c.get_name())
                        .chain(c.get_all_aliases())
                        .any(|name| words.iter().any(|w| w == name.as_bytes()))
                };
                let all = Command::augment_subcommands(clap::Command::new("all"));
                all.get_subcommands().filter(|c| named(c)).fold(cmd, |cmd, c| cmd.subcommand(c.clone()))
            }
        })
    }
    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Command::augment_subcommands_for_update(cmd)
    }
    fn has_subcommand(name: &str) -> bool {
        Command::has_subcommand(name)
    }
}

/// Per-NIC policy routing for multi-NIC RDMA hosts (InfiniBand/IPoIB, RoCE).
#[derive(Debug, Parser)]
#[command(name = "roce-route", version)]
pub struct Cli {
    /// Run inside this named network namespace (as `ip -n NAME`); every
    /// `ip` and `sysctl` command printed then acts there too.
    #[arg(long, global = true, value_name = "NAME", help_heading = GLOBAL)]
    pub netns: Option<String>,

    /// Where journals and the record of earlier runs live (one
    /// subdirectory per network namespace).
    #[arg(long, global = true, help_heading = GLOBAL, value_name = "DIR", env = STATE_DIR_ENV, default_value = crate::state::DEFAULT_BASE)]
    pub state_dir: PathBuf,

    /// How long to wait for another roce-route working in the same network
    /// namespace before giving up.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = LOCK_TIMEOUT, help_heading = GLOBAL)]
    pub lock_timeout: u64,

    /// Print one JSON document on stdout: {"command", "ok", "exit_code",
    /// "changed", "warnings", "error", ...the command's own fields}.
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub json: bool,

    /// apply: list every command it ran and every address it announced
    /// (default: a summary per interface and one line for the announcements);
    /// watch: log every pass, not only the heals.
    #[arg(short, long, global = true, conflicts_with = "quiet", help_heading = GLOBAL)]
    pub verbose: bool,

    /// Print nothing but errors (the exit code tells the rest).
    #[arg(short, long, global = true, help_heading = GLOBAL)]
    pub quiet: bool,

    #[command(subcommand)]
    pub command: Given,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a config for this host's RDMA NICs.
    ///
    /// One [[interface]] per netdev of an ACTIVE RDMA port (InfiniBand/IPoIB,
    /// RoCE) with a global address, each commented with its device, port,
    /// link layer, rate and state; the netdev of a port that is not ACTIVE
    /// is written commented out, and what is not taken is listed with the
    /// reason. Writes no file: redirect it, review it, then install it.
    Discover(Deferred<DiscoverArgs>),
    /// Make the host's tables, rules and ARP sysctls match CONFIG.
    ///
    /// The difference is applied over rtnetlink as one transaction, rolled
    /// back on any failure, with an undo journal for `rollback`.
    Apply(Deferred<ApplyArgs>),
    /// Undo the most recent apply (or remove) exactly.
    Rollback(Deferred<RollbackArgs>),
    /// Take out every route and rule roce-route owns; restore the sysctls.
    ///
    /// Every route and rule with roce-route's protocol goes, and the
    /// sysctls it changed get their original values back.
    Remove(Deferred<RemoveArgs>),
    /// Exit 0 when the host is as CONFIG asks (state and traffic), 3 when not.
    Check(Deferred<CheckArgs>),
    /// Show what roce-route owns now, by interface, and where traffic goes.
    Show(Deferred<ShowArgs>),
    /// Keep the change of a waiting `apply --confirm`.
    Confirm,
    /// Announce every address of CONFIG to the peers now, each from its own rail.
    ///
    /// Gratuitous ARP and unsolicited IPv6 neighbour advertisements for
    /// every address CONFIG lists (or finds), e.g. after a switch was
    /// replaced. Changes nothing on the host.
    Announce(Deferred<AnnounceArgs>),
    /// Keep the host as the latest apply left it: heal what others take away.
    ///
    /// Heals what the kernel or a daemon takes away (a rail down/up, a rail
    /// re-created, flushed rules, a replaced address), in the foreground,
    /// until SIGTERM. Follows apply, rollback and remove; never heals while
    /// an `apply --confirm` waits.
    Watch(Deferred<WatchArgs>),
    /// Print NCCL's settings for the rails of CONFIG (or of the latest apply).
    ///
    /// NCCL_IB_HCA and NCCL_SOCKET_IFNAME with exact matching, and the GID
    /// selection (NCCL_IB_GID_INDEX when one index fits every RoCE device,
    /// else NCCL_IB_ADDR_FAMILY and NCCL_IB_ADDR_RANGE).
    #[command(name = "nccl-env")]
    NcclEnv(Deferred<NcclEnvArgs>),
    /// Probe the rails on the wire against their peers; a verdict per pair.
    ///
    /// From every rail of CONFIG (or of the latest apply) to every peer
    /// address: who answers ARP (flux), where the echo reply comes in and
    /// from which MAC, the path MTU, this host's own route and the RTT.
    /// With --rdma, also the RDMA layer per pair (connect, WRITE, READ)
    /// against `probe --listen` on the peer. Changes nothing; needs
    /// CAP_NET_RAW. Exit 0: every pair right; 1: problems found.
    Probe(Deferred<ProbeArgs>),
    /// Print a shell completion script (bash, zsh, fish, ...) on stdout.
    ///
    /// Generated from this command line, so it completes every command and
    /// option this binary has.
    Completions(Deferred<CompletionsArgs>),
    /// Print a manual page (roff) on stdout: `roce-route man | man -l -`.
    Man(Deferred<ManArgs>),
    /// (internal) The guard `apply --confirm` starts: reverts the change
    /// at the deadline unless it is confirmed.
    #[command(hide = true)]
    ConfirmGuard(Deferred<GuardArgs>),
}

/// A command's options, added to its `clap::Command` only when that
/// command is built: when it is the one parsed, or for help, man and
/// completions, which build them all. Building every command's options
/// was most of what a cold parse cost (and of `--version`). The global
/// options are added to a command before its own, so they come first in
/// the completion scripts; and no command's own option may take a global
/// one's id (clap skipped the global one then; now the two would clash).
#[derive(Debug)]
pub struct Deferred<T>(pub T);

impl<T> std::ops::Deref for Deferred<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: clap::FromArgMatches> clap::FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Deferred)
    }
    fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Deferred)
    }
    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
}

impl<T: clap::Args> clap::Args for Deferred<T> {
    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.defer(keep_about::<T>)
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        T::augment_args_for_update(cmd)
    }
}

/// `T::augment_args`, keeping the command's own texts: a flattened struct
/// sets its doc comment as `about`, which the command's doc comment,
/// set before the deferred options are added, must still win over.
fn keep_about<T: clap::Args>(cmd: clap::Command) -> clap::Command {
    let (about, long) = (cmd.get_about().cloned(), cmd.get_long_about().cloned());
    let cmd = T::augment_args(cmd);
    let cmd = match about {
        Some(text) => cmd.about(text),
        None => cmd.about(None::<&str>),
    };
    match long {
        Some(text) => cmd.long_about(text),
        None => cmd.long_about(None::<&str>),
    }
}

#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// A full pass this often even without a notification (0: never):
    /// sysctl writes send none, so this is how a reset arp_ignore or
    /// rp_filter is found. A pass that finds nothing to do only reads.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub resync: u64,
    /// Keep the metrics in FILE (Prometheus text format, replaced
    /// atomically at start and after every pass), e.g. for node_exporter's
    /// textfile collector.
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// Where --metrics reads each rail's RDMA port and GIDs from.
    #[command(flatten)]
    pub sysfs: SysfsArg,
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Which page: roce-route (section 8, the commands) or roce-route.toml
    /// (section 5, the configuration).
    #[arg(value_parser = ["roce-route", "roce-route.toml"], default_value = "roce-route")]
    pub page: String,
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// The TOML configuration: one or more files, or directories of
    /// `*.toml` files (in name order), merged into one.
    #[arg(required = true, num_args = 1..)]
    pub config: Vec<PathBuf>,

    /// Print the changes as iproute2/sysctl commands and change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Take over conflicting entries that roce-route does not own (source
    /// rules for configured addresses, routes in configured tables).
    #[arg(long)]
    pub adopt: bool,

    /// Keep the change only if `roce-route confirm` runs (or Enter is
    /// pressed) within SECONDS; otherwise roll it back.
    #[arg(long, value_name = "SECONDS", conflicts_with = "dry_run", value_parser = clap::value_parser!(u64).range(1..=CONFIRM_MAX))]
    pub confirm: Option<u64>,

    /// Put the config file into DIR (the directory the boot unit applies,
    /// e.g. /etc/roce-route/) once its change is in place: at once, or
    /// with --confirm only once confirmed, so that a reverted trial never
    /// reaches the next boot. Applies DIR's other *.toml files with it, as
    /// the boot unit will. Takes one config file.
    #[arg(long, value_name = "DIR")]
    pub install: Option<PathBuf>,

    /// All or nothing: when any configured rail or address is not ready
    /// (missing, down, in DAD), change nothing and exit 1 (default: apply
    /// the rest and exit 5).
    #[arg(long)]
    pub strict: bool,

    /// Exit 0, not 5, when parts of the config are not ready (they are
    /// still reported, and `watch` heals them once ready): for a caller
    /// that takes only 0 for success and has no shell to test the code,
    /// such as a Kubernetes init container.
    #[arg(long, conflicts_with = "strict")]
    pub not_ready_ok: bool,

    /// Wait up to SECONDS for the addresses the plan uses that are still
    /// in IPv6 duplicate address detection (tentative; never link-local
    /// ones) before taking them for not ready.
    #[arg(long, value_name = "SECONDS", default_value_t = SETTLE, value_parser = clap::value_parser!(u64).range(0..=SETTLE_MAX))]
    pub settle: u64,

    /// Do not announce the addresses of the changed rails to the peers
    /// afterwards (as `[defaults] announce = 0`).
    #[arg(long)]
    pub no_announce: bool,
    #[command(flatten)]
    pub sysfs: SysfsArg,
}

#[derive(Debug, clap::Args)]
pub struct AnnounceArgs {
    /// The TOML configuration: one or more files, or directories of
    /// `*.toml` files (in name order), merged into one.
    #[arg(required = true, num_args = 1..)]
    pub config: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The TOML configuration: one or more files, or directories of
    /// `*.toml` files (in name order), merged into one.
    #[arg(required = true, num_args = 1..)]
    pub config: Vec<PathBuf>,
    /// text (the differences in words) or prometheus (the metrics families
    /// `watch --metrics` writes, for this one check); --json prints the
    /// report as JSON.
    #[arg(long, value_enum, default_value = "text")]
    pub format: CheckFormat,
    #[command(flatten)]
    pub sysfs: SysfsArg,
}

/// How check prints its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckFormat {
    /// The differences in plain words, each with its fix.
    Text,
    /// The Prometheus text format (as node_exporter's textfile collector reads it).
    Prometheus,
}

/// Where the RDMA devices are read: the same option on apply, check, show,
/// discover, nccl-env, probe and watch, so a support bundle or a test
/// fixture can be examined by each.
#[derive(Debug, Clone, clap::Args)]
pub struct SysfsArg {
    /// Read the RDMA devices (`class/infiniband`) and netdev facts
    /// (`class/net`) from this copy of sysfs instead of /sys. Netdevs and
    /// addresses still come from the network namespace over rtnetlink.
    #[arg(long, value_name = "DIR", default_value = crate::sysfs::DEFAULT_ROOT)]
    pub sysfs_root: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct DiscoverArgs {
    /// Take the netdevs whose names match these shell patterns (`rail*`,
    /// `ens?f0np0`), whether or not they have an RDMA device, instead of
    /// the netdevs of the RDMA ports.
    #[arg(long, value_name = "GLOB", num_args = 1..)]
    pub interfaces: Vec<String>,
    #[command(flatten)]
    pub sysfs: SysfsArg,
}

/// How nccl-env prints the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NcclFormat {
    /// `export NAME=VALUE` lines, the notes as comments.
    Shell,
    /// `NAME=VALUE` lines for /etc/nccl.conf (or ~/.nccl.conf).
    NcclConf,
}

#[derive(Debug, clap::Args)]
pub struct NcclEnvArgs {
    /// The TOML configuration (files or directories, as apply takes);
    /// default: the config of the latest apply in this network namespace.
    #[arg(num_args = 0..)]
    pub config: Vec<PathBuf>,
    /// shell (`export` lines) or nccl-conf (`/etc/nccl.conf` lines); --json
    /// prints the settings with the reasoning.
    #[arg(long, value_enum, default_value = "shell")]
    pub format: NcclFormat,
    #[command(flatten)]
    pub sysfs: SysfsArg,
}

#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// The TOML configuration (files or directories, as apply takes);
    /// default: the config of the latest apply in this network namespace.
    #[arg(num_args = 0..)]
    pub config: Vec<std::path::PathBuf>,
    /// A peer address to probe: repeat it (`--peer A --peer B`) or give
    /// several at once, comma-separated (`--peer A,B`). One address per
    /// word, so CONFIG may follow it.
    #[arg(long, value_name = "ADDR", value_delimiter = ',', action = clap::ArgAction::Append)]
    pub peer: Vec<std::net::IpAddr>,
    /// A file of peer addresses (one a line, `#` comments) or the JSON
    /// that `roce-route probe --self --json` printed on the peer host
    /// (the verdicts then name the peer's NICs).
    #[arg(long, value_name = "FILE")]
    pub peers: Vec<std::path::PathBuf>,
    /// Describe this host's rails (name, addresses, MAC, MTU, RDMA port)
    /// for a peer's --peers, and probe nothing.
    #[arg(long = "self", conflicts_with_all = ["peer", "peers"])]
    pub self_: bool,
    /// How long to wait for what does not answer (an answer ends the wait).
    #[arg(long, value_name = "SECONDS", default_value_t = 0.5)]
    pub timeout: f64,
    /// Probe each peer address only from the rail named as the peer's
    /// NIC that has it (known from --peers documents; an address none
    /// describes is probed from every rail). A fleet probing at once then
    /// makes each host learn rails, not rails x rails, neighbour entries
    /// per prober: 504 instead of 4,032 at 64 hosts of 8 rails, against a
    /// default gc_thresh3 of 1024.
    #[arg(long)]
    pub same_rail: bool,
    /// Also probe each pair at the RDMA layer, against `roce-route probe
    /// --listen` on the peer: RDMA CM from the rail's own address and
    /// device, a connection, an RDMA WRITE and READ of a tag, a READ of
    /// 8 KiB. Needs librdmacm and libibverbs at run time; the static
    /// binary cannot load them and reports every pair not verified.
    #[arg(long, conflicts_with = "self_")]
    pub rdma: bool,
    /// Be the responder of the peers' `--rdma`: listen on every rail
    /// address of CONFIG until --idle seconds pass without a connection
    /// (or a signal). Probes nothing, changes nothing.
    #[arg(long, conflicts_with_all = ["peer", "peers", "self_", "rdma"])]
    pub listen: bool,
    /// The port of the responder (RDMA CM, TCP port space).
    #[arg(long, value_name = "PORT", default_value_t = crate::probe::rdma::DEFAULT_PORT)]
    pub rdma_port: u16,
    /// How long one pair may take at the RDMA layer before it is a
    /// failure (rxe retries forever; a NIC gives up after its retries).
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0)]
    pub rdma_timeout: f64,
    /// With --listen: end after this many seconds without a new
    /// connection.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub idle: f64,
    #[command(flatten)]
    pub sysfs: SysfsArg,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Also take routes and rules with this protocol number as roce-route's
    /// (besides 234 and the ones it recorded); 5..=255, not a daemon's.
    #[arg(long, value_name = "N")]
    pub protocol: Option<i64>,
    #[command(flatten)]
    pub sysfs: SysfsArg,
}

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// Print the commands the rollback would run and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, clap::Args)]
pub struct RemoveArgs {
    /// Also take out routes and rules with this protocol number (this run
    /// only, never recorded); 5..=255, not a daemon's.
    #[arg(long, value_name = "N")]
    pub protocol: Option<i64>,
    /// Print the commands the removal would run and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, clap::Args)]
pub struct GuardArgs {
    #[arg(long)]
    pub seconds: u64,
    /// The newest journal's sequence number before the change (0: none):
    /// the trial is every journal after it.
    #[arg(long)]
    pub after: u64,
    /// The trial id its journals carry.
    #[arg(long, default_value = "")]
    pub trial: String,
    #[arg(long)]
    pub apply_pid: u32,
}

impl Command {
    pub fn name(&self) -> &'static str {
        match self {
            Command::Apply(_) => "apply",
            Command::Rollback(_) => "rollback",
            Command::Remove(_) => "remove",
            Command::Check(_) => "check",
            Command::Show(_) => "show",
            Command::Confirm => "confirm",
            Command::Announce(_) => "announce",
            Command::Completions(_) => "completions",
            Command::Man(_) => "man",
            Command::ConfirmGuard(_) => "confirm-guard",
            Command::Watch(_) => "watch",
            Command::Discover(_) => "discover",
            Command::NcclEnv(_) => "nccl-env",
            Command::Probe(_) => "probe",
        }
    }

    /// Whether the command changes the network (and needs root).
    pub fn changes_network(&self) -> bool {
        match self {
            Command::Apply(a) => !a.dry_run,
            Command::Rollback(r) => !r.dry_run,
            Command::Remove(r) => !r.dry_run,
            Command::Confirm | Command::ConfirmGuard(_) | Command::Announce(_) | Command::Watch(_) => true,
            Command::Check(_)
            | Command::Show(_)
            | Command::Discover(_)
            | Command::NcclEnv(_)
            | Command::Probe(_)
            | Command::Completions(_)
            | Command::Man(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{FromArgMatches, Parser};

    use super::*;

    fn probe(args: &[&str]) -> ProbeArgs {
        let cli = Cli::try_parse_from(["roce-route", "probe"].iter().chain(args)).unwrap();
        match cli.command.0 {
            Command::Probe(p) => p.0,
            other => panic!("{other:?}"),
        }
    }

    /// `--peer` takes one address per word, so CONFIG may follow it (it
    /// took every word after it once, CONFIG too), and a comma list.
    #[test]
    fn a_peer_is_one_word_and_config_may_follow_it() {
        let p = probe(&["--peer", "198.51.100.1", "rails.toml"]);
        assert_eq!(p.peer, ["198.51.100.1".parse::<std::net::IpAddr>().unwrap()]);
        assert_eq!(p.config, [PathBuf::from("rails.toml")]);
        let p = probe(&["rails.toml", "--peer", "198.51.100.1,2001:db8::1", "--peer", "203.0.113.1"]);
        let peers: Vec<String> = p.peer.iter().map(ToString::to_string).collect();
        assert_eq!(peers, ["198.51.100.1", "2001:db8::1", "203.0.113.1"]);
    }

    /// Parsing builds the options of the command given and of no other:
    /// building every command's options was most of what a cold parse
    /// cost (`Deferred`).
    #[test]
    fn parsing_builds_only_the_command_given() {
        let own = |c: &clap::Command, name: &str| {
            c.find_subcommand(name).expect(name).get_arguments().filter(|a| !a.is_global_set()).count()
        };
        let mut cmd = Cli::command();
        cmd.try_get_matches_from_mut(os(&["apply", "--dry-run", "rails.toml"])).unwrap();
        assert!(own(&cmd, "apply") > 5, "apply's options are there");
        for other in ["check", "show", "probe", "watch", "discover", "nccl-env"] {
            assert_eq!(own(&cmd, other), 0, "{other} is not built");
        }
        let mut full = command();
        full.build();
        assert!(own(&full, "probe") > 5, "help and the docs get every command's options");
    }

    /// Each command keeps its own text when its options are added later:
    /// the doc comment of a struct it flattens (`SysfsArg`) took its place.
    #[test]
    fn every_command_keeps_its_own_about() {
        let mut cmd = command();
        cmd.build();
        let mut seen = std::collections::BTreeMap::new();
        for c in cmd.get_subcommands() {
            let about = c.get_about().map(ToString::to_string).unwrap_or_default();
            let long = c.get_long_about().map(ToString::to_string);
            assert!(!about.is_empty(), "{}", c.get_name());
            assert!(long.is_none_or(|l| l.starts_with(&about)), "{}: {about:?}", c.get_name());
            if let Some(before) = seen.insert(about.clone(), c.get_name().to_string()) {
                panic!("{before} and {} share {about:?}", c.get_name());
            }
        }
        let apply = cmd.find_subcommand("apply").unwrap().get_about().unwrap().to_string();
        assert_eq!(apply, "Make the host's tables, rules and ARP sysctls match CONFIG");
    }

    fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("roce-route").chain(args.iter().copied()).map(Into::into).collect()
    }

    /// The light command parses every command line as the full one does,
    /// errors included; help of any form gets the full one, whose texts
    /// (the exit codes) only it has. The light one has only the commands
    /// named, and a line that parses needs no second try with all of them.
    #[test]
    fn the_light_command_parses_as_the_full_one() {
        let full_texts = |c: &clap::Command| c.get_after_help().is_some();
        let names =
            |c: &clap::Command| c.get_subcommands().map(|c| c.get_name().to_string()).collect::<Vec<_>>();
        for (args, named) in [
            (
                &["--netns", "n", "--state-dir", "/tmp/s", "apply", "--no-announce", "rails.toml"][..],
                &["apply"][..],
            ),
            (&["apply", "-q", "--json", "--dry-run", "a.toml", "b.toml"], &["apply"]),
            (&["show", "--protocol", "234", "-v"], &["show"]),
            (&["watch", "rails.toml", "--netns", "n"], &["watch"]),
            (&["probe", "--peer", "198.51.100.1", "rails.toml", "--rdma"], &["probe"]),
            // A namespace named like a command: both are kept, the first parsed.
            (&["--netns", "check", "apply", "rails.toml"], &["apply", "check"]),
            (&["completions", "bash"], &["completions"]),
            (&["apply"], &["apply"]),
            (&["apply", "--no-such-option", "rails.toml"], &["apply"]),
            (&["no-such-command"], &[]),
            (&["aply", "rails.toml"], &[]),
            (&["--netns", "n"], &[]),
        ] {
            let argv = os(args);
            let full = command().try_get_matches_from(&argv).and_then(|m| Cli::from_arg_matches(&m));
            let light = parse(argv.clone());
            match (&full, light) {
                (Ok(f), Ok(l)) => assert_eq!(format!("{f:?}"), format!("{l:?}"), "{args:?}"),
                (Err(f), Err(l)) => assert_eq!(f.to_string(), l.to_string(), "{args:?}"),
                (f, l) => panic!("{args:?}: full {f:?}, light {l:?}"),
            }
            let light = command_for(&argv);
            assert!(!full_texts(&light), "{args:?} gets the light one");
            assert_eq!(names(&light), named, "{args:?}");
            if full.is_ok() {
                assert!(light.try_get_matches_from(&argv).is_ok(), "{args:?} parses with the commands named");
            }
        }
        for args in [&["apply", "--help"][..], &["help", "apply"], &["-h"], &["apply", "-qh"], &[]] {
            let light = command_for(&os(args));
            assert!(full_texts(&light), "{args:?} gets the full one");
            assert_eq!(names(&light), names(&command()), "{args:?}");
        }
    }
}
