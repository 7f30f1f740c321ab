//! `roce-route watch`: keep the host as the latest apply in its network
//! namespace left it. It reconciles once, then listens to rtnetlink
//! notifications (links, addresses, routes, rules); after each burst it
//! plans the recorded config (`Record::config_files`) against the live
//! host again and makes the difference through the same transaction loop
//! as apply (`converge`), under the namespace lock, then tells the peers
//! of the healed rails. It never heals while an `apply --confirm` waits,
//! and does nothing while no config is recorded (after `remove`).

use std::collections::BTreeSet;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};

use super::{Ctx, Done, connect, tell_peers};
use crate::announce;
use crate::config;
use crate::converge::{self, Converged, Request, table_owners};
use crate::error::Error;
use crate::events::{Coalesce, Event, Received, Subscription};
use crate::netlink::Netlink;
use crate::plan::NotReady;
use crate::render::{self, count};
use crate::say;
use crate::state::confirm::{self, Answer};
use crate::state::{NetnsLock, Record, StateDir, StateError, lock, rundir};
use crate::tell;

/// The file a running watch holds a flock on, in the run directory of its
/// network namespace (root's own: no other user can take it first).
pub const WATCH_LOCK: &str = "watch.lock";

/// How long a pass waits for the namespace lock before trying later.
const LOCK_WAIT: Duration = Duration::from_secs(5);
/// When to try again after a pass could not run (lock busy, a
/// confirmation waiting); a pass that failed waits this long, doubled
/// after each further failure, up to MAX_BACKOFF.
const RETRY: Duration = Duration::from_secs(2);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A second pass this long after a rail appeared: udev runs
/// `systemd-sysctl --prefix=/net/ipv4/conf/<if>` for a new netdev later
/// than the heal, and a sysctl write sends no notification.
const RECHECK_AFTER_NEW_LINK: Duration = Duration::from_secs(3);
/// Heals of the same entries this many times within FIGHT_WINDOW: another
/// agent undoes them; the heals back off from FIGHT_HOLD, doubling, up to
/// MAX_FIGHT_HOLD.
const FIGHT_HEALS: usize = 3;
const FIGHT_WINDOW: Duration = Duration::from_secs(60);
const FIGHT_HOLD: Duration = Duration::from_secs(5);
const MAX_FIGHT_HOLD: Duration = Duration::from_secs(300);

/// Why a pass runs.
enum Trigger {
    Start,
    Events(Vec<String>),
    Overflow,
    Retry,
    /// Shortly after a rail appeared.
    Recheck,
    /// The periodic resync (`--resync`).
    Resync,
}

impl Trigger {
    /// "after rail0: down, carrier off; rule deleted (lookup 100)".
    fn words(&self) -> String {
        match self {
            Trigger::Start => "at start".to_string(),
            Trigger::Overflow => "after lost notifications (full resync)".to_string(),
            Trigger::Retry => "on a retry".to_string(),
            Trigger::Recheck => "shortly after a rail appeared (udev may reset its sysctls)".to_string(),
            Trigger::Resync => "on the periodic resync".to_string(),
            Trigger::Events(e) => {
                let shown: Vec<&str> = e.iter().take(8).map(String::as_str).collect();
                let more = if e.len() > 8 { format!(" and {} more", e.len() - 8) } else { String::new() };
                format!("after {}{more}", shown.join("; "))
            }
        }
    }

    fn events(&self) -> Vec<String> {
        match self {
            Trigger::Events(e) => e.clone(),
            _ => Vec::new(),
        }
    }
}

/// When the loop acts without a notification.
#[derive(Default)]
struct Timers {
    /// A pass that could not run or failed, or heals held back.
    retry: Option<Instant>,
    /// The second pass after a rail appeared.
    recheck: Option<Instant>,
    /// The next periodic resync.
    resync: Option<Instant>,
}

impl Timers {
    /// The earliest timer and the trigger of its pass.
    fn next(&self) -> Option<(Instant, Trigger)> {
        [(self.retry, 0), (self.recheck, 1), (self.resync, 2)]
            .into_iter()
            .filter_map(|(at, which)| at.map(|at| (at, which)))
            .min_by_key(|(at, _)| *at)
            .map(|(at, which)| (at, [Trigger::Retry, Trigger::Recheck, Trigger::Resync][which].take()))
    }

    /// After any pass: the retry it asks for; the resync counts from now.
    fn passed(&mut self, retry: Option<Duration>, resync: Option<Duration>) {
        let now = Instant::now();
        self.retry = retry.map(|d| now + d);
        self.resync = resync.map(|d| now + d);
        if self.recheck.is_some_and(|at| at <= now) {
            self.recheck = None;
        }
    }
}

impl Trigger {
    fn take(&self) -> Trigger {
        match self {
            Trigger::Retry => Trigger::Retry,
            Trigger::Recheck => Trigger::Recheck,
            Trigger::Resync => Trigger::Resync,
            Trigger::Start => Trigger::Start,
            Trigger::Overflow => Trigger::Overflow,
            Trigger::Events(e) => Trigger::Events(e.clone()),
        }
    }
}

pub async fn run(ctx: &Ctx, args: &crate::cli::WatchArgs) -> Result<Done, Error> {
    // Days of running: each warning is a line when it happens.
    ctx.stream_warnings("watch");
    let _held = hold_watch_lock()?;
    let state = ctx.state()?;
    // Subscribed before the first pass: nothing that happens after it is missed.
    let mut sub = Subscription::open()
        .map_err(|e| Error::Other(anyhow::anyhow!("cannot subscribe to rtnetlink notifications: {e}")))?;
    let mut nl = connect().await?;
    let mut term = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut int = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let mut hup = signal(SignalKind::hangup()).map_err(signal_error)?;
    let resync = (args.resync > 0).then(|| Duration::from_secs(args.resync));
    let mut w = Watcher::new(ctx, &state);
    w.saw_links(&nl);
    log(ctx, "start", "watching; healing toward the latest apply", json!({}));
    let mut timers = Timers::default();
    let retry = w.pass(&mut nl, Trigger::Start).await;
    timers.passed(retry, resync);
    notify_ready();
    let coalesce = Coalesce::DEFAULT;
    loop {
        if ctx.stop.requested().is_some() {
            break;
        }
        let next = timers.next();
        // Idle: block on the socket, the signals and the next timer.
        let first = tokio::select! {
            got = sub.next() => got,
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => break,
            _ = sleep_until_opt(next.as_ref().map(|(at, _)| tokio::time::Instant::from_std(*at))) => {
                let trigger = next.map_or(Trigger::Retry, |(_, t)| t);
                if matches!(trigger, Trigger::Recheck) {
                    timers.recheck = None;
                }
                let retry = w.pass(&mut nl, trigger).await;
                timers.passed(retry, resync);
                if w.take_new_link() {
                    timers.recheck = Some(Instant::now() + RECHECK_AFTER_NEW_LINK);
                }
                continue;
            }
        };
        let started = Instant::now();
        let mut overflow = false;
        let mut events: Vec<Event> = Vec::new();
        let mut take = |got: std::io::Result<Received>| -> Result<(), Error> {
            match got {
                Ok(Received::Events(e)) => events.extend(e),
                Ok(Received::Overflow) => overflow = true,
                Err(e) => {
                    return Err(Error::Other(anyhow::anyhow!("the rtnetlink notifications failed: {e}")));
                }
            }
            Ok(())
        };
        take(first)?;
        let mut last = started;
        // A burst: drain until quiet (or the cap).
        let mut stopped = false;
        loop {
            let due = coalesce.due(Duration::ZERO, last - started);
            let deadline = tokio::time::Instant::from_std(started + due);
            tokio::select! {
                got = sub.next() => { take(got)?; last = Instant::now(); }
                _ = tokio::time::sleep_until(deadline) => break,
                _ = term.recv() => { stopped = true; break }
                _ = int.recv() => { stopped = true; break }
                _ = hup.recv() => { stopped = true; break }
            }
        }
        if stopped {
            break;
        }
        if !overflow && events.is_empty() {
            continue;
        }
        nl.refresh_links().await.map_err(|e| Error::Other(anyhow::anyhow!("cannot read the links: {e}")))?;
        w.saw_links(&nl);
        let trigger = if overflow {
            Trigger::Overflow
        } else {
            let mut seen = Vec::new();
            for e in &events {
                let d = e.describe(|i| nl.links().iter().find(|l| l.index == i).map(|l| l.name.clone()));
                if !seen.contains(&d) {
                    seen.push(d);
                }
            }
            Trigger::Events(seen)
        };
        // Only rules and routes went, with no link or address change: the
        // kernel did not flush them, an agent deleted them.
        w.undone_by_agent = !overflow
            && events.iter().all(|e| {
                e.ifindex.is_none() && (e.what.starts_with("rule ") || e.what.starts_with("route "))
            });
        // Passes held back (another agent undoes the heals over and over,
        // or the last pass failed): the events wait for the held pass.
        if let Some(until) = w.held_until().filter(|until| *until > Instant::now()) {
            w.held += 1;
            timers.retry = Some(until);
            continue;
        }
        let retry = w.pass(&mut nl, trigger).await;
        timers.passed(retry, resync);
        if w.take_new_link() {
            timers.recheck = Some(Instant::now() + RECHECK_AFTER_NEW_LINK);
        }
    }
    let why = ctx.stop.requested().map_or("a signal".to_string(), crate::signals::name);
    w.flush_repeats();
    log(
        ctx,
        "stop",
        &format!("stopping on {why}; the configuration stays in place ({} heals)", w.heals),
        json!({ "passes": w.passes, "heals": w.heals }),
    );
    Ok(Done::new(0, w.heals > 0, json!({ "passes": w.passes, "heals": w.heals })))
}

fn signal_error(e: std::io::Error) -> Error {
    Error::Other(anyhow::anyhow!("cannot install signal handlers: {e}"))
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Holds the flock of `watch.lock` for the process's lifetime: a second
/// watch in the same namespace is refused, naming the first.
fn hold_watch_lock() -> Result<impl Drop, Error> {
    let path = rundir::ensure()?.join(WATCH_LOCK);
    match lock::try_hold(&path) {
        Ok(held) => Ok(held),
        Err(StateError::Locked { holder, .. }) => {
            let who = holder.map_or_else(|| "another process".to_string(), |h| h.to_string());
            Err(Error::Busy(format!(
                "another `roce-route watch` ({who}) already keeps this network namespace applied ({} is \
                 held); only one may run per namespace: stop that one first",
                path.display()
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// `READY=1` to systemd when NOTIFY_SOCKET is set (Type=notify).
fn notify_ready() {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let Ok(sock) = UnixDatagram::unbound() else { return };
    let path = path.to_string_lossy().into_owned();
    let addr = match path.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes()),
        None => SocketAddr::from_pathname(&path),
    };
    if let Ok(addr) = addr {
        let _ = sock.send_to_addr(b"READY=1", &addr);
    }
}

/// One line on stderr (journald-friendly), or one JSON document per line
/// on stdout with --json. `-q` silences the routine lines (start, stop,
/// heals, passes); what needs an operator (errors, conflicts, parts not
/// ready, a fight with another agent) is always said.
fn log(ctx: &Ctx, event: &str, text: &str, fields: serde_json::Value) {
    let routine = matches!(event, "start" | "stop" | "heal" | "pass");
    if routine && ctx.verbosity == crate::commands::Verbosity::Quiet {
        return;
    }
    if ctx.json {
        let mut doc = json!({ "command": "watch", "event": event, "message": text });
        if let (Some(doc), serde_json::Value::Object(f)) = (doc.as_object_mut(), fields) {
            doc.extend(f);
        }
        say!("{doc}");
    } else {
        tell!("roce-route watch: {text}");
    }
}

struct Watcher<'a> {
    ctx: &'a Ctx,
    state: &'a StateDir,
    /// What the last pass left alone (reported when it changes).
    not_ready: Vec<NotReady>,
    passes: u64,
    heals: u64,
    /// The conflicts last reported (said once while they stay).
    conflicts: Vec<String>,
    /// Whether the last pass was deferred: a wait is said once, not at
    /// every retry.
    deferred: bool,
    /// Consecutive failed passes, and the last error said (a repeated
    /// error is said once, then counted).
    failures: u32,
    last_error: Option<(String, u64)>,
    /// Recent heals (when, and the entries healed), to see another agent
    /// undo them over and over.
    recent_heals: std::collections::VecDeque<(Instant, Vec<String>)>,
    /// While another agent undoes the heals: how many holds in a row, and
    /// until when heals wait; the bursts of notifications held meanwhile.
    fight_level: u32,
    held_until: Option<Instant>,
    held: u64,
    /// Whether the notifications of the current pass were only deleted
    /// rules and routes (no link or address change): a heal of them counts
    /// toward a fight; one after a link flap does not.
    undone_by_agent: bool,
    /// The link indexes seen at the last read of the links, and whether a
    /// new one appeared since the last look (wherever the links were read).
    known_links: Option<BTreeSet<u32>>,
    new_link: bool,
}

impl<'a> Watcher<'a> {
    fn new(ctx: &'a Ctx, state: &'a StateDir) -> Watcher<'a> {
        Watcher {
            ctx,
            state,
            not_ready: Vec::new(),
            passes: 0,
            heals: 0,
            deferred: false,
            conflicts: Vec::new(),
            failures: 0,
            last_error: None,
            recent_heals: Default::default(),
            fight_level: 0,
            held_until: None,
            held: 0,
            undone_by_agent: false,
            known_links: None,
            new_link: false,
        }
    }

    /// After every read of the links: a link index not seen before is a
    /// rail (re)appearing, which gets a second pass shortly (udev's late
    /// sysctls).
    fn saw_links(&mut self, nl: &Netlink) {
        let now: BTreeSet<u32> = nl.links().iter().map(|l| l.index).collect();
        if let Some(known) = &self.known_links
            && now.iter().any(|i| !known.contains(i))
        {
            self.new_link = true;
        }
        self.known_links = Some(now);
    }

    fn take_new_link(&mut self) -> bool {
        std::mem::take(&mut self.new_link)
    }

    fn held_until(&self) -> Option<Instant> {
        self.held_until
    }

    /// One pass; returns when to try again if it could not run. Every
    /// pass ends with a `pass` line with --json (and -v): its number, what
    /// triggered it and its outcome.
    async fn pass(&mut self, nl: &mut Netlink, trigger: Trigger) -> Option<Duration> {
        self.passes += 1;
        let (outcome, retry) = match self.try_pass(nl, &trigger).await {
            Ok(done) => {
                if self.failures > 0 {
                    self.flush_repeats();
                    log(
                        self.ctx,
                        "recovered",
                        &format!(
                            "a pass went through again after {}",
                            count(self.failures as usize, "failed pass", "failed passes")
                        ),
                        json!({ "failed_passes": self.failures }),
                    );
                }
                self.failures = 0;
                self.last_error = None;
                done
            }
            Err(e) => {
                self.failures += 1;
                let wait = backoff(RETRY, self.failures, MAX_BACKOFF);
                let text = e.to_string();
                match &mut self.last_error {
                    Some((last, n)) if *last == text => *n += 1,
                    _ => {
                        self.flush_repeats();
                        log(
                            self.ctx,
                            "error",
                            &format!(
                                "this pass failed: {text}; trying again in {} s (longer after each failure, up to {} s)",
                                wait.as_secs(),
                                MAX_BACKOFF.as_secs()
                            ),
                            json!({ "retry_seconds": wait.as_secs() }),
                        );
                        self.last_error = Some((text, 1));
                    }
                }
                // Notifications meanwhile wait for the retry: a pass that
                // fails for a reason that stays would fail on each of them.
                self.held_until = Some(Instant::now() + wait);
                ("failed", Some(wait))
            }
        };
        self.deferred = outcome == "deferred";
        if self.ctx.json || self.ctx.verbosity == crate::commands::Verbosity::Verbose {
            let why = trigger.words();
            log(
                self.ctx,
                "pass",
                &format!("pass {} {why}: {outcome}", self.passes),
                json!({ "pass": self.passes, "outcome": outcome, "triggers": trigger.events() }),
            );
        }
        retry
    }

    /// Says how often the last error repeated, if it did.
    fn flush_repeats(&mut self) {
        if let Some((text, n)) = self.last_error.take()
            && n > 1
        {
            log(
                self.ctx,
                "repeated",
                &format!("the error above repeated {n} times in all: {text}"),
                json!({ "count": n, "error": text }),
            );
        }
    }

    /// After a heal of `summary`: when the same entries were healed
    /// FIGHT_HEALS times within FIGHT_WINDOW, another agent undoes them:
    /// from then on each heal is followed by a hold (doubling, up to
    /// MAX_FIGHT_HOLD) until a pass finds the host in sync. The fight is
    /// said once, with the suspects, and its end with a count.
    fn note_heal(&mut self, summary: &[String]) {
        let now = Instant::now();
        self.recent_heals.retain(|(at, _)| now.duration_since(*at) < FIGHT_WINDOW);
        self.recent_heals.push_back((now, summary.to_vec()));
        let same = self.recent_heals.iter().filter(|(_, s)| s == summary).count();
        if self.fight_level == 0 && same < FIGHT_HEALS {
            return;
        }
        self.fight_level += 1;
        let hold = backoff(FIGHT_HOLD, self.fight_level, MAX_FIGHT_HOLD);
        self.held_until = Some(now + hold);
        if self.fight_level > 1 {
            return;
        }
        let suspects = crate::managers::suspects(&crate::managers::scan());
        let who = if suspects.is_empty() {
            "no known network manager runs here: look for an agent that owns these entries (a CNI plugin, \
             a routing daemon, a script)"
                .to_string()
        } else {
            format!("suspects: {}", suspects.join("; "))
        };
        log(
            self.ctx,
            "fighting",
            &format!(
                "healed the same entries {same} times within {} s: something undoes them right after each heal \
                 ({who}); each heal now waits {} s more than the last (up to {} s) until they stay: {}",
                FIGHT_WINDOW.as_secs(),
                hold.as_secs(),
                MAX_FIGHT_HOLD.as_secs(),
                summary.join("; ")
            ),
            json!({ "heals": same, "hold_seconds": hold.as_secs(), "suspects": suspects, "summary": summary }),
        );
    }

    async fn try_pass(
        &mut self,
        nl: &mut Netlink,
        trigger: &Trigger,
    ) -> Result<(&'static str, Option<Duration>), Error> {
        // A hold that ran out: this pass is the held one.
        if self.held_until.is_some_and(|until| until <= Instant::now()) {
            self.held_until = None;
            self.held = 0;
        }
        if self.state.record()?.config_files.is_empty() {
            return Ok(("no_config", None));
        }
        if let Some(wait) = self.confirmation_waits() {
            if !self.deferred {
                log(self.ctx, "deferred", &wait, json!({}));
            }
            return Ok(("deferred", Some(RETRY)));
        }
        let lock = match NetnsLock::acquire(LOCK_WAIT, &self.ctx.stop) {
            Ok(lock) => lock,
            Err(StateError::Locked { holder, .. }) => {
                let who = holder.map_or_else(String::new, |h| format!(" ({h})"));
                if !self.deferred {
                    log(
                        self.ctx,
                        "deferred",
                        &format!("another roce-route{who} is working here; trying again later"),
                        json!({}),
                    );
                }
                return Ok(("deferred", Some(RETRY)));
            }
            Err(StateError::LockInterrupted { .. }) => return Ok(("stopped", None)),
            Err(e) => return Err(e.into()),
        };
        // A trial whose guard died (OOM, a stopped unit) is not kept: it is
        // reverted here, and the config before it followed.
        self.revert_orphaned_trial(nl).await?;
        // Under the lock: the record as the last command left it.
        let record = self.state.record()?;
        if record.config_files.is_empty() {
            return Ok(("no_config", None));
        }
        if self.confirmation_waits().is_some() {
            return Ok(("deferred", Some(RETRY)));
        }
        let cfg = config::parse_many(&record.config_files)?;
        nl.refresh_links().await.map_err(|e| Error::Other(anyhow::anyhow!("cannot read the links: {e}")))?;
        self.saw_links(nl);
        let ctx = self.ctx;
        let req = Request {
            cfg: &cfg,
            config_files: &record.config_files,
            adopt: false,
            kind: crate::state::RunKind::Heal,
            trial: None,
            notice: &|m| log(ctx, "retry", m, json!({})),
        };
        let addrs = nl
            .addresses()
            .await
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot read the addresses: {e}")))?;
        let adjust = |r: &mut Record| forget_replaced(r, &addrs);
        // Like apply without --adopt: an entry roce-route does not own in
        // the place of one of its own stops the heal; watch never takes
        // one over.
        let mut conflicts = Vec::new();
        let gate = |_: &Record, _: &crate::plan::Desired, plan: &crate::diff::Plan| {
            if plan.conflicts.is_empty() {
                return Ok(());
            }
            conflicts = plan.conflicts.iter().map(|c| format!("{} ({})", c.entry, c.why)).collect();
            Err(Error::Other(anyhow::anyhow!("conflicts")))
        };
        let converged = converge::converge(self.state, nl, &self.ctx.stop, &req, gate, adjust).await;
        drop(lock);
        let Converged { desired, plan, header } = match converged {
            Err(_) if !conflicts.is_empty() => {
                if conflicts != self.conflicts {
                    log(
                        self.ctx,
                        "conflicts",
                        &format!(
                            "not healing: entries roce-route does not own hold the places of its own: {}; \
                             remove them, or take them over with `{}`",
                            conflicts.join("; "),
                            self.ctx.suggest(&["apply", "--adopt", "CONFIG"])
                        ),
                        json!({ "conflicts": conflicts }),
                    );
                    self.conflicts = conflicts;
                }
                return Ok(("conflicts", None));
            }
            other => other?,
        };
        self.conflicts.clear();
        if desired.not_ready != self.not_ready {
            for nr in desired.not_ready.iter().filter(|n| !self.not_ready.contains(n)) {
                log(
                    self.ctx,
                    "not_ready",
                    &format!("not ready, left alone until it is: {}", nr.describe()),
                    json!({ "interface": nr.interface, "address": nr.address, "reason": nr.reason }),
                );
            }
            self.not_ready = desired.not_ready.clone();
        }
        if header.is_none() {
            // Nothing undid the last heal: the fight, if any, is over.
            if self.fight_level > 0 {
                log(
                    self.ctx,
                    "fight_over",
                    &format!(
                        "the entries stayed: the fight is over after {} held back",
                        count(self.fight_level as usize, "heal", "heals")
                    ),
                    json!({ "held_heals": self.fight_level, "held_bursts": self.held }),
                );
                self.fight_level = 0;
                self.held = 0;
                self.recent_heals.clear();
            }
            return Ok(("in_sync", None));
        }
        self.heals += 1;
        let owners = table_owners(&desired, &plan.ops);
        let summary = render::summary(&plan.ops, &owners);
        // A held pass goes on with the fight it was held for.
        let by_agent = match trigger {
            Trigger::Events(_) => self.undone_by_agent,
            Trigger::Retry => self.fight_level > 0,
            _ => false,
        };
        if by_agent {
            self.note_heal(&summary);
        }
        let why = trigger.words();
        // One round per heal: the extra rounds of `apply` sleep between
        // sends, and a heal must not hold the event loop for them.
        let rounds = cfg.defaults.announce.min(1);
        let mut announced = Vec::new();
        if rounds > 0 {
            let rails: BTreeSet<String> = announce::touched(&desired, &plan.ops);
            announced = tell_peers(self.ctx, nl, &desired, Some(&rails), rounds).await.announced;
        }
        log(
            self.ctx,
            "heal",
            &format!(
                "healed {} {why}: {}{}",
                count(plan.ops.len(), "change", "changes"),
                summary.join("; "),
                if announced.is_empty() {
                    String::new()
                } else {
                    format!("; announced {}", count(announced.len(), "address", "addresses"))
                }
            ),
            json!({
                "changes": plan.ops.iter().map(super::Change::of).collect::<Vec<_>>(),
                "summary": summary,
                "triggers": trigger.events(),
                "pass": self.passes,
                "announced": announced,
            }),
        );
        Ok(("healed", None))
    }

    /// Reverts the trial of an `apply --confirm` whose guard is gone
    /// without an answer (see `settle_orphaned_trial`): its change must not
    /// become permanent by being healed. Under the lock.
    async fn revert_orphaned_trial(&mut self, nl: &Netlink) -> Result<(), Error> {
        if let Some(what) = super::settle_orphaned_trial(&self.ctx.stop, self.state, nl).await? {
            log(self.ctx, "trial_reverted", &format!("{what}; following the config before it"), json!({}));
        }
        Ok(())
    }

    /// Why not to heal now: an `apply --confirm` waits for its
    /// confirmation (healing would make the trial change permanent or
    /// fight its revert).
    fn confirmation_waits(&self) -> Option<String> {
        match confirm::ask("status", Some(Duration::from_secs(1))) {
            Ok(Answer::Waiting { seconds_left, apply_pid }) => Some(format!(
                "an `apply --confirm` (pid {apply_pid}) waits for its confirmation ({seconds_left} s left): \
                 not healing until it is confirmed or reverted"
            )),
            Ok(_) => None,
            // A guard listens but does not answer (starting, busy): wait.
            Err(e) => Some(format!(
                "the guard of an `apply --confirm` does not answer ({e}): not healing until it does or is gone"
            )),
        }
    }
}

/// `first` doubled for each failure after the first, at most `cap`. Pure.
fn backoff(first: Duration, failures: u32, cap: Duration) -> Duration {
    first.saturating_mul(1u32 << failures.saturating_sub(1).min(16)).min(cap)
}

/// A discovered address replaced by another of the same family on the
/// same interface was replaced, not flushed by a flap: it is forgotten
/// (its rule goes), where apply would keep it as not ready.
/// Pure.
pub fn forget_replaced(record: &mut Record, live: &[crate::model::Address]) {
    for (iface, prefixes) in record.discovered.iter_mut() {
        prefixes.retain(|p| {
            !live.iter().any(|a| {
                &a.ifname == iface
                    && a.scope == crate::model::scope::UNIVERSE
                    && a.addr.addr.is_ipv4() == p.addr.is_ipv4()
                    && a.addr.addr != p.addr
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Address, Prefix};

    fn addr(ifname: &str, ip: &str) -> Address {
        Address {
            ifname: ifname.into(),
            addr: Prefix { addr: ip.parse().unwrap(), len: 24 },
            peer: None,
            scope: 0,
            tentative: false,
            deprecated: false,
            temporary: false,
            dad_failed: false,
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let s = |n| backoff(RETRY, n, MAX_BACKOFF).as_secs();
        assert_eq!([s(1), s(2), s(3), s(4), s(5), s(6), s(7), s(40)], [2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn a_replaced_discovered_address_is_forgotten_a_flushed_one_kept() {
        let p = |ip: &str| Prefix { addr: ip.parse().unwrap(), len: 24 };
        let mut record = Record::default();
        record.discovered.insert("rail0".into(), vec![p("198.51.100.10")]);
        record.discovered.insert("rail1".into(), vec![p("198.51.100.11")]);
        // rail0's address was replaced; rail1's is gone with nothing instead (a flap).
        forget_replaced(&mut record, &[addr("rail0", "198.51.100.20"), addr("rail2", "198.51.100.12")]);
        assert!(record.discovered["rail0"].is_empty());
        assert_eq!(record.discovered["rail1"], vec![p("198.51.100.11")]);
    }
}
