//! Crash safety on a real kernel: roce-route is SIGKILLed at every point of
//! a large transaction, and `rollback` (or a second `apply`) must always
//! bring the host to a clean state.
//!
//! The crash points are the test hooks of `src/testhooks.rs`:
//! `ROCE_ROUTE_CRASH_AT=record:K` kills the process right after the undo
//! record of step K is durable (step K was NOT sent), `step:K` right after
//! step K was made. Every run uses the test's own state dir
//! (`<testbed temp dir>/state`, as ROCE_ROUTE_STATE_DIR). Every apply runs
//! with `--no-announce`: the announcements come after the commit, have
//! nothing to do with crash safety, and would add 100 ms to each of the
//! hundreds of applies here (tests/announce.rs covers them).

mod common;

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::Instant;

use common::{
    EXIT_FAILED, EXIT_OK, GATEWAY_V4, PEER_V4, Run, Testbed, assert_dump_eq, journal_files, path_str,
    toml_str,
};

const RAILS: usize = 32;
const SIGKILL: i32 = 9;

// ---------------------------------------------------------------------------
// Running roce-route

/// `apply CONFIG` with a crash point; panics unless the process died of
/// SIGKILL.
fn apply_crashing(tb: &Testbed, config: &str, point: &str) {
    let mut cmd = tb.rr_cmd(&["apply", "--no-announce", config]);
    cmd.env("ROCE_ROUTE_CRASH_AT", point);
    let run = Run::of(cmd);
    assert_eq!(
        run.out.status.signal(),
        Some(SIGKILL),
        "apply with ROCE_ROUTE_CRASH_AT={point} should die by SIGKILL\n{}",
        run.report()
    );
}

// ---------------------------------------------------------------------------
// The large transaction

/// 32 dual-stack rails, each with explicit IPv4 and IPv6 addresses and the
/// peer's IPv4 gateway, plus foreign state roce-route must leave alone: a
/// rule and a route of table 50, and a hand-set arp_ignore on rail5 (which
/// apply changes and rollback must restore).
fn large_host() -> (Testbed, PathBuf) {
    let tb = Testbed::builder().rails(RAILS).ipv6(true).build();
    tb.ip_host("rule add priority 500 from 203.0.113.5 lookup 50");
    tb.ip_host(&format!("route add 192.0.2.0/24 via {PEER_V4} dev rail0 table 50"));
    tb.set_host_sysctl("rail5", "arp_ignore", 2);
    let config = tb.write_config(&tb.render_config(|_| vec![format!("gateway = {}", toml_str(GATEWAY_V4))]));
    (tb, config)
}

/// The steps of `apply` on the current host: the command lines of the
/// dry-run script.
fn dry_run_steps(tb: &Testbed, config: &str) -> Vec<String> {
    let out = tb.rr(&["apply", "--no-announce", "--dry-run", config]).context("dry run").expect_code(EXIT_OK);
    out.stdout()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// SIGKILL at every step of a 32-rail dual-stack apply, before and after
/// the step is sent: rollback always restores the original host exactly,
/// and a second apply always completes the transaction.
#[test]
fn a_crash_at_any_point_is_rolled_back_or_completed() {
    let started = Instant::now();
    let (tb, config) = large_host();
    let config = path_str(&config).to_string();
    let base = tb.state_base();

    let original = tb.dump();
    assert!(original.contains("from 203.0.113.5 lookup 50"), "{original}");
    assert!(original.contains("conf/rail5/arp_ignore = 2"), "{original}");
    let steps = dry_run_steps(&tb, &config);
    let n = steps.len();
    // Per rail: IPv4 and IPv6 subnet routes, the IPv4 default route, two
    // rules, arp_ignore and arp_announce.
    assert_eq!(n, RAILS * 7, "unexpected plan:\n{}", steps.join("\n"));

    // The applied state, from a clean apply; and rollback restores the
    // original from it.
    tb.rr(&["apply", "--no-announce", &config]).context("clean apply").expect_code(EXIT_OK);
    let applied = tb.dump();
    assert_ne!(applied, original);
    assert!(applied.contains("from 203.0.113.5 lookup 50"), "{applied}");
    tb.rr(&["rollback"]).context("clean rollback").expect_code(EXIT_OK);
    assert_dump_eq(&original, &tb.dump(), "after a clean apply and rollback");
    assert!(journal_files(&base).is_empty());
    let setup = started.elapsed();

    // Every k (no sampling): the whole loop stays well under 3 minutes.
    let mut iterations = 0;
    for point in ["record", "step"] {
        for (k, step) in steps.iter().enumerate() {
            let crash = format!("{point}:{k}");
            let at = format!("crash at {crash} (step: `{step}`)");

            // 1-2: crash, then rollback the unfinished journal.
            apply_crashing(&tb, &config, &crash);
            let out = tb.rr(&["rollback"]).context(&format!("rollback after {at}")).expect_code(EXIT_OK);
            let said = out.stdout();
            assert!(
                said.contains("had not finished"),
                "rollback after {at} should say the apply had not finished:\n{said}"
            );
            assert_dump_eq(&original, &tb.dump(), &format!("rollback after {at}"));

            // 3: crash again, then a plain apply completes it.
            apply_crashing(&tb, &config, &crash);
            tb.rr(&["apply", "--no-announce", &config])
                .context(&format!("apply after {at}"))
                .expect_code(EXIT_OK);
            assert_dump_eq(&applied, &tb.dump(), &format!("apply after {at}"));
            // Two journals (or one when the crash had made every step):
            // both rollbacks succeed and end at the original host.
            tb.rr(&["rollback"])
                .context(&format!("1st rollback after apply after {at}"))
                .expect_code(EXIT_OK);
            tb.rr(&["rollback"])
                .context(&format!("2nd rollback after apply after {at}"))
                .expect_code(EXIT_OK);
            assert_dump_eq(&original, &tb.dump(), &format!("two rollbacks after {at}"));
            let left = journal_files(&base);
            assert!(left.is_empty(), "{at}: journals left behind: {left:?}");
            iterations += 1;
        }
    }
    eprintln!(
        "crash loop: {n} steps, {iterations} crash points, setup {:.1?}, total {:.1?}",
        setup,
        started.elapsed()
    );
}

/// Garbage in the middle of the newest journal: rollback refuses to act on
/// it, names the file and says it is corrupt, and touches nothing.
#[test]
fn a_corrupt_journal_is_refused_and_the_host_untouched() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let config = tb.write_config(&tb.config_toml_with_gateway());
    let config = path_str(&config);
    let base = tb.state_base();

    tb.rr(&["apply", "--no-announce", config]).context("apply").expect_code(EXIT_OK);
    let applied = tb.dump();
    let journals = journal_files(&base);
    assert_eq!(journals.len(), 1, "one apply, one journal: {journals:?}");
    let journal = &journals[0];
    let text = fs::read_to_string(journal).expect("read the journal");
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 4, "a short journal:\n{text}");
    // Header (line 1), step lines, commit line: replace line 3.
    let bad_line = 3;
    lines[bad_line - 1] = "{\"step\": 1, \"undo\": garbage";
    fs::write(journal, lines.join("\n") + "\n").expect("write the journal");

    let out = tb.rr(&["rollback"]).context("rollback of a corrupt journal").expect_code(EXIT_FAILED);
    let stderr = out.stderr();
    let name = journal.file_name().unwrap().to_string_lossy();
    assert!(stderr.contains(&*name), "the error should name {name}:\n{stderr}");
    assert!(
        stderr.contains("corrupt") || stderr.contains(&format!("line {bad_line}")),
        "the error should say the journal is corrupt or name line {bad_line}:\n{stderr}"
    );
    eprintln!("rollback of a corrupt journal: {}", stderr.trim());
    assert_dump_eq(&applied, &tb.dump(), "after rollback of a corrupt journal");
    assert!(journal.exists(), "the corrupt journal must be kept for inspection");
}

/// SIGKILL at every step of a CHANGE (replaces, deletes and sysctl
/// restores, not only adds): from an applied 6-rail host to a config that
/// moves the gateway, drops two rails and overrides a sysctl. Rollback
/// always gives the applied host back, and a new apply always completes.
#[test]
fn a_crash_at_any_point_of_a_change_is_rolled_back_or_completed() {
    let tb = Testbed::builder().rails(6).ipv6(true).build();
    let before = tb.write_config(&tb.render_config(|_| vec![format!("gateway = {}", toml_str(GATEWAY_V4))]));
    let before = path_str(&before).to_string();
    tb.rr(&["apply", "--no-announce", &before]).context("the starting apply").expect_code(EXIT_OK);
    let start = tb.dump();
    let kept = |r: &common::Rail| r.table < common::FIRST_TABLE + 4;
    let after = tb.render_config_for(kept, |r| {
        let mut keys = vec![format!("gateway = {}", toml_str(PEER_V4))];
        if r.table == common::FIRST_TABLE + 1 {
            keys.push("arp_ignore = 2".into());
        }
        keys
    });
    let after = path_str(&tb.write_config(&after)).to_string();
    let steps = dry_run_steps(&tb, &after);
    for kind in ["replace", "del", "sysctl"] {
        assert!(steps.iter().any(|s| s.contains(kind)), "the change has no {kind} step: {steps:#?}");
    }
    tb.rr(&["apply", "--no-announce", &after]).context("the clean change").expect_code(EXIT_OK);
    let changed = tb.dump();
    tb.rr(&["rollback"]).context("rollback of the clean change").expect_code(EXIT_OK);
    assert_dump_eq(&start, &tb.dump(), "rollback of the clean change");

    for (k, step) in steps.iter().enumerate() {
        for point in [format!("record:{k}"), format!("step:{k}")] {
            let what = format!("crash at {point} ({step})");
            apply_crashing(&tb, &after, &point);
            tb.rr(&["rollback"]).context(&what).expect_code(EXIT_OK);
            assert_dump_eq(&start, &tb.dump(), &format!("{what}, then rollback"));
            apply_crashing(&tb, &after, &point);
            let completing = tb.rr(&["apply", "--no-announce", &after]).context(&what).expect_code(EXIT_OK);
            assert_dump_eq(&changed, &tb.dump(), &format!("{what}, then apply"));
            // A crash after the last step leaves nothing to complete: that
            // apply is in sync and pushes no journal of its own.
            let journals = if completing.stdout().contains("in sync") { 1 } else { 2 };
            for _ in 0..journals {
                tb.rr(&["rollback"]).context(&what).expect_code(EXIT_OK);
            }
            assert_dump_eq(&start, &tb.dump(), &format!("{what}, then apply and rollbacks"));
        }
    }
}
