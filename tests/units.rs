//! The shipped systemd units pass `systemd-analyze verify` (with the
//! binary path pointed at the one built here), with the metrics drop-in,
//! and the networkd drop-in turns off both settings roce-route warns about.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

const UNITS: [&str; 2] = ["roce-route.service", "roce-route-watch.service"];

fn dist() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("dist/systemd")
}

#[test]
fn the_units_pass_systemd_analyze_verify() {
    let found = Command::new("systemd-analyze").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(found, "this test needs systemd-analyze: install the systemd package");
    let dir = std::env::temp_dir().join(format!("roce-route-units-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let mut paths = Vec::new();
    for unit in UNITS {
        let text = fs::read_to_string(dist().join(unit)).unwrap();
        assert!(text.contains("ExecStart=/usr/sbin/roce-route "), "{unit}: the packaged path");
        let local = text.replace("/usr/sbin/roce-route", env!("CARGO_BIN_EXE_roce-route"));
        let path = dir.join(unit);
        fs::write(&path, local).unwrap();
        paths.push(path);
    }
    // The metrics drop-in, beside the watch unit (verify reads it there).
    let dropin = fs::read_to_string(dist().join("roce-route-watch.service.d/metrics.conf")).unwrap();
    fs::create_dir_all(dir.join("roce-route-watch.service.d")).unwrap();
    let local = dropin.replace("/usr/sbin/roce-route", env!("CARGO_BIN_EXE_roce-route"));
    fs::write(dir.join("roce-route-watch.service.d/metrics.conf"), local).unwrap();
    let out = Command::new("systemd-analyze").arg("verify").args(&paths).output().unwrap();
    let _ = fs::remove_dir_all(&dir);
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "systemd-analyze verify:\n{said}");
}

#[test]
fn the_boot_unit_does_not_fail_on_rails_not_ready_and_watch_notifies() {
    let boot = fs::read_to_string(dist().join("roce-route.service")).unwrap();
    assert!(boot.contains("SuccessExitStatus=5"), "exit 5 (rails not ready) must not fail the boot");
    assert!(boot.contains("After=network-online.target"));
    let watch = fs::read_to_string(dist().join("roce-route-watch.service")).unwrap();
    assert!(watch.contains("Type=notify") && watch.contains("Restart=on-failure"));
    let dropin = fs::read_to_string(dist().join("networkd.conf.d/90-roce-route.conf")).unwrap();
    let conf = roce_route::managers::Environment {
        processes: vec!["systemd-network".into()],
        networkd_conf: dropin,
    };
    assert!(roce_route::managers::warnings(&conf).is_empty(), "the drop-in leaves a warning");
}

/// The metrics drop-in runs the unit's own command with --metrics (so it
/// cannot drift from the unit's), resets ExecStart first (systemd refuses
/// a second ExecStart for a simple service otherwise) and makes the
/// directory of the file writable under ProtectSystem=strict.
#[test]
fn the_metrics_drop_in_is_the_units_command_with_a_writable_metrics_dir() {
    let unit = fs::read_to_string(dist().join("roce-route-watch.service")).unwrap();
    let dropin = fs::read_to_string(dist().join("roce-route-watch.service.d/metrics.conf")).unwrap();
    let exec = |text: &str| -> Vec<String> {
        text.lines().filter_map(|l| l.strip_prefix("ExecStart=")).map(str::to_string).collect()
    };
    let [command] = &exec(&unit)[..] else { panic!("one ExecStart in the unit") };
    let [reset, with_metrics] = &exec(&dropin)[..] else {
        panic!("ExecStart= then one ExecStart in the drop-in")
    };
    assert!(reset.is_empty());
    let file = with_metrics
        .strip_prefix(&format!("{command} --metrics "))
        .expect("the unit's command with --metrics");
    let dir = std::path::Path::new(file).parent().unwrap().to_str().unwrap();
    assert!(unit.contains("ProtectSystem=strict"));
    assert!(dropin.lines().any(|l| l == format!("ReadWritePaths=-{dir}")), "{dir} writable:\n{dropin}");
}

/// docs/operations.md shows the metrics drop-in's [Service] lines as the
/// file has them (a copy in the docs must not drift from what ships).
#[test]
fn the_docs_show_the_metrics_drop_in_as_shipped() {
    let dropin = fs::read_to_string(dist().join("roce-route-watch.service.d/metrics.conf")).unwrap();
    let service: String =
        dropin.lines().skip_while(|l| *l != "[Service]").map(|l| format!("{l}\n")).collect();
    assert!(service.starts_with("[Service]\nExecStart=\n"), "{service}");
    let ops =
        fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md")).unwrap();
    assert!(
        ops.contains(&format!("```ini\n{service}```")),
        "docs/operations.md lacks the drop-in as shipped:\n{service}"
    );
}
