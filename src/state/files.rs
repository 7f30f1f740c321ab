//! Safe file access for the state directory.
//!
//! Root acts on what it finds here, so nothing is trusted that another user
//! could have planted: every directory and file is opened without following
//! symlinks and must be owned by the effective uid and not writable by group
//! or others (`check_safe`).
//!
//! Writes are write-then-rename, never synced: the state directory is keyed
//! by the boot id, so after a power loss it is never read again, and after a
//! SIGKILL (or the OOM killer) the page cache still holds every completed
//! write. What the rename buys is that a reader never sees half a file.

use std::fs::{self, DirBuilder, File, Metadata, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::libc;
use nix::unistd::geteuid;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StateError;

/// What `check_safe` expects to find.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    Dir,
    File,
}

/// The single safety rule: a regular file or directory as expected, owned
/// by the effective uid, not writable by group or others. Symlinks never
/// get this far: everything is opened with O_NOFOLLOW (`open_safe`).
fn check_safe(path: &Path, meta: &Metadata, kind: Kind) -> Result<(), StateError> {
    let euid = euid();
    let mode = meta.mode() & 0o7777;
    let (is_kind, kind_name) = match kind {
        Kind::Dir => (meta.is_dir(), "directory"),
        Kind::File => (meta.is_file(), "regular file"),
    };
    if !is_kind {
        Err(unsafe_path(
            path,
            format!("is not a {kind_name}"),
            "remove it; roce-route creates its state itself",
        ))
    } else if meta.uid() != euid {
        Err(unsafe_path(
            path,
            format!("is owned by uid {}, not uid {euid} which runs roce-route", meta.uid()),
            "remove it, or chown it to the user running roce-route",
        ))
    } else if mode & 0o022 != 0 {
        Err(unsafe_path(
            path,
            format!("is writable by group or others (mode {mode:04o})"),
            "remove it, or chmod go-w it",
        ))
    } else {
        Ok(())
    }
}

/// The effective uid, asked once: a run checks some ten files and
/// directories, and roce-route never changes its uid.
fn euid() -> u32 {
    static EUID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *EUID.get_or_init(|| geteuid().as_raw())
}

/// Opens `path` without following a symlink (new files get mode 0600), and
/// checks what was opened, by its descriptor, with `check_safe`.
pub(super) fn open_safe(path: &Path, options: &mut OpenOptions, kind: Kind) -> Result<File, StateError> {
    let file = options.mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path).map_err(
        |e| match e.raw_os_error() {
            Some(libc::ELOOP) => {
                unsafe_path(path, "is a symlink", "remove it; roce-route never follows symlinks in its state")
            }
            _ => io_error(path, e),
        },
    )?;
    let meta = file.metadata().map_err(|e| io_error(path, e))?;
    check_safe(path, &meta, kind)?;
    Ok(file)
}

/// Replaces `dir/name` with `contents`: a temporary file renamed over it,
/// so that a reader sees the old or the new contents, never a mix.
pub(super) fn atomic_write(dir: &Path, name: &str, contents: &[u8]) -> Result<(), StateError> {
    let tmp = dir.join(format!(".{name}.tmp"));
    remove_if_exists(&tmp)?;
    let mut options = OpenOptions::new();
    let mut file = open_safe(&tmp, options.write(true).create_new(true), Kind::File)?;
    file.write_all(contents).map_err(|e| io_error(&tmp, e))?;
    let path = dir.join(name);
    fs::rename(&tmp, &path).map_err(|e| io_error(&path, e))
}

/// Writes `value` as indented JSON, atomically.
pub(super) fn write_json<T: Serialize>(dir: &Path, name: &str, value: &T) -> Result<(), StateError> {
    let path = dir.join(name);
    let mut text = serde_json::to_vec_pretty(value).map_err(|e| io_error(&path, e.into()))?;
    text.push(b'\n');
    atomic_write(dir, name, &text)
}

/// Reads a JSON file; a missing file is None, unparsable content corrupt.
pub(super) fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StateError> {
    match read_optional(path)? {
        Some(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| corrupt(path, e.to_string())),
        None => Ok(None),
    }
}

/// Creates a 0700 directory if missing, and checks it. Opened first: the
/// directories a run needs are there but on its first run, and a mkdir
/// that finds one was a system call for nothing (five of them a run).
pub(super) fn ensure_dir(path: &Path) -> Result<(), StateError> {
    match open_safe(path, OpenOptions::new().read(true), Kind::Dir) {
        Err(StateError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {
            match DirBuilder::new().mode(0o700).create(path) {
                Err(e) if e.kind() != ErrorKind::AlreadyExists => Err(io_error(path, e)),
                _ => open_safe(path, OpenOptions::new().read(true), Kind::Dir).map(drop),
            }
        }
        opened => opened.map(drop),
    }
}

pub(super) fn remove_if_exists(path: &Path) -> Result<(), StateError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(io_error(path, e)),
        _ => Ok(()),
    }
}

pub(super) fn read_file(path: &Path) -> Result<Vec<u8>, StateError> {
    let mut file = open_safe(path, OpenOptions::new().read(true), Kind::File)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| io_error(path, e))?;
    Ok(bytes)
}

/// `read_file`, with a missing file as None.
pub(super) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StateError> {
    match read_file(path) {
        Err(StateError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => Ok(None),
        read => read.map(Some),
    }
}

pub(super) fn unsafe_path(path: &Path, what: impl Into<String>, hint: &str) -> StateError {
    StateError::Unsafe { path: path.to_path_buf(), what: what.into(), hint: hint.to_string() }
}

pub(super) fn corrupt(path: &Path, what: impl Into<String>) -> StateError {
    StateError::Corrupt { path: path.to_path_buf(), what: what.into() }
}

pub(super) fn io_error(path: &Path, source: io::Error) -> StateError {
    StateError::Io { path: path.to_path_buf(), source }
}

/// Files in `dir` whose name `parse` accepts, sorted by what it returns.
pub(super) fn list<K: Ord>(
    dir: &Path,
    parse: impl Fn(&str) -> Option<K>,
) -> Result<Vec<(K, PathBuf)>, StateError> {
    let entries = fs::read_dir(dir).map_err(|e| io_error(dir, e))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(dir, e))?;
        if let Some(key) = entry.file_name().to_str().and_then(&parse) {
            found.push((key, entry.path()));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}
