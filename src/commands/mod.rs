//! One thin file per command: each reads its arguments, calls `reconcile`
//! and `transaction`, and reports. No command calls another. `Ctx` carries
//! what every command shares: the global options, the stop flag that the
//! signal handlers set, and the warnings of the run (which reach the JSON
//! document whether the command succeeds or fails).

pub mod announce;
pub mod apply;
pub mod check;
pub mod confirm;
pub mod discover;
pub mod guard;
pub mod nccl_env;
pub mod probe;
pub mod probe_rdma;
pub mod remove;
pub mod rollback;
pub mod show;
pub mod tell;
pub mod watch;

use std::cell::RefCell;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use crate::error::Error;
use crate::model::Op;
use crate::netlink::Netlink;
use crate::render::quote;
use crate::signals::StopFlag;
use crate::state::confirm::{Confirmation, confirmation};
use crate::state::{NetnsLock, Pending, Record, StateDir};

/// `println!` that never panics: a closed stdout (`| head`) must not abort
/// a command after its work is done; the exit code still tells the outcome.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stdout(), "{}", $crate::output::localize(&text));
    }};
}

/// `eprintln!` that never panics (a terminal that went away answers EIO).
#[macro_export]
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", $crate::output::localize(&text));
    }};
}

/// What every command shares.
pub struct Ctx {
    pub netns: Option<String>,
    pub state_base: PathBuf,
    /// Whether the state base was chosen (option or environment) rather
    /// than the default: suggested commands then carry it.
    pub state_base_given: bool,
    pub lock_timeout: Duration,
    pub stop: StopFlag,
    pub json: bool,
    pub verbosity: Verbosity,
    warnings: RefCell<Vec<String>>,
    /// A long-running command (watch) prints each warning when it happens
    /// (a JSON line of its own with --json) rather than keeping it for the
    /// document at exit.
    live_warnings: std::cell::Cell<Option<&'static str>>,
}

/// How much a command prints for a person (never affects --json).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verbosity {
    /// `-q`: errors only.
    Quiet,
    /// A summary.
    #[default]
    Normal,
    /// `-v`: every command.
    Verbose,
}

/// What a command that finished reports: its exit code, whether it
/// changed the host, and its JSON fields (inside the common envelope).
pub struct Done {
    pub code: i32,
    pub changed: bool,
    /// The JSON fields, made only when they are printed (`--json`):
    /// making and dropping `show`'s of 32 rails cost 1.3 ms of a run that
    /// printed text.
    doc: Box<dyn FnOnce() -> serde_json::Value>,
}

impl Done {
    pub fn new(code: i32, changed: bool, doc: impl Serialize + 'static) -> Done {
        Done { code, changed, doc: Box::new(move || serde_json::to_value(doc).unwrap_or_default()) }
    }

    /// The same, with the field `key` of the JSON fields set to `value`.
    pub fn with(self, key: &'static str, value: impl Serialize + 'static) -> Done {
        let doc = self.doc;
        let doc = move || {
            let mut doc = doc();
            doc[key] = serde_json::to_value(value).unwrap_or_default();
            doc
        };
        Done { doc: Box::new(doc), ..self }
    }

    /// The JSON fields.
    pub fn doc(self) -> serde_json::Value {
        (self.doc)()
    }
}

impl Ctx {
    pub fn new(
        netns: Option<String>,
        state_base: PathBuf,
        state_base_given: bool,
        lock_timeout: Duration,
        stop: StopFlag,
        json: bool,
    ) -> Ctx {
        Ctx {
            netns,
            state_base,
            state_base_given,
            lock_timeout,
            stop,
            json,
            verbosity: Verbosity::Normal,
            warnings: RefCell::new(Vec::new()),
            live_warnings: std::cell::Cell::new(None),
        }
    }

    /// Whether to print for a person: not with --json, not with -q.
    pub fn chatty(&self) -> bool {
        !self.json && self.verbosity != Verbosity::Quiet
    }

    /// A warning: printed at once (not with --json) and kept for the JSON
    /// document.
    pub fn warn(&self, warning: impl Into<String>) {
        let warning = warning.into();
        if let Some(command) = self.live_warnings.get() {
            if self.json {
                let doc = serde_json::json!({ "command": command, "event": "warning", "message": warning });
                crate::output::say_json(&doc, false);
            } else {
                tell!("roce-route {command}: warning: {warning}");
            }
            return;
        }
        if self.chatty() {
            let line = format!("roce-route: warning: {warning}");
            match crate::output::stderr_width() {
                Some(width) => tell!("{}", crate::paste::wrap(&line, width, "  ")),
                None => tell!("{line}"),
            }
        }
        let mut all = self.warnings.borrow_mut();
        if !all.contains(&warning) {
            all.push(warning);
        }
    }

    /// From now on, warnings are printed as they happen (see
    /// `live_warnings`), as lines of `command`.
    pub fn stream_warnings(&self, command: &'static str) {
        self.live_warnings.set(Some(command));
    }

    pub fn warnings(&self) -> Vec<String> {
        self.warnings.borrow().clone()
    }

    /// A roce-route command line to suggest, carrying the global options
    /// this run was given, every word shell-quoted: copied as printed, it
    /// acts on the same namespace and state.
    pub fn suggest(&self, args: &[&str]) -> String {
        let mut words = vec!["roce-route".to_string()];
        if let Some(n) = &self.netns {
            words.extend(["--netns".to_string(), quote(n).into_owned()]);
        }
        if self.state_base_given {
            words.extend(["--state-dir".to_string(), quote(&self.state_base.to_string_lossy()).into_owned()]);
        }
        words.extend(args.iter().map(|a| quote(a).into_owned()));
        words.join(" ")
    }

    /// The state directory of the current network namespace.
    pub fn state(&self) -> Result<StateDir, Error> {
        Ok(StateDir::open(&self.state_base, &netns_id()?)?)
    }

    /// The state directory if this user may use it and it exists already:
    /// commands that only read (dry run, check, show) never create it.
    pub fn existing_state(&self) -> Result<Option<StateDir>, Error> {
        if !crate::netns::can_admin_network() {
            return Ok(None);
        }
        let id = netns_id()?;
        if !self.state_base.join(&id).is_dir() {
            return Ok(None);
        }
        Ok(Some(StateDir::open(&self.state_base, &id)?))
    }

    /// The record of earlier runs, where this user may read it.
    pub fn readable_record(&self) -> Result<Record, Error> {
        match self.existing_state()? {
            Some(state) => Ok(std::rc::Rc::unwrap_or_clone(state.record()?)),
            None => Ok(Record::default()),
        }
    }

    /// The lock of this network namespace; a signal ends the wait.
    pub fn lock(&self) -> Result<NetnsLock, Error> {
        let _p = crate::profile::phase("lock");
        Ok(NetnsLock::acquire(self.lock_timeout, &self.stop)?)
    }

    /// The lock of this network namespace if no other run holds it now
    /// (see `NetnsLock::try_now`).
    pub fn try_lock(&self) -> Option<NetnsLock> {
        let _p = crate::profile::phase("lock");
        NetnsLock::try_now()
    }

    /// Before a run changes the host, under the lock: refuses while an
    /// `apply --confirm` waits for its confirmation (its guard would revert
    /// on top of `what`), and reverts the trial of one whose guard is gone
    /// (see `revert_orphan`). Says what that did, if anything.
    pub async fn settle_confirmation(
        &self,
        what: &str,
        state: &StateDir,
        nl: &Netlink,
    ) -> Result<Option<String>, Error> {
        match confirmation(Some(state))? {
            Confirmation::None => Ok(None),
            Confirmation::Waiting { seconds_left, apply_pid } => Err(Error::Busy(format!(
                "an `apply --confirm` (pid {apply_pid}) is waiting for its confirmation ({seconds_left} s left); \
                 {what} would be undone by its revert: run `{}` to keep that change, or wait for it to revert",
                self.suggest(&["confirm"])
            ))),
            Confirmation::Unanswered(e) => Err(Error::Busy(format!(
                "the guard of an `apply --confirm` does not answer ({e}); {what} would race its revert: try again \
                 in a few seconds"
            ))),
            Confirmation::Orphaned(p) => revert_orphan(&self.stop, state, nl, &p).await.map(Some),
        }
    }
}

/// The trial of an `apply --confirm` whose guard is gone (`Orphaned`), if
/// there is one, reverted (see `revert_orphan`); says what happened. For
/// a run that has already refused to work during a confirmation.
pub async fn settle_orphaned_trial(
    stop: &StopFlag,
    state: &StateDir,
    nl: &Netlink,
) -> Result<Option<String>, Error> {
    match confirmation(Some(state))? {
        Confirmation::Orphaned(p) => revert_orphan(stop, state, nl, &p).await.map(Some),
        _ => Ok(None),
    }
}

/// A trial whose guard is gone without an answer. Under the lock, before
/// a run changes the host: it is reverted (the journals that carry its
/// id), or, when a later run superseded it, forgotten; never kept by
/// accident. Says what happened.
async fn revert_orphan(
    stop: &StopFlag,
    state: &StateDir,
    nl: &Netlink,
    p: &Pending,
) -> Result<String, Error> {
    use crate::transaction::{Env, TrialRevert, revert_trial};
    let whose = format!(
        "the guard (pid {}) of an `apply --confirm` (pid {}) is gone without an answer",
        p.guard_pid, p.pid
    );
    let what = match revert_trial(&Env { state, nl, stop }, p.after, &p.trial).await? {
        TrialRevert::Undone(0) => format!("{whose}: it had changed nothing"),
        TrialRevert::Undone(n) => {
            format!("{whose}: reverted its unconfirmed change ({})", crate::render::count(n, "run", "runs"))
        }
        TrialRevert::Superseded { journal, kind } => format!(
            "{whose}: a later {kind} ({journal}) superseded its trial, which is left as that run left it"
        ),
    };
    state.clear_pending()?;
    Ok(what)
}

pub async fn connect() -> Result<Netlink, Error> {
    Ok(Netlink::connect().await.context("cannot talk to the kernel over rtnetlink")?)
}

/// `connect`, with a link table of no link: each link is named, or found
/// by name, where the command meets it (`Netlink::connect_for`). For the
/// commands whose links come from what they read, not from a config:
/// rollback and a guard's revert (the journals' steps), remove (the
/// owned routes and the recorded sysctls). A node's thousand pod veths
/// then cost them nothing (a read of every link was 5-6 ms of 7), and a
/// rail gone since the run costs no read of every link either.
pub async fn connect_lazy() -> Result<Netlink, Error> {
    connect_only(&[]).await
}

/// `connect`, with a link table of the links named `names` only
/// (`Netlink::connect_for`), whatever sysfs holds: for a command that
/// matches no RDMA port to its netdev (announce).
pub async fn connect_only(names: &[&str]) -> Result<Netlink, Error> {
    Ok(Netlink::connect_for(names).await.context("cannot talk to the kernel over rtnetlink")?)
}

/// `connect`, with a link table of `cfg`'s interfaces only
/// (`Netlink::connect_for`): for a command that works on them alone and
/// names the others only where it meets them (apply, check).
pub async fn connect_for(
    cfg: &crate::config::Config,
    sysfs: &crate::cli::SysfsArg,
) -> Result<Netlink, Error> {
    let names: Vec<&str> = cfg.names().collect();
    connect_named(&names, sysfs).await
}

/// `connect`, with a link table of the links named `names` only
/// (`Netlink::connect_for`). With an InfiniBand port in `sysfs`, every
/// link, which IPoIB netdevs are matched among (`rdma::needs_links`),
/// read once.
pub async fn connect_named(names: &[&str], sysfs: &crate::cli::SysfsArg) -> Result<Netlink, Error> {
    if crate::rdma::needs_links(&crate::rdma_read::sysfs_dir(sysfs)?) {
        return connect().await;
    }
    connect_only(names).await
}

/// Identifies the current network namespace for the state directory, so
/// that runs in different namespaces keep their journals apart:
/// `net-<netns cookie>.boot-<boot id>`. The cookie (SO_NETNS_COOKIE, Linux
/// 5.14+) is never reused while the system runs, unlike the namespace's
/// inode, which a new namespace may get once an old one is deleted; the
/// boot id keeps a state directory on a persistent /run from applying to
/// the next boot. Older kernels fall back to the inode.
pub fn netns_id() -> Result<String, Error> {
    // One read: the file says its size is 0, and read_to_string asked for
    // it, then read 32 bytes at a time.
    let mut boot = [0u8; 64];
    let n = std::fs::File::open("/proc/sys/kernel/random/boot_id")
        .and_then(|mut f| std::io::Read::read(&mut f, &mut boot))
        .context("cannot read /proc/sys/kernel/random/boot_id")?;
    let boot = String::from_utf8_lossy(&boot[..n]);
    let boot: String = boot.trim().chars().filter(char::is_ascii_hexdigit).take(12).collect();
    let ns = match netns_cookie() {
        Some(cookie) => cookie.to_string(),
        None => {
            let meta = std::fs::metadata("/proc/self/ns/net")
                .context("cannot identify the network namespace (/proc/self/ns/net)")?;
            format!("ino{}", meta.ino())
        }
    };
    Ok(format!("net-{ns}.boot-{boot}"))
}

/// SO_NETNS_COOKIE of a socket made in the current network namespace.
fn netns_cookie() -> Option<u64> {
    use nix::libc;
    use std::os::fd::AsRawFd;
    let sock = std::os::unix::net::UnixDatagram::unbound().ok()?;
    let mut cookie: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: a valid socket, and a u64 buffer whose size is passed along.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NETNS_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        )
    };
    (rc == 0 && len as usize == std::mem::size_of::<u64>()).then_some(cookie)
}

/// One change in a report: its kind, the equivalent command, and the
/// entry it is about as structured fields (`{"kind", "command", "op"}`).
/// The command is rendered when it is printed: apply's and remove's text
/// says how many of each kind changed, and rendering the 56 commands of
/// an apply on 8 rails was 7% of its instructions (callgrind).
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub kind: &'static str,
    pub op: Op,
}

impl Change {
    pub fn of(op: &Op) -> Change {
        Change { kind: op.kind(), op: op.clone() }
    }

    /// The equivalent iproute2 command (or `sysctl -w`).
    pub fn command(&self) -> String {
        crate::render::command(&self.op)
    }
}

impl Serialize for Change {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Change", 3)?;
        st.serialize_field("kind", self.kind)?;
        st.serialize_field("command", &self.command())?;
        st.serialize_field("op", &self.op)?;
        st.end()
    }
}

/// What a note of `run_notes` is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteKind {
    /// An `apply --confirm` waits for its confirmation.
    ConfirmationWaiting,
    /// The guard of an `apply --confirm` is gone with its trial in place.
    OrphanedTrial,
    /// The latest run did not finish (killed or crashed).
    InterruptedRun,
}

/// A note on the state of roce-route's runs, in plain words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub kind: NoteKind,
    pub text: String,
}

/// What check and show say about the state of roce-route's runs: an
/// interrupted run, an apply waiting for its confirmation.
pub fn run_notes(ctx: &Ctx, state: Option<&StateDir>) -> Result<Vec<Note>, Error> {
    let mut notes = Vec::new();
    // A `pending` that cannot be read is for the commands that act on it
    // (apply, rollback, remove, watch) to report: these only describe.
    match confirmation(state).unwrap_or(Confirmation::None) {
        Confirmation::Waiting { seconds_left, apply_pid } => notes.push(Note {
            kind: NoteKind::ConfirmationWaiting,
            text: format!(
                "an `apply --confirm` (pid {apply_pid}) is waiting for its confirmation: it is reverted in \
                 {seconds_left} s unless `{}` runs",
                ctx.suggest(&["confirm"])
            ),
        }),
        Confirmation::Orphaned(p) => notes.push(Note {
            kind: NoteKind::OrphanedTrial,
            text: format!(
                "the guard (pid {}) of an `apply --confirm` (pid {}) is gone without an answer: its unconfirmed \
                 change may still be in place; a running `roce-route watch` reverts it, or undo it with `{}`",
                p.guard_pid,
                p.pid,
                ctx.suggest(&["rollback"])
            ),
        }),
        Confirmation::None | Confirmation::Unanswered(_) => {}
    }
    if let Some(state) = state
        && let Some((header, false)) = state.latest_committed()?
    {
        notes.push(Note { kind: NoteKind::InterruptedRun, text: interrupted_run(ctx, &header) });
    }
    Ok(notes)
}

/// The note on a run that did not finish, with the commands that undo
/// or finish it.
fn interrupted_run(ctx: &Ctx, header: &crate::state::JournalHeader) -> String {
    let ago = crate::state::unix_now().saturating_sub(header.started_unix);
    let of = header.config.as_deref().map_or(String::new(), |c| format!(" of {c}"));
    let files: Vec<String> =
        if header.files.is_empty() { header.config.iter().cloned().collect() } else { header.files.clone() };
    let finish = match header.kind {
        crate::state::RunKind::Apply if !files.is_empty() => {
            format!(" or `{}` to finish it", ctx.suggest(&apply::apply_args(&files, &[])))
        }
        _ => String::new(),
    };
    format!(
        "the last {}{of} (pid {}, {ago} s ago) did not finish (killed or crashed): run `{}` to undo what it \
         made{finish}",
        header.kind,
        header.pid,
        ctx.suggest(&["rollback"])
    )
}

/// Writes text that carries its own line ends to stdout (never panics).
pub fn print_text(text: &str) {
    use std::io::Write as _;
    let _ = std::io::stdout().write_all(crate::output::localize(text).as_bytes());
}

/// `say!` of each of `lines`, in one write (stdout writes each line it
/// is given at once: a system call per line).
pub fn print_lines(lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    print_text(&text);
}

/// The config of the latest apply in this namespace, for a command that
/// takes CONFIG or falls back to it (`nccl-env`, `probe`); `usage` is how
/// to give the config instead.
/// `usage`: the words after `roce-route` of the command to suggest instead.
pub fn latest_config(ctx: &Ctx, command: &str, usage: &[&str]) -> Result<crate::config::Config, Error> {
    let record = ctx.readable_record()?;
    if record.config_files.is_empty() {
        let why = if crate::netns::can_admin_network() {
            "no apply is recorded in this network namespace"
        } else {
            "the record of the latest apply can only be read as root"
        };
        return Err(Error::Usage(format!("{command}: {why}; give the config: `{}`", ctx.suggest(usage))));
    }
    Ok(crate::config::parse_many(&record.config_files)?)
}

/// A rail's addresses: the listed ones (a bare one with the prefix length
/// it has on the host), else the global ones apply would take.
pub fn rail_addresses(
    iface: &crate::config::Interface,
    live: &[crate::model::Address],
) -> Vec<crate::model::Prefix> {
    use crate::model::{Prefix, scope};
    let on_rail = || live.iter().filter(move |a| a.ifname == iface.name && a.scope == scope::UNIVERSE);
    match &iface.addresses {
        Some(listed) => listed
            .iter()
            .map(|a| {
                a.prefix().unwrap_or_else(|| {
                    on_rail().find(|l| l.addr.addr == a.addr).map_or(Prefix::host(a.addr), |l| l.addr)
                })
            })
            .collect(),
        None => on_rail().filter(|a| crate::plan::unfit(a).is_none()).map(|a| a.addr).collect(),
    }
}
