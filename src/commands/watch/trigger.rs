//! Why a pass runs, in the words of its `pass` and `heal` lines.

use super::timers::Timer;

/// Why a pass runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Trigger {
    Start,
    /// Notifications, in words, each once.
    Events(Vec<String>),
    Overflow,
    Retry,
    /// Shortly after a rail appeared.
    Recheck,
    /// The periodic resync (`--resync`).
    Resync,
}

impl Trigger {
    /// The pass a timer runs (none for `Timer::Ports`, which only reads
    /// the RDMA ports again).
    pub fn of(timer: Timer) -> Option<Trigger> {
        match timer {
            Timer::Retry => Some(Trigger::Retry),
            Timer::Recheck => Some(Trigger::Recheck),
            Timer::Resync => Some(Trigger::Resync),
            Timer::Ports => None,
        }
    }
}

impl Trigger {
    /// "after rail0: down, carrier off; rule deleted (lookup 100)".
    pub fn words(&self) -> String {
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

    /// The notifications' words (the `triggers` of the JSON lines).
    pub fn events(&self) -> &[String] {
        match self {
            Trigger::Events(e) => e,
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_said_up_to_eight_then_counted() {
        let e: Vec<String> = (0..10).map(|i| format!("rail{i}: down, carrier off")).collect();
        let words = Trigger::Events(e.clone()).words();
        assert!(words.starts_with("after rail0: down, carrier off; rail1:"), "{words}");
        assert!(words.ends_with("rail7: down, carrier off and 2 more"), "{words}");
        assert_eq!(Trigger::Events(e.clone()).events(), &e[..]);
        assert!(Trigger::Resync.events().is_empty());
    }

    #[test]
    fn each_timer_is_its_own_trigger() {
        assert_eq!(Trigger::of(Timer::Retry), Some(Trigger::Retry));
        assert_eq!(Trigger::of(Timer::Recheck), Some(Trigger::Recheck));
        assert_eq!(Trigger::of(Timer::Resync).map(|t| t.words()).as_deref(), Some("on the periodic resync"));
        assert_eq!(Trigger::of(Timer::Ports), None, "no pass: the ports are only read again");
    }
}
