//! `roce-route check CONFIG`: is the host as the config asks? Exit 0 when
//! it is, 3 when it is not, listing each difference in plain words and as
//! the command that fixes it. It checks the state (routes, rules, sysctls
//! with their effective values) and the behaviour: where the kernel would
//! really send traffic from each configured address. It also reports what
//! breaks RDMA that `apply` cannot fix (`risks`): ARP flux from interfaces
//! outside the config, rails without carrier, foreign rules that shadow
//! roce-route's; each with what does fix it.

use serde::Serialize;

use std::collections::{BTreeMap, BTreeSet};

use super::{Ctx, Done, NoteKind, connect_for, print_text, run_notes};
use crate::behaviour::{self, Verdict};
use crate::cli::{CheckArgs, CheckFormat};
use crate::config::{Config, ConfigError};
use crate::diff::Plan;
use crate::error::{Error, exit};
use crate::managers;
use crate::metrics;
use crate::model::Op;
use crate::nccl;
use crate::netlink::Netlink;
use crate::plan::{Desired, NotReady};
use crate::rdma::Rdma;
use crate::rdma_check;
use crate::rdma_read;
use crate::reconcile;
use crate::render::{self, count};
use crate::risks;
use crate::say;
use crate::state::Record;

/// The fields of `check --json`.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    pub in_sync: bool,
    pub differences: Vec<Difference>,
    pub traffic: Vec<Verdict>,
}

/// One way the host differs from the config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// missing_route, changed_route, extra_route, missing_rule, extra_rule,
    /// sysctl, sysctl_overridden, conflict, traffic, host_mismatch,
    /// interrupted_run, not_ready, arp_flux, no_carrier, shadowed,
    /// foreign_rule_in_table, rdma_port, rdma_gid, rdma_unreadable.
    pub kind: &'static str,
    /// The interface it concerns, when one does: a rail of the config, or
    /// one outside it (ARP flux on another interface, what a rail dropped
    /// from the config left, an `[[arp_only]]` interface). None (null) for
    /// the host as a whole (an interrupted run, a config the host does not
    /// match), a rule that takes several rails' traffic, an entry of no
    /// interface, or a device that could not be read.
    pub interface: Option<String>,
    pub description: String,
    /// What fixes it: a command, or what to change.
    pub fix: String,
}

pub async fn run(ctx: &Ctx, cfg: Config, args: &CheckArgs) -> Result<Done, Error> {
    let sysfs = &args.sysfs;
    // The managers' scan runs beside the reading below (`Background`).
    let scan = managers::scan_in_background();
    // As root, wait for a running apply/rollback so as not to report its
    // half-made state; without root the record of earlier runs cannot be
    // read, and the report says what that leaves unchecked.
    let state = ctx.existing_state()?;
    let _lock = if state.is_some() { Some(ctx.lock()?) } else { None };
    let record = match &state {
        Some(s) => std::rc::Rc::unwrap_or_clone(s.record()?),
        None if !crate::netns::can_admin_network() => {
            ctx.warn(format!(
                "not run as root: the record of earlier runs under {} cannot be read, so routes and sysctls \
                 left by interfaces dropped from the config, and interrupted runs, are not checked",
                ctx.state_base.display()
            ));
            Record::default()
        }
        None => Record::default(),
    };
    let notes = run_notes(ctx, state.as_ref())?;
    // The config's links only: see `connect_for`.
    let nl = connect_for(&cfg, sysfs).await?;
    // As apply plans: a rail renamed since keeps its recorded values.
    let mut record = record;
    reconcile::follow_renames(&nl, &mut record, Some(&cfg));
    let rdma = rdma_read::read_lenient(sysfs, nl.links())?;
    super::probe::mtu_warnings(&nl, &cfg, &rdma, sysfs).await.into_iter().for_each(|w| ctx.warn(w));
    let fix_all = ctx.suggest(&super::apply::apply_args(&cfg.files, &[]));
    for w in managers::warnings(&scan.wait()) {
        ctx.warn(w);
    }
    let (mut report, desired) = match reconcile::reconcile_reading(&nl, &cfg, false, &record, None).await {
        Ok((desired, plan, reading)) => {
            plan.warnings.iter().filter(|w| !plan.is_a_difference(w)).for_each(|w| ctx.warn(w.clone()));
            let (traffic, not_verified) = probe_all(&nl, &desired, reading.addresses()).await?;
            not_verified.into_iter().for_each(|n| ctx.warn(n));
            let mut report = build_report(&desired, &plan, traffic, &fix_all, &cfg.file);
            report.add_rdma(rdma.drift(&desired.interfaces));
            report.add_not_ready(&desired.not_ready, &fix_all);
            (report, Some(desired))
        }
        // The config is valid (it parsed) but the host no longer matches it:
        // an interface or address is gone (e.g. IPv6 addresses flushed by a
        // link flap). That is drift, not a bad command line.
        Err(Error::Config(e)) => (mismatch_report(&e, &fix_all), None),
        Err(e) => return Err(e),
    };
    for note in notes {
        match note.kind {
            NoteKind::InterruptedRun => {
                report.differences.push(Difference {
                    kind: "interrupted_run",
                    interface: None,
                    fix: ctx.suggest(&["rollback"]),
                    description: note.text,
                });
                report.in_sync = false;
            }
            NoteKind::ConfirmationWaiting | NoteKind::OrphanedTrial => ctx.warn(note.text),
        }
    }
    if args.format == CheckFormat::Prometheus && !ctx.json {
        let rails: Vec<&str> = cfg.interfaces.iter().map(|i| i.name.as_str()).collect();
        print_text(&metrics::render(&snapshot(&report, &rails, desired.as_ref(), &rdma.rdma)));
    } else if ctx.chatty() {
        print_human(&report);
    }
    Ok(Done::new(if report.in_sync { exit::OK } else { exit::DRIFT }, false, report))
}

impl CheckReport {
    /// RDMA ports that are down and addresses without their RoCE v2 GID.
    pub fn add_rdma(&mut self, drift: Vec<rdma_check::RdmaDrift>) {
        self.differences.extend(drift.into_iter().map(|d| Difference {
            kind: d.kind,
            interface: d.interface,
            description: d.description,
            fix: d.fix,
        }));
        self.in_sync = self.differences.is_empty();
    }

    /// Every part of the config the host is not ready for is drift too,
    /// each reported (one missing rail never hides another's drift).
    pub fn add_not_ready(&mut self, not_ready: &[NotReady], fix_all: &str) {
        for nr in not_ready {
            self.differences.push(Difference {
                kind: "not_ready",
                interface: Some(nr.interface.clone()),
                description: nr.describe(),
                fix: format!("make the host ready as said, then {fix_all}"),
            });
        }
        self.in_sync = self.differences.is_empty();
    }
}

/// Pure: the report from the plan (state differences) and the verdicts,
/// each difference with the rail of `desired` it concerns.
pub fn build_report(
    desired: &Desired,
    plan: &Plan,
    traffic: Vec<Verdict>,
    fix_all: &str,
    config_file: &str,
) -> CheckReport {
    let mut differences: Vec<Difference> = plan.ops.iter().map(|op| difference(op, desired)).collect();
    differences.extend(plan.conflicts.iter().map(|c| Difference {
        kind: "conflict",
        interface: c.interface.clone(),
        description: format!("{} ({})", c.entry, c.why),
        fix: format!("{fix_all} --adopt"),
    }));
    differences.extend(plan.overrides.iter().map(|o| Difference {
        kind: "sysctl_overridden",
        interface: Some(o.iface.clone()),
        description: o.describe(),
        fix: o.accept_hint(config_file),
    }));
    differences.extend(plan.no_carrier.iter().map(|n| Difference {
        kind: "no_carrier",
        interface: Some(n.iface.clone()),
        description: n.describe(),
        fix: n.fix(),
    }));
    differences.extend(plan.foreign_rules.iter().map(|f| Difference {
        kind: f.kind(),
        interface: f.rail(),
        description: f.describe(),
        fix: f.fix(),
    }));
    differences.extend(plan.arp_flux.iter().map(|f| Difference {
        kind: "arp_flux",
        interface: Some(f.iface.clone()),
        description: f.describe(),
        fix: f.fix(config_file, fix_all),
    }));
    differences.extend(traffic.iter().filter(|v| !v.ok).map(|v| Difference {
        kind: "traffic",
        interface: Some(v.probe.interface.clone()),
        description: v.describe(),
        fix: traffic_fix(plan, v, fix_all),
    }));
    CheckReport { in_sync: differences.is_empty(), differences, traffic }
}

/// What fixes a lookup that went the wrong way: the foreign rule that took
/// it when one did (apply cannot change that rule), else apply when it
/// would change something, else no command: apply would change nothing.
fn traffic_fix(plan: &Plan, v: &Verdict, fix_all: &str) -> String {
    let apply = if !plan.conflicts.is_empty() {
        Some(format!("{fix_all} --adopt"))
    } else if !plan.ops.is_empty() {
        Some(fix_all.to_string())
    } else {
        None
    };
    match (risks::culprit(&plan.ahead, v), apply) {
        (Some((rule, ours)), None) => {
            format!("the cause is `{}`: {}", render::rule_line(rule), risks::rule_fix(rule, ours))
        }
        (Some((rule, ours)), Some(apply)) => format!(
            "the cause is `{}`: {}; then run `{apply}`",
            render::rule_line(rule),
            risks::rule_fix(rule, ours)
        ),
        (None, Some(apply)) => apply,
        (None, None) => format!(
            "`{fix_all}` would change nothing: roce-route's routes and rules are in place, so something it does not \
             own decides this lookup; `ip route get {} from {}` names the table the kernel used, and `ip rule` the \
             rules it reads first",
            v.probe.to, v.probe.from
        ),
    }
}

/// The report when the config cannot be planned against this host: a
/// config error that only the host reveals (a listed gateway that is an
/// address of the host, say). A missing interface or address is not this:
/// it is `not_ready` in the plan.
fn mismatch_report(e: &ConfigError, fix_all: &str) -> CheckReport {
    let description = format!("the host does not match the config: {e}");
    let fix = format!("restore the interface or address the config names, then {fix_all}");
    let differences = vec![Difference { kind: "host_mismatch", interface: None, description, fix }];
    CheckReport { in_sync: false, differences, traffic: Vec::new() }
}

/// The metrics of this one check (`--format prometheus`): the host's
/// verdict; per rail of `rails`, in sync when no difference concerns it
/// (`Difference::interface`: a wrong lookup from its addresses, a not
/// ready part of it included); the differences by kind (counted as found,
/// too); each rail's RDMA port and the GID index NCCL would use on it
/// (`nccl::nccl_env`).
pub fn snapshot(
    report: &CheckReport,
    rails: &[&str],
    desired: Option<&Desired>,
    rdma: &Rdma,
) -> metrics::Snapshot {
    let mut s = metrics::Snapshot { in_sync: report.in_sync, ..metrics::Snapshot::default() };
    s.set_drift(report.differences.iter().map(|d| d.kind));
    s.counters.found(report.differences.iter().map(|d| d.kind));
    for name in rails {
        s.rail(name).in_sync = !report.differences.iter().any(|d| d.interface.as_deref() == Some(*name));
    }
    for nr in desired.map_or(&[][..], |d| &d.not_ready[..]) {
        let rail = s.rail(&nr.interface);
        rail.add_not_ready(nr);
        rail.in_sync = false;
    }
    rdma_ports(&mut s, desired.map_or(&[][..], |d| &d.interfaces[..]), rails, rdma);
    s
}

/// Each rail's RDMA port and the GID index NCCL would use on it
/// (`nccl::nccl_env`): for check's snapshot and watch's file alike.
pub fn rdma_ports(
    s: &mut metrics::Snapshot,
    planned: &[crate::plan::PlannedInterface],
    rails: &[&str],
    rdma: &Rdma,
) {
    let addrs: Vec<nccl::RailAddrs> = planned
        .iter()
        .map(|i| nccl::RailAddrs { name: i.name.clone(), addresses: i.addresses.clone() })
        .collect();
    let gids: BTreeMap<String, Option<u32>> = nccl::nccl_env(&addrs, rdma, &nccl::PkeyTables::new())
        .map(|env| env.rails.into_iter().map(|r| (r.name, r.gid_index)).collect())
        .unwrap_or_default();
    for name in rails {
        if let Some(port) = rdma.port_of(name) {
            let gid = gids.get(*name).copied().flatten();
            s.rail(name).rdma = Some(metrics::RdmaPort::of(port, gid));
        }
    }
}

/// The kind of difference a state change stands for (`missing_route`, ...).
pub fn op_kind(op: &Op) -> &'static str {
    match op {
        Op::AddRoute { .. } => "missing_route",
        Op::ReplaceRoute { .. } | Op::RestoreRoute { .. } => "changed_route",
        Op::DelRoute { .. } => "extra_route",
        Op::AddRule { .. } => "missing_rule",
        Op::DelRule { .. } => "extra_rule",
        Op::SetSysctl { .. } => "sysctl",
    }
}

/// A state difference in plain words, with the command that fixes it.
fn difference(op: &Op, desired: &Desired) -> Difference {
    Difference {
        kind: op_kind(op),
        interface: op_rail(op, desired),
        description: render::describe(op),
        fix: render::command(op),
    }
}

/// The rail a change is for: the one whose table holds the route or rule
/// (else the route's device, the rule's source address), the interface
/// of a sysctl.
fn op_rail(op: &Op, desired: &Desired) -> Option<String> {
    let route = |r: &crate::model::Route| desired.rail_of_table(r.table).or_else(|| r.oif.clone());
    match op {
        Op::AddRoute { route: r } | Op::DelRoute { route: r, .. } => route(r),
        Op::ReplaceRoute { new: r, .. } | Op::RestoreRoute { current: r, .. } => route(r),
        Op::AddRule { rule, .. } | Op::DelRule { rule, .. } => desired
            .rail_of_table(rule.table)
            .or_else(|| rule.src.and_then(|s| desired.rail_of_address(s.addr))),
        Op::SetSysctl { iface, .. } => Some(iface.clone()),
    }
}

/// Asks the kernel, for every configured address, which way its traffic
/// goes, keeping the probes off the host's addresses (`addrs`, as the
/// reconcile read them, and those of other links it picks, asked:
/// `reconcile::choose_off_local`). Also returns, as "not verified: ..."
/// lines, the probes that could not be made.
async fn probe_all(
    nl: &Netlink,
    desired: &Desired,
    addrs: &[crate::model::Address],
) -> Result<(Vec<Verdict>, Vec<String>), Error> {
    let choose = |local: &BTreeSet<std::net::IpAddr>| behaviour::probes_for_desired(desired, local);
    let to = |set: &behaviour::Probes| set.probes.iter().map(|p| p.to).collect();
    let set = reconcile::choose_off_local(nl, addrs, choose, to).await?;
    Ok((
        reconcile::ask(nl, &set.probes).await,
        set.skipped.iter().map(behaviour::Skipped::describe).collect(),
    ))
}

fn print_human(r: &CheckReport) {
    let ok = r.traffic.iter().filter(|v| v.ok).count();
    if r.in_sync {
        if ok == 0 {
            say!("roce-route check: in sync (state only: no traffic lookup could be made)");
        } else {
            say!(
                "roce-route check: in sync; traffic from every address leaves by its own interface ({})",
                count(ok, "lookup", "lookups")
            );
        }
        return;
    }
    let mut lines =
        vec![format!("roce-route check: {}", count(r.differences.len(), "difference", "differences"))];
    lines.extend(r.differences.iter().map(|d| format!("  {}\n    fix: {}", d.description, d.fix)));
    super::print_lines(&lines);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behaviour::Probe;
    use crate::diff::{Conflict, Override};
    use crate::model::SysctlKey;

    fn verdict(ok: bool) -> Verdict {
        Verdict {
            probe: Probe {
                interface: "rail1".into(),
                from: "198.51.100.11".parse().unwrap(),
                to: "198.51.100.1".parse().unwrap(),
                expected_dev: "rail1".into(),
                expected_table: 101,
                expected_gateway: None,
            },
            dev: Some(if ok { "rail1" } else { "rail0" }.into()),
            table: Some(if ok { 101 } else { 254 }),
            gateway: None,
            error: None,
            ok,
        }
    }

    #[test]
    fn in_sync_needs_no_difference_and_good_traffic() {
        let r = build_report(&Desired::default(), &Plan::default(), vec![verdict(true)], "fix", "c.toml");
        assert!(r.in_sync);
        let r = build_report(&Desired::default(), &Plan::default(), vec![verdict(false)], "fix", "c.toml");
        assert!(!r.in_sync);
        assert_eq!(r.differences[0].kind, "traffic");
    }

    /// The new kinds come from the plan, and a wrong lookup a foreign rule
    /// explains gets that rule as its fix, never `apply`, which cannot
    /// change it; with nothing to apply, apply is not suggested either.
    #[test]
    fn risks_are_differences_and_traffic_gets_a_fix_that_fixes() {
        use crate::model::{Address, Link, Live, Prefix, Rule};
        use crate::observed::Observed;
        use crate::plan::PlannedInterface;
        let a: std::net::IpAddr = "198.51.100.11".parse().unwrap();
        let d = Desired {
            protocol: 234,
            interfaces: vec![PlannedInterface {
                name: "rail1".into(),
                table: 101,
                priority: 1000,
                addresses: vec![Prefix::new(a, 24)],
                gateways: vec![],
                subnets: vec![Prefix::new("198.51.100.0".parse().unwrap(), 24)],
                onlink_gateways: vec![],
            }],
            rules: vec![Rule::source(1000, a, 101, 234)],
            ..Desired::default()
        };
        let shadow = Rule {
            src: Some(Prefix::new("198.51.100.0".parse().unwrap(), 24)),
            ..Rule::source(999, a, 254, 3)
        };
        let live = Observed {
            rules: vec![Live { item: shadow, raw: vec![] }, Live { item: d.rules[0].clone(), raw: vec![] }],
            links: vec![Link { lower_up: false, ..Link::up(3, "rail1") }],
            addresses: vec![Address {
                ifname: "rail4".into(),
                addr: Prefix::new("198.51.100.14".parse().unwrap(), 24),
                ..Address::default()
            }],
            sysctls: [(("rail4".to_string(), SysctlKey::ArpIgnore), 0)].into_iter().collect(),
            ..Observed::default()
        };
        let plan = crate::diff::diff(&d, &live, false);
        assert!(plan.in_sync(), "nothing for apply to do: {:?}", plan.ops);
        assert_eq!(plan.warnings.len(), 3, "{:#?}", plan.warnings);
        assert!(plan.warnings.iter().all(|w| plan.is_a_difference(w)), "check reports them as differences");
        let r = build_report(&d, &plan, vec![verdict(false)], "roce-route apply c.toml", "c.toml");
        let kinds: Vec<&str> = r.differences.iter().map(|d| d.kind).collect();
        assert_eq!(kinds, ["no_carrier", "shadowed", "arp_flux", "traffic"]);
        // Each names its rail: the shadowing rule takes rail1's source.
        let rails: Vec<Option<&str>> = r.differences.iter().map(|d| d.interface.as_deref()).collect();
        assert_eq!(rails, [Some("rail1"), Some("rail1"), Some("rail4"), Some("rail1")]);
        assert!(!r.in_sync);
        let traffic = &r.differences[3].fix;
        assert!(
            traffic.starts_with("the cause is `ip -4 rule: priority 999 from 198.51.100.0/24 lookup 254"),
            "{traffic}"
        );
        assert!(!traffic.contains("then run"), "{traffic}");
        let flux = &r.differences[2].fix;
        assert!(
            flux.contains(
                "[[arp_only]] table with name = \"rail4\" to c.toml, then run `roce-route apply c.toml`"
            ),
            "{flux}"
        );
        // A wrong lookup no foreign rule explains, with nothing to apply.
        let mut other = verdict(false);
        other.table = Some(300);
        let fix = traffic_fix(&Plan::default(), &other, "roce-route apply c.toml");
        assert!(fix.starts_with("`roce-route apply c.toml` would change nothing"), "{fix}");
        // With something to apply, apply (after the rule when there is one).
        let ops = vec![Op::SetSysctl { iface: "rail1".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 }];
        let with_ops = Plan { ops, ..plan.clone() };
        assert_eq!(traffic_fix(&with_ops, &other, "A"), "A");
        assert!(traffic_fix(&with_ops, &verdict(false), "A").ends_with("; then run `A`"));
    }

    #[test]
    fn json_shape_is_stable() {
        let plan = Plan {
            ops: vec![Op::SetSysctl { iface: "ib0.100".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 }],
            conflicts: vec![Conflict {
                entry: "ip -4 rule: priority 5 from 198.51.100.11 lookup main".into(),
                why: "x".into(),
                interface: Some("rail1".into()),
            }],
            warnings: vec![],
            overrides: vec![Override {
                iface: "rail1".into(),
                key: SysctlKey::ArpAnnounce,
                all: 2,
                value: 1,
                effective: 2,
            }],
            ..Plan::default()
        };
        let r = build_report(
            &Desired::default(),
            &plan,
            vec![verdict(false)],
            "roce-route apply c.toml",
            "c.toml",
        );
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["in_sync"], false);
        let kinds: Vec<&str> =
            v["differences"].as_array().unwrap().iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["sysctl", "conflict", "sysctl_overridden", "traffic"]);
        assert_eq!(v["differences"][0]["fix"], "sysctl -w net.ipv4.conf.ib0/100.arp_ignore=1");
        assert_eq!(v["differences"][1]["fix"], "roce-route apply c.toml --adopt");
        let accept = v["differences"][2]["fix"].as_str().unwrap();
        assert!(
            accept.contains("set `arp_announce = 2` for interface \"rail1\"") && accept.contains("in c.toml"),
            "{accept}"
        );
        assert!(!accept.starts_with("sysctl"), "roce-route never writes conf/all: {accept}");
        let rails: Vec<&str> =
            v["differences"].as_array().unwrap().iter().map(|d| d["interface"].as_str().unwrap()).collect();
        assert_eq!(rails, ["ib0.100", "rail1", "rail1", "rail1"]);
        let t = &v["traffic"][0];
        for field in ["interface", "from", "to", "expected_dev", "expected_table", "dev", "table", "ok"] {
            assert!(t.get(field).is_some(), "traffic entry lacks {field}: {t}");
        }
    }
}

#[cfg(test)]
mod metrics_tests {
    use super::*;
    use crate::model::{Prefix, Route, Rule, SysctlKey};

    fn rail(name: &str, table: u32, addr: &str) -> crate::plan::PlannedInterface {
        crate::plan::PlannedInterface {
            name: name.into(),
            table,
            priority: 1000,
            addresses: vec![Prefix::new(addr.parse().unwrap(), 24)],
            gateways: vec![],
            subnets: vec![],
            onlink_gateways: vec![],
        }
    }

    /// A change is for the rail of its table, else of its device or
    /// source address; `rail1` is never `rail10`.
    #[test]
    fn a_change_names_the_rail_it_is_for() {
        let d = Desired {
            interfaces: vec![rail("rail1", 101, "198.51.100.11"), rail("rail10", 110, "198.51.100.20")],
            ..Desired::default()
        };
        let rule = |table, src: &str| Op::AddRule {
            rule: Rule::source(1000, src.parse().unwrap(), table, 234),
            raw: None,
        };
        assert_eq!(op_rail(&rule(110, "198.51.100.11"), &d).as_deref(), Some("rail10"), "by the table first");
        assert_eq!(op_rail(&rule(999, "198.51.100.11"), &d).as_deref(), Some("rail1"), "then by the source");
        assert_eq!(op_rail(&rule(999, "203.0.113.1"), &d), None);
        let route = Route::connected(
            120,
            Prefix::new("198.51.100.0".parse().unwrap(), 24),
            "rail12",
            "198.51.100.30".parse().unwrap(),
            234,
        );
        let gone = Op::DelRoute { route: route.clone(), raw: None };
        assert_eq!(op_rail(&gone, &d).as_deref(), Some("rail12"), "a dropped rail's route: its device");
        let ours = Op::AddRoute { route: Route { table: 101, oif: None, ..route } };
        assert_eq!(op_rail(&ours, &d).as_deref(), Some("rail1"));
        let sysctl = Op::SetSysctl { iface: "rail10".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 };
        assert_eq!(op_rail(&sysctl, &d).as_deref(), Some("rail10"));
        // In the metrics, rail10's difference is rail10's only.
        let report =
            CheckReport { in_sync: false, differences: vec![difference(&sysctl, &d)], traffic: vec![] };
        let s = snapshot(&report, &["rail1", "rail10"], Some(&d), &Rdma::default());
        assert!(s.rails["rail1"].in_sync && !s.rails["rail10"].in_sync);
    }

    #[test]
    fn the_snapshot_of_a_check_has_each_rail_and_kind() {
        let report = CheckReport {
            in_sync: false,
            differences: vec![Difference {
                kind: "missing_rule",
                interface: Some("rail1".into()),
                description: "rule missing: ip -4 rule: priority 1001 from 10.0.1.1 lookup 101".into(),
                fix: String::new(),
            }],
            traffic: Vec::new(),
        };
        // rail1 has the difference, rail0 is not ready.
        let d = Desired {
            interfaces: vec![rail("rail1", 101, "198.51.100.11"), rail("rail2", 102, "198.51.100.12")],
            not_ready: vec![NotReady {
                interface: "rail0".into(),
                subject: crate::plan::Subject::Interface,
                reason: "it does not exist".into(),
            }],
            ..Desired::default()
        };
        let s = snapshot(&report, &["rail0", "rail1", "rail2"], Some(&d), &Rdma::default());
        assert!(!s.in_sync);
        assert_eq!(s.drift.get("missing_rule"), Some(&1));
        assert_eq!(s.counters.drift_found("missing_rule"), 1);
        let in_sync: Vec<bool> = s.rails.values().map(|r| r.in_sync).collect();
        assert_eq!(in_sync, [false, false, true]);
        assert!(!s.rails["rail0"].is_ready() && s.rails["rail1"].is_ready());
        let text = metrics::render(&s);
        assert!(text.contains("\nroce_route_in_sync 0\n"), "{text}");
        assert!(text.contains("roce_route_drift{kind=\"missing_rule\"} 1\n"), "{text}");
        assert!(text.contains("\nroce_route_rails_not_ready 1\n"), "{text}");
        // A lookup from rail2's address that left by rail0: rail2 is the one.
        let wrong = Verdict {
            probe: crate::behaviour::Probe {
                interface: "rail2".into(),
                from: "198.51.100.12".parse().unwrap(),
                to: "198.51.100.1".parse().unwrap(),
                expected_dev: "rail2".into(),
                expected_table: 102,
                expected_gateway: None,
            },
            dev: Some("rail0".into()),
            table: Some(254),
            gateway: None,
            error: None,
            ok: false,
        };
        let d = Desired {
            interfaces: vec![rail("rail0", 100, "198.51.100.10"), rail("rail2", 102, "198.51.100.12")],
            ..Desired::default()
        };
        let report = build_report(&d, &Plan::default(), vec![wrong], "fix", "c.toml");
        assert!(report.differences[0].description.contains("rail0"), "{:?}", report.differences);
        let s = snapshot(&report, &["rail0", "rail2"], Some(&d), &Rdma::default());
        assert!(s.rails["rail0"].in_sync && !s.rails["rail2"].in_sync);
    }
}
