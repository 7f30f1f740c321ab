//! SIGINT, SIGTERM and SIGHUP do not kill a run half-way: the handler
//! itself stores the signal number in an atomic (signal-hook's flag, set
//! inside the handler, so no await point or thread is needed to notice),
//! and every place that waits or steps checks it: before each step of a
//! transaction, in the lock wait and in the confirmation wait. A loop that
//! sleeps in tokio (`watch`) is woken by the same handlers through a
//! self-pipe (`StopFlag::waiter`): one set of handlers for the process.

use std::io;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// The signal that asked this run to stop, if any.
#[derive(Clone, Debug, Default)]
pub struct StopFlag {
    signal: Arc<AtomicUsize>,
    /// The read end of the pipe the handlers write a byte to after they set
    /// `signal` (none for a flag no handler sets).
    wake: Option<Arc<UnixStream>>,
}

impl StopFlag {
    /// A flag that SIGINT, SIGTERM and SIGHUP set from their handlers.
    pub fn on_signals() -> io::Result<StopFlag> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        let flag = StopFlag { signal: Arc::default(), wake: Some(Arc::new(read)) };
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            // In this order: the handlers run in the order they were
            // registered, so a woken waiter finds the flag already set.
            signal_hook::flag::register_usize(signal, flag.signal.clone(), signal as usize)?;
            signal_hook::low_level::pipe::register(signal, write.try_clone()?)?;
        }
        Ok(flag)
    }

    /// Asks to stop as if `signal` had arrived (a waiter is not woken).
    #[cfg(test)]
    pub fn request(&self, signal: i32) {
        self.signal.store(signal as usize, Ordering::SeqCst);
    }

    pub fn requested(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n as i32),
        }
    }

    /// What an async loop awaits to see a stop. Must run inside a tokio
    /// runtime.
    pub fn waiter(&self) -> io::Result<StopWait> {
        let wake = match &self.wake {
            Some(read) => Some(tokio::net::UnixStream::from_std(read.try_clone()?)?),
            None => None,
        };
        Ok(StopWait { flag: self.clone(), wake })
    }
}

/// Resolves when the handlers set the flag (see `StopFlag::waiter`).
pub struct StopWait {
    flag: StopFlag,
    wake: Option<tokio::net::UnixStream>,
}

impl StopWait {
    /// The signal that asked to stop, once one did; cancel-safe (a
    /// `select!` branch). A flag without handlers never resolves.
    pub async fn stopped(&mut self) -> i32 {
        loop {
            if let Some(signal) = self.flag.requested() {
                return signal;
            }
            let Some(wake) = &self.wake else { return std::future::pending().await };
            if wake.readable().await.is_err() {
                return std::future::pending().await;
            }
            // Drained; an empty pipe clears the readiness for the next wait.
            let mut bytes = [0u8; 16];
            let _ = wake.try_read(&mut bytes);
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
    /// no polling of anything but the atomic; and the same handlers wake a
    /// waiter that sleeps in tokio. (One test: the handlers are the
    /// process's, a second raise would race the first test's asserts.)
    #[test]
    fn a_raised_signal_sets_the_flag_synchronously_and_wakes_a_waiter() {
        let flag = StopFlag::on_signals().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut waiter = rt.block_on(async { flag.waiter() }).unwrap();
        let asleep = rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_millis(50), waiter.stopped()).await
        });
        assert!(asleep.is_err(), "no signal yet: the waiter sleeps");
        assert_eq!(flag.requested(), None);
        let raiser = {
            let flag = flag.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                signal_hook::low_level::raise(SIGHUP).unwrap();
                flag.requested()
            })
        };
        let woke = rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(5), waiter.stopped()).await
        });
        assert_eq!(raiser.join().unwrap(), Some(SIGHUP), "set before raise returned");
        assert_eq!(woke, Ok(SIGHUP), "the sleeping waiter woke");
        assert_eq!(name(SIGHUP), "SIGHUP (signal 1)");
    }

    #[test]
    fn a_flag_without_handlers_never_wakes_its_waiter() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let flag = StopFlag::default();
        let mut waiter = rt.block_on(async { flag.waiter() }).unwrap();
        let slept = rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_millis(20), waiter.stopped()).await
        });
        assert!(slept.is_err());
    }
}
