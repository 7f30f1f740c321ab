//! `probe --rdma` and `probe --listen` where the host has no RDMA (veth
//! rails, the build machine's kernel): what the RDMA layer could not
//! check is "not verified" with its reason, never "ok", and the IP
//! verdicts stay as they were. The RDMA layer itself, on real soft-RoCE
//! devices, is tests/rdma-vm/scenarios/probe-rdma (issue 24 item 6).

mod common;
#[path = "common/two_hosts.rs"]
mod two_hosts;

use common::{EXIT_FAILED, EXIT_INVALID, EXIT_NOT_VERIFIED, EXIT_OK, Run};
use serde_json::Value;
use two_hosts::{Topology, TwoHosts};

fn probes(doc: &Value) -> &Vec<Value> {
    doc["probes"].as_array().unwrap_or_else(|| panic!("no probes in {doc:#}"))
}

/// Both hosts right at the IP level, A's rails without an RDMA port:
/// every pair's IP checks pass, its RDMA part is not verified ("no RDMA
/// port"), and the run is exit 6, not 0. Red where a pair without RDMA
/// evidence reads ok, or where --rdma aborts the IP verdicts.
#[test]
fn rails_without_an_rdma_port_are_not_verified_at_the_rdma_layer() {
    let t = TwoHosts::build(Topology::OneBridge, 2, false);
    t.apply_both();
    let (b0, b1) = (t.b_rails[0].v4.clone(), t.b_rails[1].v4.clone());
    let (plain, _) = t.probe_a_with(&["--peer", &b0, "--peer", &b1], &[]);
    assert_eq!(plain.code(), Some(EXIT_OK), "the baseline without --rdma: {}", plain.report());

    let (run, doc) = t.probe_a_with(&["--peer", &b0, "--peer", &b1, "--rdma"], &[]);
    assert_eq!(run.code(), Some(EXIT_NOT_VERIFIED), "{}", run.report());
    assert_eq!(probes(&doc).len(), 4, "{doc:#}");
    for p in probes(&doc) {
        assert_eq!(p["problems"], serde_json::json!([]), "the IP level is right: {p:#}");
        assert_eq!(p["rdma_probe"]["result"], "not_verified", "{p:#}");
        let why = p["rdma_probe"]["detail"].as_str().unwrap();
        assert!(why.contains("no RDMA port"), "{p:#}");
        assert!(p["not_verified"].to_string().contains("RDMA: the rail has no RDMA port"), "{p:#}");
    }
}

/// A host without rdma-core's libraries: --rdma says what to install,
/// every pair is not verified, the IP verdicts stand (exit 6). Red where
/// the missing library aborts the probe or is silent.
#[test]
fn without_rdma_core_the_rdma_layer_says_what_to_install() {
    let t = TwoHosts::build(Topology::OneBridge, 1, false);
    t.apply_both();
    let b0 = t.b_rails[0].v4.clone();
    let env = [("ROCE_ROUTE_RDMA_LIBS", "librdmacm-not-here.so.1,libibverbs-not-here.so.1")];
    let (run, doc) = t.probe_a_with(&["--peer", &b0, "--rdma"], &env);
    assert_eq!(run.code(), Some(EXIT_NOT_VERIFIED), "{}", run.report());
    let warnings = doc["warnings"].to_string();
    assert!(warnings.contains("librdmacm-not-here.so.1"), "names the library: {warnings}");
    assert!(warnings.contains("install rdma-core's libraries (Debian/Ubuntu: librdmacm1"), "{warnings}");
    let p = &probes(&doc)[0];
    assert_eq!(p["problems"], serde_json::json!([]), "{p:#}");
    assert_eq!(p["rdma_probe"]["result"], "not_verified", "{p:#}");
    assert!(p["rdma_probe"]["error"].as_str().unwrap().contains("librdmacm-not-here.so.1"), "{p:#}");

    // The responder cannot start without them: an error naming them.
    let cfg = t.b_config().to_string_lossy().into_owned();
    let base = t.dir().join(format!("state-{}", t.b.name()));
    let mut cmd =
        common::roce_route_command(t.b.name(), &base, t.dir(), &["probe", &cfg, "--listen", "--idle", "1"]);
    cmd.envs(env);
    let listen = Run::of(cmd);
    listen.expect_no_panic();
    assert_ne!(listen.code(), Some(EXIT_OK), "{}", listen.report());
    assert!(listen.stderr().contains("install rdma-core's libraries"), "{}", listen.report());
}

/// The responder on a host whose kernel has no RDMA CM (or no RDMA
/// device on the rails): it fails at once with the reason, it does not
/// sit there claiming to listen. Red where it hangs until --idle or exits
/// 0.
#[test]
fn the_responder_without_rdma_fails_at_once_with_the_reason() {
    let t = TwoHosts::build(Topology::OneBridge, 1, false);
    let cfg = t.b_config().to_string_lossy().into_owned();
    let started = std::time::Instant::now();
    let run = t.rr(&t.b, &["probe", &cfg, "--listen", "--idle", "30"]);
    run.expect_no_panic();
    assert!(started.elapsed().as_secs() < 20, "it waited for --idle: {}", run.report());
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    let err = run.stderr();
    assert!(
        err.contains("cannot open the RDMA CM")
            || err.contains("cannot listen on")
            || err.contains("listening on none"),
        "{}",
        run.report()
    );
}

/// The same under --json: the report has each address with its error,
/// for a fleet's playbook to show.
#[test]
fn the_responders_report_names_each_address_it_could_not_listen_on() {
    let t = TwoHosts::build(Topology::OneBridge, 2, false);
    let cfg = t.b_config().to_string_lossy().into_owned();
    let run = t.rr(&t.b, &["--json", "probe", &cfg, "--listen", "--idle", "30"]);
    assert_eq!(run.code(), Some(EXIT_FAILED), "{}", run.report());
    let doc: Value = serde_json::from_str(&run.stdout()).unwrap_or_else(|e| panic!("{e}: {}", run.report()));
    let listening = doc["listening"].as_array().unwrap_or_else(|| panic!("{doc:#}"));
    let addresses: Vec<&str> = listening.iter().map(|l| l["address"].as_str().unwrap()).collect();
    assert_eq!(addresses, [t.b_rails[0].v4.as_str(), t.b_rails[1].v4.as_str()], "{doc:#}");
    assert!(listening.iter().all(|l| l["error"].is_string() && l["port"].is_null()), "{doc:#}");
    assert_eq!((doc["accepted"].as_u64(), doc["port"].as_u64()), (Some(0), Some(7472)), "{doc:#}");
    assert!(doc["warnings"].to_string().contains("listening on none of the rails' addresses"), "{doc:#}");
}

/// Options that cannot go together, or out of range: exit 2, named.
#[test]
fn rdma_options_out_of_range_or_together_are_usage_errors() {
    let t = TwoHosts::build(Topology::OneBridge, 1, false);
    let cfg = t.a_config().to_string_lossy().into_owned();
    let b0 = t.b_rails[0].v4.clone();
    for (args, words) in [
        (vec!["--listen", "--peer", b0.as_str()], "--listen"),
        (vec!["--peer", b0.as_str(), "--rdma", "--rdma-timeout", "0"], "--rdma-timeout 0"),
        (vec!["--listen", "--idle", "0"], "--idle 0"),
        (vec!["--self", "--rdma"], "--rdma"),
    ] {
        let mut all = vec!["probe", cfg.as_str()];
        all.extend(&args);
        let run = t.rr(&t.a, &all);
        assert_eq!(run.code(), Some(EXIT_INVALID), "{args:?}: {}", run.report());
        assert!(run.stderr().contains(words), "{args:?}: {}", run.report());
    }
}
