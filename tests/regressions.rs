//! Real-kernel regression tests for defects a review found: each test is
//! the scenario that used to go wrong, and fails on the old behaviour.

mod common;

use std::time::Duration;

use common::*;

/// `roce-route --netns <host> ARGS`, run to completion.
fn rr(tb: &Testbed, args: &[&str]) -> Run {
    let mut cmd = tb.roce_route_command();
    cmd.args(args);
    Run::of(cmd)
}

fn config_for(tb: &Testbed, rails: usize, extra: &[&str]) -> String {
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let text = tb.render_config_for(|r| r.table < FIRST_TABLE + rails as u32, |_| extra.clone());
    tb.write_config(&text).to_string_lossy().into_owned()
}

fn owned_entries(tb: &Testbed) -> Vec<String> {
    let mut lines = Vec::new();
    for cmd in ["-4 rule", "-6 rule", "-4 route show table all", "-6 route show table all"] {
        lines.extend(tb.ip_host(cmd).lines().filter(|l| l.contains("proto 234")).map(str::to_string));
    }
    lines
}

/// A route dumped while its link has no carrier carries RTNH_F_LINKDOWN,
/// which IPv4 refuses when the dump is sent back: rollback used to fail
/// (exit 4) and wedge the journal stack.
#[test]
fn rollback_restores_routes_of_a_link_without_carrier() {
    let tb = Testbed::builder().rails(2).build();
    let both = config_for(&tb, 2, &[]);
    rr(&tb, &["apply", &both]).expect_code(EXIT_OK);
    tb.ip_peer("link set p1 down");
    poll_until("rail1 to lose its carrier", Duration::from_secs(5), || {
        tb.ip_host("-4 route show table 101").contains("linkdown")
    });
    let before = tb.dump();
    let one = config_for(&tb, 1, &[]);
    rr(&tb, &["apply", &one]).expect_code(EXIT_OK);
    assert!(!tb.ip_host("-4 route show table 101").contains("proto 234"), "rail1's routes were not removed");
    rr(&tb, &["rollback"]).expect_code(EXIT_OK);
    assert_dump_eq(&before, &tb.dump(), "rollback of routes saved without carrier");
}

/// An interface that went away takes its routes and sysctls with it: the
/// undo of steps on it counts as done instead of failing forever.
#[test]
fn rollback_after_an_interface_is_deleted() {
    let tb = Testbed::builder().rails(3).build();
    let tables = |tb: &Testbed| -> Vec<String> {
        let mut lines = Vec::new();
        for cmd in ["-4 rule", "-6 rule", "-4 route show table all", "-6 route show table all"] {
            lines.extend(canonical_lines(&tb.ip_host(cmd)).into_iter().filter(|l| !l.contains("rail2")));
        }
        lines
    };
    let fresh = tables(&tb);
    let cfg = config_for(&tb, 3, &[]);
    rr(&tb, &["apply", &cfg]).expect_code(EXIT_OK);
    tb.ip_host("link del rail2");
    rr(&tb, &["rollback"]).expect_code(EXIT_OK);
    assert!(owned_entries(&tb).is_empty(), "left behind: {:?}", owned_entries(&tb));
    assert_eq!(tables(&tb), fresh, "rules and routes of the other rails not restored");
    for k in 0..2 {
        for key in ["arp_ignore", "arp_announce"] {
            let rail = tb.rail(k).name.clone();
            assert_eq!(tb.host_sysctl(&rail, key), 0, "{rail} {key} not restored");
        }
    }
    rr(&tb, &["rollback"]).expect_code(EXIT_OK).expect_stdout(&["nothing to roll back"]);
}

/// Dropping an interface from the config puts its sysctls back once; a
/// later change by the admin is then theirs, not re-forced on every apply.
#[test]
fn a_dropped_interface_is_not_forced_again() {
    let tb = Testbed::builder().rails(2).ipv6(false).build();
    rr(&tb, &["apply", &config_for(&tb, 2, &[])]).expect_code(EXIT_OK);
    let one = config_for(&tb, 1, &[]);
    rr(&tb, &["apply", &one]).expect_code(EXIT_OK);
    assert_eq!(tb.host_sysctl("rail1", "arp_ignore"), 0, "dropped rail1 not restored");
    tb.set_host_sysctl("rail1", "arp_ignore", 2);
    rr(&tb, &["apply", &one]).expect_code(EXIT_OK).expect_stdout(&["in sync"]);
    assert_eq!(tb.host_sysctl("rail1", "arp_ignore"), 2, "the admin's value was overridden");
    rr(&tb, &["check", &one]).expect_code(EXIT_OK);
}

/// A run killed right after its rule deletes leaves owned routes in a table
/// no owned rule points to: the next apply must still find and remove them.
#[test]
fn routes_left_by_a_killed_run_are_removed_by_the_next() {
    let tb = Testbed::builder().rails(2).build();
    rr(&tb, &["apply", &config_for(&tb, 2, &[])]).expect_code(EXIT_OK);
    let one = config_for(&tb, 1, &[]);
    let steps =
        rr(&tb, &["apply", "--dry-run", &one]).stdout().lines().filter(|l| l.contains(" rule del ")).count();
    assert!(steps > 0, "the change deletes no rule");
    let mut killed = tb.roce_route_command();
    killed.args(["apply", &one]).env("ROCE_ROUTE_CRASH_AT", format!("step:{}", steps - 1));
    let run = Run::of(killed);
    assert_eq!(run.code(), None, "the apply was not killed:\n{}", run.report());
    assert!(tb.ip_host("-4 route show table 101").contains("proto 234"), "nothing left to find");
    rr(&tb, &["apply", &one]).expect_code(EXIT_OK);
    for family in ["-4", "-6"] {
        // IPv6 answers "FIB table does not exist" once the table is empty.
        let left = tb.try_ip_host(&format!("{family} route show table 101")).unwrap_or_default();
        assert!(!left.contains("proto 234"), "stale routes survived: {left}");
    }
    rr(&tb, &["check", &one]).expect_code(EXIT_OK);
}

/// A sysctl's original value survives the pruning of the journal that
/// recorded it: `remove` still puts it back.
#[test]
fn remove_restores_an_original_value_recorded_by_a_pruned_journal() {
    let tb = Testbed::builder().rails(1).ipv6(false).build();
    let cfg = config_for(&tb, 1, &[&format!("gateway = \"{GATEWAY_V4}\"")]);
    rr(&tb, &["apply", &cfg]).expect_code(EXIT_OK);
    for _ in 0..33 {
        tb.ip_host("route del default table 100");
        rr(&tb, &["apply", &cfg]).expect_code(EXIT_OK);
    }
    let two = config_for(&tb, 1, &[&format!("gateway = \"{GATEWAY_V4}\""), "arp_ignore = 2"]);
    rr(&tb, &["apply", &two]).expect_code(EXIT_OK);
    rr(&tb, &["rollback"]).expect_code(EXIT_OK);
    assert_eq!(tb.host_sysctl("rail0", "arp_ignore"), 1);
    rr(&tb, &["remove"]).expect_code(EXIT_OK);
    assert_eq!(tb.host_sysctl("rail0", "arp_ignore"), 0, "the original value was lost");
}

/// `confirm` of an `apply --confirm` whose waiting process was killed:
/// the guard, not the killed process, owns the change, so the
/// confirmation is real (it used to be unanswerable: "no longer running").
#[test]
fn confirm_of_a_killed_waiting_apply_is_answered_by_its_guard() {
    let tb = Testbed::builder().rails(1).ipv6(false).build();
    let cfg = config_for(&tb, 1, &[]);
    let mut waiting = tb.roce_route_command();
    waiting.args(["apply", "--confirm", "30", &cfg]).stdin(std::process::Stdio::null());
    let mut bg = Background::spawn(waiting, "apply --confirm 30");
    let pending = tb.state_base();
    poll_until("the apply to wait for confirmation", Duration::from_secs(10), || {
        walk(&pending).iter().any(|p| p.ends_with("pending"))
    });
    bg.kill();
    rr(&tb, &["confirm"]).expect_code(EXIT_OK).expect_stdout(&["confirmed"]);
    rr(&tb, &["check", &cfg]).expect_code(EXIT_OK);
    rr(&tb, &["rollback"]).expect_code(EXIT_OK);
    assert!(owned_entries(&tb).is_empty(), "left behind: {:?}", owned_entries(&tb));
}

/// Interface names may hold characters the shell acts on: the dry-run
/// script quotes them and still reproduces apply's state exactly.
#[test]
fn dry_run_quotes_names_the_shell_would_act_on() {
    let a = Testbed::builder().rail_names(&["r;a$b", "rail1"]).ipv6(false).build();
    let b = Testbed::builder().rail_names(&["r;a$b", "rail1"]).ipv6(false).build();
    let script = rr(&a, &["apply", "--dry-run", &config_for(&a, 2, &[])]).expect_code(EXIT_OK).stdout();
    assert!(script.contains("dev 'r;a$b'"), "{script}");
    let path = a.dir().join("script.sh");
    std::fs::write(&path, &script).unwrap();
    a.host().exec("sh", &["-e", &path.to_string_lossy()]);
    rr(&b, &["apply", &config_for(&b, 2, &[])]).expect_code(EXIT_OK);
    // Link-local addresses come from random MACs: not part of the comparison.
    let comparable = |tb: &Testbed| -> String {
        tb.dump().lines().filter(|l| !l.contains("fe80:")).map(|l| format!("{l}\n")).collect()
    };
    assert_dump_eq(&comparable(&b), &comparable(&a), "the quoted script and apply");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// `rollback` undoes a `remove`: the remove keeps its own journal.
#[test]
fn rollback_undoes_a_remove() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = config_for(&tb, 2, &[&format!("gateway = \"{GATEWAY_V4}\"")]);
    rr(&tb, &["apply", &cfg]).expect_code(EXIT_OK);
    let applied = tb.dump();
    rr(&tb, &["remove"]).expect_code(EXIT_OK);
    assert!(owned_entries(&tb).is_empty(), "remove left: {:?}", owned_entries(&tb));
    rr(&tb, &["rollback"]).expect_code(EXIT_OK).expect_stdout(&["rolled back the remove"]);
    assert_dump_eq(&applied, &tb.dump(), "rollback of a remove");
    rr(&tb, &["check", &cfg]).expect_code(EXIT_OK);
}

/// An address the config names that is gone from the host (IPv6 addresses
/// are flushed when a link goes down) is drift: exit 3, not "bad config".
#[test]
fn check_reports_a_vanished_address_as_drift() {
    let tb = Testbed::builder().rails(2).ipv6(true).build();
    let cfg = config_for(&tb, 2, &[]);
    rr(&tb, &["apply", &cfg]).expect_code(EXIT_OK);
    let v6 = tb.rail(1).v6_cidr().expect("an IPv6 testbed");
    tb.ip_host(&format!("addr del {v6} dev rail1"));
    let run = rr(&tb, &["check", "--json", &cfg]);
    let run = run.expect_code(EXIT_DRIFT);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout()).expect("a JSON report");
    assert_eq!(doc["in_sync"], false, "{doc}");
    assert_eq!(doc["differences"][0]["kind"], "host_mismatch", "{doc}");
    assert!(doc["differences"][0]["description"].as_str().unwrap().contains("rail1"), "{doc}");
}

/// Owned routes in a table that neither an owned rule nor the newest
/// journal names (a rule deleted by hand, an unrelated run since) are still
/// found and removed when their interface leaves the config.
#[test]
fn stale_routes_of_a_table_without_rule_are_removed() {
    let tb = Testbed::builder().rails(3).ipv6(false).build();
    let cfg = config_for(&tb, 3, &[&format!("gateway = \"{GATEWAY_V4}\"")]);
    rr(&tb, &["apply", &cfg]).expect_code(EXIT_OK);
    tb.ip_host("route del default table 100");
    rr(&tb, &["apply", &cfg]).expect_code(EXIT_OK);
    tb.ip_host(&format!("rule del from {} lookup 102", tb.rail(2).v4));
    let two = config_for(&tb, 2, &[&format!("gateway = \"{GATEWAY_V4}\"")]);
    rr(&tb, &["apply", &two]).expect_code(EXIT_OK);
    let left = tb.try_ip_host("-4 route show table 102").unwrap_or_default();
    assert!(!left.contains("proto 234"), "stale routes survived: {left}");
    rr(&tb, &["check", &two]).expect_code(EXIT_OK);
}

/// On a terminal, Enter confirms a waiting `apply --confirm` (the change
/// stays, exit 0). `script` gives the apply a pseudo-terminal.
#[test]
fn enter_on_a_terminal_confirms() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let tb = Testbed::builder().rails(1).ipv6(false).build();
    let cfg = config_for(&tb, 1, &[]);
    let line =
        format!("{} --netns {} apply --confirm 20 {cfg}", env!("CARGO_BIN_EXE_roce-route"), tb.host_ns());
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("ROCE_ROUTE_STATE_DIR", tb.state_base())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (bsdutils) runs");
    poll_until("the apply to wait for Enter", Duration::from_secs(10), || {
        walk(&tb.state_base()).iter().any(|p| p.ends_with("pending"))
    });
    assert!(!owned_entries(&tb).is_empty(), "nothing applied while waiting");
    child.stdin.as_mut().unwrap().write_all(b"\n").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("Enter did not end the wait");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    assert!(status.success(), "exit {status}\n{}", String::from_utf8_lossy(&out.stdout));
    assert!(!owned_entries(&tb).is_empty(), "the confirmed change was rolled back");
    assert!(!walk(&tb.state_base()).iter().any(|p| p.ends_with("pending")), "pending left behind");
}
