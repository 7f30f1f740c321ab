//! Partial hosts (issue 8, section 1), on the real kernel: a missing or
//! down rail, an address flushed by a link flap or still in DAD never
//! stops the other rails; apply applies what is ready and exits 5 (or,
//! with --strict, changes nothing and exits 1); check reports every drift.

mod common;

use std::time::Duration;

use common::*;

const EXIT_NOT_READY: i32 = 5;

/// Rules and routes of the host (the sysctls of a deleted rail cannot be read).
fn routing(tb: &Testbed) -> String {
    ["-4 rule", "-6 rule", "-4 route show table all", "-6 route show table all"]
        .iter()
        .map(|a| canonical_lines(&tb.ip_host(a)).join("\n"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Traffic from rail `k`'s IPv4 address leaves by rail `k` and its table.
fn assert_routed(tb: &Testbed, k: usize) {
    let r = tb.rail(k);
    let got = tb.route_get(PEER_V4, &r.v4);
    assert!(
        got.contains(&format!("dev {} ", r.name)) && got.contains(&format!("table {}", r.table)),
        "{got}"
    );
}

#[test]
fn a_deleted_rail_leaves_the_others_applied_with_exit_5() {
    let tb = Testbed::builder().rails(4).build();
    let cfg = tb.config_for(4, &[]);
    tb.ip_host("link del rail2");
    let before = routing(&tb);
    let strict = tb.rr(&["apply", "--strict", &cfg]).expect_code(EXIT_FAILED);
    strict.expect_stderr(&["--strict", "rail2: does not exist", "nothing was changed"]);
    assert_dump_eq(&before, &routing(&tb), "apply --strict changed the host");

    let run = tb.rr(&["--json", "apply", &cfg]).expect_code(EXIT_NOT_READY);
    let doc = json_doc(&run);
    assert_eq!(doc["changed"], true, "{doc:#}");
    let nr = doc["not_ready"].as_array().unwrap();
    assert_eq!(nr.len(), 1, "{doc:#}");
    assert_eq!(nr[0]["interface"], "rail2");
    assert!(nr[0]["reason"].as_str().unwrap().contains("does not exist"), "{doc:#}");
    for k in [0, 1, 3] {
        assert_routed(&tb, k);
    }
    // check reports rail2 and, independently, every other drift.
    tb.ip_host("rule del from 198.51.100.13 lookup 103");
    let check = tb.rr(&["--json", "check", &cfg]).expect_code(EXIT_DRIFT);
    let doc = json_doc(&check);
    let kinds: Vec<String> = doc["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| format!("{} {}", d["kind"], d["description"]))
        .collect();
    assert!(kinds.iter().any(|k| k.contains("not_ready") && k.contains("rail2")), "{kinds:#?}");
    assert!(kinds.iter().any(|k| k.contains("missing_rule") && k.contains("198.51.100.13")), "{kinds:#?}");
}

/// Issue 27: a dry run whose output and errors go to one place (a
/// terminal, `>log 2>&1`) says what is not ready once, as the script's
/// comment (old: also on stderr, so twice); to separate places, both keep
/// it (a pipe keeps the script's comment).
#[test]
fn a_dry_run_says_a_not_ready_part_once_where_both_streams_meet() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &[]);
    tb.ip_host("link set rail1 down");
    let log = tb.dir().join("dry-run.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut cmd = tb.rr_cmd(&["apply", "--dry-run", &cfg]);
    cmd.stdout(file.try_clone().unwrap()).stderr(file);
    let status = cmd.status().unwrap();
    assert_eq!(status.code(), Some(EXIT_NOT_READY));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("not ready, left alone: rail1: is administratively down").count(), 1, "{text}");
    assert!(text.contains("# not ready, left alone: rail1"), "{text}");
    let apart = tb.rr(&["apply", "--dry-run", &cfg]).expect_code(EXIT_NOT_READY);
    apart.expect_stdout(&["# not ready, left alone: rail1"]);
    apart.expect_stderr(&["roce-route: not ready, left alone: rail1"]);
}

#[test]
fn an_admin_down_rail_is_left_alone_until_it_is_up() {
    let tb = Testbed::builder().rails(3).build();
    let cfg = tb.config_for(3, &[]);
    tb.ip_host("link set rail1 down");
    let run = tb.rr(&["apply", &cfg]).expect_code(EXIT_NOT_READY);
    run.expect_stderr(&["not ready, left alone: rail1: is administratively down"]);
    run.expect_stdout(&["1 rail not ready"]);
    assert_routed(&tb, 0);
    assert_routed(&tb, 2);
    tb.ip_host("link set rail1 up");
    tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    for k in 0..3 {
        assert_routed(&tb, k);
    }
    tb.rr(&["check", &cfg]).expect_code(EXIT_OK);
}

/// An admin down/up of a dual-stack rail flushes its static IPv6 address
/// and every route of its table: apply used to exit 2 ("does not have
/// address", or with an IPv6 gateway "outside every subnet") and repair
/// nothing. Now IPv4 is repaired, the IPv6 address and gateway are
/// reported as not ready with the real cause, and their entries stay.
#[test]
fn a_dual_stack_flap_repairs_ipv4_and_reports_ipv6() {
    let tb = Testbed::builder().rails(2).ipv6(true).build();
    let cfg = tb.write_config(&tb.config_toml_with_gateway());
    let cfg = path_str(&cfg);
    tb.rr(&["apply", cfg]).expect_code(EXIT_OK);
    tb.ip_host("link set rail1 down");
    tb.ip_host("link set rail1 up");
    let v6 = tb.rail(1).v6.clone().unwrap();
    assert!(!tb.ip_host("-6 addr show dev rail1").contains(&v6), "the kernel kept {v6}");
    let run = tb.rr(&["apply", cfg]).expect_code(EXIT_NOT_READY);
    run.expect_stderr(&[
        &format!("{v6} on rail1: rail1 does not have it"),
        "gateway 2001:db8:1::fe on rail1",
    ]);
    assert!(!run.stderr().contains("outside every subnet"), "{}", run.report());
    assert_routed(&tb, 1);
    assert!(
        tb.ip_host("-6 rule").contains(&format!("from {v6} lookup 101")),
        "the IPv6 rule of rail1 was deleted"
    );
    // The address comes back: the next apply completes the rail.
    tb.ip_host(&format!("addr add {v6}/64 dev rail1 nodad"));
    tb.rr(&["apply", cfg]).expect_code(EXIT_OK);
    tb.rr(&["check", cfg]).expect_code(EXIT_OK);
}

/// An address in duplicate address detection made the step fail with
/// "Invalid source address". apply waits for DAD (--settle); without the
/// wait the address is not ready.
#[test]
fn an_address_in_dad_is_waited_for() {
    let tb = Testbed::builder().rails(2).build();
    let cfg_text = format!("{}addresses = [\"{}\", \"2001:db8:7::11/64\"]\n", "", tb.rail(1).v4_cidr());
    let text = tb.render_config_for(|r| r.name == "rail0", |_| vec![])
        + &format!("[[interface]]\nname = \"rail1\"\ntable = 101\n{cfg_text}");
    let cfg = tb.write_config(&text);
    let cfg = path_str(&cfg);
    // The testbed turns DAD off; this rail runs it, three probes long.
    tb.host().set_sysctl("net/ipv6/conf/rail1/accept_dad", "1");
    tb.host().set_sysctl("net/ipv6/conf/rail1/dad_transmits", "3");
    tb.ip_host("addr add 2001:db8:7::11/64 dev rail1");
    assert!(tb.ip_host("-6 addr show dev rail1").contains("tentative"), "no DAD running");
    let run = tb.rr(&["apply", "--settle", "0", cfg]).expect_code(EXIT_NOT_READY);
    run.expect_stderr(&["2001:db8:7::11 on rail1: is tentative"]);
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    tb.ip_host("addr del 2001:db8:7::11/64 dev rail1");
    tb.ip_host("addr add 2001:db8:7::11/64 dev rail1");
    let run = tb.rr(&["apply", "--settle", "10", cfg]).expect_code(EXIT_OK);
    assert!(!run.stderr().contains("Invalid"), "{}", run.report());
    tb.rr(&["check", cfg]).expect_code(EXIT_OK);
}

/// An interface that lists no `addresses`: an address found at the last
/// apply and gone now is reported (not ready by apply, drift by check)
/// instead of silently dropped.
#[test]
fn a_discovered_address_that_vanished_is_reported() {
    let tb = Testbed::builder().rails(2).ipv6(true).build();
    let text = "[[interface]]\nname = \"rail0\"\n[[interface]]\nname = \"rail1\"\n";
    let cfg = tb.write_config(text);
    let cfg = path_str(&cfg);
    tb.rr(&["apply", cfg]).expect_code(EXIT_OK);
    let v6 = tb.rail(1).v6.clone().unwrap();
    tb.ip_host(&format!("addr del {v6}/64 dev rail1"));
    let run = tb.rr(&["apply", cfg]).expect_code(EXIT_NOT_READY);
    run.expect_stderr(&[&format!("{v6} on rail1: was found on rail1 at the last apply and is gone")]);
    let check = tb.rr(&["check", cfg]).expect_code(EXIT_DRIFT);
    check.expect_stdout(&[&v6, "gone"]);
    tb.ip_host(&format!("addr add {v6}/64 dev rail1 nodad"));
    poll_until("the address to be usable", Duration::from_secs(5), || {
        !tb.ip_host("-6 addr show dev rail1").contains("tentative")
    });
    tb.rr(&["apply", cfg]).expect_code(EXIT_OK);
    tb.rr(&["check", cfg]).expect_code(EXIT_OK);
}

/// A link-local address is unique on its link only: a rail's gateway
/// fe80::1 is applied while another link (a container bridge, say) has
/// fe80::1 itself, as the kernel takes it; it was refused as "this host's
/// own address (on lxdbr0)". On the rail's own link it is one, not ready
/// (the kernel refuses it: "Gateway can not be a local address"), and the
/// other rail stays applied.
#[test]
fn a_link_local_gateway_that_another_link_has_is_applied() {
    let tb = Testbed::builder().rails(2).ipv6(true).build();
    tb.sh_host(
        "ip link add lxdbr0 type veth peer name lxdp0; ip link set lxdbr0 up; ip link set lxdp0 up; \
         ip addr add fe80::1/64 dev lxdbr0 nodad",
    );
    let cfg = tb.write_config(&tb.render_config(|_| vec![format!("gateway = {}", toml_str("fe80::1"))]));
    let cfg = path_str(&cfg);
    tb.rr(&["apply", cfg]).expect_code(EXIT_OK);
    for k in 0..2 {
        let r = tb.rail(k);
        let routes = tb.ip_host(&format!("-6 route show table {}", r.table));
        assert!(routes.contains(&format!("default via fe80::1 dev {} ", r.name)), "{routes}");
    }
    tb.ip_host("addr add fe80::1/64 dev rail1 nodad");
    let run = tb.rr(&["apply", cfg]).expect_code(EXIT_NOT_READY);
    run.expect_stderr(&["gateway fe80::1 on rail1: is this host's own address (on rail1)"]);
    let r0 = tb.rail(0);
    let routes = tb.ip_host(&format!("-6 route show table {}", r0.table));
    assert!(routes.contains("default via fe80::1 dev rail0 "), "{routes}");
}
