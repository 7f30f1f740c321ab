//! `roce-route confirm-guard` (hidden; started by `apply --confirm` before
//! the first step of the change): owns the deadline of an unconfirmed
//! change. It answers on the socket `confirm.sock` in the run directory of
//! the network namespace (protocol in `state::confirm`), to root and its
//! own user only, and reverts
//! the change when the deadline passes, when asked to, or on a signal,
//! unless a `confirm` came first. It runs in its own session, so the
//! waiting apply can be killed (even SIGKILL) and the revert still happens.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::{Ctx, connect_lazy};
use crate::cli::GuardArgs;
use crate::error::Error;
use crate::state::confirm::{self, Answer};
use crate::transaction::{self, Env, TrialRevert};

const POLL: Duration = Duration::from_millis(20);

/// What a connection asked for.
enum Request {
    Status,
    Wait,
    Ready,
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
    crate::testhooks::guard_stall();
    let deadline = Instant::now() + Duration::from_secs(args.seconds);
    let mut waiters: Vec<UnixStream> = Vec::new();
    let (decided_by, revert) = decide(ctx, args, &listener, deadline, &mut waiters);
    let (outcome, settled) = if revert { revert_change(ctx, args).await } else { (Answer::Kept, true) };
    // Kept: the trial's file enters the boot set before `pending` goes
    // (the apply checks that it did).
    if !revert
        && let Ok(state) = ctx.state()
        && let Ok(Some(p)) = state.pending()
        && let Err(e) = state.keep_install(&p)
    {
        eprintln!("roce-route confirm-guard: the change is kept, but its config was not installed: {e}");
    }
    // A revert that failed leaves `pending`: the trial is still there, and
    // watch (or the next apply, rollback or remove) reverts it, rather than
    // taking its config for confirmed.
    if settled && let Ok(state) = ctx.state() {
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

/// Answers requests until the change is decided: kept (a confirmation
/// once the change is complete) or to be reverted (the deadline, a
/// signal, a `revert`). Returns the connection of the one who decided, if
/// any, and whether to revert; the connections waiting for the outcome
/// are left in `waiters`.
fn decide(
    ctx: &Ctx,
    args: &GuardArgs,
    listener: &std::os::unix::net::UnixListener,
    deadline: Instant,
    waiters: &mut Vec<UnixStream>,
) -> (Option<UnixStream>, bool) {
    // Until the apply says its change is complete, a confirmation waits:
    // only a whole, committed change is ever kept.
    let mut ready = false;
    let mut confirmers: Vec<UnixStream> = Vec::new();
    let waiting = || {
        let left = deadline.saturating_duration_since(Instant::now()).as_secs_f64().ceil() as u64;
        Answer::Waiting { seconds_left: left, apply_pid: args.apply_pid }
    };
    loop {
        if ctx.stop.requested().is_some() || Instant::now() >= deadline {
            waiters.append(&mut confirmers);
            return (None, true);
        }
        if !confirmers.is_empty() && (ready || trial_complete(ctx, args)) {
            waiters.extend(confirmers.drain(1..));
            return (confirmers.pop(), false);
        }
        match listener.accept() {
            // Only root can reach the socket; a peer of another user is
            // ignored all the same, unanswered.
            Ok((stream, _)) if !confirm::trusted_peer(&stream) => {}
            Ok((stream, _)) => match read_request(&stream) {
                Some(Request::Status) => reply(stream, &waiting()),
                Some(Request::Wait) => waiters.push(stream),
                Some(Request::Ready) => {
                    ready = true;
                    // The apply waits for the outcome on this connection.
                    let mut stream = stream;
                    if stream.write_all(format!("{}\n", waiting().line()).as_bytes()).is_ok() {
                        waiters.push(stream);
                    }
                }
                Some(Request::Confirm) => confirmers.push(stream),
                Some(Request::Revert) => {
                    waiters.append(&mut confirmers);
                    return (Some(stream), true);
                }
                None => {}
            },
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Whether the trial's change is whole though the apply did not say so
/// (it was killed after its commit): its journals exist, carry its id and
/// are all committed. A committed journal is final: the apply commits only
/// once the host was read back and verified.
fn trial_complete(ctx: &Ctx, args: &GuardArgs) -> bool {
    let Ok(state) = ctx.state() else { return false };
    let after = (args.after > 0).then_some(args.after);
    state.journals_after(after).is_ok_and(|runs| {
        !runs.is_empty()
            && runs.iter().all(|j| j.committed && j.header.trial.as_deref() == Some(args.trial.as_str()))
    })
}

/// Undoes the trial (every journal after `--after` that carries the
/// trial's id, also one killed half-way), under the namespace lock: the
/// apply may still be making it, and nothing else may change the host
/// during the window. Also says whether the trial is settled (reverted,
/// or superseded by a later run): a revert that failed is not.
async fn revert_change(ctx: &Ctx, args: &GuardArgs) -> (Answer, bool) {
    let result: Result<TrialRevert, Error> = async {
        let state = ctx.state()?;
        // A signal to the guard means "revert now"; it must not also end
        // the lock wait.
        let _lock = crate::state::NetnsLock::acquire(ctx.lock_timeout, &crate::signals::StopFlag::default())?;
        let nl = connect_lazy().await?;
        let stop = crate::signals::StopFlag::default();
        let after = (args.after > 0).then_some(args.after);
        transaction::revert_trial(&Env { state: &state, nl: &nl, stop: &stop }, after, &args.trial).await
    }
    .await;
    match result {
        Ok(TrialRevert::Undone(_)) => (Answer::Reverted, true),
        Ok(TrialRevert::Superseded { journal, kind }) => (
            Answer::RevertFailed(format!(
                "a later {kind} ({journal}) was made during the trial: nothing was reverted; undo the runs \
                 with `roce-route rollback` if they are not wanted"
            )),
            true,
        ),
        Err(e) => (Answer::RevertFailed(e.to_string()), false),
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
        "ready" => Some(Request::Ready),
        "confirm" => Some(Request::Confirm),
        "revert" => Some(Request::Revert),
        _ => None,
    }
}

fn reply(mut stream: UnixStream, answer: &Answer) {
    let _ = stream.write_all(format!("{}\n", answer.line()).as_bytes());
}
