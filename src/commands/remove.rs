//! `roce-route remove`: take out everything roce-route owns (found by its
//! protocol number, so it works without a journal) and put the sysctls
//! back to the values recorded before roce-route first changed them.

use std::collections::BTreeSet;

use anyhow::Context;

use super::{Ctx, apply, connect};
use crate::error::Error;
use crate::model::{Family, Op, RawBytes};
use crate::netlink::Netlink;
use crate::say;
use crate::state::{JournalHeader, StateDir};
use crate::{render, sysctl};

pub async fn run(ctx: &Ctx, protocol: u8) -> Result<(), Error> {
    let state = ctx.state()?;
    let _lock = state.lock(ctx.lock_timeout)?;
    let nl = connect().await?;
    // The protocol given, and any a journal here was made with (a config
    // may set its own): remove must not leave half of roce-route behind.
    let mut protocols = BTreeSet::from([protocol]);
    protocols.extend(state.journals()?.iter().map(|j| j.header.protocol).filter(|p| *p != 0));
    let ops = plan_removal(&nl, &state, &protocols).await?;
    let names: Vec<String> = protocols.iter().map(u8::to_string).collect();
    if ops.is_empty() {
        say!(
            "roce-route: nothing to remove (no route or rule with proto {}, sysctls as recorded)",
            names.join(" or ")
        );
        state.clear_journals()?;
    } else {
        let header = JournalHeader::new("remove", None, protocol);
        apply::execute(ctx, &state, &nl, &ops, header).await?;
        say!("roce-route: removed {} item(s):", ops.len());
        for op in &ops {
            say!("  {}", render::command(op));
        }
        // Only the remove's own journal stays: `rollback` undoes the remove.
        state.clear_older_journals()?;
    }
    state.clear_sysctl_origins()?;
    Ok(())
}

/// Rules first (traffic falls back to main), then routes, then sysctls.
async fn plan_removal(nl: &Netlink, state: &StateDir, protocols: &BTreeSet<u8>) -> Result<Vec<Op>, Error> {
    let mut ops = Vec::new();
    for r in nl.rules().await.context("cannot read the policy rules")? {
        if protocols.contains(&r.item.protocol) {
            ops.push(Op::DelRule { rule: r.item, raw: Some(RawBytes(r.raw)) });
        }
    }
    for family in [Family::V4, Family::V6] {
        for protocol in protocols {
            let routes = nl.routes(family, None, Some(*protocol)).await.context("cannot read the routes")?;
            ops.extend(
                routes.into_iter().map(|r| Op::DelRoute { route: r.item, raw: Some(RawBytes(r.raw)) }),
            );
        }
    }
    for ((iface, key), origin) in state.sysctl_origins()? {
        // An interface that is gone has no sysctl left to restore.
        let Ok(current) = sysctl::read(&iface, key) else {
            continue;
        };
        if current != origin {
            ops.push(Op::SetSysctl { iface, key, old: current, new: origin });
        }
    }
    Ok(ops)
}
