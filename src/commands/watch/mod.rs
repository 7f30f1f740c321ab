//! `roce-route watch`: keep the host as the latest apply in its network
//! namespace left it. It reconciles once, then listens to rtnetlink
//! notifications (links, addresses, routes, rules); after each burst it
//! plans the recorded config (`Record::config_files`) against the live
//! host again and makes the difference through the same transaction loop
//! as apply (`converge`), under the namespace lock, then tells the peers
//! of the healed rails. It never heals while an `apply --confirm` waits,
//! and does nothing while no config is recorded (after `remove`).
//!
//! This file is the main loop; `listen` waits for what wakes it, `pass`
//! and `heal` are one pass, `timers`, `fight` and `backoff` decide when
//! the next one runs.

mod backoff;
mod fight;
mod heal;
mod listen;
mod log;
mod metrics;
mod outcome;
mod pass;
mod quiet;
mod service;
mod timers;
mod trigger;

use std::time::{Duration, Instant};

use serde_json::json;

use super::{Ctx, Done, connect};
use crate::error::Error;
use crate::events::Heard;
use crate::netlink::Netlink;

pub use heal::forget_replaced;
pub use service::WATCH_LOCK;

use listen::{Listener, Wake};
use log::{Event, log};
use pass::Watcher;
use timers::Timers;
use trigger::Trigger;

pub async fn run(ctx: &Ctx, args: &crate::cli::WatchArgs) -> Result<Done, Error> {
    // Days of running: each warning is a line when it happens.
    ctx.stream_warnings("watch");
    // Only the metrics read sysfs: without --metrics, a host or container
    // with no usable /sys still gets its heals.
    let sysfs = args.metrics.as_ref().map(|_| crate::rdma_read::sysfs_dir(&args.sysfs)).transpose()?;
    let _held = service::hold_watch_lock()?;
    let state = ctx.state()?;
    // Subscribed before the first pass: nothing that happens after it is missed.
    let mut listener = Listener::open(&ctx.stop)?;
    let nl = connect().await?;
    let resync = (args.resync > 0).then(|| Duration::from_secs(args.resync));
    let mut w = Watching { w: Watcher::new(ctx, &state), nl, timers: Timers::new(resync) };
    w.w.metrics = metrics::Metrics::new(
        args.metrics.clone(),
        sysfs.map(|d| Box::new(d) as Box<dyn crate::sysfs::Sysfs>),
    );
    w.w.saw_links(&w.nl);
    log(ctx, "watching; healing toward the latest apply", Event::Start {});
    w.w.write_metrics();
    let outcome = w.w.pass(&mut w.nl, Trigger::Start).await;
    w.timers.passed(Instant::now(), outcome.retry());
    service::notify_ready();
    while ctx.stop.requested().is_none() {
        let passes = w.w.passes;
        match listener.next(w.timers.next()).await? {
            Wake::Stop => break,
            Wake::Timer(timer) => {
                w.timers.fired(timer);
                match Trigger::of(timer) {
                    Some(trigger) => w.pass(trigger).await,
                    None => {
                        w.w.metrics.rdma_again(w.nl.links());
                        w.w.write_metrics();
                    }
                }
            }
            Wake::Heard(heard) => w.heard(heard).await?,
        }
        if w.w.passes != passes {
            listener.passed(Instant::now());
        }
    }
    let why = ctx.stop.requested().map_or("a signal".to_string(), crate::signals::name);
    let Watching { mut w, .. } = w;
    w.flush_repeats();
    // What is true now: a remove (run by another process, or the config
    // removed while watch ran) leaves no configuration to stay in place.
    let left = match state.record() {
        Ok(r) if r.config_files.is_empty() => {
            "no configuration is recorded (none was applied, or a remove took it out), so nothing of \
             roce-route's stays in place"
        }
        Ok(_) => "the configuration stays in place",
        Err(_) => "the host stays as it is",
    };
    log(
        ctx,
        &format!("stopping on {why}; {left} ({} heals)", w.heals),
        Event::Stop { passes: w.passes, heals: w.heals },
    );
    Ok(Done::new(0, w.heals > 0, json!({ "passes": w.passes, "heals": w.heals })))
}

/// The loop's state: the passes' memory, the connection, the timers.
struct Watching<'a> {
    w: Watcher<'a>,
    nl: Netlink,
    timers: Timers,
}

impl Watching<'_> {
    /// A pass, then the timers it sets: its retry, and the recheck when a
    /// rail appeared.
    async fn pass(&mut self, trigger: Trigger) {
        let outcome = self.w.pass(&mut self.nl, trigger).await;
        let now = Instant::now();
        self.timers.passed(now, outcome.retry());
        if self.w.take_new_link() {
            self.timers.recheck_from(now);
        }
    }

    /// A burst is over: its pass, unless it says nothing or passes are
    /// held back (another agent undoes the heals over and over, or the last
    /// pass failed: the events wait for the held pass).
    async fn heard(&mut self, mut heard: Heard) -> Result<(), Error> {
        // The rails as the table knew them before this burst: a rail
        // renamed away or deleted in it is still one.
        let rail_indexes = self.w.rail_indexes(&self.nl);
        // The link table and the addresses follow every link's
        // notifications, a pod's veth's too, so that a heal does not read a
        // thousand of them again; after an overflow or a message that could
        // not be read, only a read is safe.
        let links = self.nl.learn(&std::mem::take(&mut heard.links));
        let addresses = self.nl.learn_addresses(&std::mem::take(&mut heard.addresses));
        if !links || !addresses || heard.overflow {
            self.w.links_lost = true;
        }
        // Links that are not rails (a pod's veth) come and go all day on a
        // Kubernetes node: their events get no pass.
        if let Some(rails) = &self.w.rails {
            heard.retain_rails(|name| rails.contains(name), &rail_indexes, |ip| self.w.concerns(ip));
        }
        if heard.is_empty() {
            return Ok(());
        }
        if self.w.metrics.reads_rdma()
            && heard.events.iter().any(|e| e.subject == crate::events::Subject::Link)
        {
            self.timers.ports_from(Instant::now());
        }
        if self.w.links_lost {
            self.w.refresh_links(&mut self.nl).await?;
        } else {
            self.w.saw_links(&self.nl);
        }
        let trigger = if heard.overflow {
            Trigger::Overflow
        } else {
            let links = self.nl.links();
            Trigger::Events(heard.described(|i| links.iter().find(|l| l.index == i).map(|l| l.name.clone())))
        };
        // Only rules and routes went, with no link or address change: the
        // kernel did not flush them, an agent deleted them.
        self.w.undone_by_agent = heard.only_rules_and_routes();
        if let Some(until) = self.w.fight.hold_burst(Instant::now()) {
            self.timers.retry_at(until);
            return Ok(());
        }
        // The links are known: the pass does not read them again (with
        // 1,000 pod veths a read is 4-6 ms of the heal).
        self.w.links_fresh = true;
        self.pass(trigger).await;
        Ok(())
    }
}
