//! Tests of the test bed itself (no product code): they prove that a fresh
//! testbed reproduces the multi-rail, one-subnet problem, and that the
//! observations tell a fixed host from a broken one.

mod common;

use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;

use common::{PEER_V4, PEER_V6, Testbed};

/// Whether `ip netns list` shows `name` (the first word of each line).
fn netns_exists(name: &str) -> bool {
    let list = common::run("ip", &["netns", "list"]);
    list.lines().any(|l| l.split_whitespace().next() == Some(name))
}

fn four_rails() -> Testbed {
    Testbed::builder().rails(4).ipv6(true).build()
}

/// The host rail names, in order.
fn rail_names(tb: &Testbed) -> Vec<String> {
    tb.rails().iter().map(|r| r.name.clone()).collect()
}

/// The peer's MAC entry for every rail's IPv4 address, resolved from scratch.
fn peer_macs_v4(tb: &Testbed) -> Vec<String> {
    let resolve = |ip: &str| tb.peer_neigh_mac(ip).unwrap_or_else(|| panic!("peer could not resolve {ip}"));
    tb.rails().iter().map(|r| resolve(&r.v4)).collect()
}

#[test]
fn without_a_fix_every_rail_routes_out_of_the_first() {
    let tb = four_rails();
    for r in tb.rails() {
        assert_eq!(tb.route_get_dev(PEER_V4, &r.v4), "rail0", "route get {PEER_V4} from {}", r.v4);
    }
}

#[test]
fn without_a_fix_replies_leave_by_the_first_rail() {
    let tb = four_rails();
    // The requests arrive on whichever rail won ARP (see the ARP flux
    // test); the replies follow the main table's first subnet route.
    assert_eq!(tb.reply_leaves_via(2), "rail0");
    for k in 0..tb.rails().len() {
        assert_eq!(tb.reply_leaves_via(k), "rail0", "replies to pings of rail{k}");
    }
}

#[test]
fn arp_flux_before_and_per_rail_answers_after_a_manual_fix() {
    let tb = four_rails();
    assert_eq!(tb.host_sysctl("all", "arp_ignore"), 0, "a testbed starts with arp_ignore=0");

    // Broken: every rail answers every who-has and the first answer wins
    // (later ones fall within the neighbour locktime), so the peer maps all
    // rail addresses to one MAC. Here it is the last-enslaved port's rail,
    // as the bridge floods its newest port first.
    let before = peer_macs_v4(&tb);
    let flux_mac = &before[0];
    assert!(before.iter().all(|m| m == flux_mac), "expected one MAC for all rail addresses: {before:?}");
    let answering = tb.rail_by_mac(flux_mac).unwrap_or_else(|| panic!("{flux_mac} is no rail's MAC"));
    let wrong = tb.rails().iter().zip(&before).filter(|(r, m)| r.mac != **m).count();
    assert_eq!(wrong, tb.rails().len() - 1, "only {} owns {flux_mac}", answering.name);

    // Fixed by hand: arp_ignore/arp_announce and a table + rule per rail.
    tb.fix_by_hand();
    for (k, r) in tb.rails().iter().enumerate() {
        assert_eq!(tb.route_get_dev(PEER_V4, &r.v4), r.name, "route get {PEER_V4} from {}", r.v4);
        assert_eq!(tb.reply_leaves_via(k), r.name, "replies to pings of {}", r.v4);
    }
    let after = peer_macs_v4(&tb);
    let own: Vec<String> = tb.rails().iter().map(|r| r.mac.clone()).collect();
    assert_eq!(after, own, "after the fix each rail answers for its own address");
}

#[test]
fn ipv6_has_no_neighbour_flux_but_route_get_still_picks_the_first_rail() {
    let tb = four_rails();
    for (k, r) in tb.rails().iter().enumerate() {
        let v6 = r.v6.as_deref().expect("ipv6 testbed");
        assert_eq!(tb.peer_neigh_mac(v6).as_deref(), Some(r.mac.as_str()), "NDP answer for {v6}");
        assert_eq!(tb.route_get_dev(PEER_V6, v6), "rail0", "route get {PEER_V6} from {v6}");
        // Echo replies go back by the interface the request came in on.
        assert_eq!(tb.reply_leaves_via_ip(v6), r.name, "replies to pings of rail{k}'s {v6}");
    }
}

#[test]
fn dump_is_stable_and_sees_changes() {
    let tb = four_rails();
    let first = tb.dump();
    for section in
        ["## ip -4 rule", "## ip -6 rule", "## ip -4 route show table all", "## ip -6 route show table all"]
    {
        assert!(first.contains(section), "missing {section} in\n{first}");
    }
    assert!(first.contains("conf/rail3/arp_ignore = 0"), "{first}");
    assert!(first.contains("198.51.100.0/24 dev rail2 proto kernel scope link src 198.51.100.12"), "{first}");

    // Traffic and time alone must not change it.
    tb.reply_leaves_via(1);
    tb.peer_neigh_mac(&tb.rail(0).v4);
    assert_eq!(tb.dump(), first, "dump changed by itself");

    tb.fix_by_hand();
    let fixed = tb.dump();
    assert!(fixed.contains("from 198.51.100.11 lookup 101"), "{fixed}");
    assert!(fixed.contains("198.51.100.0/24 dev rail1 table 101 scope link src 198.51.100.11"), "{fixed}");
    assert!(fixed.contains("conf/all/arp_ignore = 1"), "{fixed}");
}

#[test]
fn standard_config_lists_every_rail() {
    let tb = Testbed::builder().rails(2).ipv6(true).build();
    let toml = tb.config_toml_with_gateway();
    let expected = "[[interface]]\nname = \"rail1\"\naddresses = [\"198.51.100.11/24\", \"2001:db8:1::11/64\"]\n\
                    table = 101\ngateway = [\"198.51.100.254\", \"2001:db8:1::fe\"]\n";
    assert!(toml.contains(expected), "{toml}");
    let path = tb.write_config(&toml);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), toml);
    assert!(path.starts_with(tb.dir()));
    // The gateways the configs use exist on the peer.
    tb.sh_host(&format!("ping -n -q -c1 -W1 {}", common::GATEWAY_V4));
    tb.sh_host(&format!("ping -n -q -c1 -W1 {}", common::GATEWAY_V6));
}

#[test]
fn namespaces_and_temp_dir_are_gone_after_drop() {
    let tb = Testbed::builder().rails(2).build();
    let names = [tb.host_ns().to_string(), tb.peer_ns().to_string()];
    let dir = tb.dir().to_path_buf();
    assert!(names.iter().all(|n| netns_exists(n)));
    assert!(dir.is_dir());
    drop(tb);
    assert_gone(&names, &dir);
}

#[test]
fn namespaces_and_temp_dir_are_gone_after_a_panicking_test() {
    let mut seen: Option<([String; 2], PathBuf)> = None;
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let tb = Testbed::builder().rails(2).build();
        seen = Some(([tb.host_ns().to_string(), tb.peer_ns().to_string()], tb.dir().to_path_buf()));
        panic!("deliberate panic inside a test body");
    }));
    assert!(result.is_err());
    let (names, dir) = seen.expect("the testbed was built");
    assert_gone(&names, &dir);
}

fn assert_gone(names: &[String], dir: &std::path::Path) {
    for n in names {
        assert!(!netns_exists(n), "namespace {n} left behind");
    }
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn dotted_rail_names_work() {
    let tb = Testbed::builder().rail_names(&["rail0.100", "rail1.100"]).ipv6(true).build();
    assert_eq!(rail_names(&tb), ["rail0.100", "rail1.100"]);
    assert_eq!(tb.route_get_dev(PEER_V4, &tb.rail(1).v4), "rail0.100");
    tb.set_host_sysctl("rail1.100", "arp_ignore", 1);
    assert_eq!(tb.host_sysctl("rail1.100", "arp_ignore"), 1);
    assert!(tb.dump().contains("conf/rail1.100/arp_ignore = 1"));

    tb.fix_by_hand();
    assert_eq!(tb.route_get_dev(PEER_V4, &tb.rail(1).v4), "rail1.100");
    assert_eq!(tb.reply_leaves_via(1), "rail1.100");
    assert_eq!(tb.peer_neigh_mac(&tb.rail(1).v4), Some(tb.rail(1).mac.clone()));
}
