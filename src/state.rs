//! The state directory: what roce-route must remember between runs.
//!
//! Per network namespace (one subdirectory of the base each) it holds:
//!
//! * a stack of undo journals, `journal-<seq>.jsonl`, one per apply/remove
//!   that changed something. Each is a header line, then one line per step
//!   (the inverse of the operation about to be sent, written ahead of it),
//!   then a commit line once the transaction is complete;
//! * `sysctl-origins.json`: sysctl values as they were before roce-route
//!   first changed them;
//! * `lock`, held with flock(2) by the run that owns the namespace;
//! * `pending` and `confirmed`, the hand-shake of `apply --confirm`.
//!
//! The default base lives on tmpfs: the routing state it describes does not
//! survive a reboot either. Root acts on what it finds here, so nothing is
//! trusted that another user could have planted: every directory and file is
//! opened without following symlinks and must be owned by the effective uid
//! and not writable by group or others (`check_safe`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, DirBuilder, File, Metadata, OpenOptions};
use std::io::{self, BufRead, ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::libc;
use nix::unistd::geteuid;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::model::{Op, SysctlKey};

pub const DEFAULT_BASE: &str = "/run/roce-route";
pub const JOURNAL_VERSION: u32 = 1;
/// How many journals (runs that can be rolled back, newest first) are kept.
pub const MAX_JOURNALS: usize = 32;

const LOCK_FILE: &str = "lock";
const ORIGINS_FILE: &str = "sysctl-origins.json";
const TABLES_FILE: &str = "tables.json";
const PENDING_FILE: &str = "pending";
const CONFIRMED_FILE: &str = "confirmed";
const JOURNAL_PREFIX: &str = "journal-";
const JOURNAL_SUFFIX: &str = ".jsonl";
const LOCK_POLL: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A symlink, a foreign owner, group/other write permission, or the
    /// wrong file type.
    #[error("{path}: {what}; {hint}")]
    Unsafe { path: PathBuf, what: String, hint: String },
    /// Unparsable content or an incompatible journal version.
    #[error("{path}: {what}")]
    Corrupt { path: PathBuf, what: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("another roce-route holds the lock {path} (waited {waited:?}); try again when it has finished")]
    Locked { path: PathBuf, waited: Duration },
}

/// First line of a journal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalHeader {
    pub version: u32,
    /// "apply" or "remove".
    pub kind: String,
    pub started_unix: u64,
    pub config: Option<String>,
    pub protocol: u8,
    pub pid: u32,
    /// Sysctl values this run records first (iface, key, value before any
    /// change by roce-route). Durable with the journal, so the separate
    /// origins file needs no sync of its own: `sysctl_origins` merges these.
    #[serde(default)]
    pub sysctl_origins: Vec<(String, SysctlKey, u32)>,
    /// Recorded values this run wrote back (a sysctl returned to its
    /// original value): no longer roce-route's once the run is made, and
    /// recorded again if the run is rolled back.
    #[serde(default)]
    pub released_origins: Vec<(String, SysctlKey, u32)>,
    /// Tables whose routes this run changes (read again by the next run,
    /// in case this one was killed half-way).
    #[serde(default)]
    pub tables: Vec<u32>,
    /// How many step lines follow (journals written with the whole plan);
    /// fewer, or a damaged one, is corruption rather than a torn append.
    #[serde(default)]
    pub steps: Option<usize>,
}

impl JournalHeader {
    /// A header for a journal this process starts now.
    pub fn new(kind: &str, config: Option<String>, protocol: u8) -> JournalHeader {
        JournalHeader {
            version: JOURNAL_VERSION,
            kind: kind.to_string(),
            started_unix: unix_now(),
            config,
            protocol,
            pid: std::process::id(),
            sysctl_origins: Vec::new(),
            released_origins: Vec::new(),
            tables: Vec::new(),
            steps: None,
        }
    }
}

/// An `apply --confirm` waiting for `roce-route confirm`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    pub pid: u32,
    pub deadline_unix: u64,
}

/// A journal as read back.
#[derive(Clone, Debug, PartialEq)]
pub struct Journal {
    pub path: PathBuf,
    pub header: JournalHeader,
    /// (step index, inverse op) in execution order; undo runs it reversed.
    pub undo: Vec<(usize, Op)>,
    pub committed: bool,
}

/// A journal line after the header: `{"step": i, "undo": <op>}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepLine {
    step: usize,
    undo: Op,
}

/// The last line of a complete journal: `{"committed": true}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitLine {
    committed: bool,
}

// Parsed one line at a time and consumed at once: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Deserialize)]
#[serde(untagged)]
enum BodyLine {
    Step(StepLine),
    Commit(CommitLine),
}

/// Just the version of a header, read before the rest so that a header of
/// another version is reported as such rather than as unparsable.
#[derive(Deserialize)]
struct VersionProbe {
    version: u32,
}

/// The state of one network namespace.
#[derive(Debug)]
pub struct StateDir {
    dir: PathBuf,
}

/// Holds the exclusive flock on `<dir>/lock`; dropping it unlocks.
#[derive(Debug)]
pub struct LockGuard {
    _file: Flock<File>,
}

/// Appends to the newest journal.
#[derive(Debug)]
pub struct JournalWriter {
    file: File,
    path: PathBuf,
}

impl StateDir {
    /// Creates `base` and `base/ns_id` (0700) if missing, and refuses either
    /// if it is not a safe directory.
    pub fn open(base: &Path, ns_id: &str) -> Result<StateDir, StateError> {
        check_ns_id(base, ns_id)?;
        // Rebuilt from its components to drop a trailing '/', which would
        // make the kernel follow a symlink despite O_NOFOLLOW.
        let base: PathBuf = base.components().collect();
        ensure_dir(&base)?;
        let dir = base.join(ns_id);
        ensure_dir(&dir)?;
        Ok(StateDir { dir })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Takes the exclusive lock, polling every 20ms until `timeout`.
    pub fn lock(&self, timeout: Duration) -> Result<LockGuard, StateError> {
        let path = self.file(LOCK_FILE);
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true);
        let mut file = open_safe(&path, &mut options, Kind::File)?;
        let start = Instant::now();
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(held) => return Ok(LockGuard { _file: held }),
                Err((unlocked, Errno::EWOULDBLOCK | Errno::EINTR)) => file = unlocked,
                Err((_, errno)) => return Err(io_error(&path, errno.into())),
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(StateError::Locked { path, waited });
            }
            thread::sleep(LOCK_POLL.min(timeout - waited));
        }
    }

    /// Starts a new journal on top of the stack. The header is written
    /// atomically, so a journal file always has one.
    pub fn begin_journal(&self, header: JournalHeader) -> Result<JournalWriter, StateError> {
        let (name, path) = self.next_journal()?;
        atomic_write(&self.dir, &name, &json_line(&path, &header)?, Durable::Yes)?;
        let file = open_safe(&path, OpenOptions::new().append(true), Kind::File)?;
        Ok(JournalWriter { file, path })
    }

    /// Starts a journal that already holds the undo of every step of a
    /// plan: header and steps in one atomic write (one file sync, one
    /// directory sync) before the first step is sent. Replaying an undo
    /// whose step was never made is harmless (it deletes what is absent,
    /// re-adds what is present, or writes a value already there), so the
    /// whole plan can be made durable up front.
    pub fn begin_journal_with_undo(
        &self,
        mut header: JournalHeader,
        undo: &[Op],
    ) -> Result<JournalWriter, StateError> {
        header.steps = Some(undo.len());
        let (name, path) = self.next_journal()?;
        let mut bytes = json_line(&path, &header)?;
        for (step, op) in undo.iter().enumerate() {
            bytes.extend(json_line(&path, &StepLine { step, undo: op.clone() })?);
        }
        atomic_write(&self.dir, &name, &bytes, Durable::Yes)?;
        let opened = self
            .prune_journals()
            .and_then(|()| open_safe(&path, OpenOptions::new().append(true), Kind::File));
        match opened {
            Ok(file) => Ok(JournalWriter { file, path }),
            Err(e) => {
                // No step was sent: a journal left here would be "undone"
                // by the next rollback as if its run had happened.
                let _ = remove_if_exists(&path);
                Err(e)
            }
        }
    }

    /// Keeps the newest MAX_JOURNALS journals: rollback can undo that many
    /// runs back, and the state directory stays small on a host that
    /// re-applies on a timer. The dropped journals' recorded sysctl values
    /// are in the origins file already (`settle_sysctl_origins`).
    fn prune_journals(&self) -> Result<(), StateError> {
        let files = self.journal_files()?;
        let excess = files.len().saturating_sub(MAX_JOURNALS);
        for (_, path) in &files[..excess] {
            remove_if_exists(path)?;
        }
        Ok(())
    }

    fn next_journal(&self) -> Result<(String, PathBuf), StateError> {
        let seq = self.journal_files()?.last().map_or(1, |(seq, _)| seq + 1);
        let name = format!("{JOURNAL_PREFIX}{seq:06}{JOURNAL_SUFFIX}");
        let path = self.file(&name);
        Ok((name, path))
    }

    /// The newest journal, if any.
    pub fn latest_journal(&self) -> Result<Option<Journal>, StateError> {
        match self.journal_files()?.pop() {
            Some((_, path)) => read_journal(&path).map(Some),
            None => Ok(None),
        }
    }

    /// All journals, oldest first.
    pub fn journals(&self) -> Result<Vec<Journal>, StateError> {
        self.journal_files()?.iter().map(|(_, path)| read_journal(path)).collect()
    }

    /// Deletes a journal once it has been rolled back.
    pub fn discard(&self, j: &Journal) -> Result<(), StateError> {
        self.remove_files([j.path.clone()])
    }

    /// Deletes every journal.
    pub fn clear_journals(&self) -> Result<(), StateError> {
        let paths = self.journal_files()?.into_iter().map(|(_, path)| path);
        self.remove_files(paths)
    }

    /// Deletes every journal but the newest (after `remove`: its own, so
    /// that `rollback` can undo the remove).
    pub fn clear_older_journals(&self) -> Result<(), StateError> {
        let mut files = self.journal_files()?;
        files.pop();
        self.remove_files(files.into_iter().map(|(_, path)| path))
    }

    /// Sysctl values before roce-route first changed them.
    ///
    /// The values recorded by the newest journal's header are merged in: a
    /// run writes its first-seen values durably there, and into the origins
    /// file only after it commits (without a sync), so a crash in between
    /// loses nothing. Older journals need no reading: `settle_sysctl_origins`
    /// copies the newest header's values into the file (durably, when any
    /// are missing) before a run starts a new journal.
    pub fn sysctl_origins(&self) -> Result<BTreeMap<(String, SysctlKey), u32>, StateError> {
        let mut origins = self.stored_origins()?;
        if let Some(header) = self.latest_header()? {
            for (iface, key, value) in header.sysctl_origins {
                origins.entry((iface, key)).or_insert(value);
            }
        }
        Ok(origins)
    }

    /// Makes the origins file hold every recorded value (see
    /// `sysctl_origins`), durably if it lacked any; returns them.
    pub fn settle_sysctl_origins(&self) -> Result<BTreeMap<(String, SysctlKey), u32>, StateError> {
        let all = self.sysctl_origins()?;
        if self.stored_origins()? != all {
            self.write_origins(&all, Durable::Yes)?;
        }
        Ok(all)
    }

    /// The tables the newest journal's run changed.
    /// The tables roce-route has put routes in since the last `remove`:
    /// the tables file, and the newest journal's tables (durable with it;
    /// the file is written after a run, without a sync).
    pub fn recorded_tables(&self) -> Result<BTreeSet<u32>, StateError> {
        let mut tables: BTreeSet<u32> = self.read_json(TABLES_FILE)?.unwrap_or_default();
        if let Some(header) = self.latest_header()? {
            tables.extend(header.tables);
        }
        Ok(tables)
    }

    /// Adds tables to the tables file (no sync: see `recorded_tables`).
    pub fn record_tables(&self, tables: &[u32]) -> Result<(), StateError> {
        let mut known: BTreeSet<u32> = self.read_json(TABLES_FILE)?.unwrap_or_default();
        let before = known.len();
        known.extend(tables);
        if known.len() == before {
            return Ok(());
        }
        let path = self.file(TABLES_FILE);
        let mut text = serde_json::to_vec(&known).map_err(|e| io_error(&path, e.into()))?;
        text.push(b'\n');
        atomic_write(&self.dir, TABLES_FILE, &text, Durable::No)
    }

    /// The newest journal's header: its first line only.
    fn latest_header(&self) -> Result<Option<JournalHeader>, StateError> {
        let Some((_, path)) = self.journal_files()?.pop() else { return Ok(None) };
        let file = open_safe(&path, OpenOptions::new().read(true), Kind::File)?;
        let mut line = Vec::new();
        std::io::BufReader::new(file).read_until(b'\n', &mut line).map_err(|e| io_error(&path, e))?;
        parse_header(&path, line.strip_suffix(b"\n").unwrap_or(&line)).map(Some)
    }

    /// The origins file alone (written without a sync: the journals that
    /// recorded its entries are durable).
    fn stored_origins(&self) -> Result<BTreeMap<(String, SysctlKey), u32>, StateError> {
        let path = self.file(ORIGINS_FILE);
        let stored: BTreeMap<String, u32> = self.read_json(ORIGINS_FILE)?.unwrap_or_default();
        stored.into_iter().map(|(name, value)| Ok((parse_origin_key(&path, &name)?, value))).collect()
    }

    /// Copies values into the origins file, keeping the value already
    /// there (the first seen is the one to restore). The caller picks the
    /// entries no earlier run recorded (`sysctl_origins`); the file is the
    /// copy that outlives the journals (`remove` works without them).
    /// Returns the keys it added.
    pub fn record_sysctl_origins(
        &self,
        entries: &[(String, SysctlKey, u32)],
    ) -> Result<Vec<(String, SysctlKey)>, StateError> {
        let mut stored = self.stored_origins()?;
        let mut added = Vec::new();
        for (iface, key, value) in entries {
            let k = (iface.clone(), *key);
            if !stored.contains_key(&k) {
                stored.insert(k.clone(), *value);
                added.push(k);
            }
        }
        if !added.is_empty() {
            self.write_origins(&stored, Durable::No)?;
        }
        Ok(added)
    }

    /// Forgets recorded values: roce-route's changes to those sysctls were
    /// all undone, so their next "first change" records anew.
    pub fn forget_sysctl_origins(&self, keys: &[(String, SysctlKey)]) -> Result<(), StateError> {
        let mut origins = self.stored_origins()?;
        let before = origins.len();
        for k in keys {
            origins.remove(k);
        }
        if origins.len() != before {
            self.write_origins(&origins, Durable::No)?;
        }
        Ok(())
    }

    fn write_origins(
        &self,
        origins: &BTreeMap<(String, SysctlKey), u32>,
        durable: Durable,
    ) -> Result<(), StateError> {
        let stored: BTreeMap<String, u32> =
            origins.iter().map(|((iface, key), value)| (format!("{iface}/{}", key.name()), *value)).collect();
        let path = self.file(ORIGINS_FILE);
        let mut text = serde_json::to_vec_pretty(&stored).map_err(|e| io_error(&path, e.into()))?;
        text.push(b'\n');
        atomic_write(&self.dir, ORIGINS_FILE, &text, durable)
    }

    /// Forgets the recorded sysctl values and tables (after `remove`).
    pub fn clear_sysctl_origins(&self) -> Result<(), StateError> {
        self.remove_files([self.file(ORIGINS_FILE), self.file(TABLES_FILE)])
    }

    /// Announces a waiting `apply --confirm`, dropping any confirmation
    /// left over from an earlier one.
    pub fn set_pending(&self, pending: &Pending) -> Result<(), StateError> {
        self.remove_files([self.file(CONFIRMED_FILE)])?;
        self.write_json(PENDING_FILE, pending)
    }

    pub fn pending(&self) -> Result<Option<Pending>, StateError> {
        self.read_json(PENDING_FILE)
    }

    /// Confirms the pending apply, if there is one. The marker names the
    /// pending apply it confirms, so it cannot confirm a later one.
    pub fn confirm(&self) -> Result<bool, StateError> {
        let Some(pending) = self.pending()? else {
            return Ok(false);
        };
        self.write_json(CONFIRMED_FILE, &pending)?;
        Ok(true)
    }

    /// Whether the current pending apply has been confirmed.
    pub fn is_confirmed(&self) -> Result<bool, StateError> {
        let confirmed: Option<Pending> = self.read_json(CONFIRMED_FILE)?;
        Ok(confirmed.is_some() && confirmed == self.pending()?)
    }

    pub fn clear_pending(&self) -> Result<(), StateError> {
        self.remove_files([self.file(PENDING_FILE), self.file(CONFIRMED_FILE)])
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Journal files by sequence number, oldest first.
    fn journal_files(&self) -> Result<Vec<(u64, PathBuf)>, StateError> {
        let entries = fs::read_dir(&self.dir).map_err(|e| io_error(&self.dir, e))?;
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&self.dir, e))?;
            if let Some(seq) = entry.file_name().to_str().and_then(journal_seq) {
                found.push((seq, entry.path()));
            }
        }
        found.sort();
        Ok(found)
    }

    fn read_json<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, StateError> {
        let path = self.file(name);
        match read_optional(&path)? {
            Some(bytes) => {
                serde_json::from_slice(&bytes).map(Some).map_err(|e| corrupt(&path, e.to_string()))
            }
            None => Ok(None),
        }
    }

    /// Writes `value` as indented JSON, atomically.
    fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<(), StateError> {
        let path = self.file(name);
        let mut text = serde_json::to_vec_pretty(value).map_err(|e| io_error(&path, e.into()))?;
        text.push(b'\n');
        atomic_write(&self.dir, name, &text, Durable::Yes)
    }

    /// Removes the files that exist, then makes the removals durable.
    fn remove_files(&self, paths: impl IntoIterator<Item = PathBuf>) -> Result<(), StateError> {
        for path in paths {
            remove_if_exists(&path)?;
        }
        sync_dir(&self.dir)
    }
}

impl JournalWriter {
    /// Appends the undo of step `step` and makes it durable. The caller
    /// sends the step only after this returns (write-ahead).
    pub fn record(&mut self, step: usize, undo: &Op) -> Result<(), StateError> {
        let line = StepLine { step, undo: undo.clone() };
        self.append(&line)?;
        self.file.sync_data().map_err(|e| io_error(&self.path, e))
    }

    /// Marks the transaction complete.
    ///
    /// Not synced: if a crash loses this line, a finished run looks
    /// unfinished, and undoing it is the same work either way.
    pub fn commit(mut self) -> Result<(), StateError> {
        self.append(&CommitLine { committed: true })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One line, one write(2): a crash leaves at most a torn last line.
    fn append<T: Serialize>(&mut self, line: &T) -> Result<(), StateError> {
        let bytes = json_line(&self.path, line)?;
        self.file.write_all(&bytes).map_err(|e| io_error(&self.path, e))
    }
}

impl Journal {
    fn push(&mut self, line: BodyLine) -> Result<(), StateError> {
        match line {
            BodyLine::Step(_) if self.committed => {
                Err(corrupt(&self.path, "step recorded after the commit line"))
            }
            BodyLine::Step(StepLine { step, undo }) => {
                self.undo.push((step, undo));
                Ok(())
            }
            BodyLine::Commit(CommitLine { committed }) => {
                self.committed = committed;
                Ok(())
            }
        }
    }
}

/// What `check_safe` expects to find.
#[derive(Clone, Copy)]
enum Kind {
    Dir,
    File,
}

/// The single safety rule: a regular file or directory as expected, owned
/// by the effective uid, not writable by group or others. Symlinks never
/// get this far: everything is opened with O_NOFOLLOW (`open_safe`).
fn check_safe(path: &Path, meta: &Metadata, kind: Kind) -> Result<(), StateError> {
    let euid = geteuid().as_raw();
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

/// Opens `path` without following a symlink (new files get mode 0600), and
/// checks what was opened, by its descriptor, with `check_safe`.
fn open_safe(path: &Path, options: &mut OpenOptions, kind: Kind) -> Result<File, StateError> {
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

/// Replaces `dir/name` with `contents` so that a reader, even after a
/// crash, sees the old or the new file and never a mix: write a temporary
/// file, fsync it, rename it over, fsync the directory.
/// Whether a write must be on disk before it returns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durable {
    Yes,
    No,
}

/// Write a temporary file, (sync it,) rename it over `name`, (sync the
/// directory): readers see the old or the new contents, never a mix.
fn atomic_write(dir: &Path, name: &str, contents: &[u8], durable: Durable) -> Result<(), StateError> {
    let tmp = dir.join(format!(".{name}.tmp"));
    remove_if_exists(&tmp)?;
    let mut options = OpenOptions::new();
    let mut file = open_safe(&tmp, options.write(true).create_new(true), Kind::File)?;
    file.write_all(contents).map_err(|e| io_error(&tmp, e))?;
    if durable == Durable::Yes {
        file.sync_all().map_err(|e| io_error(&tmp, e))?;
    }
    let path = dir.join(name);
    fs::rename(&tmp, &path).map_err(|e| io_error(&path, e))?;
    if durable == Durable::Yes { sync_dir(dir) } else { Ok(()) }
}

/// Creates a 0700 directory if missing, and checks it.
fn ensure_dir(path: &Path) -> Result<(), StateError> {
    match DirBuilder::new().mode(0o700).create(path) {
        Err(e) if e.kind() != ErrorKind::AlreadyExists => Err(io_error(path, e)),
        _ => open_safe(path, OpenOptions::new().read(true), Kind::Dir).map(drop),
    }
}

fn sync_dir(dir: &Path) -> Result<(), StateError> {
    open_safe(dir, OpenOptions::new().read(true), Kind::Dir)?.sync_all().map_err(|e| io_error(dir, e))
}

fn remove_if_exists(path: &Path) -> Result<(), StateError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(io_error(path, e)),
        _ => Ok(()),
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, StateError> {
    let mut file = open_safe(path, OpenOptions::new().read(true), Kind::File)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| io_error(path, e))?;
    Ok(bytes)
}

/// `read_file`, with a missing file as None.
fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StateError> {
    match read_file(path) {
        Err(StateError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => Ok(None),
        read => read.map(Some),
    }
}

fn read_journal(path: &Path) -> Result<Journal, StateError> {
    parse_journal(path, &read_file(path)?)
}

/// Parses a journal. Its last line may be torn by a crash mid-append (the
/// step it guarded was never sent): it is dropped if it lacks its '\n' or
/// does not parse. Any other bad line is corruption.
fn parse_journal(path: &Path, bytes: &[u8]) -> Result<Journal, StateError> {
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    // The piece after the last '\n': empty, or an unterminated torn line.
    let unterminated = lines.pop().is_some_and(|tail| !tail.is_empty());
    let (header, body) = lines.split_first().ok_or_else(|| corrupt(path, "no header line"))?;
    let mut journal = Journal {
        path: path.to_path_buf(),
        header: parse_header(path, header)?,
        undo: Vec::new(),
        committed: false,
    };
    for (n, line) in body.iter().enumerate() {
        let is_last = !unterminated && n + 1 == body.len();
        match serde_json::from_slice(line) {
            Ok(line) => journal.push(line)?,
            Err(_) if is_last => {}
            Err(e) => return Err(corrupt(path, format!("line {}: {e}", n + 2))),
        }
    }
    // Written in one piece, a journal holds all its steps: only the commit
    // line, appended later, may be torn by a crash.
    if let Some(expected) = journal.header.steps {
        let in_order = journal.undo.iter().enumerate().all(|(i, (step, _))| i == *step);
        if journal.undo.len() != expected || !in_order {
            let found = journal.undo.len();
            return Err(corrupt(
                path,
                format!("holds {found} of its {expected} steps: a step line is damaged"),
            ));
        }
    }
    Ok(journal)
}

fn parse_header(path: &Path, line: &[u8]) -> Result<JournalHeader, StateError> {
    let unreadable = |e: serde_json::Error| corrupt(path, format!("unreadable header: {e}"));
    let VersionProbe { version } = serde_json::from_slice(line).map_err(unreadable)?;
    if version != JOURNAL_VERSION {
        return Err(corrupt(
            path,
            format!("journal version {version} is not supported (this build reads {JOURNAL_VERSION})"),
        ));
    }
    serde_json::from_slice(line).map_err(unreadable)
}

/// The sequence number of a file named `journal-<digits>.jsonl`.
fn journal_seq(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(JOURNAL_PREFIX)?.strip_suffix(JOURNAL_SUFFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Splits an `"<iface>/<sysctl>"` key of `sysctl-origins.json`.
fn parse_origin_key(path: &Path, name: &str) -> Result<(String, SysctlKey), StateError> {
    name.rsplit_once('/')
        .and_then(|(iface, key)| Some((iface.to_string(), SysctlKey::from_name(key)?)))
        .ok_or_else(|| corrupt(path, format!("{name:?} is not \"<interface>/<sysctl>\"")))
}

/// The namespace id names one directory under the base, nothing else.
fn check_ns_id(base: &Path, ns_id: &str) -> Result<(), StateError> {
    let single = !matches!(ns_id, "" | "." | "..") && !ns_id.contains(['/', '\0']);
    if single {
        Ok(())
    } else {
        Err(unsafe_path(
            base,
            format!("namespace id {ns_id:?} is not a single path component"),
            "name the namespace like net-<inode>",
        ))
    }
}

fn json_line<T: Serialize>(path: &Path, value: &T) -> Result<Vec<u8>, StateError> {
    let mut line = serde_json::to_vec(value).map_err(|e| io_error(path, e.into()))?;
    line.push(b'\n');
    Ok(line)
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn unsafe_path(path: &Path, what: impl Into<String>, hint: &str) -> StateError {
    StateError::Unsafe { path: path.to_path_buf(), what: what.into(), hint: hint.to_string() }
}

fn corrupt(path: &Path, what: impl Into<String>) -> StateError {
    StateError::Corrupt { path: path.to_path_buf(), what: what.into() }
}

fn io_error(path: &Path, source: io::Error) -> StateError {
    StateError::Io { path: path.to_path_buf(), source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use nix::unistd::Uid;

    /// A fresh directory under the system temp dir, removed on drop. The
    /// state base is `<it>/state`, created by `StateDir::open`.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            static COUNT: AtomicUsize = AtomicUsize::new(0);
            let n = COUNT.fetch_add(1, Ordering::Relaxed);
            let root =
                std::env::temp_dir().join(format!("roce-route-state-{}-{n}-{name}", std::process::id()));
            fs::create_dir(&root).unwrap();
            Scratch(root)
        }
        fn base(&self) -> PathBuf {
            self.0.join("state")
        }
        fn open(&self) -> Result<StateDir, StateError> {
            StateDir::open(&self.base(), "net-4026531840")
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn op(i: usize) -> Op {
        Op::SetSysctl { iface: format!("rail{i}"), key: SysctlKey::ArpIgnore, old: 0, new: 1 }
    }

    fn header(kind: &str) -> JournalHeader {
        JournalHeader::new(kind, Some("/etc/roce-route.toml".into()), 234)
    }

    fn append_raw(path: &Path, bytes: &[u8]) {
        let mut file = OpenOptions::new().append(true).open(path).unwrap();
        file.write_all(bytes).unwrap();
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    fn assert_unsafe(result: Result<impl std::fmt::Debug, StateError>, what: &str) {
        match result {
            Err(e @ StateError::Unsafe { .. }) => {
                assert!(e.to_string().contains(what), "{e}")
            }
            other => panic!("expected Unsafe ({what}), got {other:?}"),
        }
    }

    fn assert_corrupt(result: Result<Option<Journal>, StateError>, what: &str) {
        match result {
            Err(e @ StateError::Corrupt { .. }) => {
                assert!(e.to_string().contains(what), "{e}")
            }
            other => panic!("expected Corrupt ({what}), got {other:?}"),
        }
    }

    #[test]
    fn journal_round_trip() {
        let scratch = Scratch::new("round-trip");
        let dir = scratch.open().unwrap();
        let h = header("apply");
        let mut w = dir.begin_journal(h.clone()).unwrap();
        for i in 0..3 {
            w.record(i, &op(i)).unwrap();
        }
        w.commit().unwrap();
        let j = dir.latest_journal().unwrap().unwrap();
        assert_eq!(j.header, h);
        assert_eq!(j.undo, (0..3).map(|i| (i, op(i))).collect::<Vec<_>>());
        assert!(j.committed);

        let mut w = dir.begin_journal(h).unwrap();
        w.record(0, &op(7)).unwrap();
        drop(w);
        let j = dir.latest_journal().unwrap().unwrap();
        assert_eq!(j.undo, vec![(0, op(7))]);
        assert!(!j.committed);
    }

    #[test]
    fn torn_last_line_is_ignored() {
        let scratch = Scratch::new("torn");
        let dir = scratch.open().unwrap();
        let tails: [&[u8]; 2] = [b"{\"step\":2,\"undo\":{\"op\":\"set_sy", b"{\"step\":2,\n"];
        for tail in tails {
            let mut w = dir.begin_journal(header("apply")).unwrap();
            w.record(0, &op(0)).unwrap();
            w.record(1, &op(1)).unwrap();
            append_raw(w.path(), tail);
            let j = dir.latest_journal().unwrap().unwrap();
            assert_eq!(j.undo, vec![(0, op(0)), (1, op(1))]);
            assert!(!j.committed);
        }
    }

    #[test]
    fn garbage_in_the_middle_is_corrupt() {
        let scratch = Scratch::new("garbage");
        let dir = scratch.open().unwrap();
        let mut w = dir.begin_journal(header("apply")).unwrap();
        w.record(0, &op(0)).unwrap();
        append_raw(w.path(), b"not json\n");
        w.record(1, &op(1)).unwrap();
        assert_corrupt(dir.latest_journal(), "line 3");
    }

    #[test]
    fn step_after_commit_is_corrupt() {
        let scratch = Scratch::new("after-commit");
        let dir = scratch.open().unwrap();
        let w = dir.begin_journal(header("apply")).unwrap();
        let path = w.path().to_path_buf();
        w.commit().unwrap();
        append_raw(&path, &json_line(&path, &StepLine { step: 0, undo: op(0) }).unwrap());
        append_raw(&path, b"{\"committed\":true}\n");
        assert_corrupt(dir.latest_journal(), "after the commit");
    }

    #[test]
    fn unsupported_version_is_corrupt() {
        let scratch = Scratch::new("version");
        let dir = scratch.open().unwrap();
        let mut h = header("apply");
        h.version = 999;
        dir.begin_journal(h).unwrap().commit().unwrap();
        assert_corrupt(dir.latest_journal(), "version 999");
    }

    #[test]
    fn missing_header_is_corrupt() {
        let scratch = Scratch::new("no-header");
        let dir = scratch.open().unwrap();
        let path = dir.path().join("journal-000001.jsonl");
        fs::write(&path, b"").unwrap();
        assert_corrupt(dir.latest_journal(), "no header");
        fs::write(&path, b"{\"step\":0}\n").unwrap();
        assert_corrupt(dir.latest_journal(), "header");
    }

    #[test]
    fn journals_form_a_stack() {
        let scratch = Scratch::new("stack");
        let dir = scratch.open().unwrap();
        assert_eq!(dir.latest_journal().unwrap(), None);
        dir.begin_journal(header("apply")).unwrap().commit().unwrap();
        dir.begin_journal(header("remove")).unwrap().commit().unwrap();

        let all = dir.journals().unwrap();
        let kinds: Vec<&str> = all.iter().map(|j| j.header.kind.as_str()).collect();
        assert_eq!(kinds, ["apply", "remove"]);
        assert!(all[1].path.ends_with("journal-000002.jsonl"));

        let latest = dir.latest_journal().unwrap().unwrap();
        assert_eq!(latest.header.kind, "remove");
        dir.discard(&latest).unwrap();
        let latest = dir.latest_journal().unwrap().unwrap();
        assert_eq!(latest.header.kind, "apply");

        dir.clear_journals().unwrap();
        assert_eq!(dir.latest_journal().unwrap(), None);
        assert!(dir.journals().unwrap().is_empty());
    }

    #[test]
    fn namespaces_do_not_mix() {
        let scratch = Scratch::new("netns");
        let a = StateDir::open(&scratch.base(), "net-1").unwrap();
        let b = StateDir::open(&scratch.base(), "net-2").unwrap();
        a.begin_journal(header("apply")).unwrap().commit().unwrap();
        assert_eq!(b.latest_journal().unwrap(), None);
        assert_unsafe(StateDir::open(&scratch.base(), "../net-1"), "single path");
    }

    #[test]
    fn sysctl_origins_first_seen_wins() {
        let scratch = Scratch::new("origins");
        let dir = scratch.open().unwrap();
        assert!(dir.sysctl_origins().unwrap().is_empty());
        let first =
            [("rail0".to_string(), SysctlKey::ArpIgnore, 0), ("rail0".to_string(), SysctlKey::RpFilter, 1)];
        dir.record_sysctl_origins(&first).unwrap();
        let second =
            [("rail0".to_string(), SysctlKey::ArpIgnore, 2), ("rail1".to_string(), SysctlKey::ArpIgnore, 0)];
        dir.record_sysctl_origins(&second).unwrap();

        let reopened = scratch.open().unwrap();
        let expected = BTreeMap::from([
            (("rail0".to_string(), SysctlKey::ArpIgnore), 0),
            (("rail0".to_string(), SysctlKey::RpFilter), 1),
            (("rail1".to_string(), SysctlKey::ArpIgnore), 0),
        ]);
        assert_eq!(reopened.sysctl_origins().unwrap(), expected);
        let text = fs::read_to_string(reopened.path().join(ORIGINS_FILE)).unwrap();
        assert!(text.contains("\"rail0/arp_ignore\": 0"), "{text}");

        reopened.clear_sysctl_origins().unwrap();
        assert!(reopened.sysctl_origins().unwrap().is_empty());
        reopened.clear_sysctl_origins().unwrap();
    }

    #[test]
    fn origins_recorded_in_a_journal_header_last_as_long_as_the_journal() {
        let scratch = Scratch::new("origins-journal");
        let dir = scratch.open().unwrap();
        let mut h = header("apply");
        h.sysctl_origins = vec![("rail0".to_string(), SysctlKey::ArpIgnore, 0)];
        let undo = [Op::SetSysctl { iface: "rail0".into(), key: SysctlKey::ArpIgnore, old: 1, new: 0 }];
        dir.begin_journal_with_undo(h, &undo).unwrap();
        // A crash before the origins file is written loses nothing.
        let key = ("rail0".to_string(), SysctlKey::ArpIgnore);
        assert_eq!(dir.sysctl_origins().unwrap().get(&key), Some(&0));
        let journal = dir.latest_journal().unwrap().unwrap();
        assert_eq!(journal.undo.len(), 1);
        assert!(!journal.committed);
        dir.discard(&journal).unwrap();
        assert!(dir.sysctl_origins().unwrap().is_empty(), "gone with its journal");
    }

    #[test]
    fn a_damaged_step_of_a_whole_plan_journal_is_corrupt_but_a_torn_commit_is_not() {
        let scratch = Scratch::new("whole-plan");
        let dir = scratch.open().unwrap();
        let undo: Vec<Op> = (0..3)
            .map(|i| Op::SetSysctl { iface: format!("rail{i}"), key: SysctlKey::ArpIgnore, old: 1, new: 0 })
            .collect();
        let path = dir.begin_journal_with_undo(header("apply"), &undo).unwrap().path().to_path_buf();
        let whole = fs::read(&path).unwrap();
        // A torn commit line: the run may have finished, the journal is fine.
        fs::write(&path, [whole.as_slice(), b"{\"commi"].concat()).unwrap();
        assert_eq!(dir.latest_journal().unwrap().unwrap().undo.len(), 3);
        // The last step line damaged: corruption, not "two steps to undo".
        let mut damaged = whole.clone();
        let cut = damaged.len() - 10;
        damaged[cut] = b'#';
        fs::write(&path, &damaged).unwrap();
        assert_corrupt(dir.latest_journal(), "2 of its 3 steps");
    }

    #[test]
    fn settle_copies_the_newest_headers_values_into_the_file() {
        let scratch = Scratch::new("settle");
        let dir = scratch.open().unwrap();
        let mut h = header("apply");
        h.sysctl_origins = vec![("rail1".to_string(), SysctlKey::ArpAnnounce, 0)];
        dir.begin_journal_with_undo(h, &[]).unwrap();
        assert!(dir.stored_origins().unwrap().is_empty(), "as after a crash before the file was written");
        let settled = dir.settle_sysctl_origins().unwrap();
        assert_eq!(dir.stored_origins().unwrap(), settled);
        assert_eq!(settled.len(), 1);
        // A newer journal hides the older header; the file kept its values.
        dir.begin_journal_with_undo(header("apply"), &[]).unwrap();
        assert_eq!(dir.sysctl_origins().unwrap(), settled);
    }

    #[test]
    fn only_the_newest_journals_are_kept() {
        let scratch = Scratch::new("prune");
        let dir = scratch.open().unwrap();
        for _ in 0..MAX_JOURNALS + 3 {
            dir.begin_journal_with_undo(header("apply"), &[]).unwrap();
        }
        let names: Vec<String> = dir
            .journals()
            .unwrap()
            .iter()
            .map(|j| j.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), MAX_JOURNALS);
        assert_eq!(names[0], "journal-000004.jsonl");
        assert_eq!(names.last().unwrap(), &format!("journal-{:06}.jsonl", MAX_JOURNALS + 3));
    }

    #[test]
    fn base_must_be_a_real_directory() {
        let scratch = Scratch::new("base");
        let real = scratch.0.join("real");
        fs::create_dir(&real).unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&real, scratch.base()).unwrap();
        assert_unsafe(scratch.open(), "symlink");
        let with_slash = scratch.0.join("state/");
        assert_unsafe(StateDir::open(&with_slash, "net-1"), "symlink");

        fs::remove_file(scratch.base()).unwrap();
        fs::write(scratch.base(), b"").unwrap();
        assert_unsafe(scratch.open(), "not a directory");
    }

    #[test]
    fn writable_by_others_is_unsafe() {
        let scratch = Scratch::new("writable");
        let dir = scratch.open().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        assert_unsafe(scratch.open(), "writable by group or others");
    }

    #[test]
    fn foreign_owner_is_unsafe() {
        let scratch = Scratch::new("owner");
        let dir = scratch.open().unwrap();
        let nobody = Some(Uid::from_raw(65534));
        nix::unistd::chown(dir.path(), nobody, None).unwrap();
        assert_unsafe(scratch.open(), "owned by uid 65534");

        nix::unistd::chown(dir.path(), Some(geteuid()), None).unwrap();
        dir.begin_journal(header("apply")).unwrap().commit().unwrap();
        nix::unistd::chown(&dir.path().join("journal-000001.jsonl"), nobody, None).unwrap();
        assert_unsafe(dir.latest_journal(), "owned by uid 65534");
    }

    #[test]
    fn symlinked_files_are_refused() {
        let scratch = Scratch::new("file-links");
        let dir = scratch.open().unwrap();
        let target = scratch.0.join("elsewhere");
        fs::write(&target, b"{}\n").unwrap();
        for name in ["journal-000001.jsonl", LOCK_FILE, ORIGINS_FILE, PENDING_FILE] {
            std::os::unix::fs::symlink(&target, dir.path().join(name)).unwrap();
        }
        assert_unsafe(dir.latest_journal(), "symlink");
        assert_unsafe(dir.lock(Duration::ZERO), "symlink");
        assert_unsafe(dir.sysctl_origins(), "symlink");
        assert_unsafe(dir.pending(), "symlink");
        assert_eq!(fs::read(&target).unwrap(), b"{}\n");
    }

    #[test]
    fn created_dirs_are_0700_and_files_0600() {
        let scratch = Scratch::new("modes");
        let dir = scratch.open().unwrap();
        assert_eq!(mode(&scratch.base()), 0o700);
        assert_eq!(mode(dir.path()), 0o700);

        let _lock = dir.lock(Duration::ZERO).unwrap();
        let mut w = dir.begin_journal(header("apply")).unwrap();
        w.record(0, &op(0)).unwrap();
        w.commit().unwrap();
        dir.record_sysctl_origins(&[("rail0".into(), SysctlKey::ArpFilter, 0)]).unwrap();
        dir.set_pending(&Pending { pid: 1, deadline_unix: 2 }).unwrap();
        dir.confirm().unwrap();

        let mut names = Vec::new();
        for entry in fs::read_dir(dir.path()).unwrap() {
            let entry = entry.unwrap();
            assert_eq!(mode(&entry.path()), 0o600, "{:?}", entry.path());
            names.push(entry.file_name().into_string().unwrap());
        }
        names.sort();
        let expected = [CONFIRMED_FILE, "journal-000001.jsonl", LOCK_FILE, PENDING_FILE, ORIGINS_FILE];
        assert_eq!(names, expected, "no temporary files are left behind");
    }

    #[test]
    fn second_lock_times_out_until_the_first_is_dropped() {
        let scratch = Scratch::new("lock");
        let first = scratch.open().unwrap();
        let second = scratch.open().unwrap();
        let guard = first.lock(Duration::from_secs(1)).unwrap();
        match second.lock(Duration::from_millis(100)) {
            Err(StateError::Locked { waited, .. }) => {
                assert!(waited >= Duration::from_millis(100))
            }
            other => panic!("expected Locked, got {other:?}"),
        }
        drop(guard);
        second.lock(Duration::from_millis(100)).unwrap();
    }

    #[test]
    fn pending_and_confirm() {
        let scratch = Scratch::new("confirm");
        let dir = scratch.open().unwrap();
        assert!(!dir.confirm().unwrap());
        assert!(!dir.is_confirmed().unwrap());

        let pending = Pending { pid: 42, deadline_unix: 1_700_000_000 };
        dir.set_pending(&pending).unwrap();
        assert_eq!(dir.pending().unwrap(), Some(pending.clone()));
        assert!(!dir.is_confirmed().unwrap());
        assert!(dir.confirm().unwrap());
        assert!(dir.is_confirmed().unwrap());

        let next = Pending { pid: 43, deadline_unix: 1_700_000_100 };
        dir.set_pending(&next).unwrap();
        assert!(!dir.is_confirmed().unwrap(), "an old confirmation must not carry over");

        dir.clear_pending().unwrap();
        assert_eq!(dir.pending().unwrap(), None);
        assert!(!dir.is_confirmed().unwrap());
        assert!(!dir.confirm().unwrap());
    }
}
