//! One pass: whether it may run (a config recorded, no confirmation
//! waiting, the namespace lock), then the heal under the lock (`heal.rs`),
//! and its `pass` line.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::commands::{Ctx, Verbosity};
use crate::config::Config;
use crate::error::Error;
use crate::netlink::Netlink;
use crate::plan::NotReady;
use crate::render::count;
use crate::state::confirm::{self, Confirmation};
use crate::state::{NetnsLock, StateDir, StateError};

use super::backoff::{Failures, MAX_BACKOFF};
use super::fight::Fight;
use super::log::{Event, log};
use super::metrics::Metrics;
use super::outcome::Outcome;
use super::timers::NewLinks;
use super::trigger::Trigger;

/// How long a pass waits for the namespace lock before trying later.
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// What the passes remember between them.
pub(super) struct Watcher<'a> {
    pub ctx: &'a Ctx,
    pub state: &'a StateDir,
    pub passes: u64,
    pub heals: u64,
    /// What the last pass left alone (reported when it changes).
    pub not_ready: Vec<NotReady>,
    /// The conflicts last reported (said once while they stay).
    pub conflicts: Vec<String>,
    /// Whether the last pass was deferred: a wait is said once, not at
    /// every retry.
    deferred: bool,
    failures: Failures,
    pub fight: Fight,
    /// Whether the notifications of the current pass were only deleted
    /// rules and routes (no link or address change): a heal of them counts
    /// toward a fight; one after a link flap does not.
    pub undone_by_agent: bool,
    /// The links were read for this pass's events an instant before it,
    /// or kept from their notifications: the pass takes them, and the
    /// addresses of links that are not rails, as they are (only for the
    /// pass that follows).
    pub links_fresh: bool,
    /// The link table and the addresses kept from notifications cannot be
    /// trusted (the socket overflowed, a message could not be read) until
    /// they are read again.
    pub links_lost: bool,
    links: NewLinks,
    /// The interfaces the recorded config names (rails and ARP-only
    /// ones), as of the last pass that read it: the only links whose
    /// events get a pass. None until then: every event does.
    pub rails: Option<BTreeSet<String>>,
    /// What an address event of a link that is not a rail must be about to
    /// get a pass (`heal::concerned`), as of the last pass that planned.
    pub concerned: Vec<crate::model::Prefix>,
    /// What `--metrics` writes, kept for the run.
    pub metrics: Metrics,
    /// The recorded config files and what they parse to, from the last
    /// pass: parsing is a pure function of their text, and parsing 32
    /// rails again cost 0.15-0.3 ms of every heal.
    parsed: Option<(Vec<(String, String)>, Config)>,
}

impl<'a> Watcher<'a> {
    pub fn new(ctx: &'a Ctx, state: &'a StateDir) -> Watcher<'a> {
        Watcher {
            ctx,
            state,
            passes: 0,
            heals: 0,
            not_ready: Vec::new(),
            conflicts: Vec::new(),
            deferred: false,
            failures: Failures::default(),
            fight: Fight::default(),
            undone_by_agent: false,
            links_fresh: false,
            links_lost: false,
            links: NewLinks::default(),
            rails: None,
            concerned: Vec::new(),
            metrics: Metrics::default(),
            parsed: None,
        }
    }

    /// After every read of the links: a link index not seen before is a
    /// rail (re)appearing, which gets a second pass shortly (udev's late
    /// sysctls).
    pub fn saw_links(&mut self, nl: &Netlink) {
        self.links.saw(self.rail_indexes(nl));
    }

    /// The indexes of the links that are rails now (every link while the
    /// rails are not known).
    pub fn rail_indexes(&self, nl: &Netlink) -> BTreeSet<u32> {
        let rail = |name: &str| self.rails.as_ref().is_none_or(|r| r.contains(name));
        nl.links().iter().filter(|l| rail(&l.name)).map(|l| l.index).collect()
    }

    /// Reads the links again (and sees them), and every address, which
    /// the next passes keep from notifications but the rails' (with 1,000
    /// pod veths a read of every address is 2 ms of a heal).
    pub async fn refresh_links(&mut self, nl: &mut Netlink) -> Result<(), Error> {
        nl.refresh_links().await.map_err(|e| Error::Other(anyhow::anyhow!("cannot read the links: {e}")))?;
        self.keep_addresses(nl).await?;
        self.links_lost = false;
        self.saw_links(nl);
        Ok(())
    }

    /// Reads every address, which the next passes keep from notifications
    /// but the rails'.
    async fn keep_addresses(&self, nl: &mut Netlink) -> Result<(), Error> {
        nl.keep_addresses(self.fresh_addresses())
            .await
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot read the addresses: {e}")))
    }

    /// The links whose addresses every pass reads from the kernel: those
    /// the config names (a rail's order of addresses makes its plan).
    fn fresh_addresses(&self) -> Vec<String> {
        self.rails.iter().flatten().cloned().collect()
    }

    /// Whether an address event of a link that is not a rail may concern
    /// the config: in a subnet its rails reached, or an address or gateway
    /// it names. A pod veth's is not.
    pub fn concerns(&self, ip: std::net::IpAddr) -> bool {
        self.concerned.iter().any(|p| p.contains(&ip))
    }

    /// Whether a rail appeared since the last call.
    pub fn take_new_link(&mut self) -> bool {
        self.links.take()
    }

    /// One pass. Every pass ends with a `pass` line with --json (and -v):
    /// its number, what triggered it and its outcome.
    pub async fn pass(&mut self, nl: &mut Netlink, trigger: Trigger) -> Outcome {
        self.passes += 1;
        let outcome = match self.try_pass(nl, &trigger).await {
            Ok(outcome) => {
                self.went_through();
                outcome
            }
            Err(e) => self.failed(&e),
        };
        self.deferred = outcome == Outcome::Deferred;
        match outcome {
            Outcome::Failed { .. } => self.metrics.failed(),
            // A wait (a confirmation, the lock) or a stop is no pass that
            // went through: a watch held back for good shows as one whose
            // last success gets old.
            Outcome::Deferred | Outcome::Stopped => {}
            Outcome::NoConfig | Outcome::Conflicts | Outcome::InSync | Outcome::Healed => {
                self.metrics.succeeded(std::time::SystemTime::now());
            }
        }
        self.write_metrics();
        if self.ctx.json || self.ctx.verbosity == Verbosity::Verbose {
            let why = trigger.words();
            log(
                self.ctx,
                &format!("pass {} {why}: {}", self.passes, outcome.name()),
                Event::Pass {
                    pass: self.passes,
                    outcome: outcome.name(),
                    trigger: trigger.metric().label(),
                    triggers: trigger.events(),
                },
            );
        }
        outcome
    }

    /// Writes the metrics file (with --metrics); a failure is a warning,
    /// said once while it repeats.
    pub fn write_metrics(&mut self) {
        if let Some(e) = self.metrics.write(self.state) {
            self.ctx.warn(e);
        }
    }

    /// A pass that did not fail, after some that did: said, with a count.
    fn went_through(&mut self) {
        let Some(failed) = self.failures.recovered() else { return };
        self.flush_repeats();
        log(
            self.ctx,
            &format!(
                "a pass went through again after {}",
                count(failed as usize, "failed pass", "failed passes")
            ),
            Event::Recovered { failed_passes: failed },
        );
    }

    /// A failed pass: its error is said (once while it repeats), and the
    /// next try waits longer than the last.
    fn failed(&mut self, e: &Error) -> Outcome {
        let wait = self.failures.wait();
        let text = e.to_string();
        if !self.failures.repeats(&text) {
            self.flush_repeats();
            log(
                self.ctx,
                &format!(
                    "this pass failed: {text}; trying again in {} s (longer after each failure, up to {} s)",
                    wait.as_secs(),
                    MAX_BACKOFF.as_secs()
                ),
                Event::Error { error: &text, retry_seconds: wait.as_secs() },
            );
            self.failures.said(text);
        }
        // Notifications meanwhile wait for the retry: a pass that fails for
        // a reason that stays would fail on each of them.
        self.fight.hold_until(Instant::now() + wait);
        Outcome::Failed { retry: wait }
    }

    /// Says how often the last error repeated, if it did.
    pub fn flush_repeats(&mut self) {
        if let Some(r) = self.failures.take_repeats() {
            log(
                self.ctx,
                &format!("the error above repeated {} times in all: {}", r.times, r.text),
                Event::Repeated { count: r.times, error: &r.text },
            );
        }
    }

    async fn try_pass(&mut self, nl: &mut Netlink, trigger: &Trigger) -> Result<Outcome, Error> {
        let links_fresh = std::mem::take(&mut self.links_fresh);
        self.fight.expire(Instant::now());
        let lock = match self.may_run()? {
            Ok(lock) => lock,
            Err(outcome) => return Ok(outcome),
        };
        // A trial whose guard died (OOM, a stopped unit) is not kept: it is
        // reverted here, and the config before it followed.
        self.revert_orphaned_trial(nl).await?;
        // Under the lock: the record as the last command left it.
        let record = self.state.record()?;
        if record.config_files.is_empty() {
            return Ok(Outcome::NoConfig);
        }
        if self.confirmation_waits().is_some() {
            return Ok(Outcome::Deferred);
        }
        let cfg = config_of(&mut self.parsed, &record.config_files)?;
        self.rails = Some(cfg.names().map(String::from).collect());
        nl.fresh_addresses_of(self.fresh_addresses());
        if !links_fresh {
            self.refresh_links(nl).await?;
        } else if !nl.keeps_addresses() {
            // The first passes ended before reading them (no config yet,
            // a confirmation waited): kept from now on.
            self.keep_addresses(nl).await?;
        }
        let converged = self.converge(nl, &cfg, &record).await?;
        drop(lock);
        match converged {
            Ok(converged) => Ok(self.report(nl, &cfg, converged, trigger).await),
            Err(conflicts) => Ok(self.conflicts_found(conflicts)),
        }
    }

    /// Whether this pass may heal: the namespace lock when it may, else
    /// why not (a wait is said once).
    fn may_run(&mut self) -> Result<Result<NetnsLock, Outcome>, Error> {
        if self.state.record()?.config_files.is_empty() {
            return Ok(Err(Outcome::NoConfig));
        }
        if let Some(wait) = self.confirmation_waits() {
            if !self.deferred {
                log(self.ctx, &wait, Event::Deferred { reason: "confirmation" });
            }
            return Ok(Err(Outcome::Deferred));
        }
        match NetnsLock::acquire(LOCK_WAIT, &self.ctx.stop) {
            Ok(lock) => Ok(Ok(lock)),
            Err(StateError::Locked { holder, .. }) => {
                let who = holder.map_or_else(String::new, |h| format!(" ({h})"));
                if !self.deferred {
                    let text = format!("another roce-route{who} is working here; trying again later");
                    log(self.ctx, &text, Event::Deferred { reason: "lock" });
                }
                Ok(Err(Outcome::Deferred))
            }
            Err(StateError::LockInterrupted { .. }) => Ok(Err(Outcome::Stopped)),
            Err(e) => Err(e.into()),
        }
    }

    /// Reverts the trial of an `apply --confirm` whose guard is gone
    /// without an answer (see `settle_orphaned_trial`): its change must not
    /// become permanent by being healed. Under the lock.
    async fn revert_orphaned_trial(&mut self, nl: &Netlink) -> Result<(), Error> {
        if let Some(what) = crate::commands::settle_orphaned_trial(&self.ctx.stop, self.state, nl).await? {
            log(self.ctx, &format!("{what}; following the config before it"), Event::TrialReverted {});
        }
        Ok(())
    }

    /// Why not to heal now: an `apply --confirm` waits for its
    /// confirmation (healing would make the trial change permanent or
    /// fight its revert).
    /// The one answer to "is a confirmation waiting", from the guard only:
    /// an orphaned trial (no guard, `pending` left) is reverted under the
    /// lock by `settle_orphaned_trial`, not here.
    fn confirmation_waits(&self) -> Option<String> {
        match confirm::confirmation(None) {
            Ok(Confirmation::Waiting { seconds_left, apply_pid }) => Some(format!(
                "an `apply --confirm` (pid {apply_pid}) waits for its confirmation ({seconds_left} s left): \
                 not healing until it is confirmed or reverted"
            )),
            // A guard listens but does not answer (starting, busy): wait.
            Ok(Confirmation::Unanswered(e)) => Some(format!(
                "the guard of an `apply --confirm` does not answer ({e}): not healing until it does or is gone"
            )),
            Ok(Confirmation::None | Confirmation::Orphaned(_)) | Err(_) => None,
        }
    }
}

/// The config of `files`, parsed again only when their text changed since
/// the one `parsed` keeps.
fn config_of(
    parsed: &mut Option<(Vec<(String, String)>, Config)>,
    files: &[(String, String)],
) -> Result<Config, Error> {
    match parsed {
        Some((text, cfg)) if text.as_slice() == files => Ok(cfg.clone()),
        _ => {
            let cfg = crate::config::parse_many(files)?;
            *parsed = Some((files.to_vec(), cfg.clone()));
            Ok(cfg)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The config kept between passes follows the recorded text: an apply
    /// of another config is planned as the new one, never the kept one.
    #[test]
    fn the_kept_config_follows_the_recorded_text() {
        let files = |rail: &str| vec![("c.toml".to_string(), format!("[[interface]]\nname = \"{rail}\"\n"))];
        let mut parsed = None;
        let names = |cfg: Config| cfg.interfaces.iter().map(|i| i.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(config_of(&mut parsed, &files("rail0")).unwrap()), ["rail0"]);
        assert_eq!(names(config_of(&mut parsed, &files("rail0")).unwrap()), ["rail0"]);
        assert_eq!(names(config_of(&mut parsed, &files("rail1")).unwrap()), ["rail1"]);
        let mut two = files("rail1");
        two.push(("d.toml".to_string(), "[[interface]]\nname = \"rail2\"\n".to_string()));
        assert_eq!(names(config_of(&mut parsed, &two).unwrap()), ["rail1", "rail2"]);
        // A text that does not parse is an error, and is not kept.
        let bad = vec![("c.toml".to_string(), "[[interface]\n".to_string())];
        assert!(config_of(&mut parsed, &bad).is_err());
        assert_eq!(names(config_of(&mut parsed, &two).unwrap()), ["rail1", "rail2"]);
    }
}
