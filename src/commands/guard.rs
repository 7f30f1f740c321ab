//! `roce-route confirm-guard` (hidden; started by `apply --confirm`): owns
//! the deadline of an unconfirmed change. It answers on the socket
//! `confirm.sock` in the run directory of the network namespace (protocol
//! in `state::confirm`), to root and its own user only, and reverts
//! the change when the deadline passes, when asked to, or on a signal,
//! unless a `confirm` came first. It runs in its own session, so the
//! waiting apply can be killed (even SIGKILL) and the revert still happens.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::{Ctx, connect};
use crate::cli::GuardArgs;
use crate::error::Error;
use crate::state::confirm::{self, Answer};
use crate::transaction::{self, Env};

const POLL: Duration = Duration::from_millis(20);

/// What a connection asked for.
enum Request {
    Status,
    Wait,
    Confirm,
    Revert,
}

pub async fn run(ctx: &Ctx, args: &GuardArgs) -> Result<i32, Error> {
    // apply hands the bound, listening socket over as fd 3; anything else
    // there (a file, a pipe, another socket, nothing) is not taken.
    let expected = confirm::socket_path()?;
    let listener = confirm::take_listener(3, &expected).map_err(|why| {
        Error::Usage(format!(
            "confirm-guard: {why}; `confirm-guard` is started by `apply --confirm` only, with its socket \
             {} as fd 3: run `apply --confirm SECONDS` instead (nothing was changed)",
            expected.display()
        ))
    })?;
    listener.set_nonblocking(true).map_err(|e| Error::Other(anyhow::anyhow!("guard socket: {e}")))?;
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let mut waiters: Vec<UnixStream> = Vec::new();
    // The one who decided gets the outcome as its answer as well.
    let (decided_by, revert) = loop {
        if ctx.stop.requested().is_some() || Instant::now() >= deadline {
            break (None, true);
        }
        match listener.accept() {
            // Only root can reach the socket; a peer of another user is
            // ignored all the same, unanswered.
            Ok((stream, _)) if !confirm::trusted_peer(&stream) => {}
            Ok((stream, _)) => match read_request(&stream) {
                Some(Request::Status) => {
                    let left = deadline.saturating_duration_since(Instant::now()).as_secs_f64().ceil() as u64;
                    reply(stream, &Answer::Waiting { seconds_left: left, apply_pid: args.apply_pid });
                }
                Some(Request::Wait) => waiters.push(stream),
                Some(Request::Confirm) => break (Some(stream), false),
                Some(Request::Revert) => break (Some(stream), true),
                None => {}
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    };
    let outcome = if revert { revert_change(ctx, args).await } else { Answer::Kept };
    if let Ok(state) = ctx.state() {
        let _ = state.clear_pending();
    }
    waiters.extend(decided_by);
    for w in waiters {
        reply(w, &outcome);
    }
    // A request that raced the decision gets the truth too.
    listener.set_nonblocking(true).ok();
    while let Ok((stream, _)) = listener.accept() {
        if confirm::trusted_peer(&stream) && read_request(&stream).is_some() {
            reply(stream, &outcome);
        }
    }
    Ok(if matches!(outcome, Answer::RevertFailed(_)) { crate::error::exit::ROLLBACK_FAILED } else { 0 })
}

/// Undoes the guarded journal, under the namespace lock, if it is still
/// the newest (nothing else may change the host during the window).
async fn revert_change(ctx: &Ctx, args: &GuardArgs) -> Answer {
    let result: Result<(), Error> = async {
        let state = ctx.state()?;
        // A signal to the guard means "revert now"; it must not also end
        // the lock wait.
        let _lock = crate::state::NetnsLock::acquire(ctx.lock_timeout, &crate::signals::StopFlag::default())?;
        let Some(journal) = state.latest_journal()? else {
            return Err(Error::Other(anyhow::anyhow!("its journal {} is gone", args.journal)));
        };
        let name = journal.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name != args.journal {
            return Err(Error::Other(anyhow::anyhow!(
                "journal {name} is newer than the guarded {}: something changed the host meanwhile",
                args.journal
            )));
        }
        let nl = connect().await?;
        let stop = crate::signals::StopFlag::default();
        transaction::undo_journal(&Env { state: &state, nl: &nl, stop: &stop }, &journal).await?;
        Ok(())
    }
    .await;
    match result {
        Ok(()) => Answer::Reverted,
        Err(e) => Answer::RevertFailed(e.to_string()),
    }
}

fn read_request(stream: &UnixStream) -> Option<Request> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).ok()?;
    match line.trim() {
        "status" => Some(Request::Status),
        "wait" => Some(Request::Wait),
        "confirm" => Some(Request::Confirm),
        "revert" => Some(Request::Revert),
        _ => None,
    }
}

fn reply(mut stream: UnixStream, answer: &Answer) {
    let _ = stream.write_all(format!("{}\n", answer.line()).as_bytes());
}
