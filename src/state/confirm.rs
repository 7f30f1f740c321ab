//! The hand-shake of `apply --confirm`.
//!
//! Before the first step of the change, apply starts a guard: a separate
//! process (`roce-route confirm-guard`, in its own session) that listens
//! on the confirmation socket of the network namespace and reverts the
//! change at the deadline unless told to keep it: every journal newer than
//! the one that was the newest when it was armed (`Pending::after`),
//! finished or killed half-way. Because the guard, not the waiting apply,
//! owns the deadline from before the first netlink message, the change is
//! reverted even when apply is SIGKILLed at any instant of it. Every
//! client gets its answer from the guard itself, so `confirm` reports what
//! really happens. A guard that died (OOM, a stopped unit) leaves `pending`
//! behind: `watch` then reverts the trial itself.
//!
//! Requests and answers are one line each:
//! - `confirm` -> `kept` (the change stays) or `reverted` / `revert-failed
//!   <why>` (too late: the deadline passed first);
//! - `revert`  -> `reverted` or `revert-failed <why>` (the waiting apply
//!   got a signal);
//! - `status`  -> `waiting <seconds left> <pid of the apply>`;
//! - `wait`    -> the outcome once there is one (`kept`, `reverted`,
//!   `revert-failed <why>`);
//! - `ready`   -> `waiting ...` (sent by the apply once its change is made
//!   and committed: a `confirm` that comes earlier waits for it, so that
//!   only a complete change is ever kept; without it the deadline reverts
//!   what was made).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::lock::{abstract_addr, holder_of};

/// The abstract socket name the guard listens on.
pub const GUARD_NAME: &str = "roce-route/confirm";

/// `pending`: what check and show report while a confirmation is awaited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pending {
    /// The apply that waits (it may be gone: the guard carries on).
    pub pid: u32,
    /// The guard process.
    #[serde(default)]
    pub guard_pid: u32,
    pub deadline_unix: u64,
    /// The journal of the change (its file name), once known.
    #[serde(default)]
    pub journal: String,
    /// The newest journal's sequence number when the guard was armed
    /// (before the first step): the trial is every journal after it.
    #[serde(default)]
    pub after: Option<u64>,
    #[serde(default)]
    pub config: Option<String>,
}

/// The guard's answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Kept,
    Reverted,
    RevertFailed(String),
    Waiting {
        seconds_left: u64,
        apply_pid: u32,
    },
    /// No guard listens: no apply is waiting for confirmation.
    NoGuard,
}

impl Answer {
    pub fn parse(line: &str) -> Answer {
        let line = line.trim_end();
        let mut words = line.splitn(2, ' ');
        match (words.next().unwrap_or(""), words.next()) {
            ("kept", _) => Answer::Kept,
            ("reverted", _) => Answer::Reverted,
            ("revert-failed", why) => Answer::RevertFailed(why.unwrap_or("").to_string()),
            ("waiting", Some(rest)) => {
                let mut n = rest.split(' ').map(|w| w.parse::<u64>().unwrap_or(0));
                let seconds_left = n.next().unwrap_or(0);
                let apply_pid = n.next().unwrap_or(0) as u32;
                Answer::Waiting { seconds_left, apply_pid }
            }
            _ => Answer::RevertFailed(format!("unexpected answer from the confirmation guard: {line:?}")),
        }
    }

    pub fn line(&self) -> String {
        match self {
            Answer::Kept => "kept".into(),
            Answer::Reverted => "reverted".into(),
            Answer::RevertFailed(why) => format!("revert-failed {}", why.replace('\n', " | ")),
            Answer::Waiting { seconds_left, apply_pid } => format!("waiting {seconds_left} {apply_pid}"),
            Answer::NoGuard => "no-guard".into(),
        }
    }
}

/// Sends one request to the guard of this network namespace and reads its
/// answer (`timeout` None: wait as long as it takes, as `wait` does).
pub fn ask(request: &str, timeout: Option<Duration>) -> std::io::Result<Answer> {
    let addr = abstract_addr(GUARD_NAME)?;
    let mut stream = match UnixStream::connect_addr(&addr) {
        Ok(s) => s,
        Err(e) if e.raw_os_error() == Some(nix::libc::ECONNREFUSED) => return Ok(Answer::NoGuard),
        Err(e) => return Err(e),
    };
    stream.set_read_timeout(timeout)?;
    stream.write_all(format!("{request}\n").as_bytes())?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    if line.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the confirmation guard closed the connection without an answer",
        ));
    }
    Ok(Answer::parse(&line))
}

/// Whether a guard is listening in this network namespace.
pub fn guard_running() -> bool {
    abstract_addr(GUARD_NAME).ok().and_then(|a| holder_of(&a)).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip() {
        for a in [
            Answer::Kept,
            Answer::Reverted,
            Answer::RevertFailed("EPERM on step 2".into()),
            Answer::Waiting { seconds_left: 17, apply_pid: 4242 },
        ] {
            assert_eq!(Answer::parse(&a.line()), a);
        }
        assert!(matches!(Answer::parse("bogus"), Answer::RevertFailed(_)));
    }
}
