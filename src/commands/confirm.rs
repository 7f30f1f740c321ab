//! `roce-route confirm`: keep the change of a waiting `apply --confirm`.

use super::Ctx;
use crate::error::Error;
use crate::say;

pub fn run(ctx: &Ctx) -> Result<(), Error> {
    let state = ctx.state()?;
    if state.confirm()? {
        say!("roce-route: confirmed; the waiting apply keeps its change");
        Ok(())
    } else {
        Err(Error::NothingToConfirm(
            "no `apply --confirm` is waiting in this network namespace (it may have rolled back already)"
                .into(),
        ))
    }
}
