//! Endurance on a real kernel: 100 rounds of apply, check and rollback on a
//! 64-rail host leave nothing behind: the host state and the state dir are
//! exactly as before after each round.
//!
//! Memory is not asserted here: each round starts fresh processes, so a
//! "flat peak RSS" across rounds could only fail through state that grows,
//! and the state dir is compared file by file instead. (A long-running
//! process is where memory over time means something.)
//!
//! Timings are printed, never asserted (they are measured by the benchmark).

mod common;

use std::time::{Duration, Instant};

use common::{Run, Testbed, assert_dump_eq, path_str, state_files, toml_list, toml_str};

const RAILS: usize = 64;
const ROUNDS: usize = 100;
/// Rounds compared at each end of the run.
const WINDOW: usize = 10;

/// The second address of rail k. Each rail has two IPv4 addresses, in two
/// subnets: 198.51.100.(10+k)/24 (from the testbed) and
/// 203.0.113.(10+k)/24. Two addresses of ONE family on one interface is
/// the case IPv4+IPv6 would not cover: two connected routes in the rail's
/// table and two source rules pointing at it (dual-stack is covered by the
/// crash test). 64 rails x 2 addresses fit in the two /24s.
fn second_v4(k: usize) -> String {
    format!("203.0.113.{}", 10 + k)
}

/// A timed roce-route run.
struct Measured {
    run: Run,
    wall: Duration,
}

/// Runs `roce-route --netns <host ns> ARGS` with the test's own state dir;
/// panics unless it exits 0.
fn run_measured(tb: &Testbed, args: &[&str]) -> Measured {
    let started = Instant::now();
    let run = tb.rr(args);
    let wall = started.elapsed();
    assert_eq!(run.code(), Some(0), "roce-route {args:?} failed\n{}", run.report());
    Measured { run, wall }
}

/// Every rail with its two addresses and its table.
fn config(tb: &Testbed) -> String {
    tb.rails()
        .iter()
        .enumerate()
        .map(|(k, r)| {
            format!(
                "[[interface]]\nname = {}\naddresses = {}\ntable = {}\n",
                toml_str(&r.name),
                toml_list(&[r.v4_cidr(), format!("{}/24", second_v4(k))]),
                r.table
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn median(values: &[Duration]) -> Duration {
    let mut v = values.to_vec();
    v.sort();
    v[v.len() / 2]
}

/// 100 rounds of apply -> check -> rollback on 64 rails with two addresses
/// each: every round ends with the original host and the same state files.
#[test]
fn a_hundred_apply_check_rollback_rounds_leave_nothing_behind() {
    let started = Instant::now();
    let tb = Testbed::builder().rails(RAILS).build();
    for (k, r) in tb.rails().iter().enumerate() {
        tb.ip_host(&format!("addr add {}/24 dev {}", second_v4(k), r.name));
    }
    let config = tb.write_config(&config(&tb));
    let config = path_str(&config);
    let base = tb.state_base();
    let original = tb.dump();

    // Warm-up: creates the state dir, its lock and the recorded sysctl
    // origins, which then stay the same from round to round.
    // 64 rails x (2 connected routes, 2 rules, 2 sysctls).
    let applied_line = format!("applied {} changes", RAILS * 6);
    let first = run_measured(&tb, &["apply", "--no-announce", config]);
    let said = first.run.stdout();
    assert!(said.contains(&applied_line), "warm-up apply said\n{said}");
    run_measured(&tb, &["rollback"]);
    assert_dump_eq(&original, &tb.dump(), "warm-up round");
    let idle_files = state_files(&base);
    assert!(!idle_files.iter().any(|f| f.contains("journal-")), "{idle_files:?}");
    let setup = started.elapsed();

    let mut round_wall = Vec::with_capacity(ROUNDS);
    let mut apply_wall = Vec::with_capacity(ROUNDS);
    for round in 1..=ROUNDS {
        let round_started = Instant::now();
        let apply = run_measured(&tb, &["apply", "--no-announce", config]);
        let said = apply.run.stdout();
        assert!(said.contains(&applied_line), "round {round}: apply said\n{said}");
        run_measured(&tb, &["check", config]);
        run_measured(&tb, &["rollback"]);
        round_wall.push(round_started.elapsed());
        apply_wall.push(apply.wall);
        assert_dump_eq(&original, &tb.dump(), &format!("round {round}"));
        assert_eq!(state_files(&base), idle_files, "round {round}: state dir files");
    }

    eprintln!(
        "endurance: {RAILS} rails, {ROUNDS} rounds; setup {setup:.1?}, total {:.1?}",
        started.elapsed()
    );
    eprintln!(
        "  median round wall time: rounds 1-{WINDOW} {:.1?}, rounds {}-{ROUNDS} {:.1?} (apply alone: {:.1?} / {:.1?})",
        median(&round_wall[..WINDOW]),
        ROUNDS - WINDOW + 1,
        median(&round_wall[ROUNDS - WINDOW..]),
        median(&apply_wall[..WINDOW]),
        median(&apply_wall[ROUNDS - WINDOW..]),
    );
}
