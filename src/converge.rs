//! The apply transaction loop, shared by `apply` and `watch`: reconcile
//! the config against the live host, make the plan as one journaled
//! transaction, verify the host, commit; when another actor changed the
//! host between the read and the write (the transaction was rolled back),
//! read it again, up to `ATTEMPTS` times. The caller holds the
//! per-namespace lock.

use std::collections::BTreeMap;

use crate::config::Config;
use crate::diff::Plan;
use crate::error::Error;
use crate::netlink::Netlink;
use crate::plan::Desired;
use crate::reconcile;
use crate::render::count;
use crate::signals::StopFlag;
use crate::state::{JournalHeader, Record, RunKind, StateDir};
use crate::transaction::{self, Env};

/// How many times the loop reads the host again when another actor
/// changed it between the read and the write.
pub const ATTEMPTS: u32 = 3;

/// What one converging run asks for.
pub struct Request<'a> {
    pub cfg: &'a Config,
    /// The merged config text recorded for `watch` (every file's name and
    /// text).
    pub config_files: &'a [(String, String)],
    pub adopt: bool,
    /// The journal kind of a change: `RunKind::Apply` for the user's apply,
    /// `RunKind::Heal` for watch (rollback undoes heals with the apply they
    /// build on, and they never push it out of the journal window).
    pub kind: RunKind,
    /// The trial id of an `apply --confirm`, recorded in its journal.
    pub trial: Option<String>,
    /// Says a notice of the run (a retry after the host changed) as the
    /// command prints its lines: apply on stderr, watch as a log line.
    pub notice: &'a dyn Fn(&str),
    /// The addresses, when the caller read them an instant before, under
    /// the lock (watch) or just before it took the lock at once (apply):
    /// the first reading takes them instead of a dump.
    pub addresses: Option<&'a reconcile::Given>,
    /// The record, when the caller read it under the lock an instant
    /// before (watch): the first reading takes it instead of reading the
    /// file again.
    pub record: Option<&'a Record>,
}

/// The outcome: the desired state and plan of the last reading, and the
/// committed journal header when something changed (None: in sync).
pub struct Converged {
    pub desired: Desired,
    pub plan: Plan,
    pub header: Option<JournalHeader>,
}

/// Reconciles and, when the plan is not empty, makes it as a verified,
/// committed transaction. `gate` sees every reading before anything is
/// changed and may refuse it (apply's --strict and conflicts) or report on
/// it; `adjust` may change the record as read before planning (watch
/// forgets replaced discovered addresses).
pub async fn converge(
    state: &StateDir,
    nl: &mut Netlink,
    stop: &StopFlag,
    req: &Request<'_>,
    mut gate: impl FnMut(&Record, &Desired, &Plan) -> Result<(), Error>,
    adjust: impl Fn(&mut Record),
) -> Result<Converged, Error> {
    let cfg = req.cfg;
    let mut attempt = 1;
    loop {
        let mut record = match req.record.filter(|_| attempt == 1) {
            Some(record) => record.clone(),
            None => std::rc::Rc::unwrap_or_clone(state.record()?),
        };
        // An undo gives back the discovered addresses as they were
        // stored, not as `adjust` left them.
        let stored_discovered = record.discovered.clone();
        adjust(&mut record);
        // A rail renamed since its sysctls were recorded keeps them: its
        // values are planned, given back and recorded under its name now.
        let renamed = reconcile::follow_renames(nl, &mut record, Some(cfg));
        let given = req.addresses.filter(|_| attempt == 1).cloned();
        let reading = reconcile::reconcile_reading(nl, cfg, req.adopt, &record, given).await;
        let (desired, plan, reading) = match reading {
            // The config was fine a moment ago: the host changed under us.
            Err(Error::Config(e)) if attempt > 1 => {
                return Err(Error::HostChanged(format!("the host changed while applying: {e}")));
            }
            other => other?,
        };
        gate(&record, &desired, &plan)?;
        if plan.ops.is_empty() {
            return Ok(Converged { desired, plan, header: None });
        }
        let mut header = transaction::header_for(
            req.kind,
            Some(cfg.file.clone()),
            cfg.defaults.protocol,
            &plan.ops,
            &record,
        );
        header.files = cfg.files.clone();
        header.sources = cfg.interfaces.iter().map(|i| (i.name.clone(), i.file.clone())).collect();
        header.assigned = reconcile::tables::assignments(cfg, &desired);
        header.discovered = desired.discovered.clone();
        header.config_files = req.config_files.to_vec();
        header.trial = req.trial.clone();
        header.renamed = renamed;
        header.links = reconcile::recorded_indexes(nl, &record);
        header.replaced_discovered = stored_discovered;
        let env = Env { state, nl, stop };
        match transaction::begin(&env, &plan.ops, header).await {
            Ok(applied) => {
                let record = state.record()?;
                let left = reconcile::verify(
                    env.nl,
                    &desired,
                    &record,
                    req.adopt,
                    &reading,
                    &plan.ops,
                    applied.written(),
                )
                .await?;
                if left.is_empty() {
                    let header = applied.commit()?;
                    return Ok(Converged { desired, plan, header: Some(header) });
                }
                let words: Vec<String> = left.iter().map(crate::render::describe).collect();
                let missing = count(left.len(), "entry", "entries");
                if gone_meanwhile(&left) {
                    // Entries are missing with nothing in their place:
                    // another actor deleted them after they were read or
                    // made (a purge still running when watch's pass began;
                    // a rail going down takes its routes), not the kernel
                    // keeping something else. Undone, and read again
                    // (links too), as for a race the kernel refused.
                    let why = format!("{missing} deleted while applying");
                    applied.undo(&why).await?;
                    if attempt >= ATTEMPTS {
                        return Err(Error::HostChanged(format!(
                            "{missing} went again right after they were made, {ATTEMPTS} times in a row: \
                             another agent deletes them (or the kernel keeps them in a form that is not \
                             roce-route's): {}; the change was rolled back",
                            words.join("; ")
                        )));
                    }
                    (req.notice)(&format!(
                        "the host changed while applying ({missing} deleted meanwhile: {}); reading it again",
                        words.join("; ")
                    ));
                    attempt += 1;
                    nl.refresh_links()
                        .await
                        .map_err(|e| Error::Other(anyhow::anyhow!("cannot read the links: {e}")))?;
                    continue;
                }
                let why = format!(
                    "the kernel did not keep the change as asked (it normalised {missing}): {}",
                    words.join("; ")
                );
                return Err(applied.abort(why).await);
            }
            Err(Error::Transaction(e))
                if attempt < ATTEMPTS
                    && (e.is_race()
                        || (req.kind == RunKind::Heal && link_went_down(&e, &plan.ops))
                        || source_went_away(nl, &e, &plan.ops).await) =>
            {
                (req.notice)(&format!("the host changed while applying ({e}); reading it again"));
                attempt += 1;
                nl.refresh_links()
                    .await
                    .map_err(|e| Error::Other(anyhow::anyhow!("cannot read the links: {e}")))?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether a step failed because the link of its route went down between
/// the read and the write: ENETDOWN ("Device for nexthop is not up") for a
/// route through a link the reading found up, since only rails that are up
/// get routes. A heal reads the host again and finds the rail not ready,
/// as if it had been down before the pass (a flap in a storm used to cost
/// a failed pass and its retry 2 s later). `apply` keeps the failure: the
/// user who ran it hears that a rail went down under it. Pure.
fn link_went_down(e: &crate::executor::TxError, ops: &[crate::model::Op]) -> bool {
    use crate::model::Op;
    let crate::executor::TxError::Failed { step, .. } = e else {
        return false;
    };
    step.errno == Some(nix::errno::Errno::ENETDOWN)
        && matches!(
            ops.get(step.index),
            Some(Op::AddRoute { route } | Op::ReplaceRoute { new: route, .. }) if route.oif.is_some()
        )
}

/// Whether a step failed because the source address of its route left the
/// host between the read and the write (the kernel says EINVAL, "Invalid
/// source address", which is no race errno): an address replaced while
/// watch's pass read the host. Asked of the host after the rollback.
async fn source_went_away(nl: &Netlink, e: &crate::executor::TxError, ops: &[crate::model::Op]) -> bool {
    use crate::model::Op;
    let crate::executor::TxError::Failed { step, .. } = e else {
        return false;
    };
    let route = match ops.get(step.index) {
        Some(Op::AddRoute { route } | Op::ReplaceRoute { new: route, .. }) => route,
        _ => return false,
    };
    let (Some(src), Some(nix::errno::Errno::EINVAL)) = (route.prefsrc, step.errno) else {
        return false;
    };
    match nl.addresses().await {
        Ok(addrs) => source_gone(&addrs, src),
        Err(_) => false,
    }
}

/// Whether `src` is no usable address of the host (absent, or still or
/// again in duplicate address detection). Pure.
fn source_gone(addrs: &[crate::model::Address], src: std::net::IpAddr) -> bool {
    !addrs.iter().any(|a| a.addr.addr == src && !a.tentative && !a.dad_failed)
}

/// Whether what is left after a transaction is only entries to add again:
/// they were deleted by someone else, with nothing in their place. An entry
/// the kernel normalised leaves its stored form behind, which the diff
/// deletes or replaces. Pure.
fn gone_meanwhile(left: &[crate::model::Op]) -> bool {
    use crate::model::Op;
    left.iter().all(|op| matches!(op, Op::AddRule { .. } | Op::AddRoute { .. }))
}

/// Which interface each table belongs to: the config's, then the output
/// interface of the routes changed in it (a dropped interface's table).
pub fn table_owners(desired: &Desired, ops: &[crate::model::Op]) -> BTreeMap<u32, String> {
    let mut owners: BTreeMap<u32, String> =
        desired.interfaces.iter().map(|i| (i.table, i.name.clone())).collect();
    for op in ops {
        if let crate::model::Op::DelRoute { route, .. } | crate::model::Op::AddRoute { route } = op
            && let Some(dev) = &route.oif
        {
            owners.entry(route.table).or_insert_with(|| dev.clone());
        }
    }
    owners
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Op, Prefix, Route, Rule};

    /// A route's source is gone when no usable address of the host is it.
    #[test]
    fn a_source_is_gone_when_no_usable_address_is_it() {
        let mut a = crate::model::Address {
            ifname: "rail0".into(),
            addr: Prefix::new("2001:db8::11".parse().unwrap(), 64),
            ..Default::default()
        };
        let src = "2001:db8::11".parse().unwrap();
        assert!(!source_gone(std::slice::from_ref(&a), src));
        assert!(source_gone(&[], src));
        a.tentative = true;
        assert!(source_gone(std::slice::from_ref(&a), src));
        assert!(source_gone(&[], "2001:db8::12".parse().unwrap()));
    }

    /// ENETDOWN for a route through a link is the link gone down meanwhile;
    /// the same errno elsewhere, or another errno for that route, is not.
    #[test]
    fn only_enetdown_for_a_route_through_a_link_is_a_link_gone_down() {
        use crate::executor::{FailedStep, TxError};
        use nix::errno::Errno;
        let ip = "198.51.100.10".parse().unwrap();
        let route = Route::connected(100, Prefix::new("198.51.100.0".parse().unwrap(), 24), "rail0", ip, 234);
        let ops = [
            Op::AddRule { rule: Rule::source(1000, ip, 100, 234), raw: None },
            Op::AddRoute { route: route.clone() },
            Op::ReplaceRoute { old: crate::model::Live { item: route.clone(), raw: vec![] }, new: route },
        ];
        let failed = |index, errno| TxError::Failed {
            step: FailedStep { index, command: String::new(), reason: String::new(), errno: Some(errno) },
            undone: 0,
        };
        assert!(link_went_down(&failed(1, Errno::ENETDOWN), &ops));
        assert!(link_went_down(&failed(2, Errno::ENETDOWN), &ops));
        assert!(!link_went_down(&failed(0, Errno::ENETDOWN), &ops), "a rule has no link");
        assert!(!link_went_down(&failed(1, Errno::EINVAL), &ops));
        assert!(!link_went_down(&TxError::Interrupted { signal: 15, undone: 1 }, &ops));
    }

    /// Only entries to add again are "deleted meanwhile"; an entry the
    /// kernel stored in another form leaves that form to delete or
    /// replace, and a sysctl read back otherwise is not a deletion.
    #[test]
    fn only_missing_entries_count_as_deleted_meanwhile() {
        let ip = "198.51.100.10".parse().unwrap();
        let rule = Rule::source(1000, ip, 100, 234);
        let route = Route::connected(100, Prefix::new("198.51.100.0".parse().unwrap(), 24), "rail0", ip, 234);
        let add_rule = Op::AddRule { rule: rule.clone(), raw: None };
        let add_route = Op::AddRoute { route: route.clone() };
        assert!(gone_meanwhile(&[add_rule.clone(), add_route.clone()]));
        assert!(!gone_meanwhile(&[add_rule.clone(), Op::DelRule { rule, raw: None }]));
        assert!(!gone_meanwhile(&[add_route, Op::DelRoute { route, raw: None }]));
    }
}
