//! Two things of the link, both for the start of a short run (bench/README.md).
//!
//! GCC's unwinder is linked statically on linux-gnu, as `gcc
//! -static-libgcc` does, which rustc cannot ask for (rust-lang/rust#29527):
//! its `unwind` crate names `-lgcc_s`, so every run of the binary loaded
//! libgcc_s.so, whose constructor asks the CPU for its features. On a
//! virtual machine every `cpuid` traps to the hypervisor: loading it was
//! about 0.2 ms of CPU of each run here ("Issue 26, fourteenth session").
//! A linker script named `libgcc_s.so`, first on the search path, stands
//! for `libgcc_eh.a`, the same unwinder as an archive. Nothing changes
//! where the toolchain has no libgcc_eh.a (the binary then needs
//! libgcc_s.so.1 as before).
//!
//! The functions a short run executes (layout/hot-functions.txt, written by
//! bench/hot-functions.py) are placed first in the binary's code, together,
//! where the linker is lld (rustc's own since 1.90 on x86_64 Linux):
//! a no-op apply touched nearly every 64 KB of the 5.6 MB of code, a page
//! fault each ("Issue 26, seventeenth session"). Only the binary is linked
//! so, and a linker that does not take the option leaves it as it was.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    static_unwinder();
    hot_functions_first();
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

/// The unwinder as an archive: a linker script `libgcc_s.so` that names
/// `libgcc_eh.a`.
fn static_unwinder() {
    // With crt-static the unwind crate links libgcc_eh.a already.
    if var("CARGO_CFG_TARGET_FEATURE").split(',').any(|f| f == "crt-static") {
        return;
    }
    if !toolchain_has("libgcc_eh.a") {
        println!("cargo:warning=no libgcc_eh.a: the binary links libgcc_s.so.1");
        return;
    }
    let dir = PathBuf::from(var("OUT_DIR")).join("static-libgcc");
    std::fs::create_dir_all(&dir).expect("create OUT_DIR/static-libgcc");
    std::fs::write(dir.join("libgcc_s.so"), "/* build.rs: the unwinder as an archive */\nINPUT(-lgcc_eh)\n")
        .expect("write the libgcc_s.so linker script");
    println!("cargo:rustc-link-search=native={}", dir.display());
}

/// Whether the C compiler that links the binary finds `file` in its
/// library directories (it prints the bare name when it does not). `CC`
/// may carry a wrapper (`ccache gcc`).
fn toolchain_has(file: &str) -> bool {
    let cc = std::env::var("RUSTC_LINKER")
        .ok()
        .or_else(|| std::env::var("CC").ok())
        .unwrap_or_else(|| "cc".into());
    let mut words = cc.split_whitespace();
    let Some(program) = words.next() else {
        return false;
    };
    Command::new(program)
        .args(words)
        .arg(format!("-print-file-name={file}"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|p| p.is_absolute() && p.exists())
}

/// Asks the linker to place the listed functions first, in the list's
/// order, where it can: lld takes `--symbol-ordering-file` (names it does
/// not find are skipped, silently with `--no-warn-symbol-ordering`: a stale
/// list costs speed, never the build). Whether the linker is lld is asked by
/// linking an empty program with the option, as the binary will be linked
/// (the same rustc, target, flags and linker).
fn hot_functions_first() {
    let list = PathBuf::from(var("CARGO_MANIFEST_DIR")).join("layout").join("hot-functions.txt");
    // (A path that does not exist would make cargo run this every build.)
    if !list.exists() {
        return;
    }
    println!("cargo:rerun-if-changed={}", list.display());
    let ordering = format!("-Wl,--symbol-ordering-file={}", list.display());
    if !links_with(&[&ordering, "-Wl,--no-warn-symbol-ordering"]) {
        println!(
            "cargo:warning=the linker takes no --symbol-ordering-file (lld's; rustc's own linker on \
             x86_64 Linux since 1.90): the binary's functions keep the compiler's order"
        );
        return;
    }
    println!("cargo:rustc-link-arg-bins={ordering}");
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

/// Whether rustc links an empty program with these linker arguments.
fn links_with(link_args: &[&str]) -> bool {
    let out = PathBuf::from(var("OUT_DIR")).join("link-probe");
    std::fs::create_dir_all(&out).expect("create OUT_DIR/link-probe");
    let source = out.join("probe.rs");
    std::fs::write(&source, "fn main() {}\n").expect("write the link probe");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let mut cmd = Command::new(rustc);
    cmd.arg(&source).arg("--crate-type=bin").arg("-o").arg(out.join("probe"));
    cmd.arg("--target").arg(var("TARGET"));
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    cmd.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    if let Ok(linker) = std::env::var("RUSTC_LINKER") {
        cmd.arg(format!("-Clinker={linker}"));
    }
    for a in link_args {
        cmd.arg(format!("-Clink-arg={a}"));
    }
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    cmd.status().is_ok_and(|s| s.success())
}
