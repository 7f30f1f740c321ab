//! Another agent undoing the heals over and over (a fight), and the hold
//! it, or a failed pass, puts on the passes. Pure: every time comes from
//! the caller.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::backoff::backoff;

/// Heals of the same entries this many times within FIGHT_WINDOW: another
/// agent undoes them; the heals back off from FIGHT_HOLD, doubling, up to
/// MAX_FIGHT_HOLD.
pub(super) const FIGHT_HEALS: usize = 3;
pub(super) const FIGHT_WINDOW: Duration = Duration::from_secs(60);
pub(super) const FIGHT_HOLD: Duration = Duration::from_secs(5);
pub(super) const MAX_FIGHT_HOLD: Duration = Duration::from_secs(300);

/// A fight just seen (said once, with the suspects).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Started {
    /// How often the same entries were healed within FIGHT_WINDOW.
    pub same: usize,
    pub hold: Duration,
}

/// A fight that ended: the heals held back, and the bursts of
/// notifications held meanwhile.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Over {
    pub held_heals: u32,
    pub held_bursts: u64,
}

#[derive(Debug, Default)]
pub(super) struct Fight {
    /// Recent heals (when, and the entries healed).
    recent: VecDeque<(Instant, Vec<String>)>,
    /// Holds in a row while the fight goes on (0: no fight).
    level: u32,
    /// Until when passes wait (a fight's hold or a failed pass's retry),
    /// and the bursts held meanwhile.
    held_until: Option<Instant>,
    held: u64,
}

impl Fight {
    pub fn ongoing(&self) -> bool {
        self.level > 0
    }

    /// Passes wait until `until` (a failed pass: notifications meanwhile
    /// wait for its retry, since a reason that stays would fail each).
    pub fn hold_until(&mut self, until: Instant) {
        self.held_until = Some(until);
    }

    /// At the start of a pass: a hold that ran out makes this pass the
    /// held one.
    pub fn expire(&mut self, now: Instant) {
        if self.held_until.is_some_and(|until| until <= now) {
            self.held_until = None;
            self.held = 0;
        }
    }

    /// A burst of notifications at `now`: if a hold is in force, it is held
    /// (counted) and its pass waits until the returned time.
    pub fn hold_burst(&mut self, now: Instant) -> Option<Instant> {
        let until = self.held_until.filter(|until| *until > now)?;
        self.held += 1;
        Some(until)
    }

    /// After a heal of `summary` that an agent's deletions called for:
    /// when the same entries were healed FIGHT_HEALS times within
    /// FIGHT_WINDOW, another agent undoes them, and from then on each heal
    /// is followed by a hold (doubling, up to MAX_FIGHT_HOLD) until a pass
    /// finds the host in sync. Returns the fight when it starts.
    pub fn healed(&mut self, now: Instant, summary: &[String]) -> Option<Started> {
        self.recent.retain(|(at, _)| now.duration_since(*at) < FIGHT_WINDOW);
        self.recent.push_back((now, summary.to_vec()));
        let same = self.recent.iter().filter(|(_, s)| s == summary).count();
        if self.level == 0 && same < FIGHT_HEALS {
            return None;
        }
        self.level += 1;
        let hold = backoff(FIGHT_HOLD, self.level, MAX_FIGHT_HOLD);
        self.held_until = Some(now + hold);
        (self.level == 1).then_some(Started { same, hold })
    }

    /// A pass found the host in sync: nothing undid the last heal, the
    /// fight, if any, is over.
    pub fn in_sync(&mut self) -> Option<Over> {
        if self.level == 0 {
            return None;
        }
        let over = Over { held_heals: self.level, held_bursts: self.held };
        self.level = 0;
        self.held = 0;
        self.recent.clear();
        Some(over)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_third_heal_of_the_same_entries_within_the_window_starts_a_fight() {
        let t0 = Instant::now();
        let rule = entries(&["rule from 198.51.100.10 lookup 100"]);
        let mut f = Fight::default();
        assert_eq!(f.healed(t0, &rule), None);
        assert_eq!(f.healed(t0 + Duration::from_secs(1), &entries(&["other"])), None, "other entries");
        assert_eq!(f.healed(t0 + Duration::from_secs(2), &rule), None);
        assert!(!f.ongoing());
        let started = f.healed(t0 + Duration::from_secs(3), &rule);
        assert_eq!(started, Some(Started { same: 3, hold: FIGHT_HOLD }));
        assert!(f.ongoing());
        let at = t0 + Duration::from_secs(4);
        assert_eq!(f.hold_burst(at), Some(t0 + Duration::from_secs(8)), "held for the hold");
        // Each heal while it lasts holds twice as long, said no more.
        assert_eq!(f.healed(t0 + Duration::from_secs(9), &rule), None);
        assert_eq!(f.hold_burst(at), Some(t0 + Duration::from_secs(19)));
        assert_eq!(f.in_sync(), Some(Over { held_heals: 2, held_bursts: 2 }));
        assert_eq!(f.in_sync(), None, "said once");
        assert!(!f.ongoing());
    }

    #[test]
    fn heals_outside_the_window_are_no_fight() {
        let t0 = Instant::now();
        let rule = entries(&["rule"]);
        let mut f = Fight::default();
        for k in 0..5 {
            assert_eq!(f.healed(t0 + FIGHT_WINDOW * k, &rule), None, "heal {k}");
        }
    }

    #[test]
    fn a_hold_that_ran_out_ends_at_the_next_pass() {
        let t0 = Instant::now();
        let mut f = Fight::default();
        assert_eq!(f.hold_burst(t0), None, "no hold");
        f.hold_until(t0 + Duration::from_secs(2));
        assert_eq!(f.hold_burst(t0), Some(t0 + Duration::from_secs(2)));
        f.expire(t0 + Duration::from_secs(1));
        assert!(f.hold_burst(t0 + Duration::from_secs(1)).is_some(), "not run out yet");
        f.expire(t0 + Duration::from_secs(2));
        assert_eq!(f.hold_burst(t0 + Duration::from_secs(1)), None, "ran out: this pass was the held one");
    }
}
