//! What else breaks RDMA on a host whose routes and rules are in sync, and
//! what `apply` cannot fix by itself (issue 8, section 4):
//!
//! - **ARP flux** from an interface outside the config that has an address
//!   in (or a subnet overlapping) a managed subnet and answers ARP for
//!   every local address (effective `arp_ignore` < 1) or announces them
//!   (effective `arp_announce` < 2): peers learn its MAC for the rails'
//!   addresses. The fix is to name it in `[[arp_only]]`.
//! - **No carrier**: a configured rail that is up without a carrier; its
//!   routes are `linkdown` and its traffic is lost. Only the cable, the
//!   switch port or the peer can fix that.
//! - **Foreign rules**: a rule roce-route does not own that the kernel
//!   evaluates before roce-route's rule of an address and that takes all
//!   of that address's traffic elsewhere (`shadowed`), or that sends
//!   traffic into a table roce-route manages (`foreign_rule_in_table`).
//!   A rule whose source is exactly a configured address is a conflict
//!   (`diff`), which `--adopt` takes over; it is not reported here again.
//!
//! Pure: functions of the desired state and what was observed.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde::Serialize;

use crate::behaviour::Verdict;
use crate::model::{Address, Family, Link, Live, Op, Prefix, Rule, SysctlKey, fr_act};
use crate::observed::Observed;
use crate::plan::Desired;
use crate::render;

/// The `local` table: the kernel's priority-0 rule looks it up before
/// anything else, and it holds only local and broadcast routes.
const LOCAL_TABLE: u32 = 255;

/// Everything this module finds, for `diff` to put in the plan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Risks {
    pub arp_flux: Vec<ArpFlux>,
    pub no_carrier: Vec<NoCarrier>,
    pub foreign_rules: Vec<ForeignRule>,
    /// Every foreign rule evaluated before one of roce-route's, in the
    /// kernel's order: where a traffic lookup that went wrong may come from.
    pub ahead: Vec<Ahead>,
}

/// Assesses the host: `ops` is what the plan will change (the sysctls it
/// restores count as the values apply leaves).
pub fn assess(desired: &Desired, live: &Observed, ops: &[Op]) -> Risks {
    let owns = |p: u8| live.owns(desired, p);
    let ahead = rules_ahead(desired, &live.rules, &owns);
    Risks {
        arp_flux: arp_flux(desired, live, ops),
        no_carrier: no_carrier(desired, &live.links),
        foreign_rules: foreign_rules(desired, &live.rules, &owns, &ahead),
        ahead,
    }
}

// ---------------------------------------------------------------------------
// ARP flux

/// A sysctl as the kernel acts on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SysctlValue {
    pub value: u32,
    pub all: u32,
    pub effective: u32,
}

/// An interface outside the config that lets the host answer ARP for the
/// rails' addresses with its own MAC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArpFlux {
    pub iface: String,
    /// Its IPv4 addresses with the managed subnet each is in or overlaps.
    pub addresses: Vec<(Prefix, Prefix)>,
    pub arp_ignore: Option<SysctlValue>,
    pub arp_announce: Option<SysctlValue>,
    /// The values are those apply leaves, not the current ones: it puts
    /// back the values recorded before roce-route changed them (the
    /// interface left the config).
    pub restored: bool,
}

/// The minimum effective values that keep an interface from answering
/// and announcing other interfaces' addresses.
const ARP_SAFE: [(SysctlKey, u32); 2] = [(SysctlKey::ArpIgnore, 1), (SysctlKey::ArpAnnounce, 2)];

impl ArpFlux {
    fn too_low(&self) -> Vec<(SysctlKey, SysctlValue, u32)> {
        let values = [self.arp_ignore, self.arp_announce];
        ARP_SAFE
            .iter()
            .zip(values)
            .filter_map(|(&(key, min), v)| v.filter(|v| v.effective < min).map(|v| (key, v, min)))
            .collect()
    }

    pub fn describe(&self) -> String {
        let addrs: Vec<String> =
            self.addresses.iter().map(|(a, subnet)| format!("{a} in managed subnet {subnet}")).collect();
        let low = self.too_low();
        let values: Vec<String> =
            low.iter().map(|(key, v, _)| format!("{}={} (all {})", key.name(), v.value, v.all)).collect();
        let effects: Vec<&str> = low
            .iter()
            .map(|(key, _, _)| match key {
                SysctlKey::ArpIgnore => "answers ARP requests for the rails' addresses",
                _ if low.len() > 1 => "announces them in its own ARP requests",
                _ => "announces the rails' addresses in its own ARP requests",
            })
            .collect();
        format!(
            "ARP flux: {} is not in the config but has {}, with {}{}: it {}, so peers can learn its MAC for \
             the rails' addresses and send their RDMA traffic to it",
            self.iface,
            addrs.join(", "),
            values.join(" and "),
            if self.restored { " once apply restores its recorded values (it left the config)" } else { "" },
            effects.join(" and ")
        )
    }

    /// `apply` is the suggested apply command.
    pub fn fix(&self, config_file: &str, apply: &str) -> String {
        let sets: Vec<String> = self
            .too_low()
            .iter()
            .map(|(key, _, min)| format!("{}={min}", crate::sysctl::dotted_name(&self.iface, *key)))
            .collect();
        format!(
            "name it for its ARP sysctls only: add an [[arp_only]] table with name = {:?} to {config_file}, then \
             run `{apply}` (or set `sysctl -w {}` yourself)",
            self.iface,
            sets.join(" ")
        )
    }

    pub fn warning(&self) -> String {
        format!("{}; {}", self.describe(), self.fix("the config", "roce-route apply"))
    }
}

/// The IPv4 subnets of the configured addresses: where ARP flux matters.
fn managed_v4_subnets(desired: &Desired) -> Vec<Prefix> {
    let mut subnets: Vec<Prefix> = desired
        .interfaces
        .iter()
        .flat_map(|i| i.subnets.iter().map(Prefix::network))
        .filter(|s| s.family() == Family::V4)
        .collect();
    subnets.sort();
    subnets.dedup();
    subnets
}

/// Each IPv4 address of an interface the config does not name, with the
/// managed subnet it is in or overlaps. The loopback interface never
/// receives an ARP request, so it is left out.
fn unnamed_in_managed_subnets<'a>(desired: &Desired, addrs: &'a [Address]) -> Vec<(&'a Address, Prefix)> {
    let managed = managed_v4_subnets(desired);
    addrs
        .iter()
        .filter(|a| a.addr.family() == Family::V4 && a.ifname != "lo" && !desired.names(&a.ifname))
        .filter_map(|a| managed.iter().find(|m| a.meets(m)).map(|m| (a, *m)))
        .collect()
}

/// The interfaces whose ARP sysctls `reconcile` must read for `arp_flux`.
pub fn arp_candidates(desired: &Desired, addrs: &[Address]) -> BTreeSet<String> {
    unnamed_in_managed_subnets(desired, addrs).into_iter().map(|(a, _)| a.ifname.clone()).collect()
}

/// The interfaces outside the config with an address in a managed subnet
/// whose effective arp_ignore or arp_announce (after `ops`) lets them
/// answer or announce the rails' addresses. A value that could not be
/// read is not judged.
pub fn arp_flux(desired: &Desired, live: &Observed, ops: &[Op]) -> Vec<ArpFlux> {
    let mut out: Vec<ArpFlux> = Vec::new();
    for (a, subnet) in unnamed_in_managed_subnets(desired, &live.addresses) {
        if let Some(f) = out.iter_mut().find(|f| f.iface == a.ifname) {
            f.addresses.push((a.addr, subnet));
            continue;
        }
        let mut restored = false;
        let mut value = |key: SysctlKey| {
            let planned = ops.iter().rev().find_map(|op| match op {
                Op::SetSysctl { iface, key: k, new, .. } if *iface == a.ifname && *k == key => Some(*new),
                _ => None,
            });
            restored |= planned.is_some();
            let value = planned.or_else(|| live.sysctls.get(&(a.ifname.clone(), key)).copied())?;
            let all = live.all.get(&key).copied().unwrap_or(0);
            Some(SysctlValue { value, all, effective: key.effective(all, value) })
        };
        let arp_ignore = value(SysctlKey::ArpIgnore);
        let arp_announce = value(SysctlKey::ArpAnnounce);
        out.push(ArpFlux {
            iface: a.ifname.clone(),
            addresses: vec![(a.addr, subnet)],
            arp_ignore,
            arp_announce,
            restored,
        });
    }
    out.retain(|f| !f.too_low().is_empty());
    out
}

// ---------------------------------------------------------------------------
// No carrier

/// A configured rail that is up but has no carrier (IFF_LOWER_UP unset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoCarrier {
    pub iface: String,
    pub addresses: Vec<Prefix>,
}

impl NoCarrier {
    pub fn describe(&self) -> String {
        let addrs: Vec<String> = self.addresses.iter().map(ToString::to_string).collect();
        format!(
            "{} has no carrier (NO-CARRIER: it is up, but the link to the switch or peer is down): its routes \
             are `linkdown` and traffic from {} is lost",
            self.iface,
            if addrs.is_empty() { "it".to_string() } else { addrs.join(", ") }
        )
    }

    pub fn fix(&self) -> String {
        format!(
            "roce-route cannot fix this: check the cable, the switch port and the peer's end of {} \
             (`ip link show {}` says NO-CARRIER until the link is back)",
            self.iface,
            render::quote(&self.iface)
        )
    }

    pub fn warning(&self) -> String {
        format!("{}; {}", self.describe(), self.fix())
    }
}

/// The configured rails that are administratively up without a carrier.
/// (A rail that is down is warned about by the plan; one not found in
/// `links` is not judged.)
pub fn no_carrier(desired: &Desired, links: &[Link]) -> Vec<NoCarrier> {
    desired
        .interfaces
        .iter()
        .filter(|i| links.iter().any(|l| l.name == i.name && l.admin_up && !l.lower_up))
        .map(|i| NoCarrier { iface: i.name.clone(), addresses: i.addresses.clone() })
        .collect()
}

// ---------------------------------------------------------------------------
// Foreign rules

/// A source address of roce-route's and the rule it makes for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub iface: String,
    pub addr: IpAddr,
    pub priority: u32,
    pub table: u32,
}

/// A foreign rule and the sources whose roce-route rule it comes before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ahead {
    pub rule: Rule,
    pub before: Vec<Source>,
}

/// Every rule roce-route does not own that the kernel evaluates before
/// roce-route's rule of some source, in the kernel's order: a smaller
/// priority number, or the same one earlier in the list (a rule still to
/// be added goes after every rule of its priority: the kernel appends).
/// Each rule is looked up once: a host of 32 rails × 4 addresses, dual
/// stack, has 256 rules of its own, and a scan of the live rules for each
/// (their positions, the foreign ones among them) took 0.3 ms of each
/// diff, twice a heal.
pub fn rules_ahead(desired: &Desired, live: &[Live<Rule>], owns: &dyn Fn(u8) -> bool) -> Vec<Ahead> {
    // Where each of roce-route's live rules first is; the foreign ones.
    let mut ours: BTreeMap<&Rule, usize> = BTreeMap::new();
    let mut foreign: Vec<(usize, &Rule)> = Vec::new();
    for (j, r) in live.iter().enumerate() {
        if owns(r.item.protocol) {
            ours.entry(&r.item).or_insert(j);
        } else {
            foreign.push((j, &r.item));
        }
    }
    let mut out: Vec<Ahead> = Vec::new();
    for i in &desired.interfaces {
        for want in desired.rules.iter().filter(|r| r.table == i.table) {
            let Some(src) = want.src.map(|s| s.addr) else { continue };
            let ours_at = ours.get(want).copied();
            for &(j, f) in &foreign {
                let first = f.priority < want.priority
                    || (f.priority == want.priority && ours_at.is_none_or(|at| j < at));
                if f.family != want.family || !first {
                    continue;
                }
                let source =
                    Source { iface: i.name.clone(), addr: src, priority: want.priority, table: want.table };
                match out.iter_mut().find(|a| a.rule == *f) {
                    Some(a) => a.before.push(source),
                    None => out.push(Ahead { rule: f.clone(), before: vec![source] }),
                }
            }
        }
    }
    // The kernel's order: by family, then priority, then list order (the
    // order of `live`, which the loops above keep per priority).
    let pos = |r: &Rule| live.iter().position(|l| l.item == *r).unwrap_or(usize::MAX);
    out.sort_by_key(|a| (a.rule.family, a.rule.priority, pos(&a.rule)));
    out
}

/// Whether `rule` would select locally made, unmarked traffic from `from`:
/// to `to`, or with `to` None to every destination. Locally made traffic
/// comes in from `lo` as the kernel sees it; a rule with selectors
/// roce-route does not model (`extra_selectors`) or an `oif` is not
/// judged (false).
pub fn selects(rule: &Rule, from: IpAddr, to: Option<IpAddr>) -> bool {
    if rule.extra_selectors || rule.oif.is_some() || rule.family != Family::of(&from) {
        return false;
    }
    let any_len = |p: &Prefix| p.len == 0;
    let src = rule.src.is_none_or(|s| any_len(&s) || s.contains(&from));
    let iif = rule.iif.as_deref().is_none_or(|i| i == "lo");
    // An unmarked packet has mark 0: `fwmark M/MASK` selects it when M & MASK is 0.
    let mark = rule.fwmark.is_none_or(|m| m & rule.fwmask.unwrap_or(u32::MAX) == 0);
    let some_destination = src && iif && mark && rule.tos == 0;
    match to {
        Some(to) => {
            let dst = rule.dst.is_none_or(|d| any_len(&d) || d.contains(&to));
            (some_destination && dst) != rule.invert
        }
        // Every destination: the selectors hold whatever the destination
        // (or, inverted, hold for none).
        None if rule.invert => !some_destination,
        None => some_destination && rule.dst.is_none_or(|d| any_len(&d)),
    }
}

/// Whether `rule`, once it selects traffic of `source`, keeps it from
/// roce-route's rule: a lookup in another table (not `local`, which holds
/// only local and broadcast routes), a drop, or a goto past it.
fn diverts(rule: &Rule, source: &Source) -> bool {
    match rule.action {
        fr_act::TO_TBL => rule.table != source.table && rule.table != LOCAL_TABLE && rule.table != 0,
        fr_act::BLACKHOLE | fr_act::UNREACHABLE | fr_act::PROHIBIT => true,
        fr_act::GOTO => rule.goto.is_some_and(|g| g > source.priority),
        _ => false,
    }
}

/// A foreign rule whose source is exactly a configured address: `diff`
/// reports it as a conflict, which `--adopt` takes over.
pub fn takes_configured_source(rule: &Rule, sources: &BTreeSet<IpAddr>) -> bool {
    !rule.invert && rule.src.is_some_and(|s| s.len == s.family().max_len() && sources.contains(&s.addr))
}

/// A rule roce-route does not own that breaks what it set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignRule {
    pub rule: Rule,
    /// The sources all of whose traffic it takes before roce-route's rule.
    pub caught: Vec<Source>,
    /// The managed table it looks up, and the interface that table is for.
    pub into_table: Option<(u32, String)>,
}

impl ForeignRule {
    /// The one rail it concerns: a shadowing rule, the rail whose traffic
    /// it takes when it takes one rail's only (None when several); a rule
    /// into a managed table that takes no configured source, that
    /// table's rail.
    pub fn rail(&self) -> Option<String> {
        match self.caught.first() {
            Some(first) => self.caught.iter().all(|c| c.iface == first.iface).then(|| first.iface.clone()),
            None => self.into_table.as_ref().map(|(_, iface)| iface.clone()),
        }
    }

    pub fn kind(&self) -> &'static str {
        if self.caught.is_empty() { "foreign_rule_in_table" } else { "shadowed" }
    }

    pub fn describe(&self) -> String {
        let line = render::rule_line(&self.rule);
        let table =
            self.into_table.as_ref().map(|(t, i)| format!("table {t}, which roce-route manages for {i}"));
        if self.caught.is_empty() {
            return format!(
                "`{line}` (not roce-route's) sends the traffic it selects into {}: that traffic leaves by that \
                 interface whatever its source, and the table changes whenever the config does",
                table.unwrap_or_default()
            );
        }
        let caught: Vec<String> = self.caught.iter().map(|s| format!("{} ({})", s.addr, s.iface)).collect();
        let what = match self.rule.action {
            fr_act::TO_TBL => format!(
                "looks it up in {} instead of the interface's own table",
                table.unwrap_or_else(|| format!("table {}", self.rule.table))
            ),
            fr_act::GOTO => {
                format!("jumps past roce-route's rules to priority {}", self.rule.goto.unwrap_or(0))
            }
            _ => "drops it".to_string(),
        };
        format!(
            "`{line}` (not roce-route's) comes before roce-route's rule (priority {}) and selects all traffic \
             from {}: it {what}",
            self.after(),
            caught.join(", ")
        )
    }

    /// The highest priority of roce-route's rules it comes before.
    fn after(&self) -> u32 {
        self.caught.iter().map(|s| s.priority).max().unwrap_or(0)
    }

    pub fn fix(&self) -> String {
        if self.caught.is_empty() {
            return format!("{}, or make it look up a table of its own", delete_rule(&self.rule));
        }
        rule_fix(&self.rule, self.after())
    }

    pub fn warning(&self) -> String {
        format!("{}; fix: {}", self.describe(), self.fix())
    }
}

fn delete_rule(rule: &Rule) -> String {
    let del = render::command(&Op::DelRule { rule: rule.clone(), raw: None });
    let other = if rule.extra_selectors { " (with the selectors `ip rule` shows for it)" } else { "" };
    format!("delete it (`{del}`{other})")
}

/// What fixes a foreign rule that comes before roce-route's rule at
/// priority `ours`.
pub fn rule_fix(rule: &Rule, ours: u32) -> String {
    format!(
        "{}, or add it back with a priority above {ours} so that roce-route's rules come first; \
         `roce-route apply` cannot fix this: it never changes rules it does not own",
        delete_rule(rule)
    )
}

/// The foreign rules that shadow roce-route's rules or look up its tables.
/// Rules whose source is exactly a configured address are conflicts, left
/// to `diff`.
pub fn foreign_rules(
    desired: &Desired,
    live: &[Live<Rule>],
    owns: &dyn Fn(u8) -> bool,
    ahead: &[Ahead],
) -> Vec<ForeignRule> {
    let sources = desired.source_addresses();
    let mut out = Vec::new();
    for f in live.iter().map(|l| &l.item) {
        if owns(f.protocol) || takes_configured_source(f, &sources) {
            continue;
        }
        let caught: Vec<Source> = ahead
            .iter()
            .filter(|a| a.rule == *f)
            .flat_map(|a| a.before.iter())
            .filter(|s| selects(f, s.addr, None) && diverts(f, s))
            .cloned()
            .collect();
        let into_table = (f.action == fr_act::TO_TBL)
            .then(|| desired.rail_of_table(f.table))
            .flatten()
            .map(|name| (f.table, name));
        if !caught.is_empty() || into_table.is_some() {
            out.push(ForeignRule { rule: f.clone(), caught, into_table });
        }
    }
    out
}

/// The foreign rule that took a failed lookup's traffic: the first rule
/// ahead of roce-route's rule of its source that selects it and led where
/// the kernel answered (the table it looked up; a drop when the lookup
/// failed). None when no foreign rule explains it. Returns the rule and the
/// priority of roce-route's rule it comes before.
pub fn culprit<'a>(ahead: &'a [Ahead], v: &Verdict) -> Option<(&'a Rule, u32)> {
    let (from, to) = (v.probe.from, v.probe.to);
    ahead.iter().find_map(|a| {
        let source = a.before.iter().find(|s| s.addr == from)?;
        let led_there = match v.table {
            Some(t) => a.rule.action == fr_act::TO_TBL && a.rule.table == t,
            None => matches!(a.rule.action, fr_act::BLACKHOLE | fr_act::UNREACHABLE | fr_act::PROHIBIT),
        };
        (led_there && diverts(&a.rule, source) && selects(&a.rule, from, Some(to)))
            .then_some((&a.rule, source.priority))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behaviour::Probe;
    use crate::model::{Route, Sysctl, prefix};
    use crate::plan::PlannedInterface;
    use std::collections::BTreeMap;

    const P: u8 = 234;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
    fn live<T>(item: T) -> Live<T> {
        Live { item, raw: vec![] }
    }
    /// rail0..railN-1 with 198.51.100.(10+k)/24, table 100+k, priority 1000.
    fn desired(n: usize) -> Desired {
        let mut d = Desired { protocol: P, ..Desired::default() };
        for k in 0..n {
            let name = format!("rail{k}");
            let a = ip(&format!("198.51.100.{}", 10 + k));
            d.interfaces.push(PlannedInterface {
                name: name.clone(),
                table: 100 + k as u32,
                priority: 1000,
                addresses: vec![Prefix::new(a, 24)],
                gateways: vec![],
                subnets: vec![prefix("198.51.100.0/24")],
                onlink_gateways: vec![],
            });
            d.routes.push(Route::connected(100 + k as u32, prefix("198.51.100.0/24"), &name, a, P));
            d.rules.push(Rule::source(1000, a, 100 + k as u32, P));
            d.sysctls.push(Sysctl { iface: name, key: SysctlKey::ArpIgnore, value: 1 });
        }
        d
    }
    fn addr(ifname: &str, a: &str) -> Address {
        let (a, len) = a.split_once('/').unwrap();
        Address {
            ifname: ifname.into(),
            addr: Prefix::new(ip(a), len.parse().unwrap()),
            ..Address::default()
        }
    }
    fn link(name: &str, admin_up: bool, lower_up: bool) -> Link {
        Link { admin_up, lower_up, ..Link::up(0, name) }
    }
    /// `priority PRIO from SRC lookup TABLE proto 3` (SRC "all": no selector).
    fn foreign(prio: u32, src: &str, table: u32) -> Rule {
        let src = (src != "all").then(|| if src.contains('/') { prefix(src) } else { Prefix::host(ip(src)) });
        Rule { src, ..Rule::source(prio, ip("198.51.100.0"), table, 3) }
    }
    fn observed(d: &Desired, extra: &[Rule]) -> Observed {
        let mut rules: Vec<Live<Rule>> = d.rules.iter().cloned().map(live).collect();
        rules.extend(extra.iter().cloned().map(live));
        rules.sort_by_key(|r| r.item.priority);
        Observed { rules, ..Observed::default() }
    }
    fn kinds(r: &Risks) -> Vec<&'static str> {
        r.foreign_rules.iter().map(ForeignRule::kind).collect()
    }

    // --- ARP flux -----------------------------------------------------------

    fn flux_host(ignore: u32, announce: u32) -> (Desired, Observed) {
        let d = desired(2);
        let mut o = observed(&d, &[]);
        o.addresses = vec![
            addr("rail0", "198.51.100.10/24"),
            addr("rail1", "198.51.100.11/24"),
            addr("rail4", "198.51.100.14/24"),
            addr("rail4", "2001:db8:1::14/64"),
            addr("eno1", "192.0.2.5/24"),
            addr("lo", "198.51.100.99/32"),
        ];
        o.sysctls.insert(("rail4".into(), SysctlKey::ArpIgnore), ignore);
        o.sysctls.insert(("rail4".into(), SysctlKey::ArpAnnounce), announce);
        (d, o)
    }

    #[test]
    fn an_interface_outside_the_config_in_a_managed_subnet_is_arp_flux() {
        let (d, o) = flux_host(0, 0);
        assert_eq!(arp_candidates(&d, &o.addresses), BTreeSet::from(["rail4".to_string()]));
        let flux = arp_flux(&d, &o, &[]);
        assert_eq!(flux.len(), 1, "{flux:#?}");
        let f = &flux[0];
        assert_eq!(f.iface, "rail4");
        assert_eq!(f.addresses, [(prefix("198.51.100.14/24"), prefix("198.51.100.0/24"))]);
        let text = f.describe();
        for needle in ["rail4 is not in the config", "198.51.100.14/24", "arp_ignore=0", "arp_announce=0"] {
            assert!(text.contains(needle), "{needle:?} missing: {text}");
        }
        let fix = f.fix("c.toml", "roce-route apply c.toml");
        assert!(fix.contains("[[arp_only]] table with name = \"rail4\" to c.toml"), "{fix}");
        assert!(fix.contains("net.ipv4.conf.rail4.arp_ignore=1 net.ipv4.conf.rail4.arp_announce=2"), "{fix}");
    }

    #[test]
    fn arp_flux_judges_effective_values_and_each_key() {
        // Safe values, on the interface or through conf/all: no flux.
        assert!(arp_flux(&flux_host(1, 2).0, &flux_host(1, 2).1, &[]).is_empty());
        let (d, mut o) = flux_host(0, 0);
        o.all = BTreeMap::from([(SysctlKey::ArpIgnore, 1), (SysctlKey::ArpAnnounce, 2)]);
        assert!(arp_flux(&d, &o, &[]).is_empty());
        // One key too low is enough, and only that key is named.
        let (d, o) = flux_host(8, 1);
        let f = arp_flux(&d, &o, &[]);
        assert_eq!(f.len(), 1);
        let text = f[0].describe();
        assert!(
            text.contains("with arp_announce=1 (all 0): it announces the rails' addresses in its own ARP")
                && !text.contains("arp_ignore"),
            "{text}"
        );
        assert!(!f[0].fix("c", "a").contains("arp_ignore"));
        // A value that could not be read is not judged.
        let (d, mut o) = flux_host(1, 2);
        o.sysctls.clear();
        assert!(arp_flux(&d, &o, &[]).is_empty());
    }

    #[test]
    fn named_interfaces_and_other_subnets_are_no_arp_flux() {
        let (mut d, o) = flux_host(0, 0);
        d.arp_only.push("rail4".into());
        assert!(arp_candidates(&d, &o.addresses).is_empty());
        assert!(arp_flux(&d, &o, &[]).is_empty());
        // A subnet overlapping a managed one counts; an IPv6 one does not.
        let (d, mut o) = flux_host(0, 0);
        o.addresses = vec![addr("eno1", "198.51.0.5/16"), addr("eno2", "2001:db8:1::5/64")];
        o.sysctls = BTreeMap::from([
            (("eno1".into(), SysctlKey::ArpIgnore), 0),
            (("eno2".into(), SysctlKey::ArpIgnore), 0),
        ]);
        let f = arp_flux(&d, &o, &[]);
        assert_eq!(f.iter().map(|f| f.iface.as_str()).collect::<Vec<_>>(), ["eno1"]);
    }

    #[test]
    fn arp_flux_uses_the_values_apply_restores() {
        // rail4 left the config: its sysctls are 1/2 now, apply puts back 0.
        let (d, o) = flux_host(1, 2);
        let restore = |key, old, new| Op::SetSysctl { iface: "rail4".into(), key, old, new };
        let ops = [restore(SysctlKey::ArpIgnore, 1, 0), restore(SysctlKey::ArpAnnounce, 2, 0)];
        let f = arp_flux(&d, &o, &ops);
        assert_eq!(f.len(), 1);
        assert!(f[0].restored);
        assert!(f[0].describe().contains("once apply restores its recorded values"), "{}", f[0].describe());
    }

    // --- no carrier -----------------------------------------------------------

    #[test]
    fn a_rail_up_without_carrier_is_reported() {
        let d = desired(3);
        let links = [link("rail0", true, true), link("rail1", true, false), link("rail2", false, false)];
        let n = no_carrier(&d, &links);
        assert_eq!(
            n.iter().map(|n| n.iface.as_str()).collect::<Vec<_>>(),
            ["rail1"],
            "rail2 is down: warned by plan"
        );
        assert!(
            n[0].describe().contains("rail1 has no carrier") && n[0].describe().contains("198.51.100.11/24")
        );
        assert!(n[0].fix().starts_with("roce-route cannot fix this: check the cable"));
        assert!(no_carrier(&d, &[]).is_empty(), "no link read: not judged");
    }

    // --- foreign rules --------------------------------------------------------

    #[test]
    fn a_wider_rule_before_ours_shadows_every_address_it_selects() {
        let d = desired(2);
        let o = observed(&d, &[foreign(999, "198.51.100.0/24", 200)]);
        let r = assess(&d, &o, &[]);
        assert_eq!(kinds(&r), ["shadowed"]);
        let f = &r.foreign_rules[0];
        assert_eq!(
            f.caught.iter().map(|s| s.addr).collect::<Vec<_>>(),
            [ip("198.51.100.10"), ip("198.51.100.11")]
        );
        let text = f.describe();
        assert!(
            text.contains("`ip -4 rule: priority 999 from 198.51.100.0/24 lookup 200 proto 3`"),
            "{text}"
        );
        assert!(text.contains("looks it up in table 200"), "{text}");
        let fix = f.fix();
        assert!(
            fix.contains("`ip -4 rule del priority 999 from 198.51.100.0/24 lookup 200 proto 3`"),
            "{fix}"
        );
        assert!(fix.contains("priority above 1000") && fix.contains("cannot fix this"), "{fix}");
        assert_eq!(f.rail(), None, "it takes two rails' traffic");
        // After ours, or at our priority after our rule, it shadows nothing.
        for prio in [1000, 1001] {
            let o = observed(&d, &[foreign(prio, "198.51.100.0/24", 200)]);
            assert!(assess(&d, &o, &[]).foreign_rules.is_empty(), "priority {prio}");
        }
        // At our priority before our rule, or with our rule still missing
        // (the kernel appends it): it does.
        let mut o = observed(&d, &[]);
        o.rules.insert(0, live(foreign(1000, "198.51.100.0/24", 200)));
        assert_eq!(kinds(&assess(&d, &o, &[])), ["shadowed"]);
        let o = Observed { rules: vec![live(foreign(1000, "all", 200))], ..Observed::default() };
        assert_eq!(kinds(&assess(&d, &o, &[])), ["shadowed"]);
    }

    #[test]
    fn what_shadows_and_what_does_not() {
        let d = desired(1);
        let with = |f: &dyn Fn(&mut Rule)| {
            let mut r = foreign(500, "all", 200);
            f(&mut r);
            kinds(&assess(&d, &observed(&d, &[r]), &[]))
        };
        let shadowed: [&[&str]; 1] = [&["shadowed"]];
        let none: [&[&str]; 1] = [&[]];
        // No selector, iif lo, an unmatched inverted source, a mark that
        // unmarked traffic has, a drop, lookup main, a goto past ours.
        assert_eq!([with(&|_| {})], shadowed);
        assert_eq!([with(&|r| r.iif = Some("lo".into()))], shadowed);
        assert_eq!([with(&|r| (r.src, r.invert) = (Some(prefix("203.0.113.0/24")), true))], shadowed);
        assert_eq!([with(&|r| (r.fwmark, r.fwmask) = (Some(0x100), Some(0xff)))], shadowed);
        assert_eq!([with(&|r| (r.action, r.table) = (fr_act::UNREACHABLE, 0))], shadowed);
        assert_eq!([with(&|r| r.table = 254)], shadowed);
        assert_eq!([with(&|r| (r.action, r.table, r.goto) = (fr_act::GOTO, 0, Some(2000)))], shadowed);
        // Only part of the traffic, or not this source, or harmless.
        assert_eq!([with(&|r| r.dst = Some(prefix("203.0.113.0/24")))], none);
        assert_eq!([with(&|r| r.src = Some(prefix("203.0.113.0/24")))], none);
        assert_eq!([with(&|r| (r.src, r.invert) = (Some(prefix("198.51.100.0/24")), true))], none);
        assert_eq!([with(&|r| r.fwmark = Some(1))], none);
        assert_eq!([with(&|r| r.iif = Some("rail0".into()))], none);
        assert_eq!([with(&|r| r.oif = Some("rail0".into()))], none);
        assert_eq!([with(&|r| r.tos = 0x10)], none);
        assert_eq!([with(&|r| r.extra_selectors = true)], none);
        assert_eq!([with(&|r| r.table = 255)], none, "the kernel's local rule");
        assert_eq!([with(&|r| (r.action, r.table) = (fr_act::NOP, 0))], none);
        assert_eq!([with(&|r| (r.action, r.table, r.goto) = (fr_act::GOTO, 0, Some(900)))], none);
        assert_eq!([with(&|r| r.family = Family::V6)], none);
        // Owned by roce-route (another recorded protocol): not foreign.
        let mut o = observed(&d, &[foreign(500, "all", 200)]);
        o.owned_protocols.insert(3);
        assert!(assess(&d, &o, &[]).foreign_rules.is_empty());
    }

    #[test]
    fn a_foreign_rule_into_a_managed_table() {
        let d = desired(2);
        let fw = Rule { src: None, fwmark: Some(1), ..foreign(999, "all", 101) };
        let r = assess(&d, &observed(&d, &[fw]), &[]);
        assert_eq!(kinds(&r), ["foreign_rule_in_table"]);
        let f = &r.foreign_rules[0];
        assert_eq!(f.into_table, Some((101, "rail1".to_string())));
        assert!(f.describe().contains("fwmark 0x1 lookup 101") && f.describe().contains("manages for rail1"));
        assert!(f.fix().contains("`ip -4 rule del priority 999 from all fwmark 0x1 lookup 101 proto 3`"));
        // One that also shadows is reported once, as shadowing, naming the table.
        let r = assess(&d, &observed(&d, &[foreign(999, "198.51.100.0/24", 101)]), &[]);
        assert_eq!(kinds(&r), ["shadowed"]);
        assert_eq!(r.foreign_rules[0].caught.len(), 1, "rail1's own table does not divert rail1");
        assert!(r.foreign_rules[0].describe().contains("table 101, which roce-route manages for rail1"));
        // It is rail0's (whose traffic goes wrong), not rail1's (whose table it is).
        assert_eq!(r.foreign_rules[0].rail().as_deref(), Some("rail0"));
        assert_eq!(
            f.rail().as_deref(),
            Some("rail1"),
            "a rule into a table that takes no source: the table's"
        );
    }

    /// A foreign rule whose source is exactly a configured address is the
    /// conflict `--adopt` takes over: not reported here a second time.
    #[test]
    fn an_exact_source_rule_is_left_to_the_conflict() {
        let d = desired(2);
        for table in [101, 200] {
            let r = assess(&d, &observed(&d, &[foreign(999, "198.51.100.10", table)]), &[]);
            assert!(r.foreign_rules.is_empty(), "{:#?}", r.foreign_rules);
            let p = crate::diff::diff(&d, &observed(&d, &[foreign(999, "198.51.100.10", table)]), false);
            assert_eq!(p.conflicts.len(), 1);
        }
    }

    #[test]
    fn the_culprit_of_a_failed_lookup_is_the_rule_that_took_it() {
        let d = desired(2);
        let wide = foreign(999, "198.51.100.0/24", 200);
        let to_doc = Rule { dst: Some(prefix("203.0.113.0/24")), ..foreign(998, "all", 300) };
        let r = assess(&d, &observed(&d, &[wide.clone(), to_doc.clone()]), &[]);
        let verdict = |to: &str, table: Option<u32>| Verdict {
            probe: Probe {
                interface: "rail1".into(),
                from: ip("198.51.100.11"),
                to: ip(to),
                expected_dev: "rail1".into(),
                expected_table: 101,
                expected_gateway: None,
            },
            dev: Some("rail0".into()),
            table,
            gateway: None,
            error: None,
            ok: false,
        };
        assert_eq!(culprit(&r.ahead, &verdict("198.51.100.1", Some(200))), Some((&wide, 1000)));
        // A destination rule is found for the destinations it selects.
        assert_eq!(culprit(&r.ahead, &verdict("203.0.113.1", Some(300))), Some((&to_doc, 1000)));
        assert_eq!(culprit(&r.ahead, &verdict("198.51.100.1", Some(300))), None);
        // The kernel used main: no foreign rule before ours leads there.
        assert_eq!(culprit(&r.ahead, &verdict("198.51.100.1", Some(254))), None);
    }

    #[test]
    fn selects_one_destination_or_every_one() {
        let a = ip("198.51.100.10");
        let (doc, peer) = (Some(ip("203.0.113.1")), Some(ip("198.51.100.1")));
        let to_doc = Rule { dst: Some(prefix("203.0.113.0/24")), ..foreign(500, "all", 200) };
        assert!(selects(&to_doc, a, doc) && !selects(&to_doc, a, peer) && !selects(&to_doc, a, None));
        // `not to 203.0.113.0/24`: the other destinations, so not every one.
        let not_doc = Rule { invert: true, ..to_doc.clone() };
        assert!(!selects(&not_doc, a, doc) && selects(&not_doc, a, peer) && !selects(&not_doc, a, None));
        // `not from 203.0.113.0/24 to 203.0.113.0/24`: every packet from a.
        let not_both = Rule { src: Some(prefix("203.0.113.0/24")), ..not_doc };
        assert!(selects(&not_both, a, doc) && selects(&not_both, a, None));
        // Another family never.
        assert!(!selects(&foreign(500, "all", 200), ip("2001:db8:1::10"), None));
    }

    #[test]
    fn rules_ahead_are_in_the_kernels_order() {
        let d = desired(1);
        let o = observed(&d, &[foreign(900, "all", 201), foreign(0, "all", 255), foreign(32766, "all", 254)]);
        let a = rules_ahead(&d, &o.rules, &|p| p == P);
        let prios: Vec<u32> = a.iter().map(|a| a.rule.priority).collect();
        assert_eq!(prios, [0, 900]);
        assert!(selects(&a[0].rule, ip("198.51.100.10"), None));
    }
}
