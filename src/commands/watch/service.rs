//! The process around the loop: one watch per network namespace, and
//! systemd told when the first pass is done.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

use crate::error::Error;
use crate::state::{StateError, lock, rundir};

/// The file a running watch holds a flock on, in the run directory of its
/// network namespace (root's own: no other user can take it first).
pub const WATCH_LOCK: &str = "watch.lock";

/// Holds the flock of `watch.lock` for the process's lifetime: a second
/// watch in the same namespace is refused, naming the first.
pub(super) fn hold_watch_lock() -> Result<impl Drop, Error> {
    let path = rundir::ensure()?.join(WATCH_LOCK);
    match lock::try_hold(&path) {
        Ok(held) => Ok(held),
        Err(StateError::Locked { holder, .. }) => {
            let who = holder.map_or_else(|| "another process".to_string(), |h| h.to_string());
            Err(Error::Busy(format!(
                "another `roce-route watch` ({who}) already keeps this network namespace applied ({} is \
                 held); only one may run per namespace: stop that one first",
                path.display()
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// `READY=1` to systemd when NOTIFY_SOCKET is set (Type=notify).
///
/// Not the `sd-notify` crate (0.5): it connects to NOTIFY_SOCKET as a
/// path only, so an abstract socket (`@name`, as sd_notify(3) allows and
/// as this does) would get nothing; and it sends "READY=1\n".
pub(super) fn notify_ready() {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let Ok(sock) = UnixDatagram::unbound() else { return };
    let path = path.to_string_lossy().into_owned();
    let addr = match path.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes()),
        None => SocketAddr::from_pathname(&path),
    };
    if let Ok(addr) = addr {
        let _ = sock.send_to_addr(b"READY=1", &addr);
    }
}
