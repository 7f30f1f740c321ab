//! What the idle loop waits for: a burst of notifications (gathered by
//! the `Burst` state machine, `events::Coalesce`), the next timer, or a
//! stop.

use std::io;
use std::time::Instant;

use crate::error::Error;
use crate::events::{Burst, Heard, Pace, Received, Subscription};
use crate::signals::{StopFlag, StopWait};

use super::quiet::Quiet;
use super::timers::Timer;

/// What woke the loop.
pub(super) enum Wake {
    /// A burst is over: its pass is due.
    Heard(Heard),
    Timer(Timer),
    Stop,
}

pub(super) struct Listener {
    sub: Subscription,
    stop: StopWait,
    /// A notification that came once the burst before it was due: the
    /// first of the next burst.
    carried: Option<(Instant, io::Result<Received>)>,
    /// Quick or busy: the quiet period of the next burst.
    pace: Pace<Instant>,
    /// Ends a burst's quiet period on time.
    quiet: Quiet,
}

impl Listener {
    /// Subscribes (before the first pass: nothing that happens after it is
    /// missed). Must run inside a tokio runtime.
    pub fn open(stop: &StopFlag) -> Result<Listener, Error> {
        let sub = Subscription::open()
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot subscribe to rtnetlink notifications: {e}")))?;
        let stop = stop
            .waiter()
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot install signal handlers: {e}")))?;
        Ok(Listener { sub, stop, carried: None, pace: Pace::default(), quiet: Quiet::new() })
    }

    /// Idle: blocks on the socket, the stop signals and the next timer (no
    /// CPU meanwhile); a notification starts a burst, which is gathered
    /// until its pass is due.
    pub async fn next(&mut self, timer: Option<(Instant, Timer)>) -> Result<Wake, Error> {
        let first = match self.carried.take() {
            Some(first) => first,
            None => tokio::select! {
                got = self.sub.next() => (Instant::now(), got),
                _ = self.stop.stopped() => return Ok(Wake::Stop),
                () = sleep_until_opt(timer.map(|(at, _)| at)) => {
                    return Ok(Wake::Timer(timer.map_or(Timer::Retry, |(_, which)| which)));
                }
            },
        };
        self.gather(first).await
    }

    /// A pass ran (at `at`): the pace counts it.
    pub fn passed(&mut self, at: Instant) {
        self.pace.passed(at);
    }

    /// A burst: each notification that joins it moves its pass; one that
    /// does not is carried to the next.
    async fn gather(&mut self, (at, got): (Instant, io::Result<Received>)) -> Result<Wake, Error> {
        let mut heard = Heard::default();
        heard.add(received(got)?);
        let mut burst: Burst<Instant> = self.pace.rule(at).burst(at);
        self.pace.heard(at);
        loop {
            tokio::select! {
                got = self.sub.next() => {
                    let at = Instant::now();
                    if !burst.joins(at) {
                        // Its events are the next burst's; its news are
                        // this burst's pass's (`Heard::add_late`).
                        self.carried = heard.add_late(got).map(|got| (at, got));
                        break;
                    }
                    self.pace.heard(at);
                    heard.add(received(got)?);
                }
                () = self.quiet.until(burst.due()) => break,
                _ = self.stop.stopped() => return Ok(Wake::Stop),
            }
        }
        if heard.overflow {
            // What is still queued is older than what the kernel dropped:
            // learnt after the links are read again (the overflow's pass),
            // it would put back states the dropped notifications undid.
            // The pass reads everything; the backlog goes.
            self.sub.drain();
        }
        Ok(Wake::Heard(heard))
    }
}

fn received(got: io::Result<Received>) -> Result<Received, Error> {
    got.map_err(|e| Error::Other(anyhow::anyhow!("the rtnetlink notifications failed: {e}")))
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
