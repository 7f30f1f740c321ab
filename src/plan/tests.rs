use super::*;
use crate::config;
use std::net::IpAddr;

use crate::model::{Family, IPV6_DEFAULT_METRIC, SysctlKey, fr_act, scope};

fn link(index: u32, name: &str) -> Link {
    Link::up(index, name)
}
fn addr(ifname: &str, a: &str) -> Address {
    let (ip, len) = a.split_once('/').unwrap();
    Address {
        ifname: ifname.into(),
        addr: Prefix::new(ip.parse().unwrap(), len.parse().unwrap()),
        scope: 0,
        ..Address::default()
    }
}
fn pfx(a: &str) -> Prefix {
    addr("", a).addr
}
fn host() -> (Vec<Link>, Vec<Address>) {
    let links = vec![link(1, "lo"), link(2, "rail0"), link(3, "rail1")];
    let addrs = vec![
        Address { scope: scope::HOST, ..addr("lo", "127.0.0.1/8") },
        addr("rail0", "198.51.100.10/24"),
        addr("rail0", "2001:db8:1::10/64"),
        Address { scope: scope::LINK, ..addr("rail0", "fe80::1/64") },
        addr("rail1", "198.51.100.11/24"),
    ];
    (links, addrs)
}
/// `ip addr add LOCAL peer PEER/LEN dev IFNAME`.
fn p2p(ifname: &str, local: &str, peer: &str) -> Address {
    let (peer, len) = peer.split_once('/').unwrap();
    Address { peer: Some(peer.parse().unwrap()), ..addr(ifname, &format!("{local}/{len}")) }
}
/// The plan of `toml` on a host with links lo, rail0, rail1 and `addrs`.
fn plan_on(addrs: &[Address], toml: &str) -> Result<Desired, ConfigError> {
    let (links, _) = host();
    let cfg = config::parse("t.toml", toml).unwrap_or_else(|e| panic!("invalid config:\n{e}"));
    plan(&cfg, &links, addrs)
}
fn planned(toml: &str) -> Result<Desired, ConfigError> {
    let cfg = config::parse("t.toml", toml).expect("valid config");
    let (links, addrs) = host();
    plan(&cfg, &links, &addrs)
}

#[test]
fn four_entries_per_address_the_guide_way() {
    let d = planned(
        r#"
        [[interface]]
        name = "rail0"
        addresses = ["198.51.100.10/24"]
        gateway = "198.51.100.1"
        [[interface]]
        name = "rail1"
        "#,
    )
    .unwrap();
    assert_eq!(d.tables(), BTreeSet::from([100, 101]));
    let r0: Vec<&Route> = d.routes.iter().filter(|r| r.table == 100).collect();
    assert_eq!(r0.len(), 2);
    assert_eq!(r0[0].dst.to_string(), "198.51.100.0/24");
    assert_eq!(r0[0].scope, scope::LINK);
    assert_eq!(r0[0].prefsrc, Some("198.51.100.10".parse().unwrap()));
    assert_eq!(r0[1].gateway, Some("198.51.100.1".parse().unwrap()));
    assert!(r0[1].dst.is_default());
    assert_eq!(d.rules.len(), 2);
    assert!(
        d.rules.iter().all(|r| r.action == fr_act::TO_TBL && r.priority == 1000 && r.protocol == d.protocol)
    );
    let s: Vec<(&str, SysctlKey, u32)> =
        d.sysctls.iter().map(|s| (s.iface.as_str(), s.key, s.value)).collect();
    assert!(s.contains(&("rail1", SysctlKey::ArpIgnore, 1)));
    assert!(s.contains(&("rail1", SysctlKey::ArpAnnounce, 2)));
}

/// An [[arp_only]] interface gets its sysctls and nothing else: no
/// table, route, rule or probe, whatever addresses it has.
#[test]
fn arp_only_gets_sysctls_only() {
    let (mut links, mut addrs) = host();
    links.push(link(4, "eno1"));
    addrs.push(addr("eno1", "198.51.100.50/24"));
    let text = "[[interface]]\nname = \"rail0\"\n[[arp_only]]\nname = \"eno1\"\narp_filter = 1\n";
    let cfg = config::parse("t.toml", text).unwrap();
    let d = plan(&cfg, &links, &addrs).unwrap();
    assert_eq!(d.interfaces.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(), ["rail0"]);
    assert_eq!(d.tables(), BTreeSet::from([100]));
    assert!(d.routes.iter().all(|r| r.oif.as_deref() == Some("rail0")), "{:#?}", d.routes);
    assert!(!d.source_addresses().contains(&"198.51.100.50".parse().unwrap()));
    let eno1: Vec<(SysctlKey, u32)> =
        d.sysctls.iter().filter(|s| s.iface == "eno1").map(|s| (s.key, s.value)).collect();
    assert_eq!(eno1, [(SysctlKey::ArpIgnore, 1), (SysctlKey::ArpAnnounce, 2), (SysctlKey::ArpFilter, 1)]);
    assert_eq!(d.arp_only, ["eno1"]);
    assert!(d.names("eno1") && d.names("rail0") && !d.names("rail1"));
    let set = crate::behaviour::probes_for_desired(&d, &BTreeSet::new());
    assert!(set.probes.iter().all(|p| p.interface == "rail0"), "{set:#?}");
    // Missing, it is not ready, like a rail (partial hosts).
    let cfg =
        config::parse("t.toml", "[[interface]]\nname = \"rail0\"\n[[arp_only]]\nname = \"eno9\"\n").unwrap();
    let d = plan(&cfg, &links, &addrs).unwrap();
    assert!(
        d.not_ready.iter().any(|n| n.describe().starts_with("eno9: does not exist")),
        "{:?}",
        d.not_ready
    );
    assert!(d.keep.sysctls_of.contains("eno9"));
}

/// Issue 27: a misspelt interface is not ready (exit 5, which the boot
/// unit accepts): the line suggests the closest link the config does not
/// name. A rail that is gone gets no suggestion of a rail in the config.
#[test]
fn an_absent_interface_suggests_the_closest_unconfigured_link() {
    let d = planned("[[interface]]\nname = \"rail0\"\n[[interface]]\nname = \"rail9\"\n").unwrap();
    assert_eq!(
        d.not_ready[0].describe(),
        "rail9: does not exist on this host (it has: lo, rail0, rail1); did you mean rail1?"
    );
    let d = planned(
        "[[interface]]\nname = \"rail0\"\n[[interface]]\nname = \"rail1\"\n[[interface]]\nname = \"rail2\"\n",
    )
    .unwrap();
    assert_eq!(d.not_ready[0].describe(), "rail2: does not exist on this host (it has: lo, rail0, rail1)");
    let d = planned("[[interface]]\nname = \"mlx5_0\"\n").unwrap();
    assert!(!d.not_ready[0].describe().contains("did you mean"), "{:?}", d.not_ready);
}

#[test]
fn absent_addresses_take_every_global_address() {
    let d = planned("[[interface]]\nname = \"rail0\"\n").unwrap();
    let a: Vec<String> = d.interfaces[0].addresses.iter().map(|a| a.to_string()).collect();
    assert_eq!(a, ["198.51.100.10/24", "2001:db8:1::10/64"]);
    let v6 = d.routes.iter().find(|r| r.family == Family::V6).unwrap();
    assert_eq!((v6.metric, v6.scope), (IPV6_DEFAULT_METRIC, scope::UNIVERSE));
}

#[test]
fn bare_address_takes_the_live_prefix() {
    let d = planned("[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10\"]\n").unwrap();
    assert_eq!(d.interfaces[0].addresses[0].to_string(), "198.51.100.10/24");
}

#[test]
fn host_errors_name_the_object_and_place() {
    // What the host lacks is not ready, not an error: the other rails go on.
    let d = planned("[[interface]]\nname = \"ib9\"\n[[interface]]\nname = \"rail1\"\n").unwrap();
    assert_eq!(d.not_ready.len(), 1, "{:?}", d.not_ready);
    assert!(d.not_ready[0].describe().starts_with("ib9: does not exist on this host"), "{:?}", d.not_ready);
    assert_eq!(d.keep.tables, BTreeSet::from([100]), "ib9's table is kept as it is");
    assert_eq!(d.interfaces.len(), 1);
    assert_eq!(d.interfaces[0].name, "rail1");
    let d = planned("[[interface]]\nname = \"rail1\"\naddresses = [\"198.51.100.99/24\"]\n").unwrap();
    let r = d.not_ready[0].describe();
    assert!(
        r.starts_with("198.51.100.99 on rail1: rail1 does not have it") && r.contains("t.toml:3:"),
        "{r}"
    );
    let e = planned("[[interface]]\nname = \"rail1\"\ngateway = \"203.0.113.1\"\n").unwrap_err();
    assert!(e.what.contains("outside every subnet"), "{e}");
}

#[test]
fn gateway_checks_use_the_live_addresses_when_the_config_has_none() {
    let e = planned("[[interface]]\nname = \"rail0\"\ngateway = \"198.51.100.255\"\n").unwrap_err();
    assert!(e.what.contains("is the broadcast address of 198.51.100.0/24"), "{e}");
}

/// The gateway is one of the host's addresses now (a VIP moved here, a
/// typo on another NIC): host state, so that gateway is not ready, its
/// route kept; the rest of the rail and the other rails are planned.
/// The config check still refuses a gateway it lists as an address.
#[test]
fn a_gateway_that_is_a_host_address_is_not_ready() {
    let toml = "[[interface]]\nname = \"rail0\"\ngateway = [\"198.51.100.11\", \"2001:db8:1::1\"]\n\
                [[interface]]\nname = \"rail1\"\n";
    let d = planned(toml).unwrap();
    assert_eq!(d.not_ready.len(), 1, "{:#?}", d.not_ready);
    let nr = &d.not_ready[0];
    assert_eq!(
        (nr.interface.as_str(), nr.subject),
        ("rail0", Subject::Gateway("198.51.100.11".parse().unwrap()))
    );
    assert!(nr.reason.starts_with("is this host's own address (on rail1)"), "{}", nr.reason);
    assert!(nr.reason.contains("(`ip addr del 198.51.100.11/24 dev rail1`)"), "{}", nr.reason);
    assert!(nr.reason.contains("fix the gateway at t.toml:3:"), "{}", nr.reason);
    assert_eq!(d.keep.gateways, BTreeSet::from([(100, "198.51.100.11".parse().unwrap())]));
    assert!(d.keep.sources.is_empty() && d.keep.tables.is_empty(), "{:?}", d.keep);
    // rail0's addresses and other gateway, and rail1, are planned.
    let gws: Vec<IpAddr> = d.routes.iter().filter_map(|r| r.gateway).collect();
    assert_eq!(gws, ["2001:db8:1::1".parse::<IpAddr>().unwrap()]);
    assert_eq!(d.rules.len(), 3, "{:#?}", d.rules);
    assert_eq!(d.interfaces.len(), 2);
    // Listed as an address in the config, it is the config's fault.
    let toml = "[[interface]]\nname = \"rail1\"\naddresses = [\"198.51.100.11/24\"]\n\
                [[interface]]\nname = \"rail0\"\ngateway = \"198.51.100.11\"\n";
    let e = config::parse("t.toml", toml).unwrap_err();
    assert!(e.what.contains("gateway 198.51.100.11 is an address of interface \"rail1\""), "{e}");
}

/// A listed length the host does not have: the address was re-added with
/// another length, or the config is wrong; either way host state. Not
/// ready, kept (still on the interface, its rule still right), the rest
/// planned; the reason's commands fix either side.
#[test]
fn a_listed_length_the_host_does_not_have_is_not_ready() {
    let toml = "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10/25\", \"2001:db8:1::10\"]\n\
                [[interface]]\nname = \"rail1\"\n";
    let d = planned(toml).unwrap();
    assert_eq!(d.not_ready.len(), 1, "{:#?}", d.not_ready);
    let r = d.not_ready[0].describe();
    assert!(
        r.starts_with(
            "198.51.100.10 on rail0: rail0 has it as 198.51.100.10/24, but t.toml:3:14 lists it as \
             198.51.100.10/25: its entries stay as they are"
        ),
        "{r}"
    );
    assert!(
        r.contains("(`ip addr del 198.51.100.10/24 dev rail0; ip addr add 198.51.100.10/25 dev rail0`)"),
        "{r}"
    );
    assert!(r.contains("or write \"198.51.100.10/24\" (or just \"198.51.100.10\") at t.toml:3:14"), "{r}");
    let ip: IpAddr = "198.51.100.10".parse().unwrap();
    assert_eq!(d.keep.sources, BTreeSet::from([ip]));
    assert_eq!(d.keep.subnets_of, BTreeSet::from([(100, ip)]));
    let sources: Vec<String> = d.rules.iter().map(|r| r.src.unwrap().addr.to_string()).collect();
    assert_eq!(sources, ["2001:db8:1::10", "198.51.100.11"]);
    assert!(d.keep.rule(&Rule::source(1000, ip, 100, d.protocol)));
    // The connected route of 198.51.100.0/24 with it as the source stays.
    let old = Route::connected(100, Prefix::new(ip, 24).network(), "rail0", ip, d.protocol);
    assert!(d.keep.route(&old));
    // A point-to-point address is re-added with its peer.
    let host = [p2p("rail0", "198.51.100.1", "198.51.100.0/31")];
    let d = plan_on(&host, "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.1/32\"]\n").unwrap();
    let r = d.not_ready[0].describe();
    assert!(
        r.contains(
            "(`ip addr del 198.51.100.1 peer 198.51.100.0/31 dev rail0; ip addr add 198.51.100.1 peer \
             198.51.100.0/32 dev rail0`)"
        ),
        "{r}"
    );
}

#[test]
fn ipv6_link_local_gateway_is_on_link() {
    let d = planned("[[interface]]\nname = \"rail0\"\ngateway = [\"fe80::fe\", \"198.51.100.1\"]\n").unwrap();
    assert_eq!(d.routes.iter().filter(|r| r.gateway.is_some()).count(), 2);
}

#[test]
fn one_connected_route_per_subnet() {
    let (links, mut addrs) = host();
    addrs.push(addr("rail0", "198.51.100.20/24"));
    let cfg = config::parse(
        "t.toml",
        "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10/24\", \"198.51.100.20/24\"]\n",
    )
    .unwrap();
    let d = plan(&cfg, &links, &addrs).unwrap();
    assert_eq!(d.routes.len(), 1);
    assert_eq!(d.rules.len(), 2);
}

/// A point-to-point address reaches its peer's prefix, not its own: the
/// connected route is the peer's, the peer is a valid gateway, and the
/// probes ask about the peer. Listed or discovered, /32, /31 or /128.
#[test]
fn point_to_point_subnet_is_the_peers() {
    let cases = [
        // (local, peer/len, the route apply must make)
        (
            "198.51.100.1",
            "198.51.100.0/32",
            "ip -4 route: 198.51.100.0/32 dev rail0 table 100 proto 234 scope link src 198.51.100.1",
        ),
        (
            "198.51.100.9",
            "203.0.113.0/31",
            "ip -4 route: 203.0.113.0/31 dev rail0 table 100 proto 234 scope link src 198.51.100.9",
        ),
        (
            "198.51.100.1",
            "198.51.100.0/31",
            "ip -4 route: 198.51.100.0/31 dev rail0 table 100 proto 234 scope link src 198.51.100.1",
        ),
        (
            "2001:db8::1",
            "2001:db8::2/128",
            "ip -6 route: 2001:db8::2/128 dev rail0 table 100 proto 234 src 2001:db8::1 metric 1024",
        ),
    ];
    for (local, peer, route) in cases {
        let (gw, len) = peer.split_once('/').unwrap();
        let host = [p2p("rail0", local, peer), addr("rail1", "198.51.100.11/24")];
        for listed in [String::new(), format!("addresses = [\"{local}/{len}\"]\n")] {
            let toml = format!("[[interface]]\nname = \"rail0\"\n{listed}gateway = \"{gw}\"\n");
            let d = plan_on(&host, &toml).unwrap_or_else(|e| panic!("{toml}\n{e}"));
            let lines: Vec<String> = d.routes.iter().map(crate::render::route_line).collect();
            assert_eq!(lines.len(), 2, "{lines:#?}");
            assert_eq!(lines[0], route);
            assert_eq!(d.routes[1].gateway, Some(gw.parse().unwrap()), "{lines:#?}");
            let local_set = BTreeSet::from([local.parse().unwrap()]);
            let set = crate::behaviour::probes_for_desired(&d, &local_set);
            assert!(set.skipped.is_empty(), "{set:#?}");
            let to: Vec<(String, Option<IpAddr>)> =
                set.probes.iter().map(|p| (p.to.to_string(), p.expected_gateway)).collect();
            assert_eq!(to[0], (gw.to_string(), None), "the peer itself: {to:?}");
            assert_eq!(to[1].1, Some(gw.parse().unwrap()));
        }
    }
}

#[test]
fn gateway_outside_a_host_prefix_without_peer_is_refused() {
    let host = [addr("rail0", "198.51.100.7/32")];
    let e = plan_on(&host, "[[interface]]\nname = \"rail0\"\ngateway = \"203.0.113.1\"\n").unwrap_err();
    assert!(e.what.contains("gateway 203.0.113.1 of \"rail0\" is outside every subnet"), "{e}");
    assert!(e.what.contains("198.51.100.7/32"), "{e}");
    assert_eq!(e.loc.map(|l| (l.line, l.col)), Some((3, 11)));
    // The same when the config lists the /32 (the config cannot tell it
    // has no peer, so the host check decides).
    let toml =
        "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.7/32\"]\ngateway = \"198.51.100.6\"\n";
    let e = plan_on(&host, toml).unwrap_err();
    assert!(e.what.contains("outside every subnet"), "{e}");
    assert_eq!(e.loc.map(|l| (l.line, l.col)), Some((4, 11)));
}

/// The kernel makes no route for a /32 or /128 without a peer: the local
/// table delivers to it and there is no neighbour. Neither does plan, and
/// without a gateway its traffic falls through to main: say so.
#[test]
fn host_prefix_without_peer_has_no_connected_route() {
    for (a, bare) in [("198.51.100.7/32", "198.51.100.7"), ("2001:db8::7/128", "2001:db8::7")] {
        let host = [addr("rail1", a)];
        let d = plan_on(&host, "[[interface]]\nname = \"rail1\"\n").unwrap();
        assert!(d.routes.is_empty(), "{:#?}", d.routes);
        assert_eq!(d.rules.len(), 1);
        assert!(
            d.warnings
                .iter()
                .any(|w| w.starts_with(&format!("{a} on rail1 has no peer")) && w.contains("table 100")),
            "{:#?}",
            d.warnings
        );
        let toml = format!("[[interface]]\nname = \"rail1\"\naddresses = [\"{bare}\"]\n");
        assert!(plan_on(&host, &toml).unwrap().routes.is_empty());
    }
}

/// BGP to the host: `ip addr add 198.51.100.7/32 dev rail0`, default
/// route `via 203.0.113.1 dev rail0 onlink`.
#[test]
fn onlink_gateway_for_a_host_address() {
    let cases = [
        (
            "198.51.100.7/32",
            "203.0.113.1",
            "ip -4 route add default via 203.0.113.1 dev rail0 table 100 proto 234 scope global onlink",
        ),
        (
            "2001:db8::7/128",
            "2001:db8:ffff::1",
            "ip -6 route add default via 2001:db8:ffff::1 dev rail0 table 100 proto 234 metric 1024 onlink",
        ),
    ];
    for (a, gw, command) in cases {
        let host = [addr("rail0", a)];
        let gateway = format!("gateway = {{ address = \"{gw}\", onlink = true }}\n");
        for listed in [String::new(), format!("addresses = [\"{a}\"]\n")] {
            let d = plan_on(&host, &format!("[[interface]]\nname = \"rail0\"\n{listed}{gateway}")).unwrap();
            assert_eq!(d.routes.len(), 1, "{:#?}", d.routes);
            let op = crate::model::Op::AddRoute { route: d.routes[0].clone() };
            assert_eq!(crate::render::command(&op), command);
            assert_eq!(d.interfaces[0].onlink_gateways, [gw.parse::<IpAddr>().unwrap()]);
            assert!(d.warnings.is_empty(), "{:#?}", d.warnings);
            let local = BTreeSet::from([a.split('/').next().unwrap().parse::<IpAddr>().unwrap()]);
            let set = crate::behaviour::probes_for_desired(&d, &local);
            assert_eq!(set.probes.len(), 1, "{set:#?}");
            assert_eq!(set.probes[0].expected_gateway, Some(gw.parse().unwrap()));
            assert_ne!(set.probes[0].to, gw.parse::<IpAddr>().unwrap());
            assert_eq!(set.skipped.len(), 1, "no peer on a bare /32: {set:#?}");
        }
        // Without `onlink` it is refused, with the way to say it.
        let e =
            plan_on(&host, &format!("[[interface]]\nname = \"rail0\"\ngateway = \"{gw}\"\n")).unwrap_err();
        assert!(e.what.contains("outside every subnet"), "{e}");
        assert!(e.hint.contains("onlink = true"), "{e}");
    }
}

#[test]
fn gateway_needs_an_address_of_its_family() {
    // rail1 has IPv4 only: an IPv6 gateway (even link-local, even
    // onlink) would make a default route no rule leads to.
    let host = [addr("rail1", "198.51.100.11/24")];
    for g in ["\"fe80::1\"", "{ address = \"2001:db8:ffff::1\", onlink = true }"] {
        let e = plan_on(&host, &format!("[[interface]]\nname = \"rail1\"\ngateway = {g}\n")).unwrap_err();
        assert!(e.what.contains("is IPv6 but the interface has no global IPv6 address"), "{e}");
        assert_eq!(e.loc.map(|l| l.line), Some(3));
    }
}

/// What `ip -6 addr` shows as `temporary`, `deprecated`, `dadfailed`.
fn flagged(ifname: &str, a: &str, flag: &str) -> Address {
    let base = addr(ifname, a);
    match flag {
        "temporary" => Address { temporary: true, ..base },
        "deprecated" => Address { deprecated: true, ..base },
        "dadfailed" => Address { dad_failed: true, tentative: true, ..base },
        _ => panic!("{flag}"),
    }
}

#[test]
fn discovered_addresses_leave_out_deprecated_temporary_and_dad_failed() {
    let host = [
        addr("rail0", "198.51.100.10/24"),
        flagged("rail0", "2001:db8:1::abcd/64", "temporary"),
        addr("rail0", "2001:db8:1::10/64"),
        flagged("rail0", "2001:db8:1::dead/64", "deprecated"),
        flagged("rail0", "198.51.100.20/24", "deprecated"),
        flagged("rail0", "2001:db8:2::bad/64", "dadfailed"),
    ];
    let d = plan_on(&host, "[[interface]]\nname = \"rail0\"\n").unwrap();
    let a: Vec<String> = d.interfaces[0].addresses.iter().map(ToString::to_string).collect();
    assert_eq!(a, ["198.51.100.10/24", "2001:db8:1::10/64"]);
    assert_eq!(d.rules.len(), 2);
    // No route for 2001:db8:2::/64, which only the dad-failed address is in.
    assert!(!d.routes.iter().any(|r| r.dst.to_string() == "2001:db8:2::/64"), "{:#?}", d.routes);
    for (left, why) in [
        ("2001:db8:1::abcd/64", "is a temporary (privacy) address"),
        ("2001:db8:1::dead/64", "is deprecated"),
        ("198.51.100.20/24", "is deprecated"),
        ("2001:db8:2::bad/64", "failed duplicate address detection"),
    ] {
        let w = d
            .warnings
            .iter()
            .find(|w| w.starts_with(&format!("{left} on rail0 ")))
            .unwrap_or_else(|| panic!("no warning names {left}: {:#?}", d.warnings));
        assert!(w.contains(why) && w.contains("left out"), "{w}");
    }
    assert_eq!(d.warnings.len(), 4, "{:#?}", d.warnings);
    // Nothing usable left: not ready, saying what was left out.
    let host = [flagged("rail1", "2001:db8:1::abcd/64", "temporary")];
    let d = plan_on(&host, "[[interface]]\nname = \"rail1\"\n").unwrap();
    let why = d.not_ready[0].describe();
    assert!(why.contains("no usable global address (left out: 2001:db8:1::abcd/64 (temporary))"), "{why}");
}

#[test]
fn listed_addresses_in_those_states() {
    // Asked for by name: used, with a warning; but a duplicate found by
    // DAD can never be a source, so that is an error where it is listed.
    let host = [
        flagged("rail0", "2001:db8:1::abcd/64", "temporary"),
        flagged("rail0", "2001:db8:2::bad/64", "dadfailed"),
    ];
    let d = plan_on(&host, "[[interface]]\nname = \"rail0\"\naddresses = [\"2001:db8:1::abcd\"]\n").unwrap();
    assert_eq!(d.rules.len(), 1);
    assert!(
        d.warnings.iter().any(|w| w.starts_with("2001:db8:1::abcd/64 on rail0 is a temporary")),
        "{:#?}",
        d.warnings
    );
    // Listed and dad-failed: not ready (the host must change, or the
    // config), the other address used, its entries kept: the kernel
    // never takes it as a source, so its rule is never used.
    let toml =
        "[[interface]]\nname = \"rail0\"\naddresses = [\"2001:db8:1::abcd\", \"2001:db8:2::bad/64\"]\n";
    let d = plan_on(&host, toml).unwrap();
    assert_eq!(d.rules.len(), 1);
    assert_eq!(d.not_ready.len(), 1, "{:#?}", d.not_ready);
    let r = d.not_ready[0].describe();
    assert!(r.starts_with("2001:db8:2::bad on rail0: failed duplicate address detection"), "{r}");
    assert!(
        r.contains("(`ip addr del 2001:db8:2::bad/64 dev rail0; ip addr add 2001:db8:2::bad/64 dev rail0`)"),
        "{r}"
    );
    assert!(r.ends_with("or remove it from `addresses` (t.toml:3:34)"), "{r}");
    let ip: IpAddr = "2001:db8:2::bad".parse().unwrap();
    assert_eq!(d.keep.sources, BTreeSet::from([ip]));
}

/// The same address on two configured rails: two rules, the second never
/// matches. When the host's state makes it so (a rail that lists no
/// `addresses` has it too), it is not ready where it is not owned: on
/// the discovering rail when the other lists it (whose entries stand),
/// on both when neither lists it (left alone). Two listings are the
/// config's fault, refused by the config check.
#[test]
fn an_address_on_two_configured_interfaces_is_not_ready_where_not_owned() {
    let two = |a: &str, b: &str| {
        format!("[[interface]]\nname = \"rail0\"\n{a}[[interface]]\nname = \"rail1\"\n{b}")
    };
    for (same, other) in
        [("198.51.100.10/24", "198.51.100.11/24"), ("2001:db8:1::10/64", "2001:db8:1::11/64")]
    {
        let ip: IpAddr = same.split('/').next().unwrap().parse().unwrap();
        let host = [addr("rail0", same), addr("rail1", same), addr("rail1", other)];
        let listed = format!("addresses = [\"{same}\"]\n");
        let rules_of = |d: &Desired| -> Vec<(IpAddr, u32)> {
            d.rules.iter().map(|r| (r.src.unwrap().addr, r.table)).collect()
        };
        let other_ip: IpAddr = other.split('/').next().unwrap().parse().unwrap();

        // rail0 lists it and has it: rail0 owns it; not ready on rail1,
        // whose entries for it go (a second rule would shadow rail0's).
        let d = plan_on(&host, &two(&listed, "")).unwrap();
        assert_eq!(rules_of(&d), [(ip, 100), (other_ip, 101)]);
        assert_eq!(d.not_ready.len(), 1, "{:#?}", d.not_ready);
        let nr = &d.not_ready[0];
        assert_eq!((nr.interface.as_str(), nr.subject), ("rail1", Subject::Address(ip)));
        assert!(
            nr.reason.starts_with("rail1 has it too, but rail0 lists it (t.toml:3:14) and has it"),
            "{}",
            nr.reason
        );
        assert!(nr.reason.contains(&format!("(`ip addr del {same} dev rail1`)")), "{}", nr.reason);
        assert!(!d.keep.sources.contains(&ip), "{:?}", d.keep);
        assert_eq!(d.discovered["rail1"], [pfx(other)], "not recorded for rail1");
        // The same the other way round.
        let d = plan_on(&host, &two("", &listed)).unwrap();
        assert_eq!(rules_of(&d), [(ip, 101)]);
        assert_eq!(d.not_ready.len(), 1, "{:#?}", d.not_ready);
        assert_eq!(d.not_ready[0].interface, "rail0");
        assert!(d.not_ready[0].reason.contains("but rail1 lists it (t.toml:5:14)"), "{:?}", d.not_ready);
        // rail0 has nothing else: no rule, its table not kept wholesale.
        assert!(d.keep.tables.is_empty(), "{:?}", d.keep);

        // Neither lists it: not ready on both, left as it is.
        let d = plan_on(&host, &two("", "")).unwrap();
        assert_eq!(rules_of(&d), [(other_ip, 101)]);
        let nr: Vec<(&str, String)> =
            d.not_ready.iter().map(|n| (n.interface.as_str(), n.describe())).collect();
        assert_eq!(nr.len(), 2, "{nr:#?}");
        assert_eq!(nr[0].0, "rail0");
        assert!(
            nr[0].1.starts_with(&format!("{ip} on rail0: is on rail1 too, and none of them lists it")),
            "{nr:#?}"
        );
        assert!(nr[0].1.contains(&format!("(`ip addr del {same} dev rail1`)")), "{nr:#?}");
        assert_eq!(nr[1].0, "rail1");
        assert!(nr[1].1.contains(&format!("(`ip addr del {same} dev rail0`)")), "{nr:#?}");
        assert!(d.keep.sources.contains(&ip), "{:?}", d.keep);
        // Listing the other address on rail1 settles it.
        let d = plan_on(&host, &two("", &format!("addresses = [\"{other}\"]\n"))).unwrap();
        assert!(d.not_ready.is_empty(), "{:#?}", d.not_ready);
        // Both listing it is the config's fault.
        let e = config::parse("t.toml", &two(&listed, &listed)).unwrap_err();
        assert!(e.what.contains("is already listed for interface \"rail0\""), "{e}");
    }
    // IPv4 lets one interface hold an address twice, with two lengths.
    let host = [addr("rail0", "198.51.100.10/24"), addr("rail0", "198.51.100.10/25")];
    let d = plan_on(&host, "[[interface]]\nname = \"rail0\"\n").unwrap();
    assert_eq!(d.not_ready.len(), 1, "{:#?}", d.not_ready);
    let r = d.not_ready[0].describe();
    assert!(
        r.starts_with("198.51.100.10 on rail0: rail0 has it 2 times (198.51.100.10/24, 198.51.100.10/25)"),
        "{r}"
    );
    assert!(r.contains("(`ip addr del 198.51.100.10/25 dev rail0`)"), "{r}");
    // Listed, the length picks one.
    let d = plan_on(&host, "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10/25\"]\n").unwrap();
    assert!(d.not_ready.is_empty(), "{:#?}", d.not_ready);
    assert_eq!(d.interfaces[0].addresses[0].to_string(), "198.51.100.10/25");
}

/// A listed address that moved to another interface: not ready, and its
/// entries go (they would send the other interface's traffic out of
/// this one); the reason says where it is and how to move it back.
#[test]
fn a_listed_address_on_another_interface_is_not_ready_and_not_kept() {
    let host = [addr("rail0", "2001:db8:1::10/64"), addr("rail1", "198.51.100.10/24")];
    let toml = "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10\", \"2001:db8:1::10\"]\n\
                [[interface]]\nname = \"rail1\"\naddresses = [\"198.51.100.11\"]\n";
    let d = plan_on(&host, toml).unwrap();
    let nr: Vec<String> = d.not_ready.iter().map(NotReady::describe).collect();
    assert_eq!(nr.len(), 2, "{nr:#?}");
    assert!(nr[0].starts_with("198.51.100.10 on rail0: is on rail1, not on rail0"), "{nr:#?}");
    assert!(
        nr[0].contains(
            "(`ip addr del 198.51.100.10/24 dev rail1; ip addr add 198.51.100.10/24 dev rail0`), or list \
             it for rail1 instead of rail0 (t.toml:3:14)"
        ),
        "{nr:#?}"
    );
    assert!(nr[1].starts_with("198.51.100.11 on rail1: rail1 does not have it"), "{nr:#?}");
    let moved: IpAddr = "198.51.100.10".parse().unwrap();
    assert!(!d.keep.sources.contains(&moved), "{:?}", d.keep);
    assert!(!d.keep.rule(&Rule::source(1000, moved, 100, d.protocol)));
    assert_eq!(d.rules.len(), 1, "rail0's IPv6 address: {:#?}", d.rules);
    // Only the moved address on rail0: nothing of it is kept but its
    // sysctls and gateway.
    let host = [addr("rail1", "198.51.100.10/24"), addr("rail1", "198.51.100.11/24")];
    let toml =
        "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10\"]\ngateway = \"198.51.100.1\"\n";
    let d = plan_on(&host, toml).unwrap();
    assert!(d.keep.tables.is_empty() && d.keep.sources.is_empty(), "{:?}", d.keep);
    assert_eq!(d.keep.gateways, BTreeSet::from([(100, "198.51.100.1".parse().unwrap())]));
    assert!(d.keep.sysctls_of.contains("rail0"));
    // With an absent address beside it: that one's entries stay, the
    // moved one's do not, so the table does not stay as a whole.
    let toml = "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10\", \"198.51.100.20\"]\n\
                gateway = \"198.51.100.1\"\n";
    let d = plan_on(&host, toml).unwrap();
    assert_eq!(d.not_ready.len(), 2, "{:#?}", d.not_ready);
    assert!(d.keep.tables.is_empty(), "{:?}", d.keep);
    assert_eq!(d.keep.sources, BTreeSet::from(["198.51.100.20".parse().unwrap()]));
    assert!(!d.keep.rule(&Rule::source(1000, moved, 100, d.protocol)));
    assert_eq!(d.keep.gateways, BTreeSet::from([(100, "198.51.100.1".parse().unwrap())]));
}

/// A link-local address is unique on its link only (RFC 4291): another
/// link's fe80::1 (a bridge's, every Calico veth's own) is neither a rail's
/// link-local gateway, which the kernel accepts (`ip -6 route add default
/// via fe80::1 dev rail0` while fe80::1 is on br0), nor a listed
/// link-local address moved there. On the rail's own link it is both, as
/// before. (An unnamed outside address, as a partial link table leaves
/// it, must therefore never be said.)
#[test]
fn a_link_local_address_on_another_link_is_not_this_links() {
    let bridge = Address { scope: scope::LINK, ..addr("br0", "fe80::1/64") };
    let unnamed = Address { ifname: String::new(), ..bridge.clone() };
    let v6 = addr("rail0", "2001:db8:1::10/64");
    let gw = "[[interface]]\nname = \"rail0\"\ngateway = \"fe80::1\"\n";
    for other in [&bridge, &unnamed] {
        let d = plan_on(&[v6.clone(), other.clone()], gw).unwrap();
        assert!(d.not_ready.is_empty(), "{:#?}", d.not_ready);
        let gws: Vec<IpAddr> = d.routes.iter().filter_map(|r| r.gateway).collect();
        assert_eq!(gws, ["fe80::1".parse::<IpAddr>().unwrap()]);
    }
    let own = Address { scope: scope::LINK, ..addr("rail0", "fe80::1/64") };
    let d = plan_on(&[v6.clone(), own], gw).unwrap();
    let nr: Vec<String> = d.not_ready.iter().map(NotReady::describe).collect();
    assert!(nr.len() == 1 && nr[0].contains("is this host's own address (on rail0)"), "{nr:#?}");

    // Listed and not on rail0: absent (kept), never "is on br0".
    let listed = "[[interface]]\nname = \"rail0\"\naddresses = [\"2001:db8:1::10\", \"fe80::1\"]\n";
    for other in [&bridge, &unnamed] {
        let d = plan_on(&[v6.clone(), other.clone()], listed).unwrap();
        let nr: Vec<String> = d.not_ready.iter().map(NotReady::describe).collect();
        assert!(nr.len() == 1 && nr[0].starts_with("fe80::1 on rail0: rail0 does not have it"), "{nr:#?}");
        assert!(d.keep.sources.contains(&"fe80::1".parse().unwrap()), "{:?}", d.keep);
    }
    // A global address on another link has moved, as before.
    let moved = "[[interface]]\nname = \"rail0\"\naddresses = [\"2001:db8:1::10\", \"2001:db8:1::11\"]\n";
    let d = plan_on(&[v6, addr("br0", "2001:db8:1::11/64")], moved).unwrap();
    let nr: Vec<String> = d.not_ready.iter().map(NotReady::describe).collect();
    assert!(nr.len() == 1 && nr[0].contains("is on br0, not on rail0"), "{nr:#?}");
}

/// Discovered at the last apply, on another interface now: moved, not
/// gone; not expected back (a warning), nor kept.
#[test]
fn a_discovered_address_that_moved_is_not_expected_back() {
    let addrs = [addr("rail0", "198.51.100.10/24"), addr("rail1", "198.51.100.11/24")];
    let last =
        BTreeMap::from([("rail0".to_string(), vec![pfx("198.51.100.10/24"), pfx("198.51.100.11/24")])]);
    let cfg = config::parse("t.toml", "[[interface]]\nname = \"rail0\"\n").unwrap();
    let d = plan_with(&cfg, &host().0, &addrs, &last).unwrap();
    assert!(d.not_ready.is_empty(), "{:#?}", d.not_ready);
    assert!(
        d.warnings.iter().any(|w| w
            == "198.51.100.11/24 was found on rail0 at the last apply and is on rail1 now: rail0 no longer takes it"),
        "{:#?}",
        d.warnings
    );
    assert_eq!(d.discovered["rail0"], [last["rail0"][0]]);
    assert!(d.keep.sources.is_empty());
}

#[test]
fn discovered_addresses_get_the_checks_listed_ones_get() {
    let cases = [
        ("198.51.100.0/24", "the network address of 198.51.100.0/24"),
        ("203.0.113.255/24", "the broadcast address of 203.0.113.0/24"),
        ("198.51.100.3/30", "the broadcast address of 198.51.100.0/30"),
    ];
    for (a, why) in cases {
        // Host state: not ready for that address, the rest planned.
        let host = [addr("rail0", "198.51.100.10/24"), addr("rail0", a)];
        let d = plan_on(&host, "\n[[interface]]\nname = \"rail0\"\n").unwrap();
        assert_eq!(d.not_ready.len(), 1, "{:#?}", d.not_ready);
        let ip = a.split('/').next().unwrap();
        let r = d.not_ready[0].describe();
        assert!(r.starts_with(&format!("{ip} on rail0: {a} is {why}")), "{r}");
        assert!(r.contains(&format!("remove it (`ip addr del {a} dev rail0`)")), "{r}");
        assert!(r.contains("list the ones to use in `addresses`"), "{r}");
        assert_eq!(d.interfaces[0].addresses, [pfx("198.51.100.10/24")]);
        assert_eq!(d.discovered["rail0"], d.interfaces[0].addresses, "not recorded");
        // Listed, it is refused by the config with the same words.
        let listed =
            config::parse("t.toml", &format!("[[interface]]\nname = \"rail0\"\naddresses = [\"{a}\"]\n"));
        assert!(listed.unwrap_err().what.contains(why));
    }
    // The length of a point-to-point address is its peer's: no network or
    // broadcast address of the local one to speak of.
    let host = [p2p("rail0", "198.51.100.0", "203.0.113.0/24")];
    plan_on(&host, "[[interface]]\nname = \"rail0\"\n").unwrap();
}
