//! `roce-route apply`: reconcile, then print (`--dry-run`) or make the
//! change as one transaction, verified before it is committed; then
//! announce the addresses of the rails it changed to the peers; with
//! `--confirm`, hand it to a guard that reverts it unless confirmed.

use std::io::IsTerminal;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;

use super::{
    Change, Ctx, Done, Verbosity, connect_for,
    tell::{Announced, announced_lines, announced_summary, tell_peers},
};
use crate::announce;
use crate::cli::ApplyArgs;
use crate::config::Config;
use crate::converge::{self, Converged, Request, table_owners};
use crate::diff::Plan;
use crate::error::{Error, exit};
use crate::plan::{Desired, NotReady};
use crate::rdma_read;
use crate::reconcile;
use crate::render::{self, count};
use crate::say;
use crate::state::confirm::{self, Answer};
use crate::state::install::Install;
use crate::state::{Pending, RunKind, StateDir, StateError};
use crate::tell;

/// The fields of `apply --json` (and `apply --dry-run --json`).
#[derive(Debug, Serialize)]
pub struct ApplyReport {
    pub dry_run: bool,
    pub changes: Vec<Change>,
    pub conflicts: Vec<ConflictEntry>,
    /// With --confirm: "kept" once confirmed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<&'static str>,
    /// Parts of the config the host is not ready for, left alone.
    pub not_ready: Vec<NotReady>,
    /// Interfaces an earlier apply took from a file not given now, of which
    /// this apply removes something (its routes, rules or sysctls).
    pub dropped_with_file: Vec<DroppedWithFile>,
    /// The addresses announced to the peers after the change.
    pub announced: Vec<Announced>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DroppedWithFile {
    pub interface: String,
    pub file: String,
    /// What the plan deletes or sets back of it (said in the warning).
    #[serde(skip)]
    pub routes: usize,
    #[serde(skip)]
    pub rules: usize,
    #[serde(skip)]
    pub sysctls: usize,
}

/// Interfaces the last apply took from a file that is not among `cfg`'s
/// files and that `cfg` does not configure, with what the plan `ops`
/// removes of each; those it removes nothing of are not listed (their
/// entries stay: an interface that was never ready has none, and a
/// not-ready rail of the config on its table keeps it). Pure.
pub fn dropped_with_file(
    record: &crate::state::Record,
    cfg: &Config,
    desired: &Desired,
    ops: &[crate::model::Op],
) -> Vec<DroppedWithFile> {
    use crate::model::Op;
    let mut owners = table_owners(desired, ops);
    record
        .sources
        .iter()
        .filter(|(iface, file)| {
            !cfg.interfaces.iter().any(|i| &i.name == *iface) && !cfg.files.contains(file)
        })
        .map(|(iface, file)| {
            if let Some(t) = record.assigned.get(iface) {
                owners.entry(*t).or_insert_with(|| iface.clone());
            }
            let owned = |table: u32| owners.get(&table) == Some(iface);
            let mut d = DroppedWithFile {
                interface: iface.clone(),
                file: file.clone(),
                routes: 0,
                rules: 0,
                sysctls: 0,
            };
            for op in ops {
                match op {
                    Op::DelRoute { route, .. }
                        if route.oif.as_ref().map_or(owned(route.table), |o| o == iface) =>
                    {
                        d.routes += 1
                    }
                    Op::DelRule { rule, .. } if owned(rule.table) => d.rules += 1,
                    Op::SetSysctl { iface: i, .. } if i == iface => d.sysctls += 1,
                    _ => {}
                }
            }
            d
        })
        .filter(|d| d.routes + d.rules + d.sysctls > 0)
        .collect()
}

impl DroppedWithFile {
    /// What this apply does to it, in words.
    fn what(&self) -> String {
        let entries = match (self.routes, self.rules) {
            (0, 0) => None,
            (n, 0) => Some(count(n, "route", "routes")),
            (0, m) => Some(count(m, "rule", "rules")),
            (n, m) => Some(format!("{} and {}", count(n, "route", "routes"), count(m, "rule", "rules"))),
        };
        let sysctls = (self.sysctls > 0).then(|| {
            format!(
                "sets its {} back to the values recorded before roce-route",
                count(self.sysctls, "sysctl", "sysctls")
            )
        });
        match (entries, sysctls) {
            (Some(e), Some(s)) => format!("deletes its {e} and {s}"),
            (Some(e), None) => format!("deletes its {e}"),
            (None, Some(s)) => format!("{s}, and deletes no route or rule of it"),
            (None, None) => "changes nothing of it".into(),
        }
    }
}

/// Says which interfaces lose entries because their file was not given,
/// and what of them.
fn warn_dropped(ctx: &Ctx, dropped: &[DroppedWithFile]) {
    for d in dropped {
        ctx.warn(format!(
            "interface {} was applied from {}, which is not given now: this apply {}; give {} too to keep it",
            d.interface,
            d.file,
            d.what(),
            d.file
        ));
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConflictEntry {
    pub entry: String,
    pub why: String,
}

impl ApplyReport {
    pub fn new(plan: &Plan, dry_run: bool) -> ApplyReport {
        ApplyReport {
            dry_run,
            changes: plan.ops.iter().map(Change::of).collect(),
            conflicts: plan
                .conflicts
                .iter()
                .map(|c| ConflictEntry { entry: c.entry.clone(), why: c.why.clone() })
                .collect(),
            confirmation: None,
            not_ready: Vec::new(),
            dropped_with_file: Vec::new(),
            announced: Vec::new(),
        }
    }

    fn with_not_ready(mut self, not_ready: &[NotReady]) -> ApplyReport {
        self.not_ready = not_ready.to_vec();
        self
    }
}

/// Exit 5 when parts of the config were not ready (0 with
/// --not-ready-ok), 0 otherwise.
fn code_for(args: &ApplyArgs, not_ready: &[NotReady]) -> i32 {
    if not_ready.is_empty() || args.not_ready_ok { exit::OK } else { exit::NOT_READY }
}

/// Says what was left alone and why (stderr; `not_ready` in --json), and
/// what `ops` deletes of the parts that are not kept.
fn report_not_ready(ctx: &Ctx, desired: &Desired, ops: &[crate::model::Op]) {
    if !ctx.chatty() {
        return;
    }
    for nr in &desired.not_ready {
        tell!("roce-route: {}", nr.line(&desired.unkept, ops, "left alone", "apply"));
    }
}

pub async fn run(
    ctx: &Ctx,
    args: &ApplyArgs,
    cfg: Config,
    config_files: Vec<(String, String)>,
) -> Result<Done, Error> {
    // The lock, when no other run holds it, is taken before the links are
    // read: the sysctl values their replies carry are then those this run
    // plans with (`Netlink::devconf`), not 16 more file reads. Held by
    // another run, it is waited for below, and the files are read.
    let mut early = if args.dry_run { None } else { ctx.try_lock() };
    // The config's links only: see `connect_for`.
    let mut nl = connect_for(&cfg, &args.sysfs).await?;
    // What breaks RDMA that apply cannot change (a port that is down, an
    // address without its RoCE v2 GID): read first, so a bad --sysfs-root
    // is refused before anything changes; warned about once planned.
    let rdma = rdma_read::read_lenient(&args.sysfs, nl.links())?;
    let run = Apply { ctx, args, cfg: &cfg, rdma: &rdma };
    // Not held through a wait for DAD (seconds): other runs go on meanwhile.
    let (settled, addrs) =
        reconcile::settle_dad(&nl, &cfg, Duration::from_secs(args.settle), &ctx.stop, || drop(early.take()))
            .await?;
    if args.dry_run {
        return run.dry_run(&nl, addrs).await;
    }
    let state = ctx.state()?;
    let (lock, read_again) = run.lock(&state, &mut nl, settled, early).await?;
    // The addresses settle_dad read are planned with, as the links are,
    // unless the host was read again after a wait.
    let given = (!read_again).then_some(reconcile::Given { addrs, with_record: false });
    // --confirm: the guard owns the deadline before the first netlink
    // message, so that a kill of this process at any instant of the change
    // (or after it) still ends with the host as before.
    let install = BootSetFile::of(args, &config_files);
    let guard = match args.confirm {
        Some(seconds) => Some(Guard::arm(ctx, &state, &cfg, seconds, install.as_ref())?),
        None => None,
    };
    let (converged, dropped, scan) =
        run.converge(&state, &mut nl, &config_files, guard.as_ref(), given.as_ref()).await;
    let converged = match converged {
        Ok(c) => c,
        Err(e) => {
            // Nothing to guard (the run was refused or rolled back); a
            // journal left by a failed undo is the guard's to retry, which
            // takes the lock.
            drop(lock);
            if let Some(g) = &guard {
                g.dismiss("revert");
            }
            return Err(e);
        }
    };
    let mut report = ApplyReport::new(&converged.plan, false).with_not_ready(&converged.desired.not_ready);
    report.dropped_with_file = dropped;
    let Some(header) = &converged.header else {
        drop(lock);
        // Nothing to keep: the guard ends at once (and installs the file).
        if let Some(g) = &guard {
            g.dismiss("ready");
            g.dismiss("confirm");
        }
        installed(ctx, guard.is_some(), install.as_ref())?;
        return Ok(run.in_sync(&converged.desired, report));
    };
    if let Some(g) = &guard {
        g.name_journal(&state, header);
    }
    // A manager that deletes foreign rules undoes this change at its next
    // reconfiguration: say so now, not after the rails broke. (Only when
    // something changed: a scan of every process is not worth it for a
    // no-op, which changes nothing a manager could undo. It ran beside the
    // change, started when the plan was known.)
    let env = scan.map_or_else(crate::managers::scan, crate::managers::Background::wait);
    for w in crate::managers::warnings(&env) {
        ctx.warn(w);
    }
    // The change is complete: others may read and change the host while
    // the peers are told; with --confirm the guard keeps them from
    // changing it until it is confirmed or reverted.
    drop(lock);
    let confirming = guard.is_some();
    let done = run.changed(&state, &nl, converged, guard, report).await?;
    installed(ctx, confirming, install.as_ref())?;
    Ok(done)
}

/// `--install DIR`: the config file as it goes into the boot set.
struct BootSetFile {
    dir: std::path::PathBuf,
    name: String,
    /// Its text as applied (the one entry of the config files named there).
    text: String,
}

impl BootSetFile {
    fn of(args: &ApplyArgs, config_files: &[(String, String)]) -> Option<BootSetFile> {
        let dir = args.install.as_ref()?;
        let name = args.config.first()?.file_name()?.to_str()?;
        let to = dir.join(name).display().to_string();
        let (_, text) = config_files.iter().find(|(shown, _)| *shown == to)?;
        Some(BootSetFile { dir: dir.clone(), name: name.to_string(), text: text.clone() })
    }

    /// Its install, staged under a name that carries `tag` (the trial).
    fn install(&self, tag: &str) -> Install {
        Install::new(&self.dir, &self.name, tag)
    }
}

/// After a run that succeeded: the file goes into the boot set now, or,
/// with --confirm, was put there by the confirmation (checked here).
fn installed(ctx: &Ctx, confirmed: bool, file: Option<&BootSetFile>) -> Result<(), Error> {
    let Some(file) = file else { return Ok(()) };
    let install = file.install(&format!("apply-{}", std::process::id()));
    if !confirmed {
        install.now(&file.text).map_err(|e| {
            Error::Other(anyhow::anyhow!(
                "the change is applied, but its config could not be installed into the boot set: {e}; copy it \
                 there by hand (`install -m 0644 FILE {}`), or the next boot applies the old one",
                install.to.display()
            ))
        })?;
    } else if !install.is_in_place(&file.text) {
        return Err(Error::Other(anyhow::anyhow!(
            "the change was confirmed, but {} does not hold its config: copy it there by hand, or the next boot \
             applies the old one",
            install.to.display()
        )));
    }
    if ctx.chatty() {
        tell!("roce-route: installed {} (the boot unit applies it)", install.to.display());
    }
    Ok(())
}

/// One `apply` run: what every part of it reads.
struct Apply<'a> {
    ctx: &'a Ctx,
    args: &'a ApplyArgs,
    cfg: &'a Config,
    rdma: &'a crate::rdma_check::Observed,
}

impl Apply<'_> {
    /// Takes the namespace lock and makes ready to change the host under
    /// it: refuses while an `apply --confirm` waits, and reverts the trial
    /// of one whose guard died (it is not kept by building on it). A wait
    /// for --settle (`settled`) or for the lock may have seen rails come
    /// and go: the plan is made on the links as they are now, and the
    /// addresses are read again (returned true). `early`: the lock, taken
    /// before the host was read.
    async fn lock(
        &self,
        state: &StateDir,
        nl: &mut crate::netlink::Netlink,
        settled: bool,
        early: Option<crate::state::NetnsLock>,
    ) -> Result<(crate::state::NetnsLock, bool), Error> {
        let asked = std::time::Instant::now();
        let lock = match early {
            Some(lock) => lock,
            None => self.ctx.lock()?,
        };
        if let Some(what) = self.ctx.settle_confirmation("this apply", state, nl).await? {
            self.ctx.warn(what);
        }
        let read_again = settled || asked.elapsed() > Duration::from_millis(20);
        if read_again {
            crate::profile::count("read_again", 1);
            nl.refresh_links()
                .await
                .map_err(|e| Error::Other(anyhow::anyhow!("cannot read the links: {e}")))?;
        }
        Ok((lock, read_again))
    }

    fn warn_rdma(&self, desired: &Desired) {
        for d in self.rdma.drift(&desired.interfaces) {
            self.ctx.warn(format!("{}; {}", d.description, d.fix));
        }
    }

    /// `--dry-run`: the plan as a script, nothing changed.
    async fn dry_run(
        &self,
        nl: &crate::netlink::Netlink,
        addrs: Vec<crate::model::Address>,
    ) -> Result<Done, Error> {
        let (ctx, args) = (self.ctx, self.args);
        let mut record = ctx.readable_record()?;
        // As the apply would plan.
        reconcile::follow_renames(nl, &mut record, Some(self.cfg));
        let given = reconcile::Given { addrs, with_record: false };
        let (desired, mut plan, _) =
            reconcile::reconcile_reading(nl, self.cfg, args.adopt, &record, Some(given)).await?;
        plan.warnings = plan.warnings.iter().map(|w| with_apply_command(ctx, self.cfg, &plan, w)).collect();
        self.warn_rdma(&desired);
        strict_check(args, &desired.not_ready)?;
        // The script says what is not ready as `#` comments; on stderr too
        // unless both go to the same place (a terminal, `>log 2>&1`), where
        // it would show twice. A pipe or file keeps the script's comments.
        if ctx.json || !stdout_is_stderr() {
            report_not_ready(ctx, &desired, &plan.ops);
        }
        let dropped = dropped_with_file(&record, self.cfg, &desired, &plan.ops);
        warn_dropped(ctx, &dropped);
        let done = report_dry_run(ctx, args, &self.cfg.files, &plan, &desired)?;
        Ok(done.with("dropped_with_file", dropped))
    }

    /// The change as one verified transaction (see `converge`), after the
    /// checks of every reading; also the interfaces it drops with a file.
    async fn converge(
        &self,
        state: &StateDir,
        nl: &mut crate::netlink::Netlink,
        config_files: &[(String, String)],
        guard: Option<&Guard>,
        addresses: Option<&reconcile::Given>,
    ) -> (Result<Converged, Error>, Vec<DroppedWithFile>, Option<crate::managers::Background>) {
        let (ctx, args, cfg) = (self.ctx, self.args, self.cfg);
        let mut dropped = Vec::new();
        let mut scan = None;
        let req = Request {
            cfg,
            config_files,
            adopt: args.adopt,
            kind: RunKind::Apply,
            trial: guard.map(|g| g.trial.clone()),
            notice: &|m| tell!("roce-route: {m}"),
            addresses,
            record: None,
        };
        let gate = |record: &crate::state::Record, desired: &Desired, plan: &Plan| {
            plan.warnings.iter().for_each(|w| ctx.warn(with_apply_command(ctx, cfg, plan, w)));
            self.warn_rdma(desired);
            dropped = dropped_with_file(record, cfg, desired, &plan.ops);
            warn_dropped(ctx, &dropped);
            strict_check(args, &desired.not_ready)?;
            if !plan.conflicts.is_empty() && !args.adopt {
                return Err(conflicts(ctx, &cfg.files, plan));
            }
            // It will change something: the managers' scan runs meanwhile.
            if !plan.ops.is_empty() && scan.is_none() {
                scan = Some(crate::managers::scan_in_background());
            }
            Ok(())
        };
        let converged = converge::converge(state, nl, &ctx.stop, &req, gate, |_| {}).await;
        (converged, dropped, scan)
    }

    /// Nothing to change.
    fn in_sync(&self, desired: &Desired, report: ApplyReport) -> Done {
        report_not_ready(self.ctx, desired, &[]);
        if self.ctx.chatty() {
            say!("roce-route: in sync, nothing changed{}", not_ready_tail(&desired.not_ready));
        }
        Done::new(code_for(self.args, &desired.not_ready), false, report)
    }

    /// The change is made and committed: the peers are told, a --confirm
    /// waits for its outcome, and the change is reported.
    async fn changed(
        &self,
        state: &StateDir,
        nl: &crate::netlink::Netlink,
        converged: Converged,
        guard: Option<Guard>,
        mut report: ApplyReport,
    ) -> Result<Done, Error> {
        let Converged { desired, plan, .. } = converged;
        report_not_ready(self.ctx, &desired, &plan.ops);
        // Before a --confirm wait too: the change is live, and whether traffic
        // works during the trial depends on the peers' entries.
        let rounds = if self.args.no_announce { 0 } else { self.cfg.defaults.announce };
        if rounds > 0 {
            let rails = announce::touched(&desired, &plan.ops);
            report.announced = tell_peers(self.ctx, nl, &desired, Some(&rails), rounds).await.announced;
        }
        if let Some(guard) = guard {
            confirm_or_revert(self.ctx, state, nl, self.cfg, guard, plan.ops.len()).await?;
            report.confirmation = Some("kept");
        }
        if self.ctx.chatty() {
            self.print_applied(&desired, &plan, &report.announced, rounds);
        }
        Ok(Done::new(code_for(self.args, &desired.not_ready), true, report))
    }

    /// A line per rail (every command with -v), and one line for the
    /// announcements (every address with -v); written at once (a write
    /// per line was a system call per rail).
    fn print_applied(&self, desired: &Desired, plan: &Plan, announced: &[Announced], rounds: u32) {
        let head = format!(
            "roce-route: applied {}{}:",
            count(plan.ops.len(), "change", "changes"),
            not_ready_tail(&desired.not_ready)
        );
        let mut lines = vec![head];
        let verbose = self.ctx.verbosity == Verbosity::Verbose;
        if verbose {
            lines.extend(plan.ops.iter().map(|op| format!("  {}", render::command(op))));
        } else {
            let owners = table_owners(desired, &plan.ops);
            lines.extend(render::summary(&plan.ops, &owners).iter().map(|line| format!("  {line}")));
        }
        match (announced.is_empty(), verbose) {
            (true, _) => {}
            (false, true) => lines.extend(announced_lines(announced, rounds)),
            (false, false) => lines.push(announced_summary(announced, rounds)),
        }
        super::print_lines(&lines);
    }
}

/// "; 2 parts not ready (left alone)" or nothing.
fn not_ready_tail(not_ready: &[NotReady]) -> String {
    if not_ready.is_empty() {
        return String::new();
    }
    let rails: std::collections::BTreeSet<&str> = not_ready.iter().map(|n| n.interface.as_str()).collect();
    format!("; {} not ready, left alone", count(rails.len(), "rail", "rails"))
}

/// Whether standard output and standard error are the same file (the same
/// terminal, or one file or pipe for both).
fn stdout_is_stderr() -> bool {
    use std::os::unix::fs::MetadataExt;
    let id = |fd: u8| std::fs::metadata(format!("/proc/self/fd/{fd}")).ok().map(|m| (m.dev(), m.ino()));
    matches!((id(1), id(2)), (Some(a), Some(b)) if a == b)
}

/// `--strict`: all or nothing.
fn strict_check(args: &ApplyArgs, not_ready: &[NotReady]) -> Result<(), Error> {
    if !args.strict || not_ready.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = not_ready.iter().map(|n| format!("  {}", n.describe())).collect();
    Err(Error::NotReady(format!(
        "--strict: the host is not ready for all of the config; nothing was changed:\n{}",
        list.join("\n")
    )))
}

/// Plan warning `w`, its ARP-flux fix naming the apply to run (with this
/// run's --netns, --state-dir and files) rather than a bare `roce-route apply`.
fn with_apply_command(ctx: &Ctx, cfg: &Config, plan: &Plan, w: &str) -> String {
    match plan.arp_flux.iter().find(|f| f.warning() == w) {
        Some(f) => {
            format!("{}; {}", f.describe(), f.fix(&cfg.file, &ctx.suggest(&apply_args(&cfg.files, &[]))))
        }
        None => w.to_string(),
    }
}

fn report_dry_run(
    ctx: &Ctx,
    args: &ApplyArgs,
    files: &[String],
    plan: &Plan,
    desired: &Desired,
) -> Result<Done, Error> {
    let not_ready = &desired.not_ready;
    plan.warnings.iter().for_each(|w| {
        if ctx.json {
            ctx.warn(w.clone())
        }
    });
    if !plan.conflicts.is_empty() && !args.adopt {
        return Err(conflicts(ctx, files, plan));
    }
    // The script is what a dry run is for: printed even with -q.
    if !ctx.json {
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), "{}", crate::output::localize(&dry_run_script(plan, desired)));
    }
    // With --dry-run, "changed" says whether apply would change the host.
    let report = ApplyReport::new(plan, true).with_not_ready(not_ready);
    Ok(Done::new(code_for(args, not_ready), !plan.ops.is_empty(), report))
}

/// `apply FILES... EXTRA...` as suggestion words.
pub fn apply_args<'a>(files: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut words = vec!["apply"];
    words.extend(files.iter().map(String::as_str));
    words.extend(extra);
    words
}

/// The guard of an `apply --confirm`, armed before the change.
struct Guard {
    pid: u32,
    seconds: u64,
    /// The trial id its journals carry.
    trial: String,
    /// The newest journal before the trial.
    after: Option<u64>,
}

impl Guard {
    /// Starts the guard (see `state::confirm`) and records the trial as
    /// pending: from here on, the guard reverts whatever this apply makes
    /// unless it is confirmed, and a guard that dies leaves `pending` for
    /// watch to revert. Called under the namespace lock.
    fn arm(
        ctx: &Ctx,
        state: &StateDir,
        cfg: &Config,
        seconds: u64,
        file: Option<&BootSetFile>,
    ) -> Result<Guard, Error> {
        let after = state.latest_seq()?;
        let trial = confirm::new_trial_id()
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot make a trial id (/dev/urandom): {e}")))?;
        let deadline_unix = crate::state::unix_now() + seconds;
        let pid = spawn_guard(ctx, seconds, after, &trial)?;
        state.set_pending(&Pending {
            pid: std::process::id(),
            guard_pid: pid,
            deadline_unix,
            journal: String::new(),
            after,
            trial: trial.clone(),
            config: Some(cfg.file.clone()),
            install: file.map(|f| f.install(&trial)),
        })?;
        // The file for the boot set waits beside it (after `pending`
        // names it, so that a kill in between leaves nothing unnamed).
        if let Some(f) = file
            && let Err(e) = f.install(&trial).stage(&f.text)
        {
            confirm::stop_guard(pid);
            let _ = state.clear_pending();
            return Err(Error::Other(anyhow::anyhow!(
                "cannot stage the config for the boot set ({e}); nothing was changed: check that {} is a \
                 writable directory",
                f.dir.display()
            )));
        }
        // Nothing is changed unless the guard is up and owns the deadline.
        match confirm::ask("status", Some(Duration::from_secs(10))) {
            Ok(Answer::Waiting { .. }) => Ok(Guard { pid, seconds, trial, after }),
            other => {
                // A guard given up on must not go on answering `waiting`
                // (refusing every apply and heal in the name of this one).
                confirm::stop_guard(pid);
                let _ = state.clear_pending();
                Err(Error::Other(anyhow::anyhow!(
                    "the confirmation guard (pid {pid}) did not start ({}; stopped); nothing was changed",
                    match other {
                        Ok(a) => format!("it answered {:?}", a.line()),
                        Err(e) => e.to_string(),
                    }
                )))
            }
        }
    }

    /// `pending` names the trial's journal now that it exists (for show);
    /// under the lock, so that it never races the guard clearing it.
    fn name_journal(&self, state: &StateDir, header: &crate::state::JournalHeader) {
        if let (Ok(Some(mut pending)), Ok(Some(journal))) = (state.pending(), state.latest_journal()) {
            pending.journal =
                journal.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            pending.config = header.config.clone();
            let _ = state.set_pending(&pending);
        }
    }

    /// Ends the guard when there is nothing to confirm: `confirm` (in
    /// sync) or `revert` (the run failed and was rolled back).
    fn dismiss(&self, request: &str) {
        let _ = confirm::ask(request, Some(Duration::from_secs(30)));
    }

    /// Tells the guard the change is complete: a confirmation may keep it.
    /// The link to wait on, or the outcome when it came first (the deadline
    /// passed while the change was made, and it was reverted).
    fn ready(&self) -> Result<Result<confirm::ReadyLink, Answer>, Error> {
        confirm::ready(Duration::from_secs(120)).map_err(|e| {
            Error::RevertFailed(format!(
                "lost the confirmation guard (pid {}) once the change was made: {e}; a running `roce-route \
                 watch` reverts the change, or undo it with `roce-route rollback`",
                self.pid
            ))
        })
    }
}

/// `apply --confirm SECONDS`: the guard armed before the change reverts it
/// unless confirmed; this process waits for the outcome, confirms when
/// Enter is pressed on a terminal, and asks for the revert on a signal.
/// If the guard is lost without an answer, this process reverts the trial
/// itself: it is the last one able to.
async fn confirm_or_revert(
    ctx: &Ctx,
    state: &StateDir,
    nl: &crate::netlink::Netlink,
    cfg: &Config,
    guard: Guard,
    changes: usize,
) -> Result<(), Error> {
    let outcome = await_outcome(ctx, &guard);
    let reverted = |why: String| {
        Error::NotConfirmed(format!(
            "{why}: rolled back the {}; the host is as it was before (config {})",
            count(changes, "change", "changes"),
            cfg.file
        ))
    };
    match outcome {
        Answer::Kept => {
            say_kept(ctx);
            Ok(())
        }
        Answer::Reverted => Err(reverted(match ctx.stop.requested() {
            Some(sig) => format!("{} before confirmation", crate::signals::name(sig)),
            None => format!("not confirmed within {} s", guard.seconds),
        })),
        Answer::RevertFailed(why) => Err(Error::RevertFailed(format!(
            "reverting the unconfirmed change failed: {why}; run `{}` again",
            ctx.suggest(&["rollback"])
        ))),
        Answer::Waiting { .. } | Answer::NoGuard => guard_lost(ctx, state, nl, &guard, reverted).await,
    }
}

/// Tells the guard the change is made and waits for its outcome (Enter
/// confirms on a terminal); `NoGuard` when the guard is lost.
fn await_outcome(ctx: &Ctx, guard: &Guard) -> Answer {
    match guard.ready() {
        Ok(Err(early)) => early,
        Ok(Ok(link)) => {
            // The deadline as given (`--confirm SECONDS`), not the seconds
            // left once the change is made: those are in `show`.
            let enter = watch_enter_key();
            tell!(
                "roce-route: applied; keeping it only if confirmed within {} s: run `{}`{}",
                guard.seconds,
                ctx.suggest(&["confirm"]),
                if enter.is_some() { " or press Enter" } else { "" }
            );
            wait_for_outcome(ctx, enter.as_deref(), link)
        }
        Err(_) => Answer::NoGuard,
    }
}

fn say_kept(ctx: &Ctx) {
    if ctx.chatty() {
        tell!("roce-route: confirmed, keeping the change");
    }
}

/// The guard stopped without an answer. One that settled the trial
/// clears `pending` before it answers, and was confirmed (the trial's
/// journals are there) or reverted (they are gone): its outcome, read
/// from the state. One that died with the trial open leaves it to this
/// process: no one else will revert it now.
async fn guard_lost(
    ctx: &Ctx,
    state: &StateDir,
    nl: &crate::netlink::Netlink,
    guard: &Guard,
    reverted: impl Fn(String) -> Error,
) -> Result<(), Error> {
    let why = format!("the confirmation guard (pid {}) stopped without an answer", guard.pid);
    if state.pending()?.is_none() {
        let kept = state
            .journals_after(guard.after)?
            .iter()
            .any(|j| j.committed && j.header.trial.as_deref() == Some(guard.trial.as_str()));
        if kept {
            say_kept(ctx);
            return Ok(());
        }
        return Err(reverted(format!("the confirmation guard (pid {}) reverted it", guard.pid)));
    }
    let stop = crate::signals::StopFlag::default();
    let undone = async {
        let _lock = crate::state::NetnsLock::acquire(Duration::from_secs(600), &stop)?;
        let env = crate::transaction::Env { state, nl, stop: &stop };
        let done = crate::transaction::revert_trial(&env, guard.after, &guard.trial).await?;
        state.clear_pending()?;
        Ok::<_, Error>(done)
    }
    .await;
    match undone {
        Ok(crate::transaction::TrialRevert::Undone(_)) => Err(reverted(why)),
        Ok(crate::transaction::TrialRevert::Superseded { journal, kind }) => Err(Error::RevertFailed(
            format!("{why}, and a later {kind} ({journal}) was made during the trial: nothing was reverted"),
        )),
        Err(e) => Err(Error::RevertFailed(format!(
            "{why}, and reverting the change failed: {e}; the change may still be in place: check with `{}` \
             and undo it with `{}`",
            ctx.suggest(&["show"]),
            ctx.suggest(&["rollback"])
        ))),
    }
}

/// Starts the guard in its own session (a Ctrl-C at the terminal is this
/// process's to forward, not the guard's), handing it the listening
/// socket as fd 3 so that it is bound before anyone asks.
fn spawn_guard(ctx: &Ctx, seconds: u64, after: Option<u64>, trial: &str) -> Result<u32, Error> {
    use std::os::unix::process::CommandExt;
    let listener = confirm::bind_guard().map_err(|e| match e {
        StateError::Io { path, source } if source.kind() == std::io::ErrorKind::AddrInUse => {
            Error::Busy(format!(
                "cannot start the confirmation guard ({}: {source}); run `{}` to keep that change, or wait for \
                 it to revert",
                path.display(),
                ctx.suggest(&["confirm"])
            ))
        }
        e => e.into(),
    })?;
    let fd = listener.as_raw_fd();
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.arg("--state-dir")
        .arg(&ctx.state_base)
        .arg("--lock-timeout")
        .arg(ctx.lock_timeout.as_secs().max(600).to_string());
    cmd.args(["confirm-guard", "--seconds", &seconds.to_string(), "--after"])
        .arg(after.unwrap_or(0).to_string())
        .args(["--trial", trial])
        .arg("--apply-pid")
        .arg(std::process::id().to_string());
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: setsid and dup2 are async-signal-safe; nothing else runs
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            if nix::libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child =
        cmd.spawn().map_err(|e| Error::Other(anyhow::anyhow!("cannot start the confirmation guard: {e}")))?;
    drop(listener);
    Ok(child.id())
}

/// Waits for the guard's outcome on the link `ready` opened; Enter
/// confirms, a signal reverts now. The guard gone without an answer is
/// `NoGuard`.
fn wait_for_outcome(ctx: &Ctx, enter: Option<&AtomicBool>, link: confirm::ReadyLink) -> Answer {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(link.outcome());
    });
    let mut asked = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Ok(answer)) => return answer,
            Ok(Err(_)) => return Answer::NoGuard,
            Err(_) => {}
        }
        if asked {
            continue;
        }
        let request = if ctx.stop.requested().is_some() {
            "revert"
        } else if enter.is_some_and(|e| e.load(Ordering::SeqCst)) {
            "confirm"
        } else {
            continue;
        };
        asked = true;
        // The outcome comes on the link as well.
        let _ = confirm::ask(request, None);
    }
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

fn dry_run_script(plan: &Plan, desired: &Desired) -> String {
    let not_ready = &desired.not_ready;
    let mut comments = vec![if plan.ops.is_empty() && !not_ready.is_empty() {
        // Not "in sync": what is not ready is not as the config asks.
        format!(
            "roce-route apply --dry-run: nothing to change for what is ready; {} not ready (below)",
            count(not_ready.len(), "part is", "parts are")
        )
    } else if plan.ops.is_empty() {
        "roce-route apply --dry-run: in sync, nothing to change".to_string()
    } else {
        format!(
            "roce-route apply --dry-run: {}; nothing was changed on the host",
            count(plan.ops.len(), "change", "changes")
        )
    }];
    comments.extend(plan.warnings.iter().map(|w| format!("warning: {w}")));
    comments.extend(not_ready.iter().map(|n| n.line(&desired.unkept, &plan.ops, "left alone", "apply")));
    comments.extend(plan.conflicts.iter().map(|c| format!("adopting: {} ({})", c.entry, c.why)));
    render::script(&comments, &plan.ops)
}

fn conflicts(ctx: &Ctx, files: &[String], plan: &Plan) -> Error {
    let entries = plan.conflicts.iter().map(|c| (c.entry.clone(), c.why.clone())).collect();
    let mut report = format!(
        "{} not owned by roce-route {} in the way; nothing was changed:\n",
        count(plan.conflicts.len(), "entry", "entries"),
        if plan.conflicts.len() == 1 { "is" } else { "are" }
    );
    for c in &plan.conflicts {
        report.push_str(&format!("  {}\n    ({})\n", c.entry, c.why));
    }
    report.push_str(&format!(
        "run `{}` to take them over (replaced or deleted in the same transaction), or remove them yourself",
        ctx.suggest(&apply_args(files, &["--adopt"]))
    ));
    Error::Conflicts { report, entries }
}
