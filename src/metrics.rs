//! Prometheus metrics for operators: what `check --format prometheus`
//! prints and what `watch --metrics FILE` keeps in a node_exporter
//! textfile. Pure: plain input types (`Snapshot`) that one check or a
//! long-running watch fills, and `render` to the text exposition format
//! 0.0.4 (what the textfile collector reads); plus `write_textfile`, which
//! replaces the file atomically.
//!
//! Conventions (promtool's lint checks them): every family is
//! `roce_route_*`, with HELP and TYPE lines even when it has no sample;
//! counters end in `_total`, Unix times in `_timestamp_seconds`. Counters
//! count since the process started: for `check` that is its one run, so
//! they are what it found; for `watch`, since it started (a restart is a
//! counter reset, which Prometheus' `rate` handles). Label sets are
//! bounded: rails, kinds and triggers, never free text.
//!
//! RDMA port states are the kernel's numbers (`ports/N/state` and
//! `phys_state`), as node_exporter's infiniband collector exposes them in
//! `node_infiniband_state_id` and `node_infiniband_physical_state_id`
//! (labels `device`, `port`): the same values join on those labels.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::plan::{NotReady, Subject};
use crate::rdma::Port;

/// The kinds of difference `check` reports (its `Difference::kind`). Each
/// is rendered, with 0 when none was found, so that a series exists before
/// the first drift (an alert on `> 0` needs no `absent()`); a kind not
/// listed here is rendered too, when found.
pub const DRIFT_KINDS: [&str; 19] = [
    "missing_route",
    "changed_route",
    "extra_route",
    "missing_rule",
    "extra_rule",
    "sysctl",
    "sysctl_overridden",
    "conflict",
    "traffic",
    "host_mismatch",
    "interrupted_run",
    "not_ready",
    "arp_flux",
    "no_carrier",
    "shadowed",
    "foreign_rule_in_table",
    "rdma_port",
    "rdma_gid",
    "rdma_unreadable",
];

/// Why a `watch` pass ran (its triggers, without their details).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HealTrigger {
    /// The pass at start.
    Start,
    /// Netlink notifications (a link, address, route or rule changed).
    Events,
    /// The notification socket overflowed: a full resync.
    Overflow,
    /// A retry after a failed, deferred or held-back pass.
    Retry,
    /// The second pass shortly after a rail appeared.
    Recheck,
    /// The periodic resync (`--resync`).
    Resync,
}

impl HealTrigger {
    pub const ALL: [HealTrigger; 6] = [
        HealTrigger::Start,
        HealTrigger::Events,
        HealTrigger::Overflow,
        HealTrigger::Retry,
        HealTrigger::Recheck,
        HealTrigger::Resync,
    ];

    /// The `trigger` label value.
    pub fn label(self) -> &'static str {
        match self {
            HealTrigger::Start => "start",
            HealTrigger::Events => "events",
            HealTrigger::Overflow => "overflow",
            HealTrigger::Retry => "retry",
            HealTrigger::Recheck => "recheck",
            HealTrigger::Resync => "resync",
        }
    }
}

/// Which part of a rail the host is not ready for (a bounded `part` label;
/// `NotReady::reason` is free text with addresses and interface lists, a
/// new series at every change of wording, so it stays in the logs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NotReadyPart {
    /// The interface as a whole (it does not exist, or none of its
    /// addresses does).
    Interface,
    /// One of its addresses.
    Address,
    /// One of its gateways.
    Gateway,
}

impl NotReadyPart {
    pub const ALL: [NotReadyPart; 3] =
        [NotReadyPart::Interface, NotReadyPart::Address, NotReadyPart::Gateway];

    pub fn label(self) -> &'static str {
        match self {
            NotReadyPart::Interface => "interface",
            NotReadyPart::Address => "address",
            NotReadyPart::Gateway => "gateway",
        }
    }

    /// The part a `NotReady` is about.
    pub fn of(nr: &NotReady) -> NotReadyPart {
        match nr.subject {
            Subject::Interface => NotReadyPart::Interface,
            Subject::Address(_) => NotReadyPart::Address,
            Subject::Gateway(_) => NotReadyPart::Gateway,
        }
    }
}

/// A rail's RDMA port as the kernel shows it, and the GID index NCCL would
/// use on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdmaPort {
    /// `mlx5_0`.
    pub device: String,
    pub port: u32,
    /// `ports/N/state`: 1 DOWN .. 4 ACTIVE.
    pub state_id: u32,
    /// `ports/N/phys_state`: 5 LinkUp.
    pub physical_state_id: u32,
    /// The RoCE v2 GID index NCCL would use (`NcclRail::gid_index`); None
    /// on InfiniBand or when the rail's address has no RoCE v2 GID.
    pub gid_index: Option<u32>,
}

impl RdmaPort {
    /// From the scanned port; the GID index comes from `nccl`.
    pub fn of(port: &Port, gid_index: Option<u32>) -> RdmaPort {
        RdmaPort {
            device: port.device.clone(),
            port: port.port,
            state_id: port.state.code(),
            physical_state_id: port.phys_state.code(),
            gid_index,
        }
    }
}

/// One rail (a configured interface).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rail {
    /// No difference concerns this rail.
    pub in_sync: bool,
    /// How many parts of it the host is not ready for, by part.
    pub not_ready: BTreeMap<NotReadyPart, u64>,
    /// None: the rail has no RDMA device.
    pub rdma: Option<RdmaPort>,
}

impl Rail {
    /// Counts one not-ready part of this rail.
    pub fn add_not_ready(&mut self, nr: &NotReady) {
        *self.not_ready.entry(NotReadyPart::of(nr)).or_default() += 1;
    }

    pub fn is_ready(&self) -> bool {
        self.not_ready.values().all(|n| *n == 0)
    }
}

/// What only grows while the process runs. The fields are private: the
/// only way to change a counter is to add to it (saturating: a wrap to a
/// smaller value would read as a reset).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    heals: BTreeMap<HealTrigger, u64>,
    drift_found: BTreeMap<String, u64>,
    announcements: u64,
    failed_passes: u64,
}

impl Counters {
    /// One heal (a pass that changed something), by what triggered it.
    pub fn heal(&mut self, trigger: HealTrigger) {
        bump(self.heals.entry(trigger).or_default(), 1);
    }

    /// Differences found, one per kind given (a kind twice counts twice).
    pub fn found<'a>(&mut self, kinds: impl IntoIterator<Item = &'a str>) {
        for kind in kinds {
            bump(self.drift_found.entry(kind.to_string()).or_default(), 1);
        }
    }

    /// `n` addresses announced to the peers (one per address and round).
    pub fn announced(&mut self, n: u64) {
        bump(&mut self.announcements, n);
    }

    /// A pass of watch that failed (an error, not a conflict or a wait).
    pub fn failed_pass(&mut self) {
        bump(&mut self.failed_passes, 1);
    }

    pub fn failed_passes(&self) -> u64 {
        self.failed_passes
    }

    pub fn heals(&self, trigger: HealTrigger) -> u64 {
        self.heals.get(&trigger).copied().unwrap_or(0)
    }

    pub fn drift_found(&self, kind: &str) -> u64 {
        self.drift_found.get(kind).copied().unwrap_or(0)
    }

    pub fn announcements(&self) -> u64 {
        self.announcements
    }
}

fn bump(counter: &mut u64, by: u64) {
    *counter = counter.saturating_add(by);
}

/// Everything rendered. `check` fills one from its report; `watch` keeps
/// one, updates the gauges after each pass and adds to the counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The host is as the config asks (check's `in_sync`).
    pub in_sync: bool,
    /// By name: a rail is one series per family (no duplicates possible).
    pub rails: BTreeMap<String, Rail>,
    /// The differences there are now, by kind: for `check` what it found;
    /// for `watch` what its latest pass left (it heals the rest).
    pub drift: BTreeMap<String, u64>,
    pub counters: Counters,
    pub last_heal: Option<SystemTime>,
    /// When a pass of watch last went through (read the host to the end:
    /// in sync, healed, stopped by conflicts, or no config to keep); None
    /// for check, and for a watch none of whose passes did.
    pub last_success: Option<SystemTime>,
    /// The last apply that changed the host (the state record's).
    pub last_apply: Option<SystemTime>,
}

impl Snapshot {
    /// Replaces the current drift with these differences' kinds.
    pub fn set_drift<'a>(&mut self, kinds: impl IntoIterator<Item = &'a str>) {
        self.drift.clear();
        for kind in kinds {
            *self.drift.entry(kind.to_string()).or_default() += 1;
        }
    }

    /// The rail named `name`, added (not in sync, ready, no RDMA) if new.
    pub fn rail(&mut self, name: &str) -> &mut Rail {
        self.rails.entry(name.to_string()).or_default()
    }
}

#[derive(Clone, Copy)]
enum Type {
    Gauge,
    Counter,
}

/// One family: its samples as (label values in the order of `labels`,
/// value), sorted on output.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Type,
    labels: &'static [&'static str],
    samples: Vec<(Vec<String>, String)>,
}

impl Family {
    fn new(name: &'static str, kind: Type, labels: &'static [&'static str], help: &'static str) -> Family {
        Family { name, help, kind, labels, samples: Vec::new() }
    }

    /// A family of one unlabeled sample, or none.
    fn scalar(name: &'static str, kind: Type, help: &'static str, value: Option<String>) -> Family {
        let mut f = Family::new(name, kind, &[], help);
        f.samples.extend(value.map(|v| (vec![], v)));
        f
    }

    fn add(&mut self, values: Vec<String>, value: impl ToString) {
        debug_assert_eq!(values.len(), self.labels.len(), "{}", self.name);
        self.samples.push((values, value.to_string()));
    }

    fn write(mut self, out: &mut String) {
        let kind = match self.kind {
            Type::Gauge => "gauge",
            Type::Counter => "counter",
        };
        let _ = writeln!(out, "# HELP {} {}", self.name, escape_help(self.help));
        let _ = writeln!(out, "# TYPE {} {kind}", self.name);
        self.samples.sort();
        for (values, value) in &self.samples {
            out.push_str(self.name);
            if !values.is_empty() {
                let pairs: Vec<String> = self
                    .labels
                    .iter()
                    .zip(values)
                    .map(|(l, v)| format!("{l}=\"{}\"", escape_label(v)))
                    .collect();
                let _ = write!(out, "{{{}}}", pairs.join(","));
            }
            let _ = writeln!(out, " {value}");
        }
    }
}

/// A label value in the text format: backslash, double quote and line
/// feed escaped.
pub fn escape_label(v: &str) -> String {
    v.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

/// A HELP text: backslash and line feed escaped (quotes stay).
pub fn escape_help(v: &str) -> String {
    v.replace('\\', r"\\").replace('\n', r"\n")
}

fn flag(b: bool) -> u8 {
    u8::from(b)
}

/// Unix seconds (fractions kept; 0 for a time before 1970).
fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The text exposition format 0.0.4 of `s`: the families in a fixed
/// order, the samples of each sorted by their labels.
pub fn render(s: &Snapshot) -> String {
    let mut out = String::new();
    for family in sync_families(s).into_iter().chain(counter_families(s)).chain(rdma_families(s)) {
        family.write(&mut out);
    }
    out
}

fn sync_families(s: &Snapshot) -> Vec<Family> {
    let host = Family::scalar(
        "roce_route_in_sync",
        Type::Gauge,
        "1 when the host is as the config asks (no difference found), else 0.",
        Some(flag(s.in_sync).to_string()),
    );
    let mut rail = Family::new(
        "roce_route_rail_in_sync",
        Type::Gauge,
        &["rail"],
        "1 when no difference found concerns the rail, else 0.",
    );
    let not_ready_rails = Family::scalar(
        "roce_route_rails_not_ready",
        Type::Gauge,
        "Rails of the config the host is not ready for (wholly or in part): left alone until it is.",
        Some(s.rails.values().filter(|r| !r.is_ready()).count().to_string()),
    );
    let mut not_ready = Family::new(
        "roce_route_rail_not_ready",
        Type::Gauge,
        &["rail", "part"],
        "Parts of the rail the host is not ready for, by part: interface (the whole rail), address, gateway.",
    );
    for (name, r) in &s.rails {
        rail.add(vec![name.clone()], flag(r.in_sync));
        for part in NotReadyPart::ALL {
            let n = r.not_ready.get(&part).copied().unwrap_or(0);
            not_ready.add(vec![name.clone(), part.label().to_string()], n);
        }
    }
    let mut drift = Family::new(
        "roce_route_drift",
        Type::Gauge,
        &["kind"],
        "Differences from the config there are now, by kind (check's difference kinds; watch: what its latest pass \
         left).",
    );
    for (kind, n) in with_known_kinds(&s.drift) {
        drift.add(vec![kind], n);
    }
    vec![host, rail, not_ready_rails, not_ready, drift]
}

/// `found` with every known kind that is not in it at 0.
fn with_known_kinds(found: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut all: BTreeMap<String, u64> = DRIFT_KINDS.iter().map(|k| (k.to_string(), 0)).collect();
    all.extend(found.iter().map(|(k, n)| (k.clone(), *n)));
    all
}

fn counter_families(s: &Snapshot) -> Vec<Family> {
    let c = &s.counters;
    let mut found = Family::new(
        "roce_route_drift_found_total",
        Type::Counter,
        &["kind"],
        "Differences from the config found since the process started, by kind.",
    );
    for (kind, n) in with_known_kinds(&c.drift_found) {
        found.add(vec![kind], n);
    }
    let mut heals = Family::new(
        "roce_route_heals_total",
        Type::Counter,
        &["trigger"],
        "Passes of watch that changed the host back to the config, by what triggered the pass.",
    );
    for t in HealTrigger::ALL {
        heals.add(vec![t.label().to_string()], c.heals(t));
    }
    let announced = Family::scalar(
        "roce_route_announcements_total",
        Type::Counter,
        "Addresses announced to the peers (gratuitous ARP, unsolicited neighbour advertisement), once per address \
         and round.",
        Some(c.announcements.to_string()),
    );
    let last_heal = Family::scalar(
        "roce_route_last_heal_timestamp_seconds",
        Type::Gauge,
        "When watch last changed the host back to the config, in Unix seconds (no sample: not since it started).",
        s.last_heal.map(|t| unix_seconds(t).to_string()),
    );
    let failed = Family::scalar(
        "roce_route_failed_passes_total",
        Type::Counter,
        "Passes of watch that failed (an error: nothing changed, or the change was undone); each leaves in_sync at 0.",
        Some(c.failed_passes.to_string()),
    );
    let last_success = Family::scalar(
        "roce_route_last_success_timestamp_seconds",
        Type::Gauge,
        "When a pass of watch last went through (in sync, healed, or stopped by conflicts), in Unix seconds (no \
         sample: none since it started).",
        s.last_success.map(|t| unix_seconds(t).to_string()),
    );
    let last_apply = Family::scalar(
        "roce_route_last_apply_timestamp_seconds",
        Type::Gauge,
        "When the last apply changed the host, in Unix seconds (no sample: none recorded).",
        s.last_apply.map(|t| unix_seconds(t).to_string()),
    );
    vec![found, heals, failed, announced, last_heal, last_success, last_apply]
}

fn rdma_families(s: &Snapshot) -> Vec<Family> {
    const LABELS: &[&str] = &["rail", "device", "port"];
    let mut state = Family::new(
        "roce_route_rdma_port_state_id",
        Type::Gauge,
        LABELS,
        "State of the rail's RDMA port, as the kernel numbers it (as node_infiniband_state_id): 0 NOP, 1 DOWN, \
         2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER.",
    );
    let mut phys = Family::new(
        "roce_route_rdma_port_physical_state_id",
        Type::Gauge,
        LABELS,
        "Physical state of the rail's RDMA port, as the kernel numbers it (as node_infiniband_physical_state_id): \
         1 Sleep, 2 Polling, 3 Disabled, 4 PortConfigurationTraining, 5 LinkUp, 6 LinkErrorRecovery, 7 Phy Test.",
    );
    let mut gid = Family::new(
        "roce_route_nccl_gid_index",
        Type::Gauge,
        LABELS,
        "The RoCE v2 GID index NCCL would use on the rail's port (no sample: InfiniBand, or no such GID).",
    );
    for (name, r) in &s.rails {
        let Some(p) = &r.rdma else { continue };
        let labels = vec![name.clone(), p.device.clone(), p.port.to_string()];
        state.add(labels.clone(), p.state_id);
        phys.add(labels.clone(), p.physical_state_id);
        if let Some(index) = p.gid_index {
            gid.add(labels, index);
        }
    }
    vec![state, phys, gid]
}

/// Temp files get distinct names within a process too.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// The temp file for `path`: hidden, in the same directory (a rename
/// within one filesystem is atomic), and ending in `.tmp`: the textfile
/// collector reads only `*.prom`, so it never sees a half-written file.
fn temp_path(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("{}: not a file name", path.display()))
    })?;
    let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
    let temp = format!(".{}.{}.{seq}.tmp", name.to_string_lossy(), std::process::id());
    Ok(path.with_file_name(temp))
}

/// Replaces `path` with `text` atomically: readers see the old file or the
/// new one, never a part. Written to a temp file beside it, then renamed
/// over it; the temp file is removed when anything fails. Mode 0644: the
/// node_exporter user reads it. Not fsynced: watch rewrites the file after
/// every pass and at start, so a file lost to a crash costs one scrape.
pub fn write_textfile(path: &Path, text: &str) -> io::Result<()> {
    let temp = temp_path(path)?;
    let written = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&temp)?;
        file.write_all(text.as_bytes())?;
        drop(file);
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// One RoCE rail in sync and one IPoIB rail without its address.
    fn small() -> Snapshot {
        let mut s = Snapshot { in_sync: false, last_apply: Some(at(1_700_000_000)), ..Snapshot::default() };
        let r0 = s.rail("rail0");
        r0.in_sync = true;
        r0.rdma = Some(RdmaPort {
            device: "mlx5_0".into(),
            port: 1,
            state_id: 4,
            physical_state_id: 5,
            gid_index: Some(3),
        });
        let r1 = s.rail("ib0.8001");
        r1.add_not_ready(&NotReady {
            interface: "ib0.8001".into(),
            subject: Subject::Address("10.0.1.5".parse().unwrap()),
            reason: "is not on ib0.8001".into(),
        });
        r1.rdma = Some(RdmaPort {
            device: "mlx5_1".into(),
            port: 1,
            state_id: 1,
            physical_state_id: 3,
            gid_index: None,
        });
        s.set_drift(["not_ready", "rdma_port"]);
        s.counters.found(["not_ready", "rdma_port"]);
        s
    }

    /// Every family and sample of `small()`, byte for byte.
    const SMALL: &str = r#"# HELP roce_route_in_sync 1 when the host is as the config asks (no difference found), else 0.
# TYPE roce_route_in_sync gauge
roce_route_in_sync 0
# HELP roce_route_rail_in_sync 1 when no difference found concerns the rail, else 0.
# TYPE roce_route_rail_in_sync gauge
roce_route_rail_in_sync{rail="ib0.8001"} 0
roce_route_rail_in_sync{rail="rail0"} 1
# HELP roce_route_rails_not_ready Rails of the config the host is not ready for (wholly or in part): left alone until it is.
# TYPE roce_route_rails_not_ready gauge
roce_route_rails_not_ready 1
# HELP roce_route_rail_not_ready Parts of the rail the host is not ready for, by part: interface (the whole rail), address, gateway.
# TYPE roce_route_rail_not_ready gauge
roce_route_rail_not_ready{rail="ib0.8001",part="address"} 1
roce_route_rail_not_ready{rail="ib0.8001",part="gateway"} 0
roce_route_rail_not_ready{rail="ib0.8001",part="interface"} 0
roce_route_rail_not_ready{rail="rail0",part="address"} 0
roce_route_rail_not_ready{rail="rail0",part="gateway"} 0
roce_route_rail_not_ready{rail="rail0",part="interface"} 0
# HELP roce_route_drift Differences from the config there are now, by kind (check's difference kinds; watch: what its latest pass left).
# TYPE roce_route_drift gauge
roce_route_drift{kind="arp_flux"} 0
roce_route_drift{kind="changed_route"} 0
roce_route_drift{kind="conflict"} 0
roce_route_drift{kind="extra_route"} 0
roce_route_drift{kind="extra_rule"} 0
roce_route_drift{kind="foreign_rule_in_table"} 0
roce_route_drift{kind="host_mismatch"} 0
roce_route_drift{kind="interrupted_run"} 0
roce_route_drift{kind="missing_route"} 0
roce_route_drift{kind="missing_rule"} 0
roce_route_drift{kind="no_carrier"} 0
roce_route_drift{kind="not_ready"} 1
roce_route_drift{kind="rdma_gid"} 0
roce_route_drift{kind="rdma_port"} 1
roce_route_drift{kind="rdma_unreadable"} 0
roce_route_drift{kind="shadowed"} 0
roce_route_drift{kind="sysctl"} 0
roce_route_drift{kind="sysctl_overridden"} 0
roce_route_drift{kind="traffic"} 0
# HELP roce_route_drift_found_total Differences from the config found since the process started, by kind.
# TYPE roce_route_drift_found_total counter
roce_route_drift_found_total{kind="arp_flux"} 0
roce_route_drift_found_total{kind="changed_route"} 0
roce_route_drift_found_total{kind="conflict"} 0
roce_route_drift_found_total{kind="extra_route"} 0
roce_route_drift_found_total{kind="extra_rule"} 0
roce_route_drift_found_total{kind="foreign_rule_in_table"} 0
roce_route_drift_found_total{kind="host_mismatch"} 0
roce_route_drift_found_total{kind="interrupted_run"} 0
roce_route_drift_found_total{kind="missing_route"} 0
roce_route_drift_found_total{kind="missing_rule"} 0
roce_route_drift_found_total{kind="no_carrier"} 0
roce_route_drift_found_total{kind="not_ready"} 1
roce_route_drift_found_total{kind="rdma_gid"} 0
roce_route_drift_found_total{kind="rdma_port"} 1
roce_route_drift_found_total{kind="rdma_unreadable"} 0
roce_route_drift_found_total{kind="shadowed"} 0
roce_route_drift_found_total{kind="sysctl"} 0
roce_route_drift_found_total{kind="sysctl_overridden"} 0
roce_route_drift_found_total{kind="traffic"} 0
# HELP roce_route_heals_total Passes of watch that changed the host back to the config, by what triggered the pass.
# TYPE roce_route_heals_total counter
roce_route_heals_total{trigger="events"} 0
roce_route_heals_total{trigger="overflow"} 0
roce_route_heals_total{trigger="recheck"} 0
roce_route_heals_total{trigger="resync"} 0
roce_route_heals_total{trigger="retry"} 0
roce_route_heals_total{trigger="start"} 0
# HELP roce_route_failed_passes_total Passes of watch that failed (an error: nothing changed, or the change was undone); each leaves in_sync at 0.
# TYPE roce_route_failed_passes_total counter
roce_route_failed_passes_total 0
# HELP roce_route_announcements_total Addresses announced to the peers (gratuitous ARP, unsolicited neighbour advertisement), once per address and round.
# TYPE roce_route_announcements_total counter
roce_route_announcements_total 0
# HELP roce_route_last_heal_timestamp_seconds When watch last changed the host back to the config, in Unix seconds (no sample: not since it started).
# TYPE roce_route_last_heal_timestamp_seconds gauge
# HELP roce_route_last_success_timestamp_seconds When a pass of watch last went through (in sync, healed, or stopped by conflicts), in Unix seconds (no sample: none since it started).
# TYPE roce_route_last_success_timestamp_seconds gauge
# HELP roce_route_last_apply_timestamp_seconds When the last apply changed the host, in Unix seconds (no sample: none recorded).
# TYPE roce_route_last_apply_timestamp_seconds gauge
roce_route_last_apply_timestamp_seconds 1700000000
# HELP roce_route_rdma_port_state_id State of the rail's RDMA port, as the kernel numbers it (as node_infiniband_state_id): 0 NOP, 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER.
# TYPE roce_route_rdma_port_state_id gauge
roce_route_rdma_port_state_id{rail="ib0.8001",device="mlx5_1",port="1"} 1
roce_route_rdma_port_state_id{rail="rail0",device="mlx5_0",port="1"} 4
# HELP roce_route_rdma_port_physical_state_id Physical state of the rail's RDMA port, as the kernel numbers it (as node_infiniband_physical_state_id): 1 Sleep, 2 Polling, 3 Disabled, 4 PortConfigurationTraining, 5 LinkUp, 6 LinkErrorRecovery, 7 Phy Test.
# TYPE roce_route_rdma_port_physical_state_id gauge
roce_route_rdma_port_physical_state_id{rail="ib0.8001",device="mlx5_1",port="1"} 3
roce_route_rdma_port_physical_state_id{rail="rail0",device="mlx5_0",port="1"} 5
# HELP roce_route_nccl_gid_index The RoCE v2 GID index NCCL would use on the rail's port (no sample: InfiniBand, or no such GID).
# TYPE roce_route_nccl_gid_index gauge
roce_route_nccl_gid_index{rail="rail0",device="mlx5_0",port="1"} 3
"#;

    #[test]
    fn a_small_snapshot_renders_exactly() {
        let text = render(&small());
        if text != SMALL {
            // Line by line, to see where.
            for (got, want) in text.lines().zip(SMALL.lines()) {
                assert_eq!(got, want);
            }
        }
        assert_eq!(text, SMALL);
    }

    #[test]
    fn label_values_are_escaped_and_help_texts_too() {
        assert_eq!(escape_label(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape_label("line\nbreak"), r"line\nbreak");
        assert_eq!(escape_label(r"\n"), r"\\n", "a backslash before an n is not a line feed");
        assert_eq!(escape_help("say \"x\"\\\n"), r#"say "x"\\\n"#, "quotes stay in HELP");
        let mut s = Snapshot::default();
        s.rail("we\"ird\\rail\n").in_sync = true;
        let text = render(&s);
        assert!(text.contains("roce_route_rail_in_sync{rail=\"we\\\"ird\\\\rail\\n\"} 1\n"), "{text}");
        assert_eq!(
            text.lines().filter(|l| l.contains("we\\\"ird")).count(),
            4,
            "in_sync and 3 parts: {text}"
        );
    }

    #[test]
    fn the_order_is_that_of_the_labels_not_of_the_input() {
        let build = |rails: &[&str], kinds: &[&str], triggers: &[HealTrigger]| {
            let mut s = Snapshot::default();
            for r in rails {
                s.rail(r).rdma = Some(RdmaPort {
                    device: format!("mlx5_{r}"),
                    port: 1,
                    state_id: 4,
                    physical_state_id: 5,
                    gid_index: Some(u32::from(r.ends_with('1'))),
                });
            }
            s.set_drift(kinds.iter().copied());
            s.counters.found(kinds.iter().copied());
            triggers.iter().for_each(|t| s.counters.heal(*t));
            s
        };
        use HealTrigger::*;
        let a =
            render(&build(&["rail2", "rail0", "rail1"], &["traffic", "sysctl", "zzz_new"], &[Resync, Start]));
        let b =
            render(&build(&["rail0", "rail1", "rail2"], &["zzz_new", "traffic", "sysctl"], &[Start, Resync]));
        let c =
            render(&build(&["rail1", "rail2", "rail0"], &["sysctl", "zzz_new", "traffic"], &[Resync, Start]));
        assert_eq!(a, b);
        assert_eq!(b, c);
        // Within a family, sorted; a kind check does not know yet is kept.
        let rails: Vec<&str> = a.lines().filter(|l| l.starts_with("roce_route_rail_in_sync{")).collect();
        let mut sorted = rails.clone();
        sorted.sort();
        assert_eq!(rails, sorted);
        assert_eq!(rails.len(), 3);
        assert!(a.contains("roce_route_drift{kind=\"zzz_new\"} 1\n"), "{a}");
        // The families: a fixed order, each once.
        let names: Vec<&str> = a.lines().filter_map(|l| l.strip_prefix("# TYPE ")).collect();
        assert_eq!(names.len(), 15, "{names:?}");
        assert_eq!(
            names,
            render(&Snapshot::default())
                .lines()
                .filter_map(|l| l.strip_prefix("# TYPE "))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn counters_only_grow_and_never_wrap() {
        let mut c = Counters::default();
        c.heal(HealTrigger::Events);
        c.heal(HealTrigger::Events);
        c.found(["sysctl", "sysctl", "traffic"]);
        assert_eq!((c.heals(HealTrigger::Events), c.heals(HealTrigger::Start)), (2, 0));
        assert_eq!((c.drift_found("sysctl"), c.drift_found("traffic"), c.drift_found("x")), (2, 1, 0));
        c.announced(u64::MAX - 1);
        c.announced(5);
        assert_eq!(c.announcements(), u64::MAX, "saturates: a wrap would read as a counter reset");
        let mut s = Snapshot { counters: c, ..Snapshot::default() };
        let text = render(&s);
        assert!(text.contains("roce_route_announcements_total 18446744073709551615\n"), "{text}");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(!value.starts_with('-'), "negative: {line}");
        }
        // set_drift replaces the gauge; the counter stays.
        s.set_drift(["traffic"]);
        s.set_drift([]);
        assert!(s.drift.is_empty());
        assert_eq!(s.counters.drift_found("traffic"), 1);
    }

    #[test]
    fn not_ready_parts_are_told_apart() {
        let nr = |subject: Subject| NotReady {
            interface: "rail0".into(),
            subject,
            reason: "whatever \"words\"".into(),
        };
        let ip = |s: &str| s.parse().unwrap();
        assert_eq!(NotReadyPart::of(&nr(Subject::Interface)), NotReadyPart::Interface);
        assert_eq!(NotReadyPart::of(&nr(Subject::Address(ip("192.0.2.1")))), NotReadyPart::Address);
        assert_eq!(NotReadyPart::of(&nr(Subject::Address(ip("2001:db8::1")))), NotReadyPart::Address);
        assert_eq!(NotReadyPart::of(&nr(Subject::Gateway(ip("192.0.2.254")))), NotReadyPart::Gateway);
        let mut r = Rail::default();
        assert!(r.is_ready());
        r.add_not_ready(&nr(Subject::Address(ip("192.0.2.1"))));
        r.add_not_ready(&nr(Subject::Address(ip("192.0.2.2"))));
        assert!(!r.is_ready());
        assert_eq!(r.not_ready.get(&NotReadyPart::Address), Some(&2));
        let mut s = Snapshot::default();
        s.rails.insert("rail0".into(), r);
        s.rail("rail1").not_ready.insert(NotReadyPart::Gateway, 0);
        let text = render(&s);
        assert!(text.contains("\nroce_route_rails_not_ready 1\n"), "rail1 has a 0 entry: ready; {text}");
        assert!(!text.contains("words"), "the free-text reason is no label");
    }

    #[test]
    fn a_port_is_taken_with_the_kernels_numbers() {
        use crate::rdma::{LinkLayer, PhysState, PortState};
        let port = Port {
            device: "mlx5_3".into(),
            port: 2,
            link_layer: LinkLayer::Ethernet,
            state: PortState::Init,
            phys_state: PhysState::LinkUp,
            rate: None,
            gids: Vec::new(),
            netdevs: Vec::new(),
        };
        let p = RdmaPort::of(&port, Some(7));
        assert_eq!(
            (p.device.as_str(), p.port, p.state_id, p.physical_state_id, p.gid_index),
            ("mlx5_3", 2, 2, 5, Some(7))
        );
    }

    #[test]
    fn times_are_unix_seconds() {
        let s = Snapshot {
            last_heal: Some(UNIX_EPOCH + Duration::from_millis(1_700_000_000_250)),
            last_apply: Some(UNIX_EPOCH - Duration::from_secs(5)),
            ..Snapshot::default()
        };
        let text = render(&s);
        assert!(text.contains("\nroce_route_last_heal_timestamp_seconds 1700000000.25\n"), "{text}");
        assert!(text.contains("\nroce_route_last_apply_timestamp_seconds 0\n"), "{text}");
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("roce-route-metrics-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_textfile_is_replaced_whole_and_nothing_else_stays() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("whole");
        let path = dir.join("roce_route.prom");
        // Big enough that a non-atomic write would be seen half done.
        let old = "a".repeat(1 << 20) + "\n";
        let new = "b".repeat(1 << 20) + "\n";
        write_textfile(&path, &old).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (path, stop, old, new) = (path.clone(), stop.clone(), old.clone(), new.clone());
            std::thread::spawn(move || {
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) {
                    let text = std::fs::read_to_string(&path).expect("the file is always there");
                    assert!(text == old || text == new, "a partial file of {} bytes", text.len());
                    reads += 1;
                }
                reads
            })
        };
        for i in 0..200 {
            write_textfile(&path, if i % 2 == 0 { &new } else { &old }).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
        assert_eq!(entries(&dir), ["roce_route.prom"], "no temp file left");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), old);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o644, 0o644, "readable by node_exporter: {mode:o}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_no_temp_file() {
        let dir = scratch("fail");
        // The rename fails: the target is a directory that is not empty.
        let target = dir.join("busy.prom");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("inside"), "x").unwrap();
        let e = write_textfile(&target, "roce_route_in_sync 1\n").unwrap_err();
        assert_ne!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert_eq!(entries(&dir), ["busy.prom"], "the temp file is removed");
        // A directory that does not exist: nothing is created.
        assert!(write_textfile(&dir.join("gone/x.prom"), "").is_err());
        assert!(write_textfile(Path::new("/"), "").is_err(), "no file name");
        assert_eq!(entries(&dir), ["busy.prom"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn temp_files_are_hidden_from_the_textfile_collector() {
        let t = temp_path(Path::new("/var/lib/node_exporter/roce_route.prom")).unwrap();
        let name = t.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            t.parent(),
            Some(Path::new("/var/lib/node_exporter")),
            "same directory: the rename is atomic"
        );
        assert!(name.starts_with(".roce_route.prom.") && name.ends_with(".tmp"), "{name}");
        assert!(!name.ends_with(".prom"));
        assert_ne!(
            t,
            temp_path(Path::new("/var/lib/node_exporter/roce_route.prom")).unwrap(),
            "distinct per write"
        );
        let relative = temp_path(Path::new("m.prom")).unwrap();
        assert_eq!(relative.parent(), Some(Path::new("")), "beside it in the current directory");
    }
}
