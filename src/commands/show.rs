//! `roce-route show`: what roce-route owns now, grouped by interface: its
//! table, routes, rules, sysctls (with effective values) and where each
//! address's traffic goes now. Needs no config: ownership is the protocol.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use anyhow::Context;
use serde::Serialize;

use super::{ask, connect, local_addresses, print_json};
use crate::behaviour::{self, Verdict};
use crate::error::Error;
use crate::model::{Family, Route, Rule, SysctlKey};
use crate::netlink::Netlink;
use crate::say;
use crate::{render, sysctl};

/// The JSON document of `show --json`.
#[derive(Debug, Serialize)]
pub struct ShowReport {
    pub command: &'static str,
    pub protocol: u8,
    pub interfaces: Vec<ShownInterface>,
    /// Owned rules whose table has no owned route (e.g. after a link flap).
    pub orphan_rules: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct ShownInterface {
    pub name: String,
    pub tables: Vec<u32>,
    pub routes: Vec<String>,
    pub rules: Vec<String>,
    pub sysctls: BTreeMap<&'static str, ShownSysctl>,
    pub traffic: Vec<Verdict>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ShownSysctl {
    pub value: u32,
    pub all: u32,
    pub effective: u32,
}

pub async fn run(json: bool, protocol: u8) -> Result<(), Error> {
    let nl = connect().await?;
    let rules: Vec<Rule> = nl
        .rules()
        .await
        .context("cannot read the policy rules")?
        .into_iter()
        .map(|r| r.item)
        .filter(|r| r.protocol == protocol)
        .collect();
    let mut routes = Vec::new();
    for family in [Family::V4, Family::V6] {
        let owned = nl.routes(family, None, Some(protocol)).await.context("cannot read the routes")?;
        routes.extend(owned.into_iter().map(|r| r.item));
    }
    let (mut interfaces, orphan_rules) = group(&routes, &rules);
    let local = local_addresses(&nl).await?;
    for iface in &mut interfaces {
        iface.sysctls = read_sysctls(&iface.name);
        iface.traffic = probe(&nl, iface, &routes, &rules, &local).await;
    }
    let report = ShowReport { command: "show", protocol, interfaces, orphan_rules };
    if json {
        print_json(&report);
    } else {
        print_human(&report);
    }
    Ok(())
}

/// Pure: owned routes and rules grouped by the interface of each table.
pub fn group(routes: &[Route], rules: &[Rule]) -> (Vec<ShownInterface>, Vec<String>) {
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
        entry.routes.push(render::route_line(r));
    }
    let mut orphans = Vec::new();
    for rule in rules {
        match table_owner.get(&rule.table).and_then(|n| by_name.get_mut(n)) {
            Some(iface) => iface.rules.push(render::rule_line(rule)),
            None => orphans.push(render::rule_line(rule)),
        }
    }
    (by_name.into_values().collect(), orphans)
}

fn read_sysctls(iface: &str) -> BTreeMap<&'static str, ShownSysctl> {
    let mut out = BTreeMap::new();
    for key in SysctlKey::ALL {
        if let (Ok(value), Ok(all)) = (sysctl::read(iface, key), sysctl::read("all", key)) {
            out.insert(key.name(), ShownSysctl { value, all, effective: key.effective(all, value) });
        }
    }
    out
}

/// Where the traffic of each owned rule's source address goes now.
async fn probe(
    nl: &Netlink,
    iface: &ShownInterface,
    routes: &[Route],
    rules: &[Rule],
    local: &BTreeSet<IpAddr>,
) -> Vec<Verdict> {
    let mut out = Vec::new();
    for rule in rules.iter().filter(|r| iface.tables.contains(&r.table)) {
        let Some(src) = rule.src.filter(|s| s.len == s.family().max_len()) else {
            continue;
        };
        let probes = behaviour::probes_from_routes(&iface.name, rule.table, src.addr, routes, local).probes;
        out.extend(ask(nl, &probes).await);
    }
    out
}

fn print_human(r: &ShowReport) {
    if r.interfaces.is_empty() && r.orphan_rules.is_empty() {
        say!("roce-route owns nothing here (no route or rule with proto {})", r.protocol);
        return;
    }
    for i in &r.interfaces {
        let tables: Vec<String> = i.tables.iter().map(u32::to_string).collect();
        say!("{}  table {}", i.name, tables.join(", "));
        say!("  routes:");
        i.routes.iter().for_each(|l| say!("    {l}"));
        say!("  rules:");
        i.rules.iter().for_each(|l| say!("    {l}"));
        let sysctls: Vec<String> = i
            .sysctls
            .iter()
            .map(|(k, s)| format!("{k}={} (all {}, effective {})", s.value, s.all, s.effective))
            .collect();
        say!("  sysctls: {}", sysctls.join(", "));
        say!("  traffic:");
        for v in &i.traffic {
            let mark = if v.ok { "ok" } else { "WRONG" };
            say!("    {mark}: {}", v.describe());
        }
    }
    for o in &r.orphan_rules {
        say!("rule without routes in its table (link flapped? re-apply): {o}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::prefix;

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
            command: "show",
            protocol: 234,
            interfaces: ifaces,
            orphan_rules: orphans,
        })
        .unwrap();
        assert_eq!(json["interfaces"][0]["name"], "rail0");
        assert!(json["interfaces"][0]["sysctls"].is_object());
    }
}
