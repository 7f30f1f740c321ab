//! `roce-route confirm`: keep the change of a waiting `apply --confirm`.

use nix::sys::signal::kill;
use nix::unistd::Pid;

use super::Ctx;
use crate::error::Error;
use crate::say;

pub fn run(ctx: &Ctx) -> Result<(), Error> {
    let state = ctx.state()?;
    let nothing = || {
        Error::NothingToConfirm(
            "no `apply --confirm` is waiting in this network namespace (it may have rolled back already)"
                .into(),
        )
    };
    let pending = state.pending()?.ok_or_else(nothing)?;
    // A waiting apply that was killed can no longer roll back by itself.
    if !alive(pending.pid) {
        state.clear_pending()?;
        return Err(Error::NothingToConfirm(format!(
            "the `apply --confirm` (pid {}) is no longer running: its change stayed in place, unconfirmed; \
             keep it, or undo it with `roce-route rollback`",
            pending.pid
        )));
    }
    if !state.confirm()? {
        return Err(nothing());
    }
    say!("roce-route: confirmed; the waiting apply keeps its change");
    Ok(())
}

fn alive(pid: u32) -> bool {
    i32::try_from(pid).is_ok_and(|pid| kill(Pid::from_raw(pid), None).is_ok())
}
