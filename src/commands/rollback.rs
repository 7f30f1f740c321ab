//! `roce-route rollback`: undo the most recent apply (or remove) exactly,
//! from its journal, also when that apply was killed half-way.

use serde::Serialize;

use super::{Ctx, connect, print_json};
use crate::error::Error;
use crate::executor::{self, TxError};
use crate::host::Kernel;
use crate::model::{Op, SysctlKey};
use crate::say;
use crate::state::{Journal, StateDir};

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
        let what = format!("rolling back the {} of journal {}", journal.header.kind, journal.path.display());
        return Err(TxError::UndoFailed { what, undo_failures: failures }.into());
    }
    state.discard(&journal)?;
    update_origins(&state, &journal)?;
    let steps: Vec<super::Change> = undo
        .iter()
        .rev()
        .map(|op| super::Change { kind: op.kind(), command: crate::render::command(op) })
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

/// Keeps the record of original sysctl values right after undoing a run:
/// a value the undo wrote back to its recorded original is roce-route's no
/// longer (forgotten: the admin's next change is what a later first change
/// records), and the originals the run had released (it had restored
/// them) are roce-route's again.
pub fn update_origins(state: &StateDir, journal: &Journal) -> Result<(), Error> {
    let stored = state.sysctl_origins()?;
    let back_to_original: Vec<(String, SysctlKey)> = journal
        .undo
        .iter()
        .filter_map(|(_, op)| match op {
            Op::SetSysctl { iface, key, new, .. } => Some(((iface.clone(), *key), *new)),
            _ => None,
        })
        .filter(|(k, value)| stored.get(k) == Some(value))
        .map(|(k, _)| k)
        .collect();
    state.forget_sysctl_origins(&back_to_original)?;
    state.record_sysctl_origins(&journal.header.released_origins)?;
    Ok(())
}
