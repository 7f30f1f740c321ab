//! The per-network-namespace lock: `flock(LOCK_EX)` on `lock` in the run
//! directory of the namespace (`rundir`), which is root's own, so no other
//! user can take it first or plant the file. The run directory does not
//! depend on `--state-dir`, so the lock holds per namespace whatever state
//! directory each run uses, and the kernel drops a flock when its holder
//! exits, however it exits (even SIGKILL or the OOM killer): a lock file
//! left behind is never a held lock.
//!
//! A waiter tries again every 20 ms without blocking in the kernel, so
//! `--lock-timeout` holds and a stop request ends the wait at once; it
//! names the holder from `/proc/locks`, never by talking to it.

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::StateError;
use super::files::{Kind, io_error, open_safe};
use super::rundir;
use crate::signals::StopFlag;

const POLL: Duration = Duration::from_millis(20);

/// The lock file's name in the run directory.
pub const LOCK_FILE: &str = "lock";

/// Held while it lives; dropping it (or exiting) releases the flock.
/// Taking and releasing it each end the sysctls' epoch
/// (`sysctl::new_epoch`): a value read with the links before the one or
/// after the other may be older than another run's change; and each ends
/// a hold (`holding`), which the record read under it lasts for.
#[derive(Debug)]
pub struct NetnsLock {
    /// Some while held; taken out by `drop` to release it first.
    flock: Option<Flock<File>>,
}

impl Drop for NetnsLock {
    fn drop(&mut self) {
        // The hold ends before the lock is let go: nothing kept under it
        // is used once another run may change what it was read from.
        HOLDS.fetch_add(1, Ordering::SeqCst);
        // Released, then the epoch ended: a read begun before the end
        // cannot be taken for one made under the lock.
        drop(self.flock.take());
        crate::sysctl::new_epoch();
    }
}

/// Ends with every take and every release of a `NetnsLock` in this
/// process (`holding`).
static HOLDS: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// `HOLDS` as this thread's last take of a lock left it (0: none).
    static TAKEN_AT: Cell<u64> = const { Cell::new(0) };
}

/// Some while this thread holds a `NetnsLock` and no lock has been taken
/// or released since: a number that names this hold, for what is read
/// under it and stays true until it ends (`StateDir::record`). None
/// otherwise, also when the lock was given to another thread and
/// released there.
pub fn holding() -> Option<u64> {
    let taken = TAKEN_AT.get();
    (taken != 0 && taken == HOLDS.load(Ordering::SeqCst)).then_some(taken)
}

/// Who holds a flock: its pid from /proc/locks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: i32,
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

impl NetnsLock {
    /// Takes the lock of the current network namespace, waiting up to
    /// `timeout` for another run; a stop request ends the wait at once.
    pub fn acquire(timeout: Duration, stop: &StopFlag) -> Result<NetnsLock, StateError> {
        Self::acquire_at(&rundir::ensure()?.join(LOCK_FILE), timeout, stop)
    }

    /// `acquire` on the lock file `path`.
    pub fn acquire_at(path: &Path, timeout: Duration, stop: &StopFlag) -> Result<NetnsLock, StateError> {
        let start = Instant::now();
        let mut file = open_lock_file(path)?;
        loop {
            file = match try_flock(path, file)? {
                Ok(flock) => return Ok(NetnsLock::held(flock)),
                Err(file) => file,
            };
            if let Some(signal) = stop.requested() {
                return Err(StateError::LockInterrupted { signal });
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(StateError::Locked { waited, holder: holder_of(path) });
            }
            std::thread::sleep(POLL.min(timeout - waited));
        }
    }

    fn held(flock: Flock<File>) -> NetnsLock {
        crate::sysctl::new_epoch();
        TAKEN_AT.set(HOLDS.fetch_add(1, Ordering::SeqCst) + 1);
        NetnsLock { flock: Some(flock) }
    }

    /// The lock of the current network namespace if no other run holds it
    /// now, without waiting; None when one does (or it cannot be taken:
    /// `acquire` says why).
    pub fn try_now() -> Option<NetnsLock> {
        let flock = try_hold(&rundir::ensure().ok()?.join(LOCK_FILE)).ok()?;
        Some(NetnsLock::held(flock))
    }

    /// Who holds the lock now, if anyone and if this user may see it (for
    /// `check` and `show`; None without access to the run directory).
    pub fn holder() -> Option<Holder> {
        holder_of(&rundir::path().ok()?.join(LOCK_FILE))
    }
}

/// Takes the flock of `path` without waiting: a held one is
/// `Err(StateError::Locked)` naming the holder (for `watch.lock`, which is
/// never waited for).
pub fn try_hold(path: &Path) -> Result<Flock<File>, StateError> {
    match try_flock(path, open_lock_file(path)?)? {
        Ok(flock) => Ok(flock),
        Err(_) => Err(StateError::Locked { waited: Duration::ZERO, holder: holder_of(path) }),
    }
}

/// The lock file, created 0600 if missing, opened without following a
/// symlink and refused unless it is a regular file of this user that
/// group and others cannot write.
fn open_lock_file(path: &Path) -> Result<File, StateError> {
    open_safe(path, OpenOptions::new().read(true).write(true).create(true), Kind::File)
}

/// One non-blocking attempt: the flock, or the file back when another
/// open file holds it.
fn try_flock(path: &Path, file: File) -> Result<Result<Flock<File>, File>, StateError> {
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(flock) => Ok(Ok(flock)),
        Err((file, Errno::EWOULDBLOCK)) => Ok(Err(file)),
        Err((_, e)) => Err(io_error(path, e.into())),
    }
}

/// The process holding a flock on `path`, from /proc/locks: the FLOCK line
/// of the file's device and inode (a lock held from another pid namespace
/// is not shown there: None).
pub fn holder_of(path: &Path) -> Option<Holder> {
    let meta = std::fs::metadata(path).ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = flock_holder(&locks, meta.dev(), meta.ino())?;
    let command = std::fs::read(format!("/proc/{pid}/cmdline")).ok().map(|raw| {
        raw.split(|b| *b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    });
    Some(Holder { pid, command: command.filter(|c| !c.is_empty()) })
}

/// The pid of the FLOCK line for device `dev`, inode `ino` in the text of
/// /proc/locks ("1: FLOCK  ADVISORY  WRITE 4242 00:1a:1234 0 EOF"; the
/// device is `major:minor` in hex). Blocked waiters ("1: -> FLOCK ...")
/// hold nothing and are skipped. Pure.
pub fn flock_holder(locks: &str, dev: u64, ino: u64) -> Option<i32> {
    let want = format!("{:02x}:{:02x}:{ino}", nix::libc::major(dev), nix::libc::minor(dev));
    locks.lines().find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [_, "FLOCK", _, _, pid, id, ..] if *id == want => pid.parse().ok(),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    /// A lock file in a fresh private directory of this test.
    fn lock_in(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("roce-route-lock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        dir.join(LOCK_FILE)
    }

    #[test]
    fn a_second_holder_waits_then_times_out_naming_the_first() {
        let path = lock_in("lock");
        let stop = StopFlag::default();
        let first = NetnsLock::acquire_at(&path, Duration::ZERO, &stop).unwrap();
        let started = Instant::now();
        match NetnsLock::acquire_at(&path, Duration::from_millis(60), &stop) {
            Err(StateError::Locked { waited, holder }) => {
                assert!(waited >= Duration::from_millis(60));
                assert!(started.elapsed() < Duration::from_secs(5), "waited {:?}", started.elapsed());
                let holder = holder.expect("the holder from /proc/locks");
                assert_eq!(holder.pid, std::process::id() as i32);
                assert!(holder.command.is_some_and(|c| !c.is_empty()));
            }
            other => panic!("expected Locked, got {other:?}"),
        }
        assert!(matches!(try_hold(&path), Err(StateError::Locked { .. })));
        drop(first);
        assert_eq!(holder_of(&path), None, "nobody holds it once dropped");
        NetnsLock::acquire_at(&path, Duration::ZERO, &stop).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o600);
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_stop_request_ends_the_wait_at_once() {
        let path = lock_in("stop");
        let stop = StopFlag::default();
        let _first = NetnsLock::acquire_at(&path, Duration::ZERO, &stop).unwrap();
        let waiting = stop.clone();
        let started = Instant::now();
        let at = path.clone();
        let t = std::thread::spawn(move || NetnsLock::acquire_at(&at, Duration::from_secs(30), &waiting));
        std::thread::sleep(Duration::from_millis(100));
        stop.request(2);
        let result = t.join().unwrap();
        assert!(matches!(result, Err(StateError::LockInterrupted { signal: 2 })), "{result:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "waited {:?}", started.elapsed());
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_symlinked_lock_file_is_refused_and_not_followed() {
        let path = lock_in("symlink");
        let target = path.with_file_name("target");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let stop = StopFlag::default();
        let result = NetnsLock::acquire_at(&path, Duration::ZERO, &stop);
        assert!(matches!(result, Err(StateError::Unsafe { .. })), "{result:?}");
        assert!(!target.exists(), "the symlink was followed");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn proc_locks_lines_name_the_flock_holder_of_the_inode() {
        let dev = nix::libc::makedev(0, 0x1a);
        let locks = "1: POSIX  ADVISORY  WRITE 11 00:1a:77 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 4242 00:1a:77 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 5151 00:1a:77 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 99 00:1b:77 0 EOF\n";
        assert_eq!(flock_holder(locks, dev, 77), Some(4242));
        assert_eq!(flock_holder(locks, dev, 78), None);
        assert_eq!(flock_holder(locks, nix::libc::makedev(0, 0x1b), 77), Some(99));
        assert_eq!(flock_holder("", dev, 77), None);
    }
}
