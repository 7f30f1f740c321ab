//! `check --format prometheus` on the real kernel (a private testbed): the
//! families for one check, in sync and drifted, as promtool accepts them.
//! (`watch --metrics` is in tests/watch.rs, with the other watch tests.)

mod common;

use common::*;

fn check_prometheus(tb: &Testbed, cfg: &std::path::Path, code: i32) -> String {
    let text = tb.rr(&["check", "--format", "prometheus", path_str(cfg)]).expect_code(code).stdout();
    let (ok, said) = promtool(&text);
    assert!(ok && said.trim().is_empty(), "promtool says:\n{said}\non:\n{text}");
    text
}

#[test]
fn check_prints_the_families_in_sync_and_drifted() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.standard_config();
    tb.apply_ok(&cfg);
    let text = check_prometheus(&tb, &cfg, EXIT_OK);
    assert!(text.contains("\nroce_route_in_sync 1\n"), "{text}");
    assert!(text.contains("\nroce_route_rail_in_sync{rail=\"rail1\"} 1\n"), "{text}");
    assert!(text.contains("\nroce_route_rails_not_ready 0\n"), "{text}");
    assert!(text.contains("\nroce_route_drift{kind=\"missing_rule\"} 0\n"), "{text}");
    assert!(!text.contains("roce-route check:"), "no words among the metrics: {text}");

    let r = tb.rail(1);
    tb.ip_host(&format!("-4 rule del from {} lookup {}", r.v4, r.table));
    let text = check_prometheus(&tb, &cfg, EXIT_DRIFT);
    assert!(text.contains("\nroce_route_in_sync 0\n"), "{text}");
    assert!(text.contains("\nroce_route_drift{kind=\"missing_rule\"} 1\n"), "{text}");
    assert!(text.contains("\nroce_route_drift_found_total{kind=\"missing_rule\"} 1\n"), "{text}");
    assert!(text.contains("\nroce_route_rail_in_sync{rail=\"rail1\"} 0\n"), "{text}");
    assert!(text.contains("\nroce_route_rail_in_sync{rail=\"rail0\"} 1\n"), "{text}");

    // The default and --json are as they were.
    tb.rr(&["check", path_str(&cfg)])
        .expect_code(EXIT_DRIFT)
        .expect_stdout(&["roce-route check: 2 differences", "rule missing"]);
    let json = tb
        .rr(&["--json", "check", "--format", "prometheus", path_str(&cfg)])
        .expect_code(EXIT_DRIFT)
        .stdout();
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(doc["differences"][0]["kind"], "missing_rule", "{doc:#}");
}

#[test]
fn a_rail_that_is_gone_is_not_ready() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.standard_config();
    tb.apply_ok(&cfg);
    tb.ip_host("link del rail1");
    let text = tb.rr(&["check", "--format", "prometheus", path_str(&cfg)]).stdout();
    let (ok, said) = promtool(&text);
    assert!(ok && said.trim().is_empty(), "promtool says:\n{said}\non:\n{text}");
    assert!(text.contains("\nroce_route_in_sync 0\n"), "{text}");
    assert!(text.contains("\nroce_route_rails_not_ready 1\n"), "{text}");
    assert!(text.contains("\nroce_route_rail_not_ready{rail=\"rail1\",part=\"interface\"} 1\n"), "{text}");
    assert!(text.contains("\nroce_route_rail_in_sync{rail=\"rail1\"} 0\n"), "{text}");
}

/// A foreign rule after roce-route's that selects rail1's source address:
/// a conflict (apply would not take it over without --adopt) while the
/// traffic still goes right (roce-route's rule comes first), and its words
/// name the address, not the rail nor its table. Yet it is rail1's (its
/// `interface`), and only rail1 is out of sync. (Red when the rail was
/// found in the words of a difference, as before `Difference::interface`:
/// nothing else in the report names rail1.)
#[test]
fn a_conflict_over_a_rails_address_is_that_rails() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.standard_config();
    tb.apply_ok(&cfg);
    tb.ip_host(&format!("rule add priority 2000 from {} lookup main", tb.rail(1).v4));
    let doc = json_doc(&tb.rr(&["--json", "check", path_str(&cfg)]).expect_code(EXIT_DRIFT));
    let kinds: Vec<&str> =
        doc["differences"].as_array().unwrap().iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["conflict"], "the conflict alone, the traffic right: {doc:#}");
    let conflict = &doc["differences"][0];
    let words = conflict["description"].as_str().unwrap();
    assert!(!words.contains("rail1") && !words.contains(&tb.rail(1).table.to_string()), "{words}");
    let text = check_prometheus(&tb, &cfg, EXIT_DRIFT);
    assert!(text.contains("\nroce_route_drift{kind=\"conflict\"} 1\n"), "{text}");
    assert!(text.contains("\nroce_route_rail_in_sync{rail=\"rail1\"} 0\n"), "{text}");
    assert!(text.contains("\nroce_route_rail_in_sync{rail=\"rail0\"} 1\n"), "{text}");
    assert_eq!(conflict["interface"], "rail1", "{conflict:#}");
}
