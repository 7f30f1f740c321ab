//! When the watch loop acts without a notification: the retry of a pass
//! that could not run or failed (or of heals held back), the second pass
//! after a rail appeared, and the periodic resync. Pure: every time comes
//! from the caller.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// When to try again after a pass could not run (lock busy, a
/// confirmation waiting); a pass that failed waits this long, doubled
/// after each further failure (`backoff`).
pub(super) const RETRY: Duration = Duration::from_secs(2);
/// A second pass this long after a rail appeared: udev runs
/// `systemd-sysctl --prefix=/net/ipv4/conf/<if>` for a new netdev later
/// than the heal, and a sysctl write sends no notification.
pub(super) const RECHECK_AFTER_NEW_LINK: Duration = Duration::from_secs(3);
/// With `--metrics`, the RDMA ports' state is read again this long after a
/// link notification: the driver changes it after the kernel has sent the
/// link message (rxe in its NETDEV_DOWN notifier, which runs after
/// `rtmsg_ifinfo`; a hardware port when its firmware says so), so the pass
/// the notification wakes reads the state from before.
pub(super) const PORTS_SETTLE: Duration = Duration::from_secs(1);

/// Which timer ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    Retry,
    Recheck,
    Resync,
    /// Read the RDMA ports' state again (no pass).
    Ports,
}

#[derive(Debug, Default)]
pub(super) struct Timers {
    /// A pass that could not run or failed, or heals held back.
    retry: Option<Instant>,
    /// The second pass after a rail appeared.
    recheck: Option<Instant>,
    /// The next periodic resync, and its period (`--resync`).
    resync: Option<Instant>,
    every: Option<Duration>,
    /// The next read of the RDMA ports' state after a link notification.
    ports: Option<Instant>,
}

impl Timers {
    pub fn new(resync: Option<Duration>) -> Timers {
        Timers { every: resync, ..Timers::default() }
    }

    /// The earliest timer (a tie goes to the retry, then the recheck).
    pub fn next(&self) -> Option<(Instant, Timer)> {
        [
            (self.retry, Timer::Retry),
            (self.recheck, Timer::Recheck),
            (self.resync, Timer::Resync),
            (self.ports, Timer::Ports),
        ]
        .into_iter()
        .filter_map(|(at, which)| at.map(|at| (at, which)))
        .min_by_key(|(at, _)| *at)
    }

    /// `timer` ran out and its pass runs now.
    pub fn fired(&mut self, timer: Timer) {
        match timer {
            Timer::Recheck => self.recheck = None,
            Timer::Ports => self.ports = None,
            Timer::Retry | Timer::Resync => {}
        }
    }

    /// After any pass at `now`: the retry it asks for; the resync counts
    /// from now; a recheck that is due went with this pass.
    pub fn passed(&mut self, now: Instant, retry: Option<Duration>) {
        self.retry = retry.map(|d| now + d);
        self.resync = self.every.map(|d| now + d);
        if self.recheck.is_some_and(|at| at <= now) {
            self.recheck = None;
        }
    }

    /// A rail appeared: a second pass shortly.
    pub fn recheck_from(&mut self, now: Instant) {
        self.recheck = Some(now + RECHECK_AFTER_NEW_LINK);
    }

    /// A link notification at `now`: the RDMA ports' state is read again
    /// PORTS_SETTLE after the last one.
    pub fn ports_from(&mut self, now: Instant) {
        self.ports = Some(now + PORTS_SETTLE);
    }

    /// Notifications held back until `until`: their pass is the retry.
    pub fn retry_at(&mut self, until: Instant) {
        self.retry = Some(until);
    }
}

/// The link indexes seen at the last read of the links, and whether a new
/// one appeared since the last look (wherever the links were read): a rail
/// (re)appearing, which gets the recheck.
#[derive(Debug, Default)]
pub(super) struct NewLinks {
    known: Option<BTreeSet<u32>>,
    appeared: bool,
}

impl NewLinks {
    /// After every read of the links (the first only learns them).
    pub fn saw(&mut self, now: BTreeSet<u32>) {
        if let Some(known) = &self.known
            && now.iter().any(|i| !known.contains(i))
        {
            self.appeared = true;
        }
        self.known = Some(now);
    }

    /// Whether a link appeared since the last call.
    pub fn take(&mut self) -> bool {
        std::mem::take(&mut self.appeared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn the_earliest_timer_runs_first() {
        let t0 = Instant::now();
        let mut t = Timers::new(Some(s(30)));
        assert_eq!(t.next(), None, "nothing before the first pass");
        t.passed(t0, Some(s(2)));
        assert_eq!(t.next(), Some((t0 + s(2), Timer::Retry)));
        t.passed(t0, None);
        assert_eq!(t.next(), Some((t0 + s(30), Timer::Resync)), "a pass that went through asks no retry");
        t.recheck_from(t0);
        assert_eq!(t.next(), Some((t0 + RECHECK_AFTER_NEW_LINK, Timer::Recheck)));
        t.retry_at(t0 + s(1));
        assert_eq!(t.next(), Some((t0 + s(1), Timer::Retry)));
    }

    #[test]
    fn a_pass_restarts_the_resync_and_takes_a_due_recheck_with_it() {
        let t0 = Instant::now();
        let mut t = Timers::new(Some(s(30)));
        t.recheck_from(t0);
        t.passed(t0 + s(1), None);
        assert_eq!(t.next(), Some((t0 + RECHECK_AFTER_NEW_LINK, Timer::Recheck)), "not due yet: kept");
        t.passed(t0 + s(10), None);
        assert_eq!(t.next(), Some((t0 + s(40), Timer::Resync)), "due: this pass was it");
        t.recheck_from(t0 + s(10));
        t.fired(Timer::Recheck);
        assert_eq!(t.next().map(|(_, w)| w), Some(Timer::Resync));
        t.ports_from(t0 + s(10));
        assert_eq!(t.next(), Some((t0 + s(10) + PORTS_SETTLE, Timer::Ports)));
        t.passed(t0 + s(20), None);
        assert_eq!(t.next().map(|(_, w)| w), Some(Timer::Ports), "a pass does not take the ports' read");
        t.fired(Timer::Ports);
        assert_eq!(t.next().map(|(_, w)| w), Some(Timer::Resync));
        let mut never = Timers::new(None);
        never.passed(t0, None);
        assert_eq!(never.next(), None, "no --resync: no timer at all");
    }

    #[test]
    fn a_new_link_index_is_seen_once_but_not_at_the_first_read() {
        let mut n = NewLinks::default();
        n.saw([1, 2].into());
        assert!(!n.take(), "the first read only learns the links");
        n.saw([1, 2].into());
        assert!(!n.take());
        n.saw([1].into());
        assert!(!n.take(), "a link gone is no new one");
        n.saw([1, 3].into());
        assert!(n.take());
        assert!(!n.take(), "said once");
    }
}
