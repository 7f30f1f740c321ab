//! One file per command. Each builds its report from the pure core and the
//! two effect modules; `Ctx` carries what every command shares.

pub mod apply;
pub mod check;
pub mod confirm;
pub mod remove;
pub mod rollback;
pub mod show;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use crate::behaviour::{self, Probe, Verdict};
use crate::error::Error;
use crate::executor::StopFlag;
use crate::model::Op;
use crate::netlink::Netlink;
use crate::state::StateDir;

/// `println!` that never panics: a closed stdout (`| head`) must not abort
/// a command after its work is done; the exit code still tells the outcome.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `eprintln!` that never panics (a terminal that went away answers EIO).
#[macro_export]
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// What every command shares: global options and the stop flag that the
/// signal handlers set.
pub struct Ctx {
    pub netns: Option<String>,
    pub state_base: PathBuf,
    pub lock_timeout: Duration,
    pub stop: Arc<StopFlag>,
}

impl Ctx {
    /// The state directory of the current network namespace.
    pub fn state(&self) -> Result<StateDir, Error> {
        Ok(StateDir::open(&self.state_base, &netns_id()?)?)
    }

    /// The state directory if this user may use it and it exists already:
    /// commands that only read (dry run, check) never create it.
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
}

pub async fn connect() -> Result<Netlink, Error> {
    Ok(Netlink::connect().await.context("cannot talk to the kernel over rtnetlink")?)
}

/// Every address configured on this host (to keep probes off them).
pub async fn local_addresses(nl: &Netlink) -> Result<BTreeSet<IpAddr>, Error> {
    let addrs = nl.addresses().await.context("cannot read the interface addresses")?;
    Ok(addrs.iter().map(|a| a.addr.addr).collect())
}

/// Asks the kernel where each probe's traffic goes and judges the answers.
pub async fn ask(nl: &Netlink, probes: &[Probe]) -> Vec<Verdict> {
    let mut verdicts = Vec::with_capacity(probes.len());
    for probe in probes {
        let answer = nl.route_get(probe.from, probe.to).await.map_err(|e| e.to_string());
        verdicts.push(behaviour::judge(probe, answer.as_ref().map_err(Clone::clone)));
    }
    verdicts
}

/// Identifies the current network namespace for the state directory, so
/// that runs in different namespaces keep their journals apart:
/// `net-<netns cookie>.boot-<boot id>`. The cookie (SO_NETNS_COOKIE, Linux
/// 5.14+) is never reused while the system runs, unlike the namespace's
/// inode, which a new namespace may get once an old one is deleted; the
/// boot id keeps a state directory on a persistent /run from applying to
/// the next boot. Older kernels fall back to the inode.
pub fn netns_id() -> Result<String, Error> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .context("cannot read /proc/sys/kernel/random/boot_id")?;
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
    #[cfg(target_arch = "sparc64")]
    const SO_NETNS_COOKIE: libc::c_int = 0x50;
    #[cfg(not(target_arch = "sparc64"))]
    const SO_NETNS_COOKIE: libc::c_int = 71;
    let sock = std::os::unix::net::UnixDatagram::unbound().ok()?;
    let mut cookie: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: a valid socket, and a u64 buffer whose size is passed along.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        )
    };
    (rc == 0 && len as usize == std::mem::size_of::<u64>()).then_some(cookie)
}

/// Prints a JSON document on stdout.
pub fn print_json<T: Serialize>(doc: &T) {
    match serde_json::to_string_pretty(doc) {
        Ok(text) => crate::say!("{text}"),
        Err(e) => tell!("roce-route: error: cannot write the JSON report: {e}"),
    }
}

/// One change in a report: its kind and the equivalent command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    pub kind: &'static str,
    pub command: String,
}

impl Change {
    pub fn of(op: &Op) -> Change {
        Change { kind: op.kind(), command: crate::render::command(op) }
    }
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
