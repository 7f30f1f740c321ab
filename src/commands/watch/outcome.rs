//! What a pass came to: the `outcome` of its `pass` line, and whether (and
//! when) the loop tries again.

use std::time::Duration;

use super::timers::RETRY;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// No config is recorded (after `remove`): nothing to keep.
    NoConfig,
    /// It could not run (the lock is busy, a confirmation waits): tried
    /// again after RETRY.
    Deferred,
    /// A stop request ended the lock wait.
    Stopped,
    /// Entries roce-route does not own hold the places of its own.
    Conflicts,
    InSync,
    Healed,
    /// It failed; the next try after `retry`.
    Failed {
        retry: Duration,
    },
}

impl Outcome {
    /// Its name in the `pass` lines.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::NoConfig => "no_config",
            Outcome::Deferred => "deferred",
            Outcome::Stopped => "stopped",
            Outcome::Conflicts => "conflicts",
            Outcome::InSync => "in_sync",
            Outcome::Healed => "healed",
            Outcome::Failed { .. } => "failed",
        }
    }

    /// When to try again without a notification, if at all.
    pub fn retry(self) -> Option<Duration> {
        match self {
            Outcome::Deferred => Some(RETRY),
            Outcome::Failed { retry } => Some(retry),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_deferred_or_failed_pass_is_tried_again() {
        let all = [
            Outcome::NoConfig,
            Outcome::Deferred,
            Outcome::Stopped,
            Outcome::Conflicts,
            Outcome::InSync,
            Outcome::Healed,
            Outcome::Failed { retry: Duration::from_secs(8) },
        ];
        let names: Vec<&str> = all.iter().map(|o| o.name()).collect();
        assert_eq!(names, ["no_config", "deferred", "stopped", "conflicts", "in_sync", "healed", "failed"]);
        let retries: Vec<Option<u64>> = all.iter().map(|o| o.retry().map(|d| d.as_secs())).collect();
        assert_eq!(retries, [None, Some(2), None, None, None, None, Some(8)]);
    }
}
