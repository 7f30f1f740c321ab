//! Diffing: desired state vs live state -> ordered operations.
//!
//! Pure. Ownership is by protocol number: a route or rule carrying
//! roce-route's protocol is ours to replace or delete; anything else is
//! foreign and only touched with `adopt`, when it conflicts.
//!
//! Order (make-before-break, no window without a route):
//! 1. routes added or replaced in our tables (replace is atomic per key);
//! 2. rules added;
//! 3. rules deleted (stale ours, adopted foreign);
//! 4. routes deleted (stale ours, adopted foreign);
//! 5. sysctls.
//!
//! Beside the operations, the plan carries what breaks RDMA that no
//! operation fixes (`risks`): ARP flux from interfaces outside the config,
//! rails without carrier, foreign rules that shadow roce-route's.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Live, Op, Prefix, RawBytes, Route, RouteKey, Rule, Sysctl, SysctlKey};
use crate::observed::Observed;
use crate::plan::Desired;
use crate::render;
use crate::risks::{self, Ahead, ArpFlux, ForeignRule, NoCarrier};

/// An entry roce-route does not own that stands in its way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The entry as `ip` would print it.
    pub entry: String,
    pub why: String,
    /// The rail whose place it holds (by its table or source address).
    pub interface: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub ops: Vec<Op>,
    pub conflicts: Vec<Conflict>,
    pub warnings: Vec<String>,
    /// Sysctls whose effective value differs from the desired one because
    /// of `conf/all` (which roce-route does not change).
    pub overrides: Vec<Override>,
    /// Interfaces outside the config that answer ARP for the rails.
    pub arp_flux: Vec<ArpFlux>,
    /// Configured rails that are up without carrier.
    pub no_carrier: Vec<NoCarrier>,
    /// Foreign rules that shadow roce-route's or look up its tables.
    pub foreign_rules: Vec<ForeignRule>,
    /// Foreign rules evaluated before roce-route's (`risks::culprit`).
    pub ahead: Vec<Ahead>,
}

/// `conf/all/<key>` makes the kernel use another value than the one set on
/// the interface (max(all, iface), or an OR for arp_filter).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    pub iface: String,
    pub key: SysctlKey,
    pub all: u32,
    pub value: u32,
    pub effective: u32,
}

impl Override {
    pub fn describe(&self) -> String {
        format!(
            "net.ipv4.conf.all.{k}={all} overrides {iface}'s {k}={value}: the kernel uses {effective}",
            k = self.key.name(),
            all = self.all,
            iface = self.iface,
            value = self.value,
            effective = self.effective
        )
    }
}

impl Override {
    /// How to accept the value in `config` (roce-route never writes
    /// conf/all, so suggesting that would be a fix it cannot check).
    pub fn accept_hint(&self, config: &str) -> String {
        format!(
            "to accept it, set `{} = {}` for interface {:?} in {config} (or lower conf/all yourself)",
            self.key.name(),
            self.effective,
            self.iface
        )
    }
}

impl Plan {
    pub fn in_sync(&self) -> bool {
        self.ops.is_empty() && self.conflicts.is_empty()
    }

    /// Whether warning `w` is one `check` reports as a difference instead.
    pub fn is_a_difference(&self, w: &str) -> bool {
        self.overrides.iter().any(|o| w.starts_with(&o.describe()))
            || self.arp_flux.iter().any(|f| f.warning() == w)
            || self.no_carrier.iter().any(|n| n.warning() == w)
            || self.foreign_rules.iter().any(|f| f.warning() == w)
    }
}

/// Tables whose routes must be read: the configured ones and those our own
/// live rules point to (to find stale routes of interfaces dropped from the
/// config). Reading only these keeps a large main table out of the dump.
pub fn tables_to_read(desired: &Desired, owned: &BTreeSet<u8>, rules: &[Live<Rule>]) -> BTreeSet<u32> {
    let mut t = desired.tables();
    let ours = |p: u8| p == desired.protocol || owned.contains(&p);
    t.extend(rules.iter().filter(|r| ours(r.item.protocol)).map(|r| r.item.table));
    t.retain(|t| !crate::model::RESERVED_TABLES.contains(t));
    t
}

pub fn diff(desired: &Desired, live: &Observed, adopt: bool) -> Plan {
    let mut plan = Plan { warnings: desired.warnings.clone(), ..Plan::default() };
    let mut route_dels = Vec::new();
    diff_routes(desired, live, adopt, &mut plan, &mut route_dels);
    diff_rules(desired, live, adopt, &mut plan);
    plan.ops.extend(route_dels);
    diff_sysctls(desired, live, &mut plan);
    let found = risks::assess(desired, live, &plan.ops);
    plan.warnings.extend(found.no_carrier.iter().map(NoCarrier::warning));
    plan.warnings.extend(found.foreign_rules.iter().map(ForeignRule::warning));
    plan.warnings.extend(found.arp_flux.iter().map(ArpFlux::warning));
    plan.arp_flux = found.arp_flux;
    plan.no_carrier = found.no_carrier;
    plan.foreign_rules = found.foreign_rules;
    plan.ahead = found.ahead;
    plan
}

fn diff_routes(desired: &Desired, live: &Observed, adopt: bool, plan: &mut Plan, dels: &mut Vec<Op>) {
    let ours = |p: u8| live.owns(desired, p);
    let tables = desired.tables();
    let mut by_key: BTreeMap<RouteKey, Vec<&Live<Route>>> = BTreeMap::new();
    for r in &live.routes {
        by_key.entry(r.item.key()).or_default().push(r);
    }
    let mut matched: BTreeSet<*const Live<Route>> = BTreeSet::new();
    for want in &desired.routes {
        let same_key = by_key.get(&want.key()).map(Vec::as_slice).unwrap_or(&[]);
        // Prefer our own entry under this key, then any.
        let current = same_key.iter().find(|r| ours(r.item.protocol)).or(same_key.first());
        match current {
            None => plan.ops.push(Op::AddRoute { route: want.clone() }),
            Some(cur) => {
                matched.insert(*cur as *const _);
                if !ours(cur.item.protocol) {
                    plan.conflicts.push(Conflict {
                        entry: render::route_line(&cur.item),
                        why: format!(
                            "a route not owned by roce-route holds the place of `{}`",
                            render::route_line(want)
                        ),
                        interface: desired.rail_of_table(want.table),
                    });
                    if !adopt {
                        continue;
                    }
                }
                if cur.item != *want {
                    plan.ops.push(Op::ReplaceRoute { old: (*cur).clone(), new: want.clone() });
                }
            }
        }
    }
    for r in &live.routes {
        if matched.contains(&(r as *const _)) {
            continue;
        }
        let foreign_in_ours = !ours(r.item.protocol) && tables.contains(&r.item.table);
        if foreign_in_ours {
            plan.conflicts.push(Conflict {
                entry: render::route_line(&r.item),
                why: format!("table {} belongs to roce-route for this config", r.item.table),
                interface: desired.rail_of_table(r.item.table),
            });
        }
        // Entries of parts the host is not ready for stay as they are.
        if ours(r.item.protocol) && desired.keep.route(&r.item) {
            continue;
        }
        if ours(r.item.protocol) || (foreign_in_ours && adopt) {
            dels.push(Op::DelRoute { route: r.item.clone(), raw: Some(RawBytes(r.raw.clone())) });
        }
    }
}

fn diff_rules(desired: &Desired, live: &Observed, adopt: bool, plan: &mut Plan) {
    let ours = |p: u8| live.owns(desired, p);
    let sources = desired.source_addresses();
    let present: BTreeSet<&Rule> = live.rules.iter().map(|r| &r.item).collect();
    let missing: Vec<&Rule> = desired.rules.iter().filter(|w| !present.contains(w)).collect();
    let wanted: BTreeSet<&Rule> = desired.rules.iter().collect();
    let del = |r: &Live<Rule>| Op::DelRule { rule: r.item.clone(), raw: Some(RawBytes(r.raw.clone())) };
    // An owned rule the kernel would take for a missing one (it has every
    // selector of it and more) goes first: while both exist, the add
    // fails with EEXIST or the undo of the add deletes the older rule.
    let confusable = |r: &Live<Rule>| {
        ours(r.item.protocol)
            && !wanted.contains(&r.item)
            && !desired.keep.rule(&r.item)
            && missing.iter().any(|w| kernel_may_confuse(w, &r.item))
    };
    plan.ops.extend(live.rules.iter().filter(|r| confusable(r)).map(del));
    plan.ops.extend(missing.iter().map(|w| Op::AddRule { rule: (*w).clone(), raw: None }));
    for r in &live.rules {
        if wanted.contains(&r.item) || confusable(r) {
            continue;
        }
        if ours(r.item.protocol) {
            // The rule of an address that is not ready stays.
            if desired.keep.rule(&r.item) {
                continue;
            }
            plan.ops.push(del(r));
            warn_order_after_undo(live, r, &ours, &mut plan.warnings);
            continue;
        }
        // `not from ADDR` selects everything but ADDR: no conflict.
        if risks::takes_configured_source(&r.item, &sources) {
            let source = r.item.src.unwrap().addr;
            plan.conflicts.push(Conflict {
                entry: render::rule_line(&r.item),
                why: format!("a rule not owned by roce-route selects source {source}"),
                interface: desired.rail_of_address(source),
            });
            if adopt {
                plan.ops.push(del(r));
            }
        }
    }
}

/// The kernel adds a rule after every rule of its priority, so the undo of
/// a delete puts the rule back behind the foreign rules that followed it
/// at the same priority: when one of them can catch the same traffic, a
/// rollback would change which rule matches first. Say so before.
fn warn_order_after_undo(
    live: &Observed,
    deleted: &Live<Rule>,
    ours: &dyn Fn(u8) -> bool,
    warnings: &mut Vec<String>,
) {
    let d = &deleted.item;
    let after = live.rules.iter().skip_while(|r| !std::ptr::eq(*r, deleted)).skip(1);
    let overlaps = |f: &Rule| {
        f.family == d.family
            && match (f.src, d.src) {
                (None, _) | (_, None) => true,
                (Some(a), Some(b)) => a.contains(&b.addr) || b.contains(&a.addr),
            }
    };
    for f in after.filter(|f| f.item.priority == d.priority && !ours(f.item.protocol) && overlaps(&f.item)) {
        warnings.push(format!(
            "`{}` (not roce-route's) shares priority {} with `{}`, which this run deletes: a rollback \
             re-adds that rule after it (the kernel appends), so the foreign rule would match first; \
             give the foreign rule another priority",
            render::rule_line(&f.item),
            d.priority,
            render::rule_line(d)
        ));
    }
}

/// Whether a request naming `asked` could match `live` in the kernel:
/// `fib_rules.c` finds a rule to delete (`rule_find`), and refuses an add
/// as existing (`rule_exists`), comparing only the selectors the request
/// gives. A live rule with every selector of `asked` and more is taken for
/// it.
pub fn kernel_may_confuse(asked: &Rule, live: &Rule) -> bool {
    let given = |a: Option<Prefix>, l: Option<Prefix>| a.is_none_or(|p| p.len == 0 || l == Some(p));
    let given_eq = |a: &Option<String>, l: &Option<String>| a.is_none() || a == l;
    let given_u32 = |a: Option<u32>, l: Option<u32>| a.is_none_or(|v| v == 0 || l == Some(v));
    asked != live
        && asked.family == live.family
        && asked.priority == live.priority
        && (asked.action == 0 || asked.action == live.action)
        && (asked.table == 0 || asked.table == live.table)
        && (asked.protocol == 0 || asked.protocol == live.protocol)
        && (asked.tos == 0 || asked.tos == live.tos)
        && given(asked.src, live.src)
        && given(asked.dst, live.dst)
        && given_eq(&asked.iif, &live.iif)
        && given_eq(&asked.oif, &live.oif)
        && given_u32(asked.fwmark, live.fwmark)
        && given_u32(asked.fwmask, live.fwmask)
}

fn diff_sysctls(desired: &Desired, live: &Observed, plan: &mut Plan) {
    let current = |iface: &String, key: SysctlKey| live.sysctls.get(&(iface.clone(), key)).copied();
    for Sysctl { iface, key, value } in &desired.sysctls {
        let now = current(iface, *key).unwrap_or(0);
        if now != *value {
            plan.ops.push(Op::SetSysctl { iface: iface.clone(), key: *key, old: now, new: *value });
        }
        let all = live.all.get(key).copied().unwrap_or(0);
        let effective = key.effective(all, *value);
        if effective != *value {
            let o = Override { iface: iface.clone(), key: *key, all, value: *value, effective };
            plan.warnings.push(format!("{}; {}", o.describe(), o.accept_hint("the config")));
            plan.overrides.push(o);
        }
    }
    // A sysctl roce-route changed on an interface the config no longer
    // lists goes back to the value it had before.
    let wanted: BTreeSet<(&String, SysctlKey)> = desired.sysctls.iter().map(|s| (&s.iface, s.key)).collect();
    for ((iface, key), origin) in live.origins.iter() {
        if wanted.contains(&(iface, *key)) || desired.keep.sysctls_of.contains(iface) {
            continue;
        }
        if let Some(now) = current(iface, *key).filter(|now| now != origin) {
            plan.ops.push(Op::SetSysctl { iface: iface.clone(), key: *key, old: now, new: *origin });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Prefix, prefix};
    use crate::plan::PlannedInterface;

    const P: u8 = 234;

    fn route(table: u32, dst: &str, dev: &str, src: &str, proto: u8) -> Route {
        Route::connected(table, prefix(dst), dev, src.parse().unwrap(), proto)
    }
    fn rule(prio: u32, src: &str, table: u32, proto: u8) -> Rule {
        Rule::source(prio, src.parse().unwrap(), table, proto)
    }
    fn live<T>(item: T) -> Live<T> {
        Live { item, raw: vec![7] }
    }
    fn desired(n: usize) -> Desired {
        let mut d = Desired { protocol: P, ..Desired::default() };
        for k in 0..n {
            let name = format!("rail{k}");
            let a = format!("198.51.100.{}", 10 + k);
            d.interfaces.push(PlannedInterface {
                name: name.clone(),
                table: 100 + k as u32,
                priority: 1000,
                addresses: vec![Prefix::new(a.parse().unwrap(), 24)],
                gateways: vec![],
                subnets: vec![prefix("198.51.100.0/24")],
                onlink_gateways: vec![],
            });
            d.routes.push(route(100 + k as u32, "198.51.100.0/24", &name, &a, P));
            d.rules.push(rule(1000, &a, 100 + k as u32, P));
            d.sysctls.push(Sysctl { iface: name, key: SysctlKey::ArpIgnore, value: 1 });
        }
        d
    }
    fn applied(d: &Desired) -> Observed {
        Observed {
            rules: d.rules.iter().cloned().map(live).collect(),
            routes: d.routes.iter().cloned().map(live).collect(),
            sysctls: d.sysctls.iter().map(|s| ((s.iface.clone(), s.key), s.value)).collect(),
            ..Observed::default()
        }
    }
    fn kinds(p: &Plan) -> Vec<&'static str> {
        p.ops.iter().map(Op::kind).collect()
    }

    #[test]
    fn from_scratch_adds_routes_then_rules_then_sysctls() {
        let p = diff(&desired(2), &Observed::default(), false);
        assert_eq!(kinds(&p), ["add_route", "add_route", "add_rule", "add_rule", "set_sysctl", "set_sysctl"]);
        assert!(p.conflicts.is_empty());
    }

    #[test]
    fn applied_state_is_in_sync() {
        let d = desired(4);
        let p = diff(&d, &applied(&d), false);
        assert!(p.in_sync(), "{:?}", p.ops);
    }

    #[test]
    fn changed_route_is_replaced_not_deleted() {
        let d = desired(1);
        let mut live = applied(&d);
        live.routes[0].item.prefsrc = Some("198.51.100.99".parse().unwrap());
        let p = diff(&d, &live, false);
        assert_eq!(kinds(&p), ["replace_route"]);
    }

    #[test]
    fn dropped_interface_is_cleaned_up_after_the_new_state_is_in() {
        let d4 = desired(4);
        let live = applied(&d4);
        let d3 = desired(3);
        let p = diff(&d3, &live, false);
        assert_eq!(kinds(&p), ["del_rule", "del_route"]);
        assert!(p.conflicts.is_empty());
        // The deletes use the dumped bytes, so they delete exactly that entry.
        assert!(matches!(&p.ops[1], Op::DelRoute { raw: Some(r), .. } if r.0 == vec![7]));
    }

    #[test]
    fn renumbered_table_adds_new_rule_before_deleting_old() {
        let d = desired(1);
        let live = applied(&d);
        let mut d2 = d.clone();
        d2.interfaces[0].table = 200;
        d2.routes[0].table = 200;
        d2.rules[0].table = 200;
        let p = diff(&d2, &live, false);
        assert_eq!(kinds(&p), ["add_route", "add_rule", "del_rule", "del_route"]);
    }

    #[test]
    fn hand_made_setup_conflicts_unless_adopted() {
        let d = desired(1);
        let live = Observed {
            rules: vec![live(rule(32765, "198.51.100.10", 100, 3))],
            routes: vec![
                live(route(100, "198.51.100.0/24", "rail0", "198.51.100.10", 3)),
                live(Route::default_via(100, "198.51.100.1".parse().unwrap(), "rail0", 3)),
            ],
            ..Observed::default()
        };
        let p = diff(&d, &live, false);
        assert_eq!(p.conflicts.len(), 3, "{:?}", p.conflicts);
        assert!(
            p.conflicts.iter().any(|c| c.entry.contains("from 198.51.100.10 lookup 100")),
            "{:?}",
            p.conflicts
        );
        assert!(
            !p.ops
                .iter()
                .any(|o| matches!(o, Op::DelRule { .. } | Op::DelRoute { .. } | Op::ReplaceRoute { .. }))
        );
        let p = diff(&d, &live, true);
        assert_eq!(kinds(&p), ["replace_route", "add_rule", "del_rule", "del_route", "set_sysctl"]);
    }

    #[test]
    fn foreign_entries_elsewhere_are_not_conflicts() {
        let d = desired(1);
        let mut live = applied(&d);
        live.rules.push(self::live(rule(500, "203.0.113.5", 100, 4)));
        live.rules.push(self::live(Rule {
            src: Some(Prefix::new("198.51.100.0".parse().unwrap(), 24)),
            ..rule(600, "198.51.100.0", 50, 4)
        }));
        live.routes.push(self::live(route(50, "203.0.113.0/24", "rail0", "198.51.100.10", 4)));
        let p = diff(&d, &live, false);
        assert!(p.in_sync(), "{:?} {:?}", p.ops, p.conflicts);
    }

    #[test]
    fn sysctls_of_a_dropped_interface_go_back_to_their_recorded_values() {
        let d4 = desired(4);
        let mut live = applied(&d4);
        live.origins = d4.sysctls.iter().map(|s| ((s.iface.clone(), s.key), 0)).collect();
        let p = diff(&desired(3), &live, false);
        assert_eq!(kinds(&p), ["del_rule", "del_route", "set_sysctl"]);
        assert!(matches!(&p.ops[2], Op::SetSysctl { iface, old: 1, new: 0, .. } if iface == "rail3"));
        assert!(diff(&d4, &live, false).in_sync(), "recorded values of configured interfaces change nothing");
    }

    #[test]
    fn sysctl_overridden_by_all_is_warned() {
        let d = desired(1);
        let mut live = applied(&d);
        live.all.insert(SysctlKey::ArpIgnore, 2);
        let p = diff(&d, &live, false);
        assert!(p.ops.is_empty());
        assert!(
            p.warnings.iter().any(|w| w.contains("all.arp_ignore=2 overrides rail0")),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn an_owned_rule_with_more_selectors_is_deleted_before_the_add() {
        let d = desired(1);
        let mut live = applied(&d);
        let wider = Rule { iif: Some("lo".into()), ..d.rules[0].clone() };
        live.rules = vec![self::live(wider)];
        let p = diff(&d, &live, false);
        assert_eq!(kinds(&p), ["del_rule", "add_rule"], "the kernel would take the old rule for the new one");
        // Unrelated owned rules are still deleted after the adds.
        let mut other = d.rules[0].clone();
        other.src = Some(Prefix::host("198.51.100.99".parse().unwrap()));
        live.rules = vec![self::live(other)];
        assert_eq!(kinds(&diff(&d, &live, false)), ["add_rule", "del_rule"]);
        assert!(!kernel_may_confuse(&d.rules[0], &d.rules[0]));
    }

    #[test]
    fn a_foreign_rule_after_a_deleted_one_at_its_priority_is_warned() {
        let d2 = desired(2);
        let mut live = applied(&d2);
        let foreign = Rule {
            src: Some(Prefix::new("198.51.100.0".parse().unwrap(), 24)),
            ..rule(1000, "198.51.100.0", 50, 4)
        };
        live.rules.push(self::live(foreign));
        let p = diff(&desired(1), &live, false);
        assert!(
            p.warnings.iter().any(|w| w.contains("shares priority 1000") && w.contains("lookup 50")),
            "{:?}",
            p.warnings
        );
        // At another priority it cannot come first: no warning.
        live.rules.last_mut().unwrap().item.priority = 2000;
        assert!(diff(&desired(1), &live, false).warnings.is_empty());
    }

    #[test]
    fn tables_to_read_includes_stale_tables_and_skips_reserved() {
        let d = desired(1);
        let rules = vec![
            live(rule(1000, "198.51.100.50", 107, P)),
            live(rule(0, "198.51.100.51", 254, P)),
            live(rule(1, "198.51.100.52", 300, 4)),
        ];
        assert_eq!(tables_to_read(&d, &BTreeSet::new(), &rules), BTreeSet::from([100, 107]));
        assert_eq!(tables_to_read(&d, &BTreeSet::from([4]), &rules), BTreeSet::from([100, 107, 300]));
    }
}
