//! `roce-route show`: what roce-route owns now, grouped by interface: its
//! table, routes, rules, sysctls (with effective values), its link state
//! (admin up/down, carrier) and where each address's traffic goes now.
//! Needs no config: ownership is the protocol.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use anyhow::Context;
use serde::Serialize;

use super::{Ctx, Done, run_notes};
use crate::behaviour::{self, Probe, Verdict};
use crate::cli::SysfsArg;
use crate::config::DEFAULT_PROTOCOL;
use crate::error::{Error, exit};
use crate::model::{Address, Link, Route, Rule, SysctlKey, scope};
use crate::rdma::Port;
use crate::rdma_read;
use crate::reconcile;
use crate::render;

/// The fields of `show --json`.
#[derive(Debug, Serialize)]
pub struct ShowReport {
    /// The protocol numbers taken as roce-route's.
    pub protocols: Vec<u8>,
    pub interfaces: Vec<ShownInterface>,
    /// Owned rules whose table has no owned route (e.g. after a link flap).
    pub orphan_rules: Vec<Shown<Rule>>,
    /// An interrupted run, an apply waiting for its confirmation.
    pub notes: Vec<String>,
}

/// An entry as structured fields plus the line `ip` prints for it.
#[derive(Debug, Serialize)]
pub struct Shown<T> {
    #[serde(flatten)]
    pub entry: T,
    pub ip: String,
}

impl Shown<Route> {
    fn of(r: &Route) -> Shown<Route> {
        Shown { entry: r.clone(), ip: render::route_line(r) }
    }
}

impl Shown<Rule> {
    fn of(r: &Rule) -> Shown<Rule> {
        Shown { entry: r.clone(), ip: render::rule_line(r) }
    }
}

#[derive(Debug, Default, Serialize)]
pub struct ShownInterface {
    pub name: String,
    /// None when no link has this name (any more).
    pub link: Option<LinkState>,
    pub tables: Vec<u32>,
    pub routes: Vec<Shown<Route>>,
    pub rules: Vec<Shown<Rule>>,
    pub sysctls: BTreeMap<&'static str, ShownSysctl>,
    pub traffic: Vec<Verdict>,
    /// The RDMA port whose netdev this is; None: none.
    pub rdma: Option<ShownRdma>,
}

/// What `ibdev2netdev` and `show_gids` would say about a rail.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ShownRdma {
    pub device: String,
    pub port: u32,
    pub link_layer: String,
    pub state: String,
    pub phys_state: String,
    pub rate: Option<String>,
    /// Each global address of the rail with the index of its RoCE v2 GID
    /// now (None: it has none; always None on InfiniBand, which uses GID 0).
    pub gids: Vec<ShownGid>,
    /// "mlx5_0 port 1, RoCE (Ethernet), ..., LinkUp" (`Port::summary`).
    #[serde(skip)]
    summary: String,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ShownGid {
    pub address: IpAddr,
    pub index: Option<u32>,
}

impl ShownRdma {
    pub fn of(p: &Port, netdev: &str, addresses: &[Address]) -> ShownRdma {
        let gids = addresses
            .iter()
            .filter(|a| a.ifname == netdev && a.scope == scope::UNIVERSE)
            .map(|a| ShownGid {
                address: a.addr.addr,
                index: if p.is_roce() {
                    p.v2_gids_of(&a.addr.addr, netdev).next().map(|g| g.index)
                } else {
                    None
                },
            })
            .collect();
        ShownRdma {
            device: p.device.clone(),
            port: p.port,
            link_layer: p.link_layer.to_string(),
            state: p.state.to_string(),
            phys_state: p.phys_state.to_string(),
            rate: p.rate.clone(),
            gids,
            summary: format!("{}, {}", p.label(), p.summary()),
        }
    }

    /// "mlx5_0 port 1, RoCE (Ethernet), 400 Gb/sec (4X NDR), ACTIVE, LinkUp;
    /// RoCE v2 GID of 198.51.100.20 at 3".
    pub fn describe(&self) -> String {
        let mut s = self.summary.clone();
        if self.link_layer == "Ethernet" {
            let gids: Vec<String> = self
                .gids
                .iter()
                .map(|g| match g.index {
                    Some(i) => format!("{} at {i}", g.address),
                    None => format!("{} NONE", g.address),
                })
                .collect();
            if !gids.is_empty() {
                s.push_str(&format!("; RoCE v2 GID of {}", gids.join(", ")));
            }
        } else {
            s.push_str("; GID index 0 (InfiniBand)");
        }
        s
    }
}

/// `ip link`'s UP / NO-CARRIER, as flags.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct LinkState {
    /// IFF_UP: administratively up.
    pub admin_up: bool,
    /// IFF_LOWER_UP: the link has a carrier.
    pub carrier: bool,
}

impl LinkState {
    pub fn of(link: &Link) -> LinkState {
        LinkState { admin_up: link.admin_up, carrier: link.lower_up }
    }

    /// "up, carrier", "up, NO-CARRIER: traffic from its addresses is lost", "DOWN".
    pub fn describe(&self) -> &'static str {
        match (self.admin_up, self.carrier) {
            (false, _) => "DOWN (administratively)",
            (true, true) => "up, carrier",
            (true, false) => {
                "up, NO-CARRIER: traffic from its addresses is lost (check the cable, switch port, peer)"
            }
        }
    }
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ShownSysctl {
    pub value: u32,
    pub all: u32,
    pub effective: u32,
}

/// `protocol`: an extra protocol from `--protocol` (validated), this run only.
pub async fn run(ctx: &Ctx, protocol: Option<u8>, sysfs: &SysfsArg) -> Result<Done, Error> {
    let state = ctx.existing_state()?;
    let _lock = if state.is_some() { Some(ctx.lock()?) } else { None };
    // Read, not changed: its two sets are copied, not the whole record.
    let record = state.as_ref().map(|s| s.record()).transpose()?.unwrap_or_default();
    let mut protocols: BTreeSet<u8> = record.protocols.clone();
    protocols.insert(DEFAULT_PROTOCOL);
    protocols.extend(protocol);
    let notes = run_notes(ctx, state.as_ref())?.into_iter().map(|n| n.text).collect();
    // No link yet: those shown are asked by name once the owned routes
    // say which (a node's thousand pod veths are 9 ms of a full read).
    let mut nl = super::connect_named(&[], sysfs).await?;
    let observed = rdma_read::read_lenient(sysfs, nl.links())?;
    observed.unreadable.iter().for_each(|u| ctx.warn(u.to_string()));
    let rdma = observed.rdma;
    let rules: Vec<Rule> = nl
        .rules()
        .await
        .context("cannot read the policy rules")?
        .into_iter()
        .map(|r| r.item)
        .filter(|r| protocols.contains(&r.protocol))
        .collect();
    // The tables roce-route uses (its rules', and those it recorded), as
    // apply reads them: never main, local or default, where a host may hold
    // a full routing table that a walk for owned routes would read whole.
    let mut tables: BTreeSet<u32> =
        rules.iter().map(|r| r.table).chain(record.tables.iter().copied()).collect();
    tables.retain(|t| !crate::model::RESERVED_TABLES.contains(t));
    let routes: Vec<Route> = reconcile::routes_of_tables(&nl, &tables)
        .await?
        .into_iter()
        .map(|r| r.item)
        .filter(|r| protocols.contains(&r.protocol))
        .collect();
    let (mut interfaces, orphan_rules) = group(&routes, &rules);
    let shown: Vec<&str> = interfaces.iter().map(|i| i.name.as_str()).collect();
    nl.add_links(&shown).context("cannot read the links")?;
    // Of IPv6, the shown interfaces' addresses: another link's address is
    // only one a lookup must not go to, and the lookups ask about those
    // they pick (`reconcile::choose_off_local`). None is looked for by
    // name (an IPv4 one in a shown rail's subnet is named).
    let addresses =
        nl.run_addresses(&shown, &BTreeSet::new()).await.context("cannot read the interface addresses")?;
    let choose = |local: &BTreeSet<IpAddr>| -> Vec<Vec<Probe>> {
        interfaces.iter().map(|i| probes_of(i, &routes, &rules, local)).collect()
    };
    let to = |chosen: &Vec<Vec<Probe>>| chosen.iter().flatten().map(|p| p.to).collect();
    let probes = reconcile::choose_off_local(&nl, &addresses, choose, to).await?;
    // `all` once, not once for each interface (32 rails: 128 reads).
    let all = if interfaces.is_empty() {
        BTreeMap::new()
    } else {
        let _p = crate::profile::phase("sysctl reads");
        reconcile::all_sysctls()
    };
    for (iface, probes) in interfaces.iter_mut().zip(probes) {
        iface.link = nl.links().iter().find(|l| l.name == iface.name).map(LinkState::of);
        iface.sysctls = read_sysctls(&nl, &iface.name, &all);
        iface.traffic = reconcile::ask(&nl, &probes).await;
        iface.rdma = rdma.port_of(&iface.name).map(|p| ShownRdma::of(p, &iface.name, &addresses));
    }
    let report = ShowReport { protocols: protocols.into_iter().collect(), interfaces, orphan_rules, notes };
    if ctx.chatty() {
        print_human(&report);
    }
    Ok(Done::new(exit::OK, false, report))
}

/// Pure: owned routes and rules grouped by the interface of each table.
pub fn group(routes: &[Route], rules: &[Rule]) -> (Vec<ShownInterface>, Vec<Shown<Rule>>) {
    let mut by_name: BTreeMap<String, ShownInterface> = BTreeMap::new();
    let mut table_owner: BTreeMap<u32, String> = BTreeMap::new();
    for r in routes {
        let name = r.oif.clone().unwrap_or_else(|| "(no interface)".into());
        table_owner.entry(r.table).or_insert_with(|| name.clone());
        let entry =
            by_name.entry(name.clone()).or_insert_with(|| ShownInterface { name, ..Default::default() });
        if !entry.tables.contains(&r.table) {
            entry.tables.push(r.table);
        }
        entry.routes.push(Shown::<Route>::of(r));
    }
    let mut orphans = Vec::new();
    for rule in rules {
        match table_owner.get(&rule.table).and_then(|n| by_name.get_mut(n)) {
            Some(iface) => iface.rules.push(Shown::<Rule>::of(rule)),
            None => orphans.push(Shown::<Rule>::of(rule)),
        }
    }
    (by_name.into_values().collect(), orphans)
}

/// The ARP sysctls of `iface` that can be read, each with its `all`
/// value (`all`: those that can be read).
fn read_sysctls(
    nl: &crate::netlink::Netlink,
    iface: &str,
    all: &BTreeMap<SysctlKey, u32>,
) -> BTreeMap<&'static str, ShownSysctl> {
    let _p = crate::profile::phase("sysctl reads");
    let mut out = BTreeMap::new();
    for key in SysctlKey::ALL {
        if let (Ok(value), Some(&all)) = (reconcile::read_sysctl(nl, iface, key), all.get(&key)) {
            out.insert(key.name(), ShownSysctl { value, all, effective: key.effective(all, value) });
        }
    }
    out
}

/// The lookups that say where the traffic of each owned rule's source
/// address goes now, kept off `local`. Pure.
fn probes_of(
    iface: &ShownInterface,
    routes: &[Route],
    rules: &[Rule],
    local: &BTreeSet<IpAddr>,
) -> Vec<Probe> {
    let mut out = Vec::new();
    for rule in rules.iter().filter(|r| iface.tables.contains(&r.table)) {
        let Some(src) = rule.src.filter(|s| s.len == s.family().max_len()) else {
            continue;
        };
        out.extend(behaviour::probes_from_routes(&iface.name, rule.table, src.addr, routes, local).probes);
    }
    out
}

/// The report as a person reads it, written at once: a line per write
/// was a system call per line, about a thousand on 32 dual-stack rails.
fn print_human(r: &ShowReport) {
    super::print_text(&human(r));
}

fn human(r: &ShowReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    if r.interfaces.is_empty() && r.orphan_rules.is_empty() {
        let protos: Vec<String> = r.protocols.iter().map(u8::to_string).collect();
        let _ = writeln!(
            out,
            "roce-route owns nothing here (no route or rule with proto {})",
            protos.join(" or ")
        );
        return out;
    }
    for i in &r.interfaces {
        let tables: Vec<String> = i.tables.iter().map(u32::to_string).collect();
        let _ = writeln!(out, "{}  table {}", i.name, tables.join(", "));
        let _ = writeln!(out, "  link: {}", i.link.map_or("not found", |l| l.describe()));
        if let Some(r) = &i.rdma {
            let _ = writeln!(out, "  rdma: {}", r.describe());
        }
        let _ = writeln!(out, "  routes:");
        i.routes.iter().for_each(|l| {
            let _ = writeln!(out, "    {}", l.ip);
        });
        let _ = writeln!(out, "  rules:");
        i.rules.iter().for_each(|l| {
            let _ = writeln!(out, "    {}", l.ip);
        });
        let sysctls: Vec<String> = i
            .sysctls
            .iter()
            .map(|(k, s)| format!("{k}={} (all {}, effective {})", s.value, s.all, s.effective))
            .collect();
        let _ = writeln!(out, "  sysctls: {}", sysctls.join(", "));
        let _ = writeln!(out, "  traffic:");
        for v in &i.traffic {
            let mark = if v.ok { "ok" } else { "WRONG" };
            let _ = writeln!(out, "    {mark}: {}", v.describe());
        }
    }
    for o in &r.orphan_rules {
        let _ = writeln!(out, "rule without routes in its table (link flapped? re-apply): {}", o.ip);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::prefix;

    /// The report as a person reads it: the notes, then each interface's
    /// lines in order, then the rules without routes; or, owning
    /// nothing, one line.
    #[test]
    fn the_human_report_lists_each_interface_then_the_orphan_rules() {
        let route =
            Route::connected(100, prefix("198.51.100.0/24"), "rail0", "198.51.100.10".parse().unwrap(), 234);
        let rule = |table| Rule::source(1000, "198.51.100.10".parse().unwrap(), table, 234);
        let (mut ifaces, orphans) = group(&[route], &[rule(100), rule(101)]);
        ifaces[0].sysctls.insert("arp_ignore", ShownSysctl { value: 1, all: 2, effective: 2 });
        let report = ShowReport {
            protocols: vec![234],
            interfaces: ifaces,
            orphan_rules: orphans,
            notes: vec!["n".into()],
        };
        let text = human(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "note: n");
        assert_eq!(lines[1], "rail0  table 100");
        assert_eq!(lines[2], "  link: not found");
        assert_eq!(lines[3], "  routes:");
        assert!(lines[4].starts_with("    ip -4 route: ") && lines[4].contains("table 100"), "{text}");
        assert_eq!(lines[5], "  rules:");
        assert!(lines[6].contains("lookup 100"), "{text}");
        assert_eq!(lines[7], "  sysctls: arp_ignore=1 (all 2, effective 2)");
        assert_eq!(lines[8], "  traffic:");
        assert!(
            lines[9].starts_with("rule without routes in its table") && lines[9].contains("lookup 101"),
            "{text}"
        );
        assert_eq!(lines.len(), 10, "{text}");
        assert!(text.ends_with('\n'));
        let none =
            ShowReport { protocols: vec![234, 235], interfaces: vec![], orphan_rules: vec![], notes: vec![] };
        assert_eq!(human(&none), "roce-route owns nothing here (no route or rule with proto 234 or 235)\n");
    }

    #[test]
    fn groups_by_interface_of_the_table() {
        let route =
            Route::connected(100, prefix("198.51.100.0/24"), "rail0", "198.51.100.10".parse().unwrap(), 234);
        let rule = |table| Rule::source(1000, "198.51.100.10".parse().unwrap(), table, 234);
        let (ifaces, orphans) = group(&[route], &[rule(100), rule(101)]);
        assert_eq!(ifaces.len(), 1);
        assert_eq!(ifaces[0].name, "rail0");
        assert_eq!(ifaces[0].tables, [100]);
        assert_eq!(ifaces[0].rules.len(), 1);
        assert_eq!(orphans.len(), 1);
        let json = serde_json::to_value(ShowReport {
            protocols: vec![234],
            interfaces: ifaces,
            orphan_rules: orphans,
            notes: vec![],
        })
        .unwrap();
        assert_eq!(json["interfaces"][0]["name"], "rail0");
        assert!(json["interfaces"][0]["link"].is_null(), "not looked up in this test");
        assert!(json["interfaces"][0]["sysctls"].is_object());
        let route = &json["interfaces"][0]["routes"][0];
        assert_eq!(route["table"], 100, "structured fields: {route}");
        assert_eq!(route["oif"], "rail0");
        assert!(route["ip"].as_str().unwrap().contains("198.51.100.0/24 dev rail0"), "{route}");
        assert_eq!(json["orphan_rules"][0]["priority"], 1000);
    }

    #[test]
    fn link_state_in_words_and_json() {
        let link = |admin_up, lower_up| Link {
            index: 3,
            name: "rail1".into(),
            admin_up,
            lower_up,
            mac: None,
            link_type: crate::model::LinkType::Ether,
        };
        assert_eq!(LinkState::of(&link(true, true)).describe(), "up, carrier");
        assert!(LinkState::of(&link(true, false)).describe().starts_with("up, NO-CARRIER"));
        assert!(LinkState::of(&link(false, false)).describe().starts_with("DOWN"));
        let shown = ShownInterface { link: Some(LinkState::of(&link(true, false))), ..Default::default() };
        let json = serde_json::to_value(&shown).unwrap();
        assert_eq!(json["link"], serde_json::json!({"admin_up": true, "carrier": false}));
    }
}
