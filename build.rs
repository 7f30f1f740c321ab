//! Links GCC's unwinder statically on linux-gnu, as `gcc -static-libgcc`
//! does, which rustc cannot ask for (rust-lang/rust#29527): its `unwind`
//! crate names `-lgcc_s`, so every run of the binary loaded libgcc_s.so,
//! whose constructor asks the CPU for its features. On a virtual machine
//! every `cpuid` traps to the hypervisor: loading it was about 0.2 ms of
//! CPU of each run here (bench/README.md, "Issue 26, fourteenth session").
//!
//! A linker script named `libgcc_s.so`, first on the search path, stands
//! for `libgcc_eh.a`, the same unwinder as an archive. Nothing changes
//! where the toolchain has no libgcc_eh.a (the binary then needs
//! libgcc_s.so.1 as before).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
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
