//! Real-kernel tests of `probe` at the scale of a fabric (issue 24): 8
//! rails against 64 peer addresses, IPv4 and IPv6, as a shared `--peers`
//! file of a fleet gives them.

mod common;
#[path = "common/two_hosts.rs"]
mod two_hosts;

use std::collections::BTreeSet;

use serde_json::Value;
use two_hosts::{Topology, TwoHosts};

const RAILS: usize = 8;
/// Peer addresses per B rail (its own and 7 more).
const PER_RAIL: usize = 8;

/// B with 8 addresses per rail (IPv4 and IPv6, 64 of each), applied on
/// both hosts with B's config taking every live address of its rails.
/// Returns the 128 peer addresses.
fn fleet_of_64(t: &TwoHosts) -> Vec<String> {
    let mut peers = Vec::new();
    let mut b_cfg = String::new();
    for (k, r) in t.b_rails.iter().enumerate() {
        peers.push(r.v4.clone());
        peers.push(r.v6.clone().expect("dual-stack"));
        for j in 1..PER_RAIL {
            let n = 128 + PER_RAIL * k + j;
            let (v4, v6) = (format!("198.51.100.{n}"), format!("2001:db8:1::{n}"));
            t.b.ip(&format!("addr add {v4}/24 dev {}", r.name));
            t.b.ip(&format!("addr add {v6}/64 dev {} nodad", r.name));
            peers.push(v4);
            peers.push(v6);
        }
        b_cfg.push_str(&format!("[[interface]]\nname = \"{}\"\ntable = {}\n\n", r.name, 100 + k));
    }
    let a_cfg = t.a_config().to_string_lossy().into_owned();
    t.rr(&t.a, &["apply", "--no-announce", &a_cfg]).expect_code(0);
    let b_path = t.dir().join("b-all-addresses.toml");
    std::fs::write(&b_path, b_cfg).expect("write B's config");
    t.rr(&t.b, &["apply", "--no-announce", &b_path.to_string_lossy()]).expect_code(0);
    peers
}

/// A's neighbour table as (address, interface) pairs, both families.
fn neighbours(t: &TwoHosts) -> BTreeSet<(String, String)> {
    t.a.ip("neigh show")
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let addr = w.next()?.to_string();
            let dev = l.split_whitespace().skip_while(|x| *x != "dev").nth(1)?.to_string();
            Some((addr, dev))
        })
        .collect()
}

/// Issue 24 item 4: a probe of 8 rails x 64 peer addresses, IPv4 and
/// IPv6 (1,024 pairs), leaves A's neighbour table as it was: the echoes go
/// to the link-layer address that answered, through the packet socket,
/// so the kernel resolves nothing and keeps nothing. Red while the
/// echoes go through the kernel's IP stack (an entry per peer address and
/// rail: 1,024 here, against a gc_thresh3 of 1024 shared by the host).
/// Every pair's small echoes came back, so they were sent and answered.
#[test]
fn a_probe_of_8_rails_by_64_peers_leaves_the_neighbour_table_as_it_was() {
    let t = TwoHosts::build(Topology::OneBridge, RAILS, true);
    let peers = fleet_of_64(&t);
    let list = peers.join(",");
    let before = neighbours(&t);
    let (run, doc) = t.probe_a(&["--peer", &list]);
    let after = neighbours(&t);
    let probes = doc["probes"].as_array().unwrap_or_else(|| panic!("no probes: {}", run.report()));
    assert_eq!(probes.len(), RAILS * peers.len(), "every rail to every peer address (one subnet)");
    let unanswered: Vec<&Value> = probes.iter().filter(|p| p["rtt_ms"].as_f64().is_none()).collect();
    assert!(
        unanswered.is_empty(),
        "{} of {} pairs had no echo back, e.g. {:#}",
        unanswered.len(),
        probes.len(),
        unanswered[0]
    );
    let added: Vec<&(String, String)> = after.difference(&before).collect();
    assert!(
        added.is_empty(),
        "the probe left {} neighbour entries on A, e.g. {:?}\nbefore: {before:?}",
        added.len(),
        &added[..added.len().min(5)]
    );
}
