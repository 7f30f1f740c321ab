//! Hostile input and a hostile environment, against the real kernel.
//!
//! Each test has its own `Testbed` (private network namespaces) and its own
//! state directory (`<testbed temp dir>/state`, passed as
//! ROCE_ROUTE_STATE_DIR). The guarantees checked:
//!
//! 1. interface names that would step outside /proc/sys/net/ipv4/conf are
//!    refused (exit 2) before anything is written;
//! 2. a state directory another user could have planted (symlinks, group or
//!    world writable, foreign owner) is refused (exit 1) before the host is
//!    touched, and symlinks in it are never followed;
//! 3. a journal of an unknown version is refused by `rollback`, naming the
//!    version;
//! 4. without root, the commands that change the network refuse (exit 1)
//!    and the read-only ones (apply --dry-run, check, show) work;
//! 5. an interface deleted in the middle of an apply, and
//! 6. a conflicting route added by someone else between read and write,
//!    end in a clean error and a host that is either as before or fully
//!    applied, never a mixture.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{
    Background, NOBODY_UID, Nobody, SUBNET_V4, Testbed, assert_dump_eq, chmod, describe_with_env,
    journal_files, json_doc, lines_only_in, ns_state_dir, path_str, poll_until, toml_str,
};

/// The protocol number roce-route marks its routes and rules with.
const OURS: &str = "proto 234";

// ---------------------------------------------------------------------------
// Observing the host and the state dir

/// The lines only in `a` (-) or only in `b` (+).
fn diff_lines(a: &str, b: &str) -> Vec<String> {
    let mut out: Vec<String> = lines_only_in(a, b).iter().map(|l| format!("- {l}")).collect();
    out.extend(lines_only_in(b, a).iter().map(|l| format!("+ {l}")));
    out
}

/// Every readable file under /proc/sys/net/ipv4/conf (all, default, lo,
/// every rail) with its value, in the host namespace.
fn conf_snapshot(tb: &Testbed) -> String {
    tb.sh_host("cd /proc/sys/net/ipv4/conf && grep -r . -- * 2>/dev/null | sort || true")
}

fn chown(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .unwrap_or_else(|e| panic!("chown {uid}:{gid} {}: {e}", path.display()));
}

/// Contents and modification time, to prove a file was not touched.
fn fingerprint(path: &Path) -> (Vec<u8>, i64, i64) {
    let meta = fs::symlink_metadata(path).unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    (bytes, meta.mtime(), meta.mtime_nsec())
}

// ---------------------------------------------------------------------------
// 1. Interface names that would escape /proc/sys/net/ipv4/conf

/// A config whose only interface is `name`, setting all four sysctls to
/// values the test bed never has, so that a write anywhere would show.
fn config_named(name: &str) -> String {
    format!(
        "[[interface]]\nname = {}\naddresses = [\"198.51.100.10/24\"]\narp_ignore = 3\n\
         arp_announce = 1\nrp_filter = 2\narp_filter = 1\n",
        toml_str(name)
    )
}

#[test]
fn names_that_would_escape_proc_sys_are_refused_and_nothing_is_written() {
    let tb = Testbed::builder().rails(2).build();
    let before = tb.dump();
    let conf_before = conf_snapshot(&tb);
    assert!(
        conf_before.contains("all/arp_ignore:0"),
        "unexpected snapshot of /proc/sys/net/ipv4/conf:\n{conf_before}"
    );
    let hostile = [
        "../all",
        "..",
        ".",
        "a/b",
        "all/../x",
        "x y",
        "0123456789abcdefg",
        "../../../../proc/sys/kernel",
        "rail0/../all",
        "../rail1",
        // /proc/sys directories, not interfaces: the kernel refuses them
        // as interface names, and they must never be written.
        "all",
        "default",
    ];
    for name in hostile.iter() {
        let config = tb.write_config(&config_named(name));
        for cmd in [&["apply"][..], &["apply", "--dry-run"], &["check"]] {
            let mut args = cmd.to_vec();
            args.push(path_str(&config));
            let run = tb.rr(&args).expect_code(2);
            run.expect_stderr(&[path_str(&config), name, "interface name"]);
            assert!(run.stdout().is_empty(), "a refused config printed:\n{}", run.report());
        }
    }
    assert_dump_eq(&before, &tb.dump(), "a refused interface name changed the host");
    assert_dump_eq(
        &conf_before,
        &conf_snapshot(&tb),
        "a refused interface name changed a file under /proc/sys/net/ipv4/conf",
    );
    assert!(journal_files(&tb.state_base()).is_empty(), "a refused config left a journal");
}

// ---------------------------------------------------------------------------
// 2. A hostile state directory

#[test]
fn a_state_dir_that_is_a_symlink_is_refused() {
    let tb = Testbed::builder().rails(2).build();
    let config = tb.standard_config();
    let real = tb.dir().join("real-state");
    fs::create_dir(&real).unwrap();
    chmod(&real, 0o700);
    let link = tb.dir().join("state-link");
    symlink(&real, &link).unwrap();
    let before = tb.dump();

    // With and without a trailing '/', which would make open() follow it.
    let with_slash = PathBuf::from(format!("{}/", link.display()));
    for state in [&link, &with_slash] {
        for args in [&["apply", path_str(&config)][..], &["rollback"], &["remove"]] {
            let run = tb.rr_in(state, args).expect_code(1);
            run.expect_stderr(&["symlink", path_str(&link)]);
        }
    }
    assert_dump_eq(&before, &tb.dump(), "a symlinked state dir did not stop the change");
    let planted: Vec<_> = fs::read_dir(&real).unwrap().collect();
    assert!(planted.is_empty(), "roce-route wrote through the symlink: {planted:?}");

    // A regular file where the directory should be.
    let file = tb.dir().join("state-file");
    fs::write(&file, "not a directory\n").unwrap();
    chmod(&file, 0o600);
    tb.rr_in(&file, &["apply", path_str(&config)]).expect_code(1).expect_stderr(&["not a directory"]);
    assert_dump_eq(&before, &tb.dump(), "a state path that is a file did not stop the change");
}

#[test]
fn a_namespace_state_dir_writable_by_others_or_foreign_is_refused() {
    let tb = Testbed::builder().rails(2).build();
    let config = tb.standard_config();
    // A first run creates <base>/net-<inode> (nothing to roll back).
    tb.rr(&["rollback"]).expect_code(0);
    let base = tb.state_base();
    let dir = ns_state_dir(&base);
    assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700, "{}", dir.display());
    let before = tb.dump();

    for (mode, needle) in [
        (0o777, "writable by group or others"),
        (0o770, "writable by group or others"),
        (0o702, "writable by group or others"),
    ] {
        chmod(&dir, mode);
        let run = tb.rr(&["apply", path_str(&config)]).expect_code(1);
        run.expect_stderr(&[needle, &format!("{mode:04o}"), path_str(&dir)]);
        tb.rr(&["rollback"]).expect_code(1).expect_stderr(&[needle]);
        assert_dump_eq(&before, &tb.dump(), &format!("state dir mode {mode:o} did not stop the change"));
    }

    // The base itself world-writable, as /tmp is (sticky bit or not).
    chmod(&dir, 0o700);
    for mode in [0o1777, 0o777] {
        chmod(&base, mode);
        tb.rr(&["apply", path_str(&config)])
            .expect_code(1)
            .expect_stderr(&["writable by group or others", path_str(&base)]);
    }
    chmod(&base, 0o700);
    assert_dump_eq(&before, &tb.dump(), "a world-writable base did not stop the change");

    // Owned by another user, even with a strict mode.
    chown(&dir, NOBODY_UID, NOBODY_UID);
    let run = tb.rr(&["apply", path_str(&config)]).expect_code(1);
    run.expect_stderr(&[&format!("owned by uid {NOBODY_UID}"), path_str(&dir)]);
    tb.rr(&["remove"]).expect_code(1).expect_stderr(&["owned by uid"]);
    assert_dump_eq(&before, &tb.dump(), "a foreign-owned state dir did not stop the change");

    // Put right, the same apply goes through: the refusals were about the
    // directory, nothing else.
    chown(&dir, 0, 0);
    tb.apply_ok(&config);
    assert!(tb.dump().contains(OURS), "the apply did nothing:\n{}", tb.dump());
}

#[test]
fn symlinks_inside_the_state_dir_are_never_followed() {
    let tb = Testbed::builder().rails(2).build();
    let config = tb.standard_config();
    let fresh = tb.dump();
    tb.apply_ok(&config);
    let applied = tb.dump();
    let base = tb.state_base();
    let dir = ns_state_dir(&base);
    let journal = journal_files(&base).pop().expect("the apply left no journal");

    // The journal replaced by a symlink to a (valid) journal elsewhere.
    let target = tb.dir().join("elsewhere.jsonl");
    fs::copy(&journal, &target).unwrap();
    chmod(&target, 0o600);
    let target_before = fingerprint(&target);
    fs::remove_file(&journal).unwrap();
    symlink(&target, &journal).unwrap();
    let run = tb.rr(&["rollback"]).expect_code(1);
    run.expect_stderr(&["symlink", path_str(&journal)]);
    assert_dump_eq(&applied, &tb.dump(), "rollback through a symlinked journal changed the host");
    assert_eq!(fingerprint(&target), target_before, "the symlink target was touched");
    assert!(
        fs::symlink_metadata(&journal).unwrap().file_type().is_symlink(),
        "the planted symlink should be left for the admin to inspect"
    );

    let changed = tb.render_config(|_| vec!["rp_filter = 2".to_string()]);
    let changed = tb.write_config(&changed);
    // One planted symlink per scenario: `remove` reads the journals too.
    fs::remove_file(&journal).unwrap();

    // The recorded sysctl origins replaced by a symlink to planted values.
    let origins = dir.join("record.json");
    let planted = tb.dir().join("planted-record.json");
    fs::write(&planted, "{\"origins\": {\"rail0/arp_ignore\": 8}}\n").unwrap();
    chmod(&planted, 0o600);
    let planted_before = fingerprint(&planted);
    fs::remove_file(&origins).unwrap();
    symlink(&planted, &origins).unwrap();
    tb.rr(&["apply", path_str(&changed)]).expect_code(1).expect_stderr(&["symlink", path_str(&origins)]);
    tb.rr(&["remove"]).expect_code(1).expect_stderr(&["symlink", path_str(&origins)]);
    assert_eq!(fingerprint(&planted), planted_before, "the planted origins were touched");
    assert_dump_eq(&applied, &tb.dump(), "symlinked origins did not stop the change");

    // Everything put right: rollback works again and restores the host.
    fs::remove_file(&origins).unwrap();
    fs::copy(&target, &journal).unwrap();
    chmod(&journal, 0o600);
    tb.rr(&["rollback"]).expect_code(0);
    assert_dump_eq(&fresh, &tb.dump(), "rollback did not restore the host");
}

// ---------------------------------------------------------------------------
// 3. A journal of another version

#[test]
fn rollback_refuses_a_journal_of_an_unknown_version() {
    let tb = Testbed::builder().rails(2).build();
    let config = tb.standard_config();
    tb.apply_ok(&config);
    let applied = tb.dump();
    let journal = journal_files(&tb.state_base()).pop().expect("the apply left no journal");
    let text = fs::read_to_string(&journal).unwrap();
    let (header, rest) = text.split_once('\n').expect("a journal has a header line");
    let mut doc: serde_json::Value =
        serde_json::from_str(header).unwrap_or_else(|e| panic!("header {header:?}: {e}"));
    assert_eq!(doc["version"], 1, "the header of this build: {header}");
    doc["version"] = serde_json::json!(999);
    fs::write(&journal, format!("{doc}\n{rest}")).unwrap();

    let run = tb.rr(&["rollback"]).expect_code(1);
    run.expect_stderr(&["version 999", path_str(&journal)]);
    assert_dump_eq(&applied, &tb.dump(), "rollback of an unknown journal version changed the host");
    assert!(journal.exists(), "the unreadable journal was deleted");

    // `--json` reports the same error as a document.
    let run = tb.rr(&["rollback", "--json"]).expect_code(1);
    let doc = json_doc(&run);
    assert_eq!(doc["ok"], false, "{}", run.report());
    assert!(doc["error"]["message"].as_str().is_some_and(|e| e.contains("version 999")), "{}", run.report());
    assert_dump_eq(&applied, &tb.dump(), "rollback --json changed the host");
}

// ---------------------------------------------------------------------------
// 4. Not root

#[test]
fn without_root_changes_are_refused_and_reading_works() {
    let tb = Testbed::builder().rails(2).build();
    let nobody = Nobody::new(&tb);
    let config = nobody.config(&tb.config_toml());
    let cfg = path_str(&config);
    let fresh = tb.dump();

    // The dropped process really is unprivileged.
    let id = nobody.exec(&["id", "-u"]);
    assert_eq!(id.stdout().trim(), NOBODY_UID.to_string(), "{}", id.report());

    for args in [&["apply", cfg][..], &["rollback"], &["remove"], &["confirm"]] {
        let run = nobody.run(args).expect_code(1);
        let stderr = run.stderr();
        assert!(
            stderr.contains("root") && stderr.contains("CAP_NET_ADMIN"),
            "the refusal should say root / CAP_NET_ADMIN is needed:\n{}",
            run.report()
        );
        assert_dump_eq(&fresh, &tb.dump(), &format!("an unprivileged {args:?} changed the host"));
    }
    assert!(!tb.state_base().exists(), "an unprivileged run created the state dir");

    // Reading needs no privilege: the dry run prints exactly root's.
    let dry = nobody.run(&["apply", "--dry-run", cfg]).expect_code(0);
    let root_dry = tb.rr(&["apply", "--dry-run", cfg]).expect_code(0);
    assert!(dry.stdout().contains(" route add "), "{}", dry.report());
    // Root's ran with --netns, so its commands name the namespace.
    assert_eq!(
        dry.stdout(),
        common::script_without_netns(tb.host().name(), &root_dry.stdout()),
        "{}",
        dry.report()
    );

    let check = nobody.run(&["check", cfg]).expect_code(3);
    assert!(
        check.stdout().contains("difference") && check.stdout().contains("route missing"),
        "check should list the differences:\n{}",
        check.report()
    );
    let show = nobody.run(&["show"]).expect_code(0);
    assert!(!show.stdout().trim().is_empty(), "{}", show.report());
    assert_dump_eq(&fresh, &tb.dump(), "an unprivileged read changed the host");
    assert!(!tb.state_base().exists(), "an unprivileged read created the state dir");

    // After root applies, the unprivileged check agrees and show lists it.
    tb.apply_ok(&config);
    let applied = tb.dump();
    nobody.run(&["check", cfg]).expect_code(0);
    nobody.run(&["check", "--json", cfg]).expect_code(0);
    let show = nobody.run(&["show"]).expect_code(0);
    for r in tb.rails() {
        assert!(show.stdout().contains(&r.name), "show lacks {}:\n{}", r.name, show.report());
    }
    for args in [&["rollback"][..], &["remove"]] {
        nobody.run(args).expect_code(1);
    }
    assert_dump_eq(&applied, &tb.dump(), "an unprivileged run changed the applied host");
}

// ---------------------------------------------------------------------------
// 5 and 6. Other actors during an apply

/// Whether table `table` holds a route of roce-route (the table may not
/// exist yet).
fn has_our_route(tb: &Testbed, table: u32) -> bool {
    tb.try_ip_host(&format!("-4 route show table {table}")).is_ok_and(|out| out.contains(OURS))
}

/// Spawns `apply CONFIG` pausing `delay_ms` before each step.
fn spawn_slow_apply(tb: &Testbed, config: &Path, delay_ms: u64) -> Background {
    let mut cmd = tb.rr_cmd(&["apply", path_str(config)]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", delay_ms.to_string());
    let what = describe_with_env(&cmd);
    Background::spawn(cmd, what)
}

/// Waits (bounded) until the running apply has made the step that adds
/// its route to `table`, seen in the kernel; the caller then acts while the
/// apply pauses before its next step.
fn wait_for_route_step(tb: &Testbed, apply: &mut Background, table: u32) {
    poll_until(&format!("the apply to add its route to table {table}"), Duration::from_secs(10), || {
        has_our_route(tb, table) || !apply.is_running()
    });
    assert!(apply.is_running(), "the apply ended before the test could interfere");
}

/// Rules, tables 100..=103 of both families, and the ARP sysctls of `all`
/// and rails 0-2: the part of the host that survives deleting rail3.
fn rails_0_to_2_state(tb: &Testbed) -> String {
    let mut out = String::new();
    let mut section = |title: String, text: String| {
        out.push_str(&format!("## {title}\n"));
        for l in common::canonical_lines(&text) {
            out.push_str(&l);
            out.push('\n');
        }
    };
    section("ip -4 rule".into(), tb.ip_host("-4 rule show"));
    section("ip -6 rule".into(), tb.ip_host("-6 rule show"));
    // (`route show table N` fails for a table that does not exist yet.)
    for family in ["-4", "-6"] {
        let all = tb.ip_host(&format!("{family} route show table all"));
        let rails_tables: Vec<String> = common::canonical_lines(&all)
            .into_iter()
            .filter(|l| {
                common::field_after(l, "table")
                    .and_then(|t| t.parse::<u32>().ok())
                    .is_some_and(|t| (100..=103).contains(&t))
            })
            .collect();
        section(format!("ip {family} route tables 100-103"), rails_tables.join("\n"));
    }
    let mut sysctls = String::new();
    for iface in ["all", "rail0", "rail1", "rail2"] {
        for key in common::ARP_SYSCTLS {
            sysctls.push_str(&format!("{iface}/{key} = {}\n", tb.host_sysctl(iface, key)));
        }
    }
    section("sysctls".into(), sysctls);
    out
}

#[test]
fn an_interface_deleted_during_apply_leaves_no_mixture() {
    let tb = Testbed::builder().rails(4).build();
    let config = tb.standard_config();
    let before = rails_0_to_2_state(&tb);
    // The plan: 4 routes (rail3's is step 4), 4 rules, 8 sysctls, with a
    // pause of 150 ms before each step.
    let mut apply = spawn_slow_apply(&tb, &config, 150);
    // Step 2 (rail1's route) made: rail3's route is still 300 ms off.
    wait_for_route_step(&tb, &mut apply, 101);
    tb.ip_host("link del rail3");
    let run = apply.wait();
    run.expect_no_panic();
    let code = run.code();
    // A host change, not a bad config (it used to be exit 2): the step on
    // rail3 (its route, step 4) fails with ENODEV, taken for another actor
    // changing the host; the steps made are rolled back, the host read
    // again, and rail3 is now not ready: rails 0-2 are applied, exit 5.
    assert_eq!(code, Some(5), "expected exit 5 after rail3 vanished:\n{}", run.report());
    run.expect_stderr(&["reading it again", "rolled back", "rail3: does not exist"]);

    // Never a mixture: exactly the state a config of rails 0-2 asks for
    // (its dry run is in sync).
    let after = rails_0_to_2_state(&tb);
    {
        let rails_0_2 = tb.render_config_for(|r| r.name != "rail3", |_| vec![]);
        let dry = tb.rr(&["apply", "--dry-run", path_str(&tb.write_config(&rails_0_2))]).expect_code(0);
        assert!(
            dry.stdout().contains("in sync"),
            "a mixture: neither as before nor fully applied for rails 0-2:\n{}\n\
             what is left to apply for rails 0-2:\n{}\n\n{}",
            diff_lines(&before, &after).join("\n"),
            dry.stdout(),
            run.report()
        );
    }
}

#[test]
fn a_conflicting_route_added_mid_apply_is_reported_and_nothing_is_left() {
    let tb = Testbed::builder().rails(4).build();
    let config = tb.standard_config();
    let before = tb.dump();
    let rail3 = tb.rail(3).clone();
    let foreign = format!("{SUBNET_V4} dev {} table {} src {}", rail3.name, rail3.table, rail3.v4);
    // rail3's route is step 4 of 16; with 200 ms before each step, adding
    // the foreign route once step 1 is made (so after the apply read the
    // host) comes 600 ms before it.
    let mut apply = spawn_slow_apply(&tb, &config, 200);
    wait_for_route_step(&tb, &mut apply, 100);
    tb.ip_host(&format!("route add {foreign}"));
    let run = apply.wait().expect_code(1);
    // It failed on the route, rolled back, read the host again and now
    // refuses the foreign entry as a conflict.
    run.expect_stderr(&[
        "File exists",
        "reading it again",
        "not owned by roce-route",
        &format!("{SUBNET_V4} dev {} table {}", rail3.name, rail3.table),
    ]);

    let after = tb.dump();
    assert!(!after.contains(OURS), "entries of roce-route were left:\n{after}");
    let hand_added =
        format!("{SUBNET_V4} dev {} table {} scope link src {}", rail3.name, rail3.table, rail3.v4);
    assert!(after.contains(&hand_added), "the foreign route is gone:\n{after}");
    // Without the foreign route, the host is exactly as it was.
    tb.ip_host(&format!("route del {foreign}"));
    assert_dump_eq(&before, &tb.dump(), "the host is not as before plus the foreign route");
    assert!(journal_files(&tb.state_base()).is_empty(), "a failed apply left a journal");
}

/// A failed (rolled-back) apply changed no sysctl, so it must not decide
/// what `remove` restores later: README, `record.json` holds "each
/// sysctl's value before roce-route first changed it". Here the admin sets
/// rail0's arp_ignore to 2 after the failed attempt; the first apply that
/// really changes it finds 2, so `remove` must put back 2.
#[test]
fn a_rolled_back_apply_does_not_decide_what_remove_restores() {
    let tb = Testbed::builder().rails(2).build();
    let config = tb.standard_config();
    // rail1 goes down mid-run: the kernel refuses the route through it
    // (step 2), before any sysctl step; everything made is rolled back.
    let before_failure = tb.dump();
    tb.apply_failing_mid_run(path_str(&config), "rail1", 200).expect_code(1).expect_stderr(&["rolled back"]);
    assert_dump_eq(&before_failure, &tb.dump(), "the failed apply was not rolled back");
    assert_eq!(tb.host_sysctl("rail0", "arp_ignore"), 0);

    // Another actor (the admin) sets their own value; roce-route changes it.
    tb.set_host_sysctl("rail0", "arp_ignore", 2);
    tb.apply_ok(&config);
    assert_eq!(tb.host_sysctl("rail0", "arp_ignore"), 1);

    let origins =
        fs::read_to_string(tb.ns_state_dir().join("record.json")).unwrap_or_else(|e| format!("<{e}>"));
    tb.rr(&["remove"]).expect_code(0);
    assert_eq!(
        tb.host_sysctl("rail0", "arp_ignore"),
        2,
        "remove restored rail0 arp_ignore to the value recorded by the rolled-back apply (0), \
         not to the value it had before roce-route first changed it (2); record.json \
         before remove: {origins}"
    );
}
