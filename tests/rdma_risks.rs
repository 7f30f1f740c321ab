//! Real-kernel tests of issue 8, section 4, "What else breaks RDMA,
//! reported": ARP flux from an interface outside the config, a rail
//! without carrier, and foreign rules that shadow roce-route's or look up
//! its tables. Before, `check` said "in sync" (or suggested `apply`, which
//! cannot fix them) in every one of these cases; each test fails on that
//! behaviour for the reason its name gives.

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

/// `check CONFIG --json`, expecting exit `code`; the report.
fn check_json(tb: &Testbed, config: &str, code: i32) -> Value {
    json_doc(&tb.rr(&["--json", "check", config]).expect_code(code))
}

/// Every difference of `kind` in a check report.
fn differences<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    let all = report["differences"].as_array().unwrap_or_else(|| panic!("no differences in {report:#}"));
    all.iter().filter(|d| d["kind"] == kind).collect()
}

/// The one difference of `kind`; panics showing the report otherwise.
fn the_difference<'a>(report: &'a Value, kind: &str) -> &'a Value {
    let found = differences(report, kind);
    assert_eq!(found.len(), 1, "expected one `{kind}` difference in {report:#}");
    found[0]
}

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field].as_str().unwrap_or_else(|| panic!("`{field}` is not a string in {v:#}"))
}

fn assert_contains(haystack: &str, needles: &[&str], what: &str) {
    for n in needles {
        assert!(haystack.contains(n), "{what} lacks {n:?}:\n{haystack}");
    }
}

/// The warnings of a `--json` run.
fn warnings(doc: &Value) -> Vec<String> {
    let all = doc["warnings"].as_array().unwrap_or_else(|| panic!("no warnings array in {doc:#}"));
    all.iter().map(|w| w.as_str().unwrap_or_default().to_string()).collect()
}

/// The warning that contains `needle`; panics showing them all otherwise.
fn warning_with(doc: &Value, needle: &str) -> String {
    let all = warnings(doc);
    all.iter()
        .find(|w| w.contains(needle))
        .cloned()
        .unwrap_or_else(|| panic!("no warning with {needle:?}: {all:#?}"))
}

/// The config of the first `n` rails (tables 100+k) with `extra` TOML after
/// them; its path.
fn config_with(tb: &Testbed, n: usize, extra: &str) -> String {
    let rails = tb.render_config_for(|r| r.table < FIRST_TABLE + n as u32, |_| Vec::new());
    path_str(&tb.write_config(&format!("{rails}\n{extra}"))).to_string()
}

/// Runs the command quoted in a fix after `marker` (an `ip -n NS -4 rule
/// del ...`) exactly as printed, from the test's own namespace: a fix must
/// work as pasted, and act in the host's namespace it names, never here.
fn run_quoted_ip(tb: &Testbed, fix: &str, marker: &str) {
    let cmd = quoted_after(fix, marker).unwrap_or_else(|| panic!("no command after {marker:?} in {fix}"));
    let prefix = format!("ip -n {} ", tb.host().name());
    let args = cmd.strip_prefix(&prefix).unwrap_or_else(|| panic!("not an ip command in the host: {cmd}"));
    run("ip", &["-n", tb.host().name()].into_iter().chain(args.split_whitespace()).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------
// 1. ARP flux from an interface outside the config

/// A fifth NIC in the rails' subnet that the config does not name keeps
/// answering ARP for every configured address. Before, check said in sync.
/// Named in `[[arp_only]]`, it gets arp_ignore=1/arp_announce=2 (and
/// nothing else: no table, rule or route); remove restores its values.
#[test]
fn an_interface_outside_the_config_in_a_managed_subnet_is_arp_flux_until_named_arp_only() {
    let tb = Testbed::builder().rails(5).build();
    let four = config_with(&tb, 4, "");
    let doc = json_doc(&tb.rr(&["--json", "apply", &four]).expect_code(EXIT_OK));
    let w = warning_with(&doc, "ARP flux: rail4");
    assert_contains(&w, &["198.51.100.14/24", "[[arp_only]]"], "apply's warning");

    let report = check_json(&tb, &four, EXIT_DRIFT);
    assert_eq!(report["in_sync"], false, "{report:#}");
    let flux = the_difference(&report, "arp_flux");
    assert_contains(
        text(flux, "description"),
        &["rail4 is not in the config", "198.51.100.14/24", "arp_ignore=0", "arp_announce=0"],
        "the arp_flux difference",
    );
    assert_contains(
        text(flux, "fix"),
        &["[[arp_only]] table with name = \"rail4\"", "net.ipv4.conf.rail4.arp_ignore=1"],
        "the arp_flux fix",
    );
    // The human report names it too, with exit 3.
    tb.rr(&["check", &four]).expect_code(EXIT_DRIFT).expect_stdout(&["ARP flux: rail4", "fix: name it"]);

    // The fix: name it for its ARP sysctls only.
    let named = config_with(&tb, 4, "[[arp_only]]\nname = \"rail4\"\n");
    let doc = json_doc(&tb.rr(&["--json", "apply", &named]).expect_code(EXIT_OK));
    assert!(warnings(&doc).is_empty(), "{doc:#}");
    let changes: Vec<&str> =
        doc["changes"].as_array().unwrap().iter().map(|c| c["command"].as_str().unwrap()).collect();
    assert_eq!(
        changes,
        ["sysctl -w net.ipv4.conf.rail4.arp_ignore=1", "sysctl -w net.ipv4.conf.rail4.arp_announce=2"]
            .map(|c| in_netns(tb.host().name(), c)),
        "an [[arp_only]] interface gets its sysctls and nothing else"
    );
    assert_eq!((tb.host_sysctl("rail4", "arp_ignore"), tb.host_sysctl("rail4", "arp_announce")), (1, 2));
    assert!(!tb.owned_entries().iter().any(|e| e.contains("rail4") || e.contains("198.51.100.14")));
    assert!(!tb.ip_host("-4 rule").contains("198.51.100.14"), "{}", tb.ip_host("-4 rule"));
    let report = check_json(&tb, &named, EXIT_OK);
    assert_eq!(report["in_sync"], true, "{report:#}");
    assert!(
        report["traffic"].as_array().unwrap().iter().all(|t| t["interface"] != "rail4"),
        "no probe for an [[arp_only]] interface: {report:#}"
    );

    // remove puts back the values recorded before roce-route changed them.
    tb.rr(&["remove"]).expect_code(EXIT_OK);
    assert_eq!((tb.host_sysctl("rail4", "arp_ignore"), tb.host_sysctl("rail4", "arp_announce")), (0, 0));
}

/// A rail dropped from the config gets its recorded sysctls back, and so
/// answers ARP for the others again: apply says so as it does it, and check
/// reports it afterwards. Before, both were silent.
#[test]
fn a_rail_dropped_from_the_config_is_warned_as_arp_flux() {
    let tb = Testbed::builder().rails(3).build();
    tb.apply_ok(&tb.standard_config());
    let two = config_with(&tb, 2, "");
    let doc = json_doc(&tb.rr(&["--json", "apply", &two]).expect_code(EXIT_OK));
    let w = warning_with(&doc, "ARP flux: rail2");
    assert_contains(&w, &["once apply restores its recorded values", "arp_ignore=0"], "apply's warning");
    assert_eq!(tb.host_sysctl("rail2", "arp_ignore"), 0, "restored as before");
    let report = check_json(&tb, &two, EXIT_DRIFT);
    assert_contains(text(the_difference(&report, "arp_flux"), "description"), &["rail2"], "check");
    // Setting the values by hand, as the fix also says, settles it too.
    tb.set_host_sysctl("rail2", "arp_ignore", 1);
    tb.set_host_sysctl("rail2", "arp_announce", 2);
    check_json(&tb, &two, EXIT_OK);
}

// ---------------------------------------------------------------------------
// 2. No carrier

/// The peer's end of rail2 goes down: rail2 stays up but has no carrier,
/// its routes are `linkdown` and its traffic is lost. Before, check said in
/// sync; now it reports `no_carrier` (which no roce-route command fixes),
/// apply warns and still applies, and show shows the link state.
#[test]
fn a_rail_without_carrier_is_reported_warned_and_shown() {
    let tb = Testbed::builder().rails(3).build();
    let cfg = path_str(&tb.standard_config()).to_string();
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    check_json(&tb, &cfg, EXIT_OK);

    tb.ip_peer("link set p2 down");
    poll_until("rail2 to lose its carrier", Duration::from_secs(10), || {
        tb.host().read_file("/sys/class/net/rail2/carrier") == "0"
    });
    assert!(tb.ip_host("link show rail2").contains("NO-CARRIER"));
    assert!(
        tb.ip_host("-4 route show table 102").contains("linkdown"),
        "{}",
        tb.ip_host("route show table 102")
    );

    let report = check_json(&tb, &cfg, EXIT_DRIFT);
    let nc = the_difference(&report, "no_carrier");
    assert_contains(
        text(nc, "description"),
        &["rail2 has no carrier", "traffic from 198.51.100.12/24 is lost"],
        "the no_carrier difference",
    );
    assert_contains(text(nc, "fix"), &["roce-route cannot fix this", "cable", "switch port"], "its fix");
    assert_eq!(report["differences"].as_array().unwrap().len(), 1, "only rail2: {report:#}");

    // apply warns, changes nothing (the routes are there), exits 0.
    let run = tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    run.expect_stderr(&["warning: rail2 has no carrier"]).expect_stdout(&["in sync"]);

    // show: the link state of every rail, in words and in JSON.
    tb.rr(&["show"]).expect_code(EXIT_OK).expect_stdout(&["link: up, NO-CARRIER", "link: up, carrier"]);
    let show = json_doc(&tb.rr(&["--json", "show"]).expect_code(EXIT_OK));
    for iface in show["interfaces"].as_array().unwrap() {
        let carrier = iface["name"] != "rail2";
        assert_eq!(iface["link"], serde_json::json!({"admin_up": true, "carrier": carrier}), "{iface:#}");
    }

    // From scratch too: apply still applies, with the warning.
    tb.rr(&["remove"]).expect_code(EXIT_OK);
    let doc = json_doc(&tb.rr(&["--json", "apply", &cfg]).expect_code(EXIT_OK));
    assert_eq!(doc["changed"], true, "{doc:#}");
    warning_with(&doc, "rail2 has no carrier");
    assert!(tb.ip_host("-4 route show table 102").contains("198.51.100.0/24 dev rail2"));

    // The link is back: nothing left to report.
    tb.ip_peer("link set p2 up");
    poll_until("rail2 to get its carrier back", Duration::from_secs(10), || {
        tb.host().read_file("/sys/class/net/rail2/carrier") == "1"
    });
    check_json(&tb, &cfg, EXIT_OK);
}

// ---------------------------------------------------------------------------
// 3. Foreign rules

/// `priority 999 from 198.51.100.0/24 lookup 200`, with table 200 sending
/// the whole subnet out of rail0, comes before roce-route's rules and takes
/// every rail's traffic. Before, apply said "in sync" without a word and
/// check suggested `apply` for the wrong lookups, which cannot fix them.
/// Now apply warns naming the rule, check names it as the cause (of the
/// lookups too), and its fix, run as printed, settles it.
#[test]
fn a_rule_that_shadows_ours_is_named_as_the_cause() {
    let tb = Testbed::builder().rails(4).build();
    let cfg = path_str(&tb.standard_config()).to_string();
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    tb.ip_host("rule add priority 999 from 198.51.100.0/24 lookup 200");
    tb.ip_host("route add 198.51.100.0/24 dev rail0 table 200");
    assert_eq!(tb.route_get_dev(PEER_V4, &tb.rail(2).v4), "rail0", "the rule takes rail2's traffic");
    let rule = "priority 999 from 198.51.100.0/24 lookup 200";

    let run = tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    run.expect_stderr(&[rule, "comes before roce-route's rule (priority 1000)"]);
    let doc = json_doc(&tb.rr(&["--json", "apply", &cfg]).expect_code(EXIT_OK));
    assert_contains(&warning_with(&doc, rule), &["delete it", "cannot fix this"], "apply's warning");

    let report = check_json(&tb, &cfg, EXIT_DRIFT);
    let shadow = the_difference(&report, "shadowed");
    assert_contains(
        text(shadow, "description"),
        &[rule, "198.51.100.11 (rail1)", "198.51.100.13 (rail3)", "table 200"],
        "the shadowed difference",
    );
    let fix = text(shadow, "fix");
    let del = in_netns(tb.host().name(), "ip -4 rule del priority 999 from 198.51.100.0/24 lookup 200");
    assert_contains(fix, &[&del], "its fix");
    // Each wrong lookup names the rule as its cause, never `apply`: rails
    // 1 to 3 leave by rail0, and rail0's own traffic is looked up in table
    // 200 too.
    let traffic = differences(&report, "traffic");
    assert_eq!(traffic.len(), 4, "{report:#}");
    for t in &traffic {
        let fix = text(t, "fix");
        assert!(fix.starts_with(&format!("the cause is `ip -4 rule: {rule}`")), "{fix}");
        assert!(!fix.starts_with("roce-route"), "apply cannot fix a foreign rule: {fix}");
    }

    run_quoted_ip(&tb, fix, "delete it (");
    check_json(&tb, &cfg, EXIT_OK);
}

/// A rule with no selector at all before ours takes everything; one whose
/// source is exactly a configured address stays the conflict `--adopt`
/// takes over, and is not reported a second time as shadowing.
#[test]
fn a_rule_without_selector_shadows_and_an_exact_source_stays_a_conflict() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = path_str(&tb.standard_config()).to_string();
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    tb.ip_host("rule add priority 500 lookup 200");
    tb.ip_host("route add 198.51.100.0/24 dev rail1 table 200");
    let report = check_json(&tb, &cfg, EXIT_DRIFT);
    let shadow = the_difference(&report, "shadowed");
    assert_contains(
        text(shadow, "description"),
        &["priority 500 from all lookup 200", "198.51.100.10 (rail0)", "198.51.100.11 (rail1)"],
        "the shadowed difference",
    );
    run_quoted_ip(&tb, text(shadow, "fix"), "delete it (");
    check_json(&tb, &cfg, EXIT_OK);

    tb.ip_host("rule add priority 999 from 198.51.100.11 lookup 200");
    let report = check_json(&tb, &cfg, EXIT_DRIFT);
    assert_contains(
        text(the_difference(&report, "conflict"), "description"),
        &["priority 999 from 198.51.100.11 lookup 200"],
        "the conflict",
    );
    assert!(differences(&report, "shadowed").is_empty(), "reported twice: {report:#}");
    tb.rr(&["apply", "--adopt", &cfg]).expect_code(EXIT_OK);
    check_json(&tb, &cfg, EXIT_OK);
}

/// `fwmark 0x1 lookup 101` (not roce-route's) sends marked traffic into
/// rail1's table. Before, check said in sync; now it is
/// `foreign_rule_in_table`, apply warns, and the fix as printed settles it.
#[test]
fn a_foreign_fwmark_rule_into_a_managed_table_is_reported() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = path_str(&tb.standard_config()).to_string();
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    tb.ip_host("rule add fwmark 0x1 lookup 101");
    let rule = "fwmark 0x1 lookup 101";

    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK).expect_stderr(&[rule, "roce-route manages for rail1"]);
    let report = check_json(&tb, &cfg, EXIT_DRIFT);
    let d = the_difference(&report, "foreign_rule_in_table");
    assert_contains(text(d, "description"), &[rule, "table 101, which roce-route manages for rail1"], "it");
    assert!(differences(&report, "shadowed").is_empty(), "unmarked traffic is not taken: {report:#}");
    let fix = text(d, "fix");
    assert_contains(fix, &[&in_netns(tb.host().name(), "ip -4 rule del"), rule], "its fix");
    run_quoted_ip(&tb, fix, "delete it (");
    check_json(&tb, &cfg, EXIT_OK);
}
