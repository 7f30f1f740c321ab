//! Real-kernel tests of `probe` at the scale of a fabric (issue 24): 8
//! rails against 64 peer addresses, IPv4 and IPv6, as a shared `--peers`
//! file of a fleet gives them.

mod common;
#[path = "common/two_hosts.rs"]
mod two_hosts;

use std::collections::BTreeSet;

use common::{EXIT_FAILED, EXIT_NOT_VERIFIED, EXIT_OK};
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

fn probes(doc: &Value) -> &Vec<Value> {
    doc["probes"].as_array().unwrap_or_else(|| panic!("no probes in {doc:#}"))
}

fn problems(p: &Value) -> Vec<&str> {
    p["problems"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect()
}

fn not_verified(p: &Value) -> Vec<&str> {
    p["not_verified"]
        .as_array()
        .unwrap_or_else(|| panic!("no not_verified in {p:#}"))
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect()
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

/// Issue 24 item 3: B replies by the wrong NIC (no source rules): from
/// each of A's 8 rails, 8 of B's addresses. Every pair to an address of
/// another B rail than the one B's replies leave by must show it; none may
/// read `ok`. Red where that evidence was B's port unreachable for a UDP
/// datagram sent once: B rate-limits its ICMPv6 errors (a burst of 6 per
/// destination, 50 for the host), and 16 of 64 such pairs read `ok` only
/// because their evidence was suppressed. The TCP reset is not limited.
#[test]
fn ipv6_rate_limits_do_not_hide_a_wrong_reply_path_8_rails_by_8_peers() {
    let t = TwoHosts::build(Topology::OneBridge, RAILS, true);
    let a_cfg = t.a_config().to_string_lossy().into_owned();
    t.rr(&t.a, &["apply", "--no-announce", &a_cfg]).expect_code(0);
    let peers: Vec<String> = t.b_rails.iter().map(|r| r.v6.clone().unwrap()).collect();
    // Where B's replies leave: its main table's route to A's /64.
    let route = t.b.ip(&format!("-6 route get {} from {}", t.a_rails[0].v6.as_ref().unwrap(), peers[3]));
    let out = route.split_whitespace().skip_while(|w| *w != "dev").nth(1).expect("dev").to_string();
    let (run, doc) = t.probe_a(&["--peer", &peers.join(",")]);
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    let all = probes(&doc);
    assert_eq!(all.len(), RAILS * RAILS);
    for p in all {
        let peer = p["peer"].as_str().unwrap();
        let own = t.b_rails.iter().find(|r| r.v6.as_deref() == Some(peer)).unwrap();
        if own.name == out {
            assert!(
                problems(p).is_empty() && not_verified(p).is_empty(),
                "B's replies for {peer} leave right: {p:#}"
            );
        } else {
            let kinds = problems(p);
            assert!(
                kinds.contains(&"wrong_source_mac") || kinds.contains(&"wrong_interface"),
                "{peer} is on B's {}, its replies leave by {out}: {p:#}",
                own.name
            );
        }
    }
}

/// Issue 24 item 3: B right (applied) but dropping TCP (a firewall), and
/// sending no ICMPv6 error either (its ratelimit at 100 s): no IPv6
/// pair's reply path can be checked, so each is `not verified` with the
/// reason, its own cell in the matrix, and the exit code 6, not 0; the
/// IPv4 pairs are right. Red where the missing evidence read `ok` (exit 0).
#[test]
fn ipv6_pairs_without_their_routed_answer_are_not_verified_exit_6() {
    let t = TwoHosts::build(Topology::OneBridge, 2, true);
    t.apply_both();
    t.b.set_sysctl("net/ipv6/icmp/ratelimit", "100000");
    t.b.exec("ip6tables", &["-A", "INPUT", "-p", "tcp", "-j", "DROP"]);
    let mut peers: Vec<String> = t.b_rails.iter().map(|r| r.v4.clone()).collect();
    peers.extend(t.b_rails.iter().map(|r| r.v6.clone().unwrap()));
    let (run, doc) = t.probe_a(&["--peer", &peers.join(",")]);
    assert_eq!(run.code(), Some(EXIT_NOT_VERIFIED), "{}", run.report());
    for p in probes(&doc) {
        assert!(problems(p).is_empty(), "{p:#}");
        let why = not_verified(p);
        if p["peer"].as_str().unwrap().contains(':') {
            assert_eq!(why.len(), 1, "{p:#}");
            assert!(why[0].starts_with("no TCP reset came back from"), "{p:#}");
        } else {
            assert!(why.is_empty(), "IPv4 has its evidence: {p:#}");
        }
    }
    let cfg = t.a_config().to_string_lossy().into_owned();
    let text = t.rr(&t.a, &["probe", &cfg, "--peer", &peers.join(",")]).expect_code(EXIT_NOT_VERIFIED);
    let out = text.stdout();
    for line in out.lines().skip(1).take(2) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&cells[1..], ["ok", "ok", "unverified", "unverified"], "{out}");
    }
    assert!(out.contains(": not verified: no TCP reset came back from"), "{out}");
    assert!(text.stderr().contains("no problem found, but 4 of 8 pairs not verified"), "{}", text.report());
}

/// Issue 24 item 3: frames dropped by the probe's own packet sockets (a
/// receive buffer at the kernel's minimum, read only after 300 ms: the
/// fault-injection hooks) make a missing answer no evidence. No pair is
/// `arp_none` or `no_reply` for it; those pairs are not verified, with
/// the drops named, and the exit code is 6. Red where PACKET_STATISTICS
/// is not read: the dropped answers read as faults of the peer (exit 1).
#[test]
fn frames_dropped_by_the_probe_itself_make_pairs_not_verified_not_faulty() {
    let t = TwoHosts::build(Topology::OneBridge, RAILS, false);
    t.apply_both();
    let peers: Vec<String> = t.b_rails.iter().map(|r| r.v4.clone()).collect();
    let env = [("ROCE_ROUTE_PROBE_RCVBUF", "1"), ("ROCE_ROUTE_PROBE_DRAIN_DELAY_MS", "300")];
    let (run, doc) = t.probe_a_with(&["--peer", &peers.join(",")], &env);
    assert_eq!(run.code(), Some(EXIT_NOT_VERIFIED), "{}", run.report());
    let all = probes(&doc);
    let dropped: Vec<&Value> = all.iter().filter(|p| !not_verified(p).is_empty()).collect();
    assert!(!dropped.is_empty(), "the small buffer dropped nothing? {doc:#}");
    for p in all {
        assert!(problems(p).is_empty(), "a dropped answer is no fault: {p:#}");
    }
    for p in dropped {
        assert!(not_verified(p)[0].contains("packet sockets dropped"), "{p:#}");
    }
    assert!(doc["warnings"].to_string().contains("dropped"), "{doc:#}");
}

/// Issue 24 item 5: a fleet shares one `--peers` file, so it holds this
/// host's own addresses too. They are skipped and said so (`skipped` in
/// the JSON), not probed as `arp_none` + `local_route`: a healthy fleet
/// exits 0 on every host. Red where A probed its own addresses (exit 1).
#[test]
fn this_hosts_own_addresses_in_a_shared_peers_file_are_skipped() {
    let t = TwoHosts::build(Topology::OneBridge, 2, false);
    t.apply_both();
    let file = t.dir().join("fleet-peers.txt");
    let mut text = String::from("# every host of the fleet\n");
    for r in t.a_rails.iter().chain(&t.b_rails) {
        text.push_str(&format!("{}\n", r.v4));
    }
    std::fs::write(&file, text).unwrap();
    let file = file.to_string_lossy().into_owned();
    let (run, doc) = t.probe_a(&["--peers", &file]);
    assert_eq!(run.code(), Some(EXIT_OK), "{}", run.report());
    let skipped = doc["skipped"].as_array().unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(skipped.len(), 2, "{doc:#}");
    for (s, r) in skipped.iter().zip(&t.a_rails) {
        assert_eq!(s["peer"], r.v4.as_str());
        assert_eq!(s["reason"], format!("it is this host's own address (on {})", r.name));
    }
    assert_eq!(probes(&doc).len(), 2 * 2, "A's 2 rails to B's 2 addresses only: {doc:#}");
    let cfg = t.a_config().to_string_lossy().into_owned();
    let said = t.rr(&t.a, &["probe", &cfg, "--peers", &file]).expect_code(EXIT_OK);
    assert!(
        said.stderr()
            .contains(&format!("{} skipped: it is this host's own address (on rail0)", t.a_rails[0].v4)),
        "{}",
        said.report()
    );
    assert!(!said.stdout().contains(&t.a_rails[0].v4), "no column for a skipped address: {}", said.report());
}

/// Issue 24 item 5: a rail whose configured address is gone (deleted
/// after apply) is not ready: its pairs are not probed from an address the
/// host does not have, `not_ready` names the rail and address, and the run
/// exits 6 though every pair probed is right. Red where the pairs went out
/// from the missing address as if it were there.
#[test]
fn a_configured_address_missing_from_its_rail_leaves_its_pairs_not_probed() {
    // One subnet for all rails, and a subnet per rail: there the missing
    // address's peers must not go to the other rails as if off-link.
    for topology in [Topology::OneBridge, Topology::RailOptimized] {
        let t = TwoHosts::build(topology, 2, false);
        t.apply_both();
        let gone = &t.a_rails[1];
        t.a.ip(&format!("addr del {}/{} dev {}", gone.v4, gone.v4_len, gone.name));
        let peers: Vec<String> = t.b_rails.iter().map(|r| r.v4.clone()).collect();
        let (run, doc) = t.probe_a(&["--peer", &peers.join(",")]);
        assert_eq!(run.code(), Some(EXIT_NOT_VERIFIED), "{topology:?}: {}", run.report());
        let not_ready = doc["not_ready"].as_array().unwrap_or_else(|| panic!("{doc:#}"));
        assert_eq!(not_ready.len(), 1, "{doc:#}");
        assert_eq!(
            (not_ready[0]["rail"].as_str(), not_ready[0]["address"].as_str()),
            (Some("rail1"), Some(gone.v4.as_str()))
        );
        let want = if topology == Topology::OneBridge { 2 } else { 1 };
        assert_eq!(probes(&doc).len(), want, "{topology:?}: rail0 to what it reaches only: {doc:#}");
        for p in probes(&doc) {
            assert_eq!(p["rail"], "rail0", "no pair from the rail without its address: {p:#}");
            assert!(problems(p).is_empty() && not_verified(p).is_empty(), "{p:#}");
        }
        assert!(run.stdout().contains("is in the config but not on rail1"), "{}", run.report());
    }
}

/// Issue 24 item 5: a rail that goes down while its pair waits for an
/// answer: the neighbour request sent again at half the timeout cannot go
/// out (ENETDOWN). The pair is `send_failed` on this host, rather than
/// `arp_none`, which blames the peer. Red where the send error was only a
/// warning and the pair read arp_none.
#[test]
fn a_rail_that_goes_down_mid_probe_is_send_failed_not_arp_none() {
    let t = TwoHosts::build(Topology::OneBridge, 1, false);
    t.apply_both();
    let cfg = t.a_config().to_string_lossy().into_owned();
    let base = t.dir().join(format!("state-{}", t.a.name()));
    let args = ["--json", "probe", cfg.as_str(), "--peer", "198.51.100.250", "--timeout", "2"];
    let child = common::roce_route_command(t.a.name(), &base, t.dir(), &args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start probe");
    std::thread::sleep(std::time::Duration::from_millis(300));
    t.a.ip("link set rail0 down");
    let out = child.wait_with_output().expect("probe's output");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(out.status.code(), Some(EXIT_FAILED), "{doc:#}");
    let p = &probes(&doc)[0];
    assert_eq!(problems(p), ["send_failed"], "{p:#}");
    assert_eq!(p["fix_on"][0], "this_host", "{p:#}");
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("Network is down") && detail.contains("(not arp_none)"), "{detail}");
}

/// Issue 24 item 5: a throttled rail (a token bucket whose burst is 2 kB
/// on A's rail0, so the kernel drops every larger frame at once: ENOBUFS)
/// is `send_failed` on this host, not the path's `mtu`: the jumbo echoes
/// never left. Red where every pair of the throttled rail read `mtu`.
#[test]
fn a_throttled_rail_is_send_failed_on_this_host_not_mtu() {
    let t = TwoHosts::build(Topology::OneBridge, 2, false);
    t.apply_both();
    t.a.exec(
        "tc",
        &["qdisc", "add", "dev", "rail0", "root", "tbf", "rate", "100mbit", "burst", "2k", "limit", "100k"],
    );
    let peers: Vec<String> = t.b_rails.iter().map(|r| r.v4.clone()).collect();
    let (run, doc) = t.probe_a(&["--peer", &peers.join(",")]);
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    for p in probes(&doc) {
        if p["rail"] == "rail0" {
            assert_eq!(problems(p), ["send_failed"], "{p:#}");
            assert!(p["detail"].as_str().unwrap().contains("No buffer space available"), "{p:#}");
        } else {
            assert!(problems(p).is_empty() && not_verified(p).is_empty(), "rail1 is not throttled: {p:#}");
        }
    }
}

/// Issue 24 item 5: `rtt_ms` is the path's, from the kernel's receive
/// timestamps, not the time a reply waited for the probe to read it: with
/// the probe held 300 ms once its first echoes are out (a fault-injection
/// hook, as 400 pairs at once hold it), a veth pair's RTT stays far below
/// that. Red where the RTT was taken when the probe read the reply.
#[test]
fn the_rtt_is_the_paths_not_the_probes_own_queueing() {
    let t = TwoHosts::build(Topology::OneBridge, 1, false);
    t.apply_both();
    let env = [("ROCE_ROUTE_PROBE_ECHO_READ_DELAY_MS", "300")];
    let (run, doc) = t.probe_a_with(&["--peer", &t.b_rails[0].v4, "--timeout", "2"], &env);
    assert_eq!(run.code(), Some(EXIT_OK), "{}", run.report());
    let rtt = probes(&doc)[0]["rtt_ms"].as_f64().unwrap_or_else(|| panic!("{doc:#}"));
    assert!(rtt < 100.0, "rtt {rtt} ms: the probe's own 300 ms wait, not the path's: {doc:#}");
    assert!(doc["elapsed_ms"].as_f64().unwrap() >= 300.0, "the hook held the probe: {doc:#}");
}

/// Issue 24 item 4, the probed side: a host that answers learns the
/// prober's source address on the rail that owns the probed address, so a
/// fleet probing all pairs at once makes each host learn (hosts - 1) x
/// rails x rails entries (4,032 at 64 hosts of 8 rails, over the default
/// gc_thresh3 of 1024). With --same-rail and the peer's --self document,
/// each prober's rail probes only the peer's NIC of its name: B learns one
/// entry per rail of A, not one per pair, and every pair probed is right.
/// Red where --same-rail keeps the cross-rail pairs.
#[test]
fn same_rail_makes_the_probed_host_learn_one_entry_per_rail_not_per_pair() {
    let t = TwoHosts::build(Topology::OneBridge, 4, false);
    t.apply_both();
    let peers = t.b_self_file().to_string_lossy().into_owned();
    let a_sources: BTreeSet<String> = t.a_rails.iter().map(|r| r.v4.clone()).collect();
    let learnt = |t: &TwoHosts| -> usize {
        t.b.ip("-4 neigh show")
            .lines()
            .filter(|l| l.split_whitespace().next().is_some_and(|a| a_sources.contains(a)))
            .count()
    };
    for (args, pairs, entries) in
        [(vec!["--peers", &peers], 16, 16), (vec!["--peers", &peers, "--same-rail"], 4, 4)]
    {
        t.b.ip("neigh flush all");
        let (run, doc) = t.probe_a_with(&args, &[]);
        assert_eq!(run.code(), Some(EXIT_OK), "{args:?}: {}", run.report());
        let all = probes(&doc);
        assert_eq!(all.len(), pairs, "{args:?}: {doc:#}");
        if pairs == 4 {
            for p in all {
                assert_eq!(p["peer_rail"], p["rail"], "only the peer's NIC of the rail's name: {p:#}");
            }
        }
        assert_eq!(learnt(&t), entries, "{args:?}: B's table:\n{}", t.b.ip("-4 neigh show"));
    }
}
