//! Fuzzing the parsers of the state files root reads back (journals,
//! `record.json`, `pending`) with arbitrary bytes and with damaged real
//! files: never a panic, and every error names the file and says what is
//! wrong. Runs on stable through proptest (PROPTEST_CASES sets the count).
//! A unit test module, so that `parse_state_file` stays out of the product.

use std::path::Path;

use proptest::prelude::*;

use super::files::corrupt;
use super::{PENDING_FILE, Pending, RECORD_FILE, Record, RunKind, StateError, journal};
use crate::model::{Op, Route, Rule, SysctlKey};
use crate::state::JournalHeader;

/// Parses the bytes of a state file as `roce-route` would read them from
/// `name` (a journal, `record.json` or `pending`).
pub(super) fn parse_state_file(name: &str, bytes: &[u8]) -> Result<(), StateError> {
    let path = Path::new(name);
    if journal::seq(name).is_some() {
        journal::parse(path, bytes).map(drop)
    } else if name == RECORD_FILE {
        serde_json::from_slice::<Record>(bytes).map(drop).map_err(|e| corrupt(path, e.to_string()))
    } else if name == PENDING_FILE {
        serde_json::from_slice::<Pending>(bytes).map(drop).map_err(|e| corrupt(path, e.to_string()))
    } else {
        Err(corrupt(path, "not a state file name"))
    }
}

const NAMES: [&str; 3] = ["journal-000001.jsonl", "record.json", "pending"];

/// A real journal, as `begin_journal` + `commit` write it.
fn real_journal() -> Vec<u8> {
    let route = Route::connected(
        100,
        crate::model::Prefix::new("198.51.100.0".parse().unwrap(), 24),
        "rail0",
        "198.51.100.10".parse().unwrap(),
        234,
    );
    let undo = [
        Op::DelRoute { route, raw: None },
        Op::DelRule { rule: Rule::source(1000, "198.51.100.10".parse().unwrap(), 100, 234), raw: None },
        Op::SetSysctl { iface: "rail0".into(), key: SysctlKey::ArpIgnore, old: 1, new: 0 },
    ];
    let mut header = JournalHeader::new(RunKind::Apply, Some("/etc/roce-route/c.toml".into()), 234);
    header.steps = Some(undo.len());
    let mut out = serde_json::to_vec(&header).unwrap();
    out.push(b'\n');
    for (step, op) in undo.iter().enumerate() {
        out.extend(serde_json::to_vec(&serde_json::json!({"step": step, "undo": op})).unwrap());
        out.push(b'\n');
    }
    out.extend(b"{\"committed\":true}\n");
    out
}

fn real_record() -> Vec<u8> {
    br#"{"origins":{"rail0/arp_ignore":0,"ib0.100/arp_announce":1},"tables":[100,101],"protocols":[234]}"#
        .to_vec()
}

/// Every error is a Corrupt naming the file, with a reason.
fn assert_clear(name: &str, result: Result<(), StateError>) {
    if let Err(e) = result {
        let text = e.to_string();
        assert!(matches!(e, StateError::Corrupt { .. }), "{name}: not a corruption error: {text}");
        assert!(text.starts_with(name), "{name}: the error does not name the file: {text}");
        assert!(text.len() > name.len() + 10, "{name}: no reason given: {text}");
    }
}

#[test]
fn the_real_files_parse() {
    parse_state_file(NAMES[0], &real_journal()).unwrap();
    parse_state_file(NAMES[1], &real_record()).unwrap();
    parse_state_file(NAMES[2], br#"{"pid":1,"guard_pid":2,"deadline_unix":3,"journal":"j","config":null}"#)
        .unwrap();
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), which in 0usize..3) {
        let name = NAMES[which];
        assert_clear(name, parse_state_file(name, &bytes));
    }

    /// Damaged real journals: bytes flipped, cut short, lines duplicated.
    #[test]
    fn damaged_journals_are_refused_or_read_whole(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = real_journal();
        for (at, b) in &flips {
            let i = at.index(bytes.len());
            bytes[i] = *b;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        let name = NAMES[0];
        match parse_state_file(name, &bytes) {
            Ok(()) => {}
            Err(e) => assert_clear(name, Err(e)),
        }
    }

    #[test]
    fn damaged_records_are_refused_or_read_whole(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = real_record();
        for (at, b) in &flips {
            let i = at.index(bytes.len());
            bytes[i] = *b;
        }
        assert_clear(NAMES[1], parse_state_file(NAMES[1], &bytes));
    }
}

/// A cut journal either keeps all its steps (only the commit line was
/// torn) or is refused: never fewer steps read as if that were the plan.
#[test]
fn a_cut_journal_never_loses_steps_silently() {
    let whole = real_journal();
    let commit_at = whole.len() - b"{\"committed\":true}\n".len();
    for cut in 0..whole.len() {
        let result = parse_state_file(NAMES[0], &whole[..cut]);
        if cut >= commit_at {
            assert!(result.is_ok(), "cut at {cut} (in the commit line) must read: {result:?}");
        } else {
            assert!(result.is_err(), "cut at {cut} lost steps without an error");
        }
    }
}
