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
