//! The README's demo runs to the end on a machine without ping (or sysctl):
//! it needs nothing but bash, iproute2 and the build. The PATH it gets holds
//! every command of this machine except those two.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_demo_needs_no_ping_and_fixes_every_rail() {
    let dir = std::env::temp_dir().join(format!("roce-route-demo-path-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    for bin in ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        for entry in fs::read_dir(bin).into_iter().flatten().flatten() {
            let name = entry.file_name();
            if ["ping", "ping4", "ping6", "sysctl", "arping"].iter().any(|n| name == *n) {
                continue;
            }
            let link = dir.join(&name);
            if !link.exists() {
                let _ = std::os::unix::fs::symlink(entry.path(), &link);
            }
        }
    }
    assert!(!dir.join("ping").exists() && dir.join("ip").exists() && dir.join("bash").exists());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/demo.sh");
    let out = Command::new(dir.join("bash"))
        .arg(&script)
        .env_clear()
        .env("PATH", &dir)
        .env("ROCE_ROUTE_BIN", env!("CARGO_BIN_EXE_roce-route"))
        .output()
        .unwrap();
    let _ = fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = format!("{stdout}\n--- stderr ---\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the demo failed:\n{report}");
    let after =
        stdout.split("== AFTER: which rail").nth(1).unwrap_or_else(|| panic!("no AFTER part:\n{report}"));
    assert!(!after.contains("WRONG"), "the demo's AFTER part is wrong:\n{report}");
    assert_eq!(after.matches("   <- ok").count(), 4, "route checks:\n{report}");
    let before = stdout.split("== AFTER").next().unwrap();
    assert!(before.contains("WRONG"), "the BEFORE part shows no problem to fix:\n{report}");
    assert!(stdout.contains("net.ipv4.conf.rail3.arp_announce = 2"), "{report}");
}
