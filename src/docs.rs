//! `completions` and `man`: generated from the clap definition
//! (`clap_complete`, `clap_mangen`), so they never drift from the command
//! line. The manual page adds what `--help` does not hold: the config
//! reference, exit status, files and environment.

use std::io::Write;

use clap::CommandFactory;

use crate::cli::Cli;
use crate::commands::Done;
use crate::error::{Error, exit};

/// The completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Done {
    let _ = std::io::stdout().write_all(completion_script(shell).as_bytes());
    Done::new(exit::OK, false, serde_json::json!({}))
}

/// The completion script for `shell`, without the internal command.
pub fn completion_script(shell: clap_complete::Shell) -> String {
    let mut cmd = Cli::command();
    // clap_complete offers hidden subcommands too: the guard is internal.
    cmd = cmd.mut_subcommand("confirm-guard", |c| c.hide(true));
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "roce-route", &mut out);
    let script = String::from_utf8_lossy(&out).into_owned();
    match shell {
        // clap_complete 4.6 names the bash cases of a hyphenated binary's
        // subcommands `roce__subcmd__route__subcmd__X` but sets
        // `roce__route__subcmd__X`, so no subcommand's options would ever
        // complete; the test of `roce-route apply --dr` guards this.
        clap_complete::Shell::Bash => {
            script.replace("roce__subcmd__route", "roce__route").replace(" confirm-guard", "")
        }
        _ => script,
    }
}

/// The manual page (section 8) on stdout.
pub fn man() -> Result<Done, Error> {
    let page = man_page().map_err(|e| Error::Other(anyhow::anyhow!("cannot render the manual page: {e}")))?;
    let _ = std::io::stdout().write_all(&page);
    Ok(Done::new(exit::OK, false, serde_json::json!({})))
}

/// The whole page as roff.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    let cmd = Cli::command().name("roce-route");
    let man = clap_mangen::Man::new(cmd).section("8");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    man.render_subcommands_section(&mut out)?;
    out.extend_from_slice(EXTRA.as_bytes());
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// Sections beyond --help, in plain roff (man(7) macros only).
const EXTRA: &str = r#".SH CONFIGURATION
A TOML file (or several files, or a directory of \fI*.toml\fR files read in
name order, merged into one) with one \fB[[interface]]\fR table per RDMA NIC.
.TP
\fB[defaults]\fR
\fBtable_base\fR (lowest table given to an interface without \fBtable\fR,
default 100), \fBpriority\fR (rule priority, 1..32765, default 1000),
\fBprotocol\fR (marks what roce-route owns, 5..255, default 234, not a routing
daemon's), \fBarp_ignore\fR (default 1), \fBarp_announce\fR (default 2),
\fBrp_filter\fR, \fBarp_filter\fR (not managed unless given), \fBannounce\fR
(announcements after a change, 0..10, default 2). At most one file may hold
\fB[defaults]\fR; it applies to all.
.TP
\fB[[interface]]\fR
\fBname\fR (required), \fBaddresses\fR (default: every global address the
interface has), \fBgateway\fR (an address, a list, or
\fB{ address = "...", onlink = true }\fR), \fBtable\fR (default: the table
it had at the last apply, else the lowest free one), \fBpriority\fR, and the
four sysctl keys.
.TP
\fB[[arp_only]]\fR
\fBname\fR and the ARP sysctl keys: an interface outside the rails (a
management NIC) that gets only its ARP sysctls.
.SH RDMA
roce-route reads the RDMA devices from \fI/sys/class/infiniband\fR (or from
the copy of sysfs that \fB\-\-sysfs\-root\fR names, the same option on
\fBcheck\fR, \fBshow\fR, \fBdiscover\fR, \fBnccl\-env\fR and \fBapply\fR) and maps each
port to its netdev as \fBibdev2netdev\fR does: RoCE by the GID table's
\fIndevs\fR, InfiniBand by the IPoIB hardware address that ends with the
port GUID (pkey children included), else the PCI function's netdevs.
Netdevs and addresses always come from the network namespace over rtnetlink.
.TP
\fBdiscover\fR
Prints a config: one \fB[[interface]]\fR per netdev of an ACTIVE port with a
global address, a gateway only where the host has one for the subnet, an
\fB[[arp_only]]\fR for a netdev outside the rails (a management NIC, the
netdev of a port that is not ACTIVE) with an IPv4 address in a rail's subnet.
The addressed netdev of a port that is not ACTIVE is written commented out;
a device without netdev and a netdev without address are listed with the
reason.
\fB\-\-interfaces\fR \fIGLOB\fR... takes netdevs by name instead. Exit 1
when there is no RDMA device or a pattern matches nothing.
.TP
\fBnccl\-env\fR [\fICONFIG\fR]
Prints \fBNCCL_IB_HCA\fR and \fBNCCL_SOCKET_IFNAME\fR with exact matching
(a leading \fB=\fR: without it \fImlx5_1\fR also selects \fImlx5_10\fR),
and \fBNCCL_IB_GID_INDEX\fR when the RoCE v2 GID of each RoCE rail's address
(its first IPv4 one, else its first IPv6 one) has the same index on every
device; otherwise
\fBNCCL_IB_ADDR_FAMILY\fR and one \fBNCCL_IB_ADDR_RANGE\fR for NCCL's
automatic selection (2.21 or later). GID indices move when addresses change:
run it where the job starts. \fB\-\-format nccl\-conf\fR prints
\fI/etc/nccl.conf\fR lines. Without \fICONFIG\fR, the config of the latest
apply.
.TP
\fBcheck\fR, \fBshow\fR
\fBcheck\fR reports a rail's port that is not ACTIVE/LinkUp
(\fIrdma_port\fR) and, on RoCE, a configured address without a RoCE v2 GID
of that rail (\fIrdma_gid\fR), with exit 3; a device it cannot read is
\fIrdma_unreadable\fR (the routing is still checked). \fBapply\fR warns
about the same and goes on: it cannot change a port or the GID table. \fBshow\fR gives each rail its
device, port, link layer, state, rate and the GID index of each address.
.SH CONFIRM, ROLLBACK AND WATCH
.TP
\fBapply \-\-confirm\fR \fISECONDS\fR
The guard (a process of its own) is armed before the first netlink message
and owns the deadline from then: unless \fBconfirm\fR comes first, it
reverts every journal made after it was armed, the finished change or the
part a killed apply made. A \fBconfirm\fR during the change waits for it and
keeps all of it. If the guard dies while the apply runs, the apply reverts
the trial itself; if both are gone, \fBwatch\fR, or the next \fBapply\fR,
\fBremove\fR or \fBrollback\fR, reverts it.
.TP
\fBrollback\fR
Undoes the user's latest apply or remove together with the heals by
\fBwatch\fR built on it; heals never count against the 32 runs kept.
.TP
\fBwatch\fR [\fB\-\-resync\fR \fISECONDS\fR]
Heals from rtnetlink notifications, makes a second pass 3 s after a new
link appears (udev's late sysctls) and a full pass every \fB\-\-resync\fR
seconds (default 300). A rail that is not ready never stops the others.
When another agent undoes its heals over and over, it says so once, names
the agents it finds, and backs off (5 s doubling to 300 s); a failing pass
is retried after 2 s doubling to 60 s, its error said once.
\fB\-q\fR silences the routine lines; with \fB\-\-json\fR every line,
warnings included, is a JSON document.
.SH EXIT STATUS
.TP
\fB0\fR
Success, or already in sync.
.TP
\fB1\fR
Failed; the host was left as it was.
.TP
\fB2\fR
Invalid command line or configuration; nothing touched.
.TP
\fB3\fR
\fBcheck\fR: the live state differs from the configuration.
.TP
\fB4\fR
Failed, and the rollback failed too.
.TP
\fB5\fR
\fBapply\fR: applied what the host is ready for; some rails or addresses
were not ready and were left alone (\fB\-\-strict\fR makes this 1).
.SH FILES
.TP
\fI/run/roce-route/net-COOKIE.boot-ID/\fR
Per network namespace: \fIjournal-NNNNNN.jsonl\fR (undo journals;
\fIjournal-NNNNNN.heal.jsonl\fR for heals by \fBwatch\fR),
\fIrecord.json\fR (original sysctl values, tables, protocols),
\fIpending\fR (an \fBapply \-\-confirm\fR armed, from before its first
step until its outcome).
.TP
\fI/run/roce-route/netns/ns-DEV-INODE/\fR
Per network namespace whatever \fB\-\-state-dir\fR is (0700, root's own):
\fIlock\fR (the namespace lock, a flock), \fIwatch.lock\fR (held by
\fBwatch\fR), \fIconfirm.sock\fR (the confirmation guard's socket).
.TP
\fI/etc/roce-route/\fR
The configuration read by \fIroce-route.service\fR at boot.
.SH ENVIRONMENT
.TP
\fBROCE_ROUTE_STATE_DIR\fR
The state base directory, as \fB\-\-state-dir\fR.
.TP
\fBNOTIFY_SOCKET\fR
Set by systemd for \fBwatch\fR (Type=notify).
.SH SEE ALSO
\fBip\-rule\fR(8), \fBip\-route\fR(8), \fBsysctl\fR(8), \fBsystemd.service\fR(5),
\fBibdev2netdev\fR(8), \fBshow_gids\fR(8)
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_every_command_and_the_extra_sections() {
        let page = String::from_utf8(man_page().unwrap()).unwrap();
        for needle in [
            ".TH roce-route 8",
            "apply",
            "rollback",
            "remove",
            "check",
            "show",
            "confirm",
            "announce",
            "discover",
            "nccl\\-env",
        ] {
            assert!(page.contains(needle), "{needle} missing");
        }
        for section in [".SH CONFIGURATION", ".SH RDMA", ".SH EXIT STATUS", ".SH FILES", ".SH ENVIRONMENT"] {
            assert!(page.contains(section), "{section} missing");
        }
        assert!(!page.contains("confirm-guard"), "the internal command is hidden");
    }
}
