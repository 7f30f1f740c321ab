//! Tables that stay put (issue 8, section 2), on the real kernel: an
//! interface keeps its table across config edits, a new one takes the
//! lowest free table that no foreign entry uses, and an edit never touches
//! the entries of interfaces whose own settings did not change.

mod common;

use std::thread;
use std::time::Duration;

use common::*;

/// Every rail but the dropped ones, with their standard settings.
fn config_without(tb: &Testbed, dropped: &[&str]) -> String {
    let text = tb.render_config_for(|r| !dropped.contains(&r.name.as_str()), |_| vec![]);
    // No explicit tables: roce-route gives them.
    let text: String =
        text.lines().filter(|l| !l.starts_with("table = ")).map(|l| format!("{l}\n")).collect();
    tb.write_config(&text).to_string_lossy().into_owned()
}

/// rail1 dropped from rail0..3 while traffic from rail2 and rail3 is
/// sampled with `ip route get`: it never leaves by another port, and the
/// apply changes nothing of rail0, rail2 or rail3. (Numbered by position,
/// rail2 and rail3 used to move to tables 101 and 102, their traffic
/// crossing the other rails' tables half-way.)
#[test]
fn dropping_a_middle_rail_never_moves_the_others() {
    let tb = Testbed::builder().rails(4).build();
    tb.rr(&["apply", &config_without(&tb, &[])]).expect_code(EXIT_OK);
    let tables_before = tb.ip_host("-4 rule");
    for (rail, table) in [("198.51.100.12", 102), ("198.51.100.13", 103)] {
        assert!(tables_before.contains(&format!("from {rail} lookup {table}")), "{tables_before}");
    }
    let dropped = config_without(&tb, &["rail1"]);
    let mut cmd = tb.roce_route_in(&tb.state_base(), &["apply", &dropped]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", "100");
    let mut apply = Background::spawn(cmd, "apply without rail1, 100 ms steps");
    let mut samples = 0;
    while apply.is_running() {
        for (k, ip) in [(2, "198.51.100.12"), (3, "198.51.100.13")] {
            let got = tb.route_get(PEER_V4, ip);
            assert!(
                got.contains(&format!("dev rail{k} ")),
                "traffic from {ip} left by another port mid-apply: {got}"
            );
        }
        samples += 1;
        thread::sleep(Duration::from_millis(10));
    }
    let run = apply.wait();
    assert_eq!(run.code(), Some(EXIT_OK), "{}", run.report());
    assert!(samples > 5, "too few samples ({samples}) during the apply");
    let changed = run.stdout();
    for untouched in ["rail0", "rail2", "rail3", "lookup 100", "lookup 102", "lookup 103", "table 10"] {
        let hits: Vec<&str> =
            changed.lines().filter(|l| l.contains(untouched) && !l.contains("rail1")).collect();
        assert!(
            hits.is_empty(),
            "the apply touched `{untouched}` although only rail1 was dropped: {hits:?}\n{changed}"
        );
    }
    let rules = tb.ip_host("-4 rule");
    assert!(
        rules.contains("from 198.51.100.12 lookup 102") && rules.contains("from 198.51.100.13 lookup 103"),
        "{rules}"
    );
    // Re-adding rail1 gives it back a table without moving anyone.
    let run = tb.rr(&["apply", &config_without(&tb, &[])]).expect_code(EXIT_OK);
    assert!(!run.stdout().contains("rail2") && !run.stdout().contains("rail3"), "{}", run.report());
    tb.rr(&["check", &config_without(&tb, &[])]).expect_code(EXIT_OK);
}

/// A new rail takes the lowest free table: 103 holds a foreign route, so
/// rail3 gets 104 and the foreign table is left alone (no conflict).
#[test]
fn a_new_rail_skips_a_table_with_foreign_routes() {
    let tb = Testbed::builder().rails(4).build();
    tb.rr(&["apply", &config_without(&tb, &["rail3"])]).expect_code(EXIT_OK);
    tb.ip_host("route add 203.0.113.0/24 dev rail0 table 103");
    let foreign = tb.ip_host("route show table 103");
    tb.rr(&["apply", &config_without(&tb, &[])]).expect_code(EXIT_OK);
    let rules = tb.ip_host("-4 rule");
    assert!(rules.contains("from 198.51.100.13 lookup 104"), "{rules}");
    assert_eq!(tb.ip_host("route show table 103"), foreign, "the foreign table was touched");
    assert!(tb.ip_host("route show table 104").contains("dev rail3"));
    tb.rr(&["check", &config_without(&tb, &[])]).expect_code(EXIT_OK);
}

/// A hand-made setup of the classic guide (rail0's routes and rule in
/// table 100, not roce-route's) is still adopted in place, not moved.
#[test]
fn a_hand_made_table_of_the_same_rail_is_adopted_in_place() {
    let tb = Testbed::builder().rails(2).build();
    tb.ip_host("route add 198.51.100.0/24 dev rail0 src 198.51.100.10 table 100");
    tb.ip_host("rule add from 198.51.100.10 lookup 100");
    let cfg = config_without(&tb, &[]);
    tb.rr(&["apply", &cfg]).expect_code(EXIT_FAILED).expect_stderr(&["not owned by roce-route"]);
    tb.rr(&["apply", "--adopt", &cfg]).expect_code(EXIT_OK);
    let rules = tb.ip_host("-4 rule");
    assert!(rules.contains("from 198.51.100.10 lookup 100 proto 234"), "{rules}");
    assert!(rules.contains("from 198.51.100.11 lookup 101 proto 234"), "{rules}");
}
