//! How the binary is linked: what every run of it pays before main.

use std::process::Command;

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
