//! One bad rail must not stop the others (issue 15, item 3), on the real
//! kernel. Host state that is wrong for one rail (a listed IPv6 address
//! whose duplicate address detection failed, an address that moved to
//! another rail, a gateway that became one of the host's own addresses, an
//! address with another prefix length than listed) used to be a config
//! error: apply exited 2 with nothing changed, and watch stopped healing
//! every rail. Now it is not ready for that address or gateway: apply
//! applies the rest and exits 5, `--json` names the part, a dry run shows it
//! as `# not ready, left alone: ...`, check reports it as drift (exit 3),
//! and once the host is fixed (with the command the reason gives) apply
//! exits 0.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;

const EXIT_NOT_READY: i32 = 5;

/// A config of every rail with its table; `rail` gives per rail its
/// `addresses` (None: none listed, so the rail takes what it has) and
/// extra lines.
fn config(tb: &Testbed, rail: impl Fn(&Rail) -> (Option<Vec<String>>, Vec<String>)) -> PathBuf {
    let mut text = String::new();
    for r in tb.rails() {
        let (addresses, extra) = rail(r);
        text += &format!("[[interface]]\nname = {}\ntable = {}\n", toml_str(&r.name), r.table);
        if let Some(a) = addresses {
            text += &format!("addresses = {}\n", toml_list(&a));
        }
        for line in extra {
            text += &line;
            text.push('\n');
        }
        text.push('\n');
    }
    tb.write_config(&text)
}

/// Rail `k` is fully applied: traffic from each of its addresses leaves by
/// it, through its table, and the replies to the peer's pings of its IPv4
/// address leave by it.
fn assert_rail_applied(tb: &Testbed, k: usize) {
    let r = tb.rail(k);
    let mut froms = vec![(PEER_V4, r.v4.clone())];
    froms.extend(r.v6.clone().map(|v6| (PEER_V6, v6)));
    for (to, from) in froms {
        let got = tb.route_get(to, &from);
        assert!(
            got.contains(&format!("dev {} ", r.name)) && got.contains(&format!("table {}", r.table)),
            "traffic from {from} (rail {}) does not leave by it and its table: {got}",
            r.name
        );
    }
    assert_eq!(tb.reply_leaves_via(k), r.name, "replies to {} leave by another rail", r.v4);
}

/// The host state is not a config error: a dry run, check and apply all
/// report `address` on `iface` as not ready (the dry run exits 5, check 3,
/// apply 5 having applied the rest), with `needles` in the reason; returns
/// the reason.
fn assert_not_ready(tb: &Testbed, cfg: &str, iface: &str, address: &str, needles: &[&str]) -> String {
    // Left alone, or (an address whose entries are not kept) with what the
    // run deletes of it.
    let prefixes = [
        format!("# not ready, left alone: {address} on {iface}: "),
        format!("# not ready: {address} on {iface}: "),
    ];
    let dry = tb.rr(&["apply", "--dry-run", cfg]).expect_code(EXIT_NOT_READY);
    assert!(
        dry.stdout().lines().any(|l| prefixes.iter().any(|p| l.starts_with(p))),
        "no `{}` line:\n{}",
        prefixes[0],
        dry.report()
    );

    let check = tb.rr(&["--json", "check", cfg]).expect_code(EXIT_DRIFT);
    let doc = json_doc(&check);
    let described = format!("{address} on {iface}: ");
    assert!(
        doc["differences"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["kind"] == "not_ready" && d["description"].as_str().unwrap().starts_with(&described)),
        "check does not report {described}...: {doc:#}"
    );

    let run = tb.rr(&["--json", "apply", cfg]).expect_code(EXIT_NOT_READY);
    let doc = json_doc(&run);
    let not_ready = doc["not_ready"].as_array().unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(not_ready.len(), 1, "only that part is not ready: {doc:#}");
    let nr = &not_ready[0];
    assert_eq!((nr["interface"].as_str(), nr["address"].as_str()), (Some(iface), Some(address)), "{doc:#}");
    let reason = nr["reason"].as_str().unwrap().to_string();
    // A command the reason quotes acts in the host's namespace, as printed.
    let ns_ip = format!("ip -n {} ", tb.host().name());
    for needle in needles {
        let needle = needle.replace("`ip ", &format!("`{ns_ip}")).replace("; ip ", &format!("; {ns_ip}"));
        assert!(reason.contains(&needle), "the reason lacks {needle:?}: {reason}");
    }
    reason
}

/// Runs the `ip addr ...` command(s) a reason gives in backquotes (the
/// first such), as an admin would copy them.
fn run_fix_from(tb: &Testbed, reason: &str) {
    let fix = reason
        .split('`')
        .skip(1)
        .step_by(2)
        .find(|c| c.starts_with(&format!("ip -n {} addr ", tb.host().name())))
        .unwrap_or_else(|| panic!("no `ip -n NS addr` command in: {reason}"));
    // As printed, from the test's own namespace: `-n` takes it to the host's.
    for cmd in fix.split("; ") {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        assert_eq!(&words[..3], ["ip", "-n", tb.host().name()], "{cmd:?} in {reason}");
        run("ip", &words[1..]);
    }
}

/// The host fixed: apply completes every rail, check finds nothing.
fn assert_fixed(tb: &Testbed, cfg: &str) {
    tb.rr(&["apply", cfg]).expect_code(EXIT_OK);
    tb.rr(&["check", cfg]).expect_code(EXIT_OK);
    for k in 0..tb.rails().len() {
        assert_rail_applied(tb, k);
    }
}

/// (a) rail1 lists an IPv6 address another host on the link already has:
/// the kernel marks it dadfailed. Old: exit 2 "failed duplicate address
/// detection". The address is not ready; every rail, rail1's other
/// addresses included, is applied.
#[test]
fn a_listed_address_that_failed_dad_leaves_the_other_rails_applied() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let dup = "2001:db8:1::99";
    let cfg = config(&tb, |r| {
        let mut a = r.cidrs();
        if r.name == "rail1" {
            a.push(format!("{dup}/64"));
        }
        (Some(a), vec![])
    });
    let cfg = path_str(&cfg);
    // The testbed turns DAD off; rail1 runs it, and the peer has the address.
    tb.host().set_sysctl("net/ipv6/conf/rail1/accept_dad", "1");
    tb.ip_peer(&format!("addr add {dup}/64 dev br0 nodad"));
    tb.ip_host(&format!("addr add {dup}/64 dev rail1"));
    poll_until("DAD to fail on rail1", Duration::from_secs(10), || {
        tb.ip_host("-6 addr show dev rail1").contains("dadfailed")
    });
    let reason = assert_not_ready(
        &tb,
        cfg,
        "rail1",
        dup,
        &[
            "failed duplicate address detection",
            &format!("(`ip addr del {dup}/64 dev rail1; ip addr add {dup}/64 dev rail1`)"),
        ],
    );
    for k in 0..4 {
        assert_rail_applied(&tb, k);
    }
    assert!(!tb.ip_host("-6 rule").contains(dup), "a rule for the duplicate:\n{}", tb.ip_host("-6 rule"));
    // The other host gives it up; re-added as the reason says, DAD passes
    // (apply waits for it) and the rail is complete.
    tb.ip_peer(&format!("addr del {dup}/64 dev br0"));
    run_fix_from(&tb, &reason);
    assert_fixed(&tb, cfg);
    assert!(tb.ip_host("-6 rule").contains(&format!("from {dup} lookup 101")), "{}", tb.ip_host("-6 rule"));
}

/// (b) rail1's IPv4 address moves to rail2, which lists no `addresses`
/// (it takes what it has). Added to rail2 before it is removed from rail1,
/// it is on both: old: exit 2 "is on interfaces". It is rail1's (listed
/// there), so not ready on rail2. Removed from rail1, it is rail2's: not
/// ready on rail1, whose rule for it goes, so its replies leave by rail2.
#[test]
fn an_address_that_moved_to_another_rail_leaves_the_other_rails_applied() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let cfg = config(&tb, |r| (if r.name == "rail2" { None } else { Some(r.cidrs()) }, vec![]));
    let cfg = path_str(&cfg);
    tb.rr(&["apply", cfg]).expect_code(EXIT_OK);
    let (moved, cidr) = (tb.rail(1).v4.clone(), tb.rail(1).v4_cidr());

    tb.ip_host(&format!("addr add {cidr} dev rail2"));
    assert_not_ready(
        &tb,
        cfg,
        "rail2",
        &moved,
        &["rail2 has it too, but rail1 lists it", &format!("(`ip addr del {cidr} dev rail2`)")],
    );
    for k in 0..4 {
        assert_rail_applied(&tb, k);
    }
    let rules = tb.ip_host("-4 rule");
    assert!(!rules.contains(&format!("from {moved} lookup 102")), "{rules}");

    tb.ip_host(&format!("addr del {cidr} dev rail1"));
    let reason = assert_not_ready(
        &tb,
        cfg,
        "rail1",
        &moved,
        &[
            "is on rail2, not on rail1",
            &format!("(`ip addr del {cidr} dev rail2; ip addr add {cidr} dev rail1`)"),
        ],
    );
    for k in [0, 2, 3] {
        assert_rail_applied(&tb, k);
    }
    let rules = tb.ip_host("-4 rule");
    assert!(
        rules.contains(&format!("from {moved} lookup 102"))
            && !rules.contains(&format!("from {moved} lookup 101")),
        "rail2 owns {moved} now, rail1's rule for it is gone:\n{rules}"
    );
    assert_eq!(tb.reply_leaves_via_ip(&moved), "rail2");
    let v6 = tb.rail(1).v6.clone().unwrap();
    assert!(tb.route_get(PEER_V6, &v6).contains("dev rail1 table 101"), "rail1's IPv6 address is applied");

    // Moved back as the reason says: rail2 no longer expects it.
    run_fix_from(&tb, &reason);
    assert_fixed(&tb, cfg);
}

/// (c) rail3's gateway becomes one of the host's addresses (here: rail3's
/// own). Old: exit 2 "is this host's own address". The gateway is not
/// ready, its route stays; the rest of rail3 and the other rails are applied.
#[test]
fn a_gateway_that_became_local_leaves_the_other_rails_applied() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let gw = "198.51.100.253";
    let cfg = config(&tb, |r| {
        let g = if r.name == "rail3" { gw } else { GATEWAY_V4 };
        (Some(r.cidrs()), vec![format!("gateway = {}", toml_str(g))])
    });
    let cfg = path_str(&cfg);
    tb.rr(&["apply", cfg]).expect_code(EXIT_OK);
    tb.ip_host(&format!("addr add {gw}/24 dev rail3"));
    let reason = assert_not_ready(
        &tb,
        cfg,
        "rail3",
        &format!("gateway {gw}"),
        &["is this host's own address (on rail3)", &format!("(`ip addr del {gw}/24 dev rail3`)")],
    );
    for k in 0..4 {
        assert_rail_applied(&tb, k);
    }
    for t in 100..103 {
        let routes = tb.ip_host(&format!("-4 route show table {t}"));
        assert!(routes.contains(&format!("default via {GATEWAY_V4} dev rail{}", t - 100)), "{routes}");
    }
    let routes = tb.ip_host("-4 route show table 103");
    assert!(
        routes.contains(&format!("default via {gw} dev rail3")),
        "the gateway's route was not kept: {routes}"
    );
    run_fix_from(&tb, &reason);
    assert_fixed(&tb, cfg);
}

/// (d) rail2's IPv4 address is re-added with another prefix length than
/// listed. Old: exit 2 "the interface has it as". The address is not
/// ready, its rule stays; the rest is applied.
#[test]
fn an_address_with_another_length_leaves_the_other_rails_applied() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let cfg = tb.write_config(&tb.config_toml());
    let cfg = path_str(&cfg);
    tb.rr(&["apply", cfg]).expect_code(EXIT_OK);
    let a = tb.rail(2).v4.clone();
    tb.ip_host(&format!("addr del {a}/24 dev rail2"));
    tb.ip_host(&format!("addr add {a}/25 dev rail2"));
    let reason = assert_not_ready(
        &tb,
        cfg,
        "rail2",
        &a,
        &[
            &format!("rail2 has it as {a}/25, but"),
            &format!("(`ip addr del {a}/25 dev rail2; ip addr add {a}/24 dev rail2`)"),
        ],
    );
    for k in [0, 1, 3] {
        assert_rail_applied(&tb, k);
    }
    let v6 = tb.rail(2).v6.clone().unwrap();
    assert!(tb.route_get(PEER_V6, &v6).contains("dev rail2 table 102"), "rail2's IPv6 address is applied");
    assert!(tb.ip_host("-4 rule").contains(&format!("from {a} lookup 102")), "the rule of {a} was not kept");
    run_fix_from(&tb, &reason);
    assert_fixed(&tb, cfg);
}

/// (b, the other order) rail1, which has a second IPv4 address, loses
/// one to rail2 (which lists no `addresses`): removed, then added there,
/// never on both. Old: exit 5, but rail1's rule for it was kept, and
/// rail1's table (with the connected route of its other address) sent the
/// moved address's replies out of rail1. Now rail1's entries for it go:
/// its replies leave by rail2.
#[test]
fn an_address_moved_to_a_rail_that_takes_it_is_routed_by_that_rail() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let second = "198.51.100.21/24";
    // Without it, deleting the primary address deletes this secondary too.
    tb.host().set_sysctl("net/ipv4/conf/rail1/promote_secondaries", "1");
    tb.ip_host(&format!("addr add {second} dev rail1"));
    let cfg = config(&tb, |r| match r.name.as_str() {
        "rail2" => (None, vec![]),
        "rail1" => (Some([r.cidrs(), vec![second.to_string()]].concat()), vec![]),
        _ => (Some(r.cidrs()), vec![]),
    });
    let cfg = path_str(&cfg);
    tb.rr(&["apply", cfg]).expect_code(EXIT_OK);
    let (moved, cidr) = (tb.rail(1).v4.clone(), tb.rail(1).v4_cidr());
    tb.ip_host(&format!("addr del {cidr} dev rail1"));
    tb.ip_host(&format!("addr add {cidr} dev rail2"));
    let run = tb.rr(&["apply", cfg]).expect_code(EXIT_NOT_READY);
    assert_eq!(tb.reply_leaves_via_ip(&moved), "rail2", "{}", tb.ip_host("-4 rule"));
    // Its entries go: the line says so, and what this run deletes of them
    // (old: it began "not ready, left alone:" and said they "are removed").
    let line = format!("roce-route: not ready: {moved} on rail1: is on rail2, not on rail1");
    let stderr = run.stderr();
    let said = stderr.lines().find(|l| l.starts_with(&line)).unwrap_or_else(|| panic!("{stderr}"));
    let table = tb.rail(1).table;
    assert!(said.ends_with(&format!("; this apply deletes its 1 rule in table {table}")), "{said}");
    assert!(!stderr.contains(&format!("left alone: {moved}")), "{stderr}");
    for k in [0, 2, 3] {
        assert_rail_applied(&tb, k);
    }
    assert_eq!(tb.reply_leaves_via_ip("198.51.100.21"), "rail1");
}

/// watch keeps healing the other rails while one has bad host state. Old:
/// every pass was the config error (logged every 2 s), nothing healed.
#[test]
fn watch_heals_the_other_rails_while_one_is_bad() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let gw = "198.51.100.253";
    let cfg = config(&tb, |r| {
        let g = if r.name == "rail3" { gw } else { GATEWAY_V4 };
        (Some(r.cidrs()), vec![format!("gateway = {}", toml_str(g))])
    });
    tb.rr(&["apply", path_str(&cfg)]).expect_code(EXIT_OK);
    tb.ip_host(&format!("addr add {gw}/24 dev rail3"));
    let (out, err) = (tb.dir().join("watch.out"), tb.dir().join("watch.err"));
    let mut watch = Background::spawn_logged(tb.rr_cmd(&["watch"]), "roce-route watch", &out, &err);
    let log = || {
        let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap_or_default();
        format!("watch stdout:\n{}\nwatch stderr:\n{}", read(&out), read(&err))
    };
    let v4 = tb.rail(0).v4.clone();
    tb.ip_host(&format!("rule del from {v4} lookup 100"));
    let rule = format!("from {v4} lookup 100");
    let healed = std::time::Instant::now() + Duration::from_secs(10);
    while !tb.ip_host("-4 rule").contains(&rule) {
        assert!(std::time::Instant::now() < healed, "watch did not restore `{rule}`:\n{}", log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(watch.is_running(), "watch ended:\n{}", log());
    assert_rail_applied(&tb, 0);
    watch.kill();
}
