//! Real-kernel tests of telling the peers (issue 8 §3): after an apply that
//! changed a rail, each of the rail's addresses is announced from the rail
//! itself (gratuitous ARP, unsolicited IPv6 neighbour advertisement), so a
//! peer that learned the wrong MAC during ARP flux holds the right one at
//! once, with no traffic of its own.
//!
//! The wrong entries are planted on the peer as flux leaves them: every
//! address of rail k with the MAC of rail k+1 (so every entry is wrong,
//! rail0's included), `nud stale` (an idle entry: the kernel never
//! re-checks it until it is used) or `nud reachable` (one in use; an
//! ordinary ARP reply with another MAC does not override it). Never
//! `permanent`: the kernel lets nothing from the network change a
//! permanent (or noarp) entry (`__neigh_update()` refuses every update
//! without NEIGH_UPDATE_F_ADMIN), so such an entry would stay wrong whatever
//! was sent: an entry an administrator pinned is theirs to fix.
//!
//! Locktime: the peer ignores an ARP update within `locktime` (1 s by
//! default) of the previous one, unless it is gratuitous: `arp_process()`
//! overrides for every `arp_is_garp()` frame whatever the locktime (checked
//! by hand on this kernel: a planted entry was corrected at once with
//! locktime 30 s; IPv6 has no such window for advertisements with the
//! Override flag). The tests keep the peer's default locktime and still
//! wait past it after planting: in the field the flux entries are older
//! than the apply, and the tests then do not rest on that kernel detail.
//!
//! Frames are counted on the peer: rx_packets of each rail's bridge port
//! p<k> is what rail k sent. The rails send nothing else while a test
//! counts: DAD is off in the testbed, router solicitations are turned off
//! here, and counters are used only once they have been still for a while
//! (MLD reports after link-up).

mod common;

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use common::{Background, EXIT_INVALID, EXIT_OK, Run, Testbed, json_doc, path_str, profile_count};

/// The announcements of each address with the default `[defaults] announce`.
const ROUNDS: u64 = 2;
/// How soon after apply starts the peer must hold every right MAC.
const LEARN_WITHIN: Duration = Duration::from_secs(1);
/// How long wrong entries are watched when nothing should fix them
/// (longer than LEARN_WITHIN, so a late announcement would be seen).
const WATCH: Duration = Duration::from_millis(1500);
/// Counters that stay still this long are taken as quiet.
const QUIET_FOR: Duration = Duration::from_secs(1);
const QUIET_TIMEOUT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(5);

// ---------------------------------------------------------------------------
// The testbed, the planted entries, the frames

/// 4 rails with IPv4 and IPv6 whose rails send nothing unless asked.
fn testbed() -> Testbed {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    for r in tb.rails() {
        tb.host().set_sysctl(&format!("net/ipv6/conf/{}/router_solicitations", r.name), "0");
    }
    tb
}

/// Every rail address with the index of its rail, IPv4 first.
fn addresses(tb: &Testbed) -> Vec<(String, usize)> {
    tb.rails()
        .iter()
        .enumerate()
        .flat_map(|(k, r)| std::iter::once(r.v4.clone()).chain(r.v6.clone()).map(move |a| (a, k)))
        .collect()
}

/// Plants on the peer, for every address of rail k, the MAC of rail k+1 in
/// state `nud`, then waits past the peer's locktime.
fn plant_flux(tb: &Testbed, nud: &str) {
    let n = tb.rails().len();
    for (ip, k) in addresses(tb) {
        tb.plant_peer_neigh(&ip, &tb.rail((k + 1) % n).mac, nud);
    }
    assert_eq!(wrong_entries(tb).len(), addresses(tb).len(), "planting: {:?}", tb.peer_neigh_table());
    thread::sleep(tb.peer_arp_locktime() + Duration::from_millis(100));
}

/// The addresses whose peer entry does not hold their own rail's MAC, each
/// with what the entry holds.
fn wrong_entries(tb: &Testbed) -> Vec<String> {
    let table = tb.peer_neigh_table();
    addresses(tb)
        .into_iter()
        .filter_map(|(ip, k)| {
            let rail = tb.rail(k);
            let entry = table.iter().find(|e| e.ip == ip);
            match entry {
                Some(e) if e.mac.as_deref().is_some_and(|m| m.eq_ignore_ascii_case(&rail.mac)) => None,
                Some(e) => Some(format!("{ip}: {:?} {} (not {}'s {})", e.mac, e.state, rail.name, rail.mac)),
                None => Some(format!("{ip}: no entry")),
            }
        })
        .collect()
}

/// Polls the peer's table until every entry holds its rail's MAC: how long
/// after `since` it did, or the wrong entries once `within` has passed.
fn learned(tb: &Testbed, since: Instant, within: Duration) -> Result<Duration, Vec<String>> {
    loop {
        let wrong = wrong_entries(tb);
        if wrong.is_empty() {
            return Ok(since.elapsed());
        }
        if since.elapsed() > within {
            return Err(wrong);
        }
        thread::sleep(POLL);
    }
}

/// Every planted entry is still wrong after WATCH: nothing fixed them.
fn assert_still_wrong(tb: &Testbed, what: &str) {
    thread::sleep(WATCH);
    let wrong = wrong_entries(tb);
    assert_eq!(
        wrong.len(),
        addresses(tb).len(),
        "{what}: entries were corrected although nothing should have been announced; still wrong: \
         {wrong:#?}\npeer table: {:#?}",
        tb.peer_neigh_table()
    );
}

/// The ports' rx counters once they have stayed still for QUIET_FOR.
fn quiet_rx(tb: &Testbed) -> Vec<u64> {
    let deadline = Instant::now() + QUIET_TIMEOUT;
    let mut last = tb.peer_port_rx();
    let mut still_since = Instant::now();
    loop {
        thread::sleep(Duration::from_millis(100));
        let now = tb.peer_port_rx();
        if now != last {
            (last, still_since) = (now, Instant::now());
        } else if still_since.elapsed() >= QUIET_FOR {
            return now;
        }
        assert!(Instant::now() < deadline, "the rails never went quiet: rx {last:?}");
    }
}

/// Runs `action` between two quiet reads of the ports' rx counters: what
/// it returned, and the frames each rail sent meanwhile.
fn frames_sent_during<T>(tb: &Testbed, action: impl FnOnce() -> T) -> (T, Vec<u64>) {
    let before = quiet_rx(tb);
    let out = action();
    let after = quiet_rx(tb);
    (out, after.iter().zip(&before).map(|(a, b)| a - b).collect())
}

/// `announced` of a --json document, as "interface address" strings.
fn announced(run: &Run) -> Vec<String> {
    let doc = json_doc(run);
    let list =
        doc["announced"].as_array().unwrap_or_else(|| panic!("no `announced` list:\n{}", run.report()));
    list.iter()
        .map(|a| format!("{} {}", a["interface"].as_str().unwrap(), a["address"].as_str().unwrap()))
        .collect()
}

/// "rail0 198.51.100.10", "rail0 2001:db8:1::10", ... for the rails `which`.
fn expected_announced(tb: &Testbed, which: impl Fn(usize) -> bool) -> Vec<String> {
    addresses(tb)
        .into_iter()
        .filter(|(_, k)| which(*k))
        .map(|(ip, k)| format!("{} {ip}", tb.rail(k).name))
        .collect()
}

fn config(tb: &Testbed, defaults: &str) -> String {
    let text = format!("{defaults}\n{}", tb.config_toml());
    tb.write_config(&text).to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------
// apply tells the peers

/// Plants wrong `nud` entries, applies (with --json, in the background) and
/// polls the peer's table: every entry must hold its rail's MAC within
/// LEARN_WITHIN of the start of apply, with no traffic from the peer, and
/// each rail must have sent exactly ROUNDS frames per address.
fn apply_corrects_planted_entries(nud: &str) {
    let tb = testbed();
    let config = config(&tb, "");
    plant_flux(&tb, nud);

    let ((run, took), sent) = frames_sent_during(&tb, || {
        let started = Instant::now();
        let apply =
            Background::spawn(tb.roce_route_in(&tb.state_base(), &["--json", "apply", &config]), "apply");
        let took = learned(&tb, started, LEARN_WITHIN);
        let run = apply.wait();
        eprintln!("apply ran {:?}", started.elapsed());
        (run, took)
    });
    let run = run.expect_code(EXIT_OK);
    let took = took.unwrap_or_else(|wrong| {
        panic!(
            "the peer still holds wrong MACs {LEARN_WITHIN:?} after apply started: {wrong:#?}\n{}",
            run.report()
        )
    });
    eprintln!(
        "the peer held all {} right MACs ({nud} entries) {took:?} after apply started",
        addresses(&tb).len()
    );
    assert_eq!(announced(&run), expected_announced(&tb, |_| true), "{}", run.report());
    let per_rail = ROUNDS * 2; // an IPv4 and an IPv6 address per rail
    assert_eq!(sent, vec![per_rail; tb.rails().len()], "frames each rail sent (rx of p0..p3)");
}

#[test]
fn apply_corrects_the_peers_stale_entries_within_a_second_without_traffic() {
    apply_corrects_planted_entries("stale");
}

#[test]
fn apply_corrects_the_peers_reachable_entries_within_a_second_without_traffic() {
    apply_corrects_planted_entries("reachable");
}

/// The other side of the tests above: without announcements the planted
/// entries stay wrong (a dry run, --no-announce, `[defaults] announce = 0`),
/// and no frame leaves a rail.
#[test]
fn without_announcements_the_wrong_entries_stay() {
    let tb = testbed();
    let config = config(&tb, "");
    plant_flux(&tb, "stale");

    let (run, sent) = frames_sent_during(&tb, || tb.rr(&["--json", "apply", "--dry-run", &config]));
    assert_eq!(json_doc(&run.expect_code(EXIT_OK))["changed"], true);
    assert_eq!(sent, [0, 0, 0, 0], "frames sent by a dry run");
    assert_still_wrong(&tb, "after apply --dry-run");

    let (run, sent) = frames_sent_during(&tb, || tb.rr(&["--json", "apply", "--no-announce", &config]));
    let run = run.expect_code(EXIT_OK);
    assert_eq!(json_doc(&run)["changed"], true, "{}", run.report());
    assert!(announced(&run).is_empty(), "{}", run.report());
    assert_eq!(sent, [0, 0, 0, 0], "frames sent by apply --no-announce");
    assert_still_wrong(&tb, "after apply --no-announce");

    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    let off = config_with_announce(&tb, 0);
    let (run, sent) = frames_sent_during(&tb, || tb.rr(&["apply", &off]));
    let run = run.expect_code(EXIT_OK);
    assert!(run.stdout().contains("applied"), "{}", run.report());
    assert!(!run.stdout().contains("announced"), "{}", run.report());
    assert_eq!(sent, [0, 0, 0, 0], "frames sent by apply with announce = 0");
    assert_still_wrong(&tb, "after apply with announce = 0");
}

fn config_with_announce(tb: &Testbed, n: u32) -> String {
    config(tb, &format!("[defaults]\nannounce = {n}\n"))
}

#[test]
fn a_second_apply_in_sync_sends_nothing() {
    let tb = testbed();
    let config = config(&tb, "");
    tb.rr(&["apply", &config]).expect_code(EXIT_OK);
    plant_flux(&tb, "stale");

    let (run, sent) = frames_sent_during(&tb, || tb.rr(&["--json", "apply", &config]));
    let run = run.expect_code(EXIT_OK);
    assert_eq!(json_doc(&run)["changed"], false, "{}", run.report());
    assert!(announced(&run).is_empty(), "{}", run.report());
    assert_eq!(sent, [0, 0, 0, 0], "frames sent by an apply in sync");
    assert_still_wrong(&tb, "after an apply in sync");
}

/// An apply that changes one rail (its rp_filter) announces that rail's
/// addresses only.
#[test]
fn only_the_rails_an_apply_changed_are_announced() {
    let tb = testbed();
    tb.rr(&["apply", &config(&tb, "")]).expect_code(EXIT_OK);
    plant_flux(&tb, "stale");
    let changed = tb.render_config(|r| if r.name == "rail2" { vec!["rp_filter = 1".into()] } else { vec![] });
    let changed = tb.write_config(&changed);

    let (run, sent) = frames_sent_during(&tb, || tb.rr(&["--json", "apply", path_str(&changed)]));
    let run = run.expect_code(EXIT_OK);
    assert_eq!(announced(&run), expected_announced(&tb, |k| k == 2), "{}", run.report());
    assert_eq!(sent, [0, 0, ROUNDS * 2, 0], "frames each rail sent");
    let wrong = wrong_entries(&tb);
    let rail2 = [tb.rail(2).v4.as_str(), tb.rail(2).v6.as_deref().unwrap()];
    assert!(!wrong.iter().any(|w| rail2.iter().any(|a| w.starts_with(&format!("{a}:")))), "{wrong:#?}");
    assert_eq!(wrong.len(), addresses(&tb).len() - 2, "the other rails' entries stay wrong: {wrong:#?}");
}

// ---------------------------------------------------------------------------
// roce-route announce CONFIG

#[test]
fn announce_corrects_the_entries_on_demand() {
    let tb = testbed();
    let config = config(&tb, "");
    tb.rr(&["apply", "--no-announce", &config]).expect_code(EXIT_OK);
    plant_flux(&tb, "reachable");
    let before = tb.dump();

    let ((run, took), sent) = frames_sent_during(&tb, || {
        let started = Instant::now();
        let run = tb.rr(&["--json", "announce", &config]);
        (run, learned(&tb, started, LEARN_WITHIN))
    });
    let run = run.expect_code(EXIT_OK);
    took.unwrap_or_else(|wrong| panic!("wrong after announce: {wrong:#?}\n{}", run.report()));
    let doc = json_doc(&run);
    assert_eq!((doc["command"].as_str(), doc["changed"].as_bool()), (Some("announce"), Some(false)));
    assert_eq!(announced(&run), expected_announced(&tb, |_| true));
    assert_eq!(doc["failed"], serde_json::json!([]));
    assert_eq!(sent, vec![ROUNDS * 2; 4], "frames each rail sent");
    assert_eq!(tb.dump(), before, "announce changed the host");

    // announce = 0 turns off apply's announcements; asked for by name, each
    // address is still announced once. The text output names them.
    plant_flux(&tb, "stale");
    let once = config_with_announce(&tb, 0);
    let (run, sent) = frames_sent_during(&tb, || {
        let mut cmd = tb.rr_cmd(&["announce", &once]);
        cmd.env("ROCE_ROUTE_PROFILE", "1");
        Run::of(cmd)
    });
    let run = run.expect_code(EXIT_OK);
    let out = run.stdout();
    // The config's links, asked by name as apply asks them, not every link.
    assert_eq!(profile_count(&run.stderr(), "links_read"), 4, "{}", run.stderr());
    // One packet socket for the 4 rails' frames.
    assert_eq!(profile_count(&run.stderr(), "packet_sockets"), 1, "{}", run.stderr());
    assert_eq!(sent, vec![2; 4], "announce with announce = 0: once per address");
    assert!(out.contains("announced 8 addresses to the peers, each from its own interface (once)"), "{out}");
    assert!(out.contains("  rail1: 198.51.100.11 2001:db8:1::11\n"), "{out}");
    learned(&tb, Instant::now(), Duration::ZERO).unwrap_or_else(|w| panic!("{w:#?}"));
}

/// Every rail's frames go from one packet socket, each out of its rail
/// (the per-rail counts above say which rail sent what): closing a packet
/// socket waits for an RCU grace period, and a socket per rail made an
/// apply on 8 rails ~80 ms longer. A round of more frames than a socket's
/// default send buffer holds (~270 small frames) is sent whole: the rail's
/// queue here holds them (tbf at 8 kbit/s), as a busy NIC's does, so each
/// frame keeps its share of the buffer until it leaves.
#[test]
fn a_round_of_500_frames_is_sent_whole_from_one_socket() {
    let tb = testbed();
    let rail = tb.rail(0).name.clone();
    tb.sh_host(&format!("tc qdisc add dev {rail} root tbf rate 8kbit burst 1600 limit 1000000"));
    let batch: String = (1..=250)
        .map(|j| {
            format!("addr add 203.0.113.{j}/32 dev {rail}\naddr add 2001:db8:9::{j:x}/128 dev {rail} nodad\n")
        })
        .collect();
    tb.sh_host(&format!("printf '{batch}' | ip -batch -"));
    // No `addresses`: every address of the rail is announced, once.
    let config = tb.write_config(&format!("[defaults]\nannounce = 0\n[[interface]]\nname = \"{rail}\"\n"));

    let mut cmd = tb.rr_cmd(&["--json", "announce", path_str(&config)]);
    cmd.env("ROCE_ROUTE_PROFILE", "1");
    let run = Run::of(cmd).expect_code(EXIT_OK);
    let doc = json_doc(&run);
    assert_eq!(doc["failed"], serde_json::json!([]), "{}", run.report());
    assert_eq!(announced(&run).len(), 502, "250 + 250 and the rail's own two:\n{}", run.report());
    assert_eq!(profile_count(&run.stderr(), "packet_sockets"), 1, "{}", run.stderr());
}

/// A tentative IPv6 address (duplicate address detection still running)
/// is not announced: the kernel does not use it yet, and an advertisement
/// for it would defeat the detection. The others are.
#[test]
fn a_tentative_address_is_skipped_with_a_warning() {
    let tb = testbed();
    let rail = tb.rail(0).name.clone();
    // DAD on for rail0, with one probe 30 s long: the address stays tentative.
    tb.host().set_sysctl(&format!("net/ipv6/conf/{rail}/accept_dad"), "1");
    tb.host().set_sysctl(&format!("net/ipv6/neigh/{rail}/retrans_time_ms"), "30000");
    tb.ip_host(&format!("-6 addr add 2001:db8:1::20/64 dev {rail}"));
    assert!(tb.ip_host(&format!("-6 addr show dev {rail}")).contains("tentative"));
    let text =
        tb.config_toml().replacen("\"2001:db8:1::10/64\"", "\"2001:db8:1::10/64\", \"2001:db8:1::20/64\"", 1);
    let config = tb.write_config(&text);
    plant_flux(&tb, "stale");
    tb.plant_peer_neigh("2001:db8:1::20", &tb.rail(1).mac, "stale");

    let run = tb.rr(&["--json", "announce", path_str(&config)]).expect_code(EXIT_OK);
    let doc = json_doc(&run);
    let warnings = doc["warnings"].to_string();
    assert!(
        warnings.contains(
            "2001:db8:1::20 is not announced: it is not ready: 2001:db8:1::20 on rail0: is tentative"
        ),
        "{}",
        run.report()
    );
    assert_eq!(announced(&run), expected_announced(&tb, |_| true), "{}", run.report());
    learned(&tb, Instant::now(), Duration::ZERO).unwrap_or_else(|w| panic!("{w:#?}"));
    let entry = tb.peer_neigh_table().into_iter().find(|e| e.ip == "2001:db8:1::20").expect("planted");
    assert_eq!(entry.mac.as_deref(), Some(tb.rail(1).mac.as_str()), "the tentative address was announced");
}

#[test]
fn an_announce_count_out_of_range_is_refused_with_its_position() {
    let tb = Testbed::builder().rails(1).build();
    let config = config_with_announce(&tb, 11);
    for command in ["apply", "announce"] {
        let run = tb.rr(&[command, &config]).expect_code(EXIT_INVALID);
        let name = Path::new(&config).file_name().unwrap().to_string_lossy().into_owned();
        run.expect_stderr(&[
            &format!("{name}:2:12: [defaults]: announce = 11 is out of range 0..=10"),
            "hint:",
        ]);
    }
}

// ---------------------------------------------------------------------------
// The Router flag of IPv6 announcements (issue 15 §6.3)

/// Whether the peer's neighbour entry for `ip` carries the router flag
/// (NTF_ROUTER: `ip -6 neigh` prints "router"), with the entry's line.
fn peer_says_router(tb: &Testbed, ip: &str) -> (bool, String) {
    let line = tb.ip_peer(&format!("-6 neigh show {ip}"));
    let line = line.trim().to_string();
    assert!(!line.is_empty(), "the peer has no entry for {ip}: {:?}", tb.peer_neigh_table());
    (line.split_whitespace().any(|w| w == "router"), line)
}

/// The kernel's own unsolicited advertisements (`ndisc_send_unsol_na()`)
/// set the Router flag from the interface's IPv6 `forwarding`, and a
/// receiver with an entry sets or clears NTF_ROUTER from it (the Override
/// flag lets it update is-router). roce-route's announcements do the same,
/// per rail: rail0 forwards, rail1 does not. The entries are planted the
/// other way round (rail0's without the flag, rail1's with it), so both
/// directions of the flag are seen changing; then the sysctls are swapped
/// and `announce` must swap the flags back.
#[test]
fn ipv6_announcements_carry_the_router_flag_of_the_rails_forwarding() {
    let tb = Testbed::builder().rails(2).ipv6(true).build();
    for r in tb.rails() {
        tb.host().set_sysctl(&format!("net/ipv6/conf/{}/router_solicitations", r.name), "0");
    }
    let config = config(&tb, "");
    let v6 = |k: usize| tb.rail(k).v6.clone().expect("an IPv6 rail");
    let forwarding = |k: usize, on: bool| {
        let path = format!("net/ipv6/conf/{}/forwarding", tb.rail(k).name);
        tb.host().set_sysctl(&path, if on { "1" } else { "0" });
    };
    forwarding(0, true);
    forwarding(1, false);
    // Wrong MACs too, as flux leaves them: the flag comes with the MAC.
    plant_flux(&tb, "stale");
    let plant = |k: usize, router: bool| {
        let wrong = &tb.rail(1 - k).mac;
        let flag = if router { " router" } else { "" };
        tb.ip_peer(&format!("-6 neigh replace {} lladdr {wrong} dev br0 nud stale{flag}", v6(k)));
    };
    plant(0, false);
    plant(1, true);
    assert_eq!((peer_says_router(&tb, &v6(0)).0, peer_says_router(&tb, &v6(1)).0), (false, true));

    let run = tb.rr(&["--json", "apply", &config]).expect_code(EXIT_OK);
    assert_eq!(announced(&run), expected_announced(&tb, |_| true), "{}", run.report());
    learned(&tb, Instant::now(), LEARN_WITHIN).unwrap_or_else(|w| panic!("{w:#?}\n{}", run.report()));
    let (r0, line0) = peer_says_router(&tb, &v6(0));
    let (r1, line1) = peer_says_router(&tb, &v6(1));
    assert!(
        r0,
        "rail0 forwards IPv6, so its advertisement must carry the Router flag; the peer has: {line0}"
    );
    assert!(!r1, "rail1 does not forward, so its advertisement must clear the flag; the peer has: {line1}");

    forwarding(0, false);
    forwarding(1, true);
    let run = tb.rr(&["--json", "announce", &config]).expect_code(EXIT_OK);
    let (r0, line0) = peer_says_router(&tb, &v6(0));
    let (r1, line1) = peer_says_router(&tb, &v6(1));
    assert!(
        !r0,
        "rail0 stopped forwarding: the flag must be cleared; the peer has: {line0}\n{}",
        run.report()
    );
    assert!(r1, "rail1 forwards now: the flag must be set; the peer has: {line1}\n{}", run.report());
}
