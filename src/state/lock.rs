//! The per-network-namespace lock: a listening unix socket bound to an
//! abstract address. Abstract addresses belong to the network namespace,
//! so the lock holds per namespace whatever `--state-dir` each run uses,
//! and the kernel releases it when its holder exits, however it exits
//! (even SIGKILL or the OOM killer): there is no stale lock file.

use std::io;
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

use nix::libc;

use super::StateError;
use crate::signals::StopFlag;

const POLL: Duration = Duration::from_millis(20);

/// Held while it lives; dropping it (or exiting) releases the name.
#[derive(Debug)]
pub struct NetnsLock {
    _listener: UnixListener,
}

/// Who holds an abstract name: from SO_PEERCRED of a connection to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: i32,
    pub uid: u32,
    /// Its command line, when /proc shows it.
    pub command: Option<String>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {}", self.pid)?;
        if let Some(c) = &self.command {
            write!(f, ", `{c}`")?;
        }
        Ok(())
    }
}

/// An abstract unix socket address of this network namespace.
pub fn abstract_addr(name: &str) -> io::Result<SocketAddr> {
    SocketAddr::from_abstract_name(name.as_bytes())
}

impl NetnsLock {
    pub const NAME: &'static str = "roce-route/lock";

    /// Takes the lock of the current network namespace, waiting up to
    /// `timeout` for another run; a stop request ends the wait at once.
    pub fn acquire(timeout: Duration, stop: &StopFlag) -> Result<NetnsLock, StateError> {
        Self::acquire_named(Self::NAME, timeout, stop)
    }

    pub fn acquire_named(name: &str, timeout: Duration, stop: &StopFlag) -> Result<NetnsLock, StateError> {
        let addr = abstract_addr(name).map_err(|e| lock_io(name, e))?;
        let start = Instant::now();
        loop {
            match UnixListener::bind_addr(&addr) {
                Ok(listener) => return Ok(NetnsLock { _listener: listener }),
                Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) => {}
                Err(e) => return Err(lock_io(name, e)),
            }
            let holder = holder_of(&addr);
            if let Some(h) = &holder
                && h.uid != nix::unistd::geteuid().as_raw()
            {
                return Err(StateError::LockSquatted { name: name.to_string(), holder: h.clone() });
            }
            if let Some(signal) = stop.requested() {
                return Err(StateError::LockInterrupted { signal });
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(StateError::Locked { waited, holder });
            }
            std::thread::sleep(POLL.min(timeout - waited));
        }
    }

    /// Who holds the lock now, if anyone (for `check` and `show`).
    pub fn holder() -> Option<Holder> {
        holder_of(&abstract_addr(Self::NAME).ok()?)
    }
}

/// The process listening on `addr`, if one is.
pub fn holder_of(addr: &SocketAddr) -> Option<Holder> {
    let stream = UnixStream::connect_addr(addr).ok()?;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket, and a ucred buffer whose size is passed along.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let command = std::fs::read(format!("/proc/{}/cmdline", cred.pid)).ok().map(|raw| {
        raw.split(|b| *b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    });
    Some(Holder { pid: cred.pid, uid: cred.uid, command: command.filter(|c| !c.is_empty()) })
}

fn lock_io(name: &str, source: io::Error) -> StateError {
    StateError::Io { path: format!("@{name} (abstract unix socket)").into(), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unique(name: &str) -> String {
        format!("roce-route-test/{}/{name}", std::process::id())
    }

    #[test]
    fn a_second_holder_waits_then_times_out_naming_the_first() {
        let name = unique("lock");
        let stop = StopFlag::default();
        let first = NetnsLock::acquire_named(&name, Duration::ZERO, &stop).unwrap();
        match NetnsLock::acquire_named(&name, Duration::from_millis(60), &stop) {
            Err(StateError::Locked { waited, holder }) => {
                assert!(waited >= Duration::from_millis(60));
                assert_eq!(holder.map(|h| h.pid), Some(std::process::id() as i32));
            }
            other => panic!("expected Locked, got {other:?}"),
        }
        drop(first);
        NetnsLock::acquire_named(&name, Duration::ZERO, &stop).unwrap();
    }

    #[test]
    fn a_stop_request_ends_the_wait_at_once() {
        let name = unique("stop");
        let stop = StopFlag::default();
        let _first = NetnsLock::acquire_named(&name, Duration::ZERO, &stop).unwrap();
        let waiting = stop.clone();
        let started = Instant::now();
        let t =
            std::thread::spawn(move || NetnsLock::acquire_named(&name, Duration::from_secs(30), &waiting));
        std::thread::sleep(Duration::from_millis(100));
        stop.request(2);
        let result = t.join().unwrap();
        assert!(matches!(result, Err(StateError::LockInterrupted { signal: 2 })), "{result:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "waited {:?}", started.elapsed());
    }
}
