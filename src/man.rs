//! The manual pages, rendered from the clap definition so that they never
//! drift from the command line: roce-route(8), a section per command with
//! its synopsis and every option, and roce-route.toml(5), the one
//! configuration reference. (Depends on clap and `exit_codes` only, so that
//! the build script can render them too.)

use clap::{Arg, ArgAction, Command};

use crate::exit_codes;

/// Escapes text for roff: backslashes, hyphens (so that options copy as
/// ASCII), and a leading period or apostrophe (a request otherwise).
pub fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    escaped
        .lines()
        .map(|l| if l.starts_with('.') || l.starts_with('\'') { format!("\\&{l}") } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `--long`, `-s, --long VALUE`, or `CONFIG...` for a positional.
fn arg_name(arg: &Arg) -> String {
    let values = || {
        let names: Vec<String> = arg
            .get_value_names()
            .map(|v| v.iter().map(|n| format!("\\fI{}\\fR", roff(n))).collect())
            .unwrap_or_else(|| vec![format!("\\fI{}\\fR", roff(&arg.get_id().to_string().to_uppercase()))]);
        names.join(" ")
    };
    if arg.is_positional() {
        let dots = if matches!(arg.get_action(), ArgAction::Append)
            || arg.get_num_args().is_some_and(|n| n.max_values() > 1)
        {
            "..."
        } else {
            ""
        };
        return format!("{}{dots}", values());
    }
    let mut names = Vec::new();
    if let Some(s) = arg.get_short() {
        names.push(format!("\\fB\\-{s}\\fR"));
    }
    if let Some(l) = arg.get_long() {
        names.push(format!("\\fB\\-\\-{}\\fR", roff(l)));
    }
    let mut name = names.join(", ");
    if arg.get_action().takes_values() {
        name.push(' ');
        name.push_str(&values());
    }
    name
}

/// The paragraph of one option: its long help, choices, default, variable.
fn arg_text(arg: &Arg) -> String {
    let help = arg.get_long_help().or(arg.get_help()).map(|h| h.to_string()).unwrap_or_default();
    let mut extra = Vec::new();
    let choices: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    if !choices.is_empty() && arg.get_action().takes_values() {
        extra.push(format!("One of: {}.", choices.join(", ")));
    }
    let defaults: Vec<String> =
        arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
    if !defaults.is_empty() && arg.get_action().takes_values() {
        extra.push(format!("Default: {}.", defaults.join(" ")));
    }
    if let Some(env) = arg.get_env() {
        extra.push(format!("Also set by the environment variable {}.", env.to_string_lossy()));
    }
    let mut text = help.trim_end().to_string();
    if !text.is_empty() && !text.ends_with(['.', '!', '?']) {
        text.push('.');
    }
    for e in extra {
        text.push(' ');
        text.push_str(&e);
    }
    roff(&text)
}

fn options(out: &mut String, args: impl Iterator<Item = Arg>) {
    for arg in args {
        out.push_str(&format!(".TP\n{}\n{}\n", arg_name(&arg), arg_text(&arg)));
    }
}

fn shown(arg: &Arg) -> bool {
    !arg.is_hide_set() && !matches!(arg.get_id().as_str(), "help" | "version")
}

/// The synopsis line of a subcommand: its options and its arguments.
fn synopsis(sub: &Command) -> String {
    let mut s = format!("\\fBroce\\-route {}\\fR", roff(sub.get_name()));
    if sub.get_arguments().any(|a| shown(a) && !a.is_positional() && !a.is_global_set()) {
        s.push_str(" [\\fIOPTIONS\\fR]");
    }
    for arg in sub.get_positionals().filter(|a| shown(a)) {
        let name = arg_name(arg);
        s.push(' ');
        s.push_str(&if arg.is_required_set() { name } else { format!("[{name}]") });
    }
    s
}

/// The visible subcommands, in the order `--help` lists them.
pub fn commands(root: &Command) -> Vec<Command> {
    root.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help").cloned().collect()
}

fn command_section(out: &mut String, sub: &Command) {
    out.push_str(&format!(".SS {}\n", sub.get_name().replace('-', "\\-")));
    out.push_str(&format!("{}\n.PP\n", synopsis(sub)));
    let about = sub.get_long_about().or(sub.get_about()).map(|a| a.to_string()).unwrap_or_default();
    out.push_str(&format!("{}\n", roff(about.trim_end())));
    let own: Vec<Arg> = sub.get_arguments().filter(|a| shown(a) && !a.is_global_set()).cloned().collect();
    if !own.is_empty() {
        options(out, own.into_iter());
    }
    let codes: Vec<String> = exit_codes::of(sub.get_name()).iter().map(|c| c.to_string()).collect();
    out.push_str(&format!(".PP\nExit status: {}.\n", codes.join(", ")));
}

/// roce-route(8). `root` is the built command line (`Cli::command()`).
pub fn page_8(root: &Command, version: &str) -> String {
    let mut root = root.clone();
    root.build();
    let mut out = String::new();
    out.push_str(&format!(
        ".TH ROCE\\-ROUTE 8 \"\" \"roce\\-route {}\" \"System Administration\"\n",
        roff(version)
    ));
    out.push_str(".SH NAME\nroce\\-route \\- per\\-NIC policy routing for multi\\-NIC RDMA hosts\n");
    out.push_str(".SH SYNOPSIS\n\\fBroce\\-route\\fR [\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]\n");
    out.push_str(&format!(".SH DESCRIPTION\n{}\n", DESCRIPTION.trim_end()));
    out.push_str(".SH GLOBAL OPTIONS\nThese go before or after the command.\n");
    options(&mut out, root.get_arguments().filter(|a| shown(a) && a.is_global_set()).cloned());
    out.push_str(".SH COMMANDS\n");
    for sub in commands(&root) {
        command_section(&mut out, &sub);
    }
    out.push_str(TAIL_8);
    out.push_str(".SH EXIT STATUS\n");
    for (code, meaning) in exit_codes::MEANINGS {
        out.push_str(&format!(".TP\n\\fB{code}\\fR\n{}\n", roff(meaning)));
    }
    out.push_str(FILES_8);
    out
}

const DESCRIPTION: &str = r#"GPU servers carry several RDMA NICs (InfiniBand/IPoIB or RoCE) with their
addresses in one subnet. Linux routes by destination, so traffic from every
NIC's address leaves through one NIC, and every NIC answers ARP for every
address (ARP flux): \fBping\fR works, RDMA connections fail.
.PP
\fBroce\-route\fR reads a TOML description of the NICs (see
\fBroce\-route.toml\fR(5)) and makes the host route each address through its
own NIC: a routing table per NIC, a source rule per address
(\fBip rule add from\fR \fIADDR\fR \fBlookup\fR \fITABLE\fR) and per\-NIC
\fBarp_ignore\fR=1 and \fBarp_announce\fR=2. It applies the difference over
rtnetlink as one transaction, rolled back on any failure, and keeps an undo
journal of every run. It never runs \fBip\fR, \fBsysctl\fR or a shell."#;

const TAIL_8: &str = r#".SH EXAMPLES
Write a configuration for this host's RDMA NICs, review it, preview the
change, then install it where the boot unit reads it:
.PP
.RS
.nf
roce\-route discover > rails.toml
roce\-route apply \-\-dry\-run rails.toml
.fi
.RE
.PP
Apply it over SSH, kept only if confirmed within two minutes; only the
confirmation installs it into /etc/roce\-route/, which the boot unit applies:
.PP
.RS
.nf
roce\-route apply \-\-confirm 120 \-\-install /etc/roce\-route/ rails.toml
roce\-route confirm
.fi
.RE
.PP
Check it, keep it applied, and tell NCCL which devices to use:
.PP
.RS
.nf
roce\-route check /etc/roce\-route/rails.toml
systemctl enable \-\-now roce\-route.service roce\-route\-watch.service
.fi
.RE
.PP
In a job script (as the job's user; the binary is in \fI/usr/sbin\fR),
failing loudly rather than running without the settings:
.PP
.RS
.nf
env=$(/usr/sbin/roce\-route nccl\-env /etc/roce\-route/) || exit 1
eval "$env"
.fi
.RE
.SH NOTES
.SS Ownership
Every route and rule roce\-route makes carries the route protocol of
\fB[defaults] protocol\fR (234 unless set). That number is how it tells its
own entries from everyone else's: a re\-apply, \fBremove\fR and \fBwatch\fR
touch only entries with it, and an entry without it that stands in the way is
a conflict (taken over only with \fBapply \-\-adopt\fR).
.SS Network managers
systemd\-networkd removes routing policy rules and routes it did not make
when it reconfigures a link (\fBManageForeignRoutingPolicyRules=\fR and
\fBManageForeignRoutes=\fR, yes by default); the package ships a drop\-in
that turns both off, as an example
(\fI/usr/share/doc/roce\-route/examples/90\-roce\-route.conf\fR, for
\fI/etc/systemd/networkd.conf.d/\fR).
NetworkManager and others may also take entries away: \fBwatch\fR heals them,
and says so when another agent keeps undoing its heals.
.SS RDMA
roce\-route reads the RDMA devices from \fI/sys/class/infiniband\fR (or the
copy \fB\-\-sysfs\-root\fR names) and maps each port to its netdev as
\fBibdev2netdev\fR does: RoCE by the GID table's \fIndevs\fR, InfiniBand by
the IPoIB hardware address that ends with the port GUID (pkey children
included), else the PCI function's netdevs.
.SS Confirm, rollback and watch
The guard of \fBapply \-\-confirm\fR is armed before the first netlink
message and reverts every journal made after it was armed unless
\fBconfirm\fR comes first. \fBrollback\fR undoes the latest apply or remove
with the heals by \fBwatch\fR built on it. \fBwatch\fR heals from rtnetlink
notifications, makes a second pass 3 s after a new link appears and a full
pass every \fB\-\-resync\fR seconds.
"#;

const FILES_8: &str = r#".SH FILES
.TP
\fI/etc/roce\-route/\fR
The configuration read by \fIroce\-route.service\fR at boot.
.TP
\fI/run/roce\-route/\fR
The state (\fB\-\-state\-dir\fR): per network namespace, the undo journals
(\fIjournal\-NNNNNN.jsonl\fR, \fIjournal\-NNNNNN.heal.jsonl\fR for heals),
\fIrecord.json\fR (original sysctl values, tables, protocols) and
\fIpending\fR (an \fBapply \-\-confirm\fR waiting).
.TP
\fI/run/roce\-route/netns/ns\-DEV\-INODE/\fR
Per network namespace whatever \fB\-\-state\-dir\fR is (0700, root's):
\fIlock\fR, \fIwatch.lock\fR and \fIconfirm.sock\fR.
.SH ENVIRONMENT
.TP
\fBROCE_ROUTE_STATE_DIR\fR
The state base directory, as \fB\-\-state\-dir\fR.
.TP
\fBNOTIFY_SOCKET\fR
Set by systemd for \fBwatch\fR (Type=notify).
.TP
\fBROCE_ROUTE_PROFILE\fR
When set to 1, prints where the time of a run went, as one JSON line on
standard error.
.SH SEE ALSO
\fBroce\-route.toml\fR(5), \fBip\-rule\fR(8), \fBip\-route\fR(8),
\fBsysctl.conf\fR(5), \fBsystemd.service\fR(5),
\fBsystemd\-networkd.service\fR(8)
"#;

/// roce-route.toml(5): every key, its default and range, and an example
/// per rail design.
pub fn page_5(version: &str) -> String {
    format!(".TH ROCE\\-ROUTE.TOML 5 \"\" \"roce\\-route {}\" \"File Formats\"\n{PAGE_5}", roff(version))
}

const PAGE_5: &str = r#".SH NAME
roce\-route.toml \- the configuration of roce\-route: the RDMA NICs of a host
.SH SYNOPSIS
\fI/etc/roce\-route/*.toml\fR
.SH DESCRIPTION
A TOML file with one \fB[[interface]]\fR table per RDMA NIC (a rail), an
optional \fB[defaults]\fR table, and optional \fB[[arp_only]]\fR tables.
\fBapply\fR, \fBcheck\fR, \fBannounce\fR, \fBnccl\-env\fR and \fBprobe\fR
take one or more files, or directories that stand for their \fI*.toml\fR
files in name order (not their subdirectories); they are merged into one
configuration, each file with at least one \fB[[interface]]\fR. Every
\fI*.toml\fR file in \fI/etc/roce\-route/\fR is part of the configuration
the boot unit applies. \fB[defaults]\fR may be in one file only and
applies to all; an interface, an explicit \fBtable\fR or a listed address in
two files is refused, naming both files and lines. Unknown keys are refused
by name. Errors name the file, line and column, and say what to do.
.SH [defaults]
Every key is optional.
.TP
\fBtable_base\fR = \fIN\fR
The lowest routing table given to an interface without \fBtable\fR.
Default 100.
.TP
\fBpriority\fR = \fIN\fR
The priority of the source rules, 1..32765 (32766 and 32767 are the
\fBmain\fR and \fBdefault\fR rules). Default 1000.
.TP
\fBprotocol\fR = \fIN\fR
The route protocol stamped on every route and rule roce\-route makes, 5..255;
that is how it tells its own entries apart. Numbers of known routing daemons
are refused. Default 234.
.TP
\fBarp_ignore\fR = \fIN\fR
\fInet.ipv4.conf.RAIL.arp_ignore\fR: 0, 1, 2, 3 or 8. Default 1 (answer
ARP only for addresses of the receiving NIC). On a fabric with an L2
segment per rail and one subnet for every rail, set 0: each segment holds
one NIC of each host, so the other NICs' answers do no harm, and they carry
what is not bound to a rail (which leaves by the first rail's route): with
1 there, a connection to a peer's address of another rail gets no answer.
.TP
\fBarp_announce\fR = \fIN\fR
\fInet.ipv4.conf.RAIL.arp_announce\fR: 0, 1 or 2. Default 2 (ARP requests
carry the sending NIC's own address).
.TP
\fBrp_filter\fR = \fIN\fR
\fInet.ipv4.conf.RAIL.rp_filter\fR: 0, 1 or 2. Not managed unless given.
.TP
\fBarp_filter\fR = \fIN\fR
\fInet.ipv4.conf.RAIL.arp_filter\fR: 0 or 1. Not managed unless given.
.TP
\fBannounce\fR = \fIN\fR
How many times \fBapply\fR announces each address of a rail it changed to
the peers (gratuitous ARP, unsolicited neighbour advertisement), 0..10; 0
turns it off. Default 2.
.SH [[interface]]
One table per rail.
.TP
\fBname\fR = "\fIIFNAME\fR"
Required. The netdev: \fIens1np0\fR, \fIib0\fR, a pkey child
\fIib0.8001\fR, a VLAN \fIens1np0.100\fR.
.TP
\fBaddresses\fR = ["\fIADDR/LEN\fR", ...]
The rail's addresses; a bare address takes the prefix length the interface
has. Default: every global address the interface has when \fBapply\fR runs
(deprecated, temporary and DAD\-failed ones are left out, with a warning).
.TP
\fBgateway\fR = "\fIADDR\fR" | ["\fIV4\fR", "\fIV6\fR"] | { address = "\fIADDR\fR", onlink = true }
The rail's default route in its table, one per family; it must be on\-link
unless \fBonlink = true\fR says the router is reached on the link although
no subnet holds it (a /32 address). Default: none (the table holds the
connected routes only).
.TP
\fBtable\fR = \fIN\fR
The rail's routing table, 1..4294967295 but 253, 254 and 255. Default: the
table it had at the last apply, else the lowest free one from
\fBtable_base\fR.
.TP
\fBpriority\fR = \fIN\fR
This rail's rule priority. Default \fB[defaults] priority\fR.
.TP
\fBarp_ignore\fR, \fBarp_announce\fR, \fBrp_filter\fR, \fBarp_filter\fR
This rail's values, as in \fB[defaults]\fR.
.SH [[arp_only]]
An interface outside the rails (a management NIC) with an address in a
rail's subnet: only its ARP sysctls are managed, never a table, route or
rule.
.TP
\fBname\fR = "\fIIFNAME\fR"
Required; not the name of an \fB[[interface]]\fR.
.TP
\fBarp_ignore\fR, \fBarp_announce\fR, \fBarp_filter\fR
As in \fB[defaults]\fR, whose values they default to.
.SH EXAMPLES
.SS All rails in one subnet (RoCE, 8 single\-port NICs)
.nf
[[interface]]
name = "ens1np0"
[[interface]]
name = "ens2np0"
# ... one table per NIC, ens8np0 the last
.fi
.PP
Each NIC's addresses are found on the host; tables 100, 101, ... in file
order.
.SS A subnet per rail, with gateways
.nf
[[interface]]
name = "ens1np0"
addresses = ["198.51.100.10/26"]
gateway = "198.51.100.1"
[[interface]]
name = "ens2np0"
addresses = ["198.51.100.74/26"]
gateway = "198.51.100.65"
.fi
.SS A /31 per rail to its leaf (L3 fabric)
.nf
[[interface]]
name = "ens1np0"
addresses = ["203.0.113.1/31"]
gateway = "203.0.113.0"
[[interface]]
name = "ens2np0"
addresses = ["203.0.113.3/31"]
gateway = "203.0.113.2"
.fi
.SS IPoIB partitions, dual stack
.nf
[[interface]]
name = "ib0.8001"
addresses = ["198.51.100.10/24", "2001:db8:1::10/64"]
[[interface]]
name = "ib1.8001"
addresses = ["198.51.100.11/24", "2001:db8:1::11/64"]
.fi
.SS Two files in a directory
.nf
# /etc/roce\-route/10\-rails.toml
[defaults]
rp_filter = 2
[[interface]]
name = "ens1np0"
# /etc/roce\-route/20\-storage.toml
[[interface]]
name = "ens9f0np0"
table = 200
.fi
.PP
\fBroce\-route apply /etc/roce\-route\fR reads both, in name order. Every
file needs at least one \fB[[interface]]\fR: \fB[defaults]\fR sits in the
file of some rails, not in a file of its own.
.SH FILES
.TP
\fI/etc/roce\-route/\fR
Where \fIroce\-route.service\fR reads the configuration at boot.
.TP
\fI/usr/share/doc/roce\-route/examples/\fR
Examples for common rail designs.
.SH SEE ALSO
\fBroce\-route\fR(8), \fBip\-rule\fR(8), \fBip\-route\fR(8)
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// The TOML examples of roce-route.toml(5) (its `.nf`/`.fi` blocks),
    /// each split into its files at `# /etc/roce-route/NAME` lines.
    fn page_5_examples() -> Vec<Vec<(String, String)>> {
        let examples = PAGE_5.split(".SH EXAMPLES").nth(1).unwrap().split(".SH FILES").next().unwrap();
        let mut all = Vec::new();
        for block in examples.split(".nf\n").skip(1) {
            let text = block.split(".fi").next().unwrap().replace("\\-", "-");
            let mut files: Vec<(String, String)> = Vec::new();
            for line in text.lines() {
                match line.strip_prefix("# /etc/roce-route/") {
                    Some(name) => files.push((name.to_string(), String::new())),
                    None if files.is_empty() => files.push(("example.toml".into(), format!("{line}\n"))),
                    None => files.last_mut().unwrap().1.push_str(&format!("{line}\n")),
                }
            }
            all.push(files);
        }
        all
    }

    /// Every example of the configuration page is a valid configuration
    /// (the two-file one as the two files merged), as apply reads it.
    #[test]
    fn every_example_of_the_configuration_page_is_valid() {
        let examples = page_5_examples();
        assert_eq!(examples.len(), 5, "{examples:#?}");
        assert_eq!(examples[4].len(), 2, "the two-file example: {:#?}", examples[4]);
        for files in examples {
            if let Err(e) = crate::config::parse_many(&files) {
                panic!("a roce-route.toml(5) example is refused: {e}\n{files:#?}");
            }
        }
    }

    #[test]
    fn roff_escapes_hyphens_backslashes_and_leading_periods() {
        assert_eq!(roff("--dry-run"), "\\-\\-dry\\-run");
        assert_eq!(roff("a\\b"), "a\\eb");
        assert_eq!(roff(".x\n'y\nz"), "\\&.x\n\\&'y\nz");
    }

    #[test]
    fn a_command_section_has_its_synopsis_options_and_exit_status() {
        let cmd = Command::new("roce-route").subcommand(
            Command::new("apply")
                .about("Make it so")
                .arg(Arg::new("config").value_name("CONFIG").required(true).num_args(1..))
                .arg(Arg::new("dry_run").long("dry-run").help("Print only").action(ArgAction::SetTrue))
                .arg(Arg::new("settle").long("settle").value_name("SECONDS").default_value("5").help("Wait")),
        );
        let page = page_8(&cmd, "9");
        let apply = &page[page.find(".SS apply").unwrap()..];
        assert!(apply.contains("\\fBroce\\-route apply\\fR [\\fIOPTIONS\\fR] \\fICONFIG\\fR..."), "{apply}");
        assert!(apply.contains(".TP\n\\fB\\-\\-dry\\-run\\fR\nPrint only.\n"), "{apply}");
        assert!(apply.contains("\\fB\\-\\-settle\\fR \\fISECONDS\\fR\nWait. Default: 5."), "{apply}");
        assert!(apply.contains("Exit status: 0, 1, 2, 4, 5."), "{apply}");
    }
}
