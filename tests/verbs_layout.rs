//! `src/verbs.rs` reads rdma-core's structures at fixed offsets and builds
//! some of them itself (it loads the libraries with dlopen and has no
//! bindings generated from the headers). This compiles `verbs_layout.c`
//! against the installed headers (libibverbs-dev, librdmacm-dev: in
//! scripts/deps) and checks every offset, size and constant verbs.rs uses
//! against what the compiler says. A wrong offset there would make probe
//! --rdma read garbage or write past a structure.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

#[test]
fn every_offset_size_and_constant_matches_rdma_cores_headers() {
    let dir = common::TempDir::create(&format!("roce-route-verbs-layout-{}", std::process::id()));
    let exe = dir.path().join("verbs_layout");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/verbs_layout.c");
    let cc = Command::new("gcc")
        .arg("-Wall")
        .arg("-Werror")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("gcc runs (scripts/deps install brings gcc, libibverbs-dev and librdmacm-dev)");
    assert!(
        cc.status.success(),
        "verbs_layout.c does not compile against rdma-core's headers (scripts/deps install brings them):\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let c: BTreeMap<String, i64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').unwrap();
            (name.to_string(), value.parse().unwrap())
        })
        .collect();
    let rust: BTreeMap<String, i64> =
        roce_route::verbs::layout().into_iter().map(|(n, v)| (n.to_string(), v)).collect();
    assert_eq!(rust.len(), roce_route::verbs::layout().len(), "a name twice in verbs::layout()");
    let only_c: Vec<&String> = c.keys().filter(|k| !rust.contains_key(*k)).collect();
    let only_rust: Vec<&String> = rust.keys().filter(|k| !c.contains_key(*k)).collect();
    assert!(
        only_c.is_empty() && only_rust.is_empty(),
        "checked only in C: {only_c:?}; only in Rust: {only_rust:?}"
    );
    let wrong: Vec<String> = rust
        .iter()
        .filter(|(k, v)| c[*k] != **v)
        .map(|(k, v)| format!("{k}: verbs.rs says {v}, the headers {}", c[k]))
        .collect();
    assert!(wrong.is_empty(), "verbs.rs disagrees with rdma-core's headers:\n{}", wrong.join("\n"));
    assert!(rust.len() >= 69, "{} names checked", rust.len());
}
