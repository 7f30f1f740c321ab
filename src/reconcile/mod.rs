//! observe -> plan -> diff: what `apply`, `apply --dry-run` and `check`
//! share (and what `watch` will loop over).
//!
//! `plan` and `diff` are pure; this module reads what they need from the
//! host (links, addresses, rules, the routes of the tables concerned,
//! sysctls) and from the record of earlier runs.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv6Addr};

use anyhow::{Context, Result};

use crate::config::Config;
use crate::diff::{self, Plan};
use crate::error::Error;
use crate::model::{RESERVED_TABLES, SysctlKey};
use crate::netlink::Netlink;
use crate::observed::Observed;
use crate::plan::{self, Desired};
use crate::state::Record;
use crate::sysctl;

pub mod tables;

/// Plans `cfg` against the live host and diffs it with what is there.
pub async fn reconcile(
    nl: &Netlink,
    cfg: &Config,
    adopt: bool,
    record: &Record,
) -> Result<(Desired, Plan), Error> {
    let (desired, plan, _) = reconcile_reading(nl, cfg, adopt, record, None).await?;
    Ok((desired, plan))
}

/// What a reconcile read of the host: what `verify` takes again of what
/// no change touched.
pub struct Reading {
    observed: Observed,
    /// Every table whose routes were read (also those found empty).
    tables: BTreeSet<u32>,
}

impl Reading {
    /// The host's addresses, as read (`read_addresses`: every IPv4 one,
    /// another link's IPv6 one only when looked for, another link's named
    /// only where the run compares it).
    pub fn addresses(&self) -> &[crate::model::Address] {
        &self.observed.addresses
    }

    /// The tables read that `touched` leaves alone, with their routes as
    /// read. Pure.
    fn untouched(&self, touched: &Touched) -> tables::TablesRead {
        tables::TablesRead {
            tables: self.tables.difference(&touched.tables).copied().collect(),
            routes: (self.observed.routes.iter())
                .filter(|r| !touched.tables.contains(&r.item.table))
                .cloned()
                .collect(),
        }
    }
}

/// Addresses a caller read an instant before with `read_addresses`.
#[derive(Clone, Debug)]
pub struct Given {
    pub addrs: Vec<crate::model::Address>,
    /// Read with the record's `discovered` (watch, under its lock); not:
    /// before the record was read (apply's DAD wait).
    pub with_record: bool,
}

/// `reconcile`, with what it read; with `given`, the addresses the caller
/// read an instant before (under the same lock) instead of a dump.
pub async fn reconcile_reading(
    nl: &Netlink,
    cfg: &Config,
    adopt: bool,
    record: &Record,
    given: Option<Given>,
) -> Result<(Desired, Plan, Reading), Error> {
    let addrs = match given {
        // Read before the record: without another link's IPv6 address
        // that the last apply found on a rail, and without the name of
        // another link that has such an address now (`looked_for`), which
        // `plan` says it went to.
        Some(g) if !g.with_record && found_unplaced(cfg, &record.discovered, &g.addrs) => {
            read_addresses(nl, cfg, &record.discovered).await?
        }
        Some(g) => g.addrs,
        None => read_addresses(nl, cfg, &record.discovered).await?,
    };
    let rules = nl.rules().await.context("cannot read the policy rules")?;
    let (cfg, read) = tables::resolve_tables(nl, cfg, record, &addrs, &rules).await?;
    let desired = {
        let _p = crate::profile::phase("plan");
        plan::plan_with(&cfg, nl.links(), &addrs, &record.discovered)?
    };
    let (observed, tables) = observe(nl, &desired, record, addrs, rules, read, None).await?;
    let _p = crate::profile::phase("diff");
    let plan = diff::diff(&desired, &observed, adopt);
    Ok((desired, plan, Reading { observed, tables }))
}

/// Follows the recorded interfaces renamed since their sysctls were
/// recorded (`Record::follow_renames`, `Netlink::renamed`), but not one
/// the config lists by its recorded name: a listed rail that is gone is
/// not ready, and nothing of it is touched (it may come back). Returns
/// the renames, for the run's header.
pub fn follow_renames(nl: &Netlink, record: &mut Record, cfg: Option<&Config>) -> BTreeMap<String, String> {
    record.follow_renames(|name, index| {
        if cfg.is_some_and(|cfg| cfg.names().any(|listed| listed == name)) {
            return None;
        }
        nl.renamed(name, index)
    })
}

/// The index now of each interface with recorded sysctl values (the
/// record's names, followed): a changing run's header holds them, so the
/// record learns the index of an interface its steps do not name, also
/// one recorded before the record kept indexes.
pub fn recorded_indexes(nl: &Netlink, record: &Record) -> BTreeMap<String, u32> {
    let names: BTreeSet<&str> = record.origins.keys().map(|(iface, _)| iface.as_str()).collect();
    names.into_iter().filter_map(|name| Some((name.to_string(), nl.index_by_name(name)?))).collect()
}

/// The addresses a run plans with (`Netlink::run_addresses`): every
/// IPv4 address, the rails' IPv6 addresses, and another link's IPv6
/// address when the run looks for it (`looked_for`).
pub async fn read_addresses(
    nl: &Netlink,
    cfg: &Config,
    discovered: &BTreeMap<String, Vec<crate::model::Prefix>>,
) -> Result<Vec<crate::model::Address>, Error> {
    let rails: Vec<&str> = cfg.rail_names().collect();
    let addrs = nl.run_addresses(&rails, &looked_for(cfg, discovered)).await;
    Ok(addrs.context("cannot read the interface addresses")?)
}

/// The addresses a run looks for on every link, not only on the rails:
/// each listed address (`plan`: moved to another link?), each gateway (one
/// of the host's own?) and each address the last apply found on a rail
/// (where did it go?). Another link's address that is none of these, nor
/// in a managed subnet, is compared by nothing of a run but its address
/// (`Netlink::run_addresses` leaves it unnamed, and reads another link's
/// IPv6 address only when it is one of these). Pure.
pub fn looked_for(
    cfg: &Config,
    discovered: &BTreeMap<String, Vec<crate::model::Prefix>>,
) -> BTreeSet<IpAddr> {
    let listed = cfg.interfaces.iter().flat_map(|i| i.addresses.iter().flatten().map(|a| a.addr));
    let gateways = cfg.interfaces.iter().flat_map(|i| i.gateways.iter().map(|g| g.addr));
    let found = discovered.values().flatten().map(|p| p.addr);
    listed.chain(gateways).chain(found).collect()
}

/// Whether an address found on a rail at the last apply is where a read
/// of `addrs` without the record cannot say: on a link left unnamed, or
/// nowhere in `addrs` when it is IPv6 and such a read did not look for it
/// (another link's IPv6 address is read only when looked for). Then the
/// addresses are read again with the record. Pure.
fn found_unplaced(
    cfg: &Config,
    discovered: &BTreeMap<String, Vec<crate::model::Prefix>>,
    addrs: &[crate::model::Address],
) -> bool {
    let asked = looked_for(cfg, &BTreeMap::new());
    discovered.values().flatten().map(|p| p.addr).any(|ip| {
        let mut on = addrs.iter().filter(|a| a.addr.addr == ip).peekable();
        match on.peek() {
            Some(_) => on.any(|a| a.ifname.is_empty()),
            None => crate::model::asked_on_every_link(ip) && !asked.contains(&ip),
        }
    })
}

/// At most this many rounds of questions for `choose_off_local`, then
/// every address of the host is read.
const LOCAL_ROUNDS: usize = 8;

/// What `choose` picks (route lookups) kept off the host's addresses:
/// those of `addrs` (a run's: every IPv4 address, the rails' IPv6 ones
/// and those it looked for), and each IPv6 destination of its pick (`to`)
/// that another link has, asked (`Netlink::local_among`) until every
/// destination it picks is known not to be one. `choose` picks its
/// destinations outside the set it is given, each the first of its
/// candidates not in it: so its last pick is the one it would make
/// knowing every address of the host, without a dump of every link's
/// IPv6 addresses (a thousand pod veths' link-locals).
pub async fn choose_off_local<T>(
    nl: &Netlink,
    addrs: &[crate::model::Address],
    choose: impl Fn(&BTreeSet<IpAddr>) -> T,
    to: impl Fn(&T) -> Vec<IpAddr>,
) -> Result<T, Error> {
    let mut local = addresses_of(addrs);
    let mut asked = BTreeSet::new();
    for _ in 0..LOCAL_ROUNDS {
        let chosen = choose(&local);
        let new = unasked_v6(to(&chosen), &local, &mut asked);
        if new.is_empty() {
            return Ok(chosen);
        }
        let found = nl.local_among(&new).await.context("cannot read the interface addresses")?;
        if found.is_empty() {
            return Ok(chosen);
        }
        local.extend(found.into_iter().map(IpAddr::V6));
    }
    // The host's own addresses, one after another in a subnet: all of them.
    let every = nl.host_addresses().await.context("cannot read the interface addresses")?;
    local.extend(every);
    Ok(choose(&local))
}

/// The IPv6 destinations of `picked` neither in `local` nor asked about
/// already (each now is, in `asked`). Pure.
fn unasked_v6(
    picked: Vec<IpAddr>,
    local: &BTreeSet<IpAddr>,
    asked: &mut BTreeSet<Ipv6Addr>,
) -> Vec<Ipv6Addr> {
    picked
        .into_iter()
        .filter_map(|ip| match ip {
            IpAddr::V6(v6) if !local.contains(&ip) && asked.insert(v6) => Some(v6),
            _ => None,
        })
        .collect()
}

/// Reads what the diff needs (the addresses are read already): every rule, the routes of the tables
/// concerned (kernel-filtered by table), the sysctls concerned: the
/// desired ones and the recorded ones (interfaces that may have left the
/// config; one that no longer exists has nothing left to restore), and for
/// `risks`: the links, the addresses and the ARP sysctls of interfaces
/// outside the config with an address in a managed subnet. The tables in
/// `read` are not read again; with `sysctls`, the sysctls are not either.
/// Returns what it read, and every table whose routes it holds.
async fn observe(
    nl: &Netlink,
    desired: &Desired,
    record: &Record,
    addresses: Vec<crate::model::Address>,
    rules: Vec<crate::model::Live<crate::model::Rule>>,
    read: tables::TablesRead,
    sysctls: Option<&Observed>,
) -> Result<(Observed, BTreeSet<u32>)> {
    let owned_protocols = record.protocols.clone();
    let mut tables = diff::tables_to_read(desired, &owned_protocols, &rules);
    tables.extend(record.tables.iter().filter(|t| !RESERVED_TABLES.contains(t)));
    // The tables the table assignment read already are not read again.
    let unread: BTreeSet<u32> = tables.difference(&read.tables).copied().collect();
    let mut routes = routes_of_tables(nl, &unread).await?;
    routes.extend(read.routes.into_iter().filter(|r| tables.contains(&r.item.table)));
    let links = nl.links().to_vec();
    if let Some(known) = sysctls {
        let observed = Observed {
            rules,
            routes,
            sysctls: known.sysctls.clone(),
            all: known.all.clone(),
            origins: record.origins.clone(),
            owned_protocols,
            links,
            addresses,
        };
        return Ok((observed, tables));
    }
    let _p = crate::profile::phase("sysctl reads");
    let mut sysctls = BTreeMap::new();
    for s in &desired.sysctls {
        let value = read_sysctl(nl, &s.iface, s.key)
            .with_context(|| format!("cannot read {}", sysctl::dotted_name(&s.iface, s.key)))?;
        sysctls.insert((s.iface.clone(), s.key), value);
    }
    let candidates = crate::risks::arp_candidates(desired, &addresses);
    let arp = candidates.iter().flat_map(|i| [(i, SysctlKey::ArpIgnore), (i, SysctlKey::ArpAnnounce)]);
    for (iface, key) in record.origins.keys().map(|(i, k)| (i, *k)).chain(arp) {
        // A key the plan wants is read above already.
        if sysctls.contains_key(&(iface.clone(), key)) {
            continue;
        }
        if let Ok(value) = read_sysctl(nl, iface, key) {
            sysctls.insert((iface.clone(), key), value);
        }
    }
    let observed = Observed {
        rules,
        routes,
        sysctls,
        all: all_sysctls(),
        origins: record.origins.clone(),
        owned_protocols,
        links,
        addresses,
    };
    Ok((observed, tables))
}

/// `conf/<iface>/<key>`: as read with the links when it still may be
/// (`Netlink::devconf`), else from its file.
pub fn read_sysctl(nl: &Netlink, iface: &str, key: SysctlKey) -> std::io::Result<u32> {
    match nl.devconf(iface, key) {
        Some(value) => {
            crate::profile::count("sysctls_with_links", 1);
            Ok(value)
        }
        None => sysctl::read(iface, key),
    }
}

/// The routes of both families in `tables`, one kernel-filtered dump of
/// both families each (`Netlink::table_routes`).
pub async fn routes_of_tables(
    nl: &Netlink,
    tables: &BTreeSet<u32>,
) -> Result<Vec<crate::model::Live<crate::model::Route>>> {
    let dumps = tables.iter().map(|&table| async move {
        nl.table_routes(table).await.with_context(|| format!("cannot read the routes of table {table}"))
    });
    let _p = crate::profile::phase("dumps");
    let mut routes = Vec::new();
    for dump in futures::future::join_all(dumps).await {
        routes.extend(dump?);
    }
    Ok(routes)
}

/// `conf/all/<key>` for every managed key that can be read.
pub fn all_sysctls() -> BTreeMap<SysctlKey, u32> {
    SysctlKey::ALL.into_iter().filter_map(|key| Some((key, sysctl::read("all", key).ok()?))).collect()
}

/// The addresses of `addrs` (the host's, to keep probes off them),
/// without their prefixes and interfaces.
pub fn addresses_of(addrs: &[crate::model::Address]) -> BTreeSet<IpAddr> {
    addrs.iter().map(|a| a.addr.addr).collect()
}

/// After a transaction: the host read back and diffed again against the
/// same desired state. The kernel may have normalised an entry (a field it
/// stores differently from how it was asked), or another actor changed it
/// meanwhile: then the diff is not empty. Returns what it would still do.
///
/// What `ops` touched is read again (`Touched`); the rest is taken from
/// `before`, the reading the changes were planned on, where the diff found
/// nothing to do. A change another actor makes there is the same race
/// as one made an instant after this reading: its notification wakes
/// watch, and apply's next run sees it. (A heal of one flapped rail of 32
/// read 64 tables, every rule and every sysctl again: 2.3 ms of 10.)
/// The sysctls the run set are read from the files it wrote them
/// through (`written`, see `sysctl::Written`).
pub async fn verify(
    nl: &Netlink,
    desired: &Desired,
    record: &Record,
    adopt: bool,
    before: &Reading,
    ops: &[crate::model::Op],
    written: &sysctl::Written,
) -> Result<Vec<crate::model::Op>, Error> {
    let _p = crate::profile::phase("verify");
    let touched = Touched::of(ops);
    // Only the operations matter here: the addresses (for `risks`) are not read again.
    let rules = if touched.rules {
        nl.rules().await.context("cannot read the policy rules")?
    } else {
        before.observed.rules.clone()
    };
    let untouched = before.untouched(&touched);
    let (mut observed, _) =
        observe(nl, desired, record, Vec::new(), rules, untouched, Some(&before.observed)).await?;
    read_again(&mut observed, desired, &touched.sysctls, written)?;
    Ok(diff::diff(desired, &observed, adopt).ops)
}

/// The sysctls a run set, read again into `observed` (the others are as
/// read before the run; `conf/all` too, which no run sets). As in
/// `observe`, a sysctl the plan wants must be readable; another one (the
/// value given back to an interface since gone) is dropped.
fn read_again(
    observed: &mut Observed,
    desired: &Desired,
    set: &BTreeSet<(String, SysctlKey)>,
    written: &sysctl::Written,
) -> Result<()> {
    if set.is_empty() {
        return Ok(());
    }
    let _p = crate::profile::phase("sysctl reads");
    for (iface, key) in set {
        let at = (iface.clone(), *key);
        match written.read(iface, *key) {
            Ok(value) => {
                observed.sysctls.insert(at, value);
            }
            Err(e) if desired.sysctls.iter().any(|s| s.iface == *iface && s.key == *key) => {
                return Err(e).with_context(|| format!("cannot read {}", sysctl::dotted_name(iface, *key)));
            }
            Err(_) => {
                observed.sysctls.remove(&at);
            }
        }
    }
    Ok(())
}

/// What a run's operations change: the tables of their routes, the rules,
/// the sysctls (interface and key). Pure.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Touched {
    pub tables: BTreeSet<u32>,
    pub rules: bool,
    pub sysctls: BTreeSet<(String, SysctlKey)>,
}

impl Touched {
    pub fn of(ops: &[crate::model::Op]) -> Touched {
        use crate::model::Op;
        let mut t = Touched::default();
        for op in ops {
            match op {
                Op::AddRoute { route } | Op::DelRoute { route, .. } => {
                    t.tables.insert(route.table);
                }
                Op::ReplaceRoute { old, new } => t.tables.extend([old.item.table, new.table]),
                Op::RestoreRoute { current, old } => t.tables.extend([current.table, old.item.table]),
                Op::AddRule { .. } | Op::DelRule { .. } => t.rules = true,
                Op::SetSysctl { iface, key, .. } => {
                    t.sysctls.insert((iface.clone(), *key));
                }
            }
        }
        t
    }
}

/// Asks the kernel where each probe's traffic goes and judges the answers.
pub async fn ask(nl: &Netlink, probes: &[crate::behaviour::Probe]) -> Vec<crate::behaviour::Verdict> {
    let _p = crate::profile::phase("route lookups");
    let pairs: Vec<_> = probes.iter().map(|p| (p.from, p.to)).collect();
    let answers = nl.routes_matched(&pairs);
    (probes.iter().zip(answers))
        .map(|(probe, answer)| crate::behaviour::judge(probe, answer.as_ref().map_err(|e| e.to_string())))
        .collect()
}

/// Waits up to `settle` for the addresses the plan would use to leave
/// duplicate address detection: the listed addresses of the configured
/// interfaces, or their global ones where they list none; never a
/// link-local address (an IPv4-only rail just brought up does not wait for
/// its fe80 DAD). It wakes on address notifications, not on a poll; a stop
/// request ends the wait. Returns whether it waited, and the addresses it
/// read last: a caller that goes on at once plans with them rather than
/// dumping them again (a thousand pod veths' are about 0.7 ms a dump).
/// `before_wait` runs when it finds it must wait, before it does.
pub async fn settle_dad(
    nl: &Netlink,
    cfg: &Config,
    settle: std::time::Duration,
    stop: &crate::signals::StopFlag,
    mut before_wait: impl FnMut(),
) -> Result<(bool, Vec<crate::model::Address>), Error> {
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + settle;
    // Subscribed only once there is something to wait for (a socket and
    // seven group joins cost an apply that waits for nothing), then the
    // addresses are read again at once, so that the end of DAD between
    // the first read and the subscription is not missed. Without it (no
    // permission), poll.
    let mut sub: Option<Option<crate::events::Subscription>> = None;
    let mut waited = false;
    loop {
        // Before the record is read: `reconcile_reading` reads them again
        // when an address found at the last apply wants more.
        let addrs = read_addresses(nl, cfg, &BTreeMap::new()).await?;
        let waiting = addrs.iter().any(|a| a.tentative && !a.dad_failed && plan_uses(cfg, a));
        let now = Instant::now();
        if !waiting || now >= deadline || stop.requested().is_some() {
            return Ok((waited, addrs));
        }
        if !waited {
            before_wait();
        }
        waited = true;
        let Some(sub) = sub.as_mut() else {
            sub = Some(crate::events::Subscription::open().ok());
            continue;
        };
        // Wake at least every 200 ms to see a stop request.
        let nap = (deadline - now).min(Duration::from_millis(200));
        match sub.as_mut() {
            Some(s) => {
                // A socket that fails (not a timeout) is dropped for the
                // poll: it must not spin.
                if let Ok(Err(_)) = tokio::time::timeout(nap, s.next()).await {
                    *sub = None;
                }
            }
            None => tokio::time::sleep(nap.min(Duration::from_millis(100))).await,
        }
    }
}

/// Whether the plan would take `a` as a rail's address. Pure.
fn plan_uses(cfg: &Config, a: &crate::model::Address) -> bool {
    if a.scope != crate::model::scope::UNIVERSE {
        return false;
    }
    cfg.interfaces.iter().filter(|i| i.name == a.ifname).any(|i| match &i.addresses {
        Some(listed) => listed.iter().any(|spec| spec.addr == a.addr.addr),
        None => true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Address, Family, Prefix, scope};
    use crate::model::{Live, Op, Route, Rule, SysctlKey};

    fn route(table: u32, dst: &str) -> Route {
        Route {
            family: Family::V4,
            table,
            dst: Prefix { addr: dst.parse().unwrap(), len: 24 },
            tos: 0,
            metric: 0,
            protocol: 234,
            scope: 0,
            kind: 1,
            oif: Some(format!("rail{table}")),
            gateway: None,
            prefsrc: None,
            onlink: false,
        }
    }

    fn live(r: Route) -> Live<Route> {
        Live { item: r, raw: Vec::new() }
    }

    /// What each operation changes is what verify reads again: the table
    /// of each route it touches (both of a replace), the rules, the sysctls.
    #[test]
    fn touched_names_what_the_operations_change() {
        let rule = Rule::lookup(Family::V4, 1000, 101, 234);
        let ops = [
            Op::AddRoute { route: route(101, "198.51.100.0") },
            Op::DelRoute { route: route(102, "198.51.100.0"), raw: None },
            Op::ReplaceRoute { old: live(route(103, "198.51.100.0")), new: route(104, "198.51.100.0") },
        ];
        let t = Touched::of(&ops);
        assert_eq!(t.tables, BTreeSet::from([101, 102, 103, 104]));
        assert!(!t.rules && t.sysctls.is_empty());
        let t = Touched::of(&[Op::AddRule { rule: rule.clone(), raw: None }]);
        assert_eq!(t, Touched { tables: BTreeSet::new(), rules: true, sysctls: BTreeSet::new() });
        let set = |iface: &str, key| Op::SetSysctl { iface: iface.into(), key, old: 0, new: 1 };
        let t = Touched::of(&[
            Op::DelRule { rule, raw: None },
            set("rail0", SysctlKey::ArpIgnore),
            set("rail1", SysctlKey::ArpAnnounce),
            set("rail0", SysctlKey::ArpIgnore),
        ]);
        let sysctls = BTreeSet::from([
            ("rail0".into(), SysctlKey::ArpIgnore),
            ("rail1".into(), SysctlKey::ArpAnnounce),
        ]);
        assert_eq!(t, Touched { tables: BTreeSet::new(), rules: true, sysctls });
        assert_eq!(Touched::of(&[]), Touched::default());
    }

    /// Verify takes again only the tables no operation touched, with
    /// their routes as read; a touched table, also one found empty, is
    /// read again.
    #[test]
    fn verify_reads_again_what_was_touched_and_keeps_the_rest() {
        let observed = Observed {
            routes: vec![live(route(101, "198.51.100.0")), live(route(102, "203.0.113.0"))],
            ..Observed::default()
        };
        let before = Reading { observed, tables: BTreeSet::from([101, 102, 103]) };
        let flap = Touched::of(&[Op::AddRoute { route: route(101, "198.51.100.0") }]);
        let kept = before.untouched(&flap);
        assert_eq!(kept.tables, BTreeSet::from([102, 103]));
        assert_eq!(kept.routes, [live(route(102, "203.0.113.0"))]);
        let empty = Touched::of(&[Op::AddRoute { route: route(103, "198.51.100.0") }]);
        assert_eq!(before.untouched(&empty).tables, BTreeSet::from([101, 102]));
        let rules_only = Touched { rules: true, ..Touched::default() };
        assert_eq!(before.untouched(&rules_only).tables, before.tables, "a purge's heal reads no table");
    }

    fn addr(ifname: &str, a: &str, scope: u8) -> Address {
        let (ip, len) = a.split_once('/').unwrap();
        Address {
            ifname: ifname.into(),
            addr: Prefix { addr: ip.parse().unwrap(), len: len.parse().unwrap() },
            peer: None,
            scope,
            tentative: true,
            deprecated: false,
            temporary: false,
            dad_failed: false,
        }
    }

    /// A read without the record (apply's DAD wait) is read again when
    /// an address found at the last apply is on a link it left unnamed,
    /// or is IPv6 and not among its addresses though it did not look for
    /// it; not when a rail has it, nor for an IPv4 address it does not
    /// have (it read every IPv4 address), nor for one it looked for.
    #[test]
    fn a_read_without_the_record_is_read_again_when_a_found_address_is_not_placed() {
        let cfg = |text: &str| crate::config::parse("c.toml", text).unwrap();
        let v4 = cfg(
            "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10/24\"]\n\n[[interface]]\nname = \"rail1\"\n",
        );
        let found =
            |ip: &str| BTreeMap::from([("rail1".to_string(), vec![Prefix::new(ip.parse().unwrap(), 64)])]);
        let host = [
            addr("rail0", "198.51.100.10/24", scope::UNIVERSE),
            addr("rail1", "2001:db8:1::11/64", scope::UNIVERSE),
            addr("", "203.0.113.9/32", scope::UNIVERSE),
        ];
        assert!(!found_unplaced(&v4, &BTreeMap::new(), &host), "nothing found");
        assert!(!found_unplaced(&v4, &found("2001:db8:1::11"), &host), "still on rail1");
        assert!(found_unplaced(&v4, &found("2001:db8:1::12"), &host), "IPv6, not looked for");
        assert!(found_unplaced(&v4, &found("203.0.113.9"), &host), "on a link left unnamed");
        assert!(!found_unplaced(&v4, &found("203.0.113.10"), &host), "IPv4: gone, every one was read");
        assert!(!found_unplaced(&v4, &found("fe80::5"), &host), "link-local: on its own link only");
        let listed = cfg("[[interface]]\nname = \"rail1\"\naddresses = [\"2001:db8:1::12/64\"]\n");
        assert!(!found_unplaced(&listed, &found("2001:db8:1::12"), &host), "listed: looked for already");
    }

    /// Only IPv6 destinations are asked about, each once, and never one
    /// known to be the host's.
    #[test]
    fn only_new_ipv6_destinations_are_asked_about() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let local = BTreeSet::from([ip("2001:db8:1::1")]);
        let mut asked = BTreeSet::from(["2001:db8:1::3".parse().unwrap()]);
        let picked = vec![
            ip("198.51.100.1"),
            ip("2001:db8:1::1"),
            ip("2001:db8:1::2"),
            ip("2001:db8:1::2"),
            ip("2001:db8:1::3"),
        ];
        assert_eq!(unasked_v6(picked, &local, &mut asked), ["2001:db8:1::2".parse::<Ipv6Addr>().unwrap()]);
        assert!(asked.contains(&"2001:db8:1::2".parse::<Ipv6Addr>().unwrap()));
    }

    /// What a run looks for on other links: the listed addresses, the
    /// gateways and the addresses found at the last apply, of both
    /// families, each once.
    #[test]
    fn a_run_looks_for_its_listed_and_found_addresses_and_its_gateways_on_other_links() {
        let cfg = crate::config::parse(
            "c.toml",
            "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10/24\", \"2001:db8:1::10/64\"]\n\
             gateway = [\"198.51.100.1\", \"fe80::fe\"]\n\n[[interface]]\nname = \"rail1\"\n",
        )
        .unwrap();
        let found =
            BTreeMap::from([("rail1".to_string(), vec![Prefix::new("198.51.100.11".parse().unwrap(), 24)])]);
        let ips = |s: &[&str]| s.iter().map(|a| a.parse().unwrap()).collect::<BTreeSet<IpAddr>>();
        assert_eq!(
            looked_for(&cfg, &found),
            ips(&["198.51.100.10", "2001:db8:1::10", "198.51.100.1", "fe80::fe", "198.51.100.11"])
        );
        assert_eq!(looked_for(&cfg, &BTreeMap::new()).len(), 4, "nothing found");
    }

    #[test]
    fn settle_waits_only_for_addresses_the_plan_uses() {
        let cfg = crate::config::parse(
            "c.toml",
            "[[interface]]\nname = \"rail0\"\naddresses = [\"2001:db8::10\"]\n\n[[interface]]\nname = \"rail1\"\n",
        )
        .unwrap();
        assert!(plan_uses(&cfg, &addr("rail0", "2001:db8::10/64", scope::UNIVERSE)));
        assert!(!plan_uses(&cfg, &addr("rail0", "2001:db8::99/64", scope::UNIVERSE)), "not listed");
        assert!(!plan_uses(&cfg, &addr("rail0", "fe80::1/64", scope::LINK)), "link-local");
        assert!(plan_uses(&cfg, &addr("rail1", "2001:db8:1::11/64", scope::UNIVERSE)), "found, not listed");
        assert!(!plan_uses(&cfg, &addr("rail1", "fe80::2/64", scope::LINK)));
        assert!(!plan_uses(&cfg, &addr("mgmt0", "2001:db8:9::1/64", scope::UNIVERSE)), "not a rail");
    }
}
