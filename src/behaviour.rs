//! Behaviour checks: which way would traffic from each configured address
//! really go? Pure: choosing probe destinations and judging the kernel's
//! answers (the lookups themselves are `Netlink::route_matched`).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::model::{Family, Prefix, Route, rtn};
use crate::plan::Desired;

/// One question for the kernel: from `src` to `dst`, we expect `dev` and
/// `table` (and `gateway` for off-subnet destinations).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Probe {
    pub interface: String,
    pub from: IpAddr,
    pub to: IpAddr,
    pub expected_dev: String,
    pub expected_table: u32,
    pub expected_gateway: Option<IpAddr>,
}

/// The kernel's answer to a probe, judged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    #[serde(flatten)]
    pub probe: Probe,
    pub dev: Option<String>,
    pub table: Option<u32>,
    pub gateway: Option<IpAddr>,
    pub error: Option<String>,
    pub ok: bool,
}

impl Verdict {
    /// "traffic from A to B leaves via X (table T), expected Y (table U)".
    pub fn describe(&self) -> String {
        let p = &self.probe;
        let actual = match (&self.error, &self.dev) {
            (Some(e), _) => format!("cannot be routed ({e})"),
            (None, dev) => format!(
                "leaves via {} (table {}{})",
                dev.as_deref().unwrap_or("?"),
                self.table.map_or("?".into(), table_name),
                self.gateway.map_or(String::new(), |g| format!(", via {g}"))
            ),
        };
        format!(
            "traffic from {} to {} {actual}; expected {} (table {}{})",
            p.from,
            p.to,
            p.expected_dev,
            p.expected_table,
            p.expected_gateway.map_or(String::new(), |g| format!(", via {g}"))
        )
    }
}

fn table_name(t: u32) -> String {
    match t {
        254 => "main".into(),
        253 => "default".into(),
        255 => "local".into(),
        n => n.to_string(),
    }
}

/// A probe that cannot be made, and why. `check` reports it as "not
/// verified" instead of leaving the address out silently.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub interface: String,
    pub from: IpAddr,
    /// Which probe and why, e.g. "to a peer on its subnet: ...".
    pub reason: String,
}

impl Skipped {
    /// "not verified: traffic from A (rail0) to a peer on its subnet: ...".
    pub fn describe(&self) -> String {
        format!("not verified: traffic from {} ({}) {}", self.from, self.interface, self.reason)
    }
}

/// The probes chosen, and the ones that could not be made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Probes {
    pub probes: Vec<Probe>,
    pub skipped: Vec<Skipped>,
}

impl Probes {
    fn extend(&mut self, other: Probes) {
        self.probes.extend(other.probes);
        self.skipped.extend(other.skipped);
    }
}

/// Probes for one interface. Each source is an address with the subnet it
/// reaches on-link (for a point-to-point address, the peer's prefix). For
/// each: a peer inside its subnet and, when the interface has a gateway of
/// that family, a destination that must leave via the gateway. That
/// destination lies outside every subnet of the interface (inside one, it
/// would match that subnet's connected route in the same table), outside
/// `avoid` (the other subnets of the config), and is neither a local
/// address of the host nor a gateway.
pub fn probes_for(
    interface: &str,
    table: u32,
    sources: &[(IpAddr, Prefix)],
    gateways: &[IpAddr],
    avoid: &[Prefix],
    local: &BTreeSet<IpAddr>,
) -> Probes {
    let mut subnets: Vec<Prefix> = sources.iter().map(|(_, s)| s.network()).collect();
    subnets.extend(avoid.iter().map(Prefix::network));
    // Not a copy of `local` with the gateways: a set of every address of
    // the host, copied for each of 32 rails, was 0.3 ms of a check.
    let taken = |c: &IpAddr| local.contains(c) || gateways.contains(c);
    let mut out = Probes::default();
    for &(from, subnet) in sources {
        let probe = |to: IpAddr, gw: Option<IpAddr>| Probe {
            interface: interface.to_string(),
            from,
            to,
            expected_dev: interface.to_string(),
            expected_table: table,
            expected_gateway: gw,
        };
        let skipped = |reason: String| Skipped { interface: interface.to_string(), from, reason };
        let family = Family::of(&from);
        let gw = gateways.iter().copied().find(|g| Family::of(g) == family);
        match peer_in_subnet(&subnet, gw, local) {
            Ok(peer) => out.probes.push(probe(peer, None)),
            Err(why) => out.skipped.push(skipped(format!("to a peer on its subnet: {why}"))),
        }
        if let Some(gw) = gw {
            match off_subnet(family, &subnets, taken) {
                Ok(far) => out.probes.push(probe(far, Some(gw))),
                Err(why) => out
                    .skipped
                    .push(skipped(format!("to a destination off its subnets (via gateway {gw}): {why}"))),
            }
        }
    }
    out
}

/// Probes for every planned address, each interface avoiding the subnets of
/// the whole desired state for its off-subnet destinations.
pub fn probes_for_desired(desired: &Desired, local: &BTreeSet<IpAddr>) -> Probes {
    let all: Vec<Prefix> = desired.interfaces.iter().flat_map(|i| i.subnets.iter().copied()).collect();
    let mut out = Probes::default();
    for i in &desired.interfaces {
        let sources: Vec<(IpAddr, Prefix)> =
            i.addresses.iter().map(|a| a.addr).zip(i.subnets.iter().copied()).collect();
        out.extend(probes_for(&i.name, i.table, &sources, &i.gateways, &all, local));
    }
    out
}

/// Probes for one source address of an owned rule, from the owned routes
/// alone (`show` has no config): the subnet of `from` is the connected route
/// of its table whose source it is (a point-to-point peer's prefix does not
/// hold it), else one holding it; the gateways are those of the table's
/// default routes; every connected route of `routes` is avoided.
pub fn probes_from_routes(
    interface: &str,
    table: u32,
    from: IpAddr,
    routes: &[Route],
    local: &BTreeSet<IpAddr>,
) -> Probes {
    let connected = |r: &Route| r.gateway.is_none() && !r.dst.is_default() && r.kind == rtn::UNICAST;
    let in_table: Vec<&Route> = routes.iter().filter(|r| r.table == table).collect();
    let subnet = in_table
        .iter()
        .find(|r| connected(r) && r.prefsrc == Some(from))
        .or_else(|| in_table.iter().find(|r| connected(r) && r.dst.contains(&from)))
        .map_or(Prefix::host(from), |r| r.dst);
    let gateways: Vec<IpAddr> =
        in_table.iter().filter(|r| r.dst.is_default()).filter_map(|r| r.gateway).collect();
    let avoid: Vec<Prefix> = routes.iter().filter(|r| connected(r)).map(|r| r.dst).collect();
    probes_for(interface, table, &[(from, subnet)], &gateways, &avoid, local)
}

/// At most this many host addresses of a subnet are tried as the peer.
const PEER_TRIES: u128 = 1024;

/// A destination inside `subnet` that is not a local address: the gateway
/// when it is there, else the first host address that is not local. The
/// error says why there is none.
pub fn peer_in_subnet(
    subnet: &Prefix,
    gw: Option<IpAddr>,
    local: &BTreeSet<IpAddr>,
) -> Result<IpAddr, String> {
    let net = subnet.network();
    if let Some(g) = gw.filter(|g| net.contains(g) && !local.contains(g)) {
        return Ok(g);
    }
    let (first, count) = host_offsets(&net);
    let tries = count.min(PEER_TRIES);
    if let Some(peer) = (first..first + tries).map(|i| offset(net.addr, i)).find(|ip| !local.contains(ip)) {
        return Ok(peer);
    }
    Err(if count == 1 {
        format!(
            "{net} holds no address but this host's own (a host prefix without a point-to-point peer has no neighbour to ask about)"
        )
    } else if tries == count {
        format!("every host address of {net} is an address of this host")
    } else {
        format!("the first {tries} host addresses of {net} are all addresses of this host")
    })
}

/// The host addresses of a network as (first offset, count): a single
/// address prefix has its one address, /31 and /127 both (RFC 3021, 6164);
/// larger IPv4 subnets lose their network and broadcast addresses, larger
/// IPv6 ones their subnet-router anycast address.
fn host_offsets(net: &Prefix) -> (u128, u128) {
    let family = net.family();
    let bits = u32::from(family.max_len() - net.len.min(family.max_len()));
    let size = 1u128.checked_shl(bits).unwrap_or(u128::MAX);
    match (family, bits) {
        (_, 0) => (0, 1),
        (_, 1) => (0, 2),
        (Family::V4, _) => (1, size - 2),
        (Family::V6, _) => (1, size - 1),
    }
}

/// Candidate off-subnet destinations, in order: documentation ranges
/// (RFC 5737, RFC 3849, RFC 9637) first, then benchmarking ranges (RFC 2544,
/// RFC 5180); TEST-NET-1 (192.0.2.0/24) last. They only go into route
/// lookups: no packet is sent to them.
const V4_CANDIDATES: [Ipv4Addr; 8] = [
    Ipv4Addr::new(203, 0, 113, 1),
    Ipv4Addr::new(198, 51, 100, 1),
    Ipv4Addr::new(203, 0, 113, 254),
    Ipv4Addr::new(198, 51, 100, 254),
    Ipv4Addr::new(198, 18, 0, 1),
    Ipv4Addr::new(198, 19, 255, 254),
    Ipv4Addr::new(192, 0, 2, 1),
    Ipv4Addr::new(192, 0, 2, 254),
];
const V6_CANDIDATES: [Ipv6Addr; 6] = [
    Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0x2001, 0xdb8, 0x8000, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0x3fff, 0xfff, 0xffff, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 1),
    Ipv6Addr::new(0x2001, 0x2, 0, 0, 0, 0, 0, 1),
];

fn candidates(family: Family) -> Vec<IpAddr> {
    match family {
        Family::V4 => V4_CANDIDATES.iter().map(|a| IpAddr::V4(*a)).collect(),
        Family::V6 => V6_CANDIDATES.iter().map(|a| IpAddr::V6(*a)).collect(),
    }
}

/// A destination of `family` outside every subnet in `avoid` and not
/// `taken` (a local address, a gateway), to exercise the default route.
/// The error says why there is none.
pub fn off_subnet(
    family: Family,
    avoid: &[Prefix],
    taken: impl Fn(&IpAddr) -> bool,
) -> Result<IpAddr, String> {
    let all = candidates(family);
    if let Some(far) = all.iter().copied().find(|c| !taken(c) && !avoid.iter().any(|s| s.contains(c))) {
        return Ok(far);
    }
    let subnets: BTreeSet<String> =
        avoid.iter().filter(|s| s.family() == family).map(|s| s.network().to_string()).collect();
    Err(format!(
        "every candidate destination ({}) is inside a subnet of the config ({}) or an address of this host",
        all.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        subnets.into_iter().collect::<Vec<_>>().join(", ")
    ))
}

fn offset(ip: IpAddr, i: u128) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a).wrapping_add(i as u32))),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a).wrapping_add(i))),
    }
}

/// Judges the kernel's answer (or error) to a probe.
pub fn judge(probe: &Probe, answer: Result<&Route, String>) -> Verdict {
    match answer {
        Err(error) => Verdict {
            probe: probe.clone(),
            dev: None,
            table: None,
            gateway: None,
            error: Some(error),
            ok: false,
        },
        Ok(route) => {
            let ok = route.oif.as_deref() == Some(probe.expected_dev.as_str())
                && route.table == probe.expected_table
                && (probe.expected_gateway.is_none() || route.gateway == probe.expected_gateway);
            Verdict {
                probe: probe.clone(),
                dev: route.oif.clone(),
                table: Some(route.table),
                gateway: route.gateway,
                error: None,
                ok,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        let (ip, len) = s.split_once('/').unwrap();
        Prefix::new(ip.parse().unwrap(), len.parse().unwrap())
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn no_local() -> BTreeSet<IpAddr> {
        BTreeSet::new()
    }

    /// The probes for one interface whose sources are "ADDR/LEN" strings
    /// (the subnet is the address's own network).
    fn probes(sources: &[&str], gateways: &[&str], avoid: &[&str], local: &[&str]) -> Probes {
        let sources: Vec<(IpAddr, Prefix)> = sources.iter().map(|s| (p(s).addr, p(s).network())).collect();
        let gateways: Vec<IpAddr> = gateways.iter().map(|g| ip(g)).collect();
        let avoid: Vec<Prefix> = avoid.iter().map(|a| p(a)).collect();
        let local: BTreeSet<IpAddr> = local.iter().map(|l| ip(l)).collect();
        probes_for("rail1", 101, &sources, &gateways, &avoid, &local)
    }

    /// The off-subnet probes (those expecting a gateway) of `set`.
    fn far(set: &Probes) -> Vec<&Probe> {
        set.probes.iter().filter(|p| p.expected_gateway.is_some()).collect()
    }

    #[test]
    fn peer_skips_local_addresses_and_prefers_the_gateway() {
        let local = BTreeSet::from([ip("198.51.100.1"), ip("198.51.100.10")]);
        assert_eq!(peer_in_subnet(&p("198.51.100.10/24"), None, &local), Ok(ip("198.51.100.2")));
        let gw = Some(ip("198.51.100.254"));
        assert_eq!(peer_in_subnet(&p("198.51.100.10/24"), gw, &local), Ok(ip("198.51.100.254")));
        assert_eq!(peer_in_subnet(&p("2001:db8:1::10/64"), None, &no_local()), Ok(ip("2001:db8:1::1")));
    }

    #[test]
    fn gateway_adds_an_off_subnet_probe() {
        let set = probes(&["198.51.100.11/24"], &["198.51.100.1"], &[], &[]);
        assert_eq!(set.probes.len(), 2);
        assert!(set.skipped.is_empty());
        assert_eq!(set.probes[1].expected_gateway, Some(ip("198.51.100.1")));
        assert_eq!(set.probes[1].to, ip("203.0.113.1"));
    }

    /// The review's case: a rail with addresses in two subnets. A destination
    /// in the other subnet matches its connected route in the same table, so
    /// the kernel never answers "via the gateway" and check would report a
    /// difference that no apply can fix.
    #[test]
    fn off_subnet_destination_is_outside_every_subnet_of_the_interface() {
        let cases: &[(&[&str], &str)] = &[
            (&["198.51.100.11/24", "203.0.113.11/24"], "198.51.100.1"),
            (&["203.0.113.11/24", "198.51.100.11/24"], "203.0.113.1"),
            // Narrow subnets: the first candidates fall in one or the other.
            (
                &["198.51.100.11/25", "203.0.113.11/25", "203.0.113.200/25", "198.51.100.130/26"],
                "198.51.100.1",
            ),
            // IPv6 with several subnets, dual-stack with IPv4.
            (&["2001:db8::10/64", "2001:db8:ffff::10/48", "198.51.100.11/24"], "2001:db8::1"),
            (&["2001:db8:1::10/64", "2001:db8::/33", "2001:db8:8000::10/33"], "2001:db8:1::1"),
        ];
        for (sources, gw) in cases {
            let subnets: Vec<Prefix> = sources.iter().map(|s| p(s).network()).collect();
            let set = probes(sources, &[gw], &[], &[]);
            let same_family = sources.iter().filter(|s| p(s).family() == Family::of(&ip(gw))).count();
            assert_eq!(far(&set).len(), same_family, "{sources:?}: {set:#?}");
            for probe in far(&set) {
                assert!(
                    !subnets.iter().any(|s| s.contains(&probe.to)),
                    "{} from {} is inside a subnet of the interface {sources:?}",
                    probe.to,
                    probe.from
                );
                assert_eq!(probe.expected_gateway, Some(ip(gw)));
            }
        }
    }

    #[test]
    fn off_subnet_destination_avoids_local_addresses_and_the_whole_config() {
        // 203.0.113.1 is this host's own (say, a management address): the
        // local table would answer for it.
        let set = probes(&["198.51.100.11/24"], &["198.51.100.1"], &[], &["203.0.113.1"]);
        assert_ne!(far(&set)[0].to, ip("203.0.113.1"));
        assert!(!p("198.51.100.0/24").contains(&far(&set)[0].to), "{set:#?}");
        // Another rail's subnet is avoided too.
        let set = probes(&["198.51.100.11/24"], &["198.51.100.1"], &["203.0.113.0/24"], &[]);
        assert!(!p("203.0.113.0/24").contains(&far(&set)[0].to), "{set:#?}");
        // An on-link gateway outside every subnet is never the destination.
        let set = probes(&["198.51.100.7/32"], &["203.0.113.1"], &[], &[]);
        assert_ne!(far(&set)[0].to, ip("203.0.113.1"));
        assert_eq!(far(&set)[0].expected_gateway, Some(ip("203.0.113.1")));
    }

    #[test]
    fn no_destination_left_is_skipped_with_a_reason() {
        // A /1 holds every candidate of its family.
        for (src, gw) in [("198.51.100.10/1", "198.51.100.1"), ("2001:db8::10/1", "2001:db8::1")] {
            let set = probes(&[src], &[gw], &[], &[]);
            assert!(far(&set).is_empty(), "{set:#?}");
            assert_eq!(set.probes.len(), 1, "the peer probe stays: {set:#?}");
            assert_eq!(set.skipped.len(), 1);
            let s = set.skipped[0].describe();
            assert!(s.starts_with(&format!("not verified: traffic from {} (rail1) ", p(src).addr)), "{s}");
            assert!(s.contains(&format!("via gateway {gw}")), "{s}");
            assert!(s.contains(&p(src).network().to_string()), "{s}");
        }
    }

    #[test]
    fn peer_probe_without_a_peer_is_skipped_with_a_reason() {
        // A /32 or /128 without a point-to-point peer has no neighbour.
        for src in ["198.51.100.7/32", "2001:db8::7/128"] {
            let set = probes(&[src], &[], &[], &[p(src).addr.to_string().as_str()]);
            assert!(set.probes.is_empty(), "{set:#?}");
            assert_eq!(set.skipped.len(), 1);
            let s = set.skipped[0].describe();
            assert!(s.contains("to a peer on its subnet") && s.contains(src), "{s}");
        }
        // Every host of a /30 is local: never its broadcast address.
        let set = probes(&["198.51.100.9/30"], &[], &[], &["198.51.100.9", "198.51.100.10"]);
        assert!(set.probes.is_empty(), "{set:#?}");
        assert!(set.skipped[0].reason.contains("every host address of 198.51.100.8/30"), "{set:#?}");
        // /31 and /127 have two hosts (RFC 3021, RFC 6164), and no other.
        assert_eq!(
            peer_in_subnet(&p("198.51.100.1/31"), None, &BTreeSet::from([ip("198.51.100.1")])),
            Ok(ip("198.51.100.0"))
        );
        assert_eq!(
            peer_in_subnet(&p("198.51.100.0/31"), None, &BTreeSet::from([ip("198.51.100.0")])),
            Ok(ip("198.51.100.1"))
        );
        assert_eq!(
            peer_in_subnet(&p("2001:db8::/127"), None, &BTreeSet::from([ip("2001:db8::")])),
            Ok(ip("2001:db8::1"))
        );
        // A big subnet whose first hosts are all local says how many it tried.
        let base = u128::from("2001:db8::".parse::<Ipv6Addr>().unwrap());
        let local: BTreeSet<IpAddr> = (1..=1024).map(|i| IpAddr::V6(Ipv6Addr::from(base + i))).collect();
        let e = peer_in_subnet(&p("2001:db8::1/64"), None, &local).unwrap_err();
        assert!(e.contains("the first 1024 host addresses of 2001:db8::/64"), "{e}");
    }

    #[test]
    fn owned_routes_give_the_subnets_and_gateways() {
        let src = ip("198.51.100.10");
        let routes = [
            Route::connected(100, p("198.51.100.0/24"), "rail0", src, 234),
            Route::connected(100, p("203.0.113.0/24"), "rail0", ip("203.0.113.10"), 234),
            Route::default_via(100, ip("198.51.100.1"), "rail0", 234),
            Route::connected(101, p("2001:db8:1::/64"), "rail1", ip("2001:db8:1::11"), 234),
        ];
        let set = probes_from_routes("rail0", 100, src, &routes, &BTreeSet::from([src]));
        assert_eq!(set.probes.len(), 2, "{set:#?}");
        assert_eq!(set.probes[0].to, ip("198.51.100.1"));
        assert!(!p("203.0.113.0/24").contains(&set.probes[1].to), "{set:#?}");
        assert_eq!(set.probes[1].expected_gateway, Some(ip("198.51.100.1")));
    }

    #[test]
    fn verdict_flags_the_wrong_interface_or_table() {
        let probe = &probes(&["198.51.100.11/24"], &[], &[], &[]).probes[0];
        // What `ip route get 198.51.100.1 from 198.51.100.11` answers.
        let mut r = Route::connected(101, p("198.51.100.1/32"), "rail1", ip("198.51.100.11"), 0);
        assert!(judge(probe, Ok(&r)).ok);
        r.oif = Some("rail0".into());
        r.table = 254;
        let v = judge(probe, Ok(&r));
        assert!(!v.ok);
        assert_eq!(
            v.describe(),
            "traffic from 198.51.100.11 to 198.51.100.1 leaves via rail0 (table main); expected rail1 (table 101)"
        );
        assert!(!judge(probe, Err("Network is unreachable".into())).ok);
    }
}
