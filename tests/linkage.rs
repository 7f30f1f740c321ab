//! How the binary is linked and started: what every run of it pays
//! before main, and what its own start (src/main.rs: no std runtime
//! start) must still do as std's did.

mod common;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Background, Netns, TempDir};

/// GCC's unwinder is linked in as an archive (build.rs), as
/// `gcc -static-libgcc` would: a binary that needs libgcc_s.so.1 loads it
/// at every start, and its constructor's `cpuid` instructions trap to the
/// hypervisor on a virtual machine (0.2 ms of a run here, bench/README.md).
/// Red when build.rs stops standing in for libgcc_s. (A crt-static build
/// has no dynamic libraries at all.)
#[cfg(not(target_feature = "crt-static"))]
#[test]
fn the_binary_does_not_load_libgcc_s() {
    let eh = Command::new("gcc").arg("-print-file-name=libgcc_eh.a").output().expect("run gcc");
    let eh = String::from_utf8_lossy(&eh.stdout).trim().to_string();
    assert!(
        eh.starts_with('/') && std::path::Path::new(&eh).exists(),
        "gcc has no libgcc_eh.a ({eh:?}): build.rs links libgcc_s.so.1 then; install libgcc-N-dev"
    );
    let bin = env!("CARGO_BIN_EXE_roce-route");
    let out = Command::new("ldd").arg(bin).output().expect("run ldd");
    let libs = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && libs.contains("libc.so.6"), "ldd {bin}:\n{libs}");
    assert!(!libs.contains("libgcc_s"), "{bin} loads libgcc_s:\n{libs}");
    let version = Command::new(bin).arg("--version").output().expect("run the binary");
    assert!(version.status.success(), "{version:?}");
}

/// A caller may start roce-route with a standard descriptor closed (a
/// daemon that closed them, `>&-`). Its start opens each on /dev/null, as
/// std's did, so that no socket or file of its own takes the number: the
/// reports written to "stdout" went into watch's signal socket pair when
/// it did not. Watch runs long enough to look at its descriptors. Red
/// without `std_start`'s descriptors.
#[test]
fn a_closed_standard_descriptor_is_opened_on_dev_null() {
    common::require_root();
    common::require_tools();
    let tag = format!("rr-fds-{}", std::process::id());
    let ns = Netns::create(tag.clone());
    let state = TempDir::create(&format!("roce-route-{tag}"));
    let mut cmd = common::roce_route_command(ns.name(), state.path(), state.path(), &["watch"]);
    // SAFETY: close(2) only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            for fd in 0..3 {
                libc::close(fd);
            }
            Ok(())
        });
    }
    // Killed and reaped if the test fails before it is waited for.
    let watch = Background::spawn(cmd, "watch with fds 0-2 closed");
    let pid = watch.pid();
    let fd = |n: u32| std::fs::read_link(format!("/proc/{pid}/fd/{n}")).ok();
    // Watching once it holds its netlink sockets (more than 0, 1 and 2).
    common::poll_until("watch holds its sockets", Duration::from_secs(10), || {
        std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count() > 4).unwrap_or(false)
    });
    let seen: Vec<_> = (0..3).map(fd).collect();
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGTERM);
    let run = watch.wait_timeout(Duration::from_secs(10));
    for (n, link) in seen.iter().enumerate() {
        assert_eq!(link.as_deref(), Some(std::path::Path::new("/dev/null")), "fd {n} of watch: {seen:?}");
    }
    run.expect_code(0);
}

/// A report written to a pipe whose reader has gone is an error the
/// writer handles (EPIPE), not a SIGPIPE that kills the process: the
/// start ignores SIGPIPE, as std's did (and std's Command gives the child
/// the default back). `man` writes more than a pipe's first write.
#[test]
fn a_reader_gone_is_not_a_sigpipe() {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_roce-route"))
        .arg("man")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run the binary");
    assert_eq!(out.status.signal(), None, "killed: {out:?}");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// A bug's panic exits 101 with its message, and what stdout held is
/// written, as with std's start: the panic is caught at the entry and
/// stdout flushed at exit. (Uncaught, it would abort: SIGABRT, a core.)
#[cfg(feature = "fault-injection")]
#[test]
fn a_panic_exits_101_and_stdout_is_written() {
    let out = Command::new(env!("CARGO_BIN_EXE_roce-route"))
        .arg("--version")
        .env("ROCE_ROUTE_PANIC", "1")
        .output()
        .expect("run the binary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(101), "{out:?}");
    assert!(stderr.contains("panicked") && stderr.contains("ROCE_ROUTE_PANIC=1"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "before the panic");
}
