//! Real-kernel tests of the lifecycle commands: rollback, remove, check,
//! show, apply --json / --dry-run and apply --confirm / confirm.
//!
//! Every test owns its `Testbed` and its own state directory
//! (`<testbed temp dir>/state`, passed as ROCE_ROUTE_STATE_DIR), so tests
//! never share journals, recorded sysctls or locks, and never touch
//! /run/roce-route. "The host is as it was" always means: the full `dump()`
//! (rules and routes of every table for both families, ARP sysctls) is equal.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{
    Background, EXIT_DRIFT, EXIT_FAILED, EXIT_INVALID, EXIT_OK, Testbed, assert_dump_eq,
    confirmation_pending, journal_files, json_doc, path_str, poll_until, toml_str,
};
use serde_json::Value;

/// Bound for a waiting `apply --confirm` to apply, or to exit once it
/// should.
const CONFIRM_WAIT: Duration = Duration::from_secs(15);
/// Bound for a rail to come back up after a flap.
const LINK_WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// Running roce-route with the test's own state dir

fn rollback(tb: &Testbed) -> String {
    tb.rr_ok(&["rollback"])
}

/// `check CONFIG --json` expecting exit `code`; the parsed report.
fn check_json(tb: &Testbed, config: &Path, code: i32) -> Value {
    json_doc(&tb.rr(&["check", path_str(config), "--json"]).expect_code(code))
}

/// The first `n` `[[interface]]` blocks of a config rendered by the testbed.
fn first_interfaces(toml: &str, n: usize) -> String {
    let blocks: Vec<&str> = toml.split("[[interface]]").filter(|b| !b.trim().is_empty()).collect();
    assert!(blocks.len() >= n, "fewer than {n} interfaces in:\n{toml}");
    blocks[..n].iter().map(|b| format!("[[interface]]{b}")).collect()
}

// ---------------------------------------------------------------------------
// Observations

fn owned_rules(tb: &Testbed) -> usize {
    tb.owned_entries().iter().filter(|l| l.contains(" rule show")).count()
}

fn json_array<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v[key].as_array().unwrap_or_else(|| panic!("`{key}` is not an array in {v:#}"))
}

/// The `kind`s of a check report's differences.
fn difference_kinds(report: &Value) -> Vec<String> {
    json_array(report, "differences").iter().map(|d| d["kind"].as_str().unwrap_or("?").to_string()).collect()
}

/// The first difference of `kind`, or a panic showing the report.
fn difference<'a>(report: &'a Value, kind: &str) -> &'a Value {
    json_array(report, "differences")
        .iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no `{kind}` difference in {report:#}"))
}

/// Every difference has kind, description and a non-empty fix.
fn assert_differences_documented(report: &Value) {
    for d in json_array(report, "differences") {
        for field in ["kind", "description", "fix"] {
            let s = d[field].as_str().unwrap_or("");
            assert!(!s.is_empty(), "difference without `{field}`: {d:#}");
        }
    }
}

const TRAFFIC_FIELDS: [&str; 11] = [
    "interface",
    "from",
    "to",
    "expected_dev",
    "expected_table",
    "expected_gateway",
    "dev",
    "table",
    "gateway",
    "error",
    "ok",
];

/// Asserts a traffic list is non-empty, complete in its fields, and every
/// entry is ok (`dev` = `expected_dev`, `table` = `expected_table`).
fn assert_traffic_ok(traffic: &[Value], what: &str) {
    assert!(!traffic.is_empty(), "{what}: no traffic lookups");
    for t in traffic {
        for field in TRAFFIC_FIELDS {
            assert!(t.get(field).is_some(), "{what}: traffic lacks `{field}`: {t:#}");
        }
        assert_eq!(t["ok"], true, "{what}: traffic not ok: {t:#}");
        assert_eq!(t["dev"], t["expected_dev"], "{what}: {t:#}");
        assert_eq!(t["table"], t["expected_table"], "{what}: {t:#}");
    }
}

/// Asserts check says "in sync": exit 0, in_sync, no differences, every
/// lookup ok, and one lookup at least per address of each configured rail.
/// (Not a repeated apply's "in sync": that is apply.rs's
/// `assert_reapply_in_sync`.)
fn assert_check_in_sync(tb: &Testbed, config: &Path, what: &str) {
    let report = check_json(tb, config, EXIT_OK);
    assert_eq!(report["command"], "check", "{report:#}");
    assert_eq!(report["in_sync"], true, "{what}: {report:#}");
    assert!(json_array(&report, "differences").is_empty(), "{what}: {report:#}");
    let traffic = json_array(&report, "traffic");
    assert_traffic_ok(traffic, what);
    let text = std::fs::read_to_string(config).expect("read config");
    let configured = tb.rails().iter().filter(|r| text.contains(&format!("name = {}", toml_str(&r.name))));
    for rail in configured {
        for addr in std::iter::once(&rail.v4).chain(&rail.v6) {
            assert!(
                traffic.iter().any(|t| t["from"] == addr.as_str()),
                "{what}: no lookup from {addr}: {report:#}"
            );
        }
    }
    let human = tb.rr_ok(&["check", path_str(config)]);
    assert!(human.contains("in sync"), "{what}: human check said:\n{human}");
}

/// Asserts check reports drift: exit 3, in_sync false, documented
/// differences; returns the report.
fn assert_drift(tb: &Testbed, config: &Path) -> Value {
    let report = check_json(tb, config, EXIT_DRIFT);
    assert_eq!(report["in_sync"], false, "{report:#}");
    assert!(!json_array(&report, "differences").is_empty(), "{report:#}");
    assert_differences_documented(&report);
    report
}

/// The traffic entries from `addr` that are not ok.
fn wrong_traffic_from<'a>(traffic: &'a [Value], addr: &str) -> Vec<&'a Value> {
    traffic.iter().filter(|t| t["from"] == addr && t["ok"] == false).collect()
}

// ---------------------------------------------------------------------------
// Host manipulation

/// State roce-route does not own and must never touch: a rule at priority
/// 500, a route in table 50, and arp_ignore=2 on rail1 set by hand.
fn add_foreign_state(tb: &Testbed) {
    tb.ip_host("rule add priority 500 from 203.0.113.5 lookup 50");
    tb.ip_host(&format!("route add 203.0.113.0/24 via {} dev rail0 table 50", tb.peer_v4()));
    tb.set_host_sysctl("rail1", "arp_ignore", 2);
}

/// A testbed with the foreign state, and its dump.
fn host_with_foreign_state(ipv6: bool) -> (Testbed, String) {
    let tb = Testbed::builder().rails(4).ipv6(ipv6).build();
    add_foreign_state(&tb);
    let dump = tb.dump();
    (tb, dump)
}

/// `ip link set RAIL down; ip link set RAIL up`, then waits until it is up
/// again. The kernel drops the rail's routes in every table on the way down.
fn flap(tb: &Testbed, rail: &str) {
    tb.ip_host(&format!("link set {rail} down"));
    tb.ip_host(&format!("link set {rail} up"));
    let operstate = format!("/sys/class/net/{rail}/operstate");
    poll_until(&format!("{rail} to be up again"), LINK_WAIT, || tb.host().read_file(&operstate) == "up");
}

// ---------------------------------------------------------------------------
// apply --confirm, in the background

/// Starts `roce-route ARGS` in the background; it is killed (by its own
/// pid) if the test ends first.
fn spawn(tb: &Testbed, args: &[&str]) -> Background {
    Background::spawn(tb.rr_cmd(args), format!("roce-route {args:?}"))
}

/// Starts `apply --confirm SECONDS` and waits until it has applied and
/// waits for confirmation (owned rules exist, `pending` is written).
fn start_waiting_apply(tb: &Testbed, config: &Path, seconds: u64) -> Background {
    let secs = seconds.to_string();
    let mut bg = spawn(tb, &["apply", "--confirm", &secs, path_str(config)]);
    poll_until("apply --confirm to apply and wait", CONFIRM_WAIT, || {
        assert!(bg.is_running(), "{} exited before confirmation", bg.what());
        owned_rules(tb) > 0 && confirmation_pending(&tb.state_base())
    });
    bg
}

// ---------------------------------------------------------------------------
// 1. rollback

#[test]
fn rollback_returns_the_exact_pre_apply_state() {
    let (tb, before) = host_with_foreign_state(true);
    tb.apply_ok(&tb.standard_config());
    assert_ne!(tb.dump(), before, "apply changed nothing");
    assert_eq!(tb.host_sysctl("rail1", "arp_ignore"), 1);

    rollback(&tb);
    assert_dump_eq(&before, &tb.dump(), "after apply + rollback");

    let out = tb.rr_ok(&["rollback"]);
    assert!(out.contains("nothing to roll back"), "second rollback said:\n{out}");
    assert_dump_eq(&before, &tb.dump(), "after a second rollback");
}

#[test]
fn rollback_unwinds_a_stack_of_applies() {
    let (tb, original) = host_with_foreign_state(true);
    let config_a = tb.standard_config();
    let config_b = tb.write_config(&first_interfaces(&tb.config_toml_with_gateway(), 3));

    tb.apply_ok(&config_a);
    let after_a = tb.dump();
    tb.apply_ok(&config_b);
    let after_b = tb.dump();
    assert_ne!(after_a, after_b, "apply B changed nothing");
    // rail3 left the config with its recorded sysctls: ARP flux, all check reports.
    tb.check_only_arp_flux(path_str(&config_b), &["rail3"]);

    rollback(&tb);
    assert_dump_eq(&after_a, &tb.dump(), "after rolling back B");
    rollback(&tb);
    assert_dump_eq(&original, &tb.dump(), "after rolling back B then A");
    let report = json_doc(&tb.rr(&["rollback", "--json"]).expect_code(EXIT_OK));
    assert_eq!(report["changed"], false, "{report:#}");
}

// ---------------------------------------------------------------------------
// 2. rollback after --adopt

#[test]
fn rollback_after_adopt_restores_the_hand_made_fix() {
    let tb = Testbed::builder().rails(4).build();
    tb.fix_by_hand();
    let hand_made = tb.dump();
    let config = tb.standard_config();

    tb.rr(&["apply", path_str(&config)]).expect_code(EXIT_FAILED).expect_stderr(&["--adopt"]);
    assert_dump_eq(&hand_made, &tb.dump(), "after a refused apply");

    tb.apply(&config, &["--adopt"]).expect_code(EXIT_OK);
    assert_check_in_sync(&tb, &config, "after apply --adopt");
    let owned = owned_rules(&tb);
    assert_eq!(owned, tb.rails().len(), "{:#?}", tb.owned_entries());

    rollback(&tb);
    assert_dump_eq(&hand_made, &tb.dump(), "after apply --adopt + rollback");
}

// ---------------------------------------------------------------------------
// 3. remove

/// Deletes the namespace's journals, keeping record.json.
fn delete_journals(tb: &Testbed) {
    let dir = tb.ns_state_dir();
    let journals = journal_files(&tb.state_base());
    for path in &journals {
        std::fs::remove_file(path).expect("delete journal");
    }
    assert!(!journals.is_empty(), "no journal in {}", dir.display());
    assert!(dir.join("record.json").exists(), "no record.json in {}", dir.display());
}

#[test]
fn remove_without_journals_takes_out_everything_owned() {
    let (tb, before) = host_with_foreign_state(true);
    tb.apply_ok(&tb.write_config(&tb.config_toml_with_gateway()));
    assert!(!tb.owned_entries().is_empty(), "apply installed nothing");
    delete_journals(&tb);

    tb.rr_ok(&["remove"]);
    assert_eq!(tb.owned_entries(), Vec::<String>::new(), "left after remove");
    assert_eq!(tb.host_sysctl("rail1", "arp_ignore"), 2, "rail1's own value");
    assert_dump_eq(&before, &tb.dump(), "after remove");

    let again = tb.rr_ok(&["remove"]);
    assert!(again.contains("nothing to remove"), "second remove said:\n{again}");
    assert_dump_eq(&before, &tb.dump(), "after a second remove");
}

/// The original sysctl values record.json holds (its `origins`), and the
/// config watch would follow: what each rollback must give back too.
fn recorded(tb: &Testbed) -> (Value, Value) {
    let path = tb.ns_state_dir().join("record.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let record: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()));
    (record["origins"].clone(), record["config_files"].clone())
}

const ARP_KEYS: [&str; 2] = ["arp_ignore", "arp_announce"];

fn arp_sysctls(tb: &Testbed, iface: &str) -> Vec<u32> {
    ARP_KEYS.iter().map(|k| tb.host_sysctl(iface, k)).collect()
}

/// A rail renamed after apply (down, renamed, up: its routes go, its ARP
/// sysctls stay) gets its recorded values back from remove under its name
/// now, found by the index the record keeps; after that remove is rolled
/// back, a second one finds it again.
#[test]
fn remove_gives_back_a_renamed_rails_sysctls() {
    let tb = Testbed::builder().rails(2).build();
    let before = arp_sysctls(&tb, "rail0");
    tb.apply_ok(&tb.standard_config());
    let applied = arp_sysctls(&tb, "rail0");
    assert_ne!(applied, before, "apply set them");
    tb.rename_host_link("rail0", "ens5");
    let dry = tb.rr(&["remove", "--dry-run"]).expect_code(EXIT_OK);
    dry.expect_stdout(&["net.ipv4.conf.ens5.arp_ignore", "net.ipv4.conf.ens5.arp_announce"]);
    // check and apply --dry-run, like apply, would give them back with
    // rail0 dropped from the config.
    let only_rail1 = tb.write_config(&tb.render_config_for(|r| r.name == "rail1", |_| Vec::new()));
    let drift = tb.rr(&["check", path_str(&only_rail1)]).expect_code(EXIT_DRIFT);
    drift.expect_stdout(&["net.ipv4.conf.ens5.arp_ignore"]);
    let script = tb.rr(&["apply", "--dry-run", path_str(&only_rail1)]).expect_code(EXIT_OK);
    script.expect_stdout(&["net.ipv4.conf.ens5.arp_ignore=0", "net.ipv4.conf.ens5.arp_announce=0"]);
    let removed = tb.rr(&["remove"]).expect_code(EXIT_OK);
    assert!(!removed.stderr().contains("not restored"), "{}", removed.stderr());
    assert_eq!(arp_sysctls(&tb, "ens5"), before, "given back under its name now");
    assert_eq!(arp_sysctls(&tb, "rail1"), before);
    rollback(&tb);
    assert_eq!(arp_sysctls(&tb, "ens5"), applied, "the remove undone");
    tb.rr_ok(&["remove"]);
    assert_eq!(arp_sysctls(&tb, "ens5"), before, "the undone remove gave the record its indexes back");
}

/// The config follows a renamed rail: apply records its original values
/// under the new name (it never records the values it set itself as
/// originals), and an apply that drops the rail gives them back.
#[test]
fn a_rail_renamed_in_the_config_keeps_its_recorded_sysctls() {
    let tb = Testbed::builder().rails(2).build();
    let before = arp_sysctls(&tb, "rail0");
    tb.apply_ok(&tb.standard_config());
    assert_ne!(arp_sysctls(&tb, "rail0"), before, "apply set them");
    tb.rename_host_link("rail0", "ens5");
    let renamed = tb.write_config(&tb.config_toml().replace("\"rail0\"", "\"ens5\""));
    tb.apply_ok(&renamed);
    let origins = recorded(&tb).0;
    let names: Vec<&String> = origins.as_object().expect("origins").keys().collect();
    assert!(names.iter().all(|n| !n.starts_with("rail0/")), "moved to the name now: {origins}");
    assert_eq!(origins["ens5/arp_ignore"], before[0], "{origins}");
    let only_rail1 = tb.write_config(&tb.render_config_for(|r| r.name == "rail1", |_| Vec::new()));
    tb.apply_ok(&only_rail1);
    assert_eq!(arp_sysctls(&tb, "ens5"), before, "dropped from the config: given back");
    assert_ne!(arp_sysctls(&tb, "rail1"), before, "rail1 is still configured");
}

/// Rolling back the apply that followed a rename gives the record its
/// old names back, and the rollback below it then restores the renamed
/// rail's sysctls under its name now: the host as before the first apply.
#[test]
fn rollbacks_after_a_followed_rename_give_back_the_host_before() {
    let tb = Testbed::builder().rails(2).build();
    let before = arp_sysctls(&tb, "rail0");
    tb.apply_ok(&tb.standard_config());
    let origins_a = recorded(&tb).0;
    tb.rename_host_link("rail0", "ens5");
    tb.apply_ok(&tb.write_config(&tb.config_toml().replace("\"rail0\"", "\"ens5\"")));
    assert!(recorded(&tb).0.get("ens5/arp_ignore").is_some(), "{}", recorded(&tb).0);
    rollback(&tb);
    assert_eq!(recorded(&tb).0, origins_a, "the record as the first apply left it");
    rollback(&tb);
    assert_eq!(arp_sysctls(&tb, "ens5"), before, "the first apply undone on the renamed rail");
    assert_eq!(arp_sysctls(&tb, "rail1"), before);
    assert_eq!(recorded(&tb).0, serde_json::json!({}), "nothing recorded before the first apply");
}

/// A rail the config still lists by its old name is not ready while it is
/// renamed, and nothing of it is touched: not its sysctls under the new
/// name either (it may come back; the record keeps its old name).
#[test]
fn a_renamed_rail_the_config_still_lists_is_left_alone() {
    let tb = Testbed::builder().rails(2).build();
    let config = tb.standard_config();
    tb.apply_ok(&config);
    let applied = arp_sysctls(&tb, "rail0");
    tb.rename_host_link("rail0", "ens5");
    let script = tb.rr(&["apply", "--dry-run", path_str(&config)]).expect_code(5);
    assert!(!script.stdout().contains("conf.ens5"), "{}", script.stdout());
    let check = tb.rr(&["check", path_str(&config)]).expect_code(EXIT_DRIFT);
    assert!(!check.stdout().contains("conf.ens5"), "{}", check.stdout());
    // rail1 changes, so the run is recorded: rail0 is not ready (exit 5).
    tb.set_host_sysctl("rail1", "arp_ignore", 0);
    tb.rr(&["apply", path_str(&config)]).expect_code(5);
    assert_eq!(arp_sysctls(&tb, "ens5"), applied, "not the not-ready rail's");
    assert!(recorded(&tb).0.get("rail0/arp_ignore").is_some(), "{}", recorded(&tb).0);
}

/// A record written before records kept indexes learns them at the next
/// run that changes something, also for interfaces the run does not touch.
#[test]
fn a_record_without_indexes_learns_them_at_the_next_change() {
    let tb = Testbed::builder().rails(2).build();
    let before = arp_sysctls(&tb, "rail0");
    let config = tb.standard_config();
    tb.apply_ok(&config);
    let path = tb.ns_state_dir().join("record.json");
    let mut record: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(record.as_object_mut().unwrap().remove("links").is_some(), "{record}");
    std::fs::write(&path, record.to_string()).unwrap();
    tb.set_host_sysctl("rail1", "arp_ignore", 0);
    tb.apply_ok(&config);
    tb.rename_host_link("rail0", "ens5");
    tb.rr_ok(&["remove"]);
    assert_eq!(arp_sysctls(&tb, "ens5"), before, "found by the index learnt at the change of rail1");
}

/// A remove is one more run on the stack, not the end of the history:
/// apply A, apply B (a fourth rail, gateways, other ARP values; rail1's
/// own arp_ignore=2 is written back, so B gives its recorded original
/// back), remove; each rollback then walks one run back: B, A, the host
/// before A, and then there is nothing left. A second remove, which finds
/// nothing, costs nothing either.
#[test]
fn rollback_after_remove_walks_back_through_the_earlier_applies() {
    let (tb, original) = host_with_foreign_state(true);
    let config_a = tb.write_config(&first_interfaces(&tb.config_toml(), 3));
    let config_b = tb.write_config(&format!(
        "[defaults]\narp_ignore = 2\narp_announce = 1\n\n{}",
        tb.config_toml_with_gateway()
    ));

    tb.apply_ok(&config_a);
    let (after_a, recorded_a) = (tb.dump(), recorded(&tb));
    tb.apply_ok(&config_b);
    let (after_b, recorded_b) = (tb.dump(), recorded(&tb));
    assert_ne!(after_a, after_b, "apply B changed nothing");
    assert_ne!(recorded_a, recorded_b, "B recorded nothing of its own");

    tb.rr_ok(&["remove"]);
    assert_eq!(tb.owned_entries(), Vec::<String>::new(), "left after remove");
    assert_dump_eq(&original, &tb.dump(), "after remove");
    assert_eq!(journal_files(&tb.state_base()).len(), 3, "apply A, apply B and the remove are journaled");
    let again = tb.rr_ok(&["remove"]);
    assert!(again.contains("nothing to remove"), "second remove said:\n{again}");
    assert_eq!(journal_files(&tb.state_base()).len(), 3, "a remove that found nothing dropped journals");

    let out = rollback(&tb);
    assert!(out.contains("rolled back the remove"), "first rollback said:\n{out}");
    assert_dump_eq(&after_b, &tb.dump(), "after rolling back the remove");
    assert_eq!(recorded(&tb), recorded_b, "the record after rolling back the remove");
    assert_check_in_sync(&tb, &config_b, "after rolling back the remove");

    let out = rollback(&tb);
    assert!(
        out.contains(&format!("rolled back the apply of {}", path_str(&config_b))),
        "second rollback:\n{out}"
    );
    assert_dump_eq(&after_a, &tb.dump(), "after rolling back the remove, then B");
    assert_eq!(recorded(&tb), recorded_a, "the record after rolling back B");

    let out = rollback(&tb);
    assert!(
        out.contains(&format!("rolled back the apply of {}", path_str(&config_a))),
        "third rollback:\n{out}"
    );
    assert_dump_eq(&original, &tb.dump(), "after rolling back the remove, B, then A");
    assert_eq!(recorded(&tb).0, serde_json::json!({}), "original values left in the record");

    let report = json_doc(&tb.rr(&["rollback", "--json"]).expect_code(EXIT_OK));
    assert_eq!(report["changed"], false, "{report:#}");
    assert_eq!(report["undid"], Value::Null, "{report:#}");
    assert_eq!(report["still_owned"], 0, "{report:#}");
    assert_dump_eq(&original, &tb.dump(), "after a fourth rollback");
}

// ---------------------------------------------------------------------------
// 4. check

/// An applied standard config, checked in sync; the config.
fn applied(tb: &Testbed) -> PathBuf {
    let config = tb.standard_config();
    tb.apply_ok(&config);
    assert_check_in_sync(tb, &config, "right after apply");
    config
}

#[test]
fn check_is_in_sync_after_apply_and_not_before() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let config = tb.standard_config();
    let report = assert_drift(&tb, &config);
    let kinds = difference_kinds(&report);
    for kind in ["missing_route", "missing_rule", "sysctl", "traffic"] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} in {kinds:?}");
    }
    tb.apply_ok(&config);
    assert_check_in_sync(&tb, &config, "after apply");
}

#[test]
fn check_finds_a_deleted_rule_and_its_fix_repairs_it() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let config = applied(&tb);
    let rail = tb.rail(1);
    tb.ip_host(&format!("rule del priority 1000 from {} lookup {}", rail.v4, rail.table));

    let report = assert_drift(&tb, &config);
    let missing = difference(&report, "missing_rule");
    assert!(missing["description"].as_str().unwrap().contains(&rail.v4), "{missing:#}");
    let fix = missing["fix"].as_str().unwrap();
    tb.host().exec("sh", &["-c", fix]);
    assert_check_in_sync(&tb, &config, &format!("after running the fix `{fix}`"));
}

#[test]
fn check_finds_the_routes_a_link_flap_dropped() {
    // IPv4 only: the kernel flushes IPv6 addresses on link down.
    let tb = Testbed::builder().rails(4).build();
    let config = applied(&tb);
    flap(&tb, "rail1");

    let report = assert_drift(&tb, &config);
    let missing = difference(&report, "missing_route");
    assert!(missing["description"].as_str().unwrap().contains("rail1"), "{missing:#}");
    let rail1_v4 = &tb.rail(1).v4;
    let named = json_array(&report, "differences").iter().any(|d| {
        d["kind"] == "traffic"
            && d["description"]
                .as_str()
                .is_some_and(|s| s.contains(&format!("from {rail1_v4} ")) && s.contains("expected rail1"))
    });
    assert!(named, "no traffic difference for rail1: {report:#}");
    let wrong = wrong_traffic_from(json_array(&report, "traffic"), rail1_v4);
    assert!(!wrong.is_empty(), "rail1's traffic judged ok: {report:#}");
    for t in wrong {
        assert_eq!(t["expected_dev"], "rail1", "{t:#}");
        assert!(t["dev"] != "rail1", "a wrong verdict leaves via rail1: {t:#}");
    }

    tb.apply_ok(&config);
    assert_check_in_sync(&tb, &config, "after re-applying");
}

#[test]
fn check_finds_a_sysctl_changed_by_hand() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let config = applied(&tb);
    tb.set_host_sysctl("rail2", "arp_ignore", 0);

    let report = assert_drift(&tb, &config);
    assert_eq!(difference_kinds(&report), ["sysctl"], "{report:#}");
    let d = difference(&report, "sysctl");
    assert!(d["fix"].as_str().unwrap().contains("rail2.arp_ignore=1"), "{d:#}");
    tb.apply_ok(&config);
    assert_check_in_sync(&tb, &config, "after re-applying");
}

#[test]
fn check_finds_a_shadowing_foreign_rule_and_adopt_takes_it_over() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let config = applied(&tb);
    let rail = tb.rail(1);
    tb.ip_host(&format!("rule add priority 100 from {} lookup main", rail.v4));

    let report = assert_drift(&tb, &config);
    let conflict = difference(&report, "conflict");
    assert!(conflict["fix"].as_str().unwrap().contains("--adopt"), "{conflict:#}");
    let wrong = wrong_traffic_from(json_array(&report, "traffic"), &rail.v4);
    assert!(!wrong.is_empty(), "shadowed traffic judged ok: {report:#}");
    difference(&report, "traffic");

    tb.apply(&config, &["--adopt"]).expect_code(EXIT_OK);
    assert_check_in_sync(&tb, &config, "after apply --adopt");
}

#[test]
fn check_finds_arp_ignore_overridden_by_conf_all() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let config = applied(&tb);
    tb.set_host_sysctl("all", "arp_ignore", 2);

    let report = assert_drift(&tb, &config);
    let d = difference(&report, "sysctl_overridden");
    // roce-route never writes conf/all: the fix is to accept the value.
    assert!(d["fix"].as_str().unwrap().contains("set `arp_ignore = 2` for interface"), "{d:#}");
    tb.set_host_sysctl("all", "arp_ignore", 0);
    assert_check_in_sync(&tb, &config, "with conf/all/arp_ignore back to 0");
}

// ---------------------------------------------------------------------------
// 5. show

fn show_json(tb: &Testbed) -> Value {
    let report = json_doc(&tb.rr(&["show", "--json"]).expect_code(EXIT_OK));
    assert_eq!(report["command"], "show", "{report:#}");
    assert_eq!(report["protocols"], serde_json::json!([234]), "{report:#}");
    report
}

fn shown_interface<'a>(report: &'a Value, name: &str) -> Option<&'a Value> {
    json_array(report, "interfaces").iter().find(|i| i["name"] == name)
}

#[test]
fn show_lists_every_rail_with_its_table_rules_sysctls_and_traffic() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    applied(&tb);
    // Each key's `all` value is its own (read once for every rail).
    tb.host().set_sysctl("net/ipv4/conf/all/rp_filter", "2");

    let run = tb.rr_profiled(&["show", "--json"], EXIT_OK);
    let keys = 4;
    let counts = (
        common::profile_count(&run.stderr(), "sysctl_reads"),
        common::profile_count(&run.stderr(), "sysctls_with_links"),
    );
    assert_eq!(
        counts,
        (keys, keys * tb.rails().len() as u64),
        "`all`'s files once, each rail's values with its link: {}",
        run.stderr()
    );
    let report = json_doc(&run);
    assert_eq!(json_array(&report, "interfaces").len(), tb.rails().len(), "{report:#}");
    assert!(json_array(&report, "orphan_rules").is_empty(), "{report:#}");
    for rail in tb.rails() {
        let what = format!("show: {}", rail.name);
        let i = shown_interface(&report, &rail.name).unwrap_or_else(|| panic!("{what} missing: {report:#}"));
        assert_eq!(i["tables"], serde_json::json!([rail.table]), "{what}: {i:#}");
        let rules = json_array(i, "rules");
        assert_eq!(rules.len(), 2, "{what}: one rule per family: {i:#}");
        assert!(rules.iter().any(|r| r["ip"].as_str().unwrap().contains(&rail.v4)), "{what}: {i:#}");
        assert!(rules.iter().all(|r| r["table"] == rail.table && r["priority"] == 1000), "{what}: {i:#}");
        assert!(!json_array(i, "routes").is_empty(), "{what}: {i:#}");
        for (key, value) in [("arp_ignore", 1), ("arp_announce", 2)] {
            let s = &i["sysctls"][key];
            assert_eq!(s["value"], value, "{what}: {key}: {i:#}");
            assert_eq!(s["effective"], value, "{what}: {key}: {i:#}");
            assert_eq!(s["all"], 0, "{what}: {key}: {i:#}");
        }
        let rp = &i["sysctls"]["rp_filter"];
        assert_eq!(
            (&rp["all"], &rp["effective"]),
            (&serde_json::json!(2), &serde_json::json!(2)),
            "{what}: {i:#}"
        );
        assert_traffic_ok(json_array(i, "traffic"), &what);
    }

    let human = tb.rr_ok(&["show"]);
    for rail in tb.rails() {
        assert!(human.contains(&rail.name), "{} not in show:\n{human}", rail.name);
    }
    assert!(human.contains("ok"), "show:\n{human}");
    assert!(!human.contains("WRONG"), "show:\n{human}");
}

#[test]
fn show_reports_a_flapped_rail() {
    let tb = Testbed::builder().rails(4).build();
    applied(&tb);
    flap(&tb, "rail1");

    // The flap flushed table 101: rail1 has no owned route left, so its
    // rule is listed as an orphan (it was an `A || B` whose A could never
    // hold, since show groups interfaces by their routes).
    let report = show_json(&tb);
    assert!(shown_interface(&report, "rail1").is_none(), "rail1 still has routes after the flap: {report:#}");
    let orphans = json_array(&report, "orphan_rules");
    assert_eq!(orphans.len(), 1, "{report:#}");
    assert_eq!(orphans[0]["table"], 101, "{report:#}");
    assert_eq!(orphans[0]["src"]["addr"], tb.rail(1).v4, "{report:#}");
    let human = tb.rr_ok(&["show"]);
    assert!(
        human.contains("rule without routes in its table") && human.contains("lookup 101"),
        "human show after a flap of rail1:\n{human}"
    );
    for k in [0, 2, 3] {
        let name = &tb.rail(k).name;
        let i = shown_interface(&report, name).unwrap_or_else(|| panic!("{name} missing: {report:#}"));
        assert_traffic_ok(json_array(i, "traffic"), name);
    }
}

/// show reads the tables roce-route uses (its rules', and the recorded
/// ones, as apply does), never main: a proto-234 route someone put in main
/// is not listed (walking main for it read a full routing table whole: 34 ms
/// with a million routes), while a recorded table whose rules are gone still
/// shows its routes.
#[test]
fn show_reads_roce_routes_tables_not_main() {
    let tb = Testbed::builder().rails(2).build();
    applied(&tb);
    tb.host().exec("ip", &["route", "add", "203.0.113.0/24", "dev", "rail0", "proto", "234"]);
    let rule = format!("from {} lookup {}", tb.rail(1).v4, tb.rail(1).table);
    tb.host().exec("ip", &["rule", "del", "from", &tb.rail(1).v4, "lookup", &tb.rail(1).table.to_string()]);
    assert!(!tb.ip_host("-4 rule show").contains(&rule), "{rule} still there");

    let report = show_json(&tb);
    let rail0 = shown_interface(&report, "rail0").expect("rail0");
    assert_eq!(rail0["tables"], serde_json::json!([tb.rail(0).table]), "main is not read: {rail0:#}");
    let rail1 =
        shown_interface(&report, "rail1").unwrap_or_else(|| panic!("rail1 (recorded table): {report:#}"));
    assert_eq!(rail1["tables"], serde_json::json!([tb.rail(1).table]), "{rail1:#}");
    assert!(!json_array(rail1, "routes").is_empty(), "{rail1:#}");
}

// ---------------------------------------------------------------------------
// 6. apply --json, --dry-run

fn apply_json(tb: &Testbed, config: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["apply", "--json"];
    args.extend(extra);
    args.push(path_str(config));
    let report = json_doc(&tb.rr(&args).expect_code(EXIT_OK));
    assert_eq!(report["command"], "apply", "{report:#}");
    for key in ["changes", "conflicts", "warnings"] {
        json_array(&report, key);
    }
    report
}

#[test]
fn apply_json_reports_changed_then_unchanged() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let config = tb.standard_config();
    let first = apply_json(&tb, &config, &[]);
    assert_eq!(first["changed"], true, "{first:#}");
    assert_eq!(first["dry_run"], false, "{first:#}");
    for c in json_array(&first, "changes") {
        assert!(c["kind"].is_string() && c["command"].is_string(), "{c:#}");
    }
    let second = apply_json(&tb, &config, &[]);
    assert_eq!(second["changed"], false, "{second:#}");
    assert!(json_array(&second, "changes").is_empty(), "{second:#}");
}

#[test]
fn dry_run_json_announces_exactly_what_apply_does() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let before = tb.dump();
    let config = tb.write_config(&tb.config_toml_with_gateway());
    let dry = apply_json(&tb, &config, &["--dry-run"]);
    assert_eq!(dry["dry_run"], true, "{dry:#}");
    assert_eq!(dry["changed"], true, "{dry:#}");
    assert_dump_eq(&before, &tb.dump(), "after --dry-run");

    let real = apply_json(&tb, &config, &[]);
    assert_eq!(dry["changes"], real["changes"], "dry run vs apply");
    assert_check_in_sync(&tb, &config, "after apply");
}

#[test]
fn bad_config_with_json_prints_an_error_document() {
    let tb = Testbed::builder().rails(2).build();
    let before = tb.dump();
    let config = tb.write_config("[[interface]]\nname = \"rail0\"\ntable = \"not a number\"\n");
    let out = tb.rr(&["apply", "--json", path_str(&config)]).expect_code(EXIT_INVALID);
    let doc = json_doc(&out);
    assert_eq!(doc["command"], "apply", "{doc:#}");
    assert_eq!(doc["ok"], false, "{doc:#}");
    assert_eq!(doc["exit_code"], EXIT_INVALID, "{doc:#}");
    assert!(doc["error"]["message"].as_str().is_some_and(|e| e.contains("table")), "{doc:#}");
    assert_eq!(doc["changed"], false, "{doc:#}");
    assert_dump_eq(&before, &tb.dump(), "after a bad config");
}

// ---------------------------------------------------------------------------
// 7. apply --confirm / confirm

#[test]
fn unconfirmed_apply_rolls_back_after_its_timeout() {
    let (tb, before) = host_with_foreign_state(true);
    let config = tb.standard_config();
    let start = Instant::now();
    // The change must really be in place during the wait, then undone.
    let waiting = start_waiting_apply(&tb, &config, 2);
    assert_ne!(tb.dump(), before, "nothing was applied while waiting");
    let out = waiting.wait_timeout(CONFIRM_WAIT);
    let took = start.elapsed();
    let out = out.expect_code(EXIT_FAILED);
    assert!(took >= Duration::from_secs(2) && took < CONFIRM_WAIT, "exited after {took:?}\n{}", out.report());
    assert_dump_eq(&before, &tb.dump(), "after an unconfirmed apply");
    let out = tb.rr_ok(&["rollback"]);
    assert!(out.contains("nothing to roll back"), "rollback said:\n{out}");
}

#[test]
fn confirm_keeps_the_waiting_apply() {
    let (tb, before) = host_with_foreign_state(true);
    let config = tb.standard_config();
    let waiting = start_waiting_apply(&tb, &config, 20);
    let applied_dump = tb.dump();
    assert_ne!(applied_dump, before, "nothing applied");

    tb.rr_ok(&["confirm"]);
    waiting.wait_timeout(CONFIRM_WAIT).expect_code(EXIT_OK);
    assert_dump_eq(&applied_dump, &tb.dump(), "after confirm");
    assert_check_in_sync(&tb, &config, "after confirm");
    // The confirmed apply is an ordinary one: rollback still undoes it.
    rollback(&tb);
    assert_dump_eq(&before, &tb.dump(), "after rolling back a confirmed apply");
}

#[test]
fn sighup_rolls_back_a_waiting_apply_at_once() {
    let (tb, before) = host_with_foreign_state(true);
    let config = tb.standard_config();
    let waiting = start_waiting_apply(&tb, &config, 20);
    let pid = waiting.pid().to_string();
    let start = Instant::now();
    common::run("kill", &["-HUP", &pid]);
    let out = waiting.wait_timeout(CONFIRM_WAIT);
    let took = start.elapsed();
    let out = out.expect_code(EXIT_FAILED);
    assert!(took < Duration::from_secs(5), "took {took:?} to exit on SIGHUP\n{}", out.report());
    assert_dump_eq(&before, &tb.dump(), "after SIGHUP");
}

#[test]
fn confirm_with_nothing_waiting_fails() {
    let tb = Testbed::builder().rails(1).build();
    tb.rr(&["confirm"]).expect_code(EXIT_FAILED);
}
