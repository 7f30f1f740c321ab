//! Model-based property tests of `diff` and undo against an in-memory kernel.
//!
//! `Kernel` below models the parts of Linux that roce-route changes,
//! following the kernel's identity rules: /work/shared/netlink-notes.md,
//! and, where the notes say nothing, net/core/fib_rules.c (`rule_exists`,
//! `rule_find`) and net/ipv4/fib_trie.c (`fib_table_delete`); the rule
//! behaviours the findings below rest on were checked with `ip rule` on
//! kernel 6.18. It implements `executor::Effects`, so the real executor
//! drives it, and `Kernel::dump` turns it into the `observed::Observed` that
//! `reconcile::observe` would read from a real host.
//!
//! What the model follows:
//! - Routes are identified by `Route::key()` (family, table, destination,
//!   tos, metric): an add of an existing key fails with EEXIST, a replace
//!   (NLM_F_CREATE|NLM_F_REPLACE) inserts or overwrites, a delete matches
//!   the route under the key on every attribute the request gives (type,
//!   scope unless NOWHERE, prefsrc, protocol, oif, gateway, hidden
//!   attribute) and otherwise fails with ESRCH, as a missing key does. A
//!   route through an interface that does not exist fails with ENODEV, one
//!   whose prefsrc is not a local address with EINVAL, one whose gateway is
//!   outside the interface's subnets (and not `onlink`) with ENETUNREACH.
//! - Rules form one list ordered by priority, a new rule going after every
//!   rule of its priority. An add (NLM_F_EXCL) fails with EEXIST when
//!   `rule_exists()` finds a rule equal on every field, except that the
//!   source, destination and tos count only when the NEW rule has them and
//!   the `not` flag and goto target not at all. A delete removes the FIRST
//!   rule in list order that matches every attribute the request gives
//!   (`rule_find()`), and fails with ENOENT when none does.
//! - Sysctls are per (interface, key); writing one of an interface that
//!   does not exist fails with ENOENT. `SetSysctl::old` is not checked, as
//!   the kernel does not check it (crash replay writes `old` values over
//!   steps that never ran); a step whose `old` is not the value it
//!   overwrites is logged (`stale_olds`) and property 4 looks at it.
//!
//! What it does not model, so these tests say nothing about it: netlink
//! messages. The model cannot parse netlink bytes, so the `raw` bytes it
//! dumps are a stand-in: a deterministic text encoding of the entry, with a
//! side map (`Codec`) from those bytes back to the entry (the same content
//! always gets the same bytes, as in a real dump; bytes the model never
//! produced fail with EINVAL, as a corrupt saved message does). Whether
//! src/netlink/ encodes and decodes real messages faithfully is for the
//! real-kernel tests. Attributes the crate's types leave out (a route's
//! `mtu`, a rule's `ipproto`) are one `Hidden` value, carried only by the
//! raw bytes. Also left out: routes the kernel removes by itself (link
//! down, address removed), several routes under one key (`ip route
//! append`, IPv6 multipath), IPv6's own route-delete matching, the fwmark
//! mask the kernel derives from a mark, interfaces appearing or vanishing
//! during a run, and `conf/default`.
//!
//! The starting host has 2..=6 rails with 1..=3 addresses each; the
//! starting live state is empty, or what applying another random config
//! left, plus foreign entries (other protocols). Properties:
//! 1. convergence: after the plan runs, a second diff is empty, and the
//!    foreign entries that were not in the way are untouched;
//! 2. undo (the inverses, newest first) restores the starting routes, rules
//!    (as a set) and sysctls;
//! 3. crash replay: after any prefix of the plan, replaying the whole
//!    journal restores them too;
//! 4. a forward run from a real dump meets no EEXIST (nor any error), and
//!    every `SetSysctl::old` is the value it overwrites;
//! 5. 1-4 with foreign entries in the way and `adopt`.
//!
//! 6. (ignored, FINDING 1) undo keeps the order of overlapping rules of one
//!    priority: it does not, the kernel appends a re-added rule after the
//!    others of its priority; the diff now warns before such a run instead
//!    (`diff::warn_order_after_undo`);
//! 7. 2-4 hold with owned rules that have one selector more than a desired
//!    rule (FINDING 2, fixed: the diff deletes such a rule before the add).
//!
//! PROPTEST_CASES sets the number of cases per property (default 256).
//! Failing inputs are printed (shrunk), not persisted.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::rc::Rc;

use nix::errno::Errno;
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use roce_route::diff::{self, Plan};
use roce_route::executor::{self, Effects, StepFailure, StopFlag};
use roce_route::model::{
    Address, Family, Link, Live, Op, Prefix, RESERVED_TABLES, RawBytes, Route, RouteKey, Rule, SysctlKey,
    rtn, scope,
};
use roce_route::observed::Observed;
use roce_route::plan::{self, Desired};
use roce_route::state::Origins;

/// roce-route's protocol number (the config's default).
const OURS: u8 = 234;
/// Protocols of foreign entries: boot, static, bgp (FRR), openr.
const FOREIGN_PROTOCOLS: [u8; 4] = [3, 4, 186, 99];

// ===========================================================================
// The kernel model
// ===========================================================================

/// Stand-in for one attribute the crate's types do not model, which a dump
/// carries and only the dumped bytes put back (`mtu N` on a route,
/// `ipproto N` on a rule).
type Hidden = Option<u8>;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct RouteEntry {
    route: Route,
    hidden: Hidden,
}

/// A rule as the kernel holds it. `rule.extra_selectors` is always false
/// here: `hidden` is the extra selector, and the dump sets the flag.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct RuleEntry {
    rule: Rule,
    hidden: Hidden,
}

impl RouteEntry {
    fn plain(route: &Route) -> RouteEntry {
        RouteEntry { route: route.clone(), hidden: None }
    }
}

impl RuleEntry {
    fn new(rule: &Rule, hidden: Hidden) -> RuleEntry {
        RuleEntry { rule: Rule { extra_selectors: false, ..rule.clone() }, hidden }
    }
    /// What the dump reports.
    fn dumped(&self) -> Rule {
        Rule { extra_selectors: self.hidden.is_some(), ..self.rule.clone() }
    }
}

#[derive(Clone, Debug)]
enum Encoded {
    Route(RouteEntry),
    Rule(RuleEntry),
}

/// The side map from the model's raw bytes to the entries they encode
/// (shared by every copy of one model, so that bytes dumped from one copy
/// can be sent to another, as a journal's bytes are after a crash).
#[derive(Clone, Debug, Default)]
struct Codec(Rc<RefCell<HashMap<Vec<u8>, Encoded>>>);

impl Codec {
    fn route_bytes(&self, e: &RouteEntry) -> Vec<u8> {
        let raw = format!("RTM_NEWROUTE {e:?}").into_bytes();
        self.0.borrow_mut().insert(raw.clone(), Encoded::Route(e.clone()));
        raw
    }
    fn rule_bytes(&self, e: &RuleEntry) -> Vec<u8> {
        let raw = format!("RTM_NEWRULE {e:?}").into_bytes();
        self.0.borrow_mut().insert(raw.clone(), Encoded::Rule(e.clone()));
        raw
    }
    fn route(&self, raw: &[u8]) -> Result<RouteEntry, Errno> {
        match self.0.borrow().get(raw) {
            Some(Encoded::Route(e)) => Ok(e.clone()),
            _ => Err(Errno::EINVAL),
        }
    }
    fn rule(&self, raw: &[u8]) -> Result<RuleEntry, Errno> {
        match self.0.borrow().get(raw) {
            Some(Encoded::Rule(e)) => Ok(e.clone()),
            _ => Err(Errno::EINVAL),
        }
    }
}

/// What the properties compare: routes, rules (as a set: see
/// `undo_keeps_the_order_of_overlapping_rules` for their order) and
/// sysctls.
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    routes: BTreeMap<RouteKey, RouteEntry>,
    rules: Vec<RuleEntry>,
    sysctls: BTreeMap<(String, SysctlKey), u32>,
}

#[derive(Clone, Debug)]
struct Kernel {
    links: BTreeSet<String>,
    addrs: Vec<Address>,
    routes: BTreeMap<RouteKey, RouteEntry>,
    /// In the kernel's list order: by priority, then by age.
    rules: Vec<RuleEntry>,
    sysctls: BTreeMap<(String, SysctlKey), u32>,
    /// `conf/all/<key>` (read only: roce-route never writes it).
    all: BTreeMap<SysctlKey, u32>,
    codec: Codec,
    /// Every failed step: the command and the errno.
    errors: Vec<(String, Errno)>,
    /// `SetSysctl` steps whose `old` was not the value they overwrote.
    stale_olds: Vec<String>,
}

impl Kernel {
    /// A host with these links and addresses, every managed sysctl of every
    /// link at `sysctl(link, key)`, no route and no rule.
    fn new(links: &[Link], addrs: &[Address], sysctl: impl Fn(&str, SysctlKey) -> u32) -> Kernel {
        let sysctls = links
            .iter()
            .flat_map(|l| SysctlKey::ALL.map(|k| ((l.name.clone(), k), sysctl(&l.name, k))))
            .collect();
        Kernel {
            links: links.iter().map(|l| l.name.clone()).collect(),
            addrs: addrs.to_vec(),
            routes: BTreeMap::new(),
            rules: Vec::new(),
            sysctls,
            all: BTreeMap::new(),
            codec: Codec::default(),
            errors: Vec::new(),
            stale_olds: Vec::new(),
        }
    }

    fn state(&self) -> State {
        let mut rules = self.rules.clone();
        rules.sort();
        State { routes: self.routes.clone(), rules, sysctls: self.sysctls.clone() }
    }

    /// A copy with empty logs.
    fn fresh_copy(&self) -> Kernel {
        Kernel { errors: Vec::new(), stale_olds: Vec::new(), ..self.clone() }
    }

    /// One operation, as src/netlink/ sends it (or sysctl.rs writes it).
    fn apply(&mut self, op: &Op) -> Result<(), Errno> {
        match op {
            Op::AddRoute { route } => self.add_route(RouteEntry::plain(route)),
            Op::ReplaceRoute { new, .. } => self.replace_route(RouteEntry::plain(new)),
            Op::RestoreRoute { old, .. } => {
                let entry = self.codec.route(&old.raw)?;
                assert_eq!(entry.route, old.item, "the test's raw bytes encode the route they go with");
                self.replace_route(entry)
            }
            Op::DelRoute { route, raw } => {
                let request = match raw {
                    Some(raw) => self.codec.route(&raw.0)?,
                    None => {
                        // src/netlink/ looks the interface up to build the message.
                        self.check_oif(route)?;
                        RouteEntry::plain(route)
                    }
                };
                self.del_route(&request)
            }
            Op::AddRule { rule, raw } => {
                let entry = match raw {
                    Some(raw) => self.codec.rule(&raw.0)?,
                    None => RuleEntry::new(rule, None),
                };
                self.add_rule(entry)
            }
            Op::DelRule { rule, raw } => {
                let request = match raw {
                    Some(raw) => self.codec.rule(&raw.0)?,
                    None => RuleEntry::new(rule, None),
                };
                self.del_rule(&request)
            }
            Op::SetSysctl { iface, key, old, new } => {
                let Some(value) = self.sysctls.get_mut(&(iface.clone(), *key)) else {
                    return Err(Errno::ENOENT);
                };
                if *value != *old {
                    self.stale_olds.push(format!("{iface} {}: old {old}, is {value}", key.name()));
                }
                *value = *new;
                Ok(())
            }
        }
    }

    fn check_oif(&self, route: &Route) -> Result<(), Errno> {
        match &route.oif {
            Some(dev) if !self.links.contains(dev) => Err(Errno::ENODEV),
            _ => Ok(()),
        }
    }

    /// What the kernel checks before it adds or replaces a route.
    fn check_route(&self, r: &Route) -> Result<(), Errno> {
        self.check_oif(r)?;
        if let Some(src) = r.prefsrc
            && !self.addrs.iter().any(|a| a.addr.addr == src)
        {
            return Err(Errno::EINVAL); // "Invalid prefsrc address"
        }
        if let Some(gw) = r.gateway {
            let link_local = matches!(gw, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80);
            let on_link =
                self.addrs.iter().any(|a| r.oif.as_ref() == Some(&a.ifname) && a.subnet().contains(&gw));
            if !(r.onlink || link_local || on_link) {
                return Err(Errno::ENETUNREACH); // "Nexthop has invalid gateway"
            }
        }
        Ok(())
    }

    fn add_route(&mut self, e: RouteEntry) -> Result<(), Errno> {
        self.check_route(&e.route)?;
        if self.routes.contains_key(&e.route.key()) {
            return Err(Errno::EEXIST);
        }
        self.routes.insert(e.route.key(), e);
        Ok(())
    }

    fn replace_route(&mut self, e: RouteEntry) -> Result<(), Errno> {
        self.check_route(&e.route)?;
        self.routes.insert(e.route.key(), e);
        Ok(())
    }

    fn del_route(&mut self, req: &RouteEntry) -> Result<(), Errno> {
        let key = req.route.key();
        match self.routes.get(&key) {
            Some(cur) if route_request_matches(req, cur) => {
                self.routes.remove(&key);
                Ok(())
            }
            _ => Err(Errno::ESRCH),
        }
    }

    fn add_rule(&mut self, e: RuleEntry) -> Result<(), Errno> {
        if self.rules.iter().any(|r| rule_exists(&e, r)) {
            return Err(Errno::EEXIST);
        }
        let at = self.rules.iter().take_while(|r| r.rule.priority <= e.rule.priority).count();
        self.rules.insert(at, e);
        Ok(())
    }

    fn del_rule(&mut self, req: &RuleEntry) -> Result<(), Errno> {
        match self.rules.iter().position(|r| rule_find_matches(req, r)) {
            Some(i) => {
                self.rules.remove(i);
                Ok(())
            }
            None => Err(Errno::ENOENT),
        }
    }

    fn live_route(&self, e: &RouteEntry) -> Live<Route> {
        Live { item: e.route.clone(), raw: self.codec.route_bytes(e) }
    }

    fn live_rule(&self, e: &RuleEntry) -> Live<Rule> {
        Live { item: e.dumped(), raw: self.codec.rule_bytes(e) }
    }

    /// What `reconcile::observe` reads: every rule, the routes of the
    /// tables concerned (those `diff::tables_to_read` names plus the
    /// recorded ones) table by table, the desired and recorded sysctls.
    fn dump(&self, desired: &Desired, record: &SimRecord) -> Observed {
        let rules: Vec<Live<Rule>> = self.rules.iter().map(|e| self.live_rule(e)).collect();
        let owned_protocols = BTreeSet::new();
        let mut tables = diff::tables_to_read(desired, &owned_protocols, &rules);
        tables.extend(record.tables.iter().filter(|t| !RESERVED_TABLES.contains(t)));
        let mut routes: Vec<&RouteEntry> =
            self.routes.values().filter(|e| tables.contains(&e.route.table)).collect();
        routes.sort_by_key(|e| (e.route.table, e.route.family));
        let routes = routes.into_iter().map(|e| self.live_route(e)).collect();
        let mut sysctls = BTreeMap::new();
        let wanted = desired.sysctls.iter().map(|s| (s.iface.clone(), s.key));
        for id in wanted.chain(record.origins.keys().cloned()) {
            if let Some(v) = self.sysctls.get(&id) {
                sysctls.insert(id, *v);
            }
        }
        Observed {
            rules,
            routes,
            sysctls,
            all: self.all.clone(),
            origins: record.origins.clone(),
            owned_protocols,
            ..Observed::default()
        }
    }
}

/// The kernel deletes the route under the key only when it matches every
/// attribute the request gives (fib_table_delete).
fn route_request_matches(req: &RouteEntry, cur: &RouteEntry) -> bool {
    let (q, c) = (&req.route, &cur.route);
    (q.kind == rtn::UNSPEC || q.kind == c.kind)
        && (q.scope == scope::NOWHERE || q.scope == c.scope)
        && (q.prefsrc.is_none() || q.prefsrc == c.prefsrc)
        && (q.protocol == 0 || q.protocol == c.protocol)
        && (q.oif.is_none() || q.oif == c.oif)
        && (q.gateway.is_none() || q.gateway == c.gateway)
        && (req.hidden.is_none() || req.hidden == cur.hidden)
}

/// Source, destination and tos as `fib4_rule_compare`/`fib6_rule_compare`
/// see them: only when the request has them.
fn rule_selectors_match(q: &Rule, r: &Rule) -> bool {
    let prefix = |q: Option<Prefix>, r: Option<Prefix>| match q {
        Some(p) if p.len != 0 => r == Some(p),
        _ => true,
    };
    prefix(q.src, r.src) && prefix(q.dst, r.dst) && (q.tos == 0 || q.tos == r.tos)
}

/// `rule_exists()`: what makes an add with NLM_F_EXCL fail with EEXIST.
fn rule_exists(new: &RuleEntry, r: &RuleEntry) -> bool {
    let (n, x) = (&new.rule, &r.rule);
    n.family == x.family
        && n.action == x.action
        && n.table == x.table
        && n.priority == x.priority
        && n.iif == x.iif
        && n.oif == x.oif
        && n.fwmark == x.fwmark
        && n.fwmask == x.fwmask
        && new.hidden == r.hidden
        && n.protocol == x.protocol
        && rule_selectors_match(n, x)
}

/// `rule_find()`: a delete matches on the attributes the request gives
/// (roce-route always gives the priority).
fn rule_find_matches(req: &RuleEntry, r: &RuleEntry) -> bool {
    let (q, x) = (&req.rule, &r.rule);
    q.family == x.family
        && (q.action == 0 || q.action == x.action)
        && (q.table == 0 || q.table == x.table)
        && q.priority == x.priority
        && (q.iif.is_none() || q.iif == x.iif)
        && (q.oif.is_none() || q.oif == x.oif)
        && (q.fwmark.is_none_or(|m| m == 0) || q.fwmark == x.fwmark)
        && (q.fwmask.is_none_or(|m| m == 0) || q.fwmask == x.fwmask)
        && (req.hidden.is_none() || req.hidden == r.hidden)
        && (q.protocol == 0 || q.protocol == x.protocol)
        && rule_selectors_match(q, x)
}

impl Effects for Kernel {
    async fn run(&mut self, op: &Op) -> Result<(), StepFailure> {
        self.apply(op).map_err(|errno| {
            let command = roce_route::render::command(op);
            self.errors.push((command.clone(), errno));
            StepFailure { errno: Some(errno), message: format!("{errno}: {}", errno.desc()) }
        })
    }
}

/// The parts of roce-route's record (`state::Record`) that `observe` uses.
#[derive(Clone, Debug, Default)]
struct SimRecord {
    origins: Origins,
    tables: BTreeSet<u32>,
}

impl SimRecord {
    /// What a committed run of `ops` for `desired` leaves in the record.
    fn commit(&mut self, desired: &Desired, ops: &[Op]) {
        let run = self.origins.run_of(ops);
        self.origins.on_start(&run);
        self.origins.on_commit(&run);
        self.tables.extend(desired.tables());
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

/// Runs `ops` forward with the real executor; every step must succeed.
fn run_ok(k: &mut Kernel, ops: &[Op]) -> Result<(), String> {
    match block_on(executor::run(k, ops, &StopFlag::default(), &mut ())) {
        Ok(n) if n == ops.len() => Ok(()),
        Ok(n) => Err(format!("{n} of {} steps made", ops.len())),
        Err(e) => Err(format!("{e}\nkernel errors: {:?}", k.errors)),
    }
}

/// Replays a journal (the inverses of `ops`) as crash recovery does.
fn undo_ok(k: &mut Kernel, ops: &[Op]) -> Result<(), String> {
    let journal: Vec<Op> = ops.iter().map(Op::inverse).collect();
    let failures = block_on(executor::undo_all(k, &journal));
    if failures.is_empty() { Ok(()) } else { Err(format!("undo failures: {failures:#?}")) }
}

// ===========================================================================
// Hosts, configs and starting states, from plain numbers (so they shrink)
// ===========================================================================

/// The address pools: 198.51.100.0/24, 203.0.113.0/24, 2001:db8:1::/64.
const POOLS: usize = 3;
const VALUES: [&[u32]; 4] = [&[0, 1, 2, 3, 8], &[0, 1, 2], &[0, 1, 2], &[0, 1]];

#[derive(Clone, Debug)]
struct HostSpec {
    /// Per rail, the pool of each of its addresses.
    rails: Vec<Vec<u8>>,
    /// Shifts every host number (rail r, slot j gets 10 + offset + 3r + j).
    offset: u8,
    /// Starting sysctl values, per rail and key (an index into `VALUES`).
    sysctls: Vec<[u8; 4]>,
    /// `conf/all`, if not all 0.
    all: Option<[u8; 4]>,
}

#[derive(Clone, Debug)]
struct IfaceSpec {
    rail: usize,
    /// 0: no `addresses` (take the interface's); 1: listed.
    listed: bool,
    /// Which slots are listed (bit j; none set means slot 0).
    keep: u8,
    /// Which listed ones carry their /len.
    with_len: u8,
    /// Per family (v4, v6): 0 none, 1 in a subnet of the interface, 2 onlink.
    gateways: [u8; 2],
    /// 0 computed, 1: 300 + rail, 2: 400 + rail.
    table: u8,
    /// 0 default, 1: 900, 2: 1100.
    priority: u8,
    /// Per key: 0 unset, else VALUES[key][(n - 1) % len].
    sysctls: [u8; 4],
}

#[derive(Clone, Debug)]
struct ConfigSpec {
    ifaces: Vec<IfaceSpec>,
    /// 0 default, 1: 100, 2: 150.
    table_base: u8,
    /// 0 default (1000), 1: 500, 2: 2000.
    priority: u8,
    sysctls: [u8; 4],
}

/// A foreign entry (a protocol not roce-route's) to put on the host.
#[derive(Clone, Debug)]
struct ForeignSpec {
    /// In the way of the desired state (only with `adopt`).
    conflicting: bool,
    kind: u8,
    a: u8,
    b: u8,
    c: u8,
}

#[derive(Clone, Debug)]
struct CaseSpec {
    host: HostSpec,
    start: Option<ConfigSpec>,
    target: ConfigSpec,
    foreign: Vec<ForeignSpec>,
    /// Rules with roce-route's protocol that add a selector to a desired
    /// rule (`owned_superset`); empty but in `owned_supersets_survive_a_crash`.
    supersets: Vec<(u8, u8)>,
}

fn iface_spec() -> impl Strategy<Value = IfaceSpec> {
    (
        any::<bool>(),
        any::<u8>(),
        any::<u8>(),
        [0u8..3, 0u8..3],
        0u8..3,
        0u8..3,
        [0u8..6, 0u8..6, 0u8..6, 0u8..6],
    )
        .prop_map(|(listed, keep, with_len, gateways, table, priority, sysctls)| IfaceSpec {
            rail: 0,
            listed,
            keep,
            with_len,
            gateways,
            table,
            priority,
            sysctls,
        })
}

fn config_spec(rails: usize) -> impl Strategy<Value = ConfigSpec> {
    let chosen = prop::sample::subsequence((0..rails).collect::<Vec<_>>(), 1..=rails).prop_shuffle();
    (chosen, prop::collection::vec(iface_spec(), 6), 0u8..3, 0u8..3, [0u8..6, 0u8..6, 0u8..6, 0u8..6])
        .prop_map(|(chosen, specs, table_base, priority, sysctls)| ConfigSpec {
            ifaces: chosen.into_iter().zip(specs).map(|(rail, s)| IfaceSpec { rail, ..s }).collect(),
            table_base,
            priority,
            sysctls,
        })
}

fn host_spec() -> impl Strategy<Value = HostSpec> {
    (
        prop::collection::vec(prop::collection::vec(0u8..POOLS as u8, 1..=3), 2..=6),
        0u8..100,
        prop::collection::vec([0u8..6, 0u8..6, 0u8..6, 0u8..6], 6),
        prop::option::weighted(0.2, [0u8..3, 0u8..3, 0u8..3, 0u8..3]),
    )
        .prop_map(|(rails, offset, sysctls, all)| HostSpec { rails, offset, sysctls, all })
}

fn foreign_spec(conflicting: impl Strategy<Value = bool>) -> impl Strategy<Value = ForeignSpec> {
    (conflicting, any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>())
        .prop_map(|(conflicting, kind, a, b, c)| ForeignSpec { conflicting, kind, a, b, c })
}

/// A host, a config to reach, maybe a config applied first, and foreign
/// entries (in the way of the target config when `conflicts`).
fn case_spec(conflicts: bool) -> impl Strategy<Value = CaseSpec> {
    host_spec().prop_flat_map(move |host| {
        let n = host.rails.len();
        let foreign = if conflicts {
            prop::collection::vec(foreign_spec(prop::bool::weighted(0.7)), 1..5).boxed()
        } else {
            prop::collection::vec(foreign_spec(Just(false)), 0..4).boxed()
        };
        (Just(host), prop::option::weighted(0.75, config_spec(n)), config_spec(n), foreign).prop_map(
            |(host, start, target, foreign)| CaseSpec { host, start, target, foreign, supersets: vec![] },
        )
    })
}

fn rail(r: usize) -> String {
    format!("rail{r}")
}

fn pool_addr(pool: u8, host: u32) -> Prefix {
    match pool {
        0 => Prefix::new(IpAddr::V4(Ipv4Addr::new(198, 51, 100, host as u8)), 24),
        1 => Prefix::new(IpAddr::V4(Ipv4Addr::new(203, 0, 113, host as u8)), 24),
        _ => Prefix::new(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, host as u16)), 64),
    }
}

/// The router of each pool's subnet.
fn pool_gateway(pool: u8) -> IpAddr {
    match pool {
        0 => "198.51.100.1".parse().unwrap(),
        1 => "203.0.113.1".parse().unwrap(),
        _ => "2001:db8:1::1".parse().unwrap(),
    }
}

struct Host {
    links: Vec<Link>,
    addrs: Vec<Address>,
}

impl HostSpec {
    fn rail_addrs(&self, r: usize) -> Vec<Prefix> {
        let base = 10 + u32::from(self.offset) + 3 * r as u32;
        self.rails[r].iter().enumerate().map(|(j, pool)| pool_addr(*pool, base + j as u32)).collect()
    }

    fn host(&self) -> Host {
        let links = (0..self.rails.len())
            .map(|r| Link {
                index: r as u32 + 2,
                name: rail(r),
                admin_up: true,
                lower_up: true,
                mac: None,
                link_type: roce_route::model::LinkType::Ether,
            })
            .collect();
        let addrs = (0..self.rails.len())
            .flat_map(|r| {
                self.rail_addrs(r).into_iter().map(move |addr| Address {
                    ifname: rail(r),
                    addr,
                    scope: scope::UNIVERSE,
                    ..Address::default()
                })
            })
            .collect();
        Host { links, addrs }
    }

    /// The host before anything ran.
    fn kernel(&self) -> Kernel {
        let h = self.host();
        let mut k = Kernel::new(&h.links, &h.addrs, |name, key| {
            let r: usize = name.trim_start_matches("rail").parse().unwrap();
            let i = SysctlKey::ALL.iter().position(|k| *k == key).unwrap();
            sysctl_value(i, self.sysctls[r][i]).unwrap_or(0)
        });
        if let Some(all) = self.all {
            k.all = SysctlKey::ALL.into_iter().zip(all.map(u32::from)).collect();
        }
        k
    }
}

/// `VALUES[key][(n - 1) % len]`, or None for 0.
fn sysctl_value(key: usize, n: u8) -> Option<u32> {
    let values = VALUES[key];
    (n > 0).then(|| values[usize::from(n - 1) % values.len()])
}

fn sysctl_lines(out: &mut String, values: &[u8; 4]) {
    for (i, key) in SysctlKey::ALL.iter().enumerate() {
        if let Some(v) = sysctl_value(i, values[i]) {
            out.push_str(&format!("{} = {v}\n", key.name()));
        }
    }
}

impl ConfigSpec {
    /// The config file.
    fn toml(&self, host: &HostSpec) -> String {
        let mut defaults = String::new();
        match self.table_base {
            1 => defaults.push_str("table_base = 100\n"),
            2 => defaults.push_str("table_base = 150\n"),
            _ => {}
        }
        match self.priority {
            1 => defaults.push_str("priority = 500\n"),
            2 => defaults.push_str("priority = 2000\n"),
            _ => {}
        }
        sysctl_lines(&mut defaults, &self.sysctls);
        let mut out = String::new();
        if !defaults.is_empty() {
            out = format!("[defaults]\n{defaults}\n");
        }
        for i in &self.ifaces {
            out.push_str(&format!("[[interface]]\nname = \"{}\"\n", rail(i.rail)));
            let all = host.rail_addrs(i.rail);
            let mut used: Vec<(u8, Prefix)> = host.rails[i.rail].iter().copied().zip(all).collect();
            if i.listed {
                let keep: Vec<_> = (0..used.len()).filter(|j| i.keep & (1 << j) != 0).collect();
                let keep = if keep.is_empty() { vec![0] } else { keep };
                used = keep.iter().map(|j| used[*j]).collect();
                let listed: Vec<String> = keep
                    .iter()
                    .zip(&used)
                    .map(|(j, (_, a))| {
                        if i.with_len & (1 << j) != 0 {
                            format!("\"{a}\"")
                        } else {
                            format!("\"{}\"", a.addr)
                        }
                    })
                    .collect();
                out.push_str(&format!("addresses = [{}]\n", listed.join(", ")));
            }
            let mut gateways = Vec::new();
            for (family, choice) in [Family::V4, Family::V6].into_iter().zip(i.gateways) {
                let Some((pool, _)) = used.iter().find(|(_, a)| a.family() == family) else { continue };
                match (choice, family) {
                    (1, _) => gateways.push(format!("\"{}\"", pool_gateway(*pool))),
                    (2, Family::V4) => gateways.push("{ address = \"192.0.2.1\", onlink = true }".into()),
                    (2, Family::V6) => {
                        gateways.push("{ address = \"2001:db8:ff::1\", onlink = true }".into())
                    }
                    _ => {}
                }
            }
            if !gateways.is_empty() {
                out.push_str(&format!("gateway = [{}]\n", gateways.join(", ")));
            }
            match i.table {
                1 => out.push_str(&format!("table = {}\n", 300 + i.rail)),
                2 => out.push_str(&format!("table = {}\n", 400 + i.rail)),
                _ => {}
            }
            match i.priority {
                1 => out.push_str("priority = 900\n"),
                2 => out.push_str("priority = 1100\n"),
                _ => {}
            }
            sysctl_lines(&mut out, &i.sysctls);
            out.push('\n');
        }
        out
    }
}

/// Parses and plans a config the generator made (valid by construction).
fn desired_of(text: &str, host: &Host) -> Desired {
    let cfg = roce_route::config::parse("model.toml", text)
        .unwrap_or_else(|e| panic!("the generator made an invalid config:\n{e}\n---\n{text}"));
    plan::plan(&cfg, &host.links, &host.addrs)
        .unwrap_or_else(|e| panic!("the generator made a config the host refuses:\n{e}\n---\n{text}"))
}

/// Everything a property needs: the host as it is before the run under
/// test, what roce-route recorded, and the run's plan.
struct Case {
    start: Kernel,
    record: SimRecord,
    desired: Desired,
    plan: Plan,
    adopt: bool,
    /// Foreign entries put on the host that are not in the way.
    bystanders: Vec<Placed>,
    /// For failure messages.
    story: String,
}

#[derive(Clone, Debug)]
enum Placed {
    Route(RouteEntry),
    Rule(RuleEntry),
}

impl Case {
    fn build(spec: &CaseSpec, adopt: bool) -> Case {
        let host = spec.host.host();
        let mut k = spec.host.kernel();
        let mut record = SimRecord::default();
        let mut story = String::new();
        let mut start_tables = BTreeSet::new();
        if let Some(start) = &spec.start {
            let text = start.toml(&spec.host);
            let d0 = desired_of(&text, &host);
            let p0 = diff::diff(&d0, &k.dump(&d0, &record), false);
            assert!(p0.conflicts.is_empty(), "a fresh host has no conflict: {:?}", p0.conflicts);
            run_ok(&mut k, &p0.ops).unwrap_or_else(|e| panic!("applying the first config: {e}\n{text}"));
            record.commit(&d0, &p0.ops);
            start_tables = d0.tables();
            story.push_str(&format!("--- first config (applied)\n{text}"));
        }
        let text = spec.target.toml(&spec.host);
        let desired = desired_of(&text, &host);
        story.push_str(&format!("--- config\n{text}"));
        let mut bystanders = Vec::new();
        for f in &spec.foreign {
            let placed = if f.conflicting {
                place_conflicting(&mut k, f, &desired)
            } else {
                place_bystander(&mut k, f, &desired, &start_tables).inspect(|p| bystanders.push(p.clone()))
            };
            if let Some(p) = placed {
                story.push_str(&format!(
                    "--- foreign ({}): {p:?}\n",
                    if f.conflicting { "in the way" } else { "aside" }
                ));
            }
        }
        for (a, b) in &spec.supersets {
            if let Some(p) = place_owned_superset(&mut k, *a, *b, &desired) {
                story.push_str(&format!("--- owned, with an extra selector: {p:?}\n"));
            }
        }
        let k = k.fresh_copy();
        let plan = diff::diff(&desired, &k.dump(&desired, &record), adopt);
        story.push_str(&format!("--- ops\n{}", roce_route::render::script(&[], &plan.ops)));
        Case { start: k, record, desired, plan, adopt, bystanders, story }
    }

    /// The second diff, after the run, with the record the run left.
    fn rediff(&self, k: &Kernel) -> Plan {
        let mut record = self.record.clone();
        record.commit(&self.desired, &self.plan.ops);
        diff::diff(&self.desired, &k.dump(&self.desired, &record), self.adopt)
    }
}

fn pick<T: Clone>(items: &[T], n: u8) -> Option<T> {
    (!items.is_empty()).then(|| items[usize::from(n) % items.len()].clone())
}

fn foreign_protocol(n: u8) -> u8 {
    FOREIGN_PROTOCOLS[usize::from(n) % FOREIGN_PROTOCOLS.len()]
}

/// Sometimes an attribute the crate does not model.
fn hidden(n: u8) -> Hidden {
    n.is_multiple_of(3).then_some(n / 3)
}

/// A priority, often roce-route's own default.
fn priority(n: u8) -> u32 {
    [1000, 900, 1100, 32000, 500, 2000][usize::from(n) % 6]
}

/// `10.<n>.0.0/16 dev <dev> table <table> proto <p> scope link`.
fn side_route(table: u32, n: u8, dev: &str, protocol: u8) -> Route {
    Route {
        family: Family::V4,
        table,
        dst: Prefix::new(IpAddr::V4(Ipv4Addr::new(10, n, 0, 0)), 16),
        tos: 0,
        metric: 0,
        protocol,
        scope: scope::LINK,
        kind: rtn::UNICAST,
        oif: Some(dev.to_string()),
        gateway: None,
        prefsrc: None,
        onlink: false,
    }
}

fn insert_route(k: &mut Kernel, e: RouteEntry) -> Option<Placed> {
    k.add_route(e.clone()).ok().map(|()| Placed::Route(e))
}

fn insert_rule(k: &mut Kernel, e: RuleEntry) -> Option<Placed> {
    k.add_rule(e.clone()).ok().map(|()| Placed::Rule(e))
}

/// A foreign entry that is not in the way of `desired`: in a table the
/// config does not use, or a rule that selects none of its sources.
fn place_bystander(
    k: &mut Kernel,
    f: &ForeignSpec,
    desired: &Desired,
    start_tables: &BTreeSet<u32>,
) -> Option<Placed> {
    let p = foreign_protocol(f.b);
    let dev = rail(usize::from(f.a) % k.links.len());
    let sources: Vec<IpAddr> = desired.source_addresses().into_iter().collect();
    match f.kind % 6 {
        // In a table nobody reads.
        0 => insert_route(k, RouteEntry { route: side_route(50, f.a, &dev, p), hidden: hidden(f.c) }),
        // In a table of the first config that this one dropped (read, as recorded).
        1 => {
            let stale: Vec<u32> = start_tables.difference(&desired.tables()).copied().collect();
            let table = pick(&stale, f.c).unwrap_or(50);
            insert_route(k, RouteEntry { route: side_route(table, f.a, &dev, p), hidden: hidden(f.c) })
        }
        // `from <subnet>`: not a host address of ours.
        2 => {
            let net = pool_addr(f.a % POOLS as u8, 0).network();
            let rule = Rule { src: Some(net), ..Rule::lookup(net.family(), priority(f.c), 50, p) };
            insert_rule(k, RuleEntry::new(&rule, hidden(f.b)))
        }
        // `not from <our source>`.
        3 => {
            let src = Prefix::host(pick(&sources, f.a)?);
            let rule =
                Rule { src: Some(src), invert: true, ..Rule::lookup(src.family(), priority(f.c), 60, p) };
            insert_rule(k, RuleEntry::new(&rule, None))
        }
        // `fwmark N`.
        4 => {
            let rule =
                Rule { fwmark: Some(u32::from(f.a) + 1), ..Rule::lookup(Family::V4, priority(f.c), 70, p) };
            insert_rule(k, RuleEntry::new(&rule, hidden(f.b)))
        }
        // `from <an address that is not one of our sources>`.
        _ => {
            let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10 + f.a % 200));
            let rule = Rule { src: Some(Prefix::host(ip)), ..Rule::lookup(Family::V4, priority(f.c), 80, p) };
            insert_rule(k, RuleEntry::new(&rule, hidden(f.b)))
        }
    }
}

/// A foreign entry in the way of `desired`: a route under a desired key
/// (overwriting whatever is there, as `ip route replace` does), a route in
/// a desired table, or a rule that selects a desired source.
fn place_conflicting(k: &mut Kernel, f: &ForeignSpec, desired: &Desired) -> Option<Placed> {
    let p = foreign_protocol(f.b);
    match f.kind % 3 {
        0 => {
            let want = pick(&desired.routes, f.a)?;
            let e = RouteEntry { route: Route { protocol: p, ..want }, hidden: hidden(f.c) };
            k.replace_route(e.clone()).ok().map(|()| Placed::Route(e))
        }
        1 => {
            let i = pick(&desired.interfaces, f.a)?;
            insert_route(k, RouteEntry { route: side_route(i.table, f.c, &i.name, p), hidden: None })
        }
        _ => {
            let i = pick(&desired.interfaces, f.a)?;
            let src = Prefix::host(pick(&i.addresses, f.c)?.addr);
            let (table, prio) =
                if f.c.is_multiple_of(2) { (77, priority(f.b)) } else { (i.table, i.priority) };
            let rule = Rule { src: Some(src), ..Rule::lookup(src.family(), prio, table, p) };
            insert_rule(k, RuleEntry::new(&rule, hidden(f.b / 4)))
        }
    }
}

/// A rule with roce-route's protocol equal to a desired rule plus one
/// selector roce-route does not set (left by hand, or by another version):
/// the diff deletes it, as it is owned and not desired.
fn place_owned_superset(k: &mut Kernel, a: u8, b: u8, desired: &Desired) -> Option<Placed> {
    let want = pick(&desired.rules, a)?;
    let (rule, hidden) = match b % 5 {
        0 => (want, Some(6)), // ipproto tcp
        1 => (Rule { fwmark: Some(1), ..want }, None),
        2 => (Rule { iif: Some("lo".into()), ..want }, None),
        3 => (Rule { dst: Some(Prefix::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8)), ..want }, None),
        _ => (Rule { invert: true, ..want }, None),
    };
    if rule.dst.is_some_and(|d| d.family() != rule.family) {
        return None;
    }
    insert_rule(k, RuleEntry::new(&rule, hidden))
}

// ===========================================================================
// The properties
// ===========================================================================

fn config() -> ProptestConfig {
    // PROPTEST_CASES is read by the default.
    ProptestConfig { failure_persistence: None, ..ProptestConfig::default() }
}

/// 1. After the run, the same desired state diffs to nothing, and the
///    foreign entries that were not in the way are still there.
fn check_convergence(c: &Case) -> Result<(), TestCaseError> {
    if !c.adopt {
        prop_assert!(c.plan.conflicts.is_empty(), "unexpected conflicts {:?}\n{}", c.plan.conflicts, c.story);
    }
    let mut k = c.start.fresh_copy();
    run_ok(&mut k, &c.plan.ops).map_err(|e| TestCaseError::fail(format!("{e}\n{}", c.story)))?;
    let again = c.rediff(&k);
    prop_assert!(
        again.in_sync(),
        "not converged: ops {:#?}\nconflicts {:#?}\n{}",
        again.ops,
        again.conflicts,
        c.story
    );
    for b in &c.bystanders {
        let there = match b {
            Placed::Route(e) => k.routes.get(&e.route.key()) == Some(e),
            Placed::Rule(e) => k.rules.contains(e),
        };
        prop_assert!(there, "a foreign entry out of the way was changed: {b:?}\n{}", c.story);
    }
    Ok(())
}

/// 2. Undoing every step, newest first, gives back the starting host.
fn check_undo(c: &Case) -> Result<(), TestCaseError> {
    let mut k = c.start.fresh_copy();
    run_ok(&mut k, &c.plan.ops).map_err(|e| TestCaseError::fail(format!("{e}\n{}", c.story)))?;
    undo_ok(&mut k, &c.plan.ops).map_err(|e| TestCaseError::fail(format!("{e}\n{}", c.story)))?;
    prop_assert_eq!(k.state(), c.start.state(), "undo did not restore the start\n{}", c.story);
    Ok(())
}

/// 3. A crash after any number of steps, then recovery replaying the whole
///    journal (written before step 0), gives back the starting host.
fn check_crash_replay(c: &Case) -> Result<(), TestCaseError> {
    for made in 0..=c.plan.ops.len() {
        let mut k = c.start.fresh_copy();
        run_ok(&mut k, &c.plan.ops[..made]).map_err(|e| TestCaseError::fail(format!("{e}\n{}", c.story)))?;
        undo_ok(&mut k, &c.plan.ops)
            .map_err(|e| TestCaseError::fail(format!("crash after {made} steps: {e}\n{}", c.story)))?;
        prop_assert_eq!(
            k.state(),
            c.start.state(),
            "crash after {} steps: the replay did not restore the start\n{}",
            made,
            c.story
        );
    }
    Ok(())
}

/// 4. A forward run from a real dump meets no EEXIST (nor any other error),
///    and every sysctl step's `old` is the value it overwrites.
fn check_no_eexist(c: &Case) -> Result<(), TestCaseError> {
    let mut k = c.start.fresh_copy();
    let result = run_ok(&mut k, &c.plan.ops);
    let eexist: Vec<_> = k.errors.iter().filter(|(_, e)| *e == Errno::EEXIST).collect();
    prop_assert!(eexist.is_empty(), "EEXIST during the run: {eexist:?}\n{}", c.story);
    result.map_err(|e| TestCaseError::fail(format!("{e}\n{}", c.story)))?;
    prop_assert!(k.stale_olds.is_empty(), "sysctl steps with a wrong `old`: {:?}\n{}", k.stale_olds, c.story);
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn convergence(spec in case_spec(false)) {
        check_convergence(&Case::build(&spec, false))?;
    }

    #[test]
    fn undo_restores_the_start(spec in case_spec(false)) {
        check_undo(&Case::build(&spec, false))?;
    }

    #[test]
    fn crash_replay_restores_the_start(spec in case_spec(false)) {
        check_crash_replay(&Case::build(&spec, false))?;
    }

    #[test]
    fn forward_run_never_adds_what_exists(spec in case_spec(false)) {
        check_no_eexist(&Case::build(&spec, false))?;
    }

    /// 5. Foreign entries in the way, adopted: all four properties hold.
    #[test]
    fn adopted_conflicts_converge_and_undo(spec in case_spec(true)) {
        let c = Case::build(&spec, true);
        check_convergence(&c)?;
        check_undo(&c)?;
        check_crash_replay(&c)?;
        check_no_eexist(&c)?;
    }
}

// ===========================================================================
// The model itself, and one scenario by hand
// ===========================================================================

fn two_rail_kernel() -> Kernel {
    let links: Vec<Link> = (0..2)
        .map(|r| Link {
            index: r + 2,
            name: rail(r as usize),
            admin_up: true,
            lower_up: true,
            mac: None,
            link_type: roce_route::model::LinkType::Ether,
        })
        .collect();
    let addrs: Vec<Address> = (0..2)
        .map(|r| Address {
            ifname: rail(r),
            addr: Prefix::new(format!("198.51.100.{}", 10 + r).parse().unwrap(), 24),
            ..Address::default()
        })
        .collect();
    Kernel::new(&links, &addrs, |_, _| 0)
}

fn errno(k: &mut Kernel, op: &Op) -> Option<Errno> {
    block_on(k.run(op)).err().and_then(|f| f.errno)
}

/// The model against facts from netlink-notes.md.
#[test]
fn the_model_answers_as_the_kernel_does() {
    let mut k = two_rail_kernel();
    let net: Prefix = Prefix::new("198.51.100.0".parse().unwrap(), 24);
    let route = Route::connected(100, net, "rail0", "198.51.100.10".parse().unwrap(), OURS);
    let rule = Rule::source(1000, "198.51.100.10".parse().unwrap(), 100, OURS);

    // Adding an existing route or rule: EEXIST; replace succeeds.
    assert_eq!(errno(&mut k, &Op::AddRoute { route: route.clone() }), None);
    assert_eq!(errno(&mut k, &Op::AddRoute { route: route.clone() }), Some(Errno::EEXIST));
    let live = Live { item: route.clone(), raw: vec![] };
    assert_eq!(errno(&mut k, &Op::ReplaceRoute { old: live, new: route.clone() }), None);
    assert_eq!(errno(&mut k, &Op::AddRule { rule: rule.clone(), raw: None }), None);
    assert_eq!(errno(&mut k, &Op::AddRule { rule: rule.clone(), raw: None }), Some(Errno::EEXIST));

    // Deleting a missing route: ESRCH (also when only an attribute differs);
    // a missing rule: ENOENT (deleting it twice).
    let other = Route { prefsrc: Some("198.51.100.11".parse().unwrap()), ..route.clone() };
    assert_eq!(errno(&mut k, &Op::DelRoute { route: other, raw: None }), Some(Errno::ESRCH));
    assert_eq!(errno(&mut k, &Op::DelRoute { route: route.clone(), raw: None }), None);
    assert_eq!(errno(&mut k, &Op::DelRoute { route: route.clone(), raw: None }), Some(Errno::ESRCH));
    assert_eq!(errno(&mut k, &Op::DelRule { rule: rule.clone(), raw: None }), None);
    assert_eq!(errno(&mut k, &Op::DelRule { rule: rule.clone(), raw: None }), Some(Errno::ENOENT));

    // A missing interface: ENODEV for a route, ENOENT for a sysctl.
    let gone = Route { oif: Some("rail9".into()), prefsrc: None, ..route.clone() };
    assert_eq!(errno(&mut k, &Op::AddRoute { route: gone }), Some(Errno::ENODEV));
    let sysctl = Op::SetSysctl { iface: "rail9".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 };
    assert_eq!(errno(&mut k, &sysctl), Some(Errno::ENOENT));

    // A gateway outside the interface's subnets: errno 101; a non-local src: 22.
    let far = Route::default_via(100, "203.0.113.1".parse().unwrap(), "rail0", OURS);
    assert_eq!(errno(&mut k, &Op::AddRoute { route: far.clone() }), Some(Errno::ENETUNREACH));
    assert_eq!(errno(&mut k, &Op::AddRoute { route: Route { onlink: true, ..far } }), None);
    let bad_src = Route { prefsrc: Some("198.51.100.99".parse().unwrap()), ..route.clone() };
    assert_eq!(errno(&mut k, &Op::AddRoute { route: bad_src }), Some(Errno::EINVAL));

    // A rule delete matches the attributes it gives, first in list order.
    let marked = RuleEntry::new(&Rule { fwmark: Some(1), ..rule.clone() }, None);
    k.add_rule(marked.clone()).unwrap();
    assert_eq!(errno(&mut k, &Op::DelRule { rule: rule.clone(), raw: None }), None);
    assert!(!k.rules.contains(&marked), "`ip rule del` without fwmark deletes the marked rule");
}

/// A 4-rail config (rail r has 198.51.100.{10 + 3r}/24, rail3 a gateway),
/// then the same config without rail3: rail3's rule goes, then its two
/// routes (rules before routes, so no rule points to an emptied table), and
/// its sysctls go back to the values recorded before the first apply.
#[test]
fn dropping_a_rail_deletes_its_entries_and_restores_its_sysctls() {
    let spec = HostSpec { rails: vec![vec![0]; 4], offset: 0, sysctls: vec![[0; 4]; 6], all: None };
    let host = spec.host();
    let four = "[[interface]]\nname = \"rail0\"\n[[interface]]\nname = \"rail1\"\n\
                [[interface]]\nname = \"rail2\"\n[[interface]]\nname = \"rail3\"\ngateway = \"198.51.100.1\"\n";
    let three = four.split("[[interface]]\nname = \"rail3\"").next().unwrap();
    let mut k = spec.kernel();
    let mut record = SimRecord::default();

    let d4 = desired_of(four, &host);
    let p4 = diff::diff(&d4, &k.dump(&d4, &record), false);
    // 5 routes (4 connected, 1 default), 4 rules, 2 sysctls each.
    assert_eq!(p4.ops.len(), 5 + 4 + 8, "{:#?}", p4.ops);
    run_ok(&mut k, &p4.ops).unwrap();
    record.commit(&d4, &p4.ops);
    let applied = k.fresh_copy();

    let d3 = desired_of(three, &host);
    let p3 = diff::diff(&d3, &k.dump(&d3, &record), false);
    let src: IpAddr = "198.51.100.19".parse().unwrap(); // 10 + 3 * 3
    let net = Prefix::new(src, 24).network();
    let rule = Rule::source(1000, src, 103, OURS);
    let connected = Route::connected(103, net, "rail3", src, OURS);
    let default = Route::default_via(103, "198.51.100.1".parse().unwrap(), "rail3", OURS);
    let raw_rule = RawBytes(k.codec.rule_bytes(&RuleEntry::new(&rule, None)));
    let raw = |r: &Route| RawBytes(k.codec.route_bytes(&RouteEntry::plain(r)));
    let set = |key, old, new| Op::SetSysctl { iface: "rail3".into(), key, old, new };
    assert_eq!(
        p3.ops,
        vec![
            Op::DelRule { rule, raw: Some(raw_rule) },
            Op::DelRoute { route: default.clone(), raw: Some(raw(&default)) },
            Op::DelRoute { route: connected.clone(), raw: Some(raw(&connected)) },
            set(SysctlKey::ArpIgnore, 1, 0),
            set(SysctlKey::ArpAnnounce, 2, 0),
        ]
    );
    assert!(p3.conflicts.is_empty());

    run_ok(&mut k, &p3.ops).unwrap();
    assert!(k.routes.values().all(|e| e.route.table != 103) && k.rules.iter().all(|e| e.rule.table != 103));
    assert_eq!(k.sysctls[&("rail3".to_string(), SysctlKey::ArpIgnore)], 0);
    let mut after = record.clone();
    after.commit(&d3, &p3.ops);
    assert!(diff::diff(&d3, &k.dump(&d3, &after), false).in_sync());
    undo_ok(&mut k, &p3.ops).unwrap();
    assert_eq!(k.state(), applied.state(), "undo gives back the 4-rail host");
}

/// The generator reaches every kind of step, in both scenarios (or the
/// properties could pass by testing little): counted over 200 fixed-seed
/// cases each.
#[test]
fn the_generator_reaches_every_kind_of_step() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    for adopt in [false, true] {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        let strategy = case_spec(adopt);
        for _ in 0..200 {
            let c = Case::build(&strategy.new_tree(&mut runner).unwrap().current(), adopt);
            let configured: BTreeSet<&str> = c.desired.interfaces.iter().map(|i| i.name.as_str()).collect();
            for op in &c.plan.ops {
                *seen.entry(op.kind()).or_default() += 1;
                let what = match op {
                    Op::ReplaceRoute { old, .. } if old.item.protocol != OURS => "replace a foreign route",
                    Op::DelRoute { route, .. } if route.protocol != OURS => "delete a foreign route",
                    Op::DelRule { rule, .. } if rule.protocol != OURS => "delete a foreign rule",
                    Op::SetSysctl { iface, .. } if !configured.contains(iface.as_str()) => "restore a sysctl",
                    _ => continue,
                };
                *seen.entry(what).or_default() += 1;
            }
            *seen.entry("conflict").or_default() += c.plan.conflicts.len();
            *seen.entry("foreign entry aside").or_default() += c.bystanders.len();
        }
        let mut wanted = vec![
            "add_route",
            "replace_route",
            "del_route",
            "add_rule",
            "del_rule",
            "set_sysctl",
            "restore a sysctl",
            "foreign entry aside",
        ];
        if adopt {
            wanted.extend([
                "conflict",
                "replace a foreign route",
                "delete a foreign route",
                "delete a foreign rule",
            ]);
        }
        for w in wanted {
            assert!(seen.get(w).copied().unwrap_or(0) >= 5, "adopt={adopt}: too few `{w}`: {seen:#?}");
        }
    }
}

// ===========================================================================
// Findings: properties that fail on the current code (see their reasons)
// ===========================================================================

/// Whether every packet `y`'s selectors take is also taken by `x`'s
/// (ignoring `x`'s `not`).
fn implies(y: &RuleEntry, x: &RuleEntry) -> bool {
    let within = |a: Option<Prefix>, b: Option<Prefix>| match (a, b) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(b)) => b.len <= a.len && b.contains(&a.addr),
    };
    let (y, x, xh) = (&y.rule, &x.rule, x.hidden);
    within(y.src, x.src)
        && within(y.dst, x.dst)
        && (x.iif.is_none() || x.iif == y.iif)
        && (x.oif.is_none() || x.oif == y.oif)
        && (x.fwmark.is_none() || x.fwmark == y.fwmark)
        && xh.is_none()
}

/// Whether two rules can select the same packet (conservatively: only
/// disjoint source or destination networks, a different iif, oif or
/// fwmark, or a `not` excluding all the other takes, tell them apart).
fn overlap(x: &RuleEntry, y: &RuleEntry) -> bool {
    let disjoint = |a: Option<Prefix>, b: Option<Prefix>| match (a, b) {
        (Some(a), Some(b)) => {
            !((a.len <= b.len && a.contains(&b.addr)) || (b.len <= a.len && b.contains(&a.addr)))
        }
        _ => false,
    };
    let differ = |a: &Option<String>, b: &Option<String>| a.is_some() && b.is_some() && a != b;
    let (xr, yr) = (&x.rule, &y.rule);
    if xr.family != yr.family {
        return false;
    }
    match (xr.invert, yr.invert) {
        (false, false) => {
            !(disjoint(xr.src, yr.src)
                || disjoint(xr.dst, yr.dst)
                || differ(&xr.iif, &yr.iif)
                || differ(&xr.oif, &yr.oif)
                || (xr.fwmark.is_some() && yr.fwmark.is_some() && xr.fwmark != yr.fwmark))
        }
        (true, false) => !implies(y, x),
        (false, true) => !implies(x, y),
        (true, true) => true,
    }
}

/// The kernel tries rules of one priority in list order: of two rules
/// that can select the same packet, the first wins. Every such pair of the
/// start must be in the same order at the end.
fn check_rule_order(start: &Kernel, end: &Kernel) -> Result<(), String> {
    let at = |e: &RuleEntry| end.rules.iter().position(|r| r == e);
    for (i, x) in start.rules.iter().enumerate() {
        for y in &start.rules[i + 1..] {
            if x.rule.priority != y.rule.priority || !overlap(x, y) {
                continue;
            }
            if let (Some(px), Some(py)) = (at(x), at(y))
                && px > py
            {
                return Err(format!(
                    "priority {}: `{}` came before `{}`, now after it",
                    x.rule.priority,
                    roce_route::render::rule_line(&x.dumped()),
                    roce_route::render::rule_line(&y.dumped())
                ));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// 6. Undo and crash replay keep the order of rules of one priority.
    #[test]
    #[ignore = "FINDING 1: undo re-adds a deleted rule at the end of its priority, so an overlapping \
                rule of the same priority that came after it now comes first (see the doc comment)"]
    fn undo_keeps_the_order_of_overlapping_rules(spec in case_spec(false)) {
        let c = Case::build(&spec, false);
        for made in 0..=c.plan.ops.len() {
            let mut k = c.start.fresh_copy();
            run_ok(&mut k, &c.plan.ops[..made]).map_err(TestCaseError::fail)?;
            undo_ok(&mut k, &c.plan.ops).map_err(TestCaseError::fail)?;
            check_rule_order(&c.start, &k)
                .map_err(|e| TestCaseError::fail(format!("crash after {made} steps: {e}\n{}", c.story)))?;
        }
    }

    /// 7. Crash replay with an owned rule that carries one more selector
    ///    than a desired rule. One: two such owned rules that differ only in
    ///    selectors the kernel treats as wildcards (or in `not`, which it
    ///    never compares) cannot be told apart by a delete or an add at
    ///    all, in any order; that stays a documented limit.
    #[test]
    fn owned_supersets_survive_a_crash(
        spec in case_spec(false),
        supersets in prop::collection::vec((any::<u8>(), any::<u8>()), 1..2),
    ) {
        let c = Case::build(&CaseSpec { supersets, ..spec }, false);
        check_no_eexist(&c)?;
        check_undo(&c)?;
        check_crash_replay(&c)?;
    }
}

/// One rail per entry of `pools`, with every sysctl at 0.
fn small_host(pools: Vec<Vec<u8>>) -> (HostSpec, Host) {
    let n = pools.len();
    let spec = HostSpec { rails: pools, offset: 0, sysctls: vec![[0; 4]; n], all: None };
    let host = spec.host();
    (spec, host)
}

/// Effects that fail step `fail` (0-based) with EPERM and pass the rest
/// to the model.
struct FailAt<'a> {
    k: &'a mut Kernel,
    fail: usize,
    calls: usize,
}

impl Effects for FailAt<'_> {
    async fn run(&mut self, op: &Op) -> Result<(), StepFailure> {
        self.calls += 1;
        if self.calls == self.fail + 1 {
            return Err(StepFailure { errno: Some(Errno::EPERM), message: "injected".into() });
        }
        self.k.run(op).await
    }
}

/// FINDING 1, smallest case. rail0 (198.51.100.10) and rail1
/// (198.51.100.13) applied at priority 1000, then a foreign
/// `from 198.51.100.0/24 lookup 50 pref 1000 proto static`; the config
/// drops rail1. Undoing the run re-adds rail1's rule at the END of
/// priority 1000, after the foreign rule (the kernel appends a new rule
/// after every rule of its priority): traffic from 198.51.100.13 now tries
/// table 50 first. Checked on kernel 6.18 with `ip rule`.
#[test]
#[ignore = "FINDING 1 (a known limit, warned by apply): undo re-adds rail1's rule behind a foreign rule of the same priority"]
fn finding_1_undo_moves_a_rule_behind_a_foreign_rule_of_its_priority() {
    let (spec, host) = small_host(vec![vec![0], vec![0]]);
    let two = "[[interface]]\nname = \"rail0\"\n[[interface]]\nname = \"rail1\"\n";
    let one = "[[interface]]\nname = \"rail0\"\n";
    let mut k = spec.kernel();
    let mut record = SimRecord::default();
    let d2 = desired_of(two, &host);
    let p2 = diff::diff(&d2, &k.dump(&d2, &record), false);
    run_ok(&mut k, &p2.ops).unwrap();
    record.commit(&d2, &p2.ops);
    let net = Prefix::new("198.51.100.0".parse().unwrap(), 24);
    let foreign = Rule { src: Some(net), ..Rule::lookup(Family::V4, 1000, 50, 4) };
    k.add_rule(RuleEntry::new(&foreign, None)).unwrap();
    let start = k.fresh_copy();

    let d1 = desired_of(one, &host);
    let p1 = diff::diff(&d1, &k.dump(&d1, &record), false);
    assert!(p1.conflicts.is_empty());
    run_ok(&mut k, &p1.ops).unwrap();
    undo_ok(&mut k, &p1.ops).unwrap();
    assert_eq!(k.state(), start.state(), "the same rules, routes and sysctls");
    check_rule_order(&start, &k).unwrap();
}

/// FINDING 2, smallest case. One rail (198.51.100.10), nothing applied,
/// and a rule with roce-route's protocol that has one selector more than
/// the desired one: `from 198.51.100.10 iif lo lookup 100 pref 1000
/// proto 234`. The plan adds `from 198.51.100.10 lookup 100 pref 1000
/// proto 234` (R), then deletes the iif rule (F). R's undo is a delete
/// that gives R's selectors, and the kernel deletes the FIRST rule that
/// has them: F, which is older. So (a) a rollback after a failure between
/// the two steps, and (b) crash recovery replaying the journal (even
/// before step 0), delete F and keep R, and then report the host as it was.
/// Checked on kernel 6.18 with `ip rule`. Fixed: the diff now deletes such
/// a rule before the add (`diff::kernel_may_confuse`), so no undo can meet
/// both rules.
#[test]
fn finding_2_undo_deletes_an_owned_rule_with_one_more_selector() {
    let (spec, host) = small_host(vec![vec![0]]);
    let d = desired_of("[[interface]]\nname = \"rail0\"\n", &host);
    let mut start = spec.kernel();
    let extra = Rule { iif: Some("lo".into()), ..d.rules[0].clone() };
    start.add_rule(RuleEntry::new(&extra, None)).unwrap();
    let record = SimRecord::default();
    let plan = diff::diff(&d, &start.dump(&d, &record), false);
    let kinds: Vec<_> = plan.ops.iter().map(Op::kind).collect();
    assert_eq!(kinds, ["add_route", "del_rule", "add_rule", "set_sysctl", "set_sysctl"]);

    // (b) a crash before the first step, then recovery.
    let mut crashed = start.fresh_copy();
    undo_ok(&mut crashed, &plan.ops).unwrap();

    // (a) step 3 (the add of the desired rule) fails; the executor rolls back.
    let mut rolled_back = start.fresh_copy();
    let mut fx = FailAt { k: &mut rolled_back, fail: 2, calls: 0 };
    let err = block_on(executor::run(&mut fx, &plan.ops, &StopFlag::default(), &mut ())).unwrap_err();
    assert!(err.to_string().contains("the host is as it was before"), "{err}");

    let has_extra = |k: &Kernel| k.rules.iter().any(|e| e.rule == extra);
    assert_eq!(
        (has_extra(&crashed), has_extra(&rolled_back), crashed.state() == start.state()),
        (true, true, true),
        "the iif rule is still there after (crash recovery, rollback)"
    );
    assert_eq!(rolled_back.state(), start.state());
}

/// FINDING 2, second face. An owned `from 198.51.100.10 to 10.0.0.0/8
/// lookup 100 pref 1000 proto 234` makes the add of the desired rule fail
/// with EEXIST: the kernel's duplicate check compares the destination only
/// when the NEW rule has one. The run rolls back cleanly, but the error is
/// one `TxError::is_race` calls a race, and every retry fails the same way.
/// Checked on kernel 6.18 with `ip rule`.
#[test]
fn finding_2_an_owned_rule_with_a_destination_blocks_the_add() {
    let (spec, host) = small_host(vec![vec![0]]);
    let d = desired_of("[[interface]]\nname = \"rail0\"\n", &host);
    let mut k = spec.kernel();
    let to = Prefix::new("10.0.0.0".parse().unwrap(), 8);
    k.add_rule(RuleEntry::new(&Rule { dst: Some(to), ..d.rules[0].clone() }, None)).unwrap();
    let plan = diff::diff(&d, &k.dump(&d, &SimRecord::default()), false);
    run_ok(&mut k, &plan.ops).unwrap();
}
