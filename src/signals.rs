//! SIGINT, SIGTERM and SIGHUP do not kill a run half-way: the handler
//! itself stores the signal number in an atomic (signal-hook's flag, set
//! inside the handler, so no await point or thread is needed to notice),
//! and every place that waits or steps checks it: before each step of a
//! transaction, in the lock wait and in the confirmation wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// The signal that asked this run to stop, if any.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Arc<AtomicUsize>);

impl StopFlag {
    /// A flag that SIGINT, SIGTERM and SIGHUP set from their handlers.
    pub fn on_signals() -> std::io::Result<StopFlag> {
        let flag = StopFlag::default();
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            signal_hook::flag::register_usize(signal, flag.0.clone(), signal as usize)?;
        }
        Ok(flag)
    }

    /// Asks to stop as if `signal` had arrived (tests, and the Enter key).
    pub fn request(&self, signal: i32) {
        self.0.store(signal as usize, Ordering::SeqCst);
    }

    pub fn requested(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n as i32),
        }
    }
}

/// The name of a signal for messages.
pub fn name(signal: i32) -> String {
    let name = match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        n => return format!("signal {n}"),
    };
    format!("{name} (signal {signal})")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flag is set by the handler itself: no thread, no await point,
    /// no polling of anything but the atomic.
    #[test]
    fn a_raised_signal_sets_the_flag_synchronously() {
        let flag = StopFlag::on_signals().unwrap();
        assert_eq!(flag.requested(), None);
        signal_hook::low_level::raise(SIGHUP).unwrap();
        assert_eq!(flag.requested(), Some(SIGHUP));
        assert_eq!(name(SIGHUP), "SIGHUP (signal 1)");
    }
}
