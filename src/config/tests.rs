use std::collections::BTreeMap;
use std::net::IpAddr;

use super::check::MAX_PRIORITY;
use super::protocol::KERNEL_PROTOCOLS;
use super::*;
use crate::model::{self, SysctlKey};

/// Every key, every gateway form; also a seed of tests/fuzz_config.rs.
const FULL: &str = include_str!("../../tests/fixtures/full.toml");

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn loc(line: usize, col: usize) -> Loc {
    Loc { line, col }
}

fn ok(text: &str) -> Config {
    parse("t.toml", text).unwrap_or_else(|e| panic!("unexpected error:\n{e}"))
}

fn err(text: &str) -> ConfigError {
    match parse("t.toml", text) {
        Ok(c) => panic!("expected an error, got {c:#?}"),
        Err(e) => e,
    }
}

/// One interface "ib0" whose extra keys start on line 3.
fn iface(body: &str) -> String {
    format!("[[interface]]\nname = \"ib0\"\n{body}")
}

/// `[[interface]]` tables with just these names, two lines each.
fn named(names: &[&str]) -> String {
    names.iter().map(|n| format!("[[interface]]\nname = \"{n}\"\n")).collect()
}

/// The error is at `line:col`, its text contains every needle, and it
/// has a hint.
fn assert_err(text: &str, line: usize, col: usize, needles: &[&str]) -> ConfigError {
    let e = err(text);
    let shown = e.to_string();
    assert_eq!(e.loc, Some(loc(line, col)), "wrong position in:\n{shown}\nfor:\n{text}");
    assert!(shown.starts_with(&format!("t.toml:{line}:{col}: ")), "{shown}");
    for n in needles {
        assert!(shown.contains(n), "{n:?} missing from:\n{shown}");
    }
    assert!(!e.hint.is_empty(), "no hint in:\n{shown}");
    e
}

fn sysctls(pairs: &[(SysctlKey, u32)]) -> BTreeMap<SysctlKey, u32> {
    pairs.iter().copied().collect()
}

// --- valid configs ------------------------------------------------------

#[test]
fn full_config() {
    let c = ok(FULL);
    assert_eq!(c.file, "t.toml");
    assert_eq!(
        c.defaults,
        Defaults {
            table_base: 200,
            priority: 900,
            protocol: 250,
            announce: 2,
            sysctls: sysctls(&[
                (SysctlKey::ArpIgnore, 2),
                (SysctlKey::ArpAnnounce, 1),
                (SysctlKey::RpFilter, 2),
                (SysctlKey::ArpFilter, 1),
            ]),
        }
    );
    assert_eq!(c.interfaces.len(), 3);
    let ib0 = &c.interfaces[0];
    assert_eq!(ib0.name, "ib0");
    assert_eq!(ib0.loc, loc(12, 8));
    assert_eq!(
        ib0.addresses,
        Some(vec![
            AddrSpec { addr: ip("192.168.1.10"), len: Some(24), loc: loc(13, 14) },
            AddrSpec { addr: ip("2001:db8::10"), len: Some(64), loc: loc(13, 33) },
            AddrSpec { addr: ip("192.168.1.11"), len: None, loc: loc(13, 52) },
        ])
    );
    assert_eq!(
        ib0.gateways,
        vec![
            Gateway { addr: ip("192.168.1.1"), loc: loc(14, 12), onlink: false },
            Gateway { addr: ip("2001:db8::1"), loc: loc(14, 27), onlink: false },
        ]
    );
    assert_eq!((ib0.table, ib0.table_loc), (100, loc(15, 9)));
    assert_eq!((ib0.priority, ib0.priority_loc), (1000, loc(16, 12)));
    assert_eq!(
        ib0.sysctls,
        sysctls(&[
            (SysctlKey::ArpIgnore, 1),
            (SysctlKey::ArpAnnounce, 2),
            (SysctlKey::RpFilter, 0),
            (SysctlKey::ArpFilter, 0),
        ])
    );
    let ib1 = &c.interfaces[1];
    assert_eq!(ib1.loc, loc(23, 8));
    assert_eq!(ib1.addresses, None);
    assert_eq!(ib1.gateways, vec![Gateway { addr: ip("fe80::1"), loc: loc(24, 11), onlink: false }]);
    // No `table`: the lowest free from table_base (ib0's 100 is below
    // it); the rest from [defaults].
    assert_eq!((ib1.table, ib1.table_loc), (200, ib1.loc));
    assert!(ib0.table_explicit && !ib1.table_explicit);
    assert_eq!((ib1.priority, ib1.priority_loc), (900, ib1.loc));
    assert_eq!(ib1.sysctls, c.defaults.sysctls);
    let ib2 = &c.interfaces[2];
    assert_eq!(ib2.gateways, vec![Gateway { addr: ip("203.0.113.1"), loc: loc(29, 23), onlink: true }]);
}

#[test]
fn defaults_applied() {
    let c = ok("[[interface]]\nname = \"a\"\n[[interface]]\nname = \"b\"\n\
                [[interface]]\nname = \"c\"\n");
    assert_eq!(c.defaults.table_base, DEFAULT_TABLE_BASE);
    assert_eq!(c.defaults.priority, DEFAULT_PRIORITY);
    assert_eq!(c.defaults.protocol, DEFAULT_PROTOCOL);
    assert_eq!(DEFAULT_PROTOCOL, 234);
    let expected = sysctls(&[(SysctlKey::ArpIgnore, 1), (SysctlKey::ArpAnnounce, 2)]);
    assert_eq!(c.defaults.sysctls, expected);
    for (pos, i) in c.interfaces.iter().enumerate() {
        assert_eq!(i.table, 100 + pos as u32);
        assert_eq!(i.priority, 1000);
        assert_eq!(i.sysctls, expected, "rp_filter and arp_filter are not managed");
        assert_eq!(i.addresses, None);
        assert!(i.gateways.is_empty());
        assert_eq!(i.loc, loc(2 * pos + 2, 8));
        assert_eq!(i.table_loc, i.loc);
        assert_eq!(i.priority_loc, i.loc);
    }
    // An empty [defaults] table changes nothing.
    let d = ok("[defaults]\n[[interface]]\nname = \"a\"\n");
    assert_eq!(d.defaults, c.defaults);
}

#[test]
fn overrides() {
    let c = ok("[defaults]\ntable_base = 10\npriority = 5\nprotocol = 5\nrp_filter = 1\n\
                [[interface]]\nname = \"a\"\ntable = 7\npriority = 32765\narp_ignore = 8\n\
                arp_filter = 1\n[[interface]]\nname = \"b\"\n");
    assert_eq!(c.defaults.protocol, 5);
    let a = &c.interfaces[0];
    assert_eq!((a.table, a.table_loc), (7, loc(8, 9)));
    assert_eq!((a.priority, a.priority_loc), (32765, loc(9, 12)));
    assert_eq!(
        a.sysctls,
        sysctls(&[
            (SysctlKey::ArpIgnore, 8),
            (SysctlKey::ArpAnnounce, 2),
            (SysctlKey::RpFilter, 1),
            (SysctlKey::ArpFilter, 1),
        ])
    );
    let b = &c.interfaces[1];
    assert_eq!((b.table, b.priority), (10, 5));
    assert_eq!(
        b.sysctls,
        sysctls(&[(SysctlKey::ArpIgnore, 1), (SysctlKey::ArpAnnounce, 2), (SysctlKey::RpFilter, 1),])
    );
    assert_eq!(ok("[defaults]\nprotocol = 255\n[[interface]]\nname = \"a\"\n").defaults.protocol, 255);
}

#[test]
fn gateway_as_string_and_as_array() {
    let one = ok(&iface("gateway = \"10.0.0.1\"\n"));
    assert_eq!(
        one.interfaces[0].gateways,
        vec![Gateway { addr: ip("10.0.0.1"), loc: loc(3, 11), onlink: false }]
    );
    let two = ok(&iface("gateway = [\"2001:db8::1\",\n  \"10.0.0.1\"]\n"));
    assert_eq!(
        two.interfaces[0].gateways,
        vec![
            Gateway { addr: ip("2001:db8::1"), loc: loc(3, 12), onlink: false },
            Gateway { addr: ip("10.0.0.1"), loc: loc(4, 3), onlink: false },
        ]
    );
    let none = ok(&iface("gateway = []\n"));
    assert!(none.interfaces[0].gateways.is_empty());
}

#[test]
fn on_link_check_only_with_explicit_prefixes() {
    // Bare addresses: the host's prefix decides, later.
    ok(&iface("addresses = [\"10.0.0.5\"]\ngateway = \"172.16.0.1\"\n"));
    // No addresses at all: same.
    ok(&iface("gateway = [\"172.16.0.1\", \"2001:db8::1\"]\n"));
    // Inside one of several subnets.
    ok(&iface("addresses = [\"10.0.0.5/24\", \"10.1.0.5/16\"]\ngateway = \"10.1.200.1\"\n"));
    // IPv6 link-local gateways are always on-link.
    ok(&iface("addresses = [\"2001:db8::5/64\"]\ngateway = \"fe80::1\"\n"));
    // /31 and /32 have no network or broadcast address.
    ok(&iface("addresses = [\"198.51.100.0/31\", \"198.51.100.7/32\"]\n"));
    ok(&iface("addresses = [\"198.51.100.1/31\"]\ngateway = \"198.51.100.0\"\n"));
}

/// Point-to-point sized addresses may have a peer elsewhere
/// (`ip addr add 198.51.100.1/32 peer 198.51.100.0/32`): the gateway is
/// then checked against the peer's subnet by the plan, on the host.
#[test]
fn on_link_check_waits_for_the_host_for_point_to_point_sizes() {
    for (a, gw) in [
        ("198.51.100.1/32", "198.51.100.0"),
        ("198.51.100.9/31", "203.0.113.0"),
        ("2001:db8::1/128", "2001:db8::2"),
        ("2001:db8::1/127", "2001:db8:1::"),
    ] {
        ok(&iface(&format!("addresses = [\"{a}\"]\ngateway = \"{gw}\"\n")));
    }
    // A /30 or /64 has no such excuse.
    assert_err(
        &iface("addresses = [\"198.51.100.9/30\"]\ngateway = \"203.0.113.0\"\n"),
        4,
        11,
        &["gateway 203.0.113.0 is outside every subnet of the interface (198.51.100.8/30)"],
    );
    assert_err(
        &iface("addresses = [\"2001:db8::1/64\"]\ngateway = \"2001:db8:1::1\"\n"),
        4,
        11,
        &["outside every subnet"],
    );
}

/// BGP to the host: a /32 on the NIC and a router outside every subnet,
/// reached `onlink`. Table form alone, in an array with strings, and as
/// a sub-table.
#[test]
fn onlink_gateway_forms() {
    let onlink = |addr: &str, line, col| Gateway { addr: ip(addr), loc: loc(line, col), onlink: true };
    let plain = |addr: &str, line, col| Gateway { addr: ip(addr), loc: loc(line, col), onlink: false };
    let c = ok(&iface(
        "addresses = [\"198.51.100.7/32\"]\ngateway = { address = \"203.0.113.1\", onlink = true }\n",
    ));
    assert_eq!(c.interfaces[0].gateways, [onlink("203.0.113.1", 4, 23)]);
    // Outside a /24 too: onlink says the router is on the link anyway.
    let c = ok(&iface(
        "addresses = [\"198.51.100.7/24\", \"2001:db8::7/64\"]\n\
         gateway = [{ address = \"203.0.113.1\", onlink = true }, \"2001:db8::1\"]\n",
    ));
    assert_eq!(c.interfaces[0].gateways, [onlink("203.0.113.1", 4, 24), plain("2001:db8::1", 4, 56)]);
    let c = ok(&iface(
        "gateway = [{ address = \"2001:db8:ffff::1\", onlink = true }, { address = \"203.0.113.1\" }]\n",
    ));
    assert_eq!(c.interfaces[0].gateways, [onlink("2001:db8:ffff::1", 3, 24), plain("203.0.113.1", 3, 73)]);
    let c = ok(
        "[[interface]]\nname = \"rail0\"\n[interface.gateway]\naddress = \"203.0.113.1\"\nonlink = true\n",
    );
    assert_eq!(c.interfaces[0].gateways, [onlink("203.0.113.1", 4, 11)]);
}

#[test]
fn onlink_gateway_errors() {
    // Without onlink (or with onlink = false) it is still off-link, and
    // the hint says how to declare it.
    for g in ["\"203.0.113.1\"", "{ address = \"203.0.113.1\", onlink = false }"] {
        let text = iface(&format!("addresses = [\"198.51.100.7/24\"]\ngateway = {g}\n"));
        let col = if g.starts_with('{') { 23 } else { 11 };
        let e = assert_err(&text, 4, col, &["gateway 203.0.113.1 is outside every subnet"]);
        assert!(e.hint.contains("gateway = { address = \"203.0.113.1\", onlink = true }"), "{e}");
    }
    // The other checks of a gateway still apply to the table form.
    assert_err(
        &iface("gateway = { address = \"203.0.113.x\", onlink = true }\n"),
        3,
        23,
        &["gateway \"203.0.113.x\" is not an IP address"],
    );
    assert_err(
        &iface("gateway = { address = \"224.0.0.1\", onlink = true }\n"),
        3,
        23,
        &["gateway 224.0.0.1 is a multicast address"],
    );
    assert_err(
        &iface("addresses = [\"2001:db8::7/128\"]\ngateway = { address = \"203.0.113.1\", onlink = true }\n"),
        4,
        23,
        &["gateway 203.0.113.1 is IPv4 but `addresses` lists no IPv4 address"],
    );
    assert_err(
        &iface("gateway = [{ address = \"203.0.113.1\", onlink = true }, \"198.51.100.1\"]\n"),
        3,
        56,
        &["second IPv4 gateway 198.51.100.1 (the first is 203.0.113.1 at 3:24)"],
    );
    assert_err(
        &iface(
            "addresses = [\"198.51.100.7/32\"]\ngateway = { address = \"198.51.100.7\", onlink = true }\n",
        ),
        4,
        23,
        &["gateway 198.51.100.7 is one of its own addresses"],
    );
    // Shape errors name the key.
    let e = err(&iface("gateway = { address = \"203.0.113.1\", onlnk = true }\n"));
    assert!(e.to_string().contains("unknown field `onlnk`, expected `address` or `onlink`"), "{e}");
    assert_eq!(e.loc.map(|l| l.line), Some(3), "{e}");
    let e = err(&iface("gateway = { onlink = true }\n"));
    assert!(e.to_string().contains("missing field `address`"), "{e}");
    assert!(e.hint.contains("address"), "{e}");
    assert_eq!(e.loc.map(|l| l.line), Some(3), "{e}");
    let e = err(&iface("gateway = { address = \"203.0.113.1\", onlink = \"yes\" }\n"));
    assert!(e.to_string().contains("invalid type"), "{e}");
    assert_eq!(e.loc, Some(loc(3, 47)), "{e}");
}

#[test]
fn names_at_the_edge_of_validity() {
    ok("[[interface]]\nname = \"enp1s0f0np0.123\"\n");
    ok("[[interface]]\nname = \"a-b_c.d@e\"\n");
}

// --- TOML shape errors --------------------------------------------------

#[test]
fn malformed_toml() {
    assert_err("[[interface]\nname = \"ib0\"\n", 1, 13, &["unclosed array table"]);
    assert_err(&iface("table = \n"), 3, 9, &["t.toml:3:9"]);
    assert_err(&iface("addresses = [\"10.0.0.1/24\"\n"), 3, 27, &["unclosed array"]);
    assert_err(&iface("table = 1\ntable = 2\n"), 4, 1, &["duplicate key `table`"]);
}

#[test]
fn unknown_keys() {
    assert_err("bogus = 1\n[[interface]]\nname = \"ib0\"\n", 1, 1, &["`bogus`"]);
    assert_err(
        "[defaults]\n  tablebase = 1\n[[interface]]\nname = \"a\"\n",
        2,
        3,
        &["`defaults.tablebase`: unknown field `tablebase`"],
    );
    assert_err(
        &iface("gatway = \"10.0.0.1\"\n"),
        3,
        1,
        &["`interface[0].gatway`: unknown field `gatway`", "`gateway`"],
    );
    assert_err("[extra]\nx = 1\n[[interface]]\nname = \"a\"\n", 1, 2, &["`extra`"]);
}

/// Issue 27: the closest key is suggested, as clap does for subcommands;
/// none when no key is close.
#[test]
fn an_unknown_key_suggests_the_closest_one() {
    let e = assert_err(&iface("adresses = [\"10.0.0.1/24\"]\n"), 3, 1, &["unknown field `adresses`"]);
    assert!(e.hint.starts_with("did you mean `addresses`?"), "{e}");
    let e = assert_err("[defaults]\ntable_bse = 1\n[[interface]]\nname = \"a\"\n", 2, 1, &["`table_bse`"]);
    assert!(e.hint.starts_with("did you mean `table_base`?"), "{e}");
    let e = assert_err("[[interfaces]]\nname = \"a\"\n", 1, 3, &["`interfaces`"]);
    assert!(e.hint.starts_with("did you mean `interface`?"), "{e}");
    let e = assert_err(&iface("zzzzzz = 1\n"), 3, 1, &["`zzzzzz`"]);
    assert!(!e.hint.contains("did you mean"), "{e}");
}

/// Issue 27: a string where a list is expected is shown in list form
/// (the old hint talked about quoting).
#[test]
fn a_string_for_a_list_shows_the_list_form() {
    let e = assert_err(&iface("addresses = \"198.51.100.10/24\"\n"), 3, 13, &["`interface[0].addresses`"]);
    assert!(e.hint.contains(r#"addresses = ["198.51.100.10/24"]"#), "{e}");
    assert!(!e.hint.contains("quoted"), "{e}");
}

#[test]
fn wrong_types() {
    assert_err(&iface("table = \"x\"\n"), 3, 9, &["`interface[0].table`", "invalid type", "\"x\""]);
    assert_err(&iface("priority = 1.5\n"), 3, 12, &["`interface[0].priority`", "an integer"]);
    assert_err(&iface("addresses = \"10.0.0.1/24\"\n"), 3, 13, &["`interface[0].addresses`"]);
    assert_err(&iface("addresses = [\"10.0.0.1/24\", 7]\n"), 3, 29, &["`interface[0].addresses[1]`"]);
    assert_err(&iface("gateway = 5\n"), 3, 11, &["`interface[0].gateway`", "array"]);
    assert_err(&iface("gateway = [\"10.0.0.1\", true]\n"), 3, 24, &["`interface[0].gateway[1]`"]);
    assert_err("[[interface]]\nname = 3\n", 2, 8, &["`interface[0].name`"]);
    assert_err(
        "[defaults]\narp_ignore = \"1\"\n[[interface]]\nname = \"a\"\n",
        2,
        14,
        &["`defaults.arp_ignore`"],
    );
    assert_err("interface = 5\n", 1, 13, &["`interface`"]);
    assert_err("[[interface]]\naddresses = [\"10.0.0.1/24\"]\n", 1, 1, &["missing field `name`"]);
}

#[test]
fn no_interface() {
    for text in ["", "# nothing\n", "[defaults]\npriority = 5\n", "interface = []\n"] {
        let e = err(text);
        assert_eq!(e.loc, None);
        assert_eq!(e.what, "no [[interface]] in t.toml");
        assert!(e.to_string().starts_with("t.toml: no [[interface]] in t.toml\n  hint: "), "{e}");
    }
}

// --- addresses ----------------------------------------------------------

#[test]
fn bad_addresses() {
    let cases: &[(&str, &[&str])] = &[
        ("192.168.1.x/24", &["\"192.168.1.x/24\" is not an IP address"]),
        ("ib0", &["\"ib0\" is not an IP address"]),
        ("", &["\"\" is not an IP address"]),
        ("192.168.1.10/33", &["prefix length 33", "32 bits"]),
        ("2001:db8::1/129", &["prefix length 129", "128 bits"]),
        ("192.168.1.10/300", &["prefix length \"300\"", "not a number"]),
        ("192.168.1.10/", &["prefix length \"\"", "not a number"]),
        ("192.168.1.10/+8", &["prefix length \"+8\""]),
        ("192.168.1.10/24/1", &["prefix length \"24/1\""]),
        ("198.51.100.0/24", &["network address of 198.51.100.0/24"]),
        ("10.0.0.0/8", &["network address of 10.0.0.0/8"]),
        ("198.51.100.255/24", &["broadcast address of 198.51.100.0/24"]),
        ("198.51.100.3/30", &["broadcast address of 198.51.100.0/30"]),
        ("255.255.255.255", &["limited broadcast"]),
        ("224.0.0.1/24", &["multicast"]),
        ("ff02::1", &["multicast"]),
        ("0.0.0.0/8", &["unspecified"]),
        ("::", &["unspecified"]),
        ("127.0.0.1/8", &["loopback"]),
        ("::1/128", &["loopback"]),
        ("10.1.2.3/0", &["/0"]),
    ];
    for (addr, needles) in cases {
        let text = iface(&format!("addresses = [\"10.9.9.9/24\", \"{addr}\"]\n"));
        let mut all = vec!["interface \"ib0\""];
        all.extend_from_slice(needles);
        assert_err(&text, 3, 29, &all);
    }
}

#[test]
fn empty_address_list() {
    assert_err(
        &iface("addresses = []\n"),
        3,
        13,
        &["interface \"ib0\"", "`addresses` is an empty list", "omit"],
    );
}

#[test]
fn duplicate_addresses() {
    // Same IP, different prefix length, same interface.
    assert_err(
        &iface("addresses = [\"10.0.0.1/24\", \"10.0.0.1/16\"]\n"),
        3,
        29,
        &["address 10.0.0.1", "interface \"ib0\"", "3:14"],
    );
    // Across interfaces, one bare.
    let text = "[[interface]]\nname = \"a\"\naddresses = [\"2001:db8::1/64\"]\n\
                [[interface]]\nname = \"b\"\naddresses = [\"2001:db8:0::1\"]\n";
    assert_err(text, 6, 14, &["address 2001:db8::1", "interface \"b\"", "interface \"a\" at 3:14"]);
}

// --- gateways -----------------------------------------------------------

#[test]
fn bad_gateways() {
    let cases: &[(&str, &[&str])] = &[
        ("10.0.0.x", &["gateway \"10.0.0.x\" is not an IP address"]),
        ("10.0.0.1/24", &["gateway \"10.0.0.1/24\" is not an IP address", "without /len"]),
        ("224.0.0.1", &["gateway 224.0.0.1 is a multicast address"]),
        ("ff02::2", &["multicast"]),
        ("0.0.0.0", &["gateway 0.0.0.0 is the unspecified address"]),
        ("::", &["unspecified"]),
        ("127.0.0.1", &["loopback"]),
        ("255.255.255.255", &["broadcast"]),
    ];
    for (gw, needles) in cases {
        let mut all = vec!["interface \"ib0\""];
        all.extend_from_slice(needles);
        assert_err(&iface(&format!("gateway = \"{gw}\"\n")), 3, 11, &all);
        assert_err(&iface(&format!("gateway = [\"{gw}\"]\n")), 3, 12, &all);
    }
}

#[test]
fn two_gateways_of_one_family() {
    assert_err(
        &iface("gateway = [\"10.0.0.1\", \"2001:db8::1\", \"10.0.0.2\"]\n"),
        3,
        39,
        &["second IPv4 gateway 10.0.0.2", "first is 10.0.0.1 at 3:12", "at most one"],
    );
    assert_err(&iface("gateway = [\"fe80::1\", \"2001:db8::1\"]\n"), 3, 23, &["second IPv6 gateway"]);
}

#[test]
fn gateway_off_link() {
    assert_err(
        &iface("addresses = [\"10.0.0.5/24\", \"10.1.0.5/16\"]\ngateway = \"10.2.0.1\"\n"),
        4,
        11,
        &["gateway 10.2.0.1 is outside every subnet", "10.0.0.0/24, 10.1.0.0/16", "on-link"],
    );
    assert_err(
        &iface("addresses = [\"2001:db8::5/64\"]\ngateway = [\"10.0.0.1\", \"2001:db8:1::1\"]\n"),
        4,
        12,
        &["gateway 10.0.0.1 is IPv4 but `addresses` lists no IPv4 address"],
    );
    assert_err(
        &iface("addresses = [\"2001:db8::5/64\"]\ngateway = [\"2001:db8:1::1\"]\n"),
        4,
        12,
        &["gateway 2001:db8:1::1 is outside every subnet", "2001:db8::/64"],
    );
    assert_err(
        &iface("addresses = [\"10.0.0.5/24\"]\ngateway = \"10.0.0.255\"\n"),
        4,
        11,
        &["gateway 10.0.0.255 is the broadcast address of 10.0.0.0/24"],
    );
    assert_err(
        &iface("addresses = [\"10.0.0.5/24\"]\ngateway = \"10.0.0.0\"\n"),
        4,
        11,
        &["network address"],
    );
}

#[test]
fn gateway_is_a_local_address() {
    assert_err(
        &iface("addresses = [\"10.0.0.5\"]\ngateway = \"10.0.0.5\"\n"),
        4,
        11,
        &["interface \"ib0\": gateway 10.0.0.5 is one of its own addresses (at 3:14)"],
    );
    let text = "[[interface]]\nname = \"a\"\ngateway = \"10.0.0.6\"\n\
                [[interface]]\nname = \"b\"\naddresses = [\"10.0.0.6/24\"]\n";
    assert_err(
        text,
        3,
        11,
        &["interface \"a\": gateway 10.0.0.6 is an address of interface \"b\" (at 6:14)"],
    );
    // A link-local address is unique on its link only: b's fe80::1 is no
    // address of a's link, and the kernel takes it as a's gateway; a's own
    // fe80::1 is refused, as any own address.
    let text = "[[interface]]\nname = \"a\"\naddresses = [\"2001:db8::5/64\"]\ngateway = \"fe80::1\"\n\
                [[interface]]\nname = \"b\"\naddresses = [\"fe80::1/64\"]\n";
    ok(text);
    assert_err(
        &iface("addresses = [\"2001:db8::5/64\", \"fe80::1/64\"]\ngateway = \"fe80::1\"\n"),
        4,
        11,
        &["interface \"ib0\": gateway fe80::1 is one of its own addresses (at 3:32)"],
    );
}

// --- interfaces ---------------------------------------------------------

#[test]
fn bad_interface_names() {
    let cases: &[(&str, &str)] = &[
        ("", "is empty"),
        (".", "\".\" is not allowed"),
        ("..", "\"..\" is not allowed"),
        ("all", "\"all\" is reserved"),
        ("default", "\"default\" is reserved"),
        ("abcdefghijklmnop", "16 bytes long"),
        ("ééééééééé", "18 bytes long"),
        ("ib/0", "contains '/'"),
        ("ib0:1", "contains ':'"),
        ("ib 0", "whitespace"),
        ("ib\\t0", "whitespace"),
        ("ib\\u00000", "NUL"),
    ];
    for (name, needle) in cases {
        let text = format!("[[interface]]\n  name = \"{name}\"\n");
        assert_err(&text, 2, 10, &["interface name", needle]);
    }
    let alias = err("[[interface]]\nname = \"ib0:1\"\n");
    assert!(alias.hint.contains("alias"), "{alias}");
    ok("[[interface]]\nname = \"abcdefghijklmno\"\n");
}

#[test]
fn duplicate_interface_names() {
    let text = named(&["ib0", "ib1", "ib0"]);
    assert_err(&text, 6, 8, &["interface \"ib0\" is listed twice (first at 2:8)"]);
}

// --- [[arp_only]] -------------------------------------------------------

#[test]
fn arp_only_takes_the_arp_defaults_and_its_own_keys() {
    let text = "[defaults]\narp_ignore = 2\nrp_filter = 1\narp_filter = 1\n[[interface]]\nname = \"rail0\"\n\
                [[arp_only]]\nname = \"eno1\"\n[[arp_only]]\nname = \"eno2\"\narp_announce = 1\narp_filter = 0\n";
    let c = ok(text);
    assert_eq!(c.interfaces.len(), 1);
    let eno1 = &c.arp_only[0];
    assert_eq!((eno1.name.as_str(), eno1.loc), ("eno1", loc(8, 8)));
    // rp_filter is not an ARP sysctl: never managed on an [[arp_only]].
    assert_eq!(
        eno1.sysctls,
        sysctls(&[(SysctlKey::ArpIgnore, 2), (SysctlKey::ArpAnnounce, 2), (SysctlKey::ArpFilter, 1)])
    );
    assert_eq!(
        c.arp_only[1].sysctls,
        sysctls(&[(SysctlKey::ArpIgnore, 2), (SysctlKey::ArpAnnounce, 1), (SysctlKey::ArpFilter, 0)])
    );
    // No table: the rails' tables are given as if it were not there.
    assert_eq!(c.interfaces[0].table, 100);
    assert!(ok("[[interface]]\nname = \"a\"\n").arp_only.is_empty());
}

#[test]
fn arp_only_errors_have_positions() {
    let rail = "[[interface]]\nname = \"rail0\"\n";
    let with = |body: &str| format!("{rail}[[arp_only]]\nname = \"eno1\"\n{body}");
    for key in [
        "table = 7",
        "priority = 5",
        "addresses = [\"10.0.0.1/24\"]",
        "gateway = \"10.0.0.1\"",
        "rp_filter = 1",
    ] {
        let name = key.split(' ').next().unwrap();
        assert_err(
            &with(&format!("{key}\n")),
            5,
            1,
            &[&format!("`arp_only[0].{name}`: unknown field `{name}`")],
        );
    }
    assert_err(&with("arp_ignore = 4\n"), 5, 14, &["arp_only \"eno1\": arp_ignore = 4 is not a valid value"]);
    assert_err(&with("arp_announce = \"2\"\n"), 5, 16, &["`arp_only[0].arp_announce`", "invalid type"]);
    assert_err(&format!("{rail}[[arp_only]]\nname = \"eno:1\"\n"), 4, 8, &["interface name", "contains ':'"]);
    assert_err(&format!("{rail}[[arp_only]]\narp_ignore = 1\n"), 3, 1, &["missing field `name`"]);
    let e = assert_err(
        &format!("{rail}[[arp_only]]\nname = \"rail0\"\n"),
        4,
        8,
        &["arp_only \"rail0\" is also an [[interface]] (at 2:8)"],
    );
    assert!(e.hint.contains("gets its ARP sysctls already"), "{e}");
    assert_err(
        &format!("{rail}[[arp_only]]\nname = \"eno1\"\n[[arp_only]]\nname = \"eno1\"\n"),
        6,
        8,
        &["arp_only \"eno1\" is listed twice (first at 4:8)"],
    );
    // The rails are still required.
    assert!(err("[[arp_only]]\nname = \"eno1\"\n").what.contains("no [[interface]]"));
}

// --- tables -------------------------------------------------------------

#[test]
fn duplicate_tables() {
    let text = "[[interface]]\nname = \"a\"\ntable = 7\n[[interface]]\nname = \"b\"\ntable = 7\n";
    assert_err(text, 6, 9, &["interfaces \"a\" (at 3:9) and \"b\" both use table 7"]);
    // An explicit table wins over a given one: "a" takes the next free.
    let text = "[[interface]]\nname = \"a\"\n[[interface]]\nname = \"b\"\ntable = 100\n";
    let c = ok(text);
    assert_eq!((c.interfaces[0].table, c.interfaces[1].table), (101, 100));
}

#[test]
fn reserved_tables() {
    for (t, kind) in [(0, "unspecified"), (253, "`default`"), (254, "`main`"), (255, "`local`")] {
        assert_err(&iface(&format!("table = {t}\n")), 3, 9, &[&format!("table = {t} is reserved"), kind]);
    }
    // Given tables skip the kernel's reserved ones.
    let text = format!("[defaults]\ntable_base = 251\n{}", named(&["a", "b", "c"]));
    let tables: Vec<u32> = ok(&text).interfaces.iter().map(|i| i.table).collect();
    assert_eq!(tables, [251, 252, 256]);
    let text = "[defaults]\ntable_base = 0\n[[interface]]\nname = \"a\"\n";
    assert_eq!(ok(text).interfaces[0].table, 1);
    let text = format!("[defaults]\ntable_base = 0\n{}table = 5\n", named(&["a"]));
    let text = format!("{text}{}", named(&["b"]));
    assert_eq!(ok(&text).interfaces[1].table, 1);
}

#[test]
fn table_out_of_range() {
    assert_err(&iface("table = 4294967296\n"), 3, 9, &["table = 4294967296 is out of range"]);
    assert_err(&iface("table = -1\n"), 3, 9, &["table = -1 is out of range"]);
    assert_err(
        "[defaults]\ntable_base = -3\n[[interface]]\nname = \"a\"\n",
        2,
        14,
        &["[defaults]: table_base = -3"],
    );
    assert_eq!(ok(&iface("table = 4294967295\n")).interfaces[0].table, u32::MAX);
    let text = format!("[defaults]\ntable_base = 4294967295\n{}", named(&["a", "b"]));
    assert_err(&text, 6, 8, &["interface \"b\": no free table from table_base 4294967295"]);
}

// --- priority, protocol, sysctls ----------------------------------------

#[test]
fn priority_out_of_range() {
    for p in ["0", "32766", "32767", "-5", "99999999999"] {
        assert_err(
            &iface(&format!("priority = {p}\n")),
            3,
            12,
            &[&format!("interface \"ib0\": priority = {p} is out of range 1..=32765")],
        );
        let text = format!("[defaults]\npriority = {p}\n[[interface]]\nname = \"a\"\n");
        assert_err(&text, 2, 12, &[&format!("[defaults]: priority = {p}")]);
    }
    assert_eq!(ok(&iface("priority = 1\n")).interfaces[0].priority, 1);
}

#[test]
fn announce_count() {
    assert_eq!(ok(&iface("")).defaults.announce, DEFAULT_ANNOUNCE);
    assert_eq!(DEFAULT_ANNOUNCE, 2);
    for n in [0, 1, 10] {
        let text = format!("[defaults]\nannounce = {n}\n[[interface]]\nname = \"a\"\n");
        assert_eq!(ok(&text).defaults.announce, n);
    }
    for n in ["11", "-1", "99999999999"] {
        let text = format!("[defaults]\ntable_base = 100\nannounce = {n}\n[[interface]]\nname = \"a\"\n");
        let e = assert_err(&text, 3, 12, &[&format!("[defaults]: announce = {n} is out of range 0..=10")]);
        assert!(e.hint.contains("0 turns it off"), "{e}");
    }
    assert_err(
        "[defaults]\nannounce = \"2\"\n[[interface]]\nname = \"a\"\n",
        2,
        12,
        &["`defaults.announce`"],
    );
    // Not an interface key.
    assert_err(&iface("announce = 1\n"), 3, 1, &["`interface[0].announce`: unknown field `announce`"]);
}

#[test]
fn kernel_protocols_rejected() {
    for (p, name) in KERNEL_PROTOCOLS.iter().enumerate() {
        let text = format!("[defaults]\nprotocol = {p}\n[[interface]]\nname = \"a\"\n");
        let e = assert_err(&text, 2, 12, &[&format!("protocol = {p} is the kernel's own protocol `{name}`")]);
        assert!(e.hint.contains("5..=255"), "{e}");
    }
    for p in ["256", "-1"] {
        let text = format!("[defaults]\nprotocol = {p}\n[[interface]]\nname = \"a\"\n");
        assert_err(&text, 2, 12, &[&format!("protocol = {p} is out of range")]);
    }
    assert_err(&iface("protocol = 99\n"), 3, 1, &["unknown field `protocol`"]);
    for (p, daemon) in [(99, "openr"), (12, "bird"), (188, "FRR")] {
        let text = format!("[defaults]\nprotocol = {p}\n[[interface]]\nname = \"a\"\n");
        assert_err(&text, 2, 12, &[&format!("protocol = {p} is used by"), daemon]);
    }
}

#[test]
fn sysctl_values_checked() {
    let bad = [
        ("arp_ignore", "4"),
        ("arp_ignore", "-1"),
        ("arp_announce", "3"),
        ("rp_filter", "3"),
        ("arp_filter", "2"),
    ];
    for (key, v) in bad {
        let k = SysctlKey::from_name(key).unwrap();
        let e = assert_err(
            &iface(&format!("{key} = {v}\n")),
            3,
            key.len() + 4,
            &[&format!("interface \"ib0\": {key} = {v} is not a valid value")],
        );
        assert!(e.hint.contains(k.valid_values()), "{e}");
        let text = format!("[defaults]\n{key} = {v}\n[[interface]]\nname = \"a\"\n");
        assert_err(&text, 2, key.len() + 4, &[&format!("[defaults]: {key} = {v}")]);
    }
    for key in SysctlKey::ALL {
        let c = ok(&iface(&format!("{} = 0\n", key.name())));
        assert_eq!(c.interfaces[0].sysctls[&key], 0);
    }
}

// --- messages and positions ---------------------------------------------

#[test]
fn positions_after_multibyte_text() {
    let text = "# é€ comment\n[[interface]]\nname = \"ib0\" # ü\ntable = 254\n";
    assert_err(text, 4, 9, &["table = 254"]);
}

// --- robustness ---------------------------------------------------------

/// Marsaglia's xorshift64: deterministic and dependency-free.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut XorShift, base: &[u8]) -> String {
    const INTERESTING: &[u8] = b"[]{}\"'=,./:#\n \t0123456789abcdefx-+\\\x00\xff";
    let mut b = base.to_vec();
    for _ in 0..=rng.below(3) {
        let at = rng.below(b.len());
        match rng.below(5) {
            0 => b.truncate(at),
            1 => {
                let bit = 1u8 << rng.below(8);
                if let Some(c) = b.get_mut(at) {
                    *c ^= bit;
                }
            }
            2 => {
                let new = INTERESTING[rng.below(INTERESTING.len())];
                if let Some(c) = b.get_mut(at) {
                    *c = new;
                }
            }
            3 => b.insert(at, INTERESTING[rng.below(INTERESTING.len())]),
            _ => {
                let end = (at + rng.below(20)).min(b.len());
                b.drain(at..end);
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

#[test]
fn never_panics_on_mutations() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let (mut oks, mut errs) = (0, 0);
    for _ in 0..600 {
        let text = mutate(&mut rng, FULL.as_bytes());
        match parse("fuzz.toml", &text) {
            Ok(c) => {
                oks += 1;
                for i in &c.interfaces {
                    assert!(!model::RESERVED_TABLES.contains(&i.table), "{text}");
                    assert!((1..=MAX_PRIORITY).contains(&i.priority), "{text}");
                }
            }
            Err(e) => {
                errs += 1;
                let shown = e.to_string();
                assert!(shown.starts_with("fuzz.toml"), "{shown}");
                if let Some(l) = e.loc {
                    assert!(l.line >= 1 && l.line <= text.lines().count() + 1, "{shown}\n{text}");
                }
            }
        }
    }
    assert!(oks > 0 && errs > 0, "mutations too weak or too strong: {oks} ok, {errs} errors");
}
