//! Where a run's time goes: with `ROCE_ROUTE_PROFILE=1` in the
//! environment, the wall time of each phase (netlink dumps, sysfs and
//! /proc/sys reads, state files, the changes, the verification) is summed
//! and printed to stderr at exit as one JSON line:
//!
//! ```text
//! roce-route profile: {"total_us":2710,"phases":{"dumps":{"us":410,"n":4},...},"counts":{"routes_read":12}}
//! ```
//!
//! `bench/bench.py` reads it to report where the time of an apply goes.
//! Without the variable a phase costs one load of a cached flag. Phases do
//! not nest: a phase started inside another is not counted (the outer one
//! holds its time), so the phases add up to at most the total.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The variable that turns profiling on.
pub const ENV: &str = "ROCE_ROUTE_PROFILE";

static STARTED: OnceLock<Option<Instant>> = OnceLock::new();

thread_local! {
    static TOTALS: RefCell<BTreeMap<&'static str, (Duration, u32)>> = const { RefCell::new(BTreeMap::new()) };
    static OPEN: Cell<bool> = const { Cell::new(false) };
}

/// Reads the variable once; call first in main so that `total_us` covers
/// the whole run after process start-up.
pub fn start() {
    STARTED
        .get_or_init(|| std::env::var_os(ENV).is_some_and(|v| !v.is_empty() && v != "0").then(Instant::now));
}

fn enabled() -> bool {
    STARTED.get().is_some_and(Option::is_some)
}

/// A phase being timed; its time is added when it is dropped.
#[must_use = "a phase is timed until the guard is dropped"]
pub struct Phase {
    name: &'static str,
    since: Instant,
}

/// Times `name` until the returned guard is dropped; None (nothing timed)
/// when profiling is off or another phase is already open.
pub fn phase(name: &'static str) -> Option<Phase> {
    if !enabled() || OPEN.with(|o| o.replace(true)) {
        return None;
    }
    Some(Phase { name, since: Instant::now() })
}

impl Drop for Phase {
    fn drop(&mut self) {
        let took = self.since.elapsed();
        OPEN.with(|o| o.set(false));
        TOTALS.with(|t| {
            let mut t = t.borrow_mut();
            let e = t.entry(self.name).or_default();
            e.0 += took;
            e.1 += 1;
        });
    }
}

thread_local! {
    static COUNTS: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
}

/// Adds `n` to the count `name` (`routes_read`: route messages the kernel
/// sent), printed under `counts`; nothing when profiling is off.
pub fn count(name: &'static str, n: usize) {
    if enabled() {
        COUNTS.with(|c| *c.borrow_mut().entry(name).or_default() += n as u64);
    }
}

/// The JSON line, or None when profiling is off.
pub fn summary() -> Option<String> {
    let started = (*STARTED.get()?)?;
    let phases: serde_json::Map<String, serde_json::Value> = TOTALS.with(|t| {
        t.borrow()
            .iter()
            .map(|(name, (d, n))| (name.to_string(), serde_json::json!({"us": d.as_micros() as u64, "n": n})))
            .collect()
    });
    let total = started.elapsed().as_micros() as u64;
    let counts: serde_json::Map<String, serde_json::Value> =
        COUNTS.with(|c| c.borrow().iter().map(|(name, n)| (name.to_string(), (*n).into())).collect());
    Some(serde_json::json!({"total_us": total, "phases": phases, "counts": counts}).to_string())
}

/// Prints the summary to stderr when profiling is on.
pub fn finish() {
    if let Some(line) = summary() {
        eprintln!("roce-route profile: {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_and_do_not_nest() {
        // The flag is process-wide: set it as `start` would.
        STARTED.get_or_init(|| Some(Instant::now()));
        {
            let _outer = phase("dumps").expect("on");
            assert!(phase("sysfs").is_none(), "a phase inside another is not timed");
            std::thread::sleep(Duration::from_millis(2));
        }
        drop(phase("dumps"));
        let line = summary().unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["phases"]["dumps"]["n"], 2, "{line}");
        assert!(v["phases"]["dumps"]["us"].as_u64().unwrap() >= 2000, "{line}");
        assert!(v["phases"].get("sysfs").is_none(), "{line}");
        assert!(v["total_us"].as_u64().unwrap() >= v["phases"]["dumps"]["us"].as_u64().unwrap());
    }
}
