//! `roce-route check CONFIG`: is the host as the config asks? Exit 0 when
//! it is, 3 when it is not, listing each difference in plain words and as
//! the command that fixes it. It checks the state (routes, rules, sysctls
//! with their effective values) and the behaviour: where the kernel would
//! really send traffic from each configured address.

use serde::Serialize;

use super::{Ctx, apply, ask, connect, local_addresses, print_json};
use crate::behaviour::{self, Verdict};
use crate::cli::CheckArgs;
use crate::config::ConfigError;
use crate::diff::Plan;
use crate::error::Error;
use crate::host::Recorded;
use crate::managers;
use crate::model::Op;
use crate::netlink::Netlink;
use crate::plan::Desired;
use crate::say;
use crate::tell;
use crate::{render, sysctl};

/// The JSON document of `check --json`.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    pub command: &'static str,
    pub in_sync: bool,
    pub differences: Vec<Difference>,
    pub traffic: Vec<Verdict>,
    pub warnings: Vec<String>,
}

/// One way the host differs from the config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// missing_route, changed_route, extra_route, missing_rule, extra_rule,
    /// sysctl, sysctl_overridden, conflict, traffic, host_mismatch.
    pub kind: &'static str,
    pub description: String,
    /// The command that fixes it.
    pub fix: String,
}

pub async fn run(ctx: &Ctx, args: &CheckArgs, cfg: crate::config::Config) -> Result<bool, Error> {
    // As root, wait for a running apply/rollback so as not to report its
    // half-made state; without root (no state dir access) read as is.
    let state = ctx.existing_state()?;
    let _lock = state.as_ref().map(|s| s.lock(ctx.lock_timeout)).transpose()?;
    let recorded = match &state {
        Some(s) => Recorded::read(s)?,
        None => Recorded::default(),
    };
    let nl = connect().await?;
    let fix_all = format!("roce-route apply {}", cfg.file);
    let warnings = managers::warnings(&managers::scan());
    let report = match apply::make_plan(&nl, &cfg, false, &recorded).await {
        Ok((desired, plan)) => {
            let (traffic, not_verified) = probe_all(&nl, &desired).await?;
            build_report(&plan, traffic, [warnings, not_verified].concat(), &fix_all)
        }
        // The config is valid (it parsed) but the host no longer matches it:
        // an interface or address is gone (e.g. IPv6 addresses flushed by a
        // link flap). That is drift, not a bad command line.
        Err(Error::Config(e)) => mismatch_report(&e, warnings, &fix_all),
        Err(e) => return Err(e),
    };
    if args.json {
        print_json(&report);
    } else {
        print_human(&report);
    }
    Ok(report.in_sync)
}

/// Pure: the report from the plan (state differences) and the verdicts.
pub fn build_report(
    plan: &Plan,
    traffic: Vec<Verdict>,
    mut warnings: Vec<String>,
    fix_all: &str,
) -> CheckReport {
    let mut differences: Vec<Difference> = plan.ops.iter().map(difference).collect();
    differences.extend(plan.conflicts.iter().map(|c| Difference {
        kind: "conflict",
        description: format!("{} ({})", c.entry, c.why),
        fix: format!("{fix_all} --adopt"),
    }));
    differences.extend(plan.overrides.iter().map(|o| Difference {
        kind: "sysctl_overridden",
        description: o.describe(),
        fix: format!("sysctl -w {}={}", sysctl::dotted_name("all", o.key), o.value),
    }));
    differences.extend(traffic.iter().filter(|v| !v.ok).map(|v| Difference {
        kind: "traffic",
        description: v.describe(),
        fix: fix_all.to_string(),
    }));
    warnings.extend(
        plan.warnings
            .iter()
            .filter(|w| !plan.overrides.iter().any(|o| w.starts_with(&o.describe())))
            .cloned(),
    );
    CheckReport { command: "check", in_sync: differences.is_empty(), differences, traffic, warnings }
}

/// The report when the host lacks what the config names.
fn mismatch_report(e: &ConfigError, warnings: Vec<String>, fix_all: &str) -> CheckReport {
    let description = format!("the host does not match the config: {e}");
    let fix = format!("restore the interface or address the config names, then {fix_all}");
    let differences = vec![Difference { kind: "host_mismatch", description, fix }];
    CheckReport { command: "check", in_sync: false, differences, traffic: Vec::new(), warnings }
}

/// A state difference in plain words, with its fix.
fn difference(op: &Op) -> Difference {
    let fix = render::command(op);
    let (kind, description) = match op {
        Op::AddRoute { route } => ("missing_route", format!("route missing: {}", render::route_line(route))),
        Op::ReplaceRoute { old, new } => (
            "changed_route",
            format!(
                "route differs: is `{}`, should be `{}`",
                render::route_line(&old.item),
                render::route_line(new)
            ),
        ),
        Op::RestoreRoute { old, .. } => {
            ("changed_route", format!("route differs: {}", render::route_line(&old.item)))
        }
        Op::DelRoute { route, .. } => (
            "extra_route",
            format!("route owned by roce-route but not in the config: {}", render::route_line(route)),
        ),
        Op::AddRule { rule, .. } => ("missing_rule", format!("rule missing: {}", render::rule_line(rule))),
        Op::DelRule { rule, .. } => (
            "extra_rule",
            format!("rule owned by roce-route but not in the config: {}", render::rule_line(rule)),
        ),
        Op::SetSysctl { iface, key, old, new } => {
            ("sysctl", format!("{} is {old}, should be {new}", sysctl::dotted_name(iface, *key)))
        }
    };
    Difference { kind, description, fix }
}

/// Asks the kernel, for every configured address, which way its traffic goes.
/// Also returns, as "not verified: ..." lines, the probes that could not be made.
async fn probe_all(nl: &Netlink, desired: &Desired) -> Result<(Vec<Verdict>, Vec<String>), Error> {
    let local = local_addresses(nl).await?;
    let set = behaviour::probes_for_desired(desired, &local);
    Ok((ask(nl, &set.probes).await, set.skipped.iter().map(behaviour::Skipped::describe).collect()))
}

fn print_human(r: &CheckReport) {
    for w in &r.warnings {
        tell!("roce-route: warning: {w}");
    }
    let ok = r.traffic.iter().filter(|v| v.ok).count();
    if r.in_sync {
        say!(
            "roce-route check: in sync; traffic from every address leaves by its own interface ({ok} lookups)"
        );
        return;
    }
    say!("roce-route check: {} difference(s)", r.differences.len());
    for d in &r.differences {
        say!("  {}\n    fix: {}", d.description, d.fix);
    }
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
        let r = build_report(&Plan::default(), vec![verdict(true)], vec![], "fix");
        assert!(r.in_sync);
        let r = build_report(&Plan::default(), vec![verdict(false)], vec![], "fix");
        assert!(!r.in_sync);
        assert_eq!(r.differences[0].kind, "traffic");
    }

    #[test]
    fn json_shape_is_stable() {
        let plan = Plan {
            ops: vec![Op::SetSysctl { iface: "ib0.100".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 }],
            conflicts: vec![Conflict {
                entry: "ip -4 rule: priority 5 from 198.51.100.11 lookup main".into(),
                why: "x".into(),
            }],
            warnings: vec![],
            overrides: vec![Override {
                iface: "rail1".into(),
                key: SysctlKey::ArpAnnounce,
                all: 2,
                value: 1,
                effective: 2,
            }],
        };
        let r = build_report(&plan, vec![verdict(false)], vec!["networkd".into()], "roce-route apply c.toml");
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["command"], "check");
        assert_eq!(v["in_sync"], false);
        let kinds: Vec<&str> =
            v["differences"].as_array().unwrap().iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["sysctl", "conflict", "sysctl_overridden", "traffic"]);
        assert_eq!(v["differences"][0]["fix"], "sysctl -w net.ipv4.conf.ib0/100.arp_ignore=1");
        assert_eq!(v["differences"][1]["fix"], "roce-route apply c.toml --adopt");
        let t = &v["traffic"][0];
        for field in ["interface", "from", "to", "expected_dev", "expected_table", "dev", "table", "ok"] {
            assert!(t.get(field).is_some(), "traffic entry lacks {field}: {t}");
        }
        assert_eq!(v["warnings"][0], "networkd");
    }
}
