//! Real-kernel tests of `probe` (issue 16): host A probes host B over two
//! topologies (`common::two_hosts`), and each fault made on B (or on A's
//! own routing) is found on A and named with its kind, on the pairs it
//! affects and on no other. The healthy runs (exit 0, no problem on any
//! pair) are the baseline each fault test departs from by one change, so
//! a fault's kind can only come from that change.

mod common;
#[path = "common/two_hosts.rs"]
mod two_hosts;

use std::collections::BTreeSet;

use common::{EXIT_FAILED, EXIT_INVALID, EXIT_OK, profile_count};
use serde_json::Value;
use two_hosts::{JUMBO, Topology, TwoHosts};

/// Frames a healthy pair sends: one ARP request (or solicitation), three
/// small echoes, one echo of the rail's MTU; IPv6 adds the TCP SYN whose
/// reset shows the peer's routed reply path.
const FRAMES_PER_HEALTHY_V4_PAIR: u64 = 5;
const FRAMES_PER_HEALTHY_V6_PAIR: u64 = 6;

fn probes(doc: &Value) -> &Vec<Value> {
    doc["probes"].as_array().unwrap_or_else(|| panic!("no probes in {doc:#}"))
}

fn problems(p: &Value) -> Vec<String> {
    p["problems"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect()
}

/// The probes to `peer`, and the others.
fn split<'a>(doc: &'a Value, peers: &[&str]) -> (Vec<&'a Value>, Vec<&'a Value>) {
    probes(doc).iter().partition(|p| peers.contains(&p["peer"].as_str().unwrap()))
}

fn assert_all_ok(doc: &Value, what: &str) {
    for p in probes(doc) {
        assert!(problems(p).is_empty(), "{what}: a problem on a healthy pair: {p:#}\n{doc:#}");
    }
}

fn b_addresses(t: &TwoHosts, v6: bool) -> Vec<String> {
    t.b_rails.iter().map(|r| if v6 { r.v6.clone().unwrap() } else { r.v4.clone() }).collect()
}

fn peer_args(addrs: &[String]) -> Vec<&str> {
    addrs.iter().flat_map(|a| ["--peer", a.as_str()]).collect()
}

/// roce-route on both hosts, the peer described by its own `--self`: every
/// pair right (exit 0), B's NICs named, the path MTU the jumbo MTU, and a
/// bounded number of frames (counted by the probe and by A's tx_packets).
#[test]
fn a_correct_pair_of_hosts_is_right_on_every_pair_ipv4_and_ipv6() {
    let t = TwoHosts::build(Topology::OneBridge, 4, true);
    t.apply_both();
    let peers = t.b_self_file();
    let peers = peers.to_string_lossy().into_owned();
    // --self has no peers to tell this host's addresses from: it reads
    // its rails' alone, not lo's too.
    let b_cfg = t.b_config().to_string_lossy().into_owned();
    let run = t.rr_profiled(&t.b, &["probe", &b_cfg, "--self"]).expect_code(EXIT_OK);
    let theirs: usize =
        t.b_rails.iter().map(|r| t.b.ip(&format!("-o addr show dev {}", r.name)).lines().count()).sum();
    assert!(t.b.ip("-o addr show").lines().count() > theirs, "lo has addresses too");
    assert_eq!(profile_count(&run.stderr(), "addresses_read"), theirs as u64, "{}", run.stderr());
    let before = t.a_tx();
    let (run, doc) = t.probe_a(&["--peers", &peers]);
    let after = t.a_tx();
    assert_eq!(run.code(), Some(EXIT_OK), "{}", run.report());
    assert_all_ok(&doc, "healthy");
    let all = probes(&doc);
    // 4 rails x (4 IPv4 + 4 IPv6 peer addresses), all on-link.
    assert_eq!(all.len(), 32, "{doc:#}");
    for p in all {
        let peer = p["peer"].as_str().unwrap();
        let owner = t.b_rails.iter().find(|r| r.v4 == peer || r.v6.as_deref() == Some(peer)).unwrap();
        assert_eq!(p["peer_rail"], owner.name.as_str(), "{p:#}");
        assert_eq!(p["arp_answers"], serde_json::json!([owner.mac]), "{p:#}");
        assert_eq!(p["reply_source_mac"], owner.mac.as_str(), "{p:#}");
        assert_eq!(p["reply_interface"], p["rail"], "{p:#}");
        assert_eq!(p["rail_mtu"], JUMBO);
        assert_eq!(p["path_mtu"], JUMBO);
        assert!(p["rtt_ms"].as_f64().is_some_and(|r| r > 0.0), "{p:#}");
    }
    let pairs = all.len() as u64;
    let frames = 16 * FRAMES_PER_HEALTHY_V4_PAIR + 16 * FRAMES_PER_HEALTHY_V6_PAIR;
    assert_eq!(doc["frames_sent"], frames, "{doc:#}");
    // On the wire: the probe's frames and a little slack for anything
    // else the stack sends, but no resolution of its own per echo (issue
    // 24: the echoes go to the answered MAC, the kernel resolves nothing).
    let sent: u64 = after.iter().zip(&before).map(|(a, b)| a - b).sum();
    assert!(
        sent >= frames && sent <= frames + 4,
        "A's rails sent {sent} frames for {pairs} pairs: {before:?} -> {after:?}"
    );
    // Without CONFIG: the rails of the latest apply on A.
    let run = t.rr(&t.a, &["--json", "probe", "--peer", &t.b_rails[2].v4]).expect_code(EXIT_OK);
    let latest: Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(latest["rails"], serde_json::json!(["rail0", "rail1", "rail2", "rail3"]), "{latest:#}");
    assert_eq!(probes(&latest).len(), 4);
    // The matrix: rails down, peers across, "ok" in every cell.
    let cfg = t.a_config().to_string_lossy().into_owned();
    let run = t.rr_profiled(&t.a, &["probe", &cfg, "--peers", &peers]).expect_code(EXIT_OK);
    // The config's links, asked by name as apply asks them: not lo too.
    assert_eq!(profile_count(&run.stderr(), "links_read"), 4, "{}", run.stderr());
    // Its four packet sockets (three observers and the sender) are closed
    // together: each close waits for an RCU grace period. Three beside the
    // first (0 when closed in turn).
    assert_eq!(profile_count(&run.stderr(), "packet_closes_beside"), 3, "{}", run.stderr());
    let text = run.stdout();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("rail") && lines[0].contains("198.51.100.110"), "{text}");
    for (k, line) in lines[1..5].iter().enumerate() {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells[0], format!("rail{k}"), "{text}");
        assert_eq!(&cells[1..], ["ok"; 8], "{text}");
    }
    // Issue 27: with -v, a line per right pair with its RTT and path MTU
    // (old: the matrix's `ok` only, though the README promised the MTU).
    let verbose = t.rr(&t.a, &["-v", "probe", &cfg, "--peers", &peers]).expect_code(EXIT_OK).stdout();
    let right: Vec<&str> = verbose.lines().filter(|l| l.contains(": ok: ")).collect();
    assert_eq!(right.len(), 32, "{verbose}");
    for line in right {
        assert!(line.contains(", rtt ") && line.contains(&format!(", path MTU {JUMBO}")), "{line}");
    }
}

/// B without source rules: its replies leave by the NIC its main table
/// picks (IPv4: its first), so every pair to an address of another B rail
/// sees that NIC's MAC, and the pairs to that NIC's own address do not.
/// (IPv6: Linux sends echo replies out of the request's interface; the
/// wrong NIC shows in the routed TCP reset.)
#[test]
fn b_without_source_rules_replies_from_the_wrong_mac() {
    let t = TwoHosts::build(Topology::OneBridge, 4, true);
    let a = t.a_config().to_string_lossy().into_owned();
    t.rr(&t.a, &["apply", "--no-announce", &a]).expect_code(EXIT_OK);
    // B answers ARP right (only the NIC that has the address) but routes
    // by its main table.
    for key in ["arp_ignore=1", "arp_announce=2"] {
        let (k, v) = key.split_once('=').unwrap();
        t.b.set_sysctl(&format!("net/ipv4/conf/all/{k}"), v);
    }
    for v6 in [false, true] {
        let addrs = b_addresses(&t, v6);
        let (run, doc) = t.probe_a(&peer_args(&addrs));
        assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
        // The NIC B's main table sends by: the MAC of every wrong reply.
        let macs: BTreeSet<&str> = probes(&doc)
            .iter()
            .filter(|p| !problems(p).is_empty())
            .map(|p| p["reply_source_mac"].as_str().unwrap_or("none"))
            .collect();
        assert_eq!(macs.len(), 1, "wrong replies come from one NIC: {macs:?}\n{doc:#}");
        let first_nic = t.b_rails.iter().find(|r| macs.contains(r.mac.as_str())).expect("a B NIC's MAC");
        if !v6 {
            assert_eq!(first_nic.name, "rail0", "IPv4 replies leave by B's first NIC");
        }
        let owned = if v6 { first_nic.v6.clone().unwrap() } else { first_nic.v4.clone() };
        let (own, others) = split(&doc, &[owned.as_str()]);
        assert_eq!(own.len(), 4);
        for p in own {
            assert!(problems(p).is_empty(), "the reply for B rail0's own address leaves by rail0: {p:#}");
        }
        assert_eq!(others.len(), 12);
        for p in others {
            assert_eq!(problems(p), ["wrong_source_mac"], "{p:#}");
            assert_eq!(p["reply_source_mac"], first_nic.mac.as_str(), "{p:#}");
            assert_ne!(p["arp_answers"], serde_json::json!([first_nic.mac]), "{p:#}");
        }
    }
}

/// B with arp_ignore 0 on the one bridge: every B NIC answers ARP for
/// every B address.
#[test]
fn b_with_arp_ignore_0_is_arp_flux() {
    let t = TwoHosts::build(Topology::OneBridge, 4, false);
    t.apply_both();
    for r in &t.b_rails {
        t.b.set_sysctl(&format!("net/ipv4/conf/{}/arp_ignore", r.name), "0");
    }
    let addrs = b_addresses(&t, false);
    let (run, doc) = t.probe_a(&peer_args(&addrs));
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    let every_b_mac: BTreeSet<String> = t.b_rails.iter().map(|r| r.mac.clone()).collect();
    assert_eq!(probes(&doc).len(), 16);
    for p in probes(&doc) {
        assert_eq!(problems(p), ["arp_flux"], "{p:#}");
        let answers: BTreeSet<String> =
            p["arp_answers"].as_array().unwrap().iter().map(|m| m.as_str().unwrap().to_string()).collect();
        assert_eq!(answers, every_b_mac, "{p:#}");
    }
}

/// Issue 24 item 5: a third device on the bridge with B's rail1 addresses
/// (IPv4 and IPv6): the pairs to them are `duplicate_address`, fixed on the
/// path, not B's ARP flux, naming the stranger's MAC as no NIC of B's
/// --self document. The pairs to B's rail0 stay right. Red where two
/// answers were always flux.
#[test]
fn a_device_with_b_s_address_is_a_duplicate_address_not_flux_ipv4_and_ipv6() {
    let t = TwoHosts::build(Topology::OneBridge, 2, true);
    t.apply_both();
    let c = common::Netns::create(format!("{}-c", t.a.name()));
    c.ip(&format!("link add eth0 type veth peer name c0 netns {}", t.sw.name()));
    t.sw.ip(&format!("link set c0 mtu {JUMBO} master br0 up"));
    c.disable_dad();
    let dup = &t.b_rails[1];
    c.ip(&format!("addr add {}/24 dev eth0", dup.v4));
    c.ip(&format!("addr add {}/64 dev eth0 nodad", dup.v6.as_ref().unwrap()));
    c.ip(&format!("link set eth0 mtu {JUMBO} up"));
    let c_mac = c.read_file("/sys/class/net/eth0/address");
    common::poll_until("the third device's port to forward", std::time::Duration::from_secs(10), || {
        t.sw.read_file("/sys/class/net/c0/brport/state") == "3"
    });
    let peers = t.b_self_file().to_string_lossy().into_owned();
    let (run, doc) = t.probe_a(&["--peers", &peers]);
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    let (dups, others) = split(&doc, &[dup.v4.as_str(), dup.v6.as_deref().unwrap()]);
    assert_eq!(dups.len(), 2 * 2, "both rails to both of rail1's addresses");
    for p in dups {
        assert!(problems(p).contains(&"duplicate_address".to_string()), "{p:#}");
        assert!(!problems(p).contains(&"arp_flux".to_string()), "{p:#}");
        assert_eq!(p["fix_on"][0], "path", "{p:#}");
        let detail = p["detail"].as_str().unwrap();
        assert!(detail.contains(&format!("{c_mac} is no NIC of the hosts --peers describes")), "{detail}");
    }
    for p in others {
        assert!(problems(p).is_empty(), "B's rail0 is right: {p:#}");
    }
}

/// One B rail at MTU 1500 while everything else carries 9000: the pairs to
/// its address find the path MTU near 1500 (a veth takes up to its MTU +
/// 4 bytes of VLAN room); no other pair has a problem.
#[test]
fn a_b_rail_at_1500_is_an_mtu_problem_ipv4_and_ipv6() {
    let t = TwoHosts::build(Topology::OneBridge, 4, true);
    t.apply_both();
    t.b.ip("link set rail2 mtu 1500");
    for v6 in [false, true] {
        let addrs = b_addresses(&t, v6);
        let (run, doc) = t.probe_a(&peer_args(&addrs));
        assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
        let (small, others) = split(&doc, &[addrs[2].as_str()]);
        assert_eq!(small.len(), 4);
        for p in small {
            assert_eq!(problems(p), ["mtu"], "{p:#}");
            assert_eq!(p["rail_mtu"], JUMBO);
            let path = p["path_mtu"].as_u64().unwrap_or_else(|| panic!("no path_mtu: {p:#}"));
            assert!((1500..=1504).contains(&path), "path MTU {path}: {p:#}");
        }
        for p in others {
            assert!(problems(p).is_empty(), "{p:#}");
        }
    }
}

/// A B rail down and an address nobody has: no ARP answer (arp_none), and
/// nothing else said of them.
#[test]
fn a_b_rail_down_and_an_absent_address_are_arp_none() {
    let t = TwoHosts::build(Topology::OneBridge, 4, false);
    t.apply_both();
    t.b.ip("link set rail1 down");
    let mut addrs = b_addresses(&t, false);
    addrs.push("198.51.100.199".into());
    let (run, doc) = t.probe_a(&[&peer_args(&addrs)[..], &["--timeout", "0.3"]].concat());
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    let (dead, others) = split(&doc, &[addrs[1].as_str(), "198.51.100.199"]);
    assert_eq!(dead.len(), 8);
    for p in dead {
        assert_eq!(problems(p), ["arp_none"], "{p:#}");
        assert_eq!(p["arp_answers"], serde_json::json!([]));
        assert_eq!(p["reply_interface"], Value::Null);
        assert_eq!(p["path_mtu"], Value::Null);
    }
    for p in others {
        assert!(problems(p).is_empty(), "{p:#}");
    }
}

/// A's own rail1 without its source rule: the kernel's lookup from rail1's
/// address leaves by rail0; the pairs of rail1 say so and that apply fixes
/// it, the others are right (the echo itself is bound to rail1).
#[test]
fn a_rail_without_its_rule_is_local_route() {
    let t = TwoHosts::build(Topology::OneBridge, 4, false);
    t.apply_both();
    let src = &t.a_rails[1].v4;
    t.a.ip(&format!("rule del from {src}"));
    let addrs = b_addresses(&t, false);
    let (run, doc) = t.probe_a(&peer_args(&addrs));
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    for p in probes(&doc) {
        if p["rail"] == "rail1" {
            assert_eq!(problems(p), ["local_route"], "{p:#}");
            assert!(p["detail"].as_str().unwrap().contains("leaves by rail0"), "{p:#}");
            assert!(p["fixes"][0].as_str().unwrap().contains("apply"), "{p:#}");
        } else {
            assert!(problems(p).is_empty(), "{p:#}");
        }
    }
}

/// Rail-optimized (a bridge and a subnet per rail): each rail is probed
/// against its own subnet only; right when both hosts are; a B rail at
/// 1500 and a B rail down are found on that rail alone.
#[test]
fn rail_optimized_pairs_right_and_faults_on_their_rail_ipv4_and_ipv6() {
    let t = TwoHosts::build(Topology::RailOptimized, 4, true);
    t.apply_both();
    let mut addrs = b_addresses(&t, false);
    addrs.extend(b_addresses(&t, true));
    let (run, doc) = t.probe_a(&peer_args(&addrs));
    assert_eq!(run.code(), Some(EXIT_OK), "{}", run.report());
    assert_all_ok(&doc, "rail-optimized");
    assert_eq!(probes(&doc).len(), 8, "one IPv4 and one IPv6 pair per rail: {doc:#}");
    for p in probes(&doc) {
        let k: usize = p["rail"].as_str().unwrap()["rail".len()..].parse().unwrap();
        let b = &t.b_rails[k];
        let peer: std::net::IpAddr = p["peer"].as_str().unwrap().parse().unwrap();
        let own: Vec<std::net::IpAddr> =
            std::iter::once(&b.v4).chain(&b.v6).map(|a| a.parse().unwrap()).collect();
        assert!(own.contains(&peer), "rail{k} probed {peer}");
    }

    t.b.ip("link set rail3 mtu 1500");
    t.b.ip("link set rail1 down");
    let (run, doc) = t.probe_a(&[&peer_args(&addrs)[..], &["--timeout", "0.3"]].concat());
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    for p in probes(&doc) {
        let want: &[&str] = match p["rail"].as_str().unwrap() {
            "rail1" => &["arp_none"],
            "rail3" => &["mtu"],
            _ => &[],
        };
        assert_eq!(problems(p), want, "{p:#}");
    }
}

/// Without CAP_NET_RAW the probe says so plainly; --self needs none.
#[test]
fn without_cap_net_raw_it_says_so() {
    let t = TwoHosts::build(Topology::OneBridge, 1, false);
    std::fs::set_permissions(t.dir(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bin = t.dir().join("roce-route");
    std::fs::copy(env!("CARGO_BIN_EXE_roce-route"), &bin).unwrap();
    let cfg = t.a_config();
    std::fs::set_permissions(&cfg, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let nobody = |args: &[&str]| {
        let mut cmd = std::process::Command::new("ip");
        cmd.args([
            "netns",
            "exec",
            t.a.name(),
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .arg(&bin)
        .args(args)
        .env("ROCE_ROUTE_STATE_DIR", t.dir().join("state-nobody"))
        .current_dir(t.dir());
        common::Run::of(cmd)
    };
    let cfg = cfg.to_string_lossy().into_owned();
    let run = nobody(&["probe", &cfg, "--peer", "198.51.100.110"]).expect_code(EXIT_FAILED);
    run.expect_stderr(&["probe needs CAP_NET_RAW: run it as root"]);
    let run = nobody(&["--json", "probe", &cfg, "--peer", "198.51.100.110"]);
    let doc: Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(doc["error"]["kind"], "not_permitted", "{doc:#}");
    let run = nobody(&["--json", "probe", &cfg, "--self"]).expect_code(EXIT_OK);
    let doc: Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(doc["self"]["rails"][0]["name"], "rail0", "{doc:#}");
    assert_eq!(doc["self"]["rails"][0]["mtu"], JUMBO, "{doc:#}");
}

/// A bad peers file is exit 2 naming file:line; so is no peer at all.
#[test]
fn bad_peer_input_is_exit_2() {
    let t = TwoHosts::build(Topology::OneBridge, 1, false);
    let file = t.dir().join("peers.txt");
    std::fs::write(&file, "# rack 1\n198.51.100.110\nnot-an-address\n").unwrap();
    let file = file.to_string_lossy().into_owned();
    let (run, _) = t.probe_a(&["--peers", &file]);
    assert_eq!(run.code(), Some(EXIT_INVALID), "{}", run.report());
    run.expect_stderr(&[&format!("{file}:3: \"not-an-address\" is not an IP address")]);
    let (run, _) = t.probe_a(&[]);
    assert_eq!(run.code(), Some(EXIT_INVALID), "{}", run.report());
}

/// A peer that sends its replies to another rail's MAC (a stale entry
/// left by ARP flux, planted on B): the reply comes in on that other rail,
/// seen there by the probe's observer on every rail (rp_filter would drop
/// it before any socket of the rail that sent the echo), and named
/// wrong_interface on that pair only.
#[test]
fn a_reply_into_another_rail_is_wrong_interface() {
    let t = TwoHosts::build(Topology::OneBridge, 4, false);
    t.apply_both();
    let (a1, a0_mac) = (&t.a_rails[1].v4, &t.a_rails[0].mac);
    t.b.ip(&format!("neigh replace {a1} lladdr {a0_mac} dev rail2 nud permanent"));
    let addrs = b_addresses(&t, false);
    let (run, doc) = t.probe_a(&peer_args(&addrs));
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    for p in probes(&doc) {
        if p["rail"] == "rail1" && p["peer"] == addrs[2].as_str() {
            assert_eq!(problems(p), ["wrong_interface"], "{p:#}");
            assert_eq!(p["reply_interface"], "rail0", "{p:#}");
            assert_eq!(p["fix_on"], serde_json::json!(["peer"]), "A answers ARP right: B is to fix: {p:#}");
        } else {
            assert!(problems(p).is_empty(), "{p:#}");
        }
    }
}

/// The same reply into another rail, but A itself is the cause: its rail0
/// answers ARP for every A address (arp_ignore=0), which is how B came to
/// hold rail1's address at rail0's MAC (planted, so that it does not hang
/// on which ARP answer won). The verdict names this host, with the fix to
/// run here, not "on the peer": an operator sent to B would find nothing.
#[test]
fn a_reply_into_another_rail_is_this_hosts_fault_when_its_nic_answers_for_every_address() {
    let t = TwoHosts::build(Topology::OneBridge, 4, false);
    t.apply_both();
    t.a.set_sysctl("net/ipv4/conf/rail0/arp_ignore", "0");
    let (a1, a0_mac) = (&t.a_rails[1].v4, &t.a_rails[0].mac);
    t.b.ip(&format!("neigh replace {a1} lladdr {a0_mac} dev rail2 nud permanent"));
    let addrs = b_addresses(&t, false);
    let (run, doc) = t.probe_a(&peer_args(&addrs));
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    let bad: Vec<&Value> = probes(&doc).iter().filter(|p| !problems(p).is_empty()).collect();
    assert_eq!(bad.len(), 1, "{doc:#}");
    let p = bad[0];
    assert_eq!((p["rail"].as_str(), p["peer"].as_str()), (Some("rail1"), Some(addrs[2].as_str())), "{p:#}");
    assert_eq!(problems(p), ["wrong_interface"], "{p:#}");
    assert_eq!(p["fix_on"], serde_json::json!(["this_host"]), "{p:#}");
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("which this host gives out for {a1} (arp_ignore=0 on rail0")),
        "{detail}"
    );
    let fix = p["fixes"][0].as_str().unwrap();
    assert!(
        fix.starts_with("run `roce-route --netns ")
            && fix.contains(" apply ")
            && fix.contains("on this host"),
        "{fix}"
    );
}

/// The peer answers ARP but its replies go nowhere (its entry for this
/// host's address points at a MAC no rail has, planted on B): no_reply on
/// that pair only, within the timeout.
#[test]
fn an_answer_without_a_reply_is_no_reply() {
    let t = TwoHosts::build(Topology::OneBridge, 4, false);
    t.apply_both();
    let a3 = &t.a_rails[3].v4;
    t.b.ip(&format!("neigh replace {a3} lladdr 02:00:00:00:00:99 dev rail0 nud permanent"));
    let addrs = b_addresses(&t, false);
    let (run, doc) = t.probe_a(&[&peer_args(&addrs)[..], &["--timeout", "0.3"]].concat());
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    for p in probes(&doc) {
        if p["rail"] == "rail3" && p["peer"] == addrs[0].as_str() {
            assert_eq!(problems(p), ["no_reply"], "{p:#}");
            assert_eq!(p["arp_answers"], serde_json::json!([t.b_rails[0].mac]), "{p:#}");
            assert_eq!(p["rtt_ms"], Value::Null);
        } else {
            assert!(problems(p).is_empty(), "{p:#}");
        }
    }
}

/// `check` warns when the rails' MTUs differ, and not when they agree.
#[test]
fn check_warns_when_the_rails_mtus_differ() {
    let tb = common::Testbed::builder().rails(2).build();
    let cfg = tb.standard_config();
    tb.apply_ok(&cfg);
    let mtu_warnings = || -> Vec<String> {
        let run = tb.rr(&["--json", "check", common::path_str(&cfg)]);
        let doc = common::json_doc(&run);
        let warnings = doc["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap().to_string());
        warnings.filter(|w| w.contains("MTU")).collect()
    };
    let same = mtu_warnings();
    assert!(same.is_empty(), "{same:?}");
    tb.ip_host("link set rail1 mtu 9000");
    let differ = mtu_warnings();
    assert_eq!(differ.len(), 1, "{differ:?}");
    assert!(differ[0].starts_with("the rails' MTUs differ (1500 on rail0; 9000 on rail1)"), "{differ:?}");
}

/// A link-local peer names no host without an interface: refused up front
/// (exit 2, saying which and what to give), from --peer and from a --peers
/// file (file:line), and nothing is sent.
#[test]
fn a_link_local_peer_is_refused_with_exit_2() {
    let t = TwoHosts::build(Topology::OneBridge, 1, true);
    let cfg = t.a_config().to_string_lossy().into_owned();
    let neigh_before = t.a.ip("neigh show");
    let run = t.rr(&t.a, &["probe", &cfg, "--peer", "fe80::1"]).expect_code(EXIT_INVALID);
    run.expect_stderr(&["--peer fe80::1 is link-local", "global address"]);
    let file = t.dir().join("peers.txt");
    std::fs::write(&file, format!("{}\n169.254.1.1\n", t.b_rails[0].v4)).unwrap();
    let file = file.to_string_lossy().into_owned();
    let run = t.rr(&t.a, &["probe", &cfg, "--peers", &file]).expect_code(EXIT_INVALID);
    run.expect_stderr(&[&format!("{file}:2: peer 169.254.1.1 is link-local")]);
    assert_eq!(t.a.ip("neigh show"), neigh_before, "a refused probe leaves no neighbour entry");
}
