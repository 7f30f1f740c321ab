//! Real-kernel tests of `probe` on routed fabrics (issue 24.1): the peers
//! are behind a router (`common::two_hosts`'s Routed31: a /31 per rail to
//! its leaf port; RoutedSubnets: a subnet per rail with a gateway), so the
//! probe must ask for the gateway that this host's route names, not for
//! the peer's own address, and then check the echo, the reply's NIC and
//! the path MTU as on a flat fabric. Each fault is made by one change
//! from the healthy run, and its verdict names the gateway when it is the
//! gateway that fails.

mod common;
#[path = "common/two_hosts.rs"]
mod two_hosts;

use common::{EXIT_FAILED, EXIT_OK};
use serde_json::Value;
use two_hosts::{Topology, TwoHosts};

fn probes(doc: &Value) -> &Vec<Value> {
    doc["probes"].as_array().unwrap_or_else(|| panic!("no probes in {doc:#}"))
}

fn problems(p: &Value) -> Vec<String> {
    p["problems"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect()
}

fn peer_args(addrs: &[String]) -> Vec<&str> {
    addrs.iter().flat_map(|a| ["--peer", a.as_str()]).collect()
}

/// B's addresses, IPv4 then IPv6 (when it has them).
fn b_addresses(t: &TwoHosts) -> Vec<String> {
    let mut a: Vec<String> = t.b_rails.iter().map(|r| r.v4.clone()).collect();
    a.extend(t.b_rails.iter().filter_map(|r| r.v6.clone()));
    a
}

/// A's rail of a probe, as an index.
fn rail_index(p: &Value) -> usize {
    p["rail"].as_str().unwrap()["rail".len()..].parse().unwrap()
}

/// The gateway of A's rail k for the probe's family, as the JSON writes
/// an address.
fn a_gateway(t: &TwoHosts, p: &Value) -> String {
    let v6 = p["peer"].as_str().unwrap().contains(':');
    let gw: std::net::IpAddr = t.a_rails[rail_index(p)].gateways[usize::from(v6)].parse().unwrap();
    gw.to_string()
}

/// `--json probe` from A to every B address, with `extra` arguments:
/// the run's exit code and its document.
fn probe_b(t: &TwoHosts, extra: &[&str]) -> (Option<i32>, Value) {
    let addrs = b_addresses(t);
    let cfg = t.a_config().to_string_lossy().into_owned();
    let mut args = vec!["--json", "probe", cfg.as_str()];
    args.extend(extra);
    args.extend(peer_args(&addrs));
    let run = t.rr(&t.a, &args);
    let doc = serde_json::from_str(&run.stdout()).unwrap_or_else(|e| panic!("{e}: {}", run.report()));
    (run.code(), doc)
}

/// /31 per rail, dual-stack: every rail reaches every B address through
/// its own leaf; every pair is right (today's main asked the leaf for B's
/// address, got no answer and said arp_none on every pair), names the
/// gateway, and the full jumbo MTU goes through the router.
#[test]
fn a_31_per_rail_fabric_is_right_through_each_rails_leaf_ipv4_and_ipv6() {
    let t = TwoHosts::build(Topology::Routed31, 4, true);
    t.apply_both();
    let (code, doc) = probe_b(&t, &[]);
    assert_eq!(code, Some(EXIT_OK), "{doc:#}");
    assert_eq!(probes(&doc).len(), 32, "every rail to every B address of its family: {doc:#}");
    for p in probes(&doc) {
        assert!(problems(p).is_empty(), "{p:#}");
        assert_eq!(p["gateway"].as_str(), Some(a_gateway(&t, p).as_str()), "{p:#}");
        assert_eq!(p["path_mtu"], two_hosts::JUMBO, "{p:#}");
        let detail = p["detail"].as_str().unwrap();
        assert!(detail.contains(&format!("through the gateway {}", a_gateway(&t, p))), "{detail}");
    }
    // The matrix a person reads says ok too.
    let addrs = b_addresses(&t);
    let cfg = t.a_config().to_string_lossy().into_owned();
    let mut text = vec!["probe", cfg.as_str()];
    text.extend(peer_args(&addrs));
    let run = t.rr(&t.a, &text).expect_code(EXIT_OK);
    assert!(
        run.stdout().contains("all 32 pairs right") || run.stderr().contains("all 32 pairs right"),
        "{}",
        run.report()
    );
}

/// The leaf's port of A's rail2 loses its address: rail2's pairs are
/// arp_none naming that gateway, with the fix on the path; the other
/// rails stay right. One B rail at MTU 1500 behind the router is an mtu
/// problem on the pairs to its addresses, from every rail.
#[test]
fn a_dead_leaf_port_names_the_gateway_and_a_small_mtu_behind_the_router_is_mtu() {
    let t = TwoHosts::build(Topology::Routed31, 4, false);
    t.apply_both();
    let leaf = t.a_rails[2].gateways[0].clone();
    t.sw.ip(&format!("addr del {leaf}/31 dev {}", t.a_rails[2].port));
    t.b.ip("link set rail3 mtu 1500");
    let (code, doc) = probe_b(&t, &["--timeout", "0.5"]);
    assert_eq!(code, Some(EXIT_FAILED), "{doc:#}");
    assert_eq!(probes(&doc).len(), 16);
    for p in probes(&doc) {
        let to_b3 = p["peer"] == t.b_rails[3].v4.as_str();
        match (rail_index(p), to_b3) {
            (2, _) => {
                assert_eq!(problems(p), ["arp_none"], "{p:#}");
                assert_eq!(p["fix_on"], serde_json::json!(["path"]), "{p:#}");
                let detail = p["detail"].as_str().unwrap();
                assert!(
                    detail.starts_with(&format!("the gateway {leaf} (this host's next hop to ")),
                    "{detail}"
                );
            }
            (_, true) => {
                assert_eq!(problems(p), ["mtu"], "{p:#}");
                let path = p["path_mtu"].as_u64().unwrap();
                assert!((1280..=1504).contains(&path), "{p:#}");
            }
            _ => assert!(problems(p).is_empty(), "{p:#}"),
        }
    }
}

/// A subnet per rail with a gateway: right when both hosts are applied.
/// B without roce-route has no route back to A's subnets (its rails have
/// only their connected routes): every pair is no_reply, said as the
/// gateway answering and the peer's route back missing, not as a layer-2
/// fault of this host's rail.
#[test]
fn a_subnet_per_rail_with_gateways_and_a_peer_without_its_routes() {
    let t = TwoHosts::build(Topology::RoutedSubnets, 2, false);
    t.apply_both();
    let (code, doc) = probe_b(&t, &["--timeout", "0.5"]);
    assert_eq!(code, Some(EXIT_OK), "{doc:#}");
    assert_eq!(probes(&doc).len(), 4);
    for p in probes(&doc) {
        assert!(problems(p).is_empty(), "{p:#}");
        assert_eq!(p["gateway"].as_str(), Some(a_gateway(&t, p).as_str()), "{p:#}");
    }

    t.rr(&t.b, &["remove"]).expect_code(EXIT_OK);
    let (code, doc) = probe_b(&t, &["--timeout", "0.5"]);
    assert_eq!(code, Some(EXIT_FAILED), "{doc:#}");
    for p in probes(&doc) {
        assert_eq!(problems(p), ["no_reply"], "{p:#}");
        let detail = p["detail"].as_str().unwrap();
        assert!(
            detail.starts_with(&format!("the gateway {} answered ARP on ", a_gateway(&t, p))),
            "{detail}"
        );
        assert!(detail.contains("its route back to"), "{detail}");
    }
}
