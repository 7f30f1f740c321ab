//! `apply --confirm --install DIR FILE` (issue 25, item 1): a trial that is
//! reverted never reaches the boot set. The boot unit applies DIR at every
//! boot or restart without `--confirm`; when the quick start installed the
//! file first and only then ran the trial, a reverted trial was applied
//! for good at the next restart. Here the unit's own command line (read
//! from dist/systemd/roce-route.service) runs after each outcome.

mod common;

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

/// The boot unit's ExecStart as words, the binary and /etc/roce-route/
/// replaced by this test's (the binary through `rr_cmd`: --netns, state).
fn unit_command(boot: &Path) -> Vec<String> {
    let unit =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/systemd/roce-route.service"))
            .unwrap();
    let line = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("ExecStart in the unit");
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("/usr/sbin/roce-route"), "{line}");
    let words: Vec<String> = words
        .map(|w| if w == "/etc/roce-route/" { format!("{}/", boot.display()) } else { w.to_string() })
        .collect();
    assert!(
        words.iter().any(|w| w.starts_with(&boot.display().to_string())),
        "the unit applies /etc/roce-route/: {line}"
    );
    words
}

/// "Restarts roce-route.service": runs its command line; exit 0 or 5 is
/// success for the unit (SuccessExitStatus=5).
fn restart_unit(tb: &Testbed, boot: &Path) -> Run {
    let words = unit_command(boot);
    let args: Vec<&str> = words.iter().map(String::as_str).collect();
    let run = tb.rr(&args);
    assert!(matches!(run.code(), Some(0 | 5)), "the boot unit failed: {}", run.report());
    run
}

/// What DIR holds: every entry's name and text.
fn listing(dir: &Path) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), fs::read_to_string(e.path()).unwrap_or_default())
        })
        .collect();
    all.sort();
    all
}

/// A host whose boot set (DIR/rails.toml) holds rail0 only, applied by
/// the unit; and a draft rails.toml of every rail, elsewhere.
struct Setup {
    tb: Testbed,
    boot: PathBuf,
    draft: PathBuf,
    before: String,
    boot_before: Vec<(String, String)>,
}

fn setup() -> Setup {
    let tb = Testbed::builder().rails(3).build();
    let boot = tb.dir().join("etc-roce-route");
    fs::create_dir(&boot).unwrap();
    fs::write(boot.join("rails.toml"), tb.render_config_for(|r| r.name == "rail0", |_| Vec::new())).unwrap();
    restart_unit(&tb, &boot);
    let drafts = tb.dir().join("drafts");
    fs::create_dir(&drafts).unwrap();
    let draft = drafts.join("rails.toml");
    fs::write(&draft, tb.config_toml()).unwrap();
    let before = tb.dump();
    let boot_before = listing(&boot);
    Setup { tb, boot, draft, before, boot_before }
}

impl Setup {
    fn trial(&self, seconds: &str) -> std::process::Command {
        self.tb.rr_cmd(&[
            "apply",
            "--no-announce",
            "--confirm",
            seconds,
            "--install",
            path_str(&self.boot),
            path_str(&self.draft),
        ])
    }
}

/// Not confirmed: reverted, the boot set as before, and a restart of the
/// unit leaves the host as before the trial. (Red before --install: the
/// flag was refused; and with the old quick start, the file installed
/// first, the restart applied the reverted trial.)
#[test]
fn a_reverted_trial_never_reaches_the_boot_unit() {
    let s = setup();
    let run = Run::of(s.trial("2"));
    assert_eq!(run.code(), Some(EXIT_FAILED), "not confirmed: {}", run.report());
    assert!(run.stderr().contains("not confirmed within"), "{}", run.report());
    assert_dump_eq(&s.before, &s.tb.dump(), "after the revert");
    assert_eq!(listing(&s.boot), s.boot_before, "the boot set after a reverted trial");
    restart_unit(&s.tb, &s.boot);
    assert_dump_eq(&s.before, &s.tb.dump(), "a restart of the boot unit after a reverted trial");
}

/// Confirmed from a second login: the draft is in the boot set, the
/// restart of the unit finds the host in sync and changes nothing.
#[test]
fn a_confirmed_trial_is_installed_and_the_boot_unit_keeps_it() {
    let s = setup();
    let apply = Background::spawn(s.trial("60"), "apply --confirm 60 --install");
    poll_until("the guard to be armed", Duration::from_secs(10), || guard_armed(&s.tb.state_base()));
    assert_eq!(
        listing(&s.boot).iter().filter(|(n, _)| n.ends_with(".toml")).count(),
        1,
        "one *.toml during the trial"
    );
    poll_until("the change to be made", Duration::from_secs(10), || s.tb.dump() != s.before);
    s.tb.rr(&["confirm"]).expect_code(EXIT_OK);
    let run = apply.wait_timeout(Duration::from_secs(20)).expect_code(EXIT_OK);
    assert!(run.stderr().contains("installed"), "{}", run.report());
    let draft = fs::read_to_string(&s.draft).unwrap();
    assert_eq!(
        listing(&s.boot),
        vec![("rails.toml".to_string(), draft)],
        "the boot set holds the draft only"
    );
    let applied = s.tb.dump();
    assert_ne!(applied, s.before);
    let restarted = restart_unit(&s.tb, &s.boot);
    assert!(restarted.stdout().contains("in sync"), "{}", restarted.report());
    assert_dump_eq(&applied, &s.tb.dump(), "a restart of the boot unit after a confirmed trial");
}

/// SIGKILL of the trial at instants of its change (before the first step,
/// after the commit): the guard reverts at the deadline, and the staged
/// file goes with it; the restart of the unit leaves the host as before.
#[test]
fn a_killed_trial_leaves_no_file_in_the_boot_set() {
    let s = setup();
    for point in ["journal:0", "step:0", "committed:0"] {
        let mut cmd = s.trial("2");
        cmd.env("ROCE_ROUTE_CRASH_AT", point);
        let run = Run::of(cmd);
        assert_eq!(run.out.status.signal(), Some(9), "{point}: {}", run.report());
        poll_until(&format!("{point}: the revert"), Duration::from_secs(12), || {
            !guard_armed(&s.tb.state_base()) && s.tb.dump() == s.before
        });
        assert_eq!(listing(&s.boot), s.boot_before, "{point}: the boot set after the revert");
        restart_unit(&s.tb, &s.boot);
        assert_dump_eq(&s.before, &s.tb.dump(), &format!("{point}: a restart of the boot unit"));
    }
}

/// Without --confirm, the file enters the boot set once the apply has
/// committed; a run that fails installs nothing; the other files of DIR
/// are applied with it.
#[test]
fn install_without_confirm_puts_the_file_in_place_after_the_change() {
    let s = setup();
    let extra = s.tb.render_config_for(|r| r.name == "rail2", |_| Vec::new());
    // rail2 in a second file of the boot set; the draft (rail0, rail1)
    // replaces rails.toml: the host gets all three, as the boot will.
    fs::write(s.boot.join("zz-rail2.toml"), &extra).unwrap();
    let draft_text = s.tb.render_config_for(|r| r.name != "rail2", |_| Vec::new());
    fs::write(&s.draft, &draft_text).unwrap();
    let bad = s.tb.dir().join("drafts/bad.toml");
    fs::write(&bad, "[[interface]]\nname = \"rail0\"\naddresses = [\"not an address\"]\n").unwrap();
    let refused = s.tb.rr(&["apply", "--install", path_str(&s.boot), path_str(&bad)]);
    assert_eq!(refused.code(), Some(EXIT_INVALID), "{}", refused.report());
    assert!(refused.stderr().contains("bad.toml"), "the error names the draft: {}", refused.report());
    assert!(!s.boot.join("bad.toml").exists());
    s.tb.rr(&["apply", "--no-announce", "--install", path_str(&s.boot), path_str(&s.draft)])
        .expect_code(EXIT_OK);
    assert_eq!(fs::read_to_string(s.boot.join("rails.toml")).unwrap(), draft_text);
    let applied = s.tb.dump();
    for r in s.tb.rails() {
        assert!(
            s.tb.route_get(s.tb.peer_v4(), &r.v4).contains(&format!("table {}", r.table)),
            "{}: {applied}",
            r.name
        );
    }
    let restarted = restart_unit(&s.tb, &s.boot);
    assert!(restarted.stdout().contains("in sync"), "{}", restarted.report());
}

fn kill9(pid: u64) {
    let out = std::process::Command::new("kill").args(["-9", &pid.to_string()]).output().unwrap();
    assert!(out.status.success(), "kill -9 {pid}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Guard and apply both killed (SIGKILL) once the change is made: the
/// staged file is left, named in `pending`. The unit's restart reverts
/// the orphaned trial, removes the staged file and applies the boot set:
/// the host and DIR are as before the trial.
#[test]
fn a_trial_whose_guard_and_apply_die_is_undone_by_the_unit_files_included() {
    let s = setup();
    let apply = Background::spawn(s.trial("60"), "apply --confirm 60 --install");
    poll_until("the change to be made", Duration::from_secs(10), || {
        s.tb.dump() != s.before && guard_armed(&s.tb.state_base())
    });
    let pending: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(s.tb.ns_state_dir().join("pending")).unwrap()).unwrap();
    let staged = PathBuf::from(pending["install"]["staged"].as_str().expect("pending names the staged file"));
    assert!(staged.exists(), "{pending}");
    // The apply first: one whose guard died reverts the trial itself.
    kill9(pending["pid"].as_u64().unwrap());
    drop(apply);
    kill9(pending["guard_pid"].as_u64().unwrap());
    assert!(staged.exists(), "the staged file is left until the trial is settled");
    let restarted = restart_unit(&s.tb, &s.boot);
    assert!(restarted.stderr().contains("reverted its unconfirmed change"), "{}", restarted.report());
    assert_dump_eq(&s.before, &s.tb.dump(), "the unit after a trial whose guard and apply died");
    assert_eq!(listing(&s.boot), s.boot_before, "the boot set after the orphaned trial was undone");
}

/// A trial that finds the host in sync ends at once, and still installs
/// the file (the confirmation the guard gives itself).
#[test]
fn an_in_sync_trial_installs_the_file_at_once() {
    let s = setup();
    // The boot set's config with a comment more: the host is in sync.
    let draft = format!("# reviewed\n{}", fs::read_to_string(s.boot.join("rails.toml")).unwrap());
    fs::write(&s.draft, &draft).unwrap();
    let run = Run::of(s.trial("60")).expect_code(EXIT_OK);
    assert!(run.stdout().contains("in sync") && run.stderr().contains("installed"), "{}", run.report());
    assert_eq!(listing(&s.boot), vec![("rails.toml".to_string(), draft)]);
    assert!(!guard_armed(&s.tb.state_base()), "the guard ended");
}
