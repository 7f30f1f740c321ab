//! Reading the host and carrying out operations on it: the glue between
//! the pure core and the two effect modules (netlink, sysctl).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::diff::{self, Observed};
use crate::executor::{Effects, StepFailure};
use crate::model::{Family, Op, SysctlKey};
use crate::netlink::Netlink;
use crate::plan::Desired;
use crate::state::{StateDir, StateError};
use crate::sysctl;

/// Sysctl values recorded before roce-route first changed them.
pub type Origins = BTreeMap<(String, SysctlKey), u32>;

/// What the state directory says about earlier runs.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    /// Sysctl values before roce-route first changed them.
    pub origins: Origins,
    /// Tables the newest journal's run touched: a run killed half-way may
    /// have left owned routes there that no owned rule points to any more.
    pub tables: BTreeSet<u32>,
}

impl Recorded {
    pub fn read(state: &StateDir) -> Result<Recorded, StateError> {
        Ok(Recorded { origins: state.sysctl_origins()?, tables: state.recorded_tables()? })
    }
}

/// Reads what the diff needs: every rule, the routes of the tables
/// concerned (kernel-filtered by table), and the sysctls concerned: the
/// desired ones and the recorded ones (interfaces that may have left the
/// config; one that no longer exists has nothing left to restore).
pub async fn observe(nl: &Netlink, desired: &Desired, recorded: &Recorded) -> Result<Observed> {
    let origins = &recorded.origins;
    let rules = nl.rules().await.context("cannot read the policy rules")?;
    let mut tables = diff::tables_to_read(desired, &rules);
    tables.extend(recorded.tables.iter().filter(|t| !crate::model::RESERVED_TABLES.contains(t)));
    let dumps =
        tables.iter().flat_map(|t| [(Family::V4, *t), (Family::V6, *t)]).map(|(family, table)| async move {
            nl.routes(family, Some(table), None)
                .await
                .with_context(|| format!("cannot read the routes of table {table}"))
        });
    let mut routes = Vec::new();
    for dump in futures::future::join_all(dumps).await {
        routes.extend(dump?);
    }
    let mut sysctls = BTreeMap::new();
    for s in &desired.sysctls {
        let value = sysctl::read(&s.iface, s.key)
            .with_context(|| format!("cannot read {}", sysctl::dotted_name(&s.iface, s.key)))?;
        sysctls.insert((s.iface.clone(), s.key), value);
    }
    for (iface, key) in origins.keys() {
        if let Ok(value) = sysctl::read(iface, *key) {
            sysctls.entry((iface.clone(), *key)).or_insert(value);
        }
    }
    let mut all = BTreeMap::new();
    for key in SysctlKey::ALL {
        if let Ok(v) = sysctl::read("all", key) {
            all.insert(key, v);
        }
    }
    Ok(Observed { rules, routes, sysctls, all, origins: origins.clone() })
}

/// Operations on the real kernel.
pub struct Kernel<'a> {
    pub nl: &'a Netlink,
    /// Test hook (ROCE_ROUTE_STEP_DELAY_MS): pause before each step, so
    /// that a test can send a signal in the middle of a transaction.
    pub step_delay: Option<Duration>,
}

impl Kernel<'_> {
    pub fn new(nl: &Netlink) -> Kernel<'_> {
        Kernel { nl, step_delay: crate::testhooks::hooks().step_delay }
    }
}

impl Effects for Kernel<'_> {
    async fn run(&mut self, op: &Op) -> Result<(), StepFailure> {
        if let Some(d) = self.step_delay {
            tokio::time::sleep(d).await;
        }
        match op {
            Op::SetSysctl { iface, key, new, .. } => sysctl::write(iface, *key, *new)
                .map_err(|e| StepFailure { errno: errno_of(&e), message: e.to_string() }),
            _ => self
                .nl
                .execute(op)
                .await
                .map_err(|e| StepFailure { errno: Some(e.errno as i32), message: e.to_string() }),
        }
    }
}

/// The errno of a /proc/sys error (kept as the kind when the message was
/// rewritten to name the path).
fn errno_of(e: &std::io::Error) -> Option<i32> {
    e.raw_os_error().or(match e.kind() {
        std::io::ErrorKind::NotFound => Some(2),
        std::io::ErrorKind::PermissionDenied => Some(13),
        std::io::ErrorKind::InvalidInput => Some(22),
        _ => None,
    })
}
