//! Undo journals: `journal-<seq>.jsonl`, one per run that changed something.
//!
//! A journal is a header line, one line per step (the inverse of the
//! operation, all written in one piece before the first step is sent),
//! then a commit line once the transaction is complete. `parse` is the one
//! reader; it is pure so that it can be fuzzed.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::files::{Kind, corrupt, io_error, open_safe};
use super::{StateError, unix_now};
use crate::model::{Op, SysctlKey};

pub const JOURNAL_VERSION: u32 = 1;
pub(super) const PREFIX: &str = "journal-";
pub(super) const SUFFIX: &str = ".jsonl";
/// A heal by `watch` is named `journal-<seq>.heal.jsonl`: pruning and
/// rollback tell heals from the user's runs by name, without reading them.
pub(super) const HEAL_SUFFIX: &str = ".heal.jsonl";

/// The kind of run a journal records; on disk (the header's `kind`) and in
/// messages as "apply", "remove" or "heal".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// `roce-route apply` (also a user's `--confirm` trial).
    Apply,
    /// `roce-route remove`.
    Remove,
    /// A heal by `roce-route watch`: it builds on the user's run before it
    /// and is undone with it.
    Heal,
}

impl RunKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Apply => "apply",
            RunKind::Remove => "remove",
            RunKind::Heal => "heal",
        }
    }
}

impl std::fmt::Display for RunKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// First line of a journal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalHeader {
    pub version: u32,
    pub kind: RunKind,
    pub started_unix: u64,
    pub config: Option<String>,
    pub protocol: u8,
    pub pid: u32,
    /// Sysctl values this run recorded first (iface, key, value before any
    /// change by roce-route): forgotten again when the run is undone.
    #[serde(default)]
    pub sysctl_origins: Vec<(String, SysctlKey, u32)>,
    /// Recorded values this run wrote back (a sysctl returned to its
    /// original value): recorded again when the run is undone.
    #[serde(default)]
    pub released_origins: Vec<(String, SysctlKey, u32)>,
    /// Tables whose routes this run changes; a remove's also holds every
    /// table the record held, given back to it when the remove is undone.
    #[serde(default)]
    pub tables: Vec<u32>,
    /// Protocols roce-route owned when this run started, besides
    /// `protocol` (a remove records them so that its undo owns them again).
    #[serde(default)]
    pub protocols: Vec<u8>,
    /// The tables interfaces got without an explicit `table` (apply).
    #[serde(default)]
    pub assigned: std::collections::BTreeMap<String, u32>,
    /// The config files of an apply, as given (suggestions name them all).
    #[serde(default)]
    pub files: Vec<String>,
    /// The file each interface of an apply came from.
    #[serde(default)]
    pub sources: std::collections::BTreeMap<String, String>,
    /// The addresses of interfaces without `addresses` (apply).
    #[serde(default)]
    pub discovered: std::collections::BTreeMap<String, Vec<crate::model::Prefix>>,
    /// The config of an apply: every file's name and text as merged, so
    /// that `watch` heals toward it whatever was edited since.
    #[serde(default)]
    pub config_files: Vec<(String, String)>,
    /// The record's `config_files` before this run: given back when the
    /// run is undone.
    #[serde(default)]
    pub replaced_config_files: Vec<(String, String)>,
    /// The record's `discovered` before this run: given back when the run
    /// is undone (no false "found at the last apply and gone").
    #[serde(default)]
    pub replaced_discovered: std::collections::BTreeMap<String, Vec<crate::model::Prefix>>,
    /// The record's `sources` before this run: given back when the run is
    /// undone (no false `dropped_with_file`).
    #[serde(default)]
    pub replaced_sources: std::collections::BTreeMap<String, String>,
    /// The trial id of an `apply --confirm` (`Pending::trial`): the guard
    /// and watch revert the journals that carry it, and only those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial: Option<String>,
    /// How many step lines follow; fewer, or a damaged one, is corruption
    /// rather than a torn append.
    #[serde(default)]
    pub steps: Option<usize>,
    /// The index each link the steps name by name had when the run was
    /// made: a link renamed since (it must be down for that, which flushes
    /// its routes, but it keeps its sysctls) is found by it when the run
    /// is undone (`transaction::undo_steps`). Also the index of each
    /// interface with recorded sysctl values, which the record keeps
    /// (`Record::links`). Absent in journals written before.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub links: std::collections::BTreeMap<String, u32>,
    /// Interfaces with recorded sysctl values that this run found renamed
    /// (old name -> name now, `Record::renames`): the record moves their
    /// values to the name now when the run starts, and back when it is
    /// undone.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub renamed: std::collections::BTreeMap<String, String>,
}

impl JournalHeader {
    /// A header for a journal this process starts now.
    pub fn new(kind: RunKind, config: Option<String>, protocol: u8) -> JournalHeader {
        JournalHeader {
            version: JOURNAL_VERSION,
            kind,
            started_unix: unix_now(),
            config,
            protocol,
            pid: std::process::id(),
            sysctl_origins: Vec::new(),
            released_origins: Vec::new(),
            tables: Vec::new(),
            protocols: Vec::new(),
            assigned: Default::default(),
            discovered: Default::default(),
            files: Vec::new(),
            sources: Default::default(),
            config_files: Vec::new(),
            replaced_config_files: Vec::new(),
            replaced_discovered: Default::default(),
            replaced_sources: Default::default(),
            trial: None,
            steps: None,
            links: Default::default(),
            renamed: Default::default(),
        }
    }
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

impl Journal {
    /// The undo operations in execution order (undo runs them reversed).
    pub fn undo_ops(&self) -> Vec<Op> {
        self.undo.iter().map(|(_, op)| op.clone()).collect()
    }
}

/// A journal line after the header: `{"step": i, "undo": <op>}`; written
/// from the run's own operations (`&Op`), read into owned ones.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepLine<O = Op> {
    step: usize,
    undo: O,
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

/// An open journal whose steps are being made; `commit` marks it complete.
#[derive(Debug)]
pub struct JournalWriter {
    pub(super) path: PathBuf,
}

impl JournalWriter {
    /// Marks the transaction complete (one appended line).
    pub fn commit(self) -> Result<(), StateError> {
        let mut file = open_safe(&self.path, OpenOptions::new().append(true), Kind::File)?;
        let line = json_line(&self.path, &CommitLine { committed: true })?;
        file.write_all(&line).map_err(|e| io_error(&self.path, e))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The whole journal of a plan: header and the undo of every step.
pub(super) fn encode(path: &Path, header: &mut JournalHeader, undo: &[Op]) -> Result<Vec<u8>, StateError> {
    header.steps = Some(undo.len());
    // Written into one buffer, each step from the operation itself: a
    // copy of each and a buffer a line were a sixth of the encoding.
    let mut bytes = Vec::with_capacity(4096 + 320 * undo.len());
    put_line(path, &mut bytes, header)?;
    for (step, op) in undo.iter().enumerate() {
        put_line(path, &mut bytes, &StepLine { step, undo: op })?;
    }
    Ok(bytes)
}

/// Parses a journal. Its last line may be torn by a crash mid-append (the
/// commit line): it is dropped if it lacks its '\n' or does not parse. Any
/// other bad line is corruption. Never panics, whatever the bytes.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Journal, StateError> {
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
            Ok(BodyLine::Step(_)) if journal.committed => {
                return Err(corrupt(path, format!("line {}: step recorded after the commit line", n + 2)));
            }
            Ok(BodyLine::Step(StepLine { step, undo })) => journal.undo.push((step, undo)),
            Ok(BodyLine::Commit(CommitLine { committed })) => journal.committed = committed,
            Err(_) if is_last => {}
            Err(e) => return Err(corrupt(path, format!("line {}: {e}", n + 2))),
        }
    }
    // Written in one piece, a journal holds all its steps: only the commit
    // line, appended later, may be torn by a crash.
    let expected = journal.header.steps.unwrap_or(journal.undo.len());
    let in_order = journal.undo.iter().enumerate().all(|(i, (step, _))| i == *step);
    if journal.undo.len() != expected || !in_order {
        let found = journal.undo.len();
        return Err(corrupt(path, format!("holds {found} of its {expected} steps: a step line is damaged")));
    }
    Ok(journal)
}

pub(super) fn parse_header(path: &Path, line: &[u8]) -> Result<JournalHeader, StateError> {
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

/// Whether a journal file name is a heal's.
pub fn is_heal_name(name: &str) -> bool {
    name.ends_with(HEAL_SUFFIX) && seq(name).is_some()
}

/// The file name of journal `seq` of a run of `kind`.
pub(super) fn file_name(seq: u64, kind: RunKind) -> String {
    let suffix = if kind == RunKind::Heal { HEAL_SUFFIX } else { SUFFIX };
    format!("{PREFIX}{seq:06}{suffix}")
}

/// The sequence number of a file named `journal-<digits>.jsonl` (a
/// user's run) or `journal-<digits>.heal.jsonl` (a heal).
pub(super) fn seq(name: &str) -> Option<u64> {
    let rest = name.strip_prefix(PREFIX)?;
    let digits = rest.strip_suffix(HEAL_SUFFIX).or_else(|| rest.strip_suffix(SUFFIX))?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

pub(super) fn json_line<T: Serialize>(path: &Path, value: &T) -> Result<Vec<u8>, StateError> {
    let mut line = Vec::new();
    put_line(path, &mut line, value)?;
    Ok(line)
}

/// `value` as one JSON line at the end of `bytes`.
fn put_line<T: Serialize>(path: &Path, bytes: &mut Vec<u8>, value: &T) -> Result<(), StateError> {
    serde_json::to_writer(&mut *bytes, value).map_err(|e| io_error(path, e.into()))?;
    bytes.push(b'\n');
    Ok(())
}
