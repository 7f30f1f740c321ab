//! `watch --metrics FILE`: the one `metrics::Snapshot` of the run, its
//! gauges set after each pass that got to plan, its counters added to by
//! each heal, and the file written (atomically) at start and after every
//! pass.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::commands::check::op_kind;
use crate::metrics::{self, HealTrigger, Snapshot};
use crate::model::Op;
use crate::plan::Desired;
use crate::state::{RunKind, StateDir};
use crate::sysfs::Sysfs;

use super::trigger::Trigger;

/// The metrics of a watch run and where they go.
#[derive(Default)]
pub(super) struct Metrics {
    pub snapshot: Snapshot,
    /// None: no `--metrics`; the snapshot is kept all the same (cheap).
    file: Option<PathBuf>,
    /// Where the RDMA ports are read (`--sysfs-root`); None: nowhere.
    sysfs: Option<Box<dyn Sysfs>>,
    /// The last write failed: said once until one succeeds.
    failing: bool,
    /// The rails of the last pass that planned (their addresses give the
    /// GID indices), and the names of every rail of the config, the ones
    /// not ready too (a rail that is down has its port shown down).
    planned: Vec<crate::plan::PlannedInterface>,
    rails: Vec<String>,
}

impl Metrics {
    pub fn new(file: Option<PathBuf>, sysfs: Option<Box<dyn Sysfs>>) -> Metrics {
        Metrics { file, sysfs, ..Metrics::default() }
    }

    /// After a pass that planned `desired`: the host is as it asks but for
    /// the parts it is not ready for.
    pub fn planned(&mut self, desired: &Desired) {
        let s = &mut self.snapshot;
        s.in_sync = desired.not_ready.is_empty();
        s.rails.clear();
        for rail in &desired.interfaces {
            s.rail(&rail.name).in_sync = true;
        }
        for nr in &desired.not_ready {
            let rail = s.rail(&nr.interface);
            rail.add_not_ready(nr);
            rail.in_sync = false;
        }
        s.set_drift(desired.not_ready.iter().map(|_| "not_ready"));
    }

    /// With `--metrics`: each rail's RDMA port state and the GID index
    /// NCCL would use, read from sysfs after the pass (as check does; a
    /// device that cannot be read is left out).
    pub fn rdma(&mut self, desired: &Desired, links: &[crate::model::Link]) {
        // Without --metrics nothing is read, so nothing is kept either.
        if !self.reads_rdma() {
            return;
        }
        self.planned = desired.interfaces.clone();
        let mut rails: Vec<String> = desired.interfaces.iter().map(|i| i.name.clone()).collect();
        rails.extend(desired.not_ready.iter().map(|n| n.interface.clone()));
        rails.sort();
        rails.dedup();
        self.rails = rails;
        self.rdma_again(links);
    }

    /// Whether the RDMA ports are read (`--metrics`).
    pub fn reads_rdma(&self) -> bool {
        self.sysfs.is_some()
    }

    /// The RDMA ports of the rails of the last pass, read again
    /// (`timers::PORTS_SETTLE`).
    pub fn rdma_again(&mut self, links: &[crate::model::Link]) {
        // Set with --metrics only (watch::run): no file, no sysfs.
        let Some(sysfs) = &self.sysfs else {
            return;
        };
        let (mut rdma, _) = crate::rdma::scan_lenient(sysfs.as_ref(), links);
        // Unowned RoCE ports are left out on error too: a missing metric
        // rather than another namespace's port state.
        let _ = crate::rdma_read::own(sysfs.as_ref(), &mut rdma);
        let rails: Vec<&str> = self.rails.iter().map(String::as_str).collect();
        // A port that went (its device deleted) is no longer shown.
        for rail in self.snapshot.rails.values_mut() {
            rail.rdma = None;
        }
        crate::commands::check::rdma_ports(&mut self.snapshot, &self.planned, &rails, &rdma);
    }

    /// A heal of `ops` after `trigger`, with `announced` addresses told.
    pub fn healed(&mut self, trigger: &Trigger, ops: &[Op], announced: usize, now: SystemTime) {
        let c = &mut self.snapshot.counters;
        c.heal(trigger.metric());
        c.found(ops.iter().map(op_kind));
        c.announced(announced as u64);
        self.snapshot.last_heal = Some(now);
    }

    /// A pass that failed after reading the host (the change it tried
    /// failed, or was undone): the host is as that reading found it, with
    /// the differences check would report from it (its kinds; each rail
    /// in sync unless one concerns it). The RDMA ports stay as last read.
    pub fn failed_reading(&mut self, desired: &Desired, plan: &crate::diff::Plan) {
        let mut report = crate::commands::check::build_report(desired, plan, Vec::new(), "", "");
        report.add_not_ready(&desired.not_ready, "");
        let s = &mut self.snapshot;
        let mut rails = std::collections::BTreeMap::new();
        for rail in &desired.interfaces {
            let concerned = report.differences.iter().any(|d| d.interface.as_deref() == Some(&rail.name));
            rails
                .insert(rail.name.clone(), metrics::Rail { in_sync: !concerned, ..metrics::Rail::default() });
        }
        for nr in &desired.not_ready {
            let rail: &mut metrics::Rail = rails.entry(nr.interface.clone()).or_default();
            rail.add_not_ready(nr);
            rail.in_sync = false;
        }
        for (name, rail) in &mut rails {
            rail.rdma = s.rails.get(name).and_then(|r| r.rdma.clone());
        }
        s.rails = rails;
        s.set_drift(report.differences.iter().map(|d| d.kind));
        s.in_sync = false;
    }

    /// A failed pass (whether or not it got to read the host): not in
    /// sync, whatever the last reading said, and counted.
    pub fn failed(&mut self) {
        self.snapshot.in_sync = false;
        self.snapshot.counters.failed_pass();
    }

    /// A pass that went through, at `now`.
    pub fn succeeded(&mut self, now: SystemTime) {
        self.snapshot.last_success = Some(now);
    }

    /// Conflicts stopped the heal: the host is not in sync.
    pub fn conflicts(&mut self, n: usize) {
        self.snapshot.in_sync = false;
        self.snapshot.set_drift(std::iter::repeat_n("conflict", n));
    }

    /// Writes the file (when asked for), with the time of the user's
    /// latest apply (its journal's, past the heals after it: none when the
    /// user's latest run is a remove). Returns the error to say, once while
    /// it repeats.
    pub fn write(&mut self, state: &StateDir) -> Option<String> {
        let file = self.file.as_ref()?;
        // Unreadable now: the time last read stays.
        if let Ok(run) = state.latest_user_run() {
            self.snapshot.last_apply = run
                .filter(|h| h.kind == RunKind::Apply)
                .map(|h| UNIX_EPOCH + Duration::from_secs(h.started_unix));
        }
        match metrics::write_textfile(file, &metrics::render(&self.snapshot)) {
            Ok(()) => {
                self.failing = false;
                None
            }
            Err(e) if !self.failing => {
                self.failing = true;
                Some(format!("cannot write the metrics to {}: {e}", file.display()))
            }
            Err(_) => None,
        }
    }
}

impl Trigger {
    /// Its `trigger` label in `roce_route_heals_total`.
    pub fn metric(&self) -> HealTrigger {
        match self {
            Trigger::Start => HealTrigger::Start,
            Trigger::Events(_) => HealTrigger::Events,
            Trigger::Overflow => HealTrigger::Overflow,
            Trigger::Retry => HealTrigger::Retry,
            Trigger::Recheck => HealTrigger::Recheck,
            Trigger::Resync => HealTrigger::Resync,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SysctlKey;
    use crate::plan::{NotReady, PlannedInterface, Subject};

    fn rail(name: &str) -> PlannedInterface {
        PlannedInterface {
            name: name.into(),
            table: 100,
            priority: 1000,
            addresses: vec![],
            gateways: vec![],
            subnets: vec![],
            onlink_gateways: vec![],
        }
    }

    #[test]
    fn each_trigger_has_its_label() {
        let all = [
            Trigger::Start,
            Trigger::Events(vec!["x".into()]),
            Trigger::Overflow,
            Trigger::Retry,
            Trigger::Recheck,
            Trigger::Resync,
        ];
        let labels: Vec<HealTrigger> = all.iter().map(Trigger::metric).collect();
        assert_eq!(labels, HealTrigger::ALL);
    }

    #[test]
    fn a_pass_sets_the_gauges_and_a_heal_adds_to_the_counters() {
        let mut m = Metrics::default();
        let nr = NotReady { interface: "rail1".into(), subject: Subject::Interface, reason: "gone".into() };
        m.planned(&Desired { interfaces: vec![rail("rail0")], not_ready: vec![nr], ..Desired::default() });
        let s = &m.snapshot;
        assert!(!s.in_sync);
        assert!(s.rails["rail0"].in_sync && !s.rails["rail1"].in_sync && !s.rails["rail1"].is_ready());
        assert_eq!(s.drift.get("not_ready"), Some(&1));
        let ops = [Op::SetSysctl { iface: "rail0".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 }];
        m.healed(&Trigger::Resync, &ops, 2, UNIX_EPOCH + Duration::from_secs(9));
        m.healed(&Trigger::Resync, &ops, 0, UNIX_EPOCH + Duration::from_secs(10));
        m.planned(&Desired { interfaces: vec![rail("rail0")], ..Desired::default() });
        let s = &m.snapshot;
        assert!(s.in_sync && s.drift.is_empty() && !s.rails.contains_key("rail1"));
        assert_eq!(s.counters.heals(HealTrigger::Resync), 2);
        assert_eq!((s.counters.drift_found("sysctl"), s.counters.announcements()), (2, 2));
        assert_eq!(s.last_heal, Some(UNIX_EPOCH + Duration::from_secs(10)));
        m.conflicts(2);
        assert!(!m.snapshot.in_sync);
        assert_eq!(m.snapshot.drift.get("conflict"), Some(&2));
    }

    #[test]
    fn a_failed_pass_is_not_in_sync_with_the_drift_it_read_and_counts() {
        let mut m = Metrics::default();
        let desired = Desired { interfaces: vec![rail("rail0"), rail("rail1")], ..Desired::default() };
        m.planned(&desired);
        m.succeeded(UNIX_EPOCH + Duration::from_secs(5));
        assert!(m.snapshot.in_sync);
        let ops = vec![Op::SetSysctl { iface: "rail1".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 }];
        let plan = crate::diff::Plan { ops, ..crate::diff::Plan::default() };
        m.failed_reading(&desired, &plan);
        m.failed();
        let s = &m.snapshot;
        assert!(!s.in_sync);
        assert_eq!(s.drift.get("sysctl"), Some(&1));
        assert!(s.rails["rail0"].in_sync && !s.rails["rail1"].in_sync);
        assert_eq!(s.counters.failed_passes(), 1);
        assert_eq!(s.last_success, Some(UNIX_EPOCH + Duration::from_secs(5)));
        // Failed before any reading: not in sync all the same.
        m.planned(&desired);
        m.failed();
        assert!(!m.snapshot.in_sync);
        assert_eq!(m.snapshot.counters.failed_passes(), 2);
    }
}
