//! Planning: config + observed host (links, addresses) -> desired state.
//!
//! Pure. For every configured interface and each of its addresses:
//! - in the interface's table, the connected route
//!   `<subnet> dev <if> src <addr> scope link` (one per subnet: the first
//!   address of that subnet is the source; the subnet of a point-to-point
//!   address is its peer's, and a /32 or /128 without a peer has none), and
//!   `default via <gw> dev <if> [onlink]` for each gateway;
//! - a rule `from <addr> lookup <table>` at the interface's priority;
//! - the interface's IPv4 sysctls.
//!
//! An `[[arp_only]]` interface gets its ARP sysctls only: no table, route,
//! rule or probe.
//!
//! Every route and rule carries the configured protocol number: that is
//! how roce-route recognises what it owns.
//!
//! - `address_policy`: which addresses a NIC may use (shared with the config);
//! - `addresses`: each interface's addresses on the host, found or not ready;
//! - `shared`: an address on several interfaces, settled;
//! - `gateways`: the gateways against the addresses;
//! - `entries`: the routes and rules of a planned interface;
//! - `not_ready`: what is left alone, and why.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use crate::config::{Config, ConfigError, Gateway, Interface};
use crate::model::{Address, Link, Prefix, Route, Rule, Sysctl, SysctlKey};

pub mod address_policy;
mod addresses;
mod entries;
mod gateways;
mod not_ready;
mod shared;

use addresses::{Resolved, resolve_addresses};
pub use addresses::{Unfit, unfit};
use entries::{routes_for, rules_for, unrouted_host_addresses};
use gateways::check_gateways;
pub use not_ready::{NotReady, Subject};
use shared::settle_shared_addresses;

/// What the host should look like, as far as roce-route is concerned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Desired {
    pub protocol: u8,
    pub interfaces: Vec<PlannedInterface>,
    pub routes: Vec<Route>,
    pub rules: Vec<Rule>,
    pub sysctls: Vec<Sysctl>,
    /// The `[[arp_only]]` interfaces: in `sysctls`, nowhere else.
    pub arp_only: Vec<String>,
    /// Things an admin should know that do not stop the apply.
    pub warnings: Vec<String>,
    /// Parts of the config the host is not ready for: left alone this run,
    /// with the reason (partial hosts: a missing NIC, a link down, an
    /// address flushed or still in duplicate address detection).
    pub not_ready: Vec<NotReady>,
    /// What roce-route keeps of the not-ready parts: the entries it made
    /// for them earlier stay as they are (never deleted as stale).
    pub keep: Keep,
    /// Not-ready addresses whose earlier entries are not kept (the address
    /// is on another interface now): (interface, address, its table). What
    /// a run deletes of them is known from its plan (`NotReady::line`).
    pub unkept: Vec<(String, IpAddr, u32)>,
    /// Addresses of interfaces without `addresses`, as found now plus the
    /// ones found at the last apply that are gone (recorded again).
    pub discovered: BTreeMap<String, Vec<Prefix>>,
}

/// The entries of not-ready parts, which the diff must not delete.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// Tables of interfaces that are not ready as a whole.
    pub tables: BTreeSet<u32>,
    /// Addresses that are not ready: their rules and the routes they are
    /// the source of.
    pub sources: BTreeSet<IpAddr>,
    /// (table, address) of addresses that are not ready: the routes of that
    /// table to a subnet holding the address (IPv6 drops a route's source
    /// when its address goes, so the source alone does not find them).
    pub subnets_of: BTreeSet<(u32, IpAddr)>,
    /// (table, gateway) of gateways that are not ready.
    pub gateways: BTreeSet<(u32, IpAddr)>,
    /// Interfaces whose sysctls stay as they are (not ready as a whole).
    pub sysctls_of: BTreeSet<String>,
}

impl Keep {
    pub fn route(&self, r: &Route) -> bool {
        self.tables.contains(&r.table)
            || r.prefsrc.is_some_and(|s| self.sources.contains(&s))
            || r.gateway.is_some_and(|g| self.gateways.contains(&(r.table, g)))
            || (!r.dst.is_default()
                && self.subnets_of.iter().any(|(t, a)| *t == r.table && r.dst.contains(a)))
    }
    pub fn rule(&self, r: &Rule) -> bool {
        self.tables.contains(&r.table) || r.src.is_some_and(|s| self.sources.contains(&s.addr))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PlannedInterface {
    pub name: String,
    pub table: u32,
    pub priority: u32,
    /// Each address with its prefix length, as the interface has it.
    pub addresses: Vec<Prefix>,
    pub gateways: Vec<IpAddr>,
    /// The subnet each address reaches on-link, in the order of `addresses`
    /// (`Address::subnet()`: the peer's prefix for a point-to-point address,
    /// otherwise the address's own network).
    pub subnets: Vec<Prefix>,
    /// The gateways (of `gateways`) reached `onlink`: outside every subnet.
    pub onlink_gateways: Vec<IpAddr>,
}

impl Desired {
    /// The tables roce-route manages for this config.
    pub fn tables(&self) -> BTreeSet<u32> {
        self.interfaces.iter().map(|i| i.table).collect()
    }
    /// Every source address a rule is made for.
    pub fn source_addresses(&self) -> BTreeSet<IpAddr> {
        self.interfaces.iter().flat_map(|i| i.addresses.iter().map(|a| a.addr)).collect()
    }
    /// The rail whose table is `table`.
    pub fn rail_of_table(&self, table: u32) -> Option<String> {
        self.interfaces.iter().find(|i| i.table == table).map(|i| i.name.clone())
    }
    /// The rail that has the address `addr`.
    pub fn rail_of_address(&self, addr: IpAddr) -> Option<String> {
        self.interfaces.iter().find(|i| i.addresses.iter().any(|a| a.addr == addr)).map(|i| i.name.clone())
    }
    /// Whether the config names `iface`, as a rail or for ARP only.
    pub fn names(&self, iface: &str) -> bool {
        self.interfaces.iter().any(|i| i.name == iface) || self.arp_only.iter().any(|a| a == iface)
    }
}

/// Derives the desired state; checks the config against the host (the
/// addresses are usable, the gateway is on-link). What the host is not
/// ready for is listed in `not_ready`, not an error.
pub fn plan(cfg: &Config, links: &[Link], addrs: &[Address]) -> Result<Desired, ConfigError> {
    plan_with(cfg, links, addrs, &BTreeMap::new())
}

/// `plan`, knowing the addresses found at the last apply on interfaces that
/// list no `addresses` (`discovered`): one that is gone now (an IPv6
/// address flushed by a link flap) is not ready rather than forgotten.
///
/// What the host's state makes wrong for one rail (an address that failed
/// duplicate address detection, has another prefix length than listed, is
/// on another rail, is on two rails; a gateway that is one of the host's
/// own addresses) is not ready for that address or gateway: the other rails
/// and addresses are planned as usual. Only what the config itself gets
/// wrong is an error.
pub fn plan_with(
    cfg: &Config,
    links: &[Link],
    addrs: &[Address],
    discovered: &BTreeMap<String, Vec<Prefix>>,
) -> Result<Desired, ConfigError> {
    let mut d = Desired { protocol: cfg.defaults.protocol, ..Desired::default() };
    // First each interface's link and addresses, then who has which
    // address (that needs every interface), then the entries.
    let mut rails: Vec<(&Interface, Resolved<'_>)> = Vec::new();
    for iface in &cfg.interfaces {
        let Some(link) = links.iter().find(|l| l.name == iface.name) else {
            whole(&mut d, iface, discovered, absent(&iface.name, links, cfg));
            continue;
        };
        if !link.admin_up {
            let reason = format!(
                "is administratively down: the kernel refuses routes through it (`ip link set {} up`)",
                iface.name
            );
            whole(&mut d, iface, discovered, reason);
            continue;
        }
        let resolved = resolve_addresses(iface, addrs, discovered.get(&iface.name), &mut d.warnings);
        rails.push((iface, resolved));
    }
    settle_shared_addresses(&mut rails)?;
    for (iface, resolved) in &rails {
        plan_interface(&mut d, iface, resolved, addrs, discovered)?;
    }
    plan_arp_only(&mut d, cfg, links);
    // In the order of the config, whichever pass found them.
    let order: Vec<&str> = cfg.names().collect();
    d.not_ready.sort_by_key(|n| order.iter().position(|o| *o == n.interface));
    Ok(d)
}

/// Why a configured interface is not ready when the host has no such link:
/// the links it has, and the closest of them the config does not name (a
/// misspelt name is not ready too, exit 5, which the boot unit accepts: the
/// suggestion is all that tells it from a rail not there yet).
fn absent(name: &str, links: &[Link], cfg: &Config) -> String {
    let known: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
    let named =
        |l: &str| cfg.interfaces.iter().any(|i| i.name == l) || cfg.arp_only.iter().any(|a| a.name == l);
    let unnamed = known.iter().copied().filter(|l| *l != "lo" && !named(l));
    let hint =
        crate::suggest::closest(name, unnamed).map(|c| format!("; did you mean {c}?")).unwrap_or_default();
    format!("does not exist on this host (it has: {}){hint}", known.join(", "))
}

/// The desired sysctls of interface `name`.
fn sysctls_of<'a>(name: &'a str, values: &'a BTreeMap<SysctlKey, u32>) -> impl Iterator<Item = Sysctl> + 'a {
    values.iter().map(move |(key, value)| Sysctl { iface: name.to_string(), key: *key, value: *value })
}

/// The `[[arp_only]]` interfaces: their sysctls, or not ready when absent.
fn plan_arp_only(d: &mut Desired, cfg: &Config, links: &[Link]) {
    for a in &cfg.arp_only {
        if !links.iter().any(|l| l.name == a.name) {
            d.not_ready.push(NotReady {
                interface: a.name.clone(),
                subject: Subject::Interface,
                reason: absent(&a.name, links, cfg),
            });
            d.keep.sysctls_of.insert(a.name.clone());
            continue;
        }
        d.sysctls.extend(sysctls_of(&a.name, &a.sysctls));
        d.arp_only.push(a.name.clone());
    }
}

/// `iface` is not ready as a whole: everything of it stays as it is.
fn whole(d: &mut Desired, iface: &Interface, discovered: &BTreeMap<String, Vec<Prefix>>, reason: String) {
    d.not_ready.push(NotReady { interface: iface.name.clone(), subject: Subject::Interface, reason });
    d.keep.tables.insert(iface.table);
    d.keep.sysctls_of.insert(iface.name.clone());
    if let Some(found) = discovered.get(&iface.name) {
        d.discovered.insert(iface.name.clone(), found.clone());
    }
}

/// The entries of one interface whose link is there and up.
fn plan_interface(
    d: &mut Desired,
    iface: &Interface,
    resolved: &Resolved<'_>,
    addrs: &[Address],
    discovered: &BTreeMap<String, Vec<Prefix>>,
) -> Result<(), ConfigError> {
    addresses_not_ready(d, iface, resolved);
    if resolved.found.is_empty() {
        keep_without_addresses(d, iface, resolved, discovered);
        return Ok(());
    }
    let found: Vec<&Address> = resolved.found.iter().map(|(a, _)| *a).collect();
    let subnets: Vec<Prefix> = found.iter().map(|a| a.subnet()).collect();
    let missing: Vec<IpAddr> = resolved.missing.iter().map(|m| m.addr).collect();
    let waiting = check_gateways(iface, &subnets, &missing, addrs)?;
    for (gw, reason) in &waiting {
        d.not_ready.push(NotReady {
            interface: iface.name.clone(),
            subject: Subject::Gateway(*gw),
            reason: reason.clone(),
        });
        d.keep.gateways.insert((iface.table, *gw));
    }
    let ready_gateways: Vec<&Gateway> =
        iface.gateways.iter().filter(|g| !waiting.iter().any(|(w, _)| *w == g.addr)).collect();
    let planned = PlannedInterface {
        name: iface.name.clone(),
        table: iface.table,
        priority: iface.priority,
        gateways: ready_gateways.iter().map(|g| g.addr).collect(),
        addresses: found.iter().map(|a| a.addr).collect(),
        subnets,
        onlink_gateways: ready_gateways.iter().filter(|g| g.onlink).map(|g| g.addr).collect(),
    };
    d.warnings.extend(unrouted_host_addresses(&planned));
    d.routes.extend(routes_for(&planned, d.protocol));
    d.rules.extend(rules_for(&planned, d.protocol));
    d.sysctls.extend(sysctls_of(&iface.name, &iface.sysctls));
    d.interfaces.push(planned);
    Ok(())
}

/// The addresses of `iface` that are not ready, with what stays of them;
/// and, when it lists none, the addresses to record as found.
fn addresses_not_ready(d: &mut Desired, iface: &Interface, resolved: &Resolved<'_>) {
    for m in &resolved.missing {
        d.not_ready.push(NotReady {
            interface: iface.name.clone(),
            subject: Subject::Address(m.addr),
            reason: m.reason.clone(),
        });
        if m.keep {
            d.keep.sources.insert(m.addr);
            d.keep.subnets_of.insert((iface.table, m.addr));
        } else {
            d.unkept.push((iface.name.clone(), m.addr, iface.table));
        }
    }
    if iface.addresses.is_none() {
        let mut all: Vec<Prefix> = resolved.found.iter().map(|(a, _)| a.addr).collect();
        all.extend(resolved.vanished.iter().copied());
        d.discovered.insert(iface.name.clone(), all);
    }
}

/// What stays of an interface with no address ready.
fn keep_without_addresses(
    d: &mut Desired,
    iface: &Interface,
    resolved: &Resolved<'_>,
    discovered: &BTreeMap<String, Vec<Prefix>>,
) {
    if resolved.missing.is_empty() {
        let reason = resolved.none_reason.clone().unwrap_or_else(|| "has no global address".into());
        whole(d, iface, discovered, reason);
    } else if resolved.missing.iter().all(|m| m.keep) {
        d.keep.tables.insert(iface.table);
    } else {
        // Some address it had is on another interface now: its entries
        // go (they would send that interface's traffic out of this
        // one), so not the whole table stays: the other addresses'
        // entries (`addresses_not_ready`), the gateways and the sysctls do.
        d.keep.gateways.extend(iface.gateways.iter().map(|g| (iface.table, g.addr)));
        d.keep.sysctls_of.insert(iface.name.clone());
    }
}

#[cfg(test)]
mod tests;
