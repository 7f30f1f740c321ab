//! The run directory of a network namespace: `/run/roce-route/netns/<id>/`,
//! root's own (0700), whatever `--state-dir` a run uses. It holds what
//! must be one per network namespace and must not be squatted by another
//! local user:
//!
//! * `lock`: the namespace lock (a flock, `lock`);
//! * `watch.lock`: held by the running `watch` (a flock);
//! * `confirm.sock`: the socket of the confirmation guard (`confirm`).
//!
//! Abstract unix socket names, which these replace, can be bound by any
//! user of the namespace first; a file in a directory only root may write
//! cannot. `<id>` is `ns-<dev>-<ino>` of `/proc/thread-self/ns/net`: the
//! kernel reuses the inode number of a deleted namespace, so the directories of
//! short-lived namespaces (tests, containers) do not pile up, and what a
//! reused directory holds is safe to find again (a flock is gone with its
//! holder; a stale socket refuses connections and is replaced).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::StateError;
use super::files::{ensure_dir, io_error};

/// Fixed, not `--state-dir`: the lock must be one per namespace across
/// state directories, and only a root-owned place keeps users out.
pub const BASE: &str = "/run/roce-route";

/// `ns-<dev>-<ino>` of the calling thread's network namespace
/// (/proc/thread-self: /proc/self is the main thread's, which a thread
/// that entered another one is not in). Asked of the kernel once a thread
/// (a run needs it for the lock, then for the confirmation socket), until
/// `forget_netns_key`, which `netns::enter` calls.
pub fn netns_key() -> Result<String, StateError> {
    KEY.with(|key| {
        let mut key = key.borrow_mut();
        if let Some(key) = key.as_ref() {
            return Ok(key.clone());
        }
        let path = Path::new("/proc/thread-self/ns/net");
        let meta = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
        Ok(key.insert(format!("ns-{}-{}", meta.dev(), meta.ino())).clone())
    })
}

thread_local! {
    static KEY: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Forgets the key `netns_key` gave this thread: it is in another
/// namespace now.
pub fn forget_netns_key() {
    KEY.with(|key| key.borrow_mut().take());
}

/// The run directory of the current network namespace, without creating
/// or checking it (for clients that only look: a missing or unreadable
/// directory means nothing runs there that they may talk to).
pub fn path() -> Result<PathBuf, StateError> {
    path_in(Path::new(BASE))
}

/// Creates the run directory of the current network namespace (and its
/// parents under `BASE`) 0700 if missing, and refuses any of them that is
/// a symlink, owned by another user, or writable by group or others.
pub fn ensure() -> Result<PathBuf, StateError> {
    ensure_in(Path::new(BASE))
}

pub(super) fn path_in(base: &Path) -> Result<PathBuf, StateError> {
    Ok(base.join("netns").join(netns_key()?))
}

pub(super) fn ensure_in(base: &Path) -> Result<PathBuf, StateError> {
    // Rebuilt from its components to drop a trailing '/', which would
    // make the kernel follow a symlink despite O_NOFOLLOW.
    let base: PathBuf = base.components().collect();
    ensure_dir(&base)?;
    ensure_dir(&base.join("netns"))?;
    let dir = path_in(&base)?;
    ensure_dir(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("roce-route-rundir-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn it_is_made_0700_and_keyed_by_the_namespace() {
        let base = temp("made");
        let dir = ensure_in(&base).unwrap();
        let meta = std::fs::metadata("/proc/self/ns/net").unwrap();
        assert_eq!(dir, base.join("netns").join(format!("ns-{}-{}", meta.dev(), meta.ino())));
        for d in [base.join("netns"), dir.clone()] {
            assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o7777, 0o700, "{}", d.display());
        }
        assert_eq!(ensure_in(&base).unwrap(), dir, "a second call finds it");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_symlink_or_a_writable_directory_is_refused() {
        let base = temp("unsafe");
        let elsewhere = temp("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, base.join("netns")).unwrap();
        assert!(matches!(ensure_in(&base), Err(StateError::Unsafe { .. })), "a symlinked netns/");
        std::fs::remove_file(base.join("netns")).unwrap();
        std::fs::create_dir(base.join("netns")).unwrap();
        std::fs::set_permissions(base.join("netns"), std::fs::Permissions::from_mode(0o777)).unwrap();
        match ensure_in(&base) {
            Err(StateError::Unsafe { what, .. }) => assert!(what.contains("writable"), "{what}"),
            other => panic!("a world-writable netns/ was accepted: {other:?}"),
        }
        assert!(std::fs::read_dir(elsewhere.as_path()).unwrap().next().is_none(), "followed the symlink");
        std::fs::remove_dir_all(&base).unwrap();
        std::fs::remove_dir_all(&elsewhere).unwrap();
    }
}
