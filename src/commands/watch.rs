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
/// confirmation waiting, an error).
const RETRY: Duration = Duration::from_secs(2);

/// Why a pass runs.
enum Trigger {
    Start,
    Events(Vec<String>),
    Overflow,
    Retry,
}

impl Trigger {
    /// "after rail0: down, carrier off; rule deleted (lookup 100)".
    fn words(&self) -> String {
        match self {
            Trigger::Start => "at start".to_string(),
            Trigger::Overflow => "after lost notifications (full resync)".to_string(),
            Trigger::Retry => "on a retry".to_string(),
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

pub async fn run(ctx: &Ctx) -> Result<Done, Error> {
    let _held = hold_watch_lock()?;
    let state = ctx.state()?;
    // Subscribed before the first pass: nothing that happens after it is missed.
    let mut sub = Subscription::open()
        .map_err(|e| Error::Other(anyhow::anyhow!("cannot subscribe to rtnetlink notifications: {e}")))?;
    let mut nl = connect().await?;
    let mut term = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut int = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let mut hup = signal(SignalKind::hangup()).map_err(signal_error)?;
    let mut w = Watcher {
        ctx,
        state: &state,
        not_ready: Vec::new(),
        passes: 0,
        heals: 0,
        deferred: false,
        conflicts: Vec::new(),
    };
    log(ctx, "start", "watching; healing toward the latest apply", json!({}));
    let mut retry = w.pass(&mut nl, Trigger::Start).await;
    notify_ready();
    let coalesce = Coalesce::DEFAULT;
    loop {
        if ctx.stop.requested().is_some() {
            break;
        }
        let retry_at = retry.map(|d| tokio::time::Instant::now() + d);
        // Idle: block on the socket, the signals and a pending retry.
        let first = tokio::select! {
            got = sub.next() => got,
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => break,
            _ = sleep_until_opt(retry_at) => {
                retry = w.pass(&mut nl, Trigger::Retry).await;
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
        retry = w.pass(&mut nl, trigger).await;
    }
    let why = ctx.stop.requested().map_or("a signal".to_string(), crate::signals::name);
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
/// on stdout with --json.
fn log(ctx: &Ctx, event: &str, text: &str, fields: serde_json::Value) {
    if ctx.json {
        let mut doc = json!({ "command": "watch", "event": event, "message": text });
        if let (Some(doc), serde_json::Value::Object(f)) = (doc.as_object_mut(), fields) {
            doc.extend(f);
        }
        say!("{doc}");
    } else if ctx.chatty() {
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
}

impl Watcher<'_> {
    /// One pass; returns when to try again if it could not run. Every
    /// pass ends with a `pass` line with --json (and -v): its number, what
    /// triggered it and its outcome.
    async fn pass(&mut self, nl: &mut Netlink, trigger: Trigger) -> Option<Duration> {
        self.passes += 1;
        let (outcome, retry) = match self.try_pass(nl, &trigger).await {
            Ok(done) => done,
            Err(e) => {
                log(self.ctx, "error", &format!("this pass failed: {e}; trying again later"), json!({}));
                ("failed", Some(RETRY))
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

    async fn try_pass(
        &mut self,
        nl: &mut Netlink,
        trigger: &Trigger,
    ) -> Result<(&'static str, Option<Duration>), Error> {
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
        let req = Request { cfg: &cfg, config_files: &record.config_files, adopt: false };
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
            return Ok(("in_sync", None));
        }
        self.heals += 1;
        let owners = table_owners(&desired, &plan.ops);
        let summary = render::summary(&plan.ops, &owners);
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
