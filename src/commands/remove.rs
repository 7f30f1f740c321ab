//! `roce-route remove`: take out every route and rule roce-route owns (by
//! the protocols it recorded, in the tables it recorded or its rules point
//! to) and put the sysctls back to the values recorded before roce-route
//! first changed them. A remove is one more run on the journal stack:
//! `rollback` undoes it, and the next rollback the run before it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;

use anyhow::Context;
use serde::Serialize;

use super::{Change, Ctx, Done, connect_lazy};
use crate::config::DEFAULT_PROTOCOL;
use crate::error::{Error, exit};
use crate::model::{Op, RESERVED_TABLES, RawBytes, SysctlKey};
use crate::netlink::Netlink;
use crate::reconcile;
use crate::render::{self, count};
use crate::say;
use crate::state::{Record, RunKind};
use crate::sysctl;
use crate::transaction::{self, Env};

#[derive(Debug, Serialize)]
pub struct RemoveReport {
    pub dry_run: bool,
    pub changes: Vec<Change>,
    /// Sysctls left as they are: roce-route never recorded their values
    /// from before its change.
    pub not_restored: Vec<String>,
}

/// `protocol`: an extra protocol given with `--protocol` (validated like
/// `[defaults] protocol`), used for this run only and never recorded.
pub async fn run(ctx: &Ctx, protocol: Option<u8>, dry_run: bool) -> Result<Done, Error> {
    let state = ctx.state()?;
    let _lock = ctx.lock()?;
    let nl = connect_lazy().await?;
    if !dry_run && let Some(what) = ctx.settle_confirmation("a remove", &state, &nl).await? {
        ctx.warn(what);
    }
    let mut record = std::rc::Rc::unwrap_or_clone(state.record()?);
    // A rail renamed since keeps its sysctls: they are given back under
    // its name now.
    let renamed = reconcile::follow_renames(&nl, &mut record, None);
    let mut protocols = record.protocols.clone();
    protocols.insert(DEFAULT_PROTOCOL);
    protocols.extend(protocol);
    let ops = plan_removal(&nl, &record, &protocols).await?;
    let not_restored = unrecorded_sysctls(&ops, &record)?;
    if !not_restored.is_empty() {
        ctx.warn(format!(
            "not restored: {} (roce-route never recorded their values from before the change: the host was set up \
             by hand or with the --dry-run script); set them back yourself if they should change",
            not_restored.join(", ")
        ));
    }
    let report = |changes: Vec<Change>| RemoveReport { dry_run, changes, not_restored: not_restored.clone() };
    if dry_run {
        if ctx.chatty() {
            let head = format!(
                "roce-route remove --dry-run: {}; nothing was changed",
                count(ops.len(), "change", "changes")
            );
            use std::io::Write as _;
            let _ = write!(std::io::stdout(), "{}", crate::output::localize(&render::script(&[head], &ops)));
        }
        // With --dry-run, "changed" says whether remove would change the host.
        return Ok(Done::new(exit::OK, !ops.is_empty(), report(ops.iter().map(Change::of).collect())));
    }
    if ops.is_empty() {
        if ctx.chatty() {
            say!("roce-route: nothing to remove (no route or rule of roce-route's, sysctls as recorded)");
        }
        // Nothing of roce-route's is left: the record forgets its tables,
        // protocols and config (watch has nothing to follow). The journals
        // stay: a remove that changed nothing is no run, and the runs before
        // it can still be rolled back one by one.
        state.write_record(&Record::default())?;
        return Ok(Done::new(exit::OK, false, report(vec![])));
    }
    let mut header = transaction::header_for(RunKind::Remove, None, 0, &ops, &record);
    header.renamed = renamed;
    header.links.extend(reconcile::recorded_indexes(&nl, &record));
    let env = Env { state: &state, nl: &nl, stop: &ctx.stop };
    // One more run on the stack: the journals of the runs before it stay
    // (pruned to the newest 32 at the commit), so a rollback undoes the
    // remove and the next one the apply before it.
    transaction::begin(&env, &ops, header).await?.commit()?;
    if ctx.chatty() {
        let mut lines = vec![format!("roce-route: removed {}:", count(ops.len(), "item", "items"))];
        lines.extend(ops.iter().map(|op| format!("  {}", render::command(op))));
        super::print_lines(&lines);
    }
    Ok(Done::new(exit::OK, true, report(ops.iter().map(Change::of).collect())))
}

/// Rules first (traffic falls back to main), then routes, then sysctls.
async fn plan_removal(nl: &Netlink, record: &Record, protocols: &BTreeSet<u8>) -> Result<Vec<Op>, Error> {
    let mut ops = Vec::new();
    let mut tables: BTreeSet<u32> = record.tables.clone();
    for r in nl.rules().await.context("cannot read the policy rules")? {
        if protocols.contains(&r.item.protocol) {
            tables.insert(r.item.table);
            ops.push(Op::DelRule { rule: r.item, raw: Some(RawBytes(r.raw)) });
        }
    }
    tables.retain(|t| !RESERVED_TABLES.contains(t));
    for r in reconcile::routes_of_tables(nl, &tables).await? {
        if protocols.contains(&r.item.protocol) {
            ops.push(Op::DelRoute { route: r.item, raw: Some(RawBytes(r.raw)) });
        }
    }
    for ((iface, key), origin) in record.origins.iter() {
        // An interface that is gone has no sysctl left to restore.
        let Some(current) = read_sysctl(iface, *key)? else {
            continue;
        };
        if current != *origin {
            ops.push(Op::SetSysctl { iface: iface.clone(), key: *key, old: current, new: *origin });
        }
    }
    Ok(ops)
}

/// The ARP sysctls of interfaces whose routes are removed that have no
/// recorded original and are not at the kernel's default (0).
fn unrecorded_sysctls(ops: &[Op], record: &Record) -> Result<Vec<String>, Error> {
    let ifaces: BTreeSet<&str> = ops
        .iter()
        .filter_map(|op| match op {
            Op::DelRoute { route, .. } => route.oif.as_deref(),
            _ => None,
        })
        .collect();
    let mut found: BTreeMap<String, u32> = BTreeMap::new();
    for iface in ifaces {
        for key in SysctlKey::ALL {
            if record.origins.get(iface, key).is_some() {
                continue;
            }
            if let Some(value) = read_sysctl(iface, key)?
                && value != 0
            {
                found.insert(sysctl::dotted_name(iface, key), value);
            }
        }
    }
    Ok(found.into_iter().map(|(name, v)| format!("{name}={v}")).collect())
}

/// A sysctl of `iface`; None when there is none to read: the interface is
/// gone (no such file) or its name has no sysctl path (one only the
/// kernel's routes carry). Any other failure is an error.
fn read_sysctl(iface: &str, key: SysctlKey) -> Result<Option<u32>, Error> {
    if sysctl::ifname_problem(iface).is_some() {
        return Ok(None);
    }
    match sysctl::read(iface, key) {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Other(anyhow::anyhow!("cannot read a sysctl of {iface}: {e}"))),
    }
}
