//! Failed passes: each waits longer than the last (`backoff`), and an
//! error that repeats is said once, then counted. Pure.

use std::time::Duration;

use super::timers::RETRY;

/// The longest wait after failed passes.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// `first` doubled for each failure after the first, at most `cap`. Pure.
pub(super) fn backoff(first: Duration, failures: u32, cap: Duration) -> Duration {
    first.saturating_mul(1u32 << failures.saturating_sub(1).min(16)).min(cap)
}

/// An error said once and repeated since.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Repeated {
    pub text: String,
    pub times: u64,
}

/// Consecutive failed passes, and the last error said.
#[derive(Debug, Default)]
pub(super) struct Failures {
    count: u32,
    last_error: Option<(String, u64)>,
}

impl Failures {
    /// Another failed pass: how long until the next try.
    pub fn wait(&mut self) -> Duration {
        self.count += 1;
        backoff(RETRY, self.count, MAX_BACKOFF)
    }

    /// Whether `text` is the error said last (then it is counted, not
    /// said); otherwise it is the one said from now on.
    pub fn repeats(&mut self, text: &str) -> bool {
        match &mut self.last_error {
            Some((last, n)) if last == text => {
                *n += 1;
                true
            }
            _ => false,
        }
    }

    /// `text` was said (after `take_repeats` for the one before).
    pub fn said(&mut self, text: String) {
        self.last_error = Some((text, 1));
    }

    /// The last error said, if it repeated since; forgets it.
    pub fn take_repeats(&mut self) -> Option<Repeated> {
        let (text, times) = self.last_error.take()?;
        (times > 1).then_some(Repeated { text, times })
    }

    /// A pass went through: how many failed before it, if any.
    pub fn recovered(&mut self) -> Option<u32> {
        let failed = std::mem::take(&mut self.count);
        (failed > 0).then_some(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let s = |n| backoff(RETRY, n, MAX_BACKOFF).as_secs();
        assert_eq!([s(1), s(2), s(3), s(4), s(5), s(6), s(7), s(40)], [2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn a_repeated_error_is_counted_and_a_new_one_said() {
        let mut f = Failures::default();
        assert_eq!(f.recovered(), None, "nothing failed");
        assert_eq!(f.wait(), Duration::from_secs(2));
        assert!(!f.repeats("EBUSY"));
        f.said("EBUSY".into());
        assert_eq!(f.wait(), Duration::from_secs(4));
        assert!(f.repeats("EBUSY"));
        assert!(f.repeats("EBUSY"));
        assert!(!f.repeats("ENOENT"), "another error is said");
        assert_eq!(f.take_repeats(), Some(Repeated { text: "EBUSY".into(), times: 3 }));
        f.said("ENOENT".into());
        assert_eq!(f.take_repeats(), None, "said once, never repeated");
        assert_eq!(f.recovered(), Some(2));
        assert_eq!(f.recovered(), None);
        assert_eq!(f.wait(), Duration::from_secs(2), "the back-off starts over after a pass");
    }
}
