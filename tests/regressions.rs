//! Real-kernel regression tests for defects a review found: each test is
//! the scenario that used to go wrong, and fails on the old behaviour.

mod common;

use std::time::Duration;

use common::*;

/// A route dumped while its link has no carrier carries RTNH_F_LINKDOWN,
/// which IPv4 refuses when the dump is sent back: rollback used to fail
/// (exit 4) and wedge the journal stack.
#[test]
fn rollback_restores_routes_of_a_link_without_carrier() {
    let tb = Testbed::builder().rails(2).build();
    let both = tb.config_for(2, &[]);
    tb.rr(&["apply", &both]).expect_code(EXIT_OK);
    tb.ip_peer("link set p1 down");
    poll_until("rail1 to lose its carrier", Duration::from_secs(5), || {
        tb.ip_host("-4 route show table 101").contains("linkdown")
    });
    let before = tb.dump();
    let one = tb.config_for(1, &[]);
    tb.rr(&["apply", &one]).expect_code(EXIT_OK);
    assert!(!tb.ip_host("-4 route show table 101").contains("proto 234"), "rail1's routes were not removed");
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
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
    let cfg = tb.config_for(3, &[]);
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    tb.ip_host("link del rail2");
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    assert!(tb.owned_entries().is_empty(), "left behind: {:?}", tb.owned_entries());
    assert_eq!(tables(&tb), fresh, "rules and routes of the other rails not restored");
    for k in 0..2 {
        for key in ["arp_ignore", "arp_announce"] {
            let rail = tb.rail(k).name.clone();
            assert_eq!(tb.host_sysctl(&rail, key), 0, "{rail} {key} not restored");
        }
    }
    tb.rr(&["rollback"]).expect_code(EXIT_OK).expect_stdout(&["nothing to roll back"]);
}

/// Dropping an interface from the config puts its sysctls back once; a
/// later change by the admin is then theirs, not re-forced on every apply.
#[test]
fn a_dropped_interface_is_not_forced_again() {
    let tb = Testbed::builder().rails(2).ipv6(false).build();
    tb.rr(&["apply", &tb.config_for(2, &[])]).expect_code(EXIT_OK);
    let one = tb.config_for(1, &[]);
    tb.rr(&["apply", &one]).expect_code(EXIT_OK);
    assert_eq!(tb.host_sysctl("rail1", "arp_ignore"), 0, "dropped rail1 not restored");
    tb.set_host_sysctl("rail1", "arp_ignore", 2);
    tb.rr(&["apply", &one]).expect_code(EXIT_OK).expect_stdout(&["in sync"]);
    assert_eq!(tb.host_sysctl("rail1", "arp_ignore"), 2, "the admin's value was overridden");
    tb.check_only_arp_flux(&one, &["rail1"]);
}

/// A run killed right after its rule deletes leaves owned routes in a table
/// no owned rule points to: the next apply must still find and remove them.
#[test]
fn routes_left_by_a_killed_run_are_removed_by_the_next() {
    let tb = Testbed::builder().rails(2).build();
    tb.rr(&["apply", &tb.config_for(2, &[])]).expect_code(EXIT_OK);
    let one = tb.config_for(1, &[]);
    let steps =
        tb.rr(&["apply", "--dry-run", &one]).stdout().lines().filter(|l| l.contains(" rule del ")).count();
    assert!(steps > 0, "the change deletes no rule");
    let mut killed = tb.rr_cmd(&["apply", &one]);
    killed.env("ROCE_ROUTE_CRASH_AT", format!("step:{}", steps - 1));
    let run = Run::of(killed);
    assert_eq!(run.code(), None, "the apply was not killed:\n{}", run.report());
    assert!(tb.ip_host("-4 route show table 101").contains("proto 234"), "nothing left to find");
    tb.rr(&["apply", &one]).expect_code(EXIT_OK);
    for family in ["-4", "-6"] {
        // IPv6 answers "FIB table does not exist" once the table is empty.
        let left = tb.try_ip_host(&format!("{family} route show table 101")).unwrap_or_default();
        assert!(!left.contains("proto 234"), "stale routes survived: {left}");
    }
    tb.check_only_arp_flux(&one, &["rail1"]);
}

/// A sysctl's original value survives the pruning of the journal that
/// recorded it: `remove` still puts it back.
#[test]
fn remove_restores_an_original_value_recorded_by_a_pruned_journal() {
    let tb = Testbed::builder().rails(1).ipv6(false).build();
    let cfg = tb.config_for(1, &[&format!("gateway = {}", toml_str(GATEWAY_V4))]);
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    for _ in 0..33 {
        tb.ip_host("route del default table 100");
        tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    }
    let two = tb.config_for(1, &[&format!("gateway = {}", toml_str(GATEWAY_V4)), "arp_ignore = 2"]);
    tb.rr(&["apply", &two]).expect_code(EXIT_OK);
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    assert_eq!(tb.host_sysctl("rail0", "arp_ignore"), 1);
    tb.rr(&["remove"]).expect_code(EXIT_OK);
    assert_eq!(tb.host_sysctl("rail0", "arp_ignore"), 0, "the original value was lost");
}

/// `confirm` of an `apply --confirm` whose waiting process was killed:
/// the guard, not the killed process, owns the change, so the
/// confirmation is real (it used to be unanswerable: "no longer running").
#[test]
fn confirm_of_a_killed_waiting_apply_is_answered_by_its_guard() {
    let tb = Testbed::builder().rails(1).ipv6(false).build();
    let cfg = tb.config_for(1, &[]);
    let waiting = tb.rr_cmd(&["apply", "--confirm", "30", &cfg]);
    let mut bg = Background::spawn(waiting, "apply --confirm 30");
    let pending = tb.state_base();
    poll_until("the apply to wait for confirmation", Duration::from_secs(10), || {
        confirmation_pending(&pending)
    });
    bg.kill();
    tb.rr(&["confirm"]).expect_code(EXIT_OK).expect_stdout(&["confirmed"]);
    tb.rr(&["check", &cfg]).expect_code(EXIT_OK);
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    assert!(tb.owned_entries().is_empty(), "left behind: {:?}", tb.owned_entries());
}

/// Interface names may hold characters the shell acts on: the dry-run
/// script quotes them and still reproduces apply's state exactly.
#[test]
fn dry_run_quotes_names_the_shell_would_act_on() {
    let a = Testbed::builder().rail_names(&["r;a$b", "rail1"]).ipv6(false).build();
    let b = Testbed::builder().rail_names(&["r;a$b", "rail1"]).ipv6(false).build();
    let script = a.rr(&["apply", "--dry-run", &a.config_for(2, &[])]).expect_code(EXIT_OK).stdout();
    assert!(script.contains("dev 'r;a$b'"), "{script}");
    let path = a.dir().join("script.sh");
    std::fs::write(&path, &script).unwrap();
    a.host().exec("sh", &["-e", &path.to_string_lossy()]);
    b.rr(&["apply", &b.config_for(2, &[])]).expect_code(EXIT_OK);
    // Link-local addresses come from random MACs: not part of the comparison.
    let comparable = |tb: &Testbed| -> String {
        tb.dump().lines().filter(|l| !l.contains("fe80:")).map(|l| format!("{l}\n")).collect()
    };
    assert_dump_eq(&comparable(&b), &comparable(&a), "the quoted script and apply");
}

/// `rollback` undoes a `remove`: the remove keeps its own journal.
#[test]
fn rollback_undoes_a_remove() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &[&format!("gateway = {}", toml_str(GATEWAY_V4))]);
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    let applied = tb.dump();
    tb.rr(&["remove"]).expect_code(EXIT_OK);
    assert!(tb.owned_entries().is_empty(), "remove left: {:?}", tb.owned_entries());
    tb.rr(&["rollback"]).expect_code(EXIT_OK).expect_stdout(&["rolled back the remove"]);
    assert_dump_eq(&applied, &tb.dump(), "rollback of a remove");
    tb.rr(&["check", &cfg]).expect_code(EXIT_OK);
}

/// An address the config names that is gone from the host (IPv6 addresses
/// are flushed when a link goes down) is drift: exit 3, not "bad config".
#[test]
fn check_reports_a_vanished_address_as_drift() {
    let tb = Testbed::builder().rails(2).ipv6(true).build();
    let cfg = tb.config_for(2, &[]);
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    let v6 = tb.rail(1).v6_cidr().expect("an IPv6 testbed");
    tb.ip_host(&format!("addr del {v6} dev rail1"));
    let run = tb.rr(&["check", "--json", &cfg]);
    let run = run.expect_code(EXIT_DRIFT);
    let doc = json_doc(&run);
    assert_eq!(doc["in_sync"], false, "{doc}");
    assert_eq!(doc["differences"][0]["kind"], "not_ready", "{doc}");
    assert!(doc["differences"][0]["description"].as_str().unwrap().contains("rail1"), "{doc}");
}

/// Owned routes in a table that neither an owned rule nor the newest
/// journal names (a rule deleted by hand, an unrelated run since) are still
/// found and removed when their interface leaves the config.
#[test]
fn stale_routes_of_a_table_without_rule_are_removed() {
    let tb = Testbed::builder().rails(3).ipv6(false).build();
    let cfg = tb.config_for(3, &[&format!("gateway = {}", toml_str(GATEWAY_V4))]);
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    tb.ip_host("route del default table 100");
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    tb.ip_host(&format!("rule del from {} lookup 102", tb.rail(2).v4));
    let two = tb.config_for(2, &[&format!("gateway = {}", toml_str(GATEWAY_V4))]);
    tb.rr(&["apply", &two]).expect_code(EXIT_OK);
    let left = tb.try_ip_host("-4 route show table 102").unwrap_or_default();
    assert!(!left.contains("proto 234"), "stale routes survived: {left}");
    tb.check_only_arp_flux(&two, &["rail2"]);
}

/// On a terminal, Enter confirms a waiting `apply --confirm` (the change
/// stays, exit 0). `script` gives the apply a pseudo-terminal.
#[test]
fn enter_on_a_terminal_confirms() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let tb = Testbed::builder().rails(1).ipv6(false).build();
    let cfg = tb.config_for(1, &[]);
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
        confirmation_pending(&tb.state_base())
    });
    assert!(!tb.owned_entries().is_empty(), "nothing applied while waiting");
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
    assert!(!tb.owned_entries().is_empty(), "the confirmed change was rolled back");
    assert!(!common::guard_armed(&tb.state_base()), "pending left behind");
}
