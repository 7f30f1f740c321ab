//! The routes and rules of one planned interface.

use std::collections::BTreeSet;

use super::PlannedInterface;
use crate::model::{Family, Prefix, Route, Rule};

/// A host prefix (/32, /128) without a point-to-point peer: its subnet
/// holds nothing but the address itself, so it has no connected route (the
/// kernel makes none either; the local table delivers to it).
fn is_bare_host(addr: &Prefix, subnet: &Prefix) -> bool {
    *subnet == Prefix::host(addr.addr)
}

/// Warnings for host-prefix addresses left with no route in their table:
/// no connected route and no gateway of their family, so their traffic
/// falls through to the main table.
pub(super) fn unrouted_host_addresses(i: &PlannedInterface) -> Vec<String> {
    i.addresses
        .iter()
        .zip(&i.subnets)
        .filter(|(a, s)| is_bare_host(a, s) && !i.gateways.iter().any(|g| Family::of(g) == a.family()))
        .map(|(a, _)| {
            format!(
                "{a} on {} has no peer and {} has no {} gateway: table {} holds no route for it, so its \
                 traffic leaves by the main table (add a gateway, or a peer: `ip addr add {} peer PEER dev {}`)",
                i.name,
                i.name,
                Family::of(&a.addr).name(),
                i.table,
                a.addr,
                i.name
            )
        })
        .collect()
}

pub(super) fn routes_for(i: &PlannedInterface, protocol: u8) -> Vec<Route> {
    let mut seen = BTreeSet::new();
    let mut routes = Vec::new();
    for (a, subnet) in i.addresses.iter().zip(&i.subnets) {
        // One connected route per subnet; the first address is its source.
        if !is_bare_host(a, subnet) && seen.insert(subnet.network()) {
            routes.push(Route::connected(i.table, *subnet, &i.name, a.addr, protocol));
        }
    }
    for gw in &i.gateways {
        let onlink = i.onlink_gateways.contains(gw);
        routes.push(Route { onlink, ..Route::default_via(i.table, *gw, &i.name, protocol) });
    }
    routes
}

pub(super) fn rules_for(i: &PlannedInterface, protocol: u8) -> Vec<Rule> {
    i.addresses.iter().map(|a| Rule::source(i.priority, a.addr, i.table, protocol)).collect()
}
