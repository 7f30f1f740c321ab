//! `roce-route confirm`: keep the change of a waiting `apply --confirm`.
//! The answer comes from the confirmation guard itself, so what this
//! prints is what happens: "kept", or "too late, it was reverted".

use serde::Serialize;

use super::{Ctx, Done};
use crate::error::{Error, exit};
use crate::say;
use crate::state::confirm::{self, Answer};

#[derive(Serialize)]
struct ConfirmReport {
    outcome: &'static str,
}

pub fn run(ctx: &Ctx) -> Result<Done, Error> {
    let answer = confirm::ask("confirm", Some(std::time::Duration::from_secs(120)))
        .map_err(|e| Error::Other(anyhow::anyhow!("cannot reach the confirmation guard: {e}")))?;
    match answer {
        Answer::Kept => {
            if ctx.chatty() {
                say!("roce-route: confirmed; the change stays");
            }
            Ok(Done::new(exit::OK, true, ConfirmReport { outcome: "kept" }))
        }
        Answer::Reverted => Err(Error::NotConfirmed(
            "too late: the deadline passed (or the apply was interrupted) before this confirmation, and the \
             change was rolled back; the host is as it was before the apply"
                .into(),
        )),
        Answer::RevertFailed(why) => Err(Error::RevertFailed(format!(
            "too late: the change was being reverted, and the revert failed: {why}; run `{}`",
            ctx.suggest(&["rollback"])
        ))),
        Answer::Waiting { .. } => {
            Err(Error::Other(anyhow::anyhow!("the confirmation guard did not take the confirmation")))
        }
        Answer::NoGuard => keep_orphaned_trial(ctx),
    }
}

/// No guard listens, but `pending` says a trial waited: its guard died.
/// Confirming keeps that change, when it was made whole (its journals are
/// committed): `pending` goes, so that no one reverts it later. A trial
/// killed half-way is not kept: rollback undoes it.
fn keep_orphaned_trial(ctx: &Ctx) -> Result<Done, Error> {
    let Some(state) = ctx.existing_state()? else { return Err(nothing_waiting(ctx)) };
    let _lock = ctx.lock()?;
    let Some(p) = state.pending()? else { return Err(nothing_waiting(ctx)) };
    let runs = state.journals_after(p.after)?;
    let whole = !runs.is_empty()
        && runs.iter().all(|j| j.committed && j.header.trial.as_deref() == Some(p.trial.as_str()));
    if !whole {
        return Err(nothing_waiting(ctx));
    }
    state.keep_install(&p)?;
    state.clear_pending()?;
    if ctx.chatty() {
        say!(
            "roce-route: confirmed; the guard (pid {}) of that `apply --confirm` (pid {}) was gone, and its change \
             stays",
            p.guard_pid,
            p.pid
        );
    }
    Ok(Done::new(exit::OK, true, ConfirmReport { outcome: "kept" }))
}

/// No guard listens: nothing waits, or the guard died with the change in place.
fn nothing_waiting(ctx: &Ctx) -> Error {
    let stale = ctx.existing_state().ok().flatten().and_then(|s| s.pending().ok().flatten());
    match stale {
        Some(p) => Error::NothingToConfirm(format!(
            "the guard (pid {}) of the `apply --confirm` (pid {}) is gone without reverting, and its change was \
             not made whole (killed half-way): it cannot be kept; undo it with `{}`",
            p.guard_pid,
            p.pid,
            ctx.suggest(&["rollback"])
        )),
        None => Error::NothingToConfirm(
            "no `apply --confirm` is waiting in this network namespace (it may have been confirmed or rolled back \
             already)"
                .into(),
        ),
    }
}
