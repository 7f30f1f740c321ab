//! The metrics as Prometheus' own linter reads them: `promtool check
//! metrics` (Debian package `prometheus`) must accept every rendered
//! snapshot without a single problem (names, types, units, HELP, syntax).
//! The text goes through `write_textfile`, as watch writes it, and promtool
//! reads the file that node_exporter would.

mod common;

use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use common::promtool;
use roce_route::metrics::{self, HealTrigger, NotReadyPart, RdmaPort, Snapshot};
use roce_route::plan::{NotReady, Subject};

/// Renders `s`, writes it as a textfile, and has promtool read that file.
fn lint(what: &str, s: &Snapshot) -> String {
    let name = what.replace(' ', "_");
    let dir: PathBuf =
        std::env::temp_dir().join(format!("roce-route-promtool-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("roce_route.prom");
    metrics::write_textfile(&path, &metrics::render(s)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let (ok, said) = promtool(&text);
    assert!(ok && said.trim().is_empty(), "{what}: promtool says:\n{said}\non:\n{text}");
    std::fs::remove_dir_all(&dir).unwrap();
    text
}

fn port(i: u32, state_id: u32, physical_state_id: u32, gid_index: Option<u32>) -> RdmaPort {
    RdmaPort { device: format!("mlx5_{i}"), port: 1, state_id, physical_state_id, gid_index }
}

#[test]
fn promtool_is_there_and_strict() {
    // The check below means something only if promtool rejects what breaks
    // the conventions: a counter without `_total`, a unit not in base units.
    let (ok, said) = promtool(
        "# HELP roce_route_heals Heals.\n# TYPE roce_route_heals counter\nroce_route_heals 1\n\
         # HELP roce_route_age_milliseconds Age.\n# TYPE roce_route_age_milliseconds gauge\n\
         roce_route_age_milliseconds 1\n",
    );
    assert!(!ok, "{said}");
    assert!(said.contains("_total") && said.contains("base unit"), "{said}");
}

#[test]
fn an_empty_host() {
    let text = lint("empty host", &Snapshot { in_sync: true, ..Snapshot::default() });
    assert!(text.contains("\nroce_route_in_sync 1\n"), "{text}");
    assert!(text.contains("\nroce_route_rails_not_ready 0\n"), "{text}");
}

#[test]
fn eight_rails_with_drift() {
    let mut s = Snapshot { in_sync: false, ..Snapshot::default() };
    let mut kinds = Vec::new();
    for i in 0..8u32 {
        let rail = s.rail(&format!("rail{i}"));
        rail.in_sync = i % 3 != 0;
        rail.rdma = Some(port(i, if i == 5 { 1 } else { 4 }, if i == 5 { 3 } else { 5 }, Some(3)));
        if !rail.in_sync {
            kinds.extend(["missing_route", "sysctl", "traffic"]);
        }
    }
    kinds.extend(["arp_flux", "shadowed", "rdma_port", "a_kind_check_has_not_yet"]);
    s.set_drift(kinds.iter().copied());
    s.counters.found(kinds.iter().copied());
    let text = lint("eight rails", &s);
    assert!(text.contains("roce_route_drift{kind=\"missing_route\"} 3\n"), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("roce_route_rdma_port_state_id{")).count(), 8);
}

#[test]
fn not_ready_rails() {
    let mut s = Snapshot { in_sync: false, ..Snapshot::default() };
    let gone =
        NotReady { interface: "rail2".into(), subject: Subject::Interface, reason: "does not exist".into() };
    let addr = NotReady {
        interface: "rail3".into(),
        subject: Subject::Address("10.0.3.5".parse().unwrap()),
        reason: "absent".into(),
    };
    let gw = NotReady {
        interface: "rail3".into(),
        subject: Subject::Gateway("10.0.3.1".parse().unwrap()),
        reason: "x".into(),
    };
    s.rail("rail0").in_sync = true;
    s.rail("rail2").add_not_ready(&gone);
    s.rail("rail3").add_not_ready(&addr);
    s.rail("rail3").add_not_ready(&gw);
    s.rail("rail3").rdma = Some(port(3, 4, 5, None));
    s.set_drift(["not_ready", "not_ready", "not_ready"]);
    s.counters.found(["not_ready", "not_ready", "not_ready"]);
    let text = lint("not ready", &s);
    assert!(text.contains("\nroce_route_rails_not_ready 2\n"), "{text}");
    assert!(s.rails["rail3"].not_ready[&NotReadyPart::Gateway] == 1);
    assert!(!text.contains("roce_route_nccl_gid_index{"), "no GID index known: no sample\n{text}");
}

#[test]
fn label_values_with_quotes_backslashes_and_line_feeds() {
    let mut s = Snapshot::default();
    s.rail("a\"quoted\" rail").in_sync = true;
    s.rail("back\\slash").rdma = Some(RdmaPort {
        device: "dev\"ice\\\n".into(),
        port: 2,
        state_id: 4,
        physical_state_id: 5,
        gid_index: Some(0),
    });
    s.rail("line\nfeed").in_sync = false;
    s.set_drift(["odd \"kind\"\\\n"]);
    lint("odd labels", &s);
}

#[test]
fn a_watch_that_ran_a_while() {
    let mut s = Snapshot { in_sync: true, ..Snapshot::default() };
    for i in 0..4u32 {
        let rail = s.rail(&format!("ib{i}.8001"));
        rail.in_sync = true;
        rail.rdma = Some(port(i, 4, 5, None));
    }
    for t in HealTrigger::ALL {
        s.counters.heal(t);
    }
    s.counters.heal(HealTrigger::Events);
    s.counters.found(["missing_rule", "extra_rule"]);
    s.counters.announced(12);
    s.last_heal = Some(UNIX_EPOCH + Duration::from_millis(1_750_000_000_125));
    s.last_apply = Some(UNIX_EPOCH + Duration::from_secs(1_749_000_000));
    let text = lint("watch", &s);
    assert!(text.contains("roce_route_heals_total{trigger=\"events\"} 2\n"), "{text}");
    assert!(text.contains("\nroce_route_last_heal_timestamp_seconds 1750000000.125\n"), "{text}");
}

/// The shipped alert rules (dist/prometheus/roce-route.rules.yml): promtool
/// accepts them (`check rules`), their unit tests pass (`test rules`: each
/// alert fires on the series of a failing, a stopped and an out-of-sync
/// watch, and stays silent on a healthy one), and every family they name
/// is one the metrics render.
#[test]
fn the_shipped_alert_rules_fire_as_their_tests_say() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/prometheus");
    for args in [["check", "rules", "roce-route.rules.yml"], ["test", "rules", "roce-route.rules.test.yml"]] {
        let out = std::process::Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap_or_else(|e| panic!("promtool (Debian package `prometheus`): {e}"));
        let said =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "promtool {}: {said}", args.join(" "));
    }
    let rules = std::fs::read_to_string(dir.join("roce-route.rules.yml")).unwrap();
    let rendered = metrics::render(&Snapshot::default());
    let named: Vec<&str> = rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("roce_route_"))
        .collect();
    assert!(named.len() >= 3, "{named:?}");
    for name in named {
        assert!(rendered.contains(&format!("\n# TYPE {name} ")), "the rules name {name}, which is no family");
    }
}
