//! No local user may block or steer roce-route (issue 15, item 4), on the
//! real kernel, in private namespaces:
//!
//! 1. `nobody` holding the abstract unix names roce-route once used
//!    (`@roce-route/lock`, `/confirm`, `/watch`) and trying to plant files
//!    in its run directory blocks neither apply, rollback, remove, watch
//!    nor an `apply --confirm` + `confirm` round, and watch does not defer;
//! 2. a lock waiter never talks to the holder (no socket of roce-route's in
//!    the namespace, so no queue of connections), gives up after
//!    `--lock-timeout` naming the holder, ends its wait at once on SIGTERM,
//!    and the lock is free the moment its holder is SIGKILLed;
//! 3. `confirm-guard` run by hand with anything but its listening socket
//!    on fd 3 refuses with exit 2 and changes nothing;
//! 4. two state directories in one namespace share its one lock.
//!
//! Every run uses a state base under the test's temp dir; the run
//! directory is the fixed `/run/roce-route/netns/ns-<dev>-<ino>/` of each
//! test namespace (never of the host's own).

mod common;

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const LOCK_MESSAGE: &str = "another roce-route works in this network namespace";
const WAIT: Duration = Duration::from_secs(15);
/// Debian's python3 (.ci/run installs it), not one on root's PATH that
/// nobody may not be allowed to run (a pyenv shim under /root).
const PYTHON: &str = "/usr/bin/python3";

/// The run directory roce-route uses for the namespace `ns`: keyed by the
/// device and inode of the namespace (`ip netns add` bind-mounts it at
/// /run/netns/NAME).
fn run_dir(ns: &str) -> PathBuf {
    let meta = fs::metadata(format!("/run/netns/{ns}")).expect("stat /run/netns/NAME");
    PathBuf::from(format!("/run/roce-route/netns/ns-{}-{}", meta.dev(), meta.ino()))
}

/// `ip netns exec NS setpriv ... ARGV` as nobody (uid and gid 65534).
fn as_nobody(ns: &str, argv: &[&str]) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(argv)
        .stdin(Stdio::null());
    cmd
}

/// Binds the old abstract names and keeps them (listening, never
/// accepting), then prints `ready`. Run as nobody.
const SQUAT_NAMES: &str = r#"
import socket, sys, time
held = []
for name in ("roce-route/lock", "roce-route/confirm", "roce-route/watch"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0" + name)
    s.listen(128)
    held.append(s)
print("ready", flush=True)
time.sleep(3600)
"#;

/// Tries to create, in the run directory `argv[1]` and around it, every
/// file roce-route uses there (and a directory); prints one line per
/// attempt: `planted PATH` or `refused PATH ERRNO`. Run as nobody.
const PLANT: &str = r#"
import errno, os, socket, sys
run = sys.argv[1]
for path in (run + "/lock", run + "/watch.lock", run + "/x"):
    try:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o666))
        print("planted", path)
    except OSError as e:
        print("refused", path, errno.errorcode[e.errno])
for path in (run + "/confirm.sock",):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(path)
        print("planted", path)
    except OSError as e:
        print("refused", path, errno.errorcode[e.errno])
for path in (run, os.path.dirname(run) + "/ns-squat", "/run/roce-route/squat"):
    try:
        os.mkdir(path, 0o777)
        print("planted", path)
    except OSError as e:
        print("refused", path, errno.errorcode[e.errno])
"#;

/// As nobody in `ns`: tries to plant files in `run`; panics if any
/// attempt succeeded. Returns the report.
fn assert_nothing_planted(tb: &Testbed, run: &Path, when: &str) -> String {
    let out = Run::of(as_nobody(tb.host_ns(), &[PYTHON, "-c", PLANT, path_str(run)]));
    let report = out.stdout();
    assert_eq!(out.code(), Some(0), "{when}: the planting script failed\n{}", out.report());
    assert_eq!(report.lines().filter(|l| l.starts_with("refused ")).count(), 7, "{when}:\n{report}");
    assert!(!report.contains("planted"), "{when}: nobody planted a file roce-route uses:\n{report}");
    report
}

/// The entries of the namespace's /proc/net/unix naming roce-route.
fn roce_route_unix_sockets(tb: &Testbed) -> Vec<String> {
    tb.host()
        .exec("cat", &["/proc/net/unix"])
        .lines()
        .filter(|l| l.contains("roce-route"))
        .map(String::from)
        .collect()
}

/// A started `roce-route --json watch` that said READY=1.
fn start_watch(tb: &Testbed) -> (Background, PathBuf) {
    let notify = tb.dir().join("watch.notify");
    let sock = UnixDatagram::bind(&notify).unwrap();
    sock.set_read_timeout(Some(WAIT)).unwrap();
    let mut cmd = tb.rr_cmd(&["--json", "watch"]);
    cmd.env("NOTIFY_SOCKET", &notify);
    let out = tb.dir().join("watch.out");
    let bg = Background::spawn_logged(cmd, "roce-route watch", &out, &tb.dir().join("watch.err"));
    let mut buf = [0u8; 64];
    let n = sock.recv(&mut buf).unwrap_or_else(|e| panic!("no READY=1 from watch: {e}"));
    assert_eq!(&buf[..n], b"READY=1");
    (bg, out)
}

fn has_rule(tb: &Testbed, k: usize) -> bool {
    let r = tb.rail(k);
    tb.ip_host("-4 rule show").contains(&format!("from {} lookup {}", r.v4, r.table))
}

// ---------------------------------------------------------------------------
// 1. Squatters

/// With nobody holding the old abstract names for the whole test, and
/// refused whatever it tries to create in the run directory, every
/// command works: apply, watch (it heals a deleted rule and never defers),
/// `apply --confirm` + `confirm` (and nobody's `check` meanwhile), rollback
/// and remove. Before, the first apply failed: "the lock name
/// @roce-route/lock ... is held by uid 65534".
#[test]
fn nobody_holding_the_old_names_or_planting_files_blocks_nothing() {
    let tb = Testbed::builder().rails(3).build();
    let original = tb.dump();
    let rundir = run_dir(tb.host_ns());
    let _ = fs::remove_dir_all(&rundir);
    let squat_out = tb.dir().join("squat.out");
    let mut squatter = Background::spawn_logged(
        as_nobody(tb.host_ns(), &[PYTHON, "-c", SQUAT_NAMES]),
        "nobody squatting the abstract names",
        &squat_out,
        &tb.dir().join("squat.err"),
    );
    poll_until("the squatter to bind the names", WAIT, || {
        fs::read_to_string(&squat_out).is_ok_and(|o| o.contains("ready"))
    });
    let held = roce_route_unix_sockets(&tb);
    for name in ["@roce-route/lock", "@roce-route/confirm", "@roce-route/watch"] {
        assert!(held.iter().any(|l| l.ends_with(name)), "{name} is not bound by the squatter: {held:#?}");
    }
    assert_nothing_planted(&tb, &rundir, "before any run");

    let cfg = tb.standard_config();
    tb.rr(&["apply", path_str(&cfg)]).expect_code(EXIT_OK);
    let applied = tb.dump();
    let meta = fs::symlink_metadata(&rundir).expect("the run directory");
    assert!(
        meta.is_dir() && meta.uid() == 0 && meta.mode() & 0o777 == 0o700,
        "{}: {meta:?}",
        rundir.display()
    );
    assert_nothing_planted(&tb, &rundir, "after apply made the run directory");

    // watch heals, and does not defer to the squatted guard name.
    let (mut watch, watch_out) = start_watch(&tb);
    let r = tb.rail(1);
    tb.ip_host(&format!("-4 rule del from {} lookup {}", r.v4, r.table));
    poll_until("watch to heal rail1's rule", WAIT, || has_rule(&tb, 1));
    assert!(watch.is_running(), "watch exited");
    run("kill", &["-TERM", &watch.pid().to_string()]);
    watch.wait_timeout(Duration::from_secs(5)).expect_code(EXIT_OK);
    let log = fs::read_to_string(&watch_out).unwrap_or_default();
    assert!(log.contains("\"heal\""), "watch did not heal:\n{log}");
    assert!(!log.contains("\"deferred\""), "watch deferred to a squatter:\n{log}");
    assert_dump_eq(&applied, &tb.dump(), "after watch healed");

    // An apply --confirm round; nobody's check meanwhile works too.
    let two = tb.config_for(2, &[]);
    let trial = Background::spawn(
        tb.roce_route_in(&tb.state_base(), &["apply", "--confirm", "60", &two]),
        "apply --confirm 60",
    );
    poll_until("apply --confirm to wait", WAIT, || confirmation_pending(&tb.state_base()));
    let sock = fs::symlink_metadata(rundir.join("confirm.sock")).expect("the guard's socket");
    assert!(sock.file_type().is_socket() && sock.uid() == 0, "{sock:?}");
    let nobody = Nobody::new(&tb);
    chmod(Path::new(&two), 0o644);
    let check = nobody.run(&["check", &two]);
    check.expect_no_panic();
    assert!(matches!(check.code(), Some(EXIT_OK | EXIT_DRIFT)), "nobody's check:\n{}", check.report());
    let confirmed = tb.rr(&["confirm"]).expect_code(EXIT_OK);
    assert!(!confirmed.stderr().contains("error"), "{}", confirmed.report());
    trial.wait_timeout(WAIT).expect_code(EXIT_OK);
    let kept = tb.dump();
    assert_ne!(kept, applied, "the confirmed change is in place");

    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    assert_dump_eq(&applied, &tb.dump(), "after rollback");
    tb.rr(&["remove"]).expect_code(EXIT_OK);
    assert_dump_eq(&original, &tb.dump(), "after remove");
    assert!(squatter.is_running(), "the squatter gave up: the test proved nothing");
    assert_nothing_planted(&tb, &rundir, "at the end");
}

// ---------------------------------------------------------------------------
// 2. Lock waiters

/// An apply that holds the lock for a long while (1 s per step).
fn slow_apply(tb: &Testbed, base: &Path, config: &Path) -> Background {
    let mut cmd = tb.roce_route_in(base, &["apply", path_str(config)]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", "1000");
    let held = Background::spawn(cmd, "apply with 1 s steps");
    poll_until("the slow apply to start", WAIT, || !journal_files(base).is_empty());
    held
}

/// While a slow apply holds the lock: a waiter with --lock-timeout 1 gives
/// up after about 1 s naming the holder's pid; a waiter with a long
/// timeout ends its wait promptly on SIGTERM, having changed nothing; and
/// in all that time no unix socket of roce-route's exists in the namespace
/// (before, each waiter connected to the holder's abstract socket every
/// 20 ms, and every connection stayed queued on it, unaccepted). SIGKILL
/// frees the lock at once: the next run takes it with --lock-timeout 0.
#[test]
fn a_lock_waiter_never_talks_to_the_holder_and_keeps_its_timeout_and_signals() {
    let tb = Testbed::builder().rails(4).build();
    let original = tb.dump();
    let base = tb.state_base();
    let cfg = tb.standard_config();
    let mut holder = slow_apply(&tb, &base, &cfg);

    let started = Instant::now();
    let out = tb.rr(&["--lock-timeout", "1", "rollback"]);
    let waited = started.elapsed();
    out.expect_code(EXIT_FAILED).expect_stderr(&[LOCK_MESSAGE, &format!("pid {}", holder.pid()), "waited 1"]);
    assert!(waited >= Duration::from_secs(1) && waited < Duration::from_secs(4), "gave up after {waited:?}");

    let mut waiter =
        Background::spawn(tb.rr_cmd(&["--lock-timeout", "60", "rollback"]), "rollback waiting 60 s");
    let mut seen: Vec<String> = Vec::new();
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        seen.extend(roce_route_unix_sockets(&tb));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        seen.is_empty(),
        "roce-route's unix sockets while a waiter waited ({}):\n{}",
        seen.len(),
        seen.join("\n")
    );
    assert!(waiter.is_running(), "the waiter did not wait");
    assert!(holder.is_running(), "the slow apply ended early: the waiter may never have waited");
    let journals = journal_files(&base);
    run("kill", &["-TERM", &waiter.pid().to_string()]);
    let signalled = Instant::now();
    let out = waiter.wait_timeout(Duration::from_secs(3));
    eprintln!("the waiter ended {:?} after SIGTERM", signalled.elapsed());
    out.expect_code(EXIT_FAILED).expect_stderr(&[
        "SIGTERM",
        "while waiting for the lock",
        "nothing was changed",
    ]);
    assert_eq!(journal_files(&base), journals, "the interrupted waiter wrote a journal");

    holder.kill();
    let out = tb.rr(&["--lock-timeout", "0", "rollback"]).expect_code(EXIT_OK);
    assert!(!out.stderr().contains(LOCK_MESSAGE), "{}", out.report());
    assert_dump_eq(&original, &tb.dump(), "the killed apply rolled back");
}

// ---------------------------------------------------------------------------
// 3. confirm-guard by hand

/// Puts the descriptor named by argv[1] on fd 3 (or closes fd 3 for
/// `none`), then executes argv[2:]. Run as root in the namespace.
const WITH_FD3: &str = r#"
import os, socket, sys
kind, target = sys.argv[1], sys.argv[2]
keep = []
if kind == "file":
    fd = os.open(target, os.O_CREAT | os.O_RDWR, 0o600)
elif kind == "pipe":
    fd, w = os.pipe()
    keep.append(w)
elif kind == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    keep.append(s)
    fd = s.fileno()
elif kind in ("unix-elsewhere", "unix-not-listening"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(target)
    if kind == "unix-elsewhere":
        s.listen(8)
    keep.append(s)
    fd = s.fileno()
elif kind == "unix-dgram":
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(target)
    keep.append(s)
    fd = s.fileno()
else:
    fd = None
if fd is None:
    try:
        os.close(3)
    except OSError:
        pass
else:
    if fd != 3:
        os.dup2(fd, 3)
    os.set_inheritable(3, True)
os.execv(sys.argv[3], sys.argv[3:])
"#;

/// `confirm-guard` run by hand, its fd 3 a regular file, a pipe, a UDP
/// socket, a unix datagram socket, a listening unix socket bound
/// elsewhere, a unix socket bound to the guard's path but not listening,
/// or nothing: it refuses at once with exit 2 saying it is started by
/// `apply --confirm` only, and the host, the journals and `pending` stay
/// as they were. Before, it took fd 3 on trust, failed every accept()
/// until its deadline, and then reverted the latest journal. A real
/// `apply --confirm` then still works (the socket file left behind is
/// stale, and replaced).
#[test]
fn confirm_guard_by_hand_refuses_anything_but_its_socket_on_fd_3() {
    let tb = Testbed::builder().rails(2).build();
    let base = tb.state_base();
    let cfg = tb.standard_config();
    tb.rr(&["apply", path_str(&cfg)]).expect_code(EXIT_OK);
    let applied = tb.dump();
    let journals = journal_files(&base);
    assert_eq!(journals.len(), 1);
    // The apply's pid, as its journal records it: a guard that took fd 3
    // on trust would revert every journal after 0 made by it.
    let header: serde_json::Value =
        serde_json::from_str(fs::read_to_string(&journals[0]).unwrap().lines().next().unwrap()).unwrap();
    let apply_pid = header["pid"].as_u64().unwrap().to_string();
    let files = state_files(&base);
    let rundir = run_dir(tb.host_ns());
    let guard_sock = rundir.join("confirm.sock");
    // One left by an earlier namespace with this inode is stale anyway.
    let _ = fs::remove_file(&guard_sock);

    for kind in ["file", "pipe", "udp", "unix-dgram", "unix-elsewhere", "unix-not-listening", "none"] {
        let target = match kind {
            "unix-not-listening" => guard_sock.clone(),
            _ => tb.dir().join(format!("fd3-{kind}")),
        };
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", tb.host_ns(), PYTHON, "-c", WITH_FD3, kind, path_str(&target)])
            .arg(env!("CARGO_BIN_EXE_roce-route"))
            .args(["--state-dir", path_str(&base), "confirm-guard", "--seconds", "2", "--after", "0"])
            .args(["--apply-pid", &apply_pid])
            .env_remove("ROCE_ROUTE_CRASH_AT")
            .env_remove("ROCE_ROUTE_STEP_DELAY_MS")
            .current_dir(tb.dir())
            .stdin(Stdio::null());
        let started = Instant::now();
        let out = Run::of(cmd).context(&format!("confirm-guard with fd 3 = {kind}"));
        let took = started.elapsed();
        out.expect_code(EXIT_INVALID).expect_stderr(&["confirm-guard", "started by `apply --confirm` only"]);
        assert!(took < Duration::from_secs(2), "fd 3 = {kind}: refused only after {took:?}");
        assert_dump_eq(&applied, &tb.dump(), &format!("after confirm-guard with fd 3 = {kind}"));
        assert_eq!(state_files(&base), files, "fd 3 = {kind}: the state changed");
        // The socket bound at the guard's path stays, stale, for the real
        // round below.
        if kind != "unix-not-listening" {
            let _ = fs::remove_file(&target);
        }
    }
    assert!(fs::symlink_metadata(&guard_sock).is_ok_and(|m| m.file_type().is_socket()), "no stale socket");

    let two = tb.config_for(2, &["arp_ignore = 2"]);
    let trial = Background::spawn(
        tb.roce_route_in(&base, &["apply", "--confirm", "60", &two]),
        "apply --confirm 60 over a stale socket",
    );
    poll_until("apply --confirm to wait", WAIT, || confirmation_pending(&base));
    tb.rr(&["confirm"]).expect_code(EXIT_OK);
    trial.wait_timeout(WAIT).expect_code(EXIT_OK);
    tb.rr(&["check", &two]).expect_code(EXIT_OK);
}

// ---------------------------------------------------------------------------
// 4. One lock per namespace across state directories

/// The lock is the namespace's, not the state directory's: while an apply
/// with one state base holds it, a rollback with another state base in the
/// same namespace waits for it, gives up after --lock-timeout naming the
/// holder, and changes nothing.
#[test]
fn two_state_dirs_in_one_namespace_share_its_lock() {
    let tb = Testbed::builder().rails(4).build();
    let base = tb.state_base();
    let other = tb.dir().join("other-state");
    let cfg = tb.standard_config();
    let mut held = slow_apply(&tb, &base, &cfg);
    // Without the lock it would say "nothing to roll back" and exit 0.
    let out = tb.rr_in(&other, &["--lock-timeout", "1", "rollback"]).expect_code(EXIT_FAILED);
    out.expect_stderr(&[LOCK_MESSAGE, &format!("pid {}", held.pid())]);
    assert!(held.is_running(), "the slow apply ended before the other rollback gave up");
    assert!(journal_files(&other).is_empty(), "the other state dir's rollback wrote a journal");
}
