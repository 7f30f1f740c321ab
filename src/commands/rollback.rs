//! `roce-route rollback`: undo the most recent apply (or remove) exactly,
//! from its journal, also when that apply was killed half-way.

use serde::Serialize;

use super::{Ctx, connect, op_kind, print_json};
use crate::error::Error;
use crate::executor::{self, TxError};
use crate::host::Kernel;
use std::collections::BTreeSet;

use crate::model::{Op, SysctlKey};
use crate::say;
use crate::state::StateDir;

#[derive(Debug, Serialize)]
pub struct RollbackReport {
    pub command: &'static str,
    /// Whether anything was undone.
    pub changed: bool,
    /// What the journal was for: "apply" or "remove".
    pub undid: Option<String>,
    /// Whether that run had finished (false after a crash).
    pub finished: Option<bool>,
    pub steps: Vec<super::Change>,
}

pub async fn run(ctx: &Ctx, json: bool) -> Result<(), Error> {
    let state = ctx.state()?;
    let _lock = state.lock(ctx.lock_timeout)?;
    let Some(journal) = state.latest_journal()? else {
        if json {
            print_json(&RollbackReport {
                command: "rollback",
                changed: false,
                undid: None,
                finished: None,
                steps: vec![],
            });
        } else {
            say!("roce-route: nothing to roll back");
        }
        return Ok(());
    };
    let undo: Vec<Op> = journal.undo.iter().map(|(_, op)| op.clone()).collect();
    let nl = connect().await?;
    let failures = executor::undo_all(&mut Kernel::new(&nl), &undo).await;
    if !failures.is_empty() {
        let cause = Box::new(TxError::Interrupted { signal: 0, undone: undo.len() - failures.len() });
        return Err(TxError::RollbackFailed { cause, undo_failures: failures }.into());
    }
    state.discard(&journal)?;
    forget_undone_origins(&state, &undo)?;
    let steps: Vec<super::Change> = undo
        .iter()
        .rev()
        .map(|op| super::Change { kind: op_kind(op), command: crate::render::command(op) })
        .collect();
    if json {
        print_json(&RollbackReport {
            command: "rollback",
            changed: !steps.is_empty(),
            undid: Some(journal.header.kind.clone()),
            finished: Some(journal.committed),
            steps,
        });
    } else {
        let how = if journal.committed { "" } else { " (it had not finished: killed or crashed)" };
        let of = journal.header.config.as_ref().map_or(String::new(), |c| format!(" of {c}"));
        let ago = super::now_unix().saturating_sub(journal.header.started_unix);
        say!(
            "roce-route: rolled back the {}{of} made {ago} s ago{how}: {} step(s) undone",
            journal.header.kind,
            steps.len()
        );
        for s in &steps {
            say!("  {}", s.command);
        }
    }
    Ok(())
}

/// Once no remaining journal touches a sysctl, roce-route's changes to it
/// are all undone: forget its recorded value, so that a later change by
/// the admin is what the next "first change" records.
fn forget_undone_origins(state: &StateDir, undone: &[Op]) -> Result<(), Error> {
    let still_touched: BTreeSet<(String, SysctlKey)> =
        state.journals()?.iter().flat_map(|j| sysctl_keys(j.undo.iter().map(|(_, op)| op))).collect();
    let forget: Vec<(String, SysctlKey)> =
        sysctl_keys(undone.iter()).filter(|k| !still_touched.contains(k)).collect();
    Ok(state.forget_sysctl_origins(&forget)?)
}

fn sysctl_keys<'a>(ops: impl Iterator<Item = &'a Op>) -> impl Iterator<Item = (String, SysctlKey)> {
    ops.filter_map(|op| match op {
        Op::SetSysctl { iface, key, .. } => Some((iface.clone(), *key)),
        _ => None,
    })
}
