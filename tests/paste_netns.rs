//! Under `--netns NS` every command roce-route prints for a person to run
//! acts in NS: `ip -n NS ...`, `ip netns exec NS sysctl ...`, and its own
//! suggestions carry `--netns NS`. Pasted as printed from the host's own
//! namespace (as an operator on that host would), a fix changes NS and
//! nothing else. Found by a newcomer: `fix: ip -4 rule add ...` and
//! `sysctl -w net.ipv4.conf.rail2.arp_ignore=1` changed the host's own.

mod common;

use common::*;

/// Every command `text` offers to run that does not act in `ns`: a line
/// that is a command (or a `fix:` one), a span in backticks. An entry as
/// `ip` lists it (`ip -4 rule: ...`) is not a command.
fn commands_outside(text: &str, ns: &str) -> Vec<String> {
    let mut bad = Vec::new();
    // `own`: whether a roce-route command line is one too (a span, a fix),
    // not a line of output that starts with the program's name.
    let mut check = |cmd: &str, own: bool| {
        for part in cmd.split("; ") {
            let part = part.trim();
            let is_entry = part.split_whitespace().nth(2).is_some_and(|w| w.ends_with(':'))
                || part.split_whitespace().nth(1).is_some_and(|w| w.ends_with(':'));
            let ip = part.starts_with("ip ")
                && !is_entry
                && !part.starts_with(&format!("ip -n {ns} "))
                && !part.starts_with(&format!("ip netns exec {ns} sysctl "));
            let sysctl = part.starts_with("sysctl ");
            let roce_route = own
                && part.starts_with("roce-route ")
                && !part.starts_with(&format!("roce-route --netns {ns} "));
            if ip || sysctl || roce_route {
                bad.push(part.to_string());
            }
        }
    };
    for line in text.lines() {
        let body = line.trim_start();
        match body.strip_prefix("fix: ") {
            Some(fix) => check(fix, true),
            None => check(body, false),
        }
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 {
                check(span, true);
            }
        }
    }
    bad
}

/// `commands_outside` of every string of a JSON document.
fn json_commands_outside(doc: &serde_json::Value, ns: &str, bad: &mut Vec<String>) {
    match doc {
        serde_json::Value::String(s) => bad.extend(commands_outside(s, ns)),
        serde_json::Value::Array(a) => a.iter().for_each(|v| json_commands_outside(v, ns, bad)),
        serde_json::Value::Object(o) => o.values().for_each(|v| json_commands_outside(v, ns, bad)),
        _ => {}
    }
}

fn assert_all_in(ns: &str, what: &str, text: &str) {
    let bad = commands_outside(text, ns);
    assert!(bad.is_empty(), "{what}: commands that would act outside {ns}: {bad:#?}\n--- output ---\n{text}");
}

fn assert_json_all_in(ns: &str, what: &str, run: &Run) {
    let doc = json_doc(run);
    let mut bad = Vec::new();
    json_commands_outside(&doc, ns, &mut bad);
    assert!(bad.is_empty(), "{what}: commands that would act outside {ns}: {bad:#?}\n{doc:#}");
}

/// Five rails, a config of the first four: rail4 is outside it in the
/// managed subnet (ARP flux). The testbed, its namespace, the config.
fn flux_host() -> (Testbed, String, std::path::PathBuf) {
    let tb = Testbed::builder().rails(5).build();
    let ns = tb.host().name().to_string();
    let rails = tb.render_config_for(|r| r.table < FIRST_TABLE + 4, |_| Vec::new());
    let cfg = tb.write_config(&rails);
    (tb, ns, cfg)
}

/// A host whose output holds every kind of printed command: rail4 outside
/// the config in the managed subnet (ARP flux: a sysctl fix and an apply to
/// run), a listed address rail0 lacks (not ready: `ip addr add`), a rail
/// down (`ip link set ... up`) and, after apply, a rule and a sysctl taken
/// away (check's `fix:` lines).
#[test]
fn every_printed_command_acts_in_the_namespace_of_the_run() {
    let (tb, ns, cfg) = flux_host();
    let cfg = path_str(&cfg);
    let missing = tb.write_config(
        "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.99/24\"]\n\n[[interface]]\nname = \"rail1\"\n",
    );
    let missing = path_str(&missing);

    // The dry run's script, its comments and the warnings.
    let dry = tb.rr(&["apply", "--dry-run", cfg]).expect_code(EXIT_OK);
    assert!(dry.stdout().contains(&format!("ip -n {ns} -4 rule add")), "{}", dry.report());
    assert_all_in(&ns, "apply --dry-run", &format!("{}{}", dry.stdout(), dry.stderr()));
    let dry = tb.rr(&["apply", "--dry-run", missing]).expect_code(5);
    assert!(dry.stderr().contains(&format!("`ip -n {ns} addr add 198.51.100.99/")), "{}", dry.report());
    assert_all_in(&ns, "a not-ready dry run", &format!("{}{}", dry.stdout(), dry.stderr()));
    assert_json_all_in(&ns, "apply --dry-run --json", &tb.rr(&["--json", "apply", "--dry-run", missing]));

    // apply's ARP-flux warning names the apply to run, with --netns.
    let applied = tb.rr(&["apply", "--no-announce", cfg]).expect_code(EXIT_OK);
    let apply_cmd = format!("`roce-route --netns {ns} --state-dir ");
    assert!(applied.stderr().contains(&apply_cmd), "the ARP-flux warning's apply:\n{}", applied.report());
    assert!(
        applied.stderr().contains(&format!("`ip netns exec {ns} sysctl -w net.ipv4.conf.rail4.arp_ignore=1")),
        "{}",
        applied.report()
    );
    assert_all_in(&ns, "apply", &format!("{}{}", applied.stdout(), applied.stderr()));

    // check after a rule and a sysctl were taken away, and a rail is down.
    tb.ip_host("-4 rule del priority 1000 from 198.51.100.12 lookup 102");
    tb.host().exec("sysctl", &["-qw", "net.ipv4.conf.rail2.arp_ignore=0"]);
    tb.ip_host("link set rail3 down");
    let check = tb.rr(&["check", cfg]).expect_code(EXIT_DRIFT);
    let rule_fix =
        format!("fix: ip -n {ns} -4 rule add priority 1000 from 198.51.100.12 lookup 102 proto 234");
    let sysctl_fix = format!("fix: ip netns exec {ns} sysctl -w net.ipv4.conf.rail2.arp_ignore=1");
    check.expect_stdout(&[&rule_fix, &sysctl_fix]);
    assert_all_in(&ns, "check", &format!("{}{}", check.stdout(), check.stderr()));
    let json = tb.rr(&["--json", "check", cfg]);
    assert_json_all_in(&ns, "check --json", &json);
    assert_all_in(&ns, "show", &tb.rr(&["show", cfg]).stdout());
    assert_json_all_in(&ns, "show --json", &tb.rr(&["--json", "show", cfg]));

    // Pasted as printed from this namespace, the two fixes repair the host.
    tb.ip_host("link set rail3 up");
    for fix in [&rule_fix, &sysctl_fix] {
        let line = fix.strip_prefix("fix: ").unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        run(words[0], &words[1..]);
    }
    let after = tb.rr(&["--json", "check", cfg]);
    let kinds: Vec<String> = json_doc(&after)["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !kinds.iter().any(|k| k == "missing_rule" || k == "sysctl"),
        "the pasted fixes did not reach the namespace: {kinds:?}"
    );
}

/// With no apply recorded, probe and nccl-env say which command to give,
/// with this run's --netns (after `remove` a bare `roce-route probe CONFIG`
/// would ask about the host's own namespace).
#[test]
fn commands_without_a_config_suggest_the_full_command() {
    let tb = Testbed::builder().rails(1).build();
    let ns = tb.host().name();
    for (args, want) in [
        (&["probe", "--peer", "198.51.100.20"][..], format!("`roce-route --netns {ns} --state-dir ")),
        (&["nccl-env"][..], format!("`roce-route --netns {ns} --state-dir ")),
    ] {
        let run = tb.rr(args).expect_code(EXIT_INVALID);
        assert!(run.stderr().contains(&want), "{args:?}:\n{}", run.report());
        assert_all_in(ns, &format!("{args:?}"), &run.stderr());
    }
}

/// On a terminal a long warning is wrapped to its width, never inside a
/// command in backquotes (copied from the screen, a command is one line);
/// on a pipe each warning stays one line, for a log and grep.
#[test]
fn a_long_warning_is_wrapped_to_the_terminal_but_not_its_commands() {
    use std::process::Command;
    let (tb, ns, cfg) = flux_host();
    let cfg = path_str(&cfg);
    let line = format!(
        "stty rows 24 cols 72; {} --netns {ns} apply --no-announce {cfg}",
        env!("CARGO_BIN_EXE_roce-route")
    );
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("ROCE_ROUTE_STATE_DIR", tb.state_base())
        .output()
        .expect("script (bsdutils) runs");
    let screen = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(out.status.success(), "{screen}");
    let warning: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.starts_with("roce-route: warning: ARP flux: rail4"))
        .take_while(|l| *l == screen.lines().find(|l| l.contains("ARP flux")).unwrap() || l.starts_with("  "))
        .collect();
    assert!(warning.len() > 3, "the ARP-flux warning is not wrapped on a 72-column terminal:\n{screen}");
    for l in &warning {
        assert!(l.chars().count() <= 72 || l.contains('`'), "a line past 72 columns: {l:?}\n{screen}");
        assert_eq!(l.matches('`').count() % 2, 0, "a command in backquotes is broken across lines: {l:?}");
    }
    let sysctl = format!("`ip netns exec {ns} sysctl -w net.ipv4.conf.rail4.arp_ignore=1");
    assert!(warning.iter().any(|l| l.contains(&sysctl)), "{screen}");

    // Not on a terminal: one line.
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    let applied = tb.rr(&["apply", "--no-announce", cfg]).expect_code(EXIT_OK);
    let flux: Vec<String> =
        applied.stderr().lines().filter(|l| l.contains("ARP flux")).map(String::from).collect();
    assert_eq!(flux.len(), 1, "{}", applied.report());
    assert!(flux[0].contains("yourself)") && flux[0].chars().count() > 300, "{}", applied.report());
}
