//! Watch's lines: one line on stderr (journald-friendly), or one JSON
//! document per line on stdout with --json.
//!
//! Every line is an [`Event`]: its variant is the `event` of the JSON
//! line and its fields the line's own, so what a line carries is written
//! in one place (and listed in docs/json.md, which a test compares).
//! A warning is the one line not made here: `Ctx::warn` prints it (event
//! `warning`, its `message` only) for every command that streams them.
//!
//! Not `tracing`: the JSON lines carry nested values (the changes of a
//! heal, the suspects of a fight) that tracing's fields cannot hold
//! without its unstable `valuable` support, and tests/watch.rs reads these
//! exact documents; a layer that rebuilt them would be a formatter of our
//! own behind a subscriber, with nothing gained.

use serde::Serialize;
use serde_json::json;

use crate::commands::{Change, Ctx, Verbosity};
use crate::plan::NotReady;
use crate::tell;

/// One line of watch, with the fields its JSON document carries besides
/// `command`, `event` and `message`.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(super) enum Event<'a> {
    /// Watch began (before its first pass).
    Start {},
    /// A pass ended: its number, what woke it (`trigger`: start, events,
    /// overflow, retry, recheck, resync; `triggers`: the notifications'
    /// words) and its outcome (`Outcome::name`).
    Pass { pass: u64, outcome: &'static str, trigger: &'static str, triggers: &'a [String] },
    /// A pass changed the host.
    Heal {
        pass: u64,
        trigger: &'static str,
        triggers: &'a [String],
        changes: Vec<Change>,
        summary: &'a [String],
        announced: &'a [crate::commands::tell::Announced],
    },
    /// A part of the config the host is not ready for, said when it starts.
    NotReady(&'a NotReady),
    /// A pass did not heal: a confirmation waits (`confirmation`) or
    /// another roce-route holds the lock (`lock`). Said once while it lasts.
    Deferred { reason: &'static str },
    /// Entries roce-route does not own stop the heal.
    Conflicts { conflicts: &'a [String] },
    /// A pass failed, and when it is tried again.
    Error { error: &'a str, retry_seconds: u64 },
    /// The error said before ended after repeating `count` times.
    Repeated { count: u64, error: &'a str },
    /// A pass went through after `failed_passes` failed ones.
    Recovered { failed_passes: u32 },
    /// Something undoes the heals: held back from now on.
    Fighting { heals: usize, hold_seconds: u64, suspects: &'a [String], summary: &'a [String] },
    /// The entries stayed: the fight is over.
    FightOver { held_heals: u32, held_bursts: u64 },
    /// The trial of an `apply --confirm` whose guard is gone was reverted.
    TrialReverted {},
    /// A dump was interrupted by a change and is read again.
    Retry {},
    /// Watch stops (SIGTERM, SIGINT): its passes and heals.
    Stop { passes: u64, heals: u64 },
}

impl Event<'_> {
    /// The lines `-q` silences: what needs an operator (errors, conflicts,
    /// parts not ready, a fight with another agent) is always said.
    fn routine(&self) -> bool {
        matches!(self, Event::Start {} | Event::Stop { .. } | Event::Heal { .. } | Event::Pass { .. })
    }

    /// The JSON line: the event's fields with `command` and `message`.
    fn document(&self, text: &str) -> serde_json::Value {
        let mut doc = serde_json::to_value(self).expect("an event is plain data");
        if let Some(fields) = doc.as_object_mut() {
            fields.insert("command".into(), json!("watch"));
            fields.insert("message".into(), json!(text));
        }
        doc
    }
}

/// Says `event` in the words `text`: a JSON line with --json, else a line
/// on stderr; the routine ones not with `-q`.
pub(super) fn log(ctx: &Ctx, text: &str, event: Event) {
    if event.routine() && ctx.verbosity == Verbosity::Quiet {
        return;
    }
    if ctx.json {
        crate::output::say_json(&event.document(text), false);
    } else {
        tell!("roce-route watch: {text}");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::plan::Subject;

    /// The position of each variant: this match stops compiling when a
    /// variant is added, and `every_event_is_documented` then fails until
    /// `samples` holds one of it.
    fn position(e: &Event) -> usize {
        match e {
            Event::Start {} => 0,
            Event::Pass { .. } => 1,
            Event::Heal { .. } => 2,
            Event::NotReady(_) => 3,
            Event::Deferred { .. } => 4,
            Event::Conflicts { .. } => 5,
            Event::Error { .. } => 6,
            Event::Repeated { .. } => 7,
            Event::Recovered { .. } => 8,
            Event::Fighting { .. } => 9,
            Event::FightOver { .. } => 10,
            Event::TrialReverted {} => 11,
            Event::Retry {} => 12,
            Event::Stop { .. } => 13,
        }
    }
    const VARIANTS: usize = 14;

    fn samples<'a>(nr: &'a NotReady, words: &'a [String]) -> Vec<Event<'a>> {
        vec![
            Event::Start {},
            Event::Pass { pass: 1, outcome: "in_sync", trigger: "start", triggers: words },
            Event::Heal {
                pass: 2,
                trigger: "events",
                triggers: words,
                changes: Vec::new(),
                summary: words,
                announced: &[],
            },
            Event::NotReady(nr),
            Event::Deferred { reason: "lock" },
            Event::Conflicts { conflicts: words },
            Event::Error { error: "boom", retry_seconds: 2 },
            Event::Repeated { count: 3, error: "boom" },
            Event::Recovered { failed_passes: 3 },
            Event::Fighting { heals: 3, hold_seconds: 5, suspects: words, summary: words },
            Event::FightOver { held_heals: 1, held_bursts: 2 },
            Event::TrialReverted {},
            Event::Retry {},
            Event::Stop { passes: 4, heals: 1 },
        ]
    }

    /// docs/json.md's table of watch's lines: event -> its fields.
    fn documented() -> BTreeMap<String, BTreeSet<String>> {
        let doc = include_str!("../../../docs/json.md");
        let section = doc.split("\n## watch\n").nth(1).expect("a watch section");
        let spans = |cell: &str| cell.split('`').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>();
        section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|row| {
                let cells: Vec<&str> = row.trim_matches('|').split('|').collect();
                (spans(cells[0])[0].clone(), spans(cells[1]).into_iter().collect())
            })
            .collect()
    }

    /// Every event's document has exactly the fields docs/json.md gives
    /// it, and the docs list no event watch cannot print (but `warning`,
    /// which `Ctx::warn` prints).
    #[test]
    fn every_event_is_documented() {
        let nr = NotReady { interface: "rail0".into(), subject: Subject::Interface, reason: "down".into() };
        let words = ["rail0: down".to_string()];
        let all = samples(&nr, &words);
        let mut positions: Vec<usize> = all.iter().map(position).collect();
        positions.dedup();
        assert_eq!(positions, (0..VARIANTS).collect::<Vec<_>>(), "one sample of each variant, in order");
        let mut docs = documented();
        assert_eq!(docs.remove("warning"), Some(BTreeSet::new()));
        for e in &all {
            let doc = e.document("words");
            let name = doc["event"].as_str().unwrap().to_string();
            let fields: BTreeSet<String> = doc.as_object().unwrap().keys().cloned().collect();
            let own = docs.remove(&name).unwrap_or_else(|| panic!("event {name} is not in docs/json.md"));
            let expected: BTreeSet<String> =
                own.into_iter().chain(["command", "event", "message"].map(String::from)).collect();
            assert_eq!(fields, expected, "the fields of {name}");
        }
        assert!(docs.is_empty(), "documented events watch does not print: {docs:?}");
    }

    #[test]
    fn the_routine_lines_are_start_stop_heal_and_pass() {
        let nr = NotReady { interface: "rail0".into(), subject: Subject::Interface, reason: "down".into() };
        let routine: Vec<String> = samples(&nr, &[])
            .iter()
            .filter(|e| e.routine())
            .map(|e| e.document("")["event"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(routine, ["start", "pass", "heal", "stop"]);
    }
}
