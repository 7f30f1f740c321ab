//! The README's test command on a fresh machine: `scripts/test` checks what
//! the tests need before it builds anything, says in one line what to
//! install, and then runs every test file (a failing one hides none).
//!
//! A missing package is simulated by a PATH that holds every command of
//! this machine but the missing one; `cargo` on that PATH is a recorder, so
//! the tests see whether scripts/test got as far as building, and with
//! which arguments, without building the suite a second time.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A directory of symlinks to every command on this PATH except `without`,
/// and a `cargo` that writes its arguments to `cargo.args` beside it.
struct FakePath {
    dir: PathBuf,
}

impl FakePath {
    fn without(tag: &str, without: &[&str]) -> FakePath {
        let dir = std::env::temp_dir().join(format!("roce-route-fresh-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let path = std::env::var("PATH").unwrap_or_default();
        for bin in path.split(':').chain(["/usr/local/sbin", "/usr/sbin", "/sbin"]) {
            for entry in fs::read_dir(bin).into_iter().flatten().flatten() {
                let name = entry.file_name();
                if name == "cargo" || without.iter().any(|w| name == *w) {
                    continue;
                }
                let link = dir.join(&name);
                if fs::symlink_metadata(&link).is_err() {
                    let _ = std::os::unix::fs::symlink(entry.path(), &link);
                }
            }
        }
        let cargo = dir.join("cargo");
        fs::write(&cargo, format!("#!/bin/sh\necho \"$@\" > {}\n", dir.join("cargo.args").display()))
            .unwrap();
        fs::set_permissions(&cargo, fs::Permissions::from_mode(0o755)).unwrap();
        for w in without {
            assert!(!dir.join(w).exists(), "{w} is still on the fake PATH");
        }
        FakePath { dir }
    }

    fn run(&self, script: &str, args: &[&str]) -> Output {
        Command::new(self.dir.join("bash"))
            .arg(repo().join(script))
            .args(args)
            .env_clear()
            .env("PATH", &self.dir)
            .env("HOME", std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
            .output()
            .unwrap()
    }

    /// What the recording cargo was called with, if it was.
    fn cargo_args(&self) -> Option<String> {
        fs::read_to_string(self.dir.join("cargo.args")).ok()
    }
}

impl Drop for FakePath {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_missing_package_stops_the_test_command_before_the_build_in_one_line() {
    let path = FakePath::without("zsh", &["zsh"]);
    let out = path.run("scripts/test", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(path.cargo_args(), None, "scripts/test started cargo although zsh is missing:\n{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "not one line:\n{err}");
    assert!(lines[0].contains("zsh, which is not installed"), "{err}");
    assert!(lines[0].contains("apt-get install zsh"), "the line does not say what to install:\n{err}");
    assert!(lines[0].contains("scripts/test --install"), "{err}");
}

#[test]
fn several_missing_packages_are_named_together_each_once() {
    // promtool is the prometheus package; setpriv and unshare are both util-linux.
    let path = FakePath::without("many", &["promtool", "setpriv", "unshare"]);
    let out = path.run("scripts/deps", &["check"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("setpriv, unshare and promtool, which are not installed"), "{err}");
    assert!(err.contains("run apt-get install util-linux prometheus "), "{err}");
}

#[test]
fn with_everything_installed_every_test_file_runs_even_after_a_failure() {
    let path = FakePath::without("all", &[]);
    let out = path.run("scripts/test", &["--test", "docs"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let args = path.cargo_args().expect("scripts/test did not run cargo with everything installed");
    let words: Vec<&str> = args.split_whitespace().collect();
    for want in ["test", "--no-fail-fast", "--locked", "--features", "fault-injection", "--test", "docs"] {
        assert!(words.contains(&want), "cargo got `{args}`, without {want}");
    }
}

#[test]
fn a_normal_user_without_sudo_is_told_to_use_a_root_shell() {
    let path = FakePath::without("nosudo", &["sudo"]);
    let drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"];
    let out = Command::new(path.dir.join(drop[0]))
        .args(&drop[1..])
        .arg(path.dir.join("bash"))
        .arg(repo().join("scripts/test"))
        .env_clear()
        .env("PATH", &path.dir)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("there is no sudo here: run scripts/test in a root shell"), "{err}");
    assert_eq!(path.cargo_args(), None);
}

/// The programs the tests start, as the test sources name them.
fn programs_the_tests_start() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [repo().join("tests"), repo().join("tests/common")] {
        for e in fs::read_dir(dir).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "rs") {
                files.push(e.path());
            }
        }
    }
    let starts = ["Command::new(\"", "exec(\"", "exec_output(\"", "exec_cmd(\"", "run(\"", "sh(\""];
    for f in files {
        let text = fs::read_to_string(&f).unwrap();
        for start in starts {
            for (at, _) in text.match_indices(start) {
                // Only a call, not `foo_run("...")`: the character before is not part of a name.
                let before = text[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let rest = &text[at + start.len()..];
                let name: String = rest.chars().take_while(|&c| c != '"').collect();
                let is_program = !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
                if is_program {
                    found.insert(name);
                }
            }
        }
    }
    found
}

#[test]
fn every_program_a_test_starts_is_in_scripts_deps() {
    let listed = Command::new("bash").arg(repo().join("scripts/deps")).arg("commands").output().unwrap();
    let listed: BTreeSet<String> =
        String::from_utf8_lossy(&listed.stdout).lines().map(String::from).collect();
    // Part of every Debian system (Essential: yes) or not a program at all:
    // `sh` and `cat`/`cp` (dash, coreutils); `sh(...)` helpers whose first
    // argument is a test name or an address; `apply`, a roce-route subcommand;
    // `ldd` (libc-bin).
    let not_packages: BTreeSet<&str> =
        ["sh", "cat", "cp", "uname", "ldd", "apply", "v4_connected_linkdown"].into();
    let started = programs_the_tests_start();
    assert!(started.contains("zsh") && started.contains("ip") && started.contains("promtool"), "{started:?}");
    let unlisted: Vec<&String> =
        started.iter().filter(|p| !listed.contains(*p) && !not_packages.contains(p.as_str())).collect();
    assert!(unlisted.is_empty(), "tests start {unlisted:?}, which scripts/deps does not check or install");
}

#[test]
fn the_readme_and_ci_use_the_same_test_command_and_install_step() {
    let readme = fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(readme.contains("`scripts/test`"), "README.md does not name scripts/test");
    assert!(
        readme.contains("scripts/test --install"),
        "README.md does not say how to install what the tests need"
    );
    let ci = fs::read_to_string(repo().join(".ci/run")).unwrap();
    let code: Vec<&str> = ci.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
    assert!(code.iter().any(|l| l.trim() == "scripts/deps install"), ".ci/run does not install scripts/deps");
    assert!(
        code.iter().any(|l| l.trim() == "scripts/test"),
        ".ci/run does not run the README's test command"
    );
}
