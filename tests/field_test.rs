//! Real-kernel regression tests for what the second review and the field
//! test found (issue 7). Each test is the scenario that went wrong, and
//! fails on the old behaviour for the reason its name gives.

mod common;

use std::fs;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::*;

/// `roce-route ARGS` with the fault-injection step delay, in the background.
fn spawn_with_delay(tb: &Testbed, base: &std::path::Path, args: &[&str], delay_ms: u64) -> Background {
    let mut cmd = tb.roce_route_in(base, args);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", delay_ms.to_string());
    Background::spawn(cmd, format!("roce-route {args:?} with a {delay_ms} ms step delay"))
}

fn kill(pid: u32, signal: &str) {
    let out = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).output().expect("kill");
    assert!(out.status.success(), "kill -{signal} {pid}: {}", describe_output(&out));
}

// ---------------------------------------------------------------------------
// 1. --protocol

/// `remove --protocol 2` used to delete the kernel's own rules and routes.
#[test]
fn remove_and_show_refuse_a_kernel_or_daemon_protocol() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &[]);
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    let before = tb.dump();
    for p in ["2", "0", "186", "300"] {
        let run = tb.rr(&["remove", "--protocol", p]).expect_code(EXIT_INVALID);
        run.expect_stderr(&["--protocol", "protocol = "]);
        tb.rr(&["show", "--protocol", p]).expect_code(EXIT_INVALID);
    }
    assert_dump_eq(&before, &tb.dump(), "a refused --protocol changed the host");
}

/// A valid `--protocol` acts in roce-route's tables for that run only: a
/// foreign route with that protocol in main stays, and a later plain
/// `remove` does not reuse the number.
#[test]
fn a_command_line_protocol_is_limited_to_owned_tables_and_never_persisted() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &[]);
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    tb.ip_host("route add 203.0.113.0/24 dev rail0 proto 77");
    tb.rr(&["remove", "--protocol", "77"]).expect_code(EXIT_OK);
    assert!(tb.owned_entries().is_empty(), "{:?}", tb.owned_entries());
    assert_eq!(
        tb.entries_with_proto(77).len(),
        1,
        "the proto 77 route in main must stay: {:?}",
        tb.entries_with_proto(77)
    );
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    tb.ip_host("rule add from 203.0.113.9 lookup 300 proto 77");
    tb.rr(&["remove"]).expect_code(EXIT_OK);
    assert_eq!(
        tb.entries_with_proto(77).len(),
        2,
        "a plain remove reused --protocol 77: {:?}",
        tb.entries_with_proto(77)
    );
}

// ---------------------------------------------------------------------------
// 2. Signals

/// A change of sysctls only: the steps make no await point at all, so a
/// signal is seen only through the flag its handler sets.
#[test]
fn sigterm_during_the_sysctl_phase_rolls_back() {
    let tb = Testbed::builder().rails(4).build();
    tb.rr(&["apply", &tb.config_for(4, &[])]).expect_code(EXIT_OK);
    let before = tb.dump();
    let cfg = tb.config_for(4, &["rp_filter = 2", "arp_filter = 1"]);
    let mut apply = spawn_with_delay(&tb, &tb.state_base(), &["apply", &cfg], 300);
    thread::sleep(Duration::from_millis(700));
    assert!(apply.is_running(), "the apply ended before the signal");
    kill(apply.pid(), "TERM");
    let run = apply.wait_timeout(Duration::from_secs(20));
    assert_eq!(run.code(), Some(EXIT_FAILED), "a signalled apply exits 1:\n{}", run.report());
    run.expect_stderr(&["SIGTERM", "rolled back"]);
    assert_dump_eq(&before, &tb.dump(), "the sysctls changed despite the signal");
}

/// Ctrl-C while waiting for the lock ends the wait at once.
#[test]
fn sigint_ends_the_lock_wait_at_once() {
    let tb = Testbed::builder().rails(4).build();
    let cfg = tb.config_for(4, &[]);
    let holder = spawn_with_delay(&tb, &tb.state_base(), &["apply", &cfg], 1000);
    poll_until("the first apply to take the lock", Duration::from_secs(10), || {
        !journal_files(&tb.state_base()).is_empty()
    });
    let mut waiter = Background::spawn(
        tb.roce_route_in(&tb.state_base(), &["--lock-timeout", "60", "apply", &cfg]),
        "second apply",
    );
    thread::sleep(Duration::from_millis(300));
    assert!(waiter.is_running(), "the second apply did not wait for the lock");
    let sent = Instant::now();
    kill(waiter.pid(), "INT");
    let run = waiter.wait_timeout(Duration::from_secs(10));
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "the wait went on for {:?} after SIGINT",
        sent.elapsed()
    );
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    run.expect_stderr(&["SIGINT", "waiting for the lock", "nothing was changed"]);
    drop(holder);
}

// ---------------------------------------------------------------------------
// 5. Priority 0

/// The kernel leaves priority 0 out of rule dumps; a rule sent back without
/// it gets an automatic priority.
#[test]
fn an_adopted_rule_at_priority_0_comes_back_at_priority_0() {
    let tb = Testbed::builder().rails(2).build();
    tb.ip_host("rule add priority 0 from 198.51.100.10 lookup 100");
    let before = tb.dump();
    let cfg = tb.config_for(2, &[]);
    tb.rr(&["apply", "--adopt", &cfg]).expect_code(EXIT_OK);
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    assert!(
        tb.ip_host("-4 rule").lines().any(|l| l.starts_with("0:\tfrom 198.51.100.10 lookup 100")),
        "{}",
        tb.ip_host("-4 rule")
    );
    assert_dump_eq(&before, &tb.dump(), "rollback of an adopted priority-0 rule");
}

// ---------------------------------------------------------------------------
// 7. Suggested commands

/// The suggested `--adopt` command, copied as printed (with its own
/// --netns and --state-dir, the config path quoted), fixes the host.
#[test]
fn suggested_commands_work_as_printed() {
    let tb = Testbed::builder().rails(2).build();
    let dir = tb.dir().join("my configs");
    fs::create_dir(&dir).unwrap();
    let cfg = dir.join("two rails.toml");
    fs::write(&cfg, fs::read_to_string(tb.config_for(2, &[])).unwrap()).unwrap();
    let base = tb.dir().join("state dir");
    tb.ip_host("rule add priority 500 from 198.51.100.11 lookup main");
    let run = tb.rr_in(&base, &["apply", path_str(&cfg)]).expect_code(EXIT_FAILED);
    let stderr = run.stderr();
    let fix = quoted_after(&stderr, "\nrun ")
        .unwrap_or_else(|| panic!("no suggestion in\n{}", run.report()))
        .to_string();
    assert!(fix.contains("--netns") && fix.contains("--state-dir") && fix.contains("--adopt"), "{fix}");
    // As an admin would paste it: a plain shell, no test environment.
    let out = Command::new("sh")
        .arg("-c")
        .arg(fix.replacen("roce-route", env!("CARGO_BIN_EXE_roce-route"), 1))
        .env_remove("ROCE_ROUTE_STATE_DIR")
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "`{fix}` failed:\n{}", describe_output(&out));
    tb.rr_in(&base, &["check", path_str(&cfg)]).expect_code(EXIT_OK);
    assert!(
        journal_files(&base).len() == 1,
        "the suggestion used another state dir: {:?}",
        journal_files(&base)
    );
}

// ---------------------------------------------------------------------------
// 8. --dry-run for remove and rollback

#[test]
fn remove_and_rollback_dry_runs_print_and_change_nothing() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &[]);
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    let applied = tb.dump();
    let rm = tb.rr(&["remove", "--dry-run"]).expect_code(EXIT_OK);
    let h = tb.host().name();
    let (rule_del, route_del) = (in_netns(h, "ip -4 rule del"), in_netns(h, "ip -4 route del"));
    rm.expect_stdout(&[&rule_del, &route_del, &in_netns(h, "sysctl -w")]);
    let rb = tb.rr(&["rollback", "--dry-run"]).expect_code(EXIT_OK);
    rb.expect_stdout(&[&rule_del, "would undo the apply"]);
    assert_dump_eq(&applied, &tb.dump(), "a dry run changed the host");
    assert_eq!(journal_files(&tb.state_base()).len(), 1, "a dry run touched the journals");
    // The commands printed by remove --dry-run do what remove does.
    let script = rm.stdout();
    let out = tb.host().exec_output("sh", &["-e", "-c", &script]);
    assert!(out.status.success(), "{script}\n{}", describe_output(&out));
    assert!(tb.owned_entries().is_empty());
}

// ---------------------------------------------------------------------------
// 9. Confirm-or-revert

fn start_confirm(tb: &Testbed, cfg: &str, seconds: &str) -> Background {
    let mut cmd = tb.roce_route_in(&tb.state_base(), &["apply", "--confirm", seconds, cfg]);
    cmd.stdin(Stdio::null());
    let bg = Background::spawn(cmd, format!("apply --confirm {seconds}"));
    poll_until("the apply --confirm to make its change", Duration::from_secs(10), || {
        !tb.owned_entries().is_empty() && tb.rr(&["show"]).stdout().contains("waiting for its confirmation")
    });
    bg
}

/// A `confirm` that arrives while the deadline's revert is under way gets
/// the truth ("too late", exit 1); it used to print "confirmed; the waiting
/// apply keeps its change" while the change was being reverted.
#[test]
fn a_confirm_during_the_revert_reports_the_revert() {
    let tb = Testbed::builder().rails(2).build();
    let before = tb.dump();
    let cfg = tb.config_for(2, &[]);
    // Every step (the guard's undo steps too) takes 400 ms.
    let mut cmd = tb.roce_route_in(&tb.state_base(), &["apply", "--confirm", "1", &cfg]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", "400");
    let apply = Background::spawn(cmd, "apply --confirm 1, slow steps");
    // The apply's last step is rail1's arp_announce; the revert undoes the
    // sysctls first, then deletes rules: fewer than the 4 owned entries
    // means the revert is under way, with 3 or more slow steps to go.
    poll_until("the apply to finish its steps", Duration::from_secs(30), || {
        tb.host_sysctl("rail1", "arp_announce") == 2
    });
    poll_until("the revert to start deleting", Duration::from_secs(30), || tb.owned_entries().len() < 4);
    let late = tb.rr(&["confirm"]);
    assert_eq!(late.code(), Some(EXIT_FAILED), "{}", late.report());
    late.expect_stderr(&["too late", "rolled back"]);
    let run = apply.wait_timeout(Duration::from_secs(30));
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    run.expect_stderr(&["not confirmed within 1 s"]);
    assert_dump_eq(&before, &tb.dump(), "an unconfirmed change stayed");
}

/// Issue 27: `--confirm 6` says "within 6 s", the deadline the user gave,
/// however long the change took (old: the seconds left once it was made,
/// here 2 or 3).
#[test]
fn the_confirmation_line_says_the_deadline_given() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &[]);
    // 8 steps of 400 ms: the change takes over 3 s of the 6.
    let mut cmd = tb.roce_route_in(&tb.state_base(), &["apply", "--no-announce", "--confirm", "6", &cfg]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", "400");
    cmd.stdin(Stdio::null());
    let apply = Background::spawn(cmd, "apply --confirm 6, slow steps");
    poll_until("the apply to finish its steps", Duration::from_secs(30), || {
        tb.host_sysctl("rail1", "arp_announce") == 2
    });
    std::thread::sleep(Duration::from_millis(300));
    tb.rr(&["confirm"]).expect_code(EXIT_OK);
    let run = apply.wait_timeout(Duration::from_secs(30));
    assert_eq!(run.code(), Some(EXIT_OK), "{}", run.report());
    run.expect_stderr(&["applied; keeping it only if confirmed within 6 s: run `roce-route"]);
}

/// The waiting apply SIGKILLed: the change is still reverted at the
/// deadline, with no further command.
#[test]
fn a_killed_waiting_apply_is_still_reverted_at_the_deadline() {
    let tb = Testbed::builder().rails(2).build();
    let before = tb.dump();
    let mut apply = start_confirm(&tb, &tb.config_for(2, &[]), "3");
    apply.kill();
    poll_until("the guard to revert the change", Duration::from_secs(15), || tb.owned_entries().is_empty());
    assert_dump_eq(&before, &tb.dump(), "the revert left the host changed");
    let status = tb.rr(&["confirm"]).expect_code(EXIT_FAILED);
    status.expect_stderr(&["no `apply --confirm` is waiting"]);
}

/// During the window check and show answer at once and say that an apply
/// waits; confirm then keeps the change and the waiting apply exits 0.
#[test]
fn check_and_show_answer_during_the_window_and_confirm_keeps_it() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &[]);
    let apply = start_confirm(&tb, &cfg, "30");
    let started = Instant::now();
    let check = tb.rr(&["check", &cfg]).expect_code(EXIT_OK);
    check.expect_stderr(&["waiting for its confirmation"]);
    let show = tb.rr(&["--json", "show"]).expect_code(EXIT_OK);
    let doc = json_doc(&show);
    assert!(doc["notes"][0].as_str().unwrap_or("").contains("waiting for its confirmation"), "{doc:#}");
    assert!(started.elapsed() < Duration::from_secs(5), "check and show took {:?}", started.elapsed());
    let confirmed = tb.rr(&["--json", "confirm"]).expect_code(EXIT_OK);
    assert_eq!(json_doc(&confirmed)["outcome"], "kept");
    let run = apply.wait_timeout(Duration::from_secs(10));
    assert_eq!(run.code(), Some(EXIT_OK), "{}", run.report());
    thread::sleep(Duration::from_millis(200));
    tb.rr(&["check", &cfg]).expect_code(EXIT_OK);
}

// ---------------------------------------------------------------------------
// 10. Rollback history

/// A failed run used to cost the oldest rollback point (pruned first).
#[test]
fn a_failed_run_keeps_every_rollback_point() {
    let tb = Testbed::builder().rails(2).build();
    let (a, b) = (tb.config_for(2, &[]), tb.config_for(2, &["rp_filter = 2"]));
    for k in 0..32 {
        tb.rr(&["apply", if k % 2 == 0 { &a } else { &b }]).expect_code(EXIT_OK);
    }
    let kept = journal_files(&tb.state_base());
    assert_eq!(kept.len(), 32);
    let gateways = tb.config_for(2, &["gateway = \"198.51.100.254\""]);
    tb.apply_failing_mid_run(&gateways, "rail1", 200).expect_code(EXIT_FAILED);
    assert_eq!(journal_files(&tb.state_base()), kept, "the failed run changed the rollback history");
}

/// No journal left but entries owned (set up by the dry-run script):
/// rollback says so and points to remove.
#[test]
fn rollback_with_nothing_left_points_to_remove() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &[]);
    let script = tb.rr(&["apply", "--dry-run", &cfg]).expect_code(EXIT_OK).stdout();
    tb.host().exec("sh", &["-e", "-c", &script]);
    let run = tb.rr(&["rollback"]).expect_code(EXIT_OK);
    run.expect_stdout(&["nothing to roll back", "still owns", "remove"]);
    // remove then names the sysctls it cannot restore.
    let rm = tb.rr(&["remove"]).expect_code(EXIT_OK);
    rm.expect_stderr(&["not restored", "net.ipv4.conf.rail0.arp_ignore=1"]);
    assert!(tb.owned_entries().is_empty());
}

// ---------------------------------------------------------------------------
// 11. Ownership across a protocol change

#[test]
fn entries_under_an_earlier_protocol_stay_roce_routes() {
    let tb = Testbed::builder().rails(2).build();
    tb.rr(&["apply", &tb.config_for(2, &[])]).expect_code(EXIT_OK);
    let moved = format!("[defaults]\nprotocol = 240\n{}", tb.config_toml());
    let run = tb.rr(&["apply", path_str(&tb.write_config(&moved))]).expect_code(EXIT_OK);
    assert!(!run.stderr().contains("not owned"), "{}", run.report());
    assert!(tb.owned_entries().is_empty(), "proto 234 entries left: {:?}", tb.owned_entries());
    assert!(!tb.entries_with_proto(240).is_empty());
    tb.rr(&["remove"]).expect_code(EXIT_OK);
    assert!(tb.entries_with_proto(240).is_empty(), "{:?}", tb.entries_with_proto(240));
}

// ---------------------------------------------------------------------------
// 13. One lock per network namespace

#[test]
fn two_state_dirs_still_take_turns_in_one_namespace() {
    let tb = Testbed::builder().rails(4).build();
    let cfg = tb.config_for(4, &[]);
    let other = tb.dir().join("other-state");
    let first = spawn_with_delay(&tb, &tb.state_base(), &["apply", &cfg], 400);
    poll_until("the first apply to start", Duration::from_secs(10), || {
        !journal_files(&tb.state_base()).is_empty()
    });
    let second = tb.rr_in(&other, &["--lock-timeout", "0", "apply", &cfg]).expect_code(EXIT_FAILED);
    second.expect_stderr(&[
        "another roce-route works in this network namespace",
        &format!("pid {}", first.pid()),
    ]);
    assert!(journal_files(&other).is_empty(), "the second apply made a journal");
    first.wait_timeout(Duration::from_secs(30)).expect_code(EXIT_OK);
}

// ---------------------------------------------------------------------------
// 14. An interrupted run

#[test]
fn check_and_show_report_an_interrupted_run() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &[]);
    let mut cmd = tb.roce_route_in(&tb.state_base(), &["apply", &cfg]);
    cmd.env("ROCE_ROUTE_CRASH_AT", "step:1");
    let crashed = Run::of(cmd);
    assert_eq!(crashed.code(), None, "the crash hook did not kill it:\n{}", crashed.report());
    let check = tb.rr(&["--json", "check", &cfg]).expect_code(EXIT_DRIFT);
    let doc = json_doc(&check);
    let kinds: Vec<&str> =
        doc["differences"].as_array().unwrap().iter().filter_map(|d| d["kind"].as_str()).collect();
    assert!(kinds.contains(&"interrupted_run"), "{doc:#}");
    tb.rr(&["show"]).expect_stdout(&["did not finish", "rollback"]);
}

// ---------------------------------------------------------------------------
// 15. One JSON envelope

#[test]
fn every_command_prints_one_envelope() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &[]);
    for (args, code, changed) in [
        (vec!["apply", &cfg], EXIT_OK, true),
        (vec!["check", &cfg], EXIT_OK, false),
        (vec!["show"], EXIT_OK, false),
        (vec!["remove"], EXIT_OK, true),
        (vec!["rollback"], EXIT_OK, true),
        (vec!["confirm"], EXIT_FAILED, false),
    ] {
        let mut all = vec!["--json"];
        all.extend(&args);
        let run = tb.rr(&all).expect_code(code);
        let doc = json_doc(&run);
        assert_eq!(doc["command"], args[0], "{doc:#}");
        assert_eq!(doc["ok"], code == EXIT_OK, "{doc:#}");
        assert_eq!(doc["changed"], changed, "{args:?}: {doc:#}");
        assert!(doc["warnings"].is_array(), "{doc:#}");
        assert_eq!(doc["error"].is_null(), code == EXIT_OK, "{doc:#}");
    }
}

/// The error document keeps the warnings of the run (it used to drop
/// them): here the conf/all override, then the conflict that stops it.
#[test]
fn the_error_document_keeps_the_warnings_of_the_run() {
    let tb = Testbed::builder().rails(2).build();
    tb.set_host_sysctl("all", "arp_ignore", 2);
    tb.ip_host("rule add priority 500 from 198.51.100.11 lookup main");
    let run = tb.rr(&["--json", "apply", &tb.config_for(2, &[])]).expect_code(EXIT_FAILED);
    let doc = json_doc(&run);
    assert_eq!(doc["changed"], false, "{doc:#}");
    assert_eq!(doc["error"]["kind"], "conflicts", "{doc:#}");
    let warnings = doc["warnings"].as_array().unwrap();
    assert!(warnings.iter().any(|w| w.as_str().unwrap().contains("all.arp_ignore=2 overrides")), "{doc:#}");
}

/// A step that fails mid-run: the error document says nothing changed
/// (rolled back) and names the step.
#[test]
fn a_step_failing_mid_run_is_reported_in_the_error_document() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &["gateway = \"198.51.100.254\""]);
    let before = tb.dump();
    let journals = journal_files(&tb.state_base()).len();
    let mut cmd = tb.rr_cmd(&["--json", "apply", &cfg]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", "200");
    let mut apply = Background::spawn(cmd, "apply --json, rail1 down mid-run");
    poll_until("the journal", Duration::from_secs(10), || {
        journal_files(&tb.state_base()).len() > journals || !apply.is_running()
    });
    tb.ip_host("link set rail1 down");
    let run = apply.wait().expect_code(EXIT_FAILED);
    tb.ip_host("link set rail1 up");
    let doc = json_doc(&run);
    assert_eq!(
        (doc["changed"].clone(), doc["error"]["kind"].clone()),
        (false.into(), "step_failed".into()),
        "{doc:#}"
    );
    assert!(doc["error"]["message"].as_str().unwrap().contains("dev rail1"), "{doc:#}");
    assert_dump_eq(&before, &tb.dump(), "a failed step left the host changed");
}

// ---------------------------------------------------------------------------
// 16. Hints that fix

/// conf/all/arp_ignore=2 overrides: the hint says how to accept it in the
/// config, and taking it makes check pass.
#[test]
fn the_override_hint_fixes_the_check() {
    let tb = Testbed::builder().rails(1).ipv6(false).build();
    tb.set_host_sysctl("all", "arp_ignore", 2);
    let cfg = tb.config_for(1, &[]);
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    let check = tb.rr(&["check", &cfg]).expect_code(EXIT_DRIFT);
    check.expect_stdout(&["set `arp_ignore = 2` for interface \"rail0\""]);
    assert!(!check.stdout().contains("sysctl -w net.ipv4.conf.all"), "{}", check.report());
    let accepted = tb.config_for(1, &["arp_ignore = 2"]);
    tb.rr(&["apply", &accepted]).expect_code(EXIT_OK);
    let ok = tb.rr(&["check", &accepted]).expect_code(EXIT_OK);
    ok.expect_stdout(&["(1 lookup)"]);
}

// ---------------------------------------------------------------------------
// 17. Host changes and missing rights

/// check without root says what it could not read.
#[test]
fn check_without_root_says_what_it_could_not_read() {
    let tb = Testbed::builder().rails(1).build();
    let cfg = tb.config_for(1, &[]);
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    fs::set_permissions(tb.dir(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    fs::set_permissions(&cfg, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"])
        .arg(env!("CARGO_BIN_EXE_roce-route"))
        .args(["check", &cfg])
        .env("ROCE_ROUTE_STATE_DIR", tb.state_base())
        .current_dir("/");
    // The namespace is entered by `ip netns exec`, as root, before dropping rights.
    let mut outer = Command::new("ip");
    outer.args(["netns", "exec", tb.host_ns()]).arg(cmd.get_program()).args(cmd.get_args());
    outer.env("ROCE_ROUTE_STATE_DIR", tb.state_base()).current_dir("/");
    let run = Run::of(outer).expect_code(EXIT_OK);
    run.expect_stderr(&["not run as root", "not checked"]);
}

// ---------------------------------------------------------------------------
// 3 and 6. Probes apply can satisfy; point-to-point and onlink, end to end

/// Two subnets on every rail, with a gateway: the off-subnet probe used to
/// fall inside the second subnet (exit 3 forever, with "run apply").
#[test]
fn two_subnets_on_one_rail_check_in_sync() {
    let tb = Testbed::builder().rails(2).build();
    for (k, r) in tb.rails().iter().enumerate() {
        tb.ip_host(&format!("addr add 203.0.113.{}/24 dev {}", 10 + k, r.name));
    }
    let text: String = tb
        .rails()
        .iter()
        .enumerate()
        .map(|(k, r)| {
            format!(
                "[[interface]]\nname = \"{}\"\naddresses = [\"{}\", \"203.0.113.{}/24\"]\ngateway = \"{GATEWAY_V4}\"\n",
                r.name,
                r.v4_cidr(),
                10 + k
            )
        })
        .collect();
    let cfg = tb.write_config(&text);
    tb.rr(&["apply", path_str(&cfg)]).expect_code(EXIT_OK);
    let check = tb.rr(&["check", path_str(&cfg)]).expect_code(EXIT_OK);
    check.expect_stdout(&["in sync", "lookups"]);
    // The off-subnet probe really leaves by the gateway of its own rail.
    let got = tb.route_get("198.18.0.1", "203.0.113.11");
    assert!(got.contains(&format!("via {GATEWAY_V4} dev rail1")) && got.contains("table 101"), "{got}");
}

/// `198.51.100.1 peer 198.51.100.0/32` with the peer as gateway, and a bare
/// /32 with a gateway reached onlink: apply takes both, check is in sync,
/// the kernel routes by them, and rollback restores the host.
#[test]
fn point_to_point_and_onlink_gateways_apply_check_and_roll_back() {
    let ns = point_to_point_host(format!("rr-ft-p2p-{}", std::process::id()));
    let dir = TempDir::create("ft-p2p");
    let cfg = dir.path().join("p2p.toml");
    fs::write(
        &cfg,
        "[[interface]]\nname = \"rail0\"\ngateway = [\"198.51.100.0\", \"2001:db8::2\"]\n\n\
         [[interface]]\nname = \"rail1\"\naddresses = [\"198.51.100.7/32\"]\n\
         gateway = { address = \"203.0.113.1\", onlink = true }\n",
    )
    .unwrap();
    let rr = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_roce-route"));
        cmd.arg("--netns").arg(ns.name()).args(args).env("ROCE_ROUTE_STATE_DIR", dir.path().join("state"));
        cmd.stdin(Stdio::null());
        Run::of(cmd)
    };
    // Without the local table: link-local addresses come and go with DAD.
    let dump = || {
        ["-4 rule", "-6 rule", "route show table all", "-6 route show table all"]
            .iter()
            .flat_map(|a| ns.ip(a).lines().map(str::to_string).collect::<Vec<_>>())
            .filter(|l| !l.contains("table local"))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    };
    let before = dump();
    rr(&["apply", path_str(&cfg)]).expect_code(EXIT_OK);
    rr(&["apply", path_str(&cfg)]).expect_code(EXIT_OK).expect_stdout(&["in sync"]);
    rr(&["check", path_str(&cfg)])
        .expect_code(EXIT_OK)
        .expect_stderr(&["not verified: traffic from 198.51.100.7"]);
    let via_peer = ns.ip("route get 198.18.0.1 from 198.51.100.1");
    assert!(via_peer.contains("via 198.51.100.0 dev rail0 table 100"), "{via_peer}");
    let onlink = ns.ip("route get 198.18.0.1 from 198.51.100.7");
    assert!(onlink.contains("via 203.0.113.1 dev rail1 table 101"), "{onlink}");
    assert!(ns.ip("route show table 101").contains("onlink"), "{}", ns.ip("route show table 101"));
    rr(&["rollback"]).expect_code(EXIT_OK);
    assert_dump_eq(&before, &dump(), "rollback of the point-to-point and onlink setup");
}
