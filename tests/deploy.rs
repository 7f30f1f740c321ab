//! The Kubernetes DaemonSet's command lines, run outside a container in a
//! test namespace: the init container's apply accepts rails that are not
//! ready (exit 5), and the main container's `roce-route watch` heals a
//! flapped rail. The command lines come from deploy/kubernetes/check.py,
//! which also checks the manifests.

mod common;

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::*;

const BIN_IN_IMAGE: &str = "/usr/sbin/roce-route";

/// {"apply": [...], "watch": [...]} from the manifests.
fn commands() -> serde_json::Value {
    let check = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/check.py");
    let out = Command::new("python3").arg(&check).output().expect("python3");
    assert!(out.status.success(), "check.py: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A container's argv with the image's paths replaced by this test's.
fn argv(cmd: &serde_json::Value, config_dir: &str) -> Vec<String> {
    cmd.as_array()
        .unwrap()
        .iter()
        .map(|w| {
            w.as_str()
                .unwrap()
                .replace(BIN_IN_IMAGE, env!("CARGO_BIN_EXE_roce-route"))
                .replace("/etc/roce-route/", config_dir)
        })
        .collect()
}

#[test]
fn the_daemonset_commands_apply_and_keep_the_config() {
    let cmds = commands();
    let tb = Testbed::builder().rails(2).build();
    let config_dir = tb.dir().join("etc-roce-route");
    fs::create_dir(&config_dir).unwrap();
    // The ConfigMap's own config names ib0 and ib1, which this host lacks:
    // not ready, and the init container still succeeds.
    let manifest = fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/configmap.yaml"),
    )
    .unwrap();
    assert!(manifest.contains("name = \"ib0\""));
    fs::write(config_dir.join("rails.toml"), "[[interface]]\nname = \"ib0\"\n").unwrap();
    let dir = format!("{}/", config_dir.display());
    let run = |words: Vec<String>| {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", tb.host_ns()]).args(&words).env("ROCE_ROUTE_STATE_DIR", tb.state_base());
        cmd
    };
    let init = Run::of(run(argv(&cmds["apply"], &dir))).expect_code(0);
    init.expect_stderr(&["not ready", "ib0"]);
    // The rails of this host: the init container applies them, watch keeps them.
    fs::write(config_dir.join("rails.toml"), tb.render_config(|_| vec![])).unwrap();
    Run::of(run(argv(&cmds["apply"], &dir))).expect_code(0);
    let rail = tb.rail(1).clone();
    let routed = |tb: &Testbed| tb.route_get(PEER_V4, &rail.v4).contains(&format!("table {}", rail.table));
    assert!(routed(&tb));
    let (out, err) = (tb.dir().join("watch.out"), tb.dir().join("watch.err"));
    let watch =
        Background::spawn_logged(run(argv(&cmds["watch"], &dir)), "the DaemonSet's watch", &out, &err);
    poll_until("watch to start watching", Duration::from_secs(10), || {
        fs::read_to_string(&err).is_ok_and(|e| e.contains("watching"))
    });
    tb.ip_host(&format!("link set {} down", rail.name));
    tb.ip_host(&format!("link set {} up", rail.name));
    poll_until("watch to heal the flapped rail", Duration::from_secs(10), || routed(&tb));
    drop(watch);
}
