//! `roce-route apply`: load, plan, read, diff, then print or execute.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use super::{Change, Ctx, connect, now_unix, print_json};
use crate::cli::ApplyArgs;
use crate::config;
use crate::diff::{self, Plan};
use crate::error::Error;
use crate::executor;
use crate::executor::Recorder;
use crate::host::{self, Kernel, Origins, Recorded};
use crate::model::{Op, SysctlKey};
use crate::netlink::Netlink;
use crate::plan::{self, Desired};
use crate::render;
use crate::say;
use crate::state::{JournalHeader, JournalWriter, Pending, StateDir, StateError};
use crate::tell;

/// The JSON document of `apply --json` (and `apply --dry-run --json`).
#[derive(Debug, Serialize)]
pub struct ApplyReport {
    pub command: &'static str,
    pub dry_run: bool,
    /// Whether the host was (or, with --dry-run, would be) changed.
    pub changed: bool,
    pub changes: Vec<Change>,
    pub conflicts: Vec<ConflictEntry>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct ConflictEntry {
    pub entry: String,
    pub why: String,
}

impl ApplyReport {
    pub fn new(plan: &Plan, dry_run: bool) -> ApplyReport {
        ApplyReport {
            command: "apply",
            dry_run,
            changed: !plan.ops.is_empty(),
            changes: plan.ops.iter().map(Change::of).collect(),
            conflicts: plan
                .conflicts
                .iter()
                .map(|c| ConflictEntry { entry: c.entry.clone(), why: c.why.clone() })
                .collect(),
            warnings: plan.warnings.clone(),
        }
    }
}

/// Reads and validates the config file (exit 2 on any problem).
pub fn load_config(path: &std::path::Path) -> Result<config::Config, Error> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::Config(config::ConfigError::at(
            &shown,
            None,
            format!("cannot read the config: {e}"),
            "check the path",
        ))
    })?;
    Ok(config::parse(&shown, &text)?)
}

/// Everything up to the plan: what apply, apply --dry-run and check share.
/// `recorded` is what the state directory says: sysctls of interfaces no
/// longer in the config go back to their recorded values, and tables an
/// interrupted run touched are read for stale owned routes.
pub async fn make_plan(
    nl: &Netlink,
    cfg: &config::Config,
    adopt: bool,
    recorded: &Recorded,
) -> Result<(Desired, Plan), Error> {
    let addrs = nl.addresses().await.context("cannot read the interface addresses")?;
    let desired = plan::plan(cfg, nl.links(), &addrs)?;
    let observed = host::observe(nl, &desired, recorded).await?;
    let plan = diff::diff(&desired, &observed, adopt);
    Ok((desired, plan))
}

/// How many times apply reads the host again when another actor changed
/// it between the read and the write (the transaction was rolled back).
const ATTEMPTS: u32 = 3;

pub async fn run(ctx: &Ctx, args: &ApplyArgs, cfg: config::Config) -> Result<(), Error> {
    let mut nl = connect().await?;
    if args.dry_run {
        let recorded = readable_record(ctx)?;
        let (_, plan) = make_plan(&nl, &cfg, args.adopt, &recorded).await?;
        return report_dry_run(args, &plan);
    }
    let state = ctx.state()?;
    let _lock = state.lock(ctx.lock_timeout)?;
    let mut attempt = 1;
    let plan = loop {
        let recorded = Recorded::read(&state)?;
        let (_, plan) = make_plan(&nl, &cfg, args.adopt, &recorded).await?;
        if !args.json {
            for w in &plan.warnings {
                tell!("roce-route: warning: {w}");
            }
        }
        if !plan.conflicts.is_empty() && !args.adopt {
            return Err(conflicts(&plan));
        }
        if plan.ops.is_empty() {
            report_in_sync(args, &plan);
            return Ok(());
        }
        let header = JournalHeader::new("apply", Some(cfg.file.clone()), cfg.defaults.protocol);
        match execute(ctx, &state, &nl, &plan.ops, header).await {
            Ok(()) => break plan,
            Err(Error::Transaction(e)) if e.is_race() && attempt < ATTEMPTS => {
                tell!("roce-route: the host changed while applying ({e}); reading it again");
                attempt += 1;
                nl.refresh_links().await.context("cannot read the links")?;
            }
            Err(e) => return Err(e),
        }
    };
    if let Some(seconds) = args.confirm {
        confirm_or_revert(ctx, &state, &nl, &plan.ops, seconds).await?;
    }
    if args.json {
        print_json(&ApplyReport::new(&plan, false));
    } else {
        say!("roce-route: applied {} change(s):", plan.ops.len());
        for op in &plan.ops {
            say!("  {}", render::command(op));
        }
    }
    Ok(())
}

fn report_in_sync(args: &ApplyArgs, plan: &Plan) {
    if args.json {
        print_json(&ApplyReport::new(plan, false));
    } else {
        say!("roce-route: in sync, nothing changed");
    }
}

fn report_dry_run(args: &ApplyArgs, plan: &Plan) -> Result<(), Error> {
    if !plan.conflicts.is_empty() && !args.adopt {
        return Err(conflicts(plan));
    }
    if args.json {
        print_json(&ApplyReport::new(plan, true));
    } else {
        {
            use std::io::Write as _;
            let _ = write!(std::io::stdout(), "{}", dry_run_script(plan));
        }
    }
    Ok(())
}

/// Runs the plan as a transaction with a durable undo journal. On failure
/// the executor has rolled back; the journal is then dropped, unless the
/// rollback failed too (so that `roce-route rollback` can finish it).
pub async fn execute(
    ctx: &Ctx,
    state: &StateDir,
    nl: &Netlink,
    ops: &[Op],
    mut header: JournalHeader,
) -> Result<(), Error> {
    let record = RunRecord::of(ops, &state.settle_sysctl_origins()?);
    header.sysctl_origins = record.origins.clone();
    header.released_origins = record.released.clone();
    header.tables = record.tables.clone();
    let mut journal = PlannedJournal { state, header: Some(header), writer: None };
    match executor::run(&mut Kernel::new(nl), ops, &ctx.stop, &mut journal).await {
        Ok(_) => {
            // Every step is made: bookkeeping trouble from here on is a
            // warning, not a failure (the host is not "as it was").
            let finish = || -> Result<(), StateError> {
                if let Some(writer) = journal.writer {
                    writer.commit()?;
                }
                state.record_sysctl_origins(&record.origins)?;
                state.record_tables(&record.tables)?;
                let released: Vec<_> =
                    record.released.into_iter().map(|(iface, key, _)| (iface, key)).collect();
                state.forget_sysctl_origins(&released)
            };
            if let Err(e) = finish() {
                tell!("roce-route: warning: the change is made, but its record is incomplete: {e}");
            }
            Ok(())
        }
        Err(e) => {
            // Cleanly rolled back: as if this run never happened (its
            // recorded sysctl values go with its journal).
            if !matches!(e, executor::TxError::RollbackFailed { .. })
                && journal.writer.is_some()
                && let Some(j) = state.latest_journal()?
            {
                state.discard(&j)?;
            }
            Err(e.into())
        }
    }
}

/// What a run records about itself, from its operations and the sysctl
/// values recorded before it. Pure.
#[derive(Debug, Default, PartialEq)]
struct RunRecord {
    /// Sysctls it changes first: their values before any change.
    origins: Vec<(String, SysctlKey, u32)>,
    /// Sysctls it writes back to their recorded original values.
    released: Vec<(String, SysctlKey, u32)>,
    /// Tables whose routes it changes.
    tables: Vec<u32>,
}

impl RunRecord {
    fn of(ops: &[Op], known: &Origins) -> RunRecord {
        let mut record = RunRecord::default();
        let mut tables = BTreeSet::new();
        for op in ops {
            match op {
                Op::SetSysctl { iface, key, old, new } => match known.get(&(iface.clone(), *key)) {
                    None => record.origins.push((iface.clone(), *key, *old)),
                    Some(original) if original == new => record.released.push((iface.clone(), *key, *new)),
                    Some(_) => {}
                },
                Op::AddRoute { route } | Op::DelRoute { route, .. } => {
                    tables.insert(route.table);
                }
                Op::ReplaceRoute { new, .. } => {
                    tables.insert(new.table);
                }
                Op::RestoreRoute { current, .. } => {
                    tables.insert(current.table);
                }
                Op::AddRule { .. } | Op::DelRule { .. } => {}
            }
        }
        record.tables = tables.into_iter().collect();
        record
    }
}

/// The executor's recorder: the journal is created, holding the undo of
/// every step, when the executor hands over the plan's inverses, before
/// the first step is sent.
struct PlannedJournal<'a> {
    state: &'a StateDir,
    header: Option<JournalHeader>,
    writer: Option<JournalWriter>,
}

impl Recorder for PlannedJournal<'_> {
    fn record(&mut self, undo: &[Op]) -> Result<(), String> {
        let header = self.header.take().ok_or("the journal was already written")?;
        let writer = self.state.begin_journal_with_undo(header, undo).map_err(|e| e.to_string())?;
        self.writer = Some(writer);
        Ok(())
    }
    fn before_step(&mut self, step: usize) {
        crate::testhooks::before_step(step);
    }
    fn step_done(&mut self, step: usize) {
        crate::testhooks::after_step(step);
    }
}

/// The recorded sysctl values, where this user may read them (a dry run
/// as root shows exactly what apply would do; without root there are none).
pub fn readable_record(ctx: &Ctx) -> Result<Recorded, Error> {
    match ctx.existing_state()? {
        Some(state) => Ok(Recorded::read(&state)?),
        None => Ok(Recorded::default()),
    }
}

/// `apply --confirm SECONDS`: keep the change only if `roce-route confirm`
/// runs (or Enter is pressed on a terminal) in time; otherwise, or on
/// SIGHUP/SIGINT/SIGTERM, undo it.
async fn confirm_or_revert(
    ctx: &Ctx,
    state: &StateDir,
    nl: &Netlink,
    ops: &[Op],
    seconds: u64,
) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    state.set_pending(&Pending { pid: std::process::id(), deadline_unix: now_unix() + seconds })?;
    let enter = watch_enter_key();
    tell!(
        "roce-route: applied; keeping it only if confirmed within {seconds} s: run `roce-route{} confirm`{}",
        ctx.netns.as_ref().map_or(String::new(), |n| format!(" --netns {n}")),
        if enter.is_some() { " or press Enter" } else { "" }
    );
    let confirmed = loop {
        if state.is_confirmed()? || enter.as_ref().is_some_and(|e| e.load(Ordering::SeqCst)) {
            break true;
        }
        if ctx.stop.requested().is_some() || Instant::now() >= deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    state.clear_pending()?;
    if confirmed {
        tell!("roce-route: confirmed, keeping the change");
        return Ok(());
    }
    let undo: Vec<Op> = ops.iter().map(Op::inverse).collect();
    let failures = executor::undo_all(&mut Kernel::new(nl), &undo).await;
    let why = match ctx.stop.requested() {
        Some(sig) => format!("signal {sig} before confirmation"),
        None => format!("not confirmed within {seconds} s"),
    };
    if !failures.is_empty() {
        let what = format!("{why}: undoing the change");
        return Err(executor::TxError::UndoFailed { what, undo_failures: failures }.into());
    }
    if let Some(j) = state.latest_journal()? {
        state.discard(&j)?;
        super::rollback::update_origins(state, &j)?;
    }
    Err(Error::NotConfirmed(format!(
        "{why}: rolled back the {} change(s); the host is as it was before",
        ops.len()
    )))
}

/// On a terminal, Enter confirms. The flag is set by a thread that reads
/// one line of standard input.
fn watch_enter_key() -> Option<Arc<AtomicBool>> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        if std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
            set.store(true, Ordering::SeqCst);
        }
    });
    Some(flag)
}

fn dry_run_script(plan: &Plan) -> String {
    let mut comments = vec![if plan.ops.is_empty() {
        "roce-route apply --dry-run: in sync, nothing to change".to_string()
    } else {
        format!("roce-route apply --dry-run: {} change(s); nothing was changed on the host", plan.ops.len())
    }];
    comments.extend(plan.warnings.iter().map(|w| format!("warning: {w}")));
    comments.extend(plan.conflicts.iter().map(|c| format!("adopting: {} ({})", c.entry, c.why)));
    render::script(&comments, &plan.ops)
}

fn conflicts(plan: &Plan) -> Error {
    let entries = plan.conflicts.iter().map(|c| (c.entry.clone(), c.why.clone())).collect();
    Error::Conflicts { report: conflict_report(plan), entries }
}

fn conflict_report(plan: &Plan) -> String {
    let mut s = format!(
        "{} entries not owned by roce-route are in the way; nothing was changed:\n",
        plan.conflicts.len()
    );
    for c in &plan.conflicts {
        s.push_str(&format!("  {}\n    ({})\n", c.entry, c.why));
    }
    s.push_str("re-run with --adopt to take them over (replaced or deleted in the same transaction), or remove them yourself");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Route, prefix};

    #[test]
    fn a_run_records_first_changes_releases_and_tables() {
        let set = |iface: &str, old, new| Op::SetSysctl {
            iface: iface.into(),
            key: SysctlKey::ArpIgnore,
            old,
            new,
        };
        let route =
            Route::connected(103, prefix("198.51.100.0/24"), "rail3", "198.51.100.13".parse().unwrap(), 234);
        let ops = vec![
            Op::DelRoute { route, raw: None },
            set("rail0", 0, 1), // never changed before: its original is 0
            set("rail3", 1, 0), // back to its recorded original: released
            set("rail1", 1, 2), // changed before, not to its original
        ];
        let known = Origins::from([
            (("rail3".to_string(), SysctlKey::ArpIgnore), 0),
            (("rail1".to_string(), SysctlKey::ArpIgnore), 0),
        ]);
        let r = RunRecord::of(&ops, &known);
        assert_eq!(r.origins, [("rail0".to_string(), SysctlKey::ArpIgnore, 0)]);
        assert_eq!(r.released, [("rail3".to_string(), SysctlKey::ArpIgnore, 0)]);
        assert_eq!(r.tables, [103]);
    }
}
