use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicUsize, Ordering};

use nix::unistd::{Uid, geteuid};

use super::*;
use crate::model::SysctlKey;

/// A fresh directory under the system temp dir, removed on drop. The
/// state base is `<it>/state`, created by `StateDir::open`.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("roce-route-state-{}-{n}-{name}", std::process::id()));
        fs::create_dir(&root).unwrap();
        Scratch(root)
    }
    fn base(&self) -> PathBuf {
        self.0.join("state")
    }
    fn open(&self) -> Result<StateDir, StateError> {
        StateDir::open(&self.base(), "net-4026531840")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn op(i: usize) -> Op {
    Op::SetSysctl { iface: format!("rail{i}"), key: SysctlKey::ArpIgnore, old: 0, new: 1 }
}

fn ops(n: usize) -> Vec<Op> {
    (0..n).map(op).collect()
}

fn header(kind: RunKind) -> JournalHeader {
    JournalHeader::new(kind, Some("/etc/roce-route.toml".into()), 234)
}

fn append_raw(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

fn assert_unsafe(result: Result<impl std::fmt::Debug, StateError>, what: &str) {
    match result {
        Err(e @ StateError::Unsafe { .. }) => assert!(e.to_string().contains(what), "{e}"),
        other => panic!("expected Unsafe ({what}), got {other:?}"),
    }
}

fn assert_corrupt(result: Result<Option<Journal>, StateError>, what: &str) {
    match result {
        Err(e @ StateError::Corrupt { .. }) => assert!(e.to_string().contains(what), "{e}"),
        other => panic!("expected Corrupt ({what}), got {other:?}"),
    }
}

#[test]
fn journal_round_trip() {
    let scratch = Scratch::new("round-trip");
    let dir = scratch.open().unwrap();
    let h = header(RunKind::Apply);
    let w = dir.begin_journal(&mut h.clone(), &ops(3)).unwrap();
    let j = dir.latest_journal().unwrap().unwrap();
    assert_eq!(j.header, JournalHeader { steps: Some(3), ..h });
    assert_eq!(j.undo_ops(), ops(3));
    assert!(!j.committed);
    w.commit().unwrap();
    assert!(dir.latest_journal().unwrap().unwrap().committed);
}

#[test]
fn a_torn_commit_line_is_ignored() {
    let scratch = Scratch::new("torn");
    let dir = scratch.open().unwrap();
    let w = dir.begin_journal(&mut header(RunKind::Apply), &ops(2)).unwrap();
    append_raw(w.path(), b"{\"commi");
    let j = dir.latest_journal().unwrap().unwrap();
    assert_eq!(j.undo.len(), 2);
    assert!(!j.committed);
}

#[test]
fn garbage_in_the_middle_is_corrupt() {
    let scratch = Scratch::new("garbage");
    let dir = scratch.open().unwrap();
    let path = dir.begin_journal(&mut header(RunKind::Apply), &ops(1)).unwrap().path().to_path_buf();
    append_raw(&path, b"not json\n{\"committed\":true}\n");
    assert_corrupt(dir.latest_journal(), "line 3");
}

#[test]
fn step_after_commit_is_corrupt() {
    let scratch = Scratch::new("after-commit");
    let dir = scratch.open().unwrap();
    let w = dir.begin_journal(&mut header(RunKind::Apply), &[]).unwrap();
    let path = w.path().to_path_buf();
    w.commit().unwrap();
    append_raw(&path, b"{\"step\":0,\"undo\":{\"op\":\"set_sysctl\",\"iface\":\"r\",\"key\":\"arp_ignore\",\"old\":0,\"new\":1}}\n");
    append_raw(&path, b"{\"committed\":true}\n");
    assert_corrupt(dir.latest_journal(), "after the commit");
}

#[test]
fn unsupported_version_is_corrupt() {
    let scratch = Scratch::new("version");
    let dir = scratch.open().unwrap();
    let mut h = header(RunKind::Apply);
    h.version = 999;
    dir.begin_journal(&mut h, &[]).unwrap();
    assert_corrupt(dir.latest_journal(), "version 999");
}

#[test]
fn missing_header_is_corrupt() {
    let scratch = Scratch::new("no-header");
    let dir = scratch.open().unwrap();
    let path = dir.path().join("journal-000001.jsonl");
    fs::write(&path, b"").unwrap();
    assert_corrupt(dir.latest_journal(), "no header");
    fs::write(&path, b"{\"step\":0}\n").unwrap();
    assert_corrupt(dir.latest_journal(), "header");
}

#[test]
fn a_damaged_step_is_corrupt_not_fewer_steps() {
    let scratch = Scratch::new("whole-plan");
    let dir = scratch.open().unwrap();
    let path = dir.begin_journal(&mut header(RunKind::Apply), &ops(3)).unwrap().path().to_path_buf();
    let mut damaged = fs::read(&path).unwrap();
    let cut = damaged.len() - 10;
    damaged[cut] = b'#';
    fs::write(&path, &damaged).unwrap();
    assert_corrupt(dir.latest_journal(), "2 of its 3 steps");
}

#[test]
fn journals_form_a_stack() {
    let scratch = Scratch::new("stack");
    let dir = scratch.open().unwrap();
    assert_eq!(dir.latest_journal().unwrap(), None);
    dir.begin_journal(&mut header(RunKind::Apply), &[]).unwrap().commit().unwrap();
    dir.begin_journal(&mut header(RunKind::Remove), &[]).unwrap().commit().unwrap();

    let all = dir.journals().unwrap();
    let kinds: Vec<RunKind> = all.iter().map(|j| j.header.kind).collect();
    assert_eq!(kinds, [RunKind::Apply, RunKind::Remove]);
    assert!(all[1].path.ends_with("journal-000002.jsonl"));
    assert_eq!(dir.latest_journal().unwrap().unwrap().header.kind, RunKind::Remove);

    let latest = dir.latest_journal().unwrap().unwrap();
    dir.discard(&latest).unwrap();
    assert_eq!(dir.latest_journal().unwrap().unwrap().header.kind, RunKind::Apply);
}

#[test]
fn pruning_keeps_the_newest_and_only_runs_when_asked() {
    let scratch = Scratch::new("prune");
    let dir = scratch.open().unwrap();
    for _ in 0..MAX_JOURNALS + 3 {
        dir.begin_journal(&mut header(RunKind::Apply), &[]).unwrap();
    }
    assert_eq!(dir.journals().unwrap().len(), MAX_JOURNALS + 3, "beginning a journal prunes nothing");
    dir.prune_journals().unwrap();
    let names: Vec<String> = dir
        .journals()
        .unwrap()
        .iter()
        .map(|j| j.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), MAX_JOURNALS);
    assert_eq!(names[0], "journal-000004.jsonl");
}

/// A remove is one more run within the bound: it keeps the runs below
/// it, and only the oldest beyond MAX_JOURNALS go.
#[test]
fn a_remove_keeps_the_runs_below_it_within_the_bound() {
    let scratch = Scratch::new("remove-bound");
    let dir = scratch.open().unwrap();
    for _ in 0..MAX_JOURNALS {
        dir.begin_journal(&mut header(RunKind::Apply), &[]).unwrap().commit().unwrap();
        dir.prune_journals().unwrap();
    }
    dir.begin_journal(&mut header(RunKind::Remove), &[]).unwrap().commit().unwrap();
    dir.prune_journals().unwrap();
    let all = dir.journals().unwrap();
    assert_eq!(all.len(), MAX_JOURNALS);
    assert!(all[0].path.ends_with("journal-000002.jsonl"), "{:?}", all[0].path);
    assert_eq!(all.last().unwrap().header.kind, RunKind::Remove);
    assert!(all[..MAX_JOURNALS - 1].iter().all(|j| j.header.kind == RunKind::Apply));
}

#[test]
fn heals_never_push_the_users_runs_out_and_are_kept_within_bounds() {
    let scratch = Scratch::new("heals");
    let dir = scratch.open().unwrap();
    dir.begin_journal(&mut header(RunKind::Apply), &[]).unwrap().commit().unwrap();
    for _ in 0..MAX_JOURNALS + 10 {
        dir.begin_journal(&mut header(RunKind::Heal), &[]).unwrap().commit().unwrap();
        dir.prune_journals().unwrap();
    }
    let names = || -> Vec<String> {
        dir.journals()
            .unwrap()
            .iter()
            .map(|j| j.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    let all = names();
    assert_eq!(all[0], "journal-000001.jsonl", "the user's apply was pruned by heals");
    assert_eq!(all.len(), MAX_JOURNALS + 11);
    assert!(all[1..].iter().all(|n| n.ends_with(".heal.jsonl")), "{all:?}");
    // Beyond MAX_HEALS, the oldest heals go; the apply stays.
    for _ in 0..MAX_HEALS {
        dir.begin_journal(&mut header(RunKind::Heal), &[]).unwrap().commit().unwrap();
    }
    dir.prune_journals().unwrap();
    let all = names();
    assert_eq!(all[0], "journal-000001.jsonl");
    assert_eq!(all.len(), MAX_HEALS + 1);
    // Heals older than the oldest user run kept go with it.
    for _ in 0..MAX_JOURNALS {
        dir.begin_journal(&mut header(RunKind::Apply), &[]).unwrap().commit().unwrap();
    }
    dir.prune_journals().unwrap();
    let all = names();
    assert_eq!(all.len(), MAX_JOURNALS, "{:?}", &all[..3]);
    assert!(all.iter().all(|n| !n.ends_with(".heal.jsonl")));
}

#[test]
fn rollback_takes_the_heals_since_the_users_run_and_that_run() {
    let scratch = Scratch::new("rollback-set");
    let dir = scratch.open().unwrap();
    assert!(dir.rollback_set().unwrap().is_empty());
    dir.begin_journal(&mut header(RunKind::Apply), &[]).unwrap().commit().unwrap();
    dir.begin_journal(&mut header(RunKind::Heal), &[]).unwrap().commit().unwrap();
    dir.begin_journal(&mut header(RunKind::Apply), &[]).unwrap().commit().unwrap();
    dir.begin_journal(&mut header(RunKind::Heal), &[]).unwrap().commit().unwrap();
    dir.begin_journal(&mut header(RunKind::Heal), &[]).unwrap().commit().unwrap();
    let set = dir.rollback_set().unwrap();
    let kinds: Vec<RunKind> = set.iter().map(|j| j.header.kind).collect();
    assert_eq!(
        kinds,
        [RunKind::Heal, RunKind::Heal, RunKind::Apply],
        "newest first, down to the user's latest run"
    );
    assert!(set[2].path.ends_with("journal-000003.jsonl"));
    let after: Vec<u64> = dir
        .journals_after(Some(3))
        .unwrap()
        .iter()
        .filter_map(|j| journal::seq(j.path.file_name()?.to_str()?))
        .collect();
    assert_eq!(after, [5, 4]);
}

#[test]
fn namespaces_do_not_mix() {
    let scratch = Scratch::new("netns");
    let a = StateDir::open(&scratch.base(), "net-1").unwrap();
    let b = StateDir::open(&scratch.base(), "net-2").unwrap();
    a.begin_journal(&mut header(RunKind::Apply), &[]).unwrap().commit().unwrap();
    assert_eq!(b.latest_journal().unwrap(), None);
    assert_unsafe(StateDir::open(&scratch.base(), "../net-1"), "single path");
}

#[test]
fn record_round_trip_and_no_write_when_unchanged() {
    let scratch = Scratch::new("record");
    let dir = scratch.open().unwrap();
    assert_eq!(*dir.record().unwrap(), Record::default());
    dir.update_record(|r| {
        r.tables.insert(100);
        r.protocols.insert(234);
    })
    .unwrap();
    let path = dir.path().join(RECORD_FILE);
    let written = fs::metadata(&path).unwrap().modified().unwrap();
    assert_eq!(dir.record().unwrap().tables, [100].into());
    std::thread::sleep(Duration::from_millis(20));
    dir.update_record(|r| {
        r.tables.insert(100);
    })
    .unwrap();
    assert_eq!(
        fs::metadata(&path).unwrap().modified().unwrap(),
        written,
        "an unchanged record is not rewritten"
    );
    fs::write(&path, b"{\"tables\": [1], \"bogus\": 2}").unwrap();
    assert!(matches!(dir.record(), Err(StateError::Corrupt { .. })));
}

#[test]
fn base_must_be_a_real_directory() {
    let scratch = Scratch::new("base");
    let real = scratch.0.join("real");
    fs::create_dir(&real).unwrap();
    fs::set_permissions(&real, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&real, scratch.base()).unwrap();
    assert_unsafe(scratch.open(), "symlink");
    let with_slash = scratch.0.join("state/");
    assert_unsafe(StateDir::open(&with_slash, "net-1"), "symlink");

    fs::remove_file(scratch.base()).unwrap();
    fs::write(scratch.base(), b"").unwrap();
    assert_unsafe(scratch.open(), "not a directory");
}

#[test]
fn writable_by_others_is_unsafe() {
    let scratch = Scratch::new("writable");
    let dir = scratch.open().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    assert_unsafe(scratch.open(), "writable by group or others");
    assert_unsafe(check_dir(dir.path()), "writable");
}

#[test]
fn foreign_owner_is_unsafe() {
    let scratch = Scratch::new("owner");
    let dir = scratch.open().unwrap();
    let nobody = Some(Uid::from_raw(65534));
    nix::unistd::chown(dir.path(), nobody, None).unwrap();
    assert_unsafe(scratch.open(), "owned by uid 65534");

    nix::unistd::chown(dir.path(), Some(geteuid()), None).unwrap();
    dir.begin_journal(&mut header(RunKind::Apply), &[]).unwrap().commit().unwrap();
    nix::unistd::chown(&dir.path().join("journal-000001.jsonl"), nobody, None).unwrap();
    assert_unsafe(dir.latest_journal(), "owned by uid 65534");
}

#[test]
fn symlinked_files_are_refused() {
    let scratch = Scratch::new("file-links");
    let dir = scratch.open().unwrap();
    let target = scratch.0.join("elsewhere");
    fs::write(&target, b"{}\n").unwrap();
    for name in ["journal-000001.jsonl", RECORD_FILE, PENDING_FILE] {
        std::os::unix::fs::symlink(&target, dir.path().join(name)).unwrap();
    }
    assert_unsafe(dir.latest_journal(), "symlink");
    assert_unsafe(dir.record(), "symlink");
    assert_unsafe(dir.pending(), "symlink");
    assert_eq!(fs::read(&target).unwrap(), b"{}\n");
}

#[test]
fn created_dirs_are_0700_and_files_0600() {
    let scratch = Scratch::new("modes");
    let dir = scratch.open().unwrap();
    assert_eq!(mode(&scratch.base()), 0o700);
    assert_eq!(mode(dir.path()), 0o700);

    dir.begin_journal(&mut header(RunKind::Apply), &ops(1)).unwrap().commit().unwrap();
    dir.update_record(|r| r.on_start(&header(RunKind::Apply))).unwrap();
    dir.set_pending(&Pending {
        pid: 1,
        guard_pid: 2,
        deadline_unix: 3,
        journal: String::new(),
        after: None,
        trial: String::new(),
        config: None,
        install: None,
    })
    .unwrap();

    let mut names = Vec::new();
    for entry in fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        assert_eq!(mode(&entry.path()), 0o600, "{:?}", entry.path());
        names.push(entry.file_name().into_string().unwrap());
    }
    names.sort();
    assert_eq!(
        names,
        ["journal-000001.jsonl", PENDING_FILE, RECORD_FILE],
        "no temporary files are left behind"
    );
}

#[test]
fn pending_round_trip() {
    let scratch = Scratch::new("pending");
    let dir = scratch.open().unwrap();
    assert_eq!(dir.pending().unwrap(), None);
    let p = Pending {
        pid: 42,
        guard_pid: 43,
        deadline_unix: 1_700_000_000,
        journal: "journal-000001.jsonl".into(),
        after: Some(7),
        trial: "0123456789abcdef".into(),
        config: Some("c.toml".into()),
        install: None,
    };
    dir.set_pending(&p).unwrap();
    assert_eq!(dir.pending().unwrap(), Some(p));
    dir.clear_pending().unwrap();
    assert_eq!(dir.pending().unwrap(), None);
}

/// A trial's staged boot-set file goes with its `pending` (reverted),
/// unless it was kept first (confirmed).
#[test]
fn clearing_pending_discards_the_staged_install_unless_it_was_kept() {
    let scratch = Scratch::new("pending-install");
    let dir = scratch.open().unwrap();
    let boot = dir.path().join("boot");
    fs::create_dir(&boot).unwrap();
    for keep in [false, true] {
        let install = crate::state::install::Install::new(&boot, "rails.toml", "0123456789abcdef");
        install.stage("[defaults]\n").unwrap();
        let p = Pending {
            pid: 1,
            guard_pid: 2,
            deadline_unix: 3,
            journal: String::new(),
            after: None,
            trial: "0123456789abcdef".into(),
            config: None,
            install: Some(install.clone()),
        };
        dir.set_pending(&p).unwrap();
        if keep {
            dir.keep_install(&p).unwrap();
        }
        dir.clear_pending().unwrap();
        assert!(!install.staged.exists(), "keep={keep}: the staged file is gone");
        assert_eq!(install.to.exists(), keep, "keep={keep}: in the boot set only when kept");
    }
}

#[test]
fn state_file_parsers_name_the_file() {
    for (name, bytes) in
        [("journal-000001.jsonl", &b"\xff\xfe"[..]), (RECORD_FILE, b"\"x\""), (PENDING_FILE, b"{")]
    {
        let e = super::fuzz::parse_state_file(name, bytes).unwrap_err();
        assert!(e.to_string().starts_with(name), "{e}");
    }
}

/// The kind is written and read as the words journals always carried, and
/// a journal of a kind this build does not know is corrupt, not guessed.
#[test]
fn run_kinds_keep_their_on_disk_words() {
    for (kind, word) in [(RunKind::Apply, "apply"), (RunKind::Remove, "remove"), (RunKind::Heal, "heal")] {
        assert_eq!(serde_json::to_value(kind).unwrap(), word);
        assert_eq!(kind.to_string(), word);
        let line = serde_json::to_vec(&header(kind)).unwrap();
        let text = String::from_utf8(line.clone()).unwrap();
        assert!(text.contains(&format!("\"kind\":\"{word}\"")), "{text}");
        assert_eq!(journal::parse_header(Path::new("j"), &line).unwrap().kind, kind);
    }
    let foreign = String::from_utf8(serde_json::to_vec(&header(RunKind::Apply)).unwrap())
        .unwrap()
        .replace("\"kind\":\"apply\"", "\"kind\":\"upgrade\"");
    assert!(matches!(
        journal::parse_header(Path::new("j"), foreign.as_bytes()),
        Err(StateError::Corrupt { .. })
    ));
    assert_eq!(journal::file_name(7, RunKind::Heal), "journal-000007.heal.jsonl");
    assert_eq!(journal::file_name(7, RunKind::Remove), "journal-000007.jsonl");
}

/// Under the namespace lock the record is read from its file once a hold:
/// a change made to the file behind the run's back (no run does: others
/// wait for the lock) is not seen until the hold ends; what the run writes
/// is what it reads next; without the lock every read is the file's.
#[test]
fn the_record_is_read_once_a_hold_of_the_lock() {
    use crate::signals::StopFlag;
    let scratch = Scratch::new("kept-record");
    let dir = scratch.open().unwrap();
    let path = dir.path().join(RECORD_FILE);
    let lock_path = scratch.0.join("lock");
    let behind = |tables: &str| fs::write(&path, format!("{{\"tables\": [{tables}]}}\n")).unwrap();
    behind("7");
    assert_eq!(dir.record().unwrap().tables, [7].into(), "no lock: the file");
    behind("8");
    assert_eq!(dir.record().unwrap().tables, [8].into(), "no lock: the file again");
    // Another test's lock taken or released meanwhile ends this one's hold
    // too (the kept record is then read again): tried until none was.
    let undisturbed = (0..100).any(|_| {
        let lock = NetnsLock::acquire_at(&lock_path, Duration::ZERO, &StopFlag::default()).unwrap();
        let hold = lock::holding();
        assert!(hold.is_some());
        assert_eq!(dir.record().unwrap().tables, [8].into(), "the first read of a hold is the file's");
        behind("9");
        let kept = dir.record().unwrap().tables.clone();
        dir.update_record(|r| {
            r.tables.insert(10);
        })
        .unwrap();
        let on_disk: Record = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        behind("12");
        let written = dir.record().unwrap().tables.clone();
        let same_hold = lock::holding() == hold;
        drop(lock);
        assert_eq!(lock::holding(), None, "released");
        if same_hold {
            assert_eq!(kept, [8].into(), "kept for the hold, not read again");
            assert_eq!(written, [8, 10].into(), "what it wrote is what it reads, kept");
            assert_eq!(on_disk.tables, [8, 10].into());
        }
        behind("11");
        assert_eq!(dir.record().unwrap().tables, [11].into(), "the hold ended: the file");
        behind("8");
        same_hold
    });
    assert!(undisturbed, "other tests took or released a lock in every try");
    let lock = NetnsLock::acquire_at(&lock_path, Duration::ZERO, &StopFlag::default()).unwrap();
    assert_eq!(dir.record().unwrap().tables, [8].into(), "a new hold reads the file");
    drop(lock);
}
