//! A plan made as one transaction: the record and the undo journal are
//! written before the first step, the one executor makes the steps (and
//! undoes them on failure or on a stop request), and a run is committed
//! only after the caller has verified the host; undoing a committed run
//! (rollback, no confirmation) goes through here too.
//!
//! Used by apply, remove, rollback and the confirmation guard.

use std::collections::{BTreeMap, BTreeSet};

use nix::errno::Errno;

use crate::error::Error;
use crate::executor::{self, Effects, Recorder, StepFailure, TxError};
use crate::model::Op;
use crate::netlink::Netlink;
use crate::signals::StopFlag;
use crate::state::{Journal, JournalHeader, JournalWriter, Record, RunKind, StateDir};
use crate::sysctl;

/// What a transaction works with.
pub struct Env<'a> {
    pub state: &'a StateDir,
    pub nl: &'a Netlink,
    pub stop: &'a StopFlag,
}

/// A journal header for a run of `ops`: the sysctl values it records
/// first and gives back, and the tables it touches. A remove's also holds
/// everything of the record its commit clears (tables, protocols, assigned
/// tables), so that undoing it gives the record back as it was and the
/// journals below it then undo as they were made.
pub fn header_for(
    kind: RunKind,
    config: Option<String>,
    protocol: u8,
    ops: &[Op],
    record: &Record,
) -> JournalHeader {
    let mut header = JournalHeader::new(kind, config, protocol);
    let run = if kind == RunKind::Remove { record.origins.removal() } else { record.origins.run_of(ops) };
    header.sysctl_origins = run.recorded;
    header.released_origins = run.released;
    let mut tables = tables_of(ops);
    if kind == RunKind::Remove {
        tables.extend(&record.tables);
        header.protocols = record.protocols.iter().copied().collect();
        header.assigned = record.assigned.clone();
        // The index of every recorded interface, also one whose values
        // need no step: the undo gives them back to the record.
        header.links = record.links.clone();
    }
    header.tables = tables.into_iter().collect();
    header.replaced_config_files = record.config_files.clone();
    header.replaced_discovered = record.discovered.clone();
    header.replaced_sources = record.sources.clone();
    header
}

/// The links `ops` name by name (a route's output interface, a sysctl's
/// interface): what a journal records the index of. A route deleted or
/// put back from its dumped bytes names its link by index already, and a
/// rule names its interfaces by name in the kernel too. Pure.
fn links_named(ops: &[Op]) -> BTreeSet<&str> {
    fn oif(r: &crate::model::Route) -> Option<&str> {
        r.oif.as_deref()
    }
    ops.iter()
        .flat_map(|op| match op {
            Op::AddRoute { route } | Op::DelRoute { route, .. } => [oif(route), None],
            Op::ReplaceRoute { old, new } => [oif(&old.item), oif(new)],
            Op::RestoreRoute { current, old } => [oif(current), oif(&old.item)],
            Op::SetSysctl { iface, .. } => [Some(iface.as_str()), None],
            Op::AddRule { .. } | Op::DelRule { .. } => [None, None],
        })
        .flatten()
        .collect()
}

/// The index of each link `ops` name, as it is now (a link that does not
/// exist has none).
fn link_indexes(nl: &Netlink, ops: &[Op]) -> BTreeMap<String, u32> {
    links_named(ops)
        .into_iter()
        .filter_map(|name| Some((name.to_string(), nl.index_by_name(name)?)))
        .collect()
}

/// A recorded run's undo steps in execution order (undo runs them
/// reversed), each link named as it is named now: a link the journal
/// recorded whose name no link has now, but whose index another name
/// has, was renamed since, and is undone under that name. A name some
/// link has is kept, also when that link is another one than the
/// journal's (re-created with the name, which watch may have healed: it
/// is undone as before; the recorded index may have gone to another link
/// meanwhile, which is never touched then).
pub fn undo_steps(nl: &Netlink, journal: &Journal) -> Vec<Op> {
    let renamed: BTreeMap<String, String> = (journal.header.links.iter())
        .filter_map(|(name, index)| Some((name.clone(), nl.renamed(name, *index)?)))
        .collect();
    rename_links(journal.undo_ops(), &renamed)
}

/// `ops` with their links renamed as `renamed` says (old name -> name
/// now). Pure.
fn rename_links(ops: Vec<Op>, renamed: &BTreeMap<String, String>) -> Vec<Op> {
    if renamed.is_empty() {
        return ops;
    }
    let name = |n: &mut String| {
        if let Some(now) = renamed.get(n.as_str()) {
            n.clone_from(now);
        }
    };
    let route = |r: &mut crate::model::Route| r.oif.iter_mut().for_each(name);
    ops.into_iter()
        .map(|mut op| {
            match &mut op {
                Op::AddRoute { route: r } | Op::DelRoute { route: r, .. } => route(r),
                Op::ReplaceRoute { old, new } => {
                    route(&mut old.item);
                    route(new);
                }
                Op::RestoreRoute { current, old } => {
                    route(current);
                    route(&mut old.item);
                }
                Op::SetSysctl { iface, .. } => name(iface),
                Op::AddRule { .. } | Op::DelRule { .. } => {}
            }
            op
        })
        .collect()
}

/// The tables whose routes `ops` change.
fn tables_of(ops: &[Op]) -> BTreeSet<u32> {
    ops.iter()
        .filter_map(|op| match op {
            Op::AddRoute { route } | Op::DelRoute { route, .. } => Some(route.table),
            Op::ReplaceRoute { new, .. } => Some(new.table),
            Op::RestoreRoute { current, .. } => Some(current.table),
            Op::AddRule { .. } | Op::DelRule { .. } | Op::SetSysctl { .. } => None,
        })
        .collect()
}

/// Every step made, the journal not yet committed: `commit` once the host
/// is verified, or `abort` to undo it all.
pub struct Applied<'a> {
    env: &'a Env<'a>,
    header: JournalHeader,
    undo: Vec<Op>,
    writer: JournalWriter,
    /// The sysctls the run wrote, to be read back (`written`).
    written: sysctl::Written,
}

/// Makes every step of `ops`. On failure or a stop request the executor
/// undoes what was made: the run is then as if it never happened (its
/// journal and its record entries go), unless the undo failed too (then
/// the journal stays, so that `roce-route rollback` can finish it).
pub async fn begin<'a>(
    env: &'a Env<'a>,
    ops: &[Op],
    mut header: JournalHeader,
) -> Result<Applied<'a>, Error> {
    header.links.extend(link_indexes(env.nl, ops));
    let mut journal = WriteAhead { state: env.state, header: Some(header.clone()), writer: None };
    let phase = crate::profile::phase("changes + journal");
    let mut kernel = Kernel::new(env.nl);
    let ran = executor::run(&mut kernel, ops, env.stop, &mut journal).await;
    drop(phase);
    match ran {
        Ok(_) => {
            let writer = journal.writer.expect("the executor records before its first step");
            let undo = ops.iter().map(Op::inverse).collect();
            Ok(Applied { env, undo, header, writer, written: kernel.written })
        }
        Err(e) => {
            if !matches!(e, TxError::RollbackFailed { .. }) {
                let path = journal.writer.as_ref().map(|w| w.path().to_path_buf());
                forget_run(env.state, &header, path.as_deref())?;
            }
            Err(e.into())
        }
    }
}

impl<'a> Applied<'a> {
    /// The sysctls the run wrote, their files still open: verify reads
    /// them back from there.
    pub fn written(&self) -> &sysctl::Written {
        &self.written
    }

    /// The run is complete: the journal says so, the record releases what
    /// the run gave back, and old journals beyond the limit go.
    pub fn commit(self) -> Result<JournalHeader, Error> {
        let _p = crate::profile::phase("state files");
        self.writer.commit()?;
        self.env.state.update_record(|r| r.on_commit(&self.header))?;
        self.env.state.prune_journals()?;
        crate::testhooks::after_commit();
        Ok(self.header)
    }

    /// Undoes every step (the host did not come out as planned).
    pub async fn abort(self, why: String) -> Error {
        match self.undo(&why).await {
            Ok(()) => Error::Other(anyhow::anyhow!(
                "{why}; the change was rolled back: the host is as it was before"
            )),
            Err(e) => e,
        }
    }

    /// Undoes every step and forgets the run; the error says what could
    /// not be undone (`why`: the reason for undoing).
    pub async fn undo(self, why: &str) -> Result<(), Error> {
        let failures = executor::undo_all(&mut Kernel::new(self.env.nl), &self.undo).await;
        if !failures.is_empty() {
            return Err(TxError::UndoFailed {
                what: format!("{why}; undoing the change"),
                undo_failures: failures,
            }
            .into());
        }
        forget_run(self.env.state, &self.header, Some(self.writer.path()))
    }
}

/// A cleanly undone run: its journal goes and the record is as before it.
fn forget_run(
    state: &StateDir,
    header: &JournalHeader,
    journal: Option<&std::path::Path>,
) -> Result<(), Error> {
    state.update_record(|r| r.on_undo(header))?;
    if let Some(j) = state.latest_journal()?.filter(|j| Some(j.path.as_path()) == journal) {
        state.discard(&j)?;
    }
    Ok(())
}

/// Undoes a recorded run (newest first), also one that was killed
/// half-way: undo steps whose effect is already there count as done.
/// Returns the undo steps in the order they ran.
pub async fn undo_journal(env: &Env<'_>, journal: &Journal) -> Result<Vec<Op>, Error> {
    let undo = undo_steps(env.nl, journal);
    let failures = executor::undo_all(&mut Kernel::new(env.nl), &undo).await;
    if !failures.is_empty() {
        let what = format!("rolling back the {} of journal {}", journal.header.kind, journal.path.display());
        return Err(TxError::UndoFailed { what, undo_failures: failures }.into());
    }
    forget_run(env.state, &journal.header, Some(&journal.path))?;
    Ok(undo.into_iter().rev().collect())
}

/// What reverting a trial did.
#[derive(Debug, PartialEq, Eq)]
pub enum TrialRevert {
    /// The trial's runs were undone (0: it was stopped before its first
    /// step).
    Undone(usize),
    /// A run of someone else is newer than the trial: it was superseded
    /// (the host has moved on), and nothing was undone.
    Superseded { journal: String, kind: RunKind },
}

/// Reverts the trial of an `apply --confirm`: every journal newer than
/// `after` (None: all), newest first, each of which must carry the
/// trial's id; a journal without it is another run made after the trial,
/// and nothing is undone.
pub async fn revert_trial(env: &Env<'_>, after: Option<u64>, trial: &str) -> Result<TrialRevert, Error> {
    let newer = env.state.journals_after(after)?;
    if let Some(other) = newer.iter().find(|j| j.header.trial.as_deref() != Some(trial)) {
        return Ok(TrialRevert::Superseded {
            journal: other.path.display().to_string(),
            kind: other.header.kind,
        });
    }
    for j in &newer {
        undo_journal(env, j).await?;
    }
    Ok(TrialRevert::Undone(newer.len()))
}

/// The executor's recorder: before the first step, the record takes the
/// run's first-seen sysctl values, then the journal is written with the
/// undo of every step (both write-then-rename).
struct WriteAhead<'a> {
    state: &'a StateDir,
    header: Option<JournalHeader>,
    writer: Option<JournalWriter>,
}

impl Recorder for WriteAhead<'_> {
    fn record(&mut self, undo: &[Op]) -> Result<(), String> {
        let mut header = self.header.take().ok_or("the journal was already written")?;
        // The journal first: a crash between the two writes leaves an
        // unfinished journal (which rollback, the guard and watch undo)
        // and the record of the run before, never a record that names a
        // config no journal ever applied (watch would heal toward it).
        self.writer = Some(self.state.begin_journal(&mut header, undo).map_err(|e| e.to_string())?);
        crate::testhooks::after_journal();
        self.state.update_record(|r| r.on_start(&header)).map_err(|e| e.to_string())
    }
    fn before_step(&mut self, step: usize) {
        crate::testhooks::before_step(step);
    }
    fn step_done(&mut self, step: usize) {
        crate::testhooks::after_step(step);
    }
}

/// Operations on the real kernel: routes and rules over rtnetlink,
/// sysctls through /proc/sys.
pub struct Kernel<'a> {
    nl: &'a Netlink,
    /// The sysctls written, their files kept for the read back.
    written: sysctl::Written,
}

impl Kernel<'_> {
    pub fn new(nl: &Netlink) -> Kernel<'_> {
        Kernel { nl, written: sysctl::Written::default() }
    }
}

impl Effects for Kernel<'_> {
    async fn run(&mut self, op: &Op) -> Result<(), StepFailure> {
        crate::testhooks::step_delay();
        match op {
            Op::SetSysctl { iface, key, new, .. } => self
                .written
                .write(iface, *key, *new)
                .map_err(|e| StepFailure { errno: errno_of(&e), message: e.to_string() }),
            _ => self.nl.change(op).map_err(|e| StepFailure { errno: Some(e.errno), message: e.to_string() }),
        }
    }
}

/// The errno of a /proc/sys error (kept as the kind when the message was
/// rewritten to name the path).
fn errno_of(e: &std::io::Error) -> Option<Errno> {
    e.raw_os_error().map(Errno::from_raw).or(match e.kind() {
        std::io::ErrorKind::NotFound => Some(Errno::ENOENT),
        std::io::ErrorKind::PermissionDenied => Some(Errno::EACCES),
        std::io::ErrorKind::InvalidInput => Some(Errno::EINVAL),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Route, Rule, SysctlKey, prefix};
    use crate::state::Origins;

    #[test]
    fn a_header_records_first_changes_releases_and_tables() {
        let route =
            Route::connected(103, prefix("198.51.100.0/24"), "rail3", "198.51.100.13".parse().unwrap(), 234);
        let set = |iface: &str, old, new| Op::SetSysctl {
            iface: iface.into(),
            key: SysctlKey::ArpIgnore,
            old,
            new,
        };
        let ops = vec![
            Op::DelRoute { route, raw: None },
            Op::AddRule { rule: Rule::source(1000, "198.51.100.10".parse().unwrap(), 100, 234), raw: None },
            set("rail0", 0, 1),
            set("rail3", 1, 0),
        ];
        let record = Record {
            origins: Origins::from_iter([(("rail3".to_string(), SysctlKey::ArpIgnore), 0)]),
            ..Record::default()
        };
        let h = header_for(RunKind::Apply, None, 234, &ops, &record);
        assert_eq!(h.sysctl_origins, [("rail0".to_string(), SysctlKey::ArpIgnore, 0)]);
        assert_eq!(h.released_origins, [("rail3".to_string(), SysctlKey::ArpIgnore, 0)]);
        assert_eq!(h.tables, [103]);
        let h = header_for(RunKind::Remove, None, 234, &[], &record);
        assert_eq!(h.released_origins.len(), 1, "remove gives back every recorded value");
    }

    /// The links a journal records are those its steps name by name, and
    /// a rename reaches every place a step names one; a rule keeps its
    /// interface names (the kernel's are names too).
    #[test]
    fn renamed_links_reach_every_step_that_names_them() {
        let route = |table, oif: &str| {
            Route::connected(table, prefix("198.51.100.0/24"), oif, "198.51.100.10".parse().unwrap(), 234)
        };
        let live = |r: Route| crate::model::Live { item: r, raw: Vec::new() };
        let mut rule = Rule::source(1000, "198.51.100.10".parse().unwrap(), 100, 234);
        rule.iif = Some("rail0".into());
        let ops = vec![
            Op::DelRoute { route: route(100, "rail0"), raw: None },
            Op::AddRoute { route: route(101, "rail1") },
            Op::ReplaceRoute { old: live(route(100, "cali7")), new: route(100, "rail0") },
            Op::RestoreRoute { current: route(102, "rail2"), old: live(route(102, "rail0")) },
            Op::SetSysctl { iface: "rail0".into(), key: SysctlKey::ArpIgnore, old: 1, new: 0 },
            Op::AddRule { rule: rule.clone(), raw: None },
        ];
        let named: Vec<&str> = links_named(&ops).into_iter().collect();
        assert_eq!(named, ["cali7", "rail0", "rail1", "rail2"], "not the rule's iif");
        // rail0 is ens5 now, and rail1 took rail0's name: each step is
        // renamed once.
        let renamed = BTreeMap::from([
            ("rail0".to_string(), "ens5".to_string()),
            ("rail1".to_string(), "rail0".to_string()),
        ]);
        let out = rename_links(ops, &renamed);
        let named: Vec<&str> = links_named(&out).into_iter().collect();
        assert_eq!(named, ["cali7", "ens5", "rail0", "rail2"]);
        assert_eq!(out[1], Op::AddRoute { route: route(101, "rail0") }, "renamed once, not twice");
        assert!(matches!(&out[4], Op::SetSysctl { iface, .. } if iface == "ens5"));
        assert_eq!(out[5], Op::AddRule { rule, raw: None });
    }

    /// After apply A, apply B, remove: rolling back the remove must leave
    /// the record as B left it, or the rollbacks of B and A below it would
    /// not restore their sysctls and tables exactly.
    #[test]
    fn undoing_a_remove_gives_the_record_back_as_it_was() {
        let p = |s: &str| crate::model::Prefix { addr: s.parse().unwrap(), len: 24 };
        let mut record = Record {
            origins: Origins::from_iter([
                (("rail0".to_string(), SysctlKey::ArpIgnore), 0),
                (("rail1".to_string(), SysctlKey::ArpAnnounce), 2),
            ]),
            tables: [100, 101, 102, 103].into(),
            protocols: [234, 240].into(),
            assigned: [("rail9".to_string(), 109)].into(),
            discovered: [("rail9".to_string(), vec![p("198.51.100.19")])].into(),
            sources: [("rail0".to_string(), "b.toml".to_string())].into(),
            config_files: vec![("b.toml".to_string(), "[[interface]]".to_string())],
            links: [("rail0".to_string(), 5), ("rail1".to_string(), 6)].into(),
        };
        let after_b = record.clone();
        // Only table 100 still has routes; 101..103 are in the record alone.
        let route =
            Route::connected(100, prefix("198.51.100.0/24"), "rail0", "198.51.100.10".parse().unwrap(), 234);
        let ops = vec![
            Op::DelRoute { route, raw: None },
            Op::SetSysctl { iface: "rail0".into(), key: SysctlKey::ArpIgnore, old: 1, new: 0 },
        ];
        let h = header_for(RunKind::Remove, None, 0, &ops, &record);
        record.on_start(&h);
        record.on_commit(&h);
        assert_eq!(record, Record::default(), "nothing of roce-route's is left after a remove");
        record.on_undo(&h);
        assert_eq!(record, after_b);
    }
}
