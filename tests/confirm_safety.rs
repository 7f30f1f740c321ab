//! `apply --confirm` holds between any two syscalls (issue 15, item 1): the
//! guard owns the deadline before the first netlink message, so a SIGKILL
//! of the apply at any instant of its change, or after it, ends with the
//! host exactly as before at the deadline, with no other command run; and
//! a `confirm` that comes while the change is still being made keeps the
//! whole change, never a part of it.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use common::*;

const SIGKILL: i32 = 9;
const CONFIRM_SECONDS: u64 = 3;

/// The apply's steps on the current host (the dry run's command lines).
fn step_count(tb: &Testbed, config: &str) -> usize {
    let out = tb.rr(&["apply", "--dry-run", config]).expect_code(EXIT_OK).stdout();
    out.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).count()
}

/// Waits (bounded) until the host is as `before` and the guard is gone,
/// with no command of ours run in between.
/// With `changed` (the kill left a change in place), the revert comes at
/// the deadline, not before.
fn assert_reverted_by_the_deadline(tb: &Testbed, before: &str, started: Instant, changed: bool, what: &str) {
    let limit = Duration::from_secs(CONFIRM_SECONDS + 8);
    poll_until(&format!("the revert after {what}"), limit, || tb.dump() == before);
    let took = started.elapsed();
    assert!(
        !changed || took >= Duration::from_secs(CONFIRM_SECONDS) - Duration::from_millis(500),
        "{what}: reverted after {took:?}, before the deadline of {CONFIRM_SECONDS} s"
    );
    poll_until(&format!("the guard to finish after {what}"), limit, || !guard_armed(&tb.state_base()));
    assert!(journal_files(&tb.state_base()).is_empty(), "{what}: the trial's journal is left");
    assert_dump_eq(before, &tb.dump(), what);
}

/// SIGKILL of `apply --confirm` from the test hooks at each instant of a
/// change: between the journal and the record writes, before the first
/// step, after the first, a middle and the last step, and after the
/// commit (where the guard used to be started only): the host is as
/// before once the deadline has passed.
#[test]
fn a_confirm_apply_killed_at_any_instant_is_reverted_at_the_deadline() {
    let tb = Testbed::builder().rails(3).build();
    let config = tb.standard_config();
    let config = path_str(&config);
    let before = tb.dump();
    let steps = step_count(&tb, config);
    assert!(steps >= 6, "a change of {steps} steps is too small for this test");
    let points = [
        "step:0".to_string(),
        format!("step:{}", steps / 2),
        format!("step:{}", steps - 1),
        "committed:0".to_string(),
        "journal:0".to_string(),
        "record:0".to_string(),
    ];
    for point in points {
        let started = Instant::now();
        let mut cmd = tb.rr_cmd(&["apply", "--confirm", &CONFIRM_SECONDS.to_string(), config]);
        cmd.env("ROCE_ROUTE_CRASH_AT", &point);
        let run = Run::of(cmd);
        assert_eq!(
            run.out.status.signal(),
            Some(SIGKILL),
            "{point}: should die by SIGKILL\n{}",
            run.report()
        );
        let changed = point.starts_with("step") || point.starts_with("committed");
        if changed {
            assert_ne!(tb.dump(), before, "{point}: the killed apply changed nothing");
        }
        assert_reverted_by_the_deadline(&tb, &before, started, changed, &format!("SIGKILL at {point}"));
    }
    // The host is usable afterwards: the same apply, confirmed, goes through.
    tb.apply(std::path::Path::new(config), &[]).expect_code(EXIT_OK);
}

/// The field test: `kill -9` of `apply --confirm` as soon as `ip route get
/// ... from RAIL2` shows the new table, with slow steps so that the kill
/// falls in the middle of the change.
#[test]
fn a_confirm_apply_killed_when_the_first_rail_routes_is_reverted() {
    let tb = Testbed::builder().rails(3).build();
    let config = tb.standard_config();
    let before = tb.dump();
    let rail = tb.rail(2);
    let mut cmd = tb.rr_cmd(&["apply", "--confirm", &CONFIRM_SECONDS.to_string(), path_str(&config)]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", "40");
    let started = Instant::now();
    let mut apply = Background::spawn(cmd, "apply --confirm (slow steps)");
    let routed =
        |tb: &Testbed| tb.route_get(tb.peer_v4(), &rail.v4).contains(&format!("table {}", rail.table));
    poll_until("rail2's own table in use", Duration::from_secs(10), || routed(&tb));
    apply.kill();
    assert!(routed(&tb), "the change is not in place when apply was killed");
    assert_reverted_by_the_deadline(&tb, &before, started, true, "kill -9 when rail2 routed");
}

/// A `confirm` that arrives while the change is still being made waits for
/// it and keeps all of it. The window exists since the guard is armed
/// before the change (the old code wrote `pending` only after it, so this
/// passes there): without the guard's `ready` gate the confirm kept a half
/// change and the apply failed with exit 4.
#[test]
fn a_confirm_during_the_change_keeps_the_whole_change() {
    let tb = Testbed::builder().rails(3).build();
    let config = tb.standard_config();
    let reference = {
        tb.apply(&config, &["--no-announce"]).expect_code(EXIT_OK);
        let applied = tb.dump();
        tb.rr(&["rollback"]).expect_code(EXIT_OK);
        applied
    };
    let mut cmd = tb.rr_cmd(&["apply", "--no-announce", "--confirm", "30", path_str(&config)]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", "60");
    let apply = Background::spawn(cmd, "apply --confirm 30 (slow steps)");
    poll_until("the guard to be armed", Duration::from_secs(10), || guard_armed(&tb.state_base()));
    let confirmed = tb.rr(&["confirm"]).expect_code(EXIT_OK);
    assert!(!confirmed.stdout().contains("error"), "{}", confirmed.report());
    apply.wait_timeout(Duration::from_secs(20)).expect_code(EXIT_OK);
    assert_dump_eq(&reference, &tb.dump(), "a change confirmed while it was being made");
}

fn pending_doc(tb: &Testbed) -> serde_json::Value {
    let text = std::fs::read_to_string(tb.ns_state_dir().join("pending")).expect("a pending file");
    serde_json::from_str(&text).unwrap()
}

fn kill9(pid: u64) {
    let out = std::process::Command::new("kill").args(["-9", &pid.to_string()]).output().unwrap();
    assert!(out.status.success(), "kill -9 {pid}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The guard dies (SIGKILL, as the OOM killer would) while the apply is
/// still making the change: the apply, the last process that can, reverts
/// the trial itself and says so (exit 1), leaving no `pending`.
#[test]
fn the_apply_reverts_the_trial_itself_when_its_guard_dies() {
    let tb = Testbed::builder().rails(3).build();
    let config = tb.standard_config();
    let before = tb.dump();
    let mut cmd = tb.rr_cmd(&["apply", "--no-announce", "--confirm", "60", path_str(&config)]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", "60");
    let apply = Background::spawn(cmd, "apply --confirm 60 (slow steps)");
    poll_until("the change under way", Duration::from_secs(10), || !tb.owned_entries().is_empty());
    kill9(pending_doc(&tb)["guard_pid"].as_u64().unwrap());
    let run = apply.wait_timeout(Duration::from_secs(30));
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    run.expect_stderr(&["stopped without an answer", "rolled back"]);
    assert_dump_eq(&before, &tb.dump(), "after the guard died mid-change");
    assert!(!guard_armed(&tb.state_base()), "pending left behind");
}

/// Guard and apply both killed during the trial, no watch running: the
/// next plain apply reverts the orphaned trial first (and says so), then
/// applies; nothing is left that would make a later watch fail its passes.
#[test]
fn an_orphaned_trial_is_reverted_by_the_next_apply() {
    let tb = Testbed::builder().rails(3).build();
    let all = tb.standard_config();
    tb.apply(&all, &["--no-announce"]).expect_code(EXIT_OK);
    let applied = tb.dump();
    let two = tb.config_for(2, &[]);
    let mut apply = Background::spawn(
        tb.rr_cmd(&["apply", "--no-announce", "--confirm", "60", &two]),
        "apply --confirm 60 of two rails",
    );
    poll_until("the trial", Duration::from_secs(10), || confirmation_pending(&tb.state_base()));
    // The apply first: alive, it would revert the trial itself once its
    // guard died.
    let guard = pending_doc(&tb)["guard_pid"].as_u64().unwrap();
    apply.kill();
    kill9(guard);
    assert_ne!(tb.dump(), applied, "the trial is in place");
    let run = tb.apply(&all, &["--no-announce"]).expect_code(EXIT_OK);
    run.expect_stderr(&["is gone without an answer", "reverted its unconfirmed change"]);
    assert!(!guard_armed(&tb.state_base()), "pending left behind");
    assert_dump_eq(&applied, &tb.dump(), "the first config, with the trial reverted");
    // Back to the first apply: a rollback now undoes that one.
    let doc = json_doc(&tb.rr(&["--json", "rollback", "--dry-run"]));
    assert_eq!(doc["undid"], "apply", "{doc}");
}

/// The same with a trial that added a rail the next apply's config does
/// not name: that apply knows only its own links (it asks for them by
/// name), so the revert's steps on the third rail find its index by name
/// on their own. (Red when they could not: a missing index reads as
/// "already undone", the revert skipped rail2's route, and the apply had
/// to delete it.)
#[test]
fn an_orphaned_trial_on_a_rail_outside_the_next_config_is_reverted() {
    let tb = Testbed::builder().rails(3).build();
    let two = tb.config_for(2, &[]);
    tb.apply(std::path::Path::new(&two), &["--no-announce"]).expect_code(EXIT_OK);
    let applied = tb.dump();
    let all = tb.standard_config();
    let mut apply = Background::spawn(
        tb.rr_cmd(&["apply", "--no-announce", "--confirm", "60", path_str(&all)]),
        "apply --confirm 60 of three rails",
    );
    poll_until("the trial", Duration::from_secs(10), || confirmation_pending(&tb.state_base()));
    let guard = pending_doc(&tb)["guard_pid"].as_u64().unwrap();
    apply.kill();
    kill9(guard);
    assert!(tb.owned_entries().iter().any(|e| e.contains("rail2")), "the trial is in place:\n{}", tb.dump());
    let run = tb.apply(std::path::Path::new(&two), &["--no-announce"]).expect_code(EXIT_OK);
    run.expect_stderr(&["reverted its unconfirmed change"]);
    // The revert did it all: the apply after it has nothing left to do
    // (it deleted rail2's route itself when the revert had skipped it).
    run.expect_stdout(&["in sync, nothing changed"]);
    assert_dump_eq(&applied, &tb.dump(), "the two rails, the third's trial reverted");
}

/// An `apply --confirm` that finds the host in sync ends at once, its guard
/// with it: the next apply is not refused for a trial that changed nothing.
#[test]
fn a_confirm_apply_in_sync_releases_its_guard_at_once() {
    let tb = Testbed::builder().rails(2).build();
    let config = tb.standard_config();
    tb.apply(&config, &["--no-announce"]).expect_code(EXIT_OK);
    let run = Background::spawn(
        tb.rr_cmd(&["apply", "--no-announce", "--confirm", "120", path_str(&config)]),
        "apply --confirm 120 (in sync)",
    )
    .wait_timeout(Duration::from_secs(20));
    run.expect_code(EXIT_OK).expect_stdout(&["in sync"]);
    poll_until("the guard to end", Duration::from_secs(5), || !guard_armed(&tb.state_base()));
    tb.apply(&config, &["--no-announce"]).expect_code(EXIT_OK);
}

/// A guard that does not answer the `status` of the apply that started it
/// (it stopped itself: the ROCE_ROUTE_GUARD_STALL hook) is stopped by that
/// apply when it gives up on it after 10 s: no process, no socket, no
/// `pending` left, and the next apply runs. (Red when it was left running:
/// the next apply was refused, a guard listening "for another apply
/// --confirm", in the name of the apply that had given up.)
#[test]
fn a_guard_that_does_not_answer_is_stopped_when_the_apply_gives_up() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.standard_config();
    let mut cmd = tb.rr_cmd(&["apply", "--confirm", "120", path_str(&cfg)]);
    cmd.env("ROCE_ROUTE_GUARD_STALL", "1");
    let run = Run::of(cmd);
    assert_ne!(run.code(), Some(EXIT_OK), "{}", run.report());
    let err = run.stderr();
    let pid: u32 = err
        .split("guard (pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no guard pid in: {}", run.report()));
    assert!(err.contains("did not start"), "{}", run.report());
    assert!(tb.owned_entries().is_empty(), "nothing was changed: {:?}", tb.owned_entries());
    let next = tb.apply(&cfg, &[]);
    let left_running = std::path::Path::new(&format!("/proc/{pid}")).exists();
    if left_running {
        kill9(u64::from(pid));
    }
    assert_eq!(next.code(), Some(EXIT_OK), "the next apply: {}", next.report());
    assert!(!left_running, "the guard {pid} apply gave up on is still there");
    assert!(!guard_armed(&tb.state_base()), "pending is left");
}
