//! `discover`, pure: from the RDMA ports (`rdma::scan`) and the netdevs,
//! addresses and gateway routes of the namespace, the rails a config
//! should name, and that config as TOML text with every choice commented.
//!
//! A rail is a netdev of an ACTIVE RDMA port (or, with `--interfaces`, a
//! netdev whose name matches) that has a global address. Nothing found is
//! dropped silently: a port without a netdev, a port that is not ACTIVE,
//! a netdev without an address or outside this namespace all appear as
//! comments with the reason. A non-RDMA netdev with an IPv4 address in a
//! rail's subnet (a management NIC) becomes `[[arp_only]]`: otherwise it
//! answers ARP for the rails' addresses (`check` reports that as
//! arp_flux).

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde::Serialize;

use crate::glob;
use crate::model::{Address, Family, Link, Prefix, Route, scope};
use crate::plan;
use crate::rdma::{Port, Rdma, Summary};
use crate::sysfs;

/// Which netdevs are candidates.
#[derive(Clone, Debug)]
pub enum Selection {
    /// The netdevs of the RDMA ports.
    Rdma,
    /// Netdevs by name, whether or not they have an RDMA device.
    Globs(Vec<String>),
}

/// What the namespace has, read by the command.
pub struct Host<'a> {
    pub rdma: &'a Rdma,
    pub links: &'a [Link],
    pub addresses: &'a [Address],
    /// Routes of the main table (those with a gateway matter).
    pub routes: &'a [Route],
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Discovered {
    pub rails: Vec<Rail>,
    /// Netdevs of ports that are not ACTIVE: written commented out.
    pub inactive: Vec<Rail>,
    pub arp_only: Vec<ArpOnlyNic>,
    /// Everything else found and not taken, with the reason.
    pub left_out: Vec<LeftOut>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Rail {
    pub name: String,
    pub addresses: Vec<Prefix>,
    pub gateways: Vec<IpAddr>,
    /// None: a netdev taken by name that has no RDMA device.
    pub rdma: Option<RailRdma>,
    /// Addresses it has that are not fit to be a source, with why.
    pub unfit: Vec<String>,
    pub admin_up: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct RailRdma {
    pub device: String,
    pub port: u32,
    /// link_layer, rate, state, phys_state.
    #[serde(flatten)]
    pub summary: Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pkey: Option<String>,
    /// The parent netdev of an IPoIB pkey child.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ArpOnlyNic {
    pub name: String,
    /// Its IPv4 addresses inside a rail's subnet.
    pub addresses: Vec<Prefix>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// "mlx5_bond_0 port 1", or a netdev's name.
    pub what: String,
    pub reason: String,
}

/// Why discover has nothing to offer (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error(
        "no RDMA device under {0}/class/infiniband: this host (or sysfs copy) has no InfiniBand or RoCE device \
         the kernel knows; to take netdevs by name instead, give --interfaces GLOB (e.g. --interfaces 'ens*np*')"
    )]
    NoRdma(String),
    #[error("--interfaces {pattern:?} matches no netdev in this network namespace (it has: {have})")]
    NoMatch { pattern: String, have: String },
    #[error("no rail found: {0}")]
    NoRail(String),
}

/// A netdev taken as a candidate rail, with its port (None: taken by
/// name, no RDMA device).
type Taken<'a> = (String, Option<&'a Port>);

pub fn discover(host: &Host, selection: &Selection, sysfs_root: &str) -> Result<Discovered, DiscoverError> {
    let mut out = Discovered::default();
    let taken = match selection {
        Selection::Rdma => {
            if host.rdma.ports.is_empty() {
                return Err(DiscoverError::NoRdma(sysfs_root.trim_end_matches('/').to_string()));
            }
            port_netdevs(host, &mut out.left_out)
        }
        Selection::Globs(globs) => named_netdevs(host, globs)?,
    };
    for (name, port) in &taken {
        let rail = rail(host, name, *port);
        if rail.addresses.is_empty() {
            out.left_out.push(LeftOut { what: name.clone(), reason: no_address(*port, &rail.unfit) });
        } else if port.is_some_and(|p| !p.active()) {
            out.inactive.push(rail);
        } else {
            out.rails.push(rail);
        }
    }
    if out.rails.is_empty() {
        let mut why: Vec<String> = out.left_out.iter().map(|l| format!("{}: {}", l.what, l.reason)).collect();
        why.extend(out.inactive.iter().map(|r| format!("{}: its port is not ACTIVE", r.name)));
        return Err(DiscoverError::NoRail(why.join("; ")));
    }
    out.arp_only = arp_only(host, &out);
    Ok(out)
}

/// The netdevs of the RDMA ports in this namespace, in natural device
/// order; a port without netdev and a netdev elsewhere go to `left_out`.
fn port_netdevs<'a>(host: &Host<'a>, left_out: &mut Vec<LeftOut>) -> Vec<Taken<'a>> {
    let mut taken: Vec<Taken> = Vec::new();
    let mut ports: Vec<&Port> = host.rdma.ports.iter().collect();
    ports.sort_by(|a, b| sysfs::natural_cmp(&a.device, &b.device).then(a.port.cmp(&b.port)));
    for port in ports {
        if port.netdevs.is_empty() {
            left_out.push(LeftOut {
                what: port.label(),
                reason: format!(
                    "{}; no netdev found for it (none in its GID table, no IPoIB netdev with its port GUID, none \
                     under its PCI function)",
                    port.summary()
                ),
            });
        }
        for n in &port.netdevs {
            // Two ports can name one netdev (a PCI function without
            // dev_port): one [[interface]], of the first port.
            if taken.iter().any(|(name, _)| *name == n.name) {
                continue;
            }
            if !host.links.iter().any(|l| l.name == n.name) {
                left_out.push(LeftOut {
                    what: n.name.clone(),
                    reason: format!(
                        "the netdev of {} is not in this network namespace (give --netns NAME for another one)",
                        port.label()
                    ),
                });
                continue;
            }
            taken.push((n.name.clone(), Some(port)));
        }
    }
    taken
}

/// The netdevs whose names match a glob, in natural order; a glob that
/// matches none is an error.
fn named_netdevs<'a>(host: &Host<'a>, globs: &[String]) -> Result<Vec<Taken<'a>>, DiscoverError> {
    let mut links: Vec<&Link> = host.links.iter().filter(|l| l.name != "lo").collect();
    links.sort_by(|a, b| sysfs::natural_cmp(&a.name, &b.name));
    for g in globs {
        if !links.iter().any(|l| glob::matches(g, &l.name)) {
            let have: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
            return Err(DiscoverError::NoMatch { pattern: g.clone(), have: have.join(", ") });
        }
    }
    Ok(links
        .iter()
        .filter(|l| globs.iter().any(|g| glob::matches(g, &l.name)))
        .map(|l| (l.name.clone(), host.rdma.port_of(&l.name)))
        .collect())
}

/// Why a taken netdev without a usable address is left out.
fn no_address(port: Option<&Port>, unfit: &[String]) -> String {
    let mut reason = match port {
        Some(p) if !p.active() => format!(
            "the netdev of {} has no global address, and the port is {} ({})",
            p.label(),
            p.state,
            p.phys_state
        ),
        Some(p) => format!("the netdev of {} has no global address", p.label()),
        None => "has no global address".to_string(),
    };
    if !unfit.is_empty() {
        reason.push_str(&format!(" fit to be a source (left out: {})", unfit.join(", ")));
    }
    reason
}

/// The global addresses of netdev `ifname`.
fn global_addresses<'h>(host: &Host<'h>, ifname: &str) -> impl Iterator<Item = &'h Address> {
    host.addresses.iter().filter(move |a| a.ifname == ifname && a.scope == scope::UNIVERSE)
}

/// Whether netdev `ifname` has a global address in one of `subnets`.
fn on_subnets(host: &Host, ifname: &str, subnets: &[Prefix]) -> bool {
    global_addresses(host, ifname).any(|a| subnets.iter().any(|s| s.contains(&a.addr.addr)))
}

/// The netdevs whose routes can give `found`'s rails a gateway: the rails
/// and every netdev with a global address in a rail's subnet. `discover`
/// reads the main table's routes out of these only (filtered in the
/// kernel), so an uplink with a full routing table is never copied.
pub fn gateway_netdevs(host: &Host, found: &Discovered) -> Vec<String> {
    let rails: Vec<&Rail> = found.rails.iter().chain(&found.inactive).collect();
    let subnets: Vec<Prefix> =
        rails.iter().flat_map(|r| global_addresses(host, &r.name)).map(Address::subnet).collect();
    let mut names: Vec<String> = rails.iter().map(|r| r.name.clone()).collect();
    for l in host.links {
        if !names.contains(&l.name) && on_subnets(host, &l.name, &subnets) {
            names.push(l.name.clone());
        }
    }
    names
}

fn rail(host: &Host, name: &str, port: Option<&Port>) -> Rail {
    let mut addresses = Vec::new();
    let mut unfit = Vec::new();
    // Every global address's subnet counts for the gateway, fit or not.
    let mut subnets = Vec::new();
    for a in global_addresses(host, name) {
        subnets.push(a.subnet());
        // The addresses apply would leave out of a discovered rail.
        match plan::unfit(a) {
            Some(u) => unfit.push(format!("{} ({})", a.addr, u.word())),
            None => addresses.push(a.addr),
        }
    }
    let mut gateways = Vec::new();
    for family in [Family::V4, Family::V6] {
        let mut candidates: Vec<&Route> = host
            .routes
            .iter()
            .filter(|r| r.family == family && r.table == 254)
            .filter(|r| match r.gateway {
                Some(IpAddr::V6(g)) if g.is_unicast_link_local() => r.oif.as_deref() == Some(name),
                // Out of a netdev on the subnet (this rail, another rail, a
                // management NIC): the gateway is on the fabric every rail
                // reaches. A gateway put `onlink` on an unrelated netdev is
                // not.
                Some(g) => {
                    subnets.iter().any(|s| s.contains(&g))
                        && r.oif.as_deref().is_some_and(|o| on_subnets(host, o, &subnets))
                }
                None => false,
            })
            .collect();
        // A default route first, then the lowest metric.
        candidates.sort_by_key(|r| (!r.dst.is_default(), r.metric));
        gateways.extend(candidates.first().and_then(|r| r.gateway));
    }
    let link = host.links.iter().find(|l| l.name == name);
    Rail {
        name: name.to_string(),
        addresses,
        gateways,
        rdma: port.map(|p| RailRdma {
            device: p.device.clone(),
            port: p.port,
            summary: p.summary(),
            pkey: p.netdevs.iter().find(|n| n.name == name).and_then(|n| n.pkey.clone()),
            parent: p.netdevs.iter().find(|n| n.name == name).and_then(|n| n.parent.clone()),
        }),
        unfit,
        admin_up: link.is_some_and(|l| l.admin_up),
    }
}

/// Netdevs outside the rails with an IPv4 address in a rail's subnet: a
/// management NIC, and the netdev of a port that is not ACTIVE (its
/// [[interface]] is commented out, and it would answer ARP for the rails).
fn arp_only(host: &Host, out: &Discovered) -> Vec<ArpOnlyNic> {
    let rail_subnets: BTreeSet<Prefix> = out
        .rails
        .iter()
        .flat_map(|r| r.addresses.iter().filter(|a| a.family() == Family::V4).map(|a| a.network()))
        .collect();
    let mut nics: Vec<ArpOnlyNic> = Vec::new();
    for a in host.addresses.iter().filter(|a| a.scope == scope::UNIVERSE && a.addr.family() == Family::V4) {
        if a.ifname == "lo" || out.rails.iter().any(|r| r.name == a.ifname) {
            continue;
        }
        if !rail_subnets.iter().any(|s| s.contains(&a.addr.addr)) {
            continue;
        }
        match nics.iter_mut().find(|n| n.name == a.ifname) {
            Some(n) => n.addresses.push(a.addr),
            None => nics.push(ArpOnlyNic { name: a.ifname.clone(), addresses: vec![a.addr] }),
        }
    }
    nics.sort_by(|a, b| sysfs::natural_cmp(&a.name, &b.name));
    nics
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn list(items: impl IntoIterator<Item = String>) -> String {
    let items: Vec<String> = items.into_iter().map(|s| quoted(&s)).collect();
    format!("[{}]", items.join(", "))
}

fn rail_lines(r: &Rail) -> Vec<String> {
    let mut lines = vec!["[[interface]]".to_string(), format!("name = {}", quoted(&r.name))];
    lines.push(format!("addresses = {}", list(r.addresses.iter().map(Prefix::to_string))));
    match r.gateways.as_slice() {
        [] => {}
        [g] => lines.push(format!("gateway = {}", quoted(&g.to_string()))),
        gs => lines.push(format!("gateway = {}", list(gs.iter().map(IpAddr::to_string)))),
    }
    lines
}

fn describe_rail(r: &Rail) -> String {
    let mut s = match &r.rdma {
        Some(d) => format!("{} port {}: {}", d.device, d.port, d.summary),
        None => format!("{}: no RDMA device found for this netdev (taken by name)", r.name),
    };
    if let Some(d) = &r.rdma
        && let (Some(pkey), Some(parent)) = (&d.pkey, &d.parent)
    {
        s.push_str(&format!("; IPoIB pkey {pkey}, child of {parent}"));
    }
    if !r.admin_up {
        s.push_str("; the netdev is DOWN (apply leaves it alone until it is up)");
    }
    s
}

/// The config text: ready for `apply`, every choice said in a comment.
pub fn render(d: &Discovered) -> String {
    let mut out = vec![
        "# roce-route configuration written by `roce-route discover`: one [[interface]] per".to_string(),
        "# RDMA netdev with a global address. Review it, try it with `roce-route apply --dry-run".to_string(),
        "# FILE`, then `roce-route apply --confirm 120 --install /etc/roce-route/ FILE`: the".to_string(),
        "# confirmation puts it there, where every *.toml is the boot config. Tables are given".to_string(),
        "# at apply time, from [defaults] table_base (100) up, and kept.".to_string(),
    ];
    for r in &d.rails {
        out.push(String::new());
        out.push(format!("# {}", describe_rail(r)));
        if !r.unfit.is_empty() {
            out.push(format!("# left out: {}", r.unfit.join(", ")));
        }
        out.extend(rail_lines(r));
    }
    for r in &d.inactive {
        out.push(String::new());
        out.push(format!("# {}", describe_rail(r)));
        out.push(
            "# Not taken: the port is not ACTIVE, so RDMA (and NCCL) cannot use it now. Once it is,".into(),
        );
        out.push("# run discover again, or remove the leading `# ` from these lines (and the".into());
        out.push("# [[arp_only]] of this netdev below, if there is one):".into());
        out.extend(rail_lines(r).into_iter().map(|l| format!("# {l}")));
    }
    for a in &d.arp_only {
        out.push(String::new());
        let addrs: Vec<String> = a.addresses.iter().map(Prefix::to_string).collect();
        let role = if d.inactive.iter().any(|r| r.name == a.name) {
            "its port is not ACTIVE"
        } else {
            "no RDMA rail"
        };
        out.push(format!(
            "# {}: {role}, but {} {} in a rail's subnet: only its ARP sysctls are",
            a.name,
            addrs.join(", "),
            if addrs.len() == 1 { "is" } else { "are" }
        ));
        out.push("# managed, so that it does not answer ARP for the rails' addresses (ARP flux).".into());
        out.push("[[arp_only]]".into());
        out.push(format!("name = {}", quoted(&a.name)));
    }
    if !d.left_out.is_empty() {
        out.push(String::new());
        out.push("# Found and not taken:".into());
        for l in &d.left_out {
            out.push(format!("# - {}: {}", l.what, l.reason));
        }
    }
    out.push(String::new());
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::prefix;
    use crate::rdma::{LinkLayer, Netdev, PhysState, PortState, Via};

    fn port(device: &str, netdev: &str, active: bool) -> Port {
        Port {
            device: device.into(),
            port: 1,
            link_layer: LinkLayer::Ethernet,
            state: if active { PortState::Active } else { PortState::Down },
            phys_state: if active { PhysState::LinkUp } else { PhysState::Disabled },
            rate: Some("200 Gb/sec (4X HDR)".into()),
            gids: vec![],
            netdevs: if netdev.is_empty() {
                vec![]
            } else {
                vec![Netdev { name: netdev.into(), via: Via::GidTable, pkey: None, parent: None }]
            },
        }
    }

    fn link(name: &str) -> Link {
        Link::up(2, name)
    }

    fn addr(ifname: &str, a: &str) -> Address {
        Address { ifname: ifname.into(), addr: prefix(a), ..Address::default() }
    }

    #[test]
    fn rails_comments_and_arp_only() {
        let rdma = Rdma {
            ports: vec![
                port("mlx5_10", "ens10np0", true),
                port("mlx5_2", "ens2np0", true),
                port("mlx5_3", "ens3np0", false),
                port("mlx5_bond_0", "", true),
                port("mlx5_4", "ens4np0", true),
            ],
        };
        let links: Vec<Link> =
            ["ens10np0", "ens2np0", "ens3np0", "ens4np0", "eno1", "wan0"].map(link).to_vec();
        let mut temp = addr("ens2np0", "2001:db8::99/64");
        temp.temporary = true;
        let addresses = vec![
            addr("ens10np0", "198.51.100.20/24"),
            addr("ens2np0", "198.51.100.12/24"),
            temp,
            addr("ens3np0", "198.51.100.13/24"),
            addr("eno1", "198.51.100.5/24"),
            addr("eno1", "203.0.113.5/24"),
            addr("wan0", "2001:db8:e::1/64"),
        ];
        let gw = Route::default_via(254, "198.51.100.1".parse().unwrap(), "eno1", 4);
        let gw = Route { metric: 100, ..gw };
        // A lower metric, but put `onlink` on a netdev off the rails' subnet.
        let onlink = Route::default_via(254, "198.51.100.254".parse().unwrap(), "wan0", 4);
        let host = Host { rdma: &rdma, links: &links, addresses: &addresses, routes: &[onlink, gw] };
        let d = discover(&host, &Selection::Rdma, "/sys").unwrap();
        assert_eq!(
            gateway_netdevs(&host, &d),
            ["ens2np0", "ens10np0", "ens3np0", "eno1"],
            "the rails, then the netdevs on their subnets; not wan0, not the address-less ens4np0"
        );
        let names: Vec<&str> = d.rails.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["ens2np0", "ens10np0"], "natural device order");
        assert_eq!(d.rails[0].gateways, ["198.51.100.1".parse::<IpAddr>().unwrap()], "the subnet's gateway");
        assert_eq!(d.inactive[0].name, "ens3np0");
        assert_eq!(d.arp_only[0].addresses, [prefix("198.51.100.5/24")], "only the address in a rail subnet");
        let what: Vec<&str> = d.left_out.iter().map(|l| l.what.as_str()).collect();
        assert_eq!(what, ["mlx5_bond_0 port 1", "ens4np0"]);
        let text = render(&d);
        assert!(text.contains("# mlx5_2 port 1: RoCE (Ethernet), 200 Gb/sec (4X HDR), ACTIVE, LinkUp\n# left out: 2001:db8::99/64 (temporary)\n[[interface]]\nname = \"ens2np0\"\naddresses = [\"198.51.100.12/24\"]\ngateway = \"198.51.100.1\"\n"), "{text}");
        assert!(text.contains("# [[interface]]\n# name = \"ens3np0\""), "{text}");
        assert!(text.contains("[[arp_only]]\nname = \"eno1\""), "{text}");
        // The text is a config that parses, with exactly the rails.
        let cfg = crate::config::parse("d.toml", &text).unwrap();
        let names: Vec<&str> = cfg.interfaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["ens2np0", "ens10np0"]);
        assert_eq!(cfg.arp_only[0].name, "eno1");
        // --json: the port's facts as fields, the names as sysfs writes them.
        assert_eq!(
            serde_json::to_string(&d.rails[0].rdma).unwrap(),
            r#"{"device":"mlx5_2","port":1,"link_layer":"Ethernet","rate":"200 Gb/sec (4X HDR)","state":"ACTIVE","phys_state":"LinkUp"}"#
        );
        let inactive = serde_json::to_value(&d.inactive[0].rdma).unwrap();
        assert_eq!((&inactive["state"], &inactive["phys_state"]), (&"DOWN".into(), &"Disabled".into()));
    }

    #[test]
    fn globs_take_any_netdev_and_must_match() {
        let rdma = Rdma::default();
        let links: Vec<Link> = ["rail0", "rail1", "peer0"].map(link).to_vec();
        let addresses = vec![addr("rail0", "198.51.100.10/24"), addr("rail1", "198.51.100.11/24")];
        let host = Host { rdma: &rdma, links: &links, addresses: &addresses, routes: &[] };
        let e = discover(&host, &Selection::Rdma, "/sys/").unwrap_err();
        assert!(matches!(e, DiscoverError::NoRdma(_)));
        assert!(e.to_string().starts_with("no RDMA device under /sys/class/infiniband"), "{e}");
        let d = discover(&host, &Selection::Globs(vec!["rail*".into()]), "/sys").unwrap();
        assert_eq!(d.rails.len(), 2);
        assert!(render(&d).contains("# rail0: no RDMA device found for this netdev (taken by name)"));
        let e = discover(&host, &Selection::Globs(vec!["rail*".into(), "ens*".into()]), "/sys").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--interfaces \"ens*\" matches no netdev in this network namespace (it has: peer0, rail0, rail1)"
        );
        let e = discover(&host, &Selection::Globs(vec!["peer*".into()]), "/sys").unwrap_err();
        assert_eq!(e.to_string(), "no rail found: peer0: has no global address");
    }

    /// Two ports of a PCI function without dev_port name one netdev: one
    /// [[interface]] (twice would be refused by apply).
    #[test]
    fn a_netdev_named_by_two_ports_is_written_once() {
        let mut second = port("mlx5_3", "enp1s0", true);
        second.port = 2;
        let rdma = Rdma { ports: vec![port("mlx5_3", "enp1s0", true), second] };
        let links = [link("enp1s0")];
        let addresses = [addr("enp1s0", "198.51.100.10/24")];
        let host = Host { rdma: &rdma, links: &links, addresses: &addresses, routes: &[] };
        let d = discover(&host, &Selection::Rdma, "/sys").unwrap();
        assert_eq!(d.rails.len(), 1);
        crate::config::parse("d.toml", &render(&d)).unwrap();
    }
}
