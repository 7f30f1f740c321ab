//! `roce-route rollback`: undo the most recent apply (or remove) exactly,
//! from its journal, also when that run was killed half-way, together with
//! the heals by `watch` that built on it.

use std::collections::BTreeSet;

use anyhow::Context;
use serde::Serialize;

use super::{Change, Ctx, Done, connect_lazy};
use crate::config::DEFAULT_PROTOCOL;
use crate::error::{Error, exit};
use crate::model::Family;
use crate::netlink::Netlink;
use crate::render::count;
use crate::say;
use crate::state::{Journal, RunKind, StateDir};
use crate::transaction::{self, Env};

#[derive(Debug, Serialize)]
pub struct RollbackReport {
    pub dry_run: bool,
    /// What the user's run undone was: "apply" or "remove" ("heal" when
    /// only heals by watch were left, "trial" for the unconfirmed change of
    /// an `apply --confirm` whose guard died).
    pub undid: Option<String>,
    /// Whether that run had finished (false after a crash).
    pub finished: Option<bool>,
    /// How many heals by watch that built on it were undone with it.
    pub heals: usize,
    pub steps: Vec<Change>,
    /// With no journal left: how many routes and rules roce-route still owns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub still_owned: Option<usize>,
}

pub async fn run(ctx: &Ctx, dry_run: bool) -> Result<Done, Error> {
    let state = ctx.state()?;
    let _lock = ctx.lock()?;
    let nl = connect_lazy().await?;
    // The trial of an `apply --confirm` whose guard died is the latest
    // change: reverting it is this rollback.
    if !dry_run && let Some(what) = ctx.settle_confirmation("a rollback", &state, &nl).await? {
        if ctx.chatty() {
            say!("roce-route: {what}");
        }
        let report = RollbackReport { undid: Some("trial".into()), ..RollbackReport::empty(dry_run) };
        return Ok(Done::new(exit::OK, true, report));
    }
    let set = state.rollback_set()?;
    let Some(journal) = set.last() else {
        return nothing_to_roll_back(ctx, &state, &nl, dry_run).await;
    };
    // The heals by watch since the user's run are undone first, newest
    // first, then the run itself: watch then follows the config before it.
    let heals = set.iter().filter(|j| j.header.kind == RunKind::Heal).count();
    // Each journal's undo steps, in the order they run (or would run),
    // worked out once: following a renamed link asks the kernel for each
    // recorded link by name (`Netlink::renamed`).
    let mut steps: Vec<Change> = Vec::new();
    let env = Env { state: &state, nl: &nl, stop: &ctx.stop };
    for j in &set {
        let undone = if dry_run {
            transaction::undo_steps(&nl, j).into_iter().rev().collect()
        } else {
            transaction::undo_journal(&env, j).await?
        };
        steps.extend(undone.iter().map(Change::of));
    }
    if ctx.chatty() {
        say_undone(journal, heals, &steps, dry_run);
    }
    // With --dry-run, "changed" says whether the rollback would change the host.
    let changed = !steps.is_empty();
    let report = RollbackReport {
        undid: Some(journal.header.kind.to_string()),
        finished: Some(journal.committed),
        heals,
        steps,
        ..RollbackReport::empty(dry_run)
    };
    Ok(Done::new(exit::OK, changed, report))
}

impl RollbackReport {
    fn empty(dry_run: bool) -> RollbackReport {
        RollbackReport { dry_run, undid: None, finished: None, heals: 0, steps: vec![], still_owned: None }
    }
}

/// No journal is left: says so, and how many routes and rules roce-route
/// still owns (only `remove` takes those out).
async fn nothing_to_roll_back(
    ctx: &Ctx,
    state: &StateDir,
    nl: &Netlink,
    dry_run: bool,
) -> Result<Done, Error> {
    let mut protocols = state.record()?.protocols.clone();
    protocols.insert(DEFAULT_PROTOCOL);
    let owned = owned_entries(nl, &protocols).await?;
    if ctx.chatty() {
        if owned == 0 {
            say!("roce-route: nothing to roll back");
        } else {
            say!(
                "roce-route: nothing to roll back (no journal is left), but roce-route still owns {} here; run \
                 `{}` to take them out",
                count(owned, "route or rule", "routes and rules"),
                ctx.suggest(&["remove"])
            );
        }
    }
    let report = RollbackReport { still_owned: Some(owned), ..RollbackReport::empty(dry_run) };
    Ok(Done::new(exit::OK, false, report))
}

/// "rolled back the apply of c.toml made 5 s ago, and the 2 heals by watch
/// built on it: 7 steps undone" and the steps (what it would undo with
/// --dry-run).
fn say_undone(journal: &Journal, heals: usize, steps: &[Change], dry_run: bool) {
    let how = if journal.committed { "" } else { " (it had not finished: killed or crashed)" };
    let of = journal.header.config.as_ref().map_or(String::new(), |c| format!(" of {c}"));
    let ago = crate::state::unix_now().saturating_sub(journal.header.started_unix);
    let n = count(steps.len(), "step", "steps");
    let kind = journal.header.kind;
    let what = if kind == RunKind::Heal {
        count(heals, "heal by watch", "heals by watch")
    } else if heals > 0 {
        format!(
            "{kind}{of} made {ago} s ago{how}, and the {} built on it",
            count(heals, "heal by watch", "heals by watch")
        )
    } else {
        format!("{kind}{of} made {ago} s ago{how}")
    };
    let head = if dry_run {
        format!("# roce-route rollback --dry-run: would undo the {what}: {n}")
    } else {
        format!("roce-route: rolled back the {what}: {n} undone")
    };
    let mut lines = vec![head];
    lines.extend(steps.iter().map(|s| format!("{}{}", if dry_run { "" } else { "  " }, s.command())));
    super::print_lines(&lines);
}

/// How many rules and routes carry one of `protocols`.
async fn owned_entries(nl: &Netlink, protocols: &BTreeSet<u8>) -> Result<usize, Error> {
    let rules = nl.rules().await.context("cannot read the policy rules")?;
    let mut n = rules.iter().filter(|r| protocols.contains(&r.item.protocol)).count();
    for family in [Family::V4, Family::V6] {
        for p in protocols {
            n += nl.routes(family, None, Some(*p)).await.context("cannot read the routes")?.len();
        }
    }
    Ok(n)
}
