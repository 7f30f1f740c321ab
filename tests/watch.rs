//! `roce-route watch` (issue 9), on the real kernel: with watch running in
//! the host namespace, what the kernel or a daemon takes away is healed
//! (proved with `ip route get ... from ADDR` and the rules, not with
//! watch's word), what an admin does with apply, remove and
//! `apply --confirm` is followed and never fought, SIGTERM leaves the
//! configuration in place, a second watch is refused, and a watch killed
//! in the middle of a heal is recovered from its journal.

mod common;
#[path = "common/watch_lines.rs"]
mod watch_lines;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use watch_lines::{HEAL_TIMEOUT, Watch, read_only_proc_sys};

fn is_routed(tb: &Testbed, k: usize) -> bool {
    let r = tb.rail(k);
    let got = tb.route_get(PEER_V4, &r.v4);
    got.contains(&format!("dev {} ", r.name)) && got.contains(&format!("table {}", r.table))
}

fn has_rule(tb: &Testbed, k: usize) -> bool {
    let r = tb.rail(k);
    tb.ip_host("-4 rule show").contains(&format!("from {} lookup {}", r.v4, r.table))
}

/// Waits until rail `k` is routed by its table with its rule; returns how
/// long it took (the heal latency).
fn wait_healed(tb: &Testbed, w: &Watch, k: usize, what: &str) -> Duration {
    let start = Instant::now();
    let deadline = start + HEAL_TIMEOUT;
    while !(is_routed(tb, k) && has_rule(tb, k)) {
        assert!(Instant::now() < deadline, "{what}: rail{k} not healed within {HEAL_TIMEOUT:?}\n{}", w.log());
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = start.elapsed();
    eprintln!("heal latency ({what}): {} ms", took.as_millis());
    took
}

fn applied(rails: usize) -> (Testbed, PathBuf) {
    let tb = Testbed::builder().rails(rails).build();
    let cfg = tb.standard_config();
    tb.apply_ok(&cfg);
    (tb, cfg)
}

#[test]
fn an_admin_down_up_of_a_rail_is_healed() {
    let (tb, cfg) = applied(3);
    let mut w = Watch::start(&tb);
    tb.ip_host("link set rail1 down");
    assert!(!is_routed(&tb, 1), "the kernel flushes the table's routes on admin down");
    tb.ip_host("link set rail1 up");
    wait_healed(&tb, &w, 1, "admin down/up");
    tb.apply(&cfg, &[]).expect_stdout(&["in sync"]);
    w.assert_running();
    // The heal is logged once the peers were told.
    poll_until("watch's heal line", HEAL_TIMEOUT, || w.heals() >= 1);
    let heal = w.docs().into_iter().find(|d| d["event"] == "heal").unwrap();
    // The down and the up are two `ip` processes, a few ms apart: with
    // 2 ms of quiet the heal may follow either (the pass after the down
    // finds the rail up again, or not ready and the up's pass heals).
    let triggers = heal["triggers"].to_string();
    assert!(triggers.contains("rail1: up") || triggers.contains("rail1: down"), "{heal:#}");
}

/// Each heal tells the peers (one round) from the same packet socket,
/// opened at the first and kept until watch ends: closing one waits for an
/// RCU grace period (8-16 ms here), which held the event loop after every
/// heal, for each rail the heal announced on.
#[test]
fn heals_tell_the_peers_from_one_packet_socket_kept_open() {
    let (tb, _cfg) = applied(3);
    let w = Watch::start_with(&tb, "profiled", |c| {
        c.env("ROCE_ROUTE_PROFILE", "1");
    });
    for (n, k) in [1, 2, 1].into_iter().enumerate() {
        tb.ip_host(&format!("link set rail{k} down"));
        tb.ip_host(&format!("link set rail{k} up"));
        wait_healed(&tb, &w, k, "admin down/up");
        poll_until("watch's heal line", HEAL_TIMEOUT, || w.heals() > n);
    }
    let announced: Vec<String> = w
        .docs()
        .into_iter()
        .filter(|d| d["event"] == "heal")
        .map(|d| d["message"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(announced.iter().all(|m| m.contains("announced")), "every heal told the peers: {announced:#?}");
    run("kill", &["-TERM", &w.bg.pid().to_string()]);
    let Watch { bg, out: _, err } = w;
    assert_eq!(bg.wait_timeout(Duration::from_secs(5)).code(), Some(EXIT_OK));
    let err = std::fs::read_to_string(&err).unwrap();
    assert_eq!(profile_count(&err, "packet_sockets"), 1, "three heals, two rails:\n{err}");
}

/// Carrier loss keeps the routes (marked linkdown): watch must leave them
/// as they are, neither healing nor fighting, and the rail routes by its
/// table when the carrier is back.
#[test]
fn a_carrier_flap_from_the_peer_end_leaves_the_rail_routed() {
    let (tb, cfg) = applied(3);
    let mut w = Watch::start(&tb);
    let before = tb.dump();
    let n = w.pass_count();
    tb.ip_peer("link set p1 down");
    assert_eq!(w.wait_pass(n, "rail1: up, carrier off"), "in_sync", "{}", w.log());
    let n = w.pass_count();
    tb.ip_peer("link set p1 up");
    poll_until("rail1's carrier", HEAL_TIMEOUT, || {
        tb.host().read_file("/sys/class/net/rail1/carrier") == "1"
    });
    assert_eq!(w.wait_pass(n, "rail1: up, carrier on"), "in_sync", "{}", w.log());
    wait_healed(&tb, &w, 1, "carrier down/up");
    assert_dump_eq(&before, &tb.dump(), "a carrier flap");
    assert_eq!(w.heals(), 0, "nothing to heal\n{}", w.log());
    tb.apply(&cfg, &[]).expect_stdout(&["in sync"]);
    w.assert_running();
}

/// A storm of flaps (40 admin down/up of one rail, back to back) ends
/// healed, in far fewer passes than events: bursts are coalesced.
#[test]
fn a_storm_of_flaps_ends_healed_in_few_passes() {
    let (tb, cfg) = applied(3);
    let w = Watch::start(&tb);
    let n = w.pass_count();
    let flaps = 40;
    let script: String = (0..flaps).map(|_| "link set rail1 down\nlink set rail1 up\n").collect();
    let batch = tb.dir().join("storm.batch");
    std::fs::write(&batch, script).unwrap();
    tb.host().exec("ip", &["-batch", path_str(&batch)]);
    wait_healed(&tb, &w, 1, "a storm of flaps");
    // The pass after the last heal finds nothing to do: the fixed point.
    poll_until("an in-sync pass after the storm", HEAL_TIMEOUT, || {
        w.passes().last().is_some_and(|p| p["outcome"] == "in_sync" && p["pass"].as_u64() > Some(n))
    });
    let passes = w.pass_count() - n;
    eprintln!("a storm of {flaps} flaps: {passes} passes");
    assert!(passes <= 10, "{passes} passes for {flaps} flaps\n{}", w.log());
    tb.apply(&cfg, &[]).expect_stdout(&["in sync"]);
}

#[test]
fn every_owned_rule_deleted_at_once_is_healed() {
    let (tb, _cfg) = applied(3);
    let w = Watch::start(&tb);
    // As systemd-networkd does when it configures a link: one batch.
    let rules: Vec<String> = tb
        .ip_host("-4 rule show")
        .lines()
        .filter(|l| l.contains("proto 234"))
        .map(|l| format!("-4 rule del {}", l.split_once(':').unwrap().1.replace("proto 234", "").trim()))
        .collect();
    assert_eq!(rules.len(), 3, "{rules:?}");
    let batch = tb.dir().join("flush.batch");
    std::fs::write(
        &batch,
        rules.iter().map(|r| r.trim_start_matches("-4 ").to_string() + "\n").collect::<String>(),
    )
    .unwrap();
    tb.host().exec("ip", &["-4", "-batch", path_str(&batch)]);
    for k in 0..3 {
        wait_healed(&tb, &w, k, "all rules deleted");
    }
}

#[test]
fn a_replaced_discovered_address_moves_its_rule() {
    let tb = Testbed::builder().rails(2).build();
    // No `addresses`: every global address of the rail is taken.
    let text: String = tb
        .rails()
        .iter()
        .map(|r| format!("[[interface]]\nname = \"{}\"\ntable = {}\n\n", r.name, r.table))
        .collect();
    let cfg = tb.write_config(&text);
    tb.apply_ok(&cfg);
    let w = Watch::start(&tb);
    assert!(has_rule(&tb, 1));
    let new = "198.51.100.51";
    tb.ip_host(&format!("addr del {}/24 dev rail1", tb.rail(1).v4));
    tb.ip_host(&format!("addr add {new}/24 dev rail1"));
    let start = Instant::now();
    poll_until("the rule to follow the new address", HEAL_TIMEOUT, || {
        let rules = tb.ip_host("-4 rule show");
        rules.contains(&format!("from {new} lookup 101"))
            && !rules.contains(&format!("from {} ", tb.rail(1).v4))
    });
    eprintln!("heal latency (address replaced): {} ms", start.elapsed().as_millis());
    poll_until("traffic from the new address to use table 101", HEAL_TIMEOUT, || {
        let got = tb.route_get(PEER_V4, new);
        got.contains("dev rail1 ") && got.contains("table 101")
    });
    drop(w);
}

#[test]
fn a_rail_deleted_and_re_created_is_healed() {
    let (tb, _cfg) = applied(3);
    let w = Watch::start(&tb);
    let r = tb.rail(2).clone();
    tb.ip_host(&format!("link del {}", r.name));
    tb.ip_host(&format!("link add {} type veth peer name {} netns {}", r.name, r.peer_port, tb.peer_ns()));
    tb.ip_peer(&format!("link set {} master br0 up", r.peer_port));
    tb.ip_host(&format!("addr add {} dev {}", r.v4_cidr(), r.name));
    assert!(!is_routed(&tb, 2), "a new link has nothing in table {}", r.table);
    tb.ip_host(&format!("link set {} up", r.name));
    wait_healed(&tb, &w, 2, "rail re-created");
}

#[test]
fn a_new_config_that_drops_a_rail_is_followed() {
    let (tb, _cfg) = applied(3);
    let w = Watch::start(&tb);
    let two = tb.config_for(2, &[]);
    tb.rr(&["apply", &two]).expect_code(EXIT_OK);
    assert!(!has_rule(&tb, 2));
    // A flap of the dropped rail and of a kept one: watch heals rail0 with
    // the new config, and must not bring rail2 back.
    let n = w.pass_count();
    tb.ip_host("link set rail2 down");
    tb.ip_host("link set rail2 up");
    tb.ip_host("link set rail0 down");
    tb.ip_host("link set rail0 up");
    w.wait_pass(n, "rail0: up");
    wait_healed(&tb, &w, 0, "a kept rail after a new config");
    assert!(!has_rule(&tb, 2) && !is_routed(&tb, 2), "watch re-added the dropped rail\n{}", w.log());
    tb.check_only_arp_flux(&two, &["rail2"]);
}

#[test]
fn after_remove_watch_adds_nothing_back() {
    let (tb, _cfg) = applied(3);
    let w = Watch::start(&tb);
    tb.rr(&["remove"]).expect_code(EXIT_OK);
    assert_eq!(tb.owned_entries(), Vec::<String>::new());
    let n = w.pass_count();
    tb.ip_host("link set rail1 down");
    tb.ip_host("link set rail1 up");
    assert_eq!(w.wait_pass(n, "rail1: up"), "no_config", "{}", w.log());
    assert_eq!(tb.owned_entries(), Vec::<String>::new(), "watch re-added what remove took out");
    // A rollback of the remove gives the config back: watch follows it.
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    tb.ip_host("link set rail1 down");
    tb.ip_host("link set rail1 up");
    wait_healed(&tb, &w, 1, "after remove was rolled back");
}

/// Issue 27: watch stopped after a remove says that nothing stays in
/// place (old: "the configuration stays in place", though the remove took
/// it out).
#[test]
fn the_exit_line_after_a_remove_says_nothing_stays() {
    let (tb, _cfg) = applied(2);
    let w = Watch::start(&tb);
    tb.rr(&["remove"]).expect_code(EXIT_OK);
    run("kill", &["-TERM", &w.bg.pid().to_string()]);
    let Watch { bg, out, err } = w;
    let done = bg.wait_timeout(Duration::from_secs(5));
    let log = std::fs::read_to_string(&out).unwrap() + &std::fs::read_to_string(&err).unwrap();
    assert_eq!(done.code(), Some(EXIT_OK), "{log}");
    assert!(!log.contains("the configuration stays in place"), "{log}");
    assert!(log.contains("a remove took it out), so nothing of roce-route's stays in place"), "{log}");
}

#[test]
fn an_unconfirmed_apply_is_not_kept() {
    let (tb, _cfg) = applied(3);
    let w = Watch::start(&tb);
    let before = tb.dump();
    let two = tb.config_for(2, &[]);
    let apply = Background::spawn(tb.rr_cmd(&["apply", "--confirm", "3", &two]), "apply --confirm 3");
    poll_until("the trial change", HEAL_TIMEOUT, || !has_rule(&tb, 2));
    // Tempt watch during the trial: a flap it would heal.
    let n = w.pass_count();
    tb.ip_host("link set rail1 down");
    tb.ip_host("link set rail1 up");
    assert_eq!(w.wait_pass(n, "rail1: up"), "deferred", "watch healed during a trial\n{}", w.log());
    assert!(!is_routed(&tb, 1), "watch healed rail1 during the trial");
    let run = apply.wait_timeout(Duration::from_secs(15));
    assert_ne!(run.code(), Some(EXIT_OK), "{}", run.report());
    // Reverted to the first config, which watch heals toward again.
    wait_healed(&tb, &w, 1, "after the revert");
    poll_until("the host as before the trial", HEAL_TIMEOUT, || has_rule(&tb, 2) && is_routed(&tb, 2));
    assert_dump_eq(&before, &tb.dump(), "an unconfirmed apply with watch running");
}

#[test]
fn sigterm_ends_watch_with_exit_0_and_keeps_the_configuration() {
    let (tb, cfg) = applied(3);
    let w = Watch::start(&tb);
    let before = tb.owned_entries();
    run("kill", &["-TERM", &w.bg.pid().to_string()]);
    let Watch { bg, out, err } = w;
    let done = bg.wait_timeout(Duration::from_secs(5));
    let log = std::fs::read_to_string(&out).unwrap() + &std::fs::read_to_string(&err).unwrap();
    assert_eq!(done.code(), Some(EXIT_OK), "{log}");
    assert!(log.contains("the configuration stays in place"), "{log}");
    // The last line is the envelope, as docs/json.md says.
    let last: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&out).unwrap().lines().last().unwrap())
            .unwrap_or_else(|e| panic!("{e}: {log}"));
    watch_lines::assert_documented(&last, &watch_lines::documented());
    assert!(last.get("event").is_none() && last["ok"] == true, "{last}");
    assert_eq!(tb.owned_entries(), before);
    tb.rr(&["check", path_str(&cfg)]).expect_code(EXIT_OK);
}

#[test]
fn a_second_watch_in_the_namespace_is_refused() {
    let (tb, _cfg) = applied(2);
    let mut w = Watch::start(&tb);
    let second = tb.rr(&["watch"]).expect_code(EXIT_FAILED);
    second.expect_stderr(&["another `roce-route watch`", &format!("pid {}", w.bg.pid())]);
    w.assert_running();
}

/// SIGKILL in the middle of a heal (after its first step) leaves an
/// unfinished journal: rollback undoes it, apply finishes the job.
#[test]
fn a_watch_killed_mid_heal_is_recovered_by_rollback_and_apply() {
    let (tb, cfg) = applied(3);
    let mut w = Watch::start_with(&tb, "crash", |c| {
        c.env("ROCE_ROUTE_CRASH_AT", "step:0");
    });
    tb.ip_host("link set rail1 down");
    tb.ip_host("link set rail1 up");
    poll_until("watch to die mid-heal", HEAL_TIMEOUT, || !w.bg.is_running());
    let check = tb.rr(&["check", path_str(&cfg)]);
    assert!(check.report().contains("did not finish"), "{}\n{}", check.report(), w.log());
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    assert!(!is_routed(&tb, 1), "rollback undid the half-made heal");
    tb.apply_ok(&cfg);
    assert!(is_routed(&tb, 1) && has_rule(&tb, 1));
    tb.rr(&["check", path_str(&cfg)]).expect_code(EXIT_OK);
    // And a new watch starts on the recovered host with nothing to do.
    let w2 = Watch::start_with(&tb, "after", |_| {});
    assert_eq!(w2.heals(), 0, "{}", w2.log());
}

/// A route roce-route does not own put in one of its tables is a conflict,
/// as for apply without --adopt: watch says so and leaves it (and the rest)
/// alone instead of taking it over.
#[test]
fn a_foreign_route_in_a_managed_table_is_not_taken_over() {
    let (tb, _cfg) = applied(3);
    let w = Watch::start(&tb);
    let n = w.pass_count();
    tb.ip_host("route add 203.0.113.0/24 dev rail1 table 101");
    assert_eq!(w.wait_pass(n, "route added in table 101"), "conflicts", "{}", w.log());
    assert!(w.docs().iter().any(|d| d["event"] == "conflicts"), "{}", w.log());
    assert!(tb.ip_host("route show table 101").contains("203.0.113.0/24 dev rail1"), "watch took it over");
}

/// The next watch finishes a heal its predecessor was killed in the
/// middle of (its journal written, its first step not sent), as the next
/// apply would.
#[test]
fn a_watch_killed_mid_heal_is_finished_by_the_next_watch() {
    let (tb, cfg) = applied(3);
    let mut w = Watch::start_with(&tb, "crash", |c| {
        c.env("ROCE_ROUTE_CRASH_AT", "record:0");
    });
    tb.ip_host("link set rail1 down");
    tb.ip_host("link set rail1 up");
    poll_until("watch to die mid-heal", HEAL_TIMEOUT, || !w.bg.is_running());
    let check = tb.rr(&["check", path_str(&cfg)]);
    assert!(check.report().contains("did not finish"), "{}\n{}", check.report(), w.log());
    let next = Watch::start_with(&tb, "next", |_| {});
    wait_healed(&tb, &next, 1, "by the next watch");
    poll_until("the next watch's heal line", HEAL_TIMEOUT, || next.heals() == 1);
    tb.rr(&["check", path_str(&cfg)]).expect_code(EXIT_OK);
}

/// Notifications lost to a socket overflow (ENOBUFS: a tiny receive
/// buffer, a storm while watch is busy in a slow heal) end in a full
/// resync that heals what the lost notifications were about.
#[test]
fn an_overflow_of_the_notifications_ends_in_a_full_resync() {
    let (tb, _cfg) = applied(3);
    let w = Watch::start_with(&tb, "overflow", |c| {
        c.env("ROCE_ROUTE_WATCH_RCVBUF", "1").env("ROCE_ROUTE_STEP_DELAY_MS", "500");
    });
    let journals = journal_files(&tb.state_base()).len();
    tb.ip_host("link set rail1 down");
    tb.ip_host("link set rail1 up");
    // The heal of rail1 has begun (its journal is written) and sleeps in
    // its first step: nobody reads the notifications now.
    poll_until("the heal to begin", HEAL_TIMEOUT, || journal_files(&tb.state_base()).len() > journals);
    let script: String = (0..40).map(|_| "link set rail2 down\nlink set rail2 up\n").collect();
    let batch = tb.dir().join("storm.batch");
    std::fs::write(&batch, script).unwrap();
    tb.host().exec("ip", &["-batch", path_str(&batch)]);
    wait_healed(&tb, &w, 2, "after an overflow");
    wait_healed(&tb, &w, 1, "the slow heal");
    let resync =
        || w.passes().iter().any(|p| p["message"].as_str().is_some_and(|m| m.contains("full resync")));
    poll_until("a full-resync pass", HEAL_TIMEOUT, resync);
}

/// A rail that goes down while a heal is adding its routes (the kernel
/// answers ENETDOWN) is a race, read again: the rail is then not ready,
/// the pass does not fail, and the rail is healed when it comes up, with
/// no failed pass and its 2 s back-off in between.
#[test]
fn a_rail_going_down_mid_heal_is_read_again_not_a_failed_pass() {
    let (tb, _cfg) = applied(2);
    let w = Watch::start_with(&tb, "down mid-heal", |c| {
        c.env("ROCE_ROUTE_STEP_DELAY_MS", "400");
    });
    let journals = journal_files(&tb.state_base()).len();
    tb.ip_host("link set rail1 down");
    tb.ip_host("link set rail1 up");
    // The heal of rail1 has begun (its journal is written) and sleeps
    // before its first step, a route through rail1.
    poll_until("the heal to begin", HEAL_TIMEOUT, || journal_files(&tb.state_base()).len() > journals);
    tb.ip_host("link set rail1 down");
    poll_until("the pass to meet the down rail", HEAL_TIMEOUT, || w.log().contains("reading it again"));
    assert!(w.log().contains("Network is down"), "the notice names the kernel's reason\n{}", w.log());
    tb.ip_host("link set rail1 up");
    wait_healed(&tb, &w, 1, "after going down mid-heal");
    let failed = w.passes().iter().filter(|p| p["outcome"] == "failed").count();
    assert_eq!(failed, 0, "a rail gone down mid-heal failed a pass\n{}", w.log());
}

// ---------------------------------------------------------------------------
// Issue 15: rollback, confirmation, sysctls without events, backing off

/// With watch running, `rollback` undoes the user's last apply together
/// with the heals built on it (not just the newest heal), even after more
/// heals than the journal window holds; watch then follows the config
/// before it.
#[test]
fn rollback_with_watch_running_undoes_the_users_apply_and_its_heals() {
    let (tb, _cfg) = applied(3);
    let applied_a = tb.dump();
    let two = tb.config_for(2, &[]);
    let w = Watch::start(&tb);
    tb.rr(&["apply", "--no-announce", &two]).expect_code(EXIT_OK);
    poll_until("the apply of two rails", HEAL_TIMEOUT, || !has_rule(&tb, 2));
    // More heals than the 32 runs the journal window keeps.
    let flaps = 34;
    for i in 0..flaps {
        tb.ip_host("link set rail1 down");
        tb.ip_host("link set rail1 up");
        wait_healed(&tb, &w, 1, &format!("flap {i}"));
    }
    poll_until("every heal logged", HEAL_TIMEOUT, || w.heals() >= flaps);
    let run = tb.rr(&["rollback"]).expect_code(EXIT_OK);
    run.expect_stdout(&["rolled back the apply", "heals by watch built on it"]);
    let doc = json_doc(&tb.rr(&["--json", "rollback", "--dry-run"]));
    assert_eq!(doc["undid"], "apply", "the next rollback point is the first apply: {doc}");
    // Back to the three-rail config, which watch now keeps.
    poll_until("rail2 back", HEAL_TIMEOUT, || has_rule(&tb, 2) && is_routed(&tb, 2));
    tb.ip_host("link set rail2 down");
    tb.ip_host("link set rail2 up");
    wait_healed(&tb, &w, 2, "rail2 after the rollback");
    poll_until("the host as the first apply left it", HEAL_TIMEOUT, || tb.dump() == applied_a);
}

/// The guard of an `apply --confirm` dies without an answer (SIGKILL, as
/// the OOM killer or a stopped unit would): watch does not heal toward the
/// unconfirmed config; it reverts the trial and keeps the config before it.
#[test]
fn the_trial_of_a_dead_guard_is_reverted_by_watch() {
    let (tb, _cfg) = applied(3);
    let before = tb.dump();
    let w = Watch::start(&tb);
    let two = tb.config_for(2, &[]);
    let mut apply = Background::spawn(
        tb.rr_cmd(&["apply", "--no-announce", "--confirm", "120", &two]),
        "apply --confirm",
    );
    poll_until("the trial change", HEAL_TIMEOUT, || {
        confirmation_pending(&tb.state_base()) && !has_rule(&tb, 2)
    });
    let pending: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tb.ns_state_dir().join("pending")).unwrap()).unwrap();
    let guard = pending["guard_pid"].as_u64().expect("the guard's pid") as i32;
    assert!(guard > 0, "{pending}");
    // The apply first: alive, it would revert the trial itself once its
    // guard died.
    apply.kill();
    nix_kill(guard);
    poll_until("watch to revert the trial", HEAL_TIMEOUT, || {
        w.docs().iter().any(|d| d["event"] == "trial_reverted")
    });
    poll_until("rail2 back", HEAL_TIMEOUT, || has_rule(&tb, 2) && is_routed(&tb, 2));
    assert_dump_eq(&before, &tb.dump(), "after watch reverted a trial whose guard died");
    assert!(!guard_armed(&tb.state_base()), "pending left behind");
}

fn nix_kill(pid: i32) {
    let out = Command::new("kill").args(["-9", &pid.to_string()]).output().unwrap();
    assert!(out.status.success(), "kill -9 {pid}: {}", String::from_utf8_lossy(&out.stderr));
}

fn arp_ignore(tb: &Testbed, iface: &str) -> u32 {
    tb.host_sysctl(iface, "arp_ignore")
}

/// udev's `systemd-sysctl --prefix=/net/ipv4/conf/<if>` for a re-created
/// rail runs after watch's heal and resets arp_ignore; no notification
/// tells: the second pass shortly after the rail appeared restores it.
#[test]
fn a_sysctl_reset_after_a_rail_was_re_created_is_healed() {
    let (tb, _cfg) = applied(3);
    let w = Watch::start(&tb);
    let r = tb.rail(2).clone();
    tb.ip_host(&format!("link del {}", r.name));
    tb.ip_host(&format!("link add {} type veth peer name {} netns {}", r.name, r.peer_port, tb.peer_ns()));
    tb.ip_peer(&format!("link set {} master br0 up", r.peer_port));
    tb.ip_host(&format!("addr add {} dev {}", r.v4_cidr(), r.name));
    tb.ip_host(&format!("link set {} up", r.name));
    wait_healed(&tb, &w, 2, "rail re-created");
    poll_until("arp_ignore healed", HEAL_TIMEOUT, || arp_ignore(&tb, &r.name) == 1);
    // Once the passes that the heal's own notifications cause are over.
    std::thread::sleep(Duration::from_millis(300));
    let before = w.pass_count();
    // What udev's late systemd-sysctl does (kernel default 0).
    tb.set_host_sysctl(&r.name, "arp_ignore", 0);
    poll_until("the second pass to restore arp_ignore", HEAL_TIMEOUT, || arp_ignore(&tb, &r.name) == 1);
    let recheck_healed = || {
        w.passes().iter().any(|p| {
            p["pass"].as_u64().unwrap_or(0) > before
                && p["outcome"] == "healed"
                && p["message"].as_str().is_some_and(|m| m.contains("shortly after a rail appeared"))
        })
    };
    poll_until("the restoring pass to be the one after the rail appeared", HEAL_TIMEOUT, recheck_healed);
}

/// `--resync`: a sysctl changed by hand (no notification) is found by the
/// periodic pass.
#[test]
fn the_periodic_resync_finds_a_sysctl_changed_without_a_notification() {
    let (tb, _cfg) = applied(2);
    let w = Watch::start_with(&tb, "resync", |c| {
        c.args(["--resync", "1"]);
    });
    tb.set_host_sysctl("rail1", "arp_ignore", 0);
    poll_until("the resync to restore arp_ignore", HEAL_TIMEOUT, || arp_ignore(&tb, "rail1") == 1);
    // Its pass line is written once the pass is over.
    let resync_healed = || {
        w.passes().iter().any(|p| {
            p["outcome"] == "healed" && p["message"].as_str().is_some_and(|m| m.contains("periodic resync"))
        })
    };
    poll_until("the healing pass to be the periodic resync", HEAL_TIMEOUT, resync_healed);
}

/// Another agent deletes rail1's rule right after every heal (as networkd
/// with ManageForeignRoutingPolicyRules or a CNI reconciler does): watch
/// says so once, naming what it suspects, and backs off instead of healing
/// ten times a second; once the agent stops, the rule is healed.
#[test]
fn watch_backs_off_from_an_agent_that_undoes_its_heals() {
    let (tb, _cfg) = applied(2);
    let w = Watch::start(&tb);
    let r = tb.rail(1).clone();
    let rule = format!("from {} lookup {}", r.v4, r.table);
    // About 6 s: 60 rounds of a delete (which fails while the rule is
    // gone) and 100 ms.
    let agent = format!("for i in $(seq 60); do ip rule del {rule} 2>/dev/null; sleep 0.1; done; true");
    tb.sh_host(&agent);
    let heals = w.heals();
    assert!(
        heals <= 8,
        "watch healed {heals} times in 6 s against an agent deleting every 100 ms\n{}",
        w.log()
    );
    let fights: Vec<serde_json::Value> = w.docs().into_iter().filter(|d| d["event"] == "fighting").collect();
    assert_eq!(fights.len(), 1, "the fight is said once\n{}", w.log());
    assert!(fights[0]["message"].as_str().unwrap().contains("something undoes them"), "{}", fights[0]);
    assert!(fights[0]["suspects"].is_array(), "{}", fights[0]);
    poll_until("the rule healed once the agent stopped", Duration::from_secs(25), || has_rule(&tb, 1));
}

/// A pass that fails for a reason that stays (here a damaged record) is
/// said once; the passes back off instead of failing on every
/// notification; once the cause is gone, watch says how often it repeated.
#[test]
fn a_failing_pass_is_said_once_and_backed_off() {
    let (tb, _cfg) = applied(2);
    let w = Watch::start(&tb);
    let record = tb.ns_state_dir().join("record.json");
    let good = std::fs::read(&record).unwrap();
    std::fs::write(&record, b"{ damaged").unwrap();
    for _ in 0..10 {
        tb.ip_host("link set rail1 down");
        tb.ip_host("link set rail1 up");
        std::thread::sleep(Duration::from_millis(400));
    }
    let docs = w.docs();
    let errors = docs.iter().filter(|d| d["event"] == "error").count();
    let failed = w.passes().iter().filter(|p| p["outcome"] == "failed").count();
    assert_eq!(errors, 1, "a repeated error is said once\n{}", w.log());
    assert!((2..=5).contains(&failed), "{failed} failed passes in 4 s of flaps: no back-off\n{}", w.log());
    std::fs::write(&record, good).unwrap();
    poll_until("watch to recover", Duration::from_secs(40), || {
        w.docs().iter().any(|d| d["event"] == "recovered")
    });
    assert!(w.docs().iter().any(|d| d["event"] == "repeated"), "{}", w.log());
    wait_healed(&tb, &w, 1, "after recovering");
}

/// SIGKILL of an apply between its journal and its record writes: watch
/// keeps following the config that was applied, never the one no step of
/// which was made. (On the old code the record came first: watch then
/// healed toward the killed apply's config.)
#[test]
fn a_crash_between_the_journal_and_the_record_leaves_watch_on_the_applied_config() {
    let (tb, _cfg) = applied(3);
    let w = Watch::start(&tb);
    let two = tb.config_for(2, &[]);
    let mut cmd = tb.rr_cmd(&["apply", "--no-announce", &two]);
    cmd.env("ROCE_ROUTE_CRASH_AT", "journal:0");
    let run = Run::of(cmd);
    assert_ne!(run.code(), Some(EXIT_OK), "the apply was not killed\n{}", run.report());
    // rail2 (which the killed apply would drop) is still watched over.
    tb.ip_host("link set rail2 down");
    tb.ip_host("link set rail2 up");
    wait_healed(&tb, &w, 2, "rail2 after the killed apply");
}

/// A tun device as a rail: every heal that touches it warns that it cannot
/// be announced on. With --json the warning is a line of its own when it
/// happens, not kept for the document at exit.
fn tun_rail(tb: &Testbed) -> PathBuf {
    tb.ip_host("tuntap add dev tun7 mode tun");
    tb.ip_host("addr add 203.0.113.7/24 dev tun7");
    tb.ip_host("link set tun7 up");
    let text =
        format!("{}\n[[interface]]\nname = \"tun7\"\naddresses = [\"203.0.113.7\"]\n", tb.config_toml());
    let cfg = tb.write_config(&text);
    tb.apply_ok(&cfg);
    cfg
}

#[test]
fn watch_json_prints_warnings_as_lines_when_they_happen() {
    let tb = Testbed::builder().rails(2).build();
    tun_rail(&tb);
    let w = Watch::start(&tb);
    tb.ip_host("rule del from 203.0.113.7");
    poll_until("the heal of tun7", HEAL_TIMEOUT, || w.heals() >= 1);
    poll_until("a warning line", HEAL_TIMEOUT, || {
        w.docs().iter().any(|d| {
            d["event"] == "warning"
                && d["message"].as_str().is_some_and(|m| m.contains("tun7") && m.contains("not announced"))
        })
    });
    let out = std::fs::read_to_string(&w.out).unwrap();
    assert!(out.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()), "{out}");
}

/// `-q` silences the heal and pass lines (the heal still happens); what
/// needs an operator (a warning) is still said.
#[test]
fn watch_quiet_silences_the_heal_lines() {
    let tb = Testbed::builder().rails(2).build();
    tun_rail(&tb);
    let w = Watch::start_with(&tb, "quiet", |c| {
        c.arg("-q");
    });
    tb.ip_host("rule del from 203.0.113.7");
    tb.ip_host("link set rail1 down");
    tb.ip_host("link set rail1 up");
    wait_healed(&tb, &w, 1, "rail1 under -q");
    // A heal's line is written right after the heal.
    std::thread::sleep(Duration::from_millis(500));
    let routine: Vec<serde_json::Value> = w
        .docs()
        .into_iter()
        .filter(|d| ["heal", "pass", "start"].contains(&d["event"].as_str().unwrap_or("")))
        .collect();
    assert!(routine.is_empty(), "-q printed routine lines: {routine:?}");
    poll_until("the warning about tun7", HEAL_TIMEOUT, || w.docs().iter().any(|d| d["event"] == "warning"));
}

/// `watch --metrics FILE` keeps the file from the start, and a heal counts
/// in `roce_route_heals_total`; promtool accepts the file each time.
#[test]
fn watch_keeps_its_metrics_file() {
    let (tb, _cfg) = applied(2);
    let file = tb.dir().join("roce-route.prom");
    let arg = file.to_string_lossy().into_owned();
    let w = Watch::start_with(&tb, "metrics", |cmd| {
        cmd.args(["--metrics", &arg]);
    });
    let read = || std::fs::read_to_string(&file).unwrap_or_default();
    let lint = |text: &str| {
        let (ok, said) = promtool(text);
        assert!(ok && said.trim().is_empty(), "promtool says:\n{said}\non:\n{text}");
    };
    // Written after the pass at start (READY=1 follows it).
    let text = read();
    lint(&text);
    assert!(text.contains("\nroce_route_in_sync 1\n"), "{text}\n{}", w.log());
    assert!(text.contains("\nroce_route_rail_in_sync{rail=\"rail1\"} 1\n"), "{text}");
    assert!(text.contains("\nroce_route_last_apply_timestamp_seconds "), "{text}");
    let heals = |text: &str| -> u64 {
        text.lines()
            .filter(|l| l.starts_with("roce_route_heals_total{"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(heals(&text), 0, "{text}");
    let r = tb.rail(1);
    tb.ip_host(&format!("-4 rule del from {} lookup {}", r.v4, r.table));
    wait_healed(&tb, &w, 1, "a rule deleted");
    poll_until("watch's heal line", HEAL_TIMEOUT, || w.heals() >= 1);
    poll_until("the heal in the metrics", HEAL_TIMEOUT, || heals(&read()) >= 1);
    let text = read();
    lint(&text);
    assert!(text.contains("\nroce_route_heals_total{trigger=\"events\"} 1\n"), "{text}");
    assert!(text.contains("\nroce_route_drift_found_total{kind=\"missing_rule\"} 1\n"), "{text}");
    assert!(text.contains("\nroce_route_last_heal_timestamp_seconds "), "{text}");
    assert!(text.contains("\nroce_route_in_sync 1\n"), "{text}");
    let leftovers: Vec<_> = std::fs::read_dir(tb.dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Only the metrics read sysfs: a --sysfs-root that is no sysfs copy
/// stops watch with --metrics (exit 2, naming it), never without.
#[test]
fn a_bad_sysfs_root_matters_only_to_the_metrics() {
    let (tb, _cfg) = applied(2);
    let bad = tb.dir().join("not-sysfs");
    std::fs::create_dir_all(&bad).unwrap();
    let file = tb.dir().join("m.prom");
    let run = tb.rr(&["watch", "--sysfs-root", path_str(&bad), "--metrics", path_str(&file)]);
    run.expect_code(EXIT_INVALID).expect_stderr(&["--sysfs-root"]);
    let mut w = Watch::start_with(&tb, "nosys", |c| {
        c.arg("--sysfs-root").arg(&bad);
    });
    w.assert_running();
    tb.ip_host(&format!("rule del from {}", tb.rail(1).v4));
    wait_healed(&tb, &w, 1, "without --metrics, with a bad --sysfs-root");
}

/// The value of the unlabeled sample `name` in a metrics text, if any.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// A watch whose heals fail (its /proc/sys read-only: each write of the
/// reset arp_ignore fails with EROFS) says so in its file, as check says at
/// the same moment: not in sync, the sysctl drift on rail1, each failed
/// pass counted, and the last success left at the pass before the reset.
/// (Red before failed passes reached the metrics: the file kept
/// `in_sync 1` and `drift{kind="sysctl"} 0` while check said 0 and 1.)
#[test]
fn a_watch_whose_heals_fail_says_so_in_its_metrics() {
    let (tb, cfg) = applied(2);
    let file = tb.dir().join("failing.prom");
    let cmd = tb.rr_cmd(&["--json", "watch", "--resync", "1", "--metrics", path_str(&file)]);
    let w = Watch::start_cmd(&tb, "rofail", read_only_proc_sys(cmd));
    let read = || std::fs::read_to_string(&file).unwrap_or_default();
    let at_start = read();
    assert!(at_start.contains("\nroce_route_in_sync 1\n"), "{at_start}\n{}", w.log());
    tb.set_host_sysctl("rail1", "arp_ignore", 0);
    // The file is written before the pass line: it has that pass.
    poll_until("a failed pass", HEAL_TIMEOUT, || w.passes().iter().any(|p| p["outcome"] == "failed"));
    assert!(w.log().contains("Read-only file system"), "the heal failed for the reason set up: {}", w.log());
    assert_eq!(tb.host_sysctl("rail1", "arp_ignore"), 0, "nothing healed");
    let text = read();
    assert!(text.contains("\nroce_route_in_sync 0\n"), "{text}");
    assert!(text.contains("\nroce_route_drift{kind=\"sysctl\"} 1\n"), "{text}");
    assert!(text.contains("\nroce_route_rail_in_sync{rail=\"rail1\"} 0\n"), "{text}");
    assert!(text.contains("\nroce_route_rail_in_sync{rail=\"rail0\"} 1\n"), "{text}");
    let (ok, said) = promtool(&text);
    assert!(ok && said.trim().is_empty(), "promtool says:\n{said}\non:\n{text}");
    assert_eq!(sample(&at_start, "roce_route_failed_passes_total"), Some(0.0), "{at_start}");
    assert!(sample(&text, "roce_route_failed_passes_total").is_some_and(|n| n >= 1.0), "{text}");
    let started = sample(&at_start, "roce_route_last_success_timestamp_seconds");
    assert!(started.is_some(), "a success at start: {at_start}");
    assert_eq!(sample(&text, "roce_route_last_success_timestamp_seconds"), started, "{text}");
    let check = tb.rr(&["check", "--format", "prometheus", path_str(&cfg)]).expect_code(EXIT_DRIFT).stdout();
    assert!(check.contains("\nroce_route_in_sync 0\n"), "{check}");
    assert!(check.contains("\nroce_route_drift{kind=\"sysctl\"} 1\n"), "{check}");
}

/// `last_apply_timestamp_seconds` is the user's apply's time, also after
/// a restart of watch that follows a heal (the newest journal a heal's).
/// (Red when it was read from the newest journal alone: no sample after
/// the restart.)
#[test]
fn the_last_apply_survives_a_heal_and_a_restart() {
    let (tb, _cfg) = applied(2);
    let file = tb.dir().join("restart.prom");
    let arg = file.to_string_lossy().into_owned();
    let read = || std::fs::read_to_string(&file).unwrap_or_default();
    let mut w = Watch::start_with(&tb, "first", |c| {
        c.args(["--metrics", &arg]);
    });
    let applied_at = sample(&read(), "roce_route_last_apply_timestamp_seconds").expect("the apply's time");
    tb.ip_host(&format!("rule del from {}", tb.rail(1).v4));
    wait_healed(&tb, &w, 1, "a rule deleted");
    poll_until("watch's heal line", HEAL_TIMEOUT, || w.heals() >= 1);
    w.bg.kill();
    std::fs::remove_file(&file).unwrap();
    let _w = Watch::start_with(&tb, "second", |c| {
        c.args(["--metrics", &arg]);
    });
    let text = read();
    assert_eq!(sample(&text, "roce_route_last_apply_timestamp_seconds"), Some(applied_at), "{text}");
}

/// Pod churn on a Kubernetes node (issue 26, item 2): veths with CNI-like
/// names, each addressed, brought up and deleted, while watch runs on the
/// rails. None of them is a rail, so none gets a pass; a rail's flap
/// right after still does, and is healed. (Red before: every link and
/// address event of any interface ran a full pass, 40 veths gave dozens.)
#[test]
fn pod_veths_coming_and_going_get_no_pass_and_a_rail_flap_still_heals() {
    let (tb, _cfg) = applied(2);
    let w = Watch::start(&tb);
    let before = w.pass_count();
    for i in 0..40 {
        let (pod, peer) = (format!("veth{i:08x}"), format!("eth{i}"));
        tb.ip_host(&format!("link add {pod} type veth peer name {peer}"));
        tb.ip_host(&format!("addr add 10.244.{}.{}/32 dev {pod}", i / 200, 1 + i % 200));
        tb.ip_host(&format!("link set {pod} up"));
        tb.ip_host(&format!("link set {peer} up"));
        tb.ip_host(&format!("link del {pod}"));
    }
    // Longer than the burst window: any pass the churn started has run.
    std::thread::sleep(Duration::from_millis(500));
    let after_churn = w.pass_count();
    assert_eq!(after_churn, before, "passes for pod veths:\n{}", w.log());
    tb.ip_host("link set rail1 down");
    tb.ip_host("link set rail1 up");
    w.wait_pass(after_churn, "rail1: up");
    wait_healed(&tb, &w, 1, "a rail flap after pod churn");
}

/// watch keeps the addresses of links that are not rails from their
/// notifications (a read of a thousand pod veths' is 2 ms of a heal), and
/// reads the rails' from the kernel at every pass: a rail's listed address
/// moved to a pod veth that came after watch started is seen there, so its
/// rule goes (an address only gone from the rail keeps its rule), and the
/// log says where it went. Moved back, it is healed.
#[test]
fn an_address_moved_to_a_pod_veth_is_seen_there_by_watch() {
    let (tb, _cfg) = applied(2);
    let w = Watch::start(&tb);
    address_moved_to_a_pod_veth(&tb, &w);
}

/// The same with watch started before any apply: its first pass found no
/// config and read no address; the pass after the apply starts keeping
/// them.
#[test]
fn an_address_moved_to_a_pod_veth_is_seen_by_a_watch_started_before_apply() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.standard_config();
    let w = Watch::start(&tb);
    let before = w.pass_count();
    tb.apply_ok(&cfg);
    w.wait_pass(before, "");
    address_moved_to_a_pod_veth(&tb, &w);
}

fn address_moved_to_a_pod_veth(tb: &Testbed, w: &Watch) {
    tb.ip_host("link add cali0 type veth peer name calp0");
    tb.ip_host("link set cali0 up");
    tb.ip_host("link set calp0 up");
    let v4 = tb.rail(1).v4.clone();
    assert!(tb.ip_host("-4 rule show").contains(&format!("from {v4} lookup")), "listed: {v4}");
    // One `ip` process: both notifications in one burst.
    tb.sh_host(&format!("printf 'addr del {v4}/24 dev rail1\\naddr add {v4}/24 dev cali0\\n' | ip -batch -"));
    poll_until("the moved address's rule to go", HEAL_TIMEOUT, || !has_rule(tb, 1));
    // The log line follows the heal.
    poll_until("the moved address to be said", HEAL_TIMEOUT, || {
        w.log().contains("is on cali0, not on rail1")
    });
    tb.sh_host(&format!("printf 'addr del {v4}/24 dev cali0\\naddr add {v4}/24 dev rail1\\n' | ip -batch -"));
    wait_healed(tb, w, 1, "an address moved back from a pod veth");
}

/// A rail's listed address moved to a pod veth after the pass of its
/// removal had read the host (two `ip` commands 300 ms apart): the pod
/// veth's address event is not a rail's, but the address is the
/// config's, so it gets a pass, which sees it moved: its rule goes (it
/// stayed, kept as only gone, until the next rail event). A pod's own
/// address (10.244.0.0/16) still gets none.
#[test]
fn an_address_moved_to_a_pod_veth_after_its_pass_gets_a_pass_of_its_own() {
    let (tb, _cfg) = applied(2);
    let w = Watch::start(&tb);
    tb.ip_host("link add cali0 type veth peer name calp0");
    tb.ip_host("link set cali0 up");
    tb.ip_host("link set calp0 up");
    let v4 = tb.rail(1).v4.clone();
    let before = w.pass_count();
    tb.ip_host(&format!("addr del {v4}/24 dev rail1"));
    w.wait_pass(before, "removed");
    std::thread::sleep(Duration::from_millis(300));
    assert!(has_rule(&tb, 1), "only gone from rail1: its rule is kept\n{}", w.log());
    let before = w.pass_count();
    tb.ip_host("addr add 10.244.0.5/32 dev cali0");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.pass_count(), before, "a pod's address gets no pass:\n{}", w.log());
    tb.ip_host(&format!("addr add {v4}/24 dev cali0"));
    poll_until("the moved address's rule to go", HEAL_TIMEOUT, || !has_rule(&tb, 1));
    poll_until("the moved address to be said", HEAL_TIMEOUT, || {
        w.log().contains("is on cali0, not on rail1")
    });
}
