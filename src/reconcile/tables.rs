//! Which routing table each configured interface gets: `assign_tables`
//! (pure: kept from the last apply, or the lowest free one), the config's
//! tables given against the host (`resolve_tables`), and what apply records
//! of them (`assignments`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use super::routes_of_tables;
use crate::config::{Config, ConfigError};
use crate::error::Error;
use crate::model;
use crate::netlink::Netlink;
use crate::plan::Desired;
use crate::state::Record;

/// Gives every interface without an explicit `table` its table: the one it
/// had at the last apply (`kept`, by interface name) unless an explicit
/// table claims it, else the lowest id from `table_base` that is not
/// reserved, not taken by another interface of the config and not
/// `occupied(table, interface)` (used by routes or rules roce-route does
/// not own that are not that interface's own, as a hand-made setup of the
/// classic guide is). So an interface keeps its table across config edits:
/// dropping a rail never renumbers the others. Pure.
pub fn assign_tables(
    cfg: &mut Config,
    kept: &BTreeMap<String, u32>,
    occupied: &dyn Fn(u32, &str) -> bool,
) -> Result<(), ConfigError> {
    let mut taken: BTreeSet<u32> =
        cfg.interfaces.iter().filter(|i| i.table_explicit).map(|i| i.table).collect();
    let mut unassigned = Vec::new();
    for (k, iface) in cfg.interfaces.iter_mut().enumerate().filter(|(_, i)| !i.table_explicit) {
        match kept.get(&iface.name).filter(|t| !taken.contains(t) && model::reserved_table(**t).is_none()) {
            Some(t) => {
                iface.table = *t;
                taken.insert(*t);
            }
            None => unassigned.push(k),
        }
    }
    let mut next = cfg.defaults.table_base;
    for k in unassigned {
        let name = cfg.interfaces[k].name.clone();
        while taken.contains(&next) || occupied(next, &name) || model::reserved_table(next).is_some() {
            next = next.checked_add(1).ok_or_else(|| {
                let iface = &cfg.interfaces[k];
                ConfigError::at(
                    &cfg.file,
                    Some(iface.loc),
                    format!(
                        "interface \"{}\": no free table from table_base {} up to {}",
                        iface.name,
                        cfg.defaults.table_base,
                        u32::MAX
                    ),
                    "set `table` on this interface, or lower table_base in [defaults]",
                )
            })?;
        }
        cfg.interfaces[k].table = next;
        taken.insert(next);
    }
    Ok(())
}

/// The config with every interface's table given (`assign_tables`):
/// kept from the last apply, or the lowest table from table_base that no
/// foreign route or rule of another interface uses. A table is checked for
/// foreign routes only when it is about to be given out (a table-filtered
/// dump each), so a large main table is never read.
/// The routes of the tables read while assigning them (so that the
/// observation does not dump them again).
#[derive(Default)]
pub(super) struct TablesRead {
    pub tables: BTreeSet<u32>,
    pub routes: Vec<crate::model::Live<crate::model::Route>>,
}

pub(super) async fn resolve_tables(
    nl: &Netlink,
    cfg: &Config,
    record: &Record,
    addrs: &[crate::model::Address],
    rules: &[crate::model::Live<crate::model::Rule>],
) -> Result<(Config, TablesRead), Error> {
    let ours = |p: u8| p == cfg.defaults.protocol || record.protocols.contains(&p);
    let owner_of = |ip: &IpAddr| addrs.iter().find(|a| a.addr.addr == *ip).map(|a| a.ifname.clone());
    // Table -> the interfaces its foreign entries belong to (None: none).
    let mut foreign: BTreeMap<u32, BTreeSet<Option<String>>> = BTreeMap::new();
    for r in rules {
        if !ours(r.item.protocol) && r.item.table != 0 {
            let owner = r.item.src.and_then(|s| owner_of(&s.addr));
            foreign.entry(r.item.table).or_default().insert(owner);
        }
    }
    let mut read = TablesRead::default();
    loop {
        let mut resolved = cfg.clone();
        let occupied = |t: u32, iface: &str| {
            foreign.get(&t).is_some_and(|owners| owners.iter().any(|o| o.as_deref() != Some(iface)))
        };
        assign_tables(&mut resolved, &record.assigned, &occupied)?;
        let fresh: BTreeSet<u32> = resolved
            .interfaces
            .iter()
            .filter(|i| !i.table_explicit && record.assigned.get(&i.name) != Some(&i.table))
            .map(|i| i.table)
            .filter(|t| !read.tables.contains(t))
            .collect();
        if fresh.is_empty() {
            return Ok((resolved, read));
        }
        for r in routes_of_tables(nl, &fresh).await? {
            if !ours(r.item.protocol) {
                foreign.entry(r.item.table).or_default().insert(r.item.oif.clone());
            }
            read.routes.push(r);
        }
        read.tables.extend(fresh);
    }
}

/// The tables given to interfaces without an explicit `table`, to record.
pub fn assignments(cfg: &Config, desired: &Desired) -> BTreeMap<String, u32> {
    desired
        .interfaces
        .iter()
        .filter(|pi| cfg.interfaces.iter().any(|i| i.name == pi.name && !i.table_explicit))
        .map(|pi| (pi.name.clone(), pi.table))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

    /// `[[interface]]` tables with just these names, two lines each.
    fn named(names: &[&str]) -> String {
        names.iter().map(|n| format!("[[interface]]\nname = \"{n}\"\n")).collect()
    }

    fn ok(text: &str) -> Config {
        parse("t.toml", text).unwrap()
    }

    #[test]
    fn tables_stay_with_their_interfaces() {
        let four = named(&["rail0", "rail1", "rail2", "rail3"]);
        let mut c = ok(&four);
        let tables = |c: &Config| c.interfaces.iter().map(|i| (i.name.clone(), i.table)).collect::<Vec<_>>();
        let kept: BTreeMap<String, u32> = tables(&c).into_iter().collect();
        assert_eq!(kept.values().copied().collect::<Vec<_>>(), [100, 101, 102, 103]);
        // rail1 dropped: rail2 and rail3 keep 102 and 103.
        let mut three = ok(&named(&["rail0", "rail2", "rail3"]));
        assign_tables(&mut three, &kept, &|_, _| false).unwrap();
        assert_eq!(tables(&three), [("rail0".into(), 100), ("rail2".into(), 102), ("rail3".into(), 103)]);
        // A new rail takes the lowest free table not used by foreign
        // entries of another interface (101: foreign entries of rail1).
        let mut five = ok(&named(&["rail0", "rail2", "rail3", "rail4", "rail5"]));
        assign_tables(&mut five, &kept, &|t, i| t == 101 && i != "rail1").unwrap();
        let got: Vec<u32> = five.interfaces.iter().map(|i| i.table).collect();
        assert_eq!(got, [100, 102, 103, 104, 105]);
        // A hand-made table of the interface itself is its own (adoption).
        let mut fresh = ok(&named(&["rail0", "rail1"]));
        assign_tables(&mut fresh, &BTreeMap::new(), &|t, i| t == 100 && i != "rail0").unwrap();
        assert_eq!(tables(&fresh), [("rail0".into(), 100), ("rail1".into(), 101)]);
        // An explicit table always wins, even over a kept one.
        let text = format!("{}table = 101\n{}", named(&["rail9"]), named(&["rail1"]));
        let mut c2 = ok(&text);
        assign_tables(&mut c2, &kept, &|_, _| false).unwrap();
        assert_eq!(tables(&c2), [("rail9".into(), 101), ("rail1".into(), 100)]);
        assign_tables(&mut c, &kept, &|_, _| false).unwrap();
        assert_eq!(tables(&c), kept.into_iter().collect::<Vec<_>>());
    }
}
