//! A running `roce-route --json watch` for tests, and what docs/json.md
//! says its JSON lines carry (the table of its `## watch` section), with
//! the check of a real line against it: every line tests/watch.rs and
//! tests/docs_agree.rs read is checked.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{Background, Testbed, poll_until};

pub const HEAL_TIMEOUT: Duration = Duration::from_secs(10);

/// A running `roce-route --json watch`, its output in files (one JSON
/// document per line on stdout), started once it said READY=1 on its
/// NOTIFY_SOCKET (after its first reconcile).
pub struct Watch {
    pub bg: Background,
    pub out: PathBuf,
    pub err: PathBuf,
}

impl Watch {
    pub fn start(tb: &Testbed) -> Watch {
        Watch::start_with(tb, "watch", |_| {})
    }

    pub fn start_with(tb: &Testbed, tag: &str, adjust: impl FnOnce(&mut Command)) -> Watch {
        let mut cmd = tb.rr_cmd(&["--json", "watch"]);
        adjust(&mut cmd);
        Watch::start_cmd(tb, tag, cmd)
    }

    /// `cmd` (a `--json watch`, perhaps wrapped, see `read_only_proc_sys`)
    /// started as `start_with` starts its own.
    pub fn start_cmd(tb: &Testbed, tag: &str, mut cmd: Command) -> Watch {
        let notify = tb.dir().join(format!("{tag}.notify"));
        let sock = UnixDatagram::bind(&notify).unwrap();
        sock.set_read_timeout(Some(HEAL_TIMEOUT)).unwrap();
        cmd.env("NOTIFY_SOCKET", &notify);
        let out = tb.dir().join(format!("{tag}.out"));
        let err = tb.dir().join(format!("{tag}.err"));
        let bg = Background::spawn_logged(cmd, "roce-route watch", &out, &err);
        let w = Watch { bg, out, err };
        let mut buf = [0u8; 64];
        let n = sock.recv(&mut buf).unwrap_or_else(|e| panic!("no READY=1 from watch: {e}\n{}", w.log()));
        assert_eq!(&buf[..n], b"READY=1");
        w
    }

    pub fn log(&self) -> String {
        let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        format!("watch stdout:\n{}\nwatch stderr:\n{}", read(&self.out), read(&self.err))
    }

    /// The lines so far, each checked against docs/json.md's table of
    /// watch's lines (a line still being written is left out).
    pub fn docs(&self) -> Vec<serde_json::Value> {
        let documented = documented();
        let docs: Vec<serde_json::Value> = std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        docs.iter().for_each(|d| assert_documented(d, &documented));
        docs
    }

    pub fn passes(&self) -> Vec<serde_json::Value> {
        self.docs().into_iter().filter(|d| d["event"] == "pass").collect()
    }

    pub fn heals(&self) -> usize {
        self.docs().iter().filter(|d| d["event"] == "heal").count()
    }

    pub fn pass_count(&self) -> u64 {
        self.passes().last().and_then(|p| p["pass"].as_u64()).unwrap_or(0)
    }

    /// Waits for a pass after pass `after` triggered by an event whose
    /// description contains `trigger`; returns its outcome.
    pub fn wait_pass(&self, after: u64, trigger: &str) -> String {
        let mut outcome = String::new();
        poll_until(&format!("a watch pass after {trigger:?}"), HEAL_TIMEOUT, || {
            let found = self.passes().into_iter().find(|p| {
                p["pass"].as_u64().unwrap_or(0) > after
                    && p["triggers"]
                        .as_array()
                        .is_some_and(|t| t.iter().any(|e| e.as_str().unwrap_or("").contains(trigger)))
            });
            if let Some(p) = found {
                outcome = p["outcome"].as_str().unwrap_or("").to_string();
                true
            } else {
                false
            }
        });
        outcome
    }

    pub fn assert_running(&mut self) {
        assert!(self.bg.is_running(), "watch exited\n{}", self.log());
    }
}

/// `cmd` run in a private mount namespace (`unshare -m`, private
/// propagation) whose /proc/sys is a read-only bind of itself: every
/// sysctl write it makes fails with EROFS, a real kernel failure. Only
/// that process sees the read-only mount (the host's /proc/sys and the
/// test's stay writable); its pid is the command's (sh and unshare exec).
pub fn read_only_proc_sys(cmd: Command) -> Command {
    let mut wrapped = Command::new("unshare");
    wrapped.args([
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && exec \"$0\" \"$@\"",
    ]);
    wrapped.arg(cmd.get_program()).args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => wrapped.env(key, v),
            None => wrapped.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped.stdin(std::process::Stdio::null());
    wrapped
}

/// Every line has these besides its event's own fields.
pub const COMMON: [&str; 3] = ["command", "event", "message"];

/// The envelope's fields (docs/json.md, "The envelope"), which the last
/// line (at exit) carries, with watch's own `passes` and `heals`.
pub const AT_EXIT: [&str; 8] =
    ["changed", "command", "error", "exit_code", "heals", "ok", "passes", "warnings"];

/// The events of the table and their fields: the first cell's code span
/// is the event, the second cell's code spans its fields.
pub fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let section = doc.split("\n## watch\n").nth(1).expect("docs/json.md has a `## watch` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let spans = |cell: &str| cell.split('`').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>();
    let mut events = BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.trim_matches('|').split('|').collect();
        let event = spans(cells[0]).into_iter().next().expect("an event name");
        events.insert(event, spans(cells.get(1).copied().unwrap_or("")).into_iter().collect());
    }
    assert!(events.len() > 10, "the table of docs/json.md's watch section was not found: {events:?}");
    events
}

/// Checks one line watch printed against the docs: an event line carries
/// exactly its event's documented fields (with `command`, `event` and
/// `message`); the line at exit exactly the envelope's. Panics naming the
/// difference, both ways.
pub fn assert_documented(line: &serde_json::Value, docs: &BTreeMap<String, BTreeSet<String>>) {
    let obj = line.as_object().unwrap_or_else(|| panic!("a watch line that is not an object: {line}"));
    let printed: BTreeSet<String> = obj.keys().cloned().collect();
    let expected: BTreeSet<String> = match obj.get("event").and_then(|e| e.as_str()) {
        Some(event) => {
            let own = docs.get(event).unwrap_or_else(|| {
                panic!("watch printed event `{event}`, which docs/json.md does not list: {line}")
            });
            own.iter().cloned().chain(COMMON.map(String::from)).collect()
        }
        None => AT_EXIT.map(String::from).into(),
    };
    let undocumented: Vec<&String> = printed.difference(&expected).collect();
    let missing: Vec<&String> = expected.difference(&printed).collect();
    assert!(
        undocumented.is_empty() && missing.is_empty(),
        "a watch line and docs/json.md's watch table differ: printed but not documented {undocumented:?}, \
         documented but not printed {missing:?}\n{line}"
    );
}
