//! The state directory: what roce-route must remember between runs, one
//! subdirectory of the base per network namespace:
//!
//! * `journal-<seq>.jsonl`, a stack of undo journals (`journal`);
//! * `record.json`: original sysctl values, tables and protocols
//!   roce-route used (`record`);
//! * `pending`: an `apply --confirm` waiting for its confirmation
//!   (`confirm`), with the file `apply --install` stages for the boot set
//!   (`install`).
//!
//! The lock is not kept here: it is a flock in the run directory of the
//! network namespace (`rundir`, `/run/roce-route/netns/<id>/`, root's
//! own), with the socket of the confirmation guard and the hold of a
//! running `watch`, so that it is one per namespace whatever `--state-dir`
//! each run uses and no other local user can take or plant any of them.
//! Safe file access is in `files`.
//!
//! The default base lives on tmpfs: the routing state it describes does not
//! survive a reboot either, and the per-namespace directory is keyed by the
//! boot id, so a persistent /run is never read after a reboot.

pub mod confirm;
mod files;
pub mod install;
pub mod journal;
pub mod lock;
pub mod record;
pub mod rundir;

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use confirm::Pending;
pub use journal::{JOURNAL_VERSION, Journal, JournalHeader, JournalWriter, RunKind};
pub use lock::{Holder, NetnsLock};
pub use record::{Origins, Record, RunOrigins};

use files::{atomic_write, ensure_dir, read_json, remove_if_exists, unsafe_path};

pub const DEFAULT_BASE: &str = "/run/roce-route";
/// How many runs of the user (apply, remove: each can be rolled back,
/// newest first) are kept.
pub const MAX_JOURNALS: usize = 32;
/// How many heals by `watch` are kept at most (they sit on top of the
/// user's runs and are undone with them).
pub const MAX_HEALS: usize = 256;

const RECORD_FILE: &str = "record.json";
const PENDING_FILE: &str = "pending";

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A symlink, a foreign owner, group/other write permission, or the
    /// wrong file type.
    #[error("{path}: {what}; {hint}")]
    Unsafe { path: PathBuf, what: String, hint: String },
    /// Unparsable content or an incompatible journal version.
    #[error("{path}: {what}; move the file away (the host itself is not affected) and run the command again")]
    Corrupt { path: PathBuf, what: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "another roce-route works in this network namespace ({}); waited {:.1} s (--lock-timeout); try again when it has finished",
        holder.as_ref().map_or("holder unknown".to_string(), |h| h.to_string()),
        waited.as_secs_f64()
    )]
    Locked { waited: Duration, holder: Option<Holder> },
    #[error("stopped by {} while waiting for the lock; nothing was changed", crate::signals::name(*signal))]
    LockInterrupted { signal: i32 },
}

/// The state of one network namespace.
#[derive(Debug)]
pub struct StateDir {
    dir: PathBuf,
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

    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    // -- journals ---------------------------------------------------------

    /// Starts a journal that holds the undo of every step of a plan, in
    /// one atomic write before the first step is sent. Replaying an undo
    /// whose step was never made is harmless (it deletes what is absent,
    /// re-adds what is present, or writes a value already there), so the
    /// whole plan is recorded up front.
    pub fn begin_journal(
        &self,
        header: &mut JournalHeader,
        undo: &[Op],
    ) -> Result<JournalWriter, StateError> {
        let seq = self.journal_files()?.last().map_or(1, |(seq, _)| seq + 1);
        let name = journal::file_name(seq, header.kind);
        let path = self.file(&name);
        atomic_write(&self.dir, &name, &journal::encode(&path, header, undo)?)?;
        Ok(JournalWriter { path })
    }

    /// Keeps the newest MAX_JOURNALS runs of the user (apply, remove):
    /// rollback can undo that many back. This is the only place journals of
    /// committed runs go (besides a rollback discarding what it undid): a
    /// remove is one more run, never the end of the history. Heals by `watch` never count
    /// against them: a heal goes once it is older than the oldest run kept,
    /// and beyond MAX_HEALS the oldest heals go. Called after a commit, so
    /// that a failed run never costs the oldest rollback point.
    pub fn prune_journals(&self) -> Result<(), StateError> {
        let files = self.journal_files()?;
        let user: Vec<u64> = files.iter().filter(|(_, p)| !is_heal(p)).map(|(seq, _)| *seq).collect();
        let oldest_kept = user.len().checked_sub(MAX_JOURNALS).map(|excess| user[excess]);
        let mut heals = files.iter().filter(|(_, p)| is_heal(p)).count();
        for (seq, path) in &files {
            let drop = match (is_heal(path), oldest_kept) {
                (false, Some(oldest)) => *seq < oldest,
                (true, Some(oldest)) if *seq < oldest => true,
                (true, _) => heals > MAX_HEALS,
                (false, None) => false,
            };
            if drop {
                if is_heal(path) {
                    heals -= 1;
                }
                remove_if_exists(path)?;
            }
        }
        Ok(())
    }

    /// What `rollback` undoes, newest first: the heals since the user's
    /// latest run, and that run. Empty when no run of the user is left
    /// (heals alone are not undone: watch would make them again at once).
    pub fn rollback_set(&self) -> Result<Vec<Journal>, StateError> {
        let mut set = Vec::new();
        for (_, path) in self.journal_files()?.iter().rev() {
            set.push(read_journal(path)?);
            if !is_heal(path) {
                return Ok(set);
            }
        }
        Ok(Vec::new())
    }

    /// The journals newer than `seq` (None: all), newest first.
    pub fn journals_after(&self, seq: Option<u64>) -> Result<Vec<Journal>, StateError> {
        let files = self.journal_files()?;
        files
            .iter()
            .rev()
            .filter(|(s, _)| seq.is_none_or(|seq| *s > seq))
            .map(|(_, p)| read_journal(p))
            .collect()
    }

    /// The sequence number of the newest journal, if any.
    pub fn latest_seq(&self) -> Result<Option<u64>, StateError> {
        Ok(self.journal_files()?.last().map(|(seq, _)| *seq))
    }

    /// The newest journal, if any.
    pub fn latest_journal(&self) -> Result<Option<Journal>, StateError> {
        match self.journal_files()?.pop() {
            Some((_, path)) => read_journal(&path).map(Some),
            None => Ok(None),
        }
    }

    /// Whether the newest journal is complete; None without journals.
    pub fn latest_committed(&self) -> Result<Option<(JournalHeader, bool)>, StateError> {
        Ok(self.latest_journal()?.map(|j| (j.header, j.committed)))
    }

    /// The header of the user's newest committed run (apply, remove),
    /// past the heals after it: what `last_apply` is read from, also when
    /// a heal is the newest journal. The heals are passed by name, unread.
    pub fn latest_user_run(&self) -> Result<Option<JournalHeader>, StateError> {
        for (_, path) in self.journal_files()?.iter().rev().filter(|(_, p)| !is_heal(p)) {
            let journal = read_journal(path)?;
            if journal.committed {
                return Ok(Some(journal.header));
            }
        }
        Ok(None)
    }

    /// All journals, oldest first.
    #[cfg(test)]
    pub fn journals(&self) -> Result<Vec<Journal>, StateError> {
        self.journal_files()?.iter().map(|(_, path)| read_journal(path)).collect()
    }

    /// Deletes a journal once it has been undone.
    pub fn discard(&self, j: &Journal) -> Result<(), StateError> {
        remove_if_exists(&j.path)
    }

    /// Journal files by sequence number, oldest first.
    fn journal_files(&self) -> Result<Vec<(u64, PathBuf)>, StateError> {
        files::list(&self.dir, journal::seq)
    }

    // -- record -----------------------------------------------------------

    /// The record. Under the namespace lock it is read from its file once
    /// a hold (`lock::holding`): no other run writes it while this one
    /// holds the lock, and this one's writes go through `write_record` and
    /// `update_record`, which keep what they wrote. An apply from scratch
    /// read the file four times, each ~126k instructions of JSON.
    ///
    /// Shared with what is kept (`Rc`): a run that only reads it copies
    /// nothing; one that changes it copies it (`Rc::unwrap_or_clone`).
    pub fn record(&self) -> Result<Rc<Record>, StateError> {
        let _p = crate::profile::phase("state files");
        let hold = lock::holding();
        if let Some(record) = hold.and_then(|hold| kept_record(&self.dir, hold)) {
            return Ok(record);
        }
        crate::profile::count("record_reads", 1);
        let record = Rc::new(read_json::<Record>(&self.file(RECORD_FILE))?.unwrap_or_default());
        self.keep_record(hold, &record);
        Ok(record)
    }

    /// Remembered for the rest of this hold; forgotten without one.
    fn keep_record(&self, hold: Option<u64>, record: &Rc<Record>) {
        KEPT_RECORD
            .with_borrow_mut(|kept| *kept = hold.map(|hold| (self.dir.clone(), hold, Rc::clone(record))));
    }

    fn put_record(&self, record: Rc<Record>) -> Result<(), StateError> {
        // Forgotten first: a write that fails half-way leaves the file to be read.
        KEPT_RECORD.with_borrow_mut(|kept| *kept = None);
        files::write_json(&self.dir, RECORD_FILE, &*record)?;
        self.keep_record(lock::holding(), &record);
        Ok(())
    }

    pub fn write_record(&self, record: &Record) -> Result<(), StateError> {
        if *record == *self.record()? {
            return Ok(());
        }
        self.put_record(Rc::new(record.clone()))
    }

    /// Reads, changes and writes the record; not written when the change
    /// leaves it as it was (compared with the one read, not read again).
    pub fn update_record(&self, change: impl FnOnce(&mut Record)) -> Result<(), StateError> {
        let before = self.record()?;
        let mut record = Record::clone(&before);
        change(&mut record);
        if record == *before {
            return Ok(());
        }
        self.put_record(Rc::new(record))
    }

    // -- confirmation -----------------------------------------------------

    pub fn set_pending(&self, pending: &Pending) -> Result<(), StateError> {
        files::write_json(&self.dir, PENDING_FILE, pending)
    }

    pub fn pending(&self) -> Result<Option<Pending>, StateError> {
        read_json(&self.file(PENDING_FILE))
    }

    /// Ends the trial's record, and with it the file it staged for the
    /// boot set (kept already when it was confirmed; removed otherwise).
    pub fn clear_pending(&self) -> Result<(), StateError> {
        if let Ok(Some(Pending { install: Some(install), .. })) = self.pending() {
            install.discard()?;
        }
        remove_if_exists(&self.file(PENDING_FILE))
    }

    /// Confirmed: the file the trial staged enters the boot set (nothing
    /// without `--install`). Before `clear_pending`, so that a kill
    /// between the two leaves the kept config in place.
    pub fn keep_install(&self, pending: &Pending) -> Result<(), StateError> {
        match &pending.install {
            Some(install) => install.keep(),
            None => Ok(()),
        }
    }
}

thread_local! {
    /// The record last read or written under a hold of the lock: its
    /// state directory, the hold (`lock::holding`), the record.
    static KEPT_RECORD: std::cell::RefCell<Option<(PathBuf, u64, Rc<Record>)>> = const { std::cell::RefCell::new(None) };
}

/// The record kept for `dir` during `hold`, if any.
fn kept_record(dir: &Path, hold: u64) -> Option<Rc<Record>> {
    KEPT_RECORD.with_borrow(|kept| {
        kept.as_ref().filter(|(d, h, _)| d == dir && *h == hold).map(|(_, _, r)| Rc::clone(r))
    })
}

use crate::model::Op;

/// Whether a journal path is a heal's (by its name).
fn is_heal(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(journal::is_heal_name)
}

fn read_journal(path: &Path) -> Result<Journal, StateError> {
    journal::parse(path, &files::read_file(path)?)
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

pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Opens a state directory path read-only and checks it (for tests of the
/// safety rules).
#[cfg(test)]
fn check_dir(path: &Path) -> Result<(), StateError> {
    files::open_safe(path, std::fs::OpenOptions::new().read(true), files::Kind::Dir).map(drop)
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
