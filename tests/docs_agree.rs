//! The docs and the CLI name the same things.
//!
//! - Every `--flag`, subcommand (`roce-route WORD` in a command line or a
//!   code span) and exit code that README.md or docs/*.md names exists in
//!   the CLI (`--help` of the built binary and of each subcommand), and
//!   every subcommand and every option of every subcommand is named
//!   somewhere in them.
//! - The JSON fields docs/json.md lists in its tables are the fields the
//!   commands print, both ways: the commands are run with `--json` on a
//!   testbed (nccl-env's fields come from the reviewed outputs under
//!   tests/fixtures/rdma, which tests/rdma.rs compares with the binary).
//! - Each of watch's JSON lines carries the fields docs/json.md's watch
//!   table gives its event, both ways: watch is run on a testbed through
//!   the events an operator meets (tests/watch.rs checks every line of its
//!   own tests too, which reach the rarer ones).

mod common;
#[path = "common/watch_lines.rs"]
mod watch_lines;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use common::{Run, Testbed, poll_until, require_root};

/// Flags of other tools that the docs name (cargo, systemctl, timeout):
/// each must still be named, so this list cannot rot.
const FOREIGN_FLAGS: [&str; 7] =
    ["--release", "--locked", "--target", "--target-dir", "--now", "--preserve-status", "--install"];

// `--install` is scripts/test's (install what the tests need).

/// Flags being added by work in progress, named in the docs ahead of it.
const PENDING_FLAGS: [&str; 0] = [];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and docs/*.md, with their names.
fn docs() -> Vec<(String, String)> {
    let mut paths = vec![repo().join("README.md")];
    let mut more: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    more.sort();
    paths.extend(more);
    paths.into_iter().map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), read(&p))).collect()
}

fn read(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_roce-route")).args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "{args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands `--help` lists (without `help`).
fn subcommands() -> Vec<String> {
    help(&[])
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

/// The `--long` words of a text.
fn long_flags(text: &str) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut flags = BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        let before_ok = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'-');
        let name: String = text[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        if before_ok && name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
            flags.insert(format!("--{}", name.trim_end_matches('-')));
        }
    }
    flags
}

/// The exit codes the top-level help lists.
fn exit_codes() -> BTreeSet<u32> {
    help(&[])
        .lines()
        .skip_while(|l| !l.starts_with("Exit codes:"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Command lines of the docs: `$ ` lines of console blocks, the lines of
/// sh blocks, and code spans.
fn command_texts(doc: &str) -> Vec<String> {
    let mut texts = Vec::new();
    let mut block: Option<String> = None;
    for line in doc.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            block = if block.is_some() { None } else { Some(info.trim().to_string()) };
            continue;
        }
        match block.as_deref() {
            Some("console") => {
                if let Some(c) = trimmed.strip_prefix("$ ").or_else(|| trimmed.strip_prefix("peer$ ")) {
                    texts.push(c.to_string());
                }
            }
            Some("sh") => texts.push(trimmed.to_string()),
            Some(_) => {}
            // A code span is a command line when it starts with the program.
            None => texts.extend(
                line.split('`')
                    .skip(1)
                    .step_by(2)
                    .filter(|s| s.starts_with("roce-route ") || s.starts_with("sudo roce-route "))
                    .map(str::to_string),
            ),
        }
    }
    texts
}

/// The subcommand after each `roce-route ` of a command line, past the
/// global options.
fn named_subcommands(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, _) in text.match_indices("roce-route ") {
        let program = i == 0 || text[..i].ends_with([' ', '/', '(']);
        if !program || text[..i].ends_with("-n ") {
            continue;
        }
        let mut words = text[i + "roce-route ".len()..].split_whitespace();
        while let Some(w) = words.next() {
            if ["--lock-timeout", "--netns", "--state-dir"].contains(&w) {
                words.next();
            } else if !w.starts_with('-') {
                if !w.starts_with(|c: char| c.is_ascii_lowercase()) {
                    break;
                }
                found.push(w.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-').to_string());
                break;
            }
        }
    }
    found
}

/// `exit N`, `exits N`, `[exit N]`, `exit code N`, `Exit N` in the text.
fn named_exit_codes(text: &str) -> BTreeSet<u32> {
    let lower = text.to_lowercase();
    let mut codes = BTreeSet::new();
    for (i, _) in lower.match_indices("exit") {
        let rest = lower[i + 4..].trim_start_matches('s').trim_start_matches(" code").trim_start();
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let word_start = i == 0 || !lower.as_bytes()[i - 1].is_ascii_alphabetic();
        if word_start
            && !digits.is_empty()
            && rest.len() > digits.len()
            && !rest[digits.len()..].starts_with('-')
            && !rest[digits.len()..]
                .strip_prefix('.')
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        {
            codes.insert(digits.parse().unwrap());
        }
    }
    codes
}

#[test]
fn every_flag_subcommand_and_exit_code_the_docs_name_exists() {
    let commands = subcommands();
    let mut cli_flags = long_flags(&help(&[]));
    for c in &commands {
        cli_flags.extend(long_flags(&help(&[c])));
    }
    let codes = exit_codes();
    assert_eq!(codes, (0..=6).collect(), "the exit codes of --help");
    let mut problems = Vec::new();
    let mut all_text = String::new();
    for (name, text) in docs() {
        for flag in long_flags(&text) {
            if !cli_flags.contains(&flag)
                && !FOREIGN_FLAGS.contains(&flag.as_str())
                && !PENDING_FLAGS.contains(&flag.as_str())
            {
                problems.push(format!("{name}: {flag} is no option of roce-route"));
            }
        }
        for c in command_texts(&text).iter().flat_map(|t| named_subcommands(t)) {
            if !commands.contains(&c) {
                problems.push(format!("{name}: `roce-route {c}` is no subcommand"));
            }
        }
        for code in named_exit_codes(&text) {
            if !codes.contains(&code) {
                problems.push(format!("{name}: exit {code} is no exit code of roce-route"));
            }
        }
        all_text.push_str(&text);
    }
    let named = long_flags(&all_text);
    for foreign in FOREIGN_FLAGS {
        assert!(named.contains(foreign), "{foreign} is listed as foreign but no doc names it: drop it");
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_subcommand_and_option_is_in_the_docs() {
    let docs: String = docs().into_iter().map(|(_, t)| t).collect();
    let named = long_flags(&docs);
    let spans: Vec<String> = command_texts(&docs);
    let mut missing = Vec::new();
    for c in subcommands() {
        if !spans.iter().any(|t| named_subcommands(t).contains(&c)) {
            missing.push(format!("subcommand {c}: no `roce-route {c}` in the docs"));
        }
        for flag in long_flags(&help(&[&c])) {
            if flag != "--help" && !named.contains(&flag) {
                missing.push(format!("{c} {flag}"));
            }
        }
    }
    assert!(missing.is_empty(), "not in README.md or docs/*.md:\n{}", missing.join("\n"));
}

#[test]
fn the_checkers_read_what_they_should() {
    assert_eq!(
        long_flags("a --dry-run, `--json` x--y ---z --"),
        ["--dry-run", "--json"].map(String::from).into()
    );
    assert_eq!(
        named_subcommands("sudo roce-route --lock-timeout 1 -q apply x | roce-route show"),
        ["apply", "show"]
    );
    assert_eq!(
        named_exit_codes("exits 5, [exit 3], exit code 2; Exit 1. exit 4.2 exited 7"),
        [1, 2, 3, 5].into()
    );
    assert!(named_subcommands("install x roce-route /usr/sbin/; kubectl -n roce-route logs").is_empty());
    let doc = "text `roce-route check` more `not roce-route x`\n```console\n$ roce-route show\noutput roce-route owns\n```\n";
    assert_eq!(command_texts(doc), ["roce-route check", "roce-route show"]);
    assert_eq!(
        json_fields_documented(
            "| field | meaning |\n|---|---|\n| `a`, `b_c` | `x` |\n| rollback | `d` | m |\n"
        ),
        ["a", "b_c", "d"].map(String::from).into()
    );
    let v: serde_json::Value = serde_json::json!({"a": [{"b": 1}], "c": {"d": null}});
    assert_eq!(json_keys(&v), ["a", "b", "c", "d"].map(String::from).into());
}

// --- JSON fields ----------------------------------------------------------

/// The fields docs/json.md lists: the code spans of every table cell but
/// the last (the meaning) of each row, before the watch section (whose
/// table is checked per event, by `watch_lines`).
fn json_fields_documented(doc: &str) -> BTreeSet<String> {
    let mut fields = BTreeSet::new();
    let documents = doc.split("\n## watch\n").next().unwrap_or(doc);
    for row in documents.lines().filter(|l| l.starts_with('|') && !l.starts_with("|---")) {
        let cells: Vec<&str> = row.trim_matches('|').split('|').collect();
        for cell in &cells[..cells.len().saturating_sub(1)] {
            fields.extend(cell.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    fields
}

/// Every object key in a document, at any depth.
fn json_keys(v: &serde_json::Value) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                keys.insert(k.clone());
                keys.extend(json_keys(v));
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| keys.extend(json_keys(v))),
        _ => {}
    }
    keys
}

/// What the documented commands print under `--json`, on a testbed.
fn printed_json_keys() -> BTreeSet<String> {
    let tb = Testbed::builder().rails(2).build();
    let base = tb.state_base();
    let cfg = tb.write_config(&tb.config_toml_with_gateway());
    let cfg = cfg.to_str().unwrap();
    let mut keys = BTreeSet::new();
    let mut json = |args: &[&str]| {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let run = Run::of(tb.roce_route_in(&base, &all));
        let doc: serde_json::Value =
            serde_json::from_str(&run.stdout()).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", run.report()));
        keys.extend(json_keys(&doc));
        doc
    };
    tb.ip_host("rule add priority 500 from 198.51.100.11 lookup main");
    json(&["apply", cfg]);
    tb.ip_host("rule del priority 500 from 198.51.100.11 lookup main");
    json(&["apply", cfg]);
    tb.ip_host("link set rail1 down");
    tb.ip_host("link set rail1 up");
    json(&["check", cfg]);
    json(&["apply", cfg]);
    json(&["show"]);
    json(&["rollback", "--dry-run"]);
    json(&["remove", "--dry-run"]);
    json(&["announce", cfg]);
    json(&["probe", cfg, "--peer", "198.51.100.1"]);
    json(&["probe", "--self"]);
    // No RDMA on the testbed: every pair's rdma_probe is not verified, and
    // the responder reports each address with its error.
    json(&["probe", cfg, "--peer", "198.51.100.1", "--rdma"]);
    json(&["probe", cfg, "--listen", "--idle", "1"]);
    json(&["discover", "--interfaces", "rail*"]);
    json(&["remove"]);
    // The undo of the remove, then of the applies below it, until nothing
    // is left to undo (`still_owned`).
    let mut undone = 0;
    while !json(&["rollback"])["undid"].is_null() {
        undone += 1;
        assert!(undone <= 8, "rollback never ran out of journals");
    }
    json(&["remove"]);
    // A confirmed trial: the waiting apply's document and confirm's.
    let waiting = tb
        .roce_route_in(&base, &["--json", "apply", "--confirm", "60", cfg])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let confirmed = loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let out = tb.roce_route_in(&base, &["--json", "confirm"]).output().unwrap();
        if out.status.success() || std::time::Instant::now() > deadline {
            break String::from_utf8(out.stdout).unwrap();
        }
    };
    let applied = String::from_utf8(waiting.wait_with_output().unwrap().stdout).unwrap();
    for doc in [confirmed, applied] {
        keys.extend(json_keys(&serde_json::from_str(&doc).unwrap_or_else(|e| panic!("{e}: {doc}"))));
    }
    keys
}

#[test]
fn the_json_fields_of_the_docs_are_the_ones_printed() {
    require_root();
    let doc = read(&repo().join("docs/json.md"));
    let documented = json_fields_documented(&doc);
    // A nested field may be named anywhere on the page.
    let named: BTreeSet<String> = doc.split('`').skip(1).step_by(2).map(str::to_string).collect();
    let mut printed = printed_json_keys();
    for case in std::fs::read_dir(repo().join("tests/fixtures/rdma")).unwrap() {
        let path = case.unwrap().path().join("nccl-env.json");
        if path.exists() {
            printed.extend(json_keys(&serde_json::from_str(&read(&path)).unwrap()));
        }
    }
    let undocumented: Vec<&String> = printed.difference(&named).collect();
    let unprinted: Vec<&String> = documented.difference(&printed).collect();
    assert!(undocumented.is_empty(), "printed but not in docs/json.md: {undocumented:?}");
    assert!(unprinted.is_empty(), "in docs/json.md but printed by no command run: {unprinted:?}");
}

// --- watch's lines ---------------------------------------------------------

/// Watch through the events an operator meets: its start and passes, a
/// heal, a rail going down (not ready), a foreign rule in the way
/// (conflicts), an `apply --confirm` waiting (deferred), a metrics file it
/// cannot write (warning), SIGTERM (stop, then the envelope). Every line
/// carries its event's documented fields, and each of these events is seen.
#[test]
fn watch_lines_carry_the_fields_the_docs_give_their_event() {
    require_root();
    let documented = watch_lines::documented();
    let tb = Testbed::builder().rails(3).build();
    let cfg = tb.write_config(&tb.config_toml());
    tb.rr(&["apply", cfg.to_str().unwrap()]).expect_code(common::EXIT_OK);
    let unwritable = tb.dir().join("no-such-dir/roce-route.prom");
    let w = watch_lines::Watch::start_with(&tb, "docs", |c| {
        c.arg("--metrics").arg(&unwritable);
    });
    let seen = |event: &str| w.docs().iter().any(|d| d["event"] == event);
    let wait = |event: &str| poll_until(event, watch_lines::HEAL_TIMEOUT, || seen(event));
    let (addr, table) = (&tb.rail(1).v4, tb.rail(1).table);
    tb.ip_host(&format!("rule del from {addr}"));
    wait("heal");
    tb.ip_host("link set rail2 down");
    wait("not_ready");
    tb.ip_host("link set rail2 up");
    // A foreign rule for rail1's address while its table needs a heal.
    let foreign = format!("priority 500 from {addr} lookup main");
    tb.ip_host(&format!("rule add {foreign}"));
    tb.ip_host(&format!("route flush table {table}"));
    wait("conflicts");
    tb.ip_host(&format!("rule del {foreign}"));
    // A trial that drops rail2 waits for its confirmation: watch defers.
    let two = tb.write_config(&tb.render_config_for(|r| r.name != "rail2", |_| Vec::new()));
    // A Background: killed should the test fail before the confirm.
    let trial = common::Background::spawn(
        tb.rr_cmd(&["apply", "--confirm", "60", two.to_str().unwrap()]),
        "the trial",
    );
    poll_until("the trial's guard", watch_lines::HEAL_TIMEOUT, || tb.ns_state_dir().join("pending").exists());
    tb.ip_host(&format!("route flush table {table}"));
    wait("deferred");
    tb.rr(&["confirm"]).expect_code(common::EXIT_OK);
    trial.wait_timeout(std::time::Duration::from_secs(10)).expect_code(common::EXIT_OK);
    std::process::Command::new("kill").args(["-TERM", &w.bg.pid().to_string()]).status().unwrap();
    let watch_lines::Watch { bg, out, .. } = w;
    bg.wait_timeout(std::time::Duration::from_secs(10));
    let lines: Vec<serde_json::Value> =
        read(&out).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    lines.iter().for_each(|l| watch_lines::assert_documented(l, &documented));
    let events: BTreeSet<&str> = lines.iter().filter_map(|l| l["event"].as_str()).collect();
    let wanted = ["start", "pass", "heal", "not_ready", "conflicts", "deferred", "warning", "stop"];
    let unseen: Vec<&&str> = wanted.iter().filter(|e| !events.contains(**e)).collect();
    assert!(unseen.is_empty(), "watch printed no {unseen:?} line:\n{}", read(&out));
    let last = lines.last().unwrap();
    assert!(last.get("event").is_none() && last["passes"].as_u64() > Some(3), "the line at exit: {last}");
}
