//! What apply waits for before planning (issue 15, item 5), on the real
//! kernel: `--settle` waits only for the addresses the plan uses (an
//! IPv4-only rail just brought up does not wait for its fe80 DAD), and the
//! links are read again after the settle and the lock wait (a rail that
//! appeared meanwhile is applied, not reported missing).

mod common;

use std::time::Duration;

use common::*;

/// Whether `ifname` in the host namespace has a tentative link-local address.
fn link_local_tentative(tb: &Testbed, ifname: &str) -> bool {
    tb.ip_host(&format!("-6 -o addr show dev {ifname} scope link")).contains("tentative")
}

/// `ifname` in the host namespace runs DAD (the testbed turns it off):
/// `probes` probes a second apart.
fn slow_dad(tb: &Testbed, ifname: &str, probes: u32) {
    for (key, value) in [
        (format!("conf/{ifname}/accept_dad"), "1".to_string()),
        (format!("conf/{ifname}/dad_transmits"), probes.to_string()),
        (format!("neigh/{ifname}/retrans_time_ms"), "1000".to_string()),
    ] {
        tb.host().set_sysctl(&format!("net/ipv6/{key}"), &value);
    }
}

/// rail0's fe80 address is in a slow DAD (5 probes, 1 s apart) when an
/// IPv4-only apply with `--settle 30` runs: it must not wait for it. On
/// the old code it waited the whole DAD, and the address was final when it
/// returned.
#[test]
fn an_ipv4_only_apply_does_not_wait_for_link_local_dad() {
    let tb = Testbed::builder().rails(2).build();
    let config = tb.standard_config();
    slow_dad(&tb, "rail0", 5);
    tb.ip_host("link set rail0 down");
    tb.ip_host("link set rail0 up");
    poll_until("rail0's link-local address in DAD", Duration::from_secs(5), || {
        link_local_tentative(&tb, "rail0")
    });
    tb.apply(&config, &["--no-announce", "--settle", "30"]).expect_code(EXIT_OK);
    assert!(
        link_local_tentative(&tb, "rail0"),
        "apply waited for rail0's link-local DAD, which an IPv4-only plan does not use"
    );
    tb.rr(&["check", path_str(&config)]).expect_code(EXIT_OK);
}

/// A rail that appears while apply waits for the lock is planned with the
/// others: apply reads the links again once it holds the lock.
#[test]
fn a_rail_that_appears_during_the_lock_wait_is_applied() {
    let tb = Testbed::builder().rails(3).build();
    let all = tb.standard_config();
    let two = tb.config_for(2, &[]);
    let r = tb.rail(2).clone();
    tb.ip_host(&format!("link del {}", r.name));
    // A slow apply of two rails holds the lock for a few seconds.
    let mut slow = tb.rr_cmd(&["apply", "--no-announce", &two]);
    slow.env("ROCE_ROUTE_STEP_DELAY_MS", "300");
    let slow = Background::spawn(slow, "slow apply of two rails");
    poll_until("the slow apply to start changing", Duration::from_secs(10), || {
        !tb.owned_entries().is_empty()
    });
    // This apply reads the links now (no rail2) and waits for the lock.
    let waiting =
        Background::spawn(tb.rr_cmd(&["apply", "--no-announce", path_str(&all)]), "apply of all rails");
    std::thread::sleep(Duration::from_millis(500));
    tb.ip_host(&format!("link add {} type veth peer name {} netns {}", r.name, r.peer_port, tb.peer_ns()));
    tb.ip_peer(&format!("link set {} master br0 up", r.peer_port));
    tb.ip_host(&format!("addr add {} dev {}", r.v4_cidr(), r.name));
    tb.ip_host(&format!("link set {} up", r.name));
    slow.wait_timeout(Duration::from_secs(30)).expect_code(EXIT_OK);
    let run = waiting.wait_timeout(Duration::from_secs(30));
    run.expect_code(EXIT_OK);
    assert!(
        tb.route_get(tb.peer_v4(), &r.v4).contains(&format!("table {}", r.table)),
        "rail2 was not applied: {}",
        tb.route_get(tb.peer_v4(), &r.v4)
    );
}

/// apply takes the namespace's lock before it reads the host when no other
/// run holds it (the rails' sysctls then come with their links), but not
/// through a wait for DAD: it lets it go when it finds an address it must
/// wait for. A run meanwhile with `--lock-timeout 0` is not refused. Red
/// when the lock is held through the wait (that run exits 1, "another
/// roce-route works in this network namespace").
#[test]
fn an_apply_waiting_for_dad_does_not_hold_the_lock() {
    let tb = Testbed::builder().rails(2).build();
    let text = tb.render_config_for(|r| r.name == "rail0", |_| vec![])
        + &format!(
            "[[interface]]\nname = \"rail1\"\ntable = 101\naddresses = [\"{}\", \"2001:db8:7::11/64\"]\n",
            tb.rail(1).v4_cidr()
        );
    let cfg = tb.write_config(&text);
    let rail0 = tb.write_config(&tb.render_config_for(|r| r.name == "rail0", |_| vec![]));
    // The testbed turns DAD off; rail1 runs it, three probes a second apart.
    slow_dad(&tb, "rail1", 3);
    tb.ip_host("addr add 2001:db8:7::11/64 dev rail1");
    assert!(tb.ip_host("-6 addr show dev rail1").contains("tentative"), "no DAD running");
    let waiting = Background::spawn(
        tb.rr_cmd(&["apply", "--no-announce", "--settle", "30", path_str(&cfg)]),
        "apply waiting for DAD",
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(tb.ip_host("-6 addr show dev rail1").contains("tentative"), "DAD ended before the second run");
    tb.rr(&["--lock-timeout", "0", "apply", "--no-announce", path_str(&rail0)]).expect_code(EXIT_OK);
    waiting.wait_timeout(Duration::from_secs(30)).expect_code(EXIT_OK);
    tb.rr(&["check", path_str(&cfg)]).expect_code(EXIT_OK);
}
