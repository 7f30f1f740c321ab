//! The end of a burst's quiet period, on a timerfd: tokio's timers count
//! whole milliseconds (a deadline is rounded up to the next tick, and the
//! wait for it is an epoll timeout in milliseconds), so a 2 ms quiet period
//! ended 3 to 3.2 ms after the burst's last notification, measured in
//! watch at 32 rails: a third more than the period, in every heal. A
//! timerfd wakes within microseconds of the deadline, never before it.

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Instant;

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::unix::AsyncFd;

struct Fd(TimerFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// One timerfd, armed for each deadline; None when the kernel refused
/// one (then tokio's timer is used, as before).
pub(super) struct Quiet(Option<AsyncFd<Fd>>);

impl Quiet {
    /// Must run inside a tokio runtime.
    pub fn new() -> Quiet {
        let fd = TimerFd::new(ClockId::CLOCK_MONOTONIC, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC);
        // SAFETY: the TimerFd owns its descriptor, and it is neither
        // replaced nor closed while the AsyncFd holds it (it is closed when
        // the AsyncFd, deregistered first, drops it).
        Quiet(fd.ok().and_then(|fd| unsafe { AsyncFd::register(Fd(fd)) }.ok()))
    }

    /// Returns at `at` (at once when it is past), not before.
    pub async fn until(&mut self, at: Instant) {
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let Some(fd) = &self.0 else {
            return tokio::time::sleep_until(at.into()).await;
        };
        // Armed relative to a time taken before the call: it expires at
        // `at` or a little after, never before. Arming again resets an
        // expiration not read yet.
        let armed = fd
            .get_ref()
            .0
            .set(Expiration::OneShot(TimeSpec::from_duration(left)), TimerSetTimeFlags::empty());
        if armed.is_err() {
            return tokio::time::sleep_until(at.into()).await;
        }
        loop {
            let Ok(mut ready) = fd.readable().await else {
                return tokio::time::sleep_until(at.into()).await;
            };
            // The count of expirations: readable once the timer expired.
            let mut count = [0u8; 8];
            match nix::unistd::read(fd.get_ref().0.as_fd(), &mut count) {
                Ok(_) => {
                    ready.clear_ready();
                    return;
                }
                Err(nix::errno::Errno::EAGAIN) => ready.clear_ready(),
                Err(_) => return tokio::time::sleep_until(at.into()).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    }

    /// Never before the deadline, also when armed again for a later one
    /// or an earlier one, and at once for one already past.
    #[test]
    fn the_quiet_period_never_ends_early() {
        block_on(async {
            let mut q = Quiet::new();
            assert!(q.0.is_some(), "a timerfd on this kernel");
            for ms in [2, 5, 1, 3] {
                let at = Instant::now() + Duration::from_millis(ms);
                q.until(at).await;
                assert!(Instant::now() >= at, "woke before a {ms} ms deadline");
            }
            // Armed, then dropped unfinished (a notification came first)
            // and left to expire unread: the next wait is not woken by it.
            {
                let stale = q.until(Instant::now() + Duration::from_millis(1));
                tokio::pin!(stale);
                assert!(futures::poll!(&mut stale).is_pending(), "armed, not expired yet");
            }
            std::thread::sleep(Duration::from_millis(3));
            let later = Instant::now() + Duration::from_millis(5);
            q.until(later).await;
            assert!(Instant::now() >= later, "woke by the stale expiration");
            let past = Instant::now();
            q.until(past - Duration::from_millis(1)).await;
        });
    }
}
