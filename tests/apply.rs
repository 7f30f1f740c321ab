//! Real-kernel tests of `roce-route apply`, each on its own `Testbed`.
//!
//! Every claim is checked on the kernel the way a network engineer would:
//! `ip route get`, the peer's neighbour table, which rail the replies leave
//! by, and the canonical `dump()` of rules, routes and ARP sysctls.
//!
//! Every run of roce-route keeps its state directory (journal, lock) inside
//! the testbed's temp dir, so nothing is left in /run and runs of different
//! tests never share state.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::{
    Background, EXIT_DRIFT, EXIT_FAILED, EXIT_OK, FIRST_TABLE, GATEWAY_V4, GATEWAY_V6, Nobody, PEER_V4,
    PEER_V6, Run, SUBNET_V4, Testbed, assert_dump_eq, canonical_lines, describe_output, describe_with_config,
    field_after, in_netns, journal_files, path_str, poll_until, profile_count, script_without_netns,
    toml_str,
};

/// The protocol number roce-route marks its routes and rules with.
const OURS: &str = "proto 234";
/// Outside every rail subnet: only a default route reaches it.
const REMOTE_V4: &str = "203.0.113.1";
const REMOTE_V6: &str = "2001:db8:ffff::1";

// ---------------------------------------------------------------------------
// Running roce-route

/// `apply --dry-run FLAGS CONFIG`, which must succeed: the script printed.
fn dry_run(tb: &Testbed, config: &Path, flags: &[&str]) -> String {
    let mut all = vec!["--dry-run"];
    all.extend(flags);
    tb.apply(config, &all).expect_code(0).stdout()
}

/// The command lines of a dry-run script (lines not starting with '#').
fn commands(script: &str) -> Vec<&str> {
    script.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect()
}

/// Runs a dry-run script with `sh -e` inside the host namespace.
fn run_script(tb: &Testbed, script: &str) {
    let path = tb.dir().join("dry-run.sh");
    fs::write(&path, script).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    let out = tb.host().exec_output("sh", &["-e", path_str(&path)]);
    assert!(
        out.status.success(),
        "the dry-run script failed under `sh -e`:\n{script}\n{}",
        describe_output(&out)
    );
}

/// A repeated apply says "in sync" and changes nothing. (Not the check
/// command's verdict: that is lifecycle.rs's `assert_check_in_sync`.)
fn assert_reapply_in_sync(tb: &Testbed, config: &Path, flags: &[&str]) {
    let before = tb.dump();
    let run = tb.apply(config, flags).expect_code(0);
    assert!(run.stdout().contains("in sync"), "a repeated apply should say it is in sync:\n{}", run.report());
    assert_dump_eq(&before, &tb.dump(), "a repeated apply changed the host");
}

// ---------------------------------------------------------------------------
// Observing the host

/// `dump()` made comparable across two testbeds: IPv6 link-local
/// addresses (derived from the rails' random MACs) are masked, and each
/// section is sorted again.
fn portable_dump(tb: &Testbed) -> String {
    fn flush(out: &mut String, section: &mut Vec<String>) {
        section.sort();
        for line in section.drain(..) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    let mask = |w: &str| {
        if w.starts_with("fe80::") && w != "fe80::/64" {
            "fe80::<link-local>".to_string()
        } else {
            w.to_string()
        }
    };
    let (mut out, mut section) = (String::new(), Vec::new());
    for line in tb.dump().lines() {
        if line.starts_with("## ") {
            flush(&mut out, &mut section);
            out.push_str(line);
            out.push('\n');
        } else {
            section.push(line.split_whitespace().map(mask).collect::<Vec<_>>().join(" "));
        }
    }
    flush(&mut out, &mut section);
    out
}

/// Both families' routes of one table, canonical (none for a table the
/// kernel does not have: `ip -6` fails on those).
fn table_routes(tb: &Testbed, table: u32) -> Vec<String> {
    let show = |family: &str| match tb.try_ip_host(&format!("{family} route show table {table}")) {
        Ok(out) => canonical_lines(&out),
        Err(e) if e.contains("FIB table does not exist") => Vec::new(),
        Err(e) => panic!("{e}"),
    };
    [show("-4"), show("-6")].concat()
}

/// Both families' rules, canonical.
fn all_rules(tb: &Testbed) -> Vec<String> {
    ["-4", "-6"].iter().flat_map(|f| canonical_lines(&tb.ip_host(&format!("{f} rule show")))).collect()
}

/// The rules that look up `table`.
fn rules_to(tb: &Testbed, table: u32) -> Vec<String> {
    let t = table.to_string();
    all_rules(tb).into_iter().filter(|l| field_after(l, "lookup") == Some(t.as_str())).collect()
}

/// The rules selecting source `addr`.
fn rules_from(tb: &Testbed, addr: &str) -> Vec<String> {
    all_rules(tb).into_iter().filter(|l| field_after(l, "from") == Some(addr)).collect()
}

/// The untouched testbed's problem: every rail's traffic to the peer
/// leaves by rail0.
fn assert_broken(tb: &Testbed) {
    let first = &tb.rail(0).name;
    for r in tb.rails() {
        assert_eq!(
            &tb.route_get_dev(PEER_V4, &r.v4),
            first,
            "before apply: ip route get {PEER_V4} from {}",
            r.v4
        );
    }
}

/// The fix, as a network engineer checks it: per rail, `ip route get` from
/// its address leaves by it (both families), the peer's ARP entry for its
/// address holds its MAC, and replies to the peer's pings leave by it.
fn assert_fixed(tb: &Testbed) {
    for (k, r) in tb.rails().iter().enumerate() {
        assert_eq!(
            tb.route_get_dev(PEER_V4, &r.v4),
            r.name,
            "ip route get {PEER_V4} from {}:\n{}\n{}",
            r.v4,
            tb.route_get(PEER_V4, &r.v4),
            tb.dump()
        );
        assert_eq!(
            tb.peer_neigh_mac(&r.v4).as_deref(),
            Some(r.mac.as_str()),
            "the peer's neighbour entry for {} should hold {}'s MAC",
            r.v4,
            r.name
        );
        assert_eq!(tb.reply_leaves_via(k), r.name, "replies to the peer's pings of {}", r.v4);
        if let Some(v6) = &r.v6 {
            assert_eq!(
                tb.route_get_dev(PEER_V6, v6),
                r.name,
                "ip -6 route get {PEER_V6} from {v6}:\n{}",
                tb.route_get(PEER_V6, v6)
            );
        }
    }
}

/// `ip route get DST from SRC` goes via `gw` out of `dev`.
fn assert_route_via(tb: &Testbed, dst: &str, src: &str, gw: &str, dev: &str) {
    let out = tb.route_get(dst, src);
    assert_eq!(
        (field_after(&out, "via"), field_after(&out, "dev")),
        (Some(gw), Some(dev)),
        "ip route get {dst} from {src}:\n{out}"
    );
}

/// Two identical fresh testbeds.
fn twin_testbeds(rails: usize, ipv6: bool) -> (Testbed, Testbed) {
    let build = || Testbed::builder().rails(rails).ipv6(ipv6).build();
    (build(), build())
}

/// Proves `--dry-run` exact: on `a` the printed script runs with `sh -e`,
/// on the identical `b` apply itself runs; the two hosts must end up in
/// the same state, and `a` must then be in sync. Returns the script.
fn assert_dry_run_exact(a: &Testbed, b: &Testbed, toml: &str, flags: &[&str]) -> String {
    let config_a = a.write_config(toml);
    let script = dry_run(a, &config_a, flags);
    assert!(!commands(&script).is_empty(), "the dry-run printed no command:\n{script}");
    run_script(a, &script);
    b.apply(&b.write_config(toml), flags).expect_code(0);
    assert_dump_eq(
        &portable_dump(b),
        &portable_dump(a),
        &format!(
            "running the dry-run script (actual) does not give what apply gives (expected)\n\
             --- script ---\n{script}"
        ),
    );
    assert_reapply_in_sync(a, &config_a, flags);
    script
}

// ---------------------------------------------------------------------------
// 1. The fix

#[test]
fn apply_fixes_routing_arp_and_replies_on_every_rail() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    assert_broken(&tb);
    for r in tb.rails() {
        let v6 = r.v6.as_deref().expect("ipv6 testbed");
        assert_eq!(tb.route_get_dev(PEER_V6, v6), "rail0", "before apply, from {v6}");
    }

    tb.apply_ok(&tb.standard_config());
    assert_fixed(&tb);
}

/// An apply from scratch dumps each rail's table before it exists (the
/// kernel ends those dumps with "FIB table does not exist"): the dump
/// socket is kept through the kernel's errors, not opened again for each
/// table. It was: 22 sockets for 8 rails, 7-8 system calls each. The links
/// and the addresses are read on it too, and the changes go on one other:
/// two sockets in all (the links and addresses once took one each). Each
/// table is read in one dump of both families, and the rules in one (an
/// AF_UNSPEC dump, `Netlink::table_routes`): a dump per family was twice
/// the round trips.
#[test]
fn apply_from_scratch_keeps_its_dump_socket_through_missing_tables() {
    let tb = Testbed::builder().rails(8).ipv6(true).build();
    let run = tb.rr_profiled(&["apply", path_str(&tb.standard_config())], 0);
    let dumps =
        |run: &Run| (profile_count(&run.stderr(), "route_dumps"), profile_count(&run.stderr(), "rule_dumps"));
    assert_eq!(dumps(&run), (16, 2), "8 tables and the rules, read and read back:\n{}", run.stderr());
    let again = tb.rr_profiled(&["apply", path_str(&tb.standard_config())], 0);
    assert_eq!(dumps(&again), (8, 1), "a no-op reads them once:\n{}", again.stderr());
    let routes = profile_count(&run.stderr(), "routes_read");
    assert!(routes > 0, "the tables were read: {}", run.stderr());
    let sockets = profile_count(&run.stderr(), "netlink_sockets");
    assert_eq!(
        sockets,
        2,
        "netlink sockets for 16 tables (8 rails, both families), links and addresses, and the changes: \
         one per missing table, or per kind of dump?\n{}",
        run.stderr()
    );
    assert_fixed(&tb);
}

/// `n` veth pairs as a CNI makes them, both ends up on the host: cali0..,
/// each with its IPv6 link-local address.
fn add_pod_veths(tb: &Testbed, n: usize) {
    tb.sh_host(&format!(
        "for i in $(seq 0 {}); do ip link add cali$i type veth peer name calp$i; \
         ip link set cali$i up; ip link set calp$i up; done",
        n - 1
    ));
    // Their link-local addresses come with the carrier, a moment later:
    // counts of the host's addresses must not race them.
    let link_locals =
        || tb.ip_host("-6 -o addr show scope link").lines().filter(|l| l.contains(" cal")).count();
    poll_until("the pod veths' link-local addresses", Duration::from_secs(5), || link_locals() == 2 * n);
}

/// `cmd` with the profile on: its run, expecting exit `code`, and how many
/// links it read (`links_read`).
fn links_read(tb: &Testbed, args: &[&str], code: i32) -> (Run, u64) {
    let run = tb.rr_profiled(args, code);
    let links = profile_count(&run.stderr(), "links_read");
    (run, links)
}

/// A Kubernetes node carries a veth per pod: apply and check ask the
/// kernel for the config's links by name (show for those its owned routes
/// name), not for every link (a read of a
/// thousand is 9 ms, the kernel filling their messages), and still name a
/// link outside the config where they meet it: a route of someone else's
/// on a pod veth in a rail's table is deleted by that name, and ARP flux
/// from an interface outside the config is the business of
/// tests/rdma_risks.rs. A configured interface that is missing makes them
/// read every link, so that what is said of it names the closest one.
/// Each reads the addresses once to plan (it was twice: apply's DAD wait
/// and check's route lookups read them again), and of IPv6 the rails'
/// only, as nothing of this config is IPv6 (show too, as nothing it owns
/// is IPv6). A pod
/// veth's IPv6 link-local address is not named (it says nothing of a
/// rail): only the links of a foreign route or of another address are.
#[test]
fn apply_and_check_read_only_the_configs_links_and_still_name_the_others() {
    let tb = Testbed::builder().rails(4).build();
    add_pod_veths(&tb, 20);
    tb.ip_host("addr add 203.0.113.9/32 dev cali3");
    let link_locals = tb.ip_host("-6 -o addr show scope link");
    assert!(link_locals.contains("calp19"), "every pod veth has its link-local address:\n{link_locals}");
    let named = |run: &Run| profile_count(&run.stderr(), "links_named");
    let all = canonical_lines(&tb.ip_host("-o link show")).len() as u64;
    assert!(all >= 44, "lo, the rails and 40 veths: {all}");
    let addresses = canonical_lines(&tb.ip_host("-o addr show")).len() as u64;
    let planned = planned_addresses(&tb, &["rail0", "rail1", "rail2", "rail3"]);
    assert!(
        planned + 40 <= addresses,
        "the 40 veths' link-locals are not planned with: {planned} of {addresses}"
    );
    let read = |run: &Run| profile_count(&run.stderr(), "addresses_read");
    let once = |run: &Run| assert_eq!(read(run), planned, "{}", run.stderr());
    let table = FIRST_TABLE;
    tb.ip_host(&format!("route add 203.0.113.0/24 dev cali7 table {table}"));
    let config = tb.standard_config();
    let config = path_str(&config);

    let (refused, links) = links_read(&tb, &["apply", "--dry-run", config], EXIT_FAILED);
    assert_eq!(links, 4, "the 4 rails, asked by name, not the {all} links:\n{}", refused.stderr());
    refused.expect_stderr(&[&format!("203.0.113.0/24 dev cali7 table {table}"), "--adopt"]);
    let (dry, links) = links_read(&tb, &["apply", "--adopt", "--dry-run", config], EXIT_OK);
    assert_eq!(links, 4);
    once(&dry);
    assert!(
        dry.stdout().contains(&format!("203.0.113.0/24 dev cali7 table {table}")),
        "the route on the pod veth is named by its link's name:\n{}",
        dry.stdout()
    );
    let (_, links) = links_read(&tb, &["apply", "--adopt", config], EXIT_OK);
    assert_eq!(links, 4);
    assert_eq!(table_routes(&tb, table).iter().filter(|r| r.contains("cali7")).count(), 0, "deleted");
    // A no-op (a change is announced to the peers after it, from the
    // addresses read again then, as DAD may have ended meanwhile).
    // Unless the lock took over 20 ms (a loaded machine): then the links
    // and the addresses are read again under it, on purpose.
    let (run, links) = links_read(&tb, &["apply", config], EXIT_OK);
    let reads = 1 + profile_count(&run.stderr(), "read_again");
    assert_eq!(links, 4 * reads);
    assert_eq!(read(&run), planned * reads, "{}", run.stderr());
    let why = "neither lo's nor cali3's addresses, which nothing of the run compares, nor the 40 link-locals";
    assert_eq!(named(&run), 0, "{why}:\n{}", run.stderr());
    let (run, links) = links_read(&tb, &["check", config], EXIT_OK);
    assert_eq!(links, 4);
    once(&run);
    assert_eq!(named(&run), 0, "{why}:\n{}", run.stderr());
    // show asks for the links its owned routes name, once it has read them.
    let (run, links) = links_read(&tb, &["show"], EXIT_OK);
    assert_eq!(links, 4, "{}", run.stdout());
    once(&run);
    let out = run.stdout();
    let states: Vec<&str> = out.lines().filter(|l| l.starts_with("  link: ")).collect();
    assert_eq!(states, ["  link: up, carrier"; 4], "each rail's link, read:\n{out}");

    let missing = tb.write_config(&format!(
        "{}\n[[interface]]\nname = \"cali7x\"\n",
        std::fs::read_to_string(config).unwrap()
    ));
    let (run, links) = links_read(&tb, &["check", path_str(&missing)], EXIT_DRIFT);
    assert!(links >= all, "every link, for the suggestion: {links} of {all}");
    run.expect_stdout(&["cali7x", "did you mean cali7?"]);
    // The kernel finds a link by an alternative name too, which no link
    // table holds: not ready, as a missing one is.
    tb.ip_host("link property add dev cali5 altname railx");
    let alt = tb.write_config(&format!(
        "{}\n[[interface]]\nname = \"railx\"\n",
        std::fs::read_to_string(config).unwrap()
    ));
    let (run, links) = links_read(&tb, &["check", path_str(&alt)], EXIT_DRIFT);
    assert!(links >= all, "every link, as for a missing one: {links} of {all}");
    run.expect_stdout(&["railx: does not exist on this host (it has: lo, rail0"]);
}

/// An address of a link outside the config is named only where a run
/// compares it with the config's: the ptp CNI (GKE's) gives every
/// host-side pod veth one, and naming each was a system call (1.4 ms of
/// a no-op beside 500). A listed address moved to a pod veth, and an
/// address found on a rail at the last apply that is on one now, are said
/// with the veth's name by check and apply, though neither is in a rail's
/// subnet; an address in one is named for ARP flux (tests/rdma_risks.rs).
/// The other veths' addresses are not named.
#[test]
fn an_outside_links_address_is_named_where_the_run_compares_it() {
    let tb = Testbed::builder().rails(2).build();
    add_pod_veths(&tb, 4);
    for k in 0..4 {
        tb.ip_host(&format!("addr add 203.0.113.{}/32 dev cali{k}", k + 1));
    }
    let named = |run: &Run| profile_count(&run.stderr(), "links_named");
    let profiled = |args: &[&str], code: i32| tb.rr_profiled(args, code);
    let check = |config: &Path, code: i32| profiled(&["check", path_str(config)], code);
    // rail1 lists an address of another subnet, which cali2 has now.
    let moved = tb.write_config(
        "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10/24\"]\n\n\
         [[interface]]\nname = \"rail1\"\naddresses = [\"198.51.100.11/24\", \"203.0.113.50/24\"]\n",
    );
    let run = check(&moved, EXIT_DRIFT);
    run.expect_stdout(&["203.0.113.50", "rail1 does not have it"]);
    assert_eq!(named(&run), 0, "no pod veth's address is compared:\n{}", run.stderr());
    tb.ip_host("addr add 203.0.113.50/32 dev cali2");
    let run = check(&moved, EXIT_DRIFT);
    run.expect_stdout(&["203.0.113.50", "is on cali2, not on rail1"]);
    assert_eq!(named(&run), 1, "cali2, for the listed address:\n{}", run.stderr());
    tb.ip_host("addr del 203.0.113.50/32 dev cali2");

    // rail1 takes what it has; at the apply, 203.0.113.200/25 too (the
    // veths' addresses are not in that subnet).
    tb.ip_host("addr add 203.0.113.200/25 dev rail1");
    let found = tb.write_config(
        "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10/24\"]\n\n\
         [[interface]]\nname = \"rail1\"\n",
    );
    // It announces its addresses after the change: from the rails'.
    let run = profiled(&["apply", path_str(&found)], EXIT_OK);
    run.expect_stdout(&["announced"]);
    assert_eq!(named(&run), 0, "{}", run.stderr());
    let run = check(&found, EXIT_OK);
    assert_eq!(named(&run), 0, "{}", run.stderr());
    let run = profiled(&["announce", path_str(&found)], EXIT_OK);
    assert_eq!(named(&run), 0, "{}", run.stderr());
    tb.ip_host("addr del 203.0.113.200/25 dev rail1");
    tb.ip_host("addr add 203.0.113.200/32 dev cali3");
    let run = check(&found, EXIT_DRIFT);
    let said = "203.0.113.200/25 was found on rail1 at the last apply and is on cali3 now";
    run.expect_stderr(&[said]);
    assert_eq!(named(&run), 1, "cali3, for the found address:\n{}", run.stderr());
    // apply reads the addresses before the record (its DAD wait): it reads
    // them again to name cali3.
    let dry = tb.rr(&["apply", "--dry-run", path_str(&found)]).expect_code(EXIT_OK);
    dry.expect_stdout(&[said]);
    tb.rr(&["apply", path_str(&found)]).expect_code(EXIT_OK).expect_stderr(&[said]);
}

/// A run reads every IPv4 address but, of IPv6, the rails' addresses
/// and only those of other links it looks for: `check` and `show` must
/// still not send a rail's IPv6 route lookup to an address of the host on
/// another link (they ask about each destination they pick: the first
/// host address of the subnet is cali1's), and apply must say where an
/// IPv6 address the last apply found on a rail went (from the record
/// alone: neither the rail nor the config holds it then, and apply reads
/// the addresses again once it has the record).
#[test]
fn other_links_ipv6_addresses_are_asked_for_not_dumped() {
    let tb = Testbed::builder().rails(1).build();
    add_pod_veths(&tb, 10);
    let count = |run: &Run, name: &str| profile_count(&run.stderr(), name);
    let config = tb.write_config(&format!("[[interface]]\nname = \"rail0\"\ntable = {FIRST_TABLE}\n"));
    let config = path_str(&config);
    let lines = |args: &str| canonical_lines(&tb.ip_host(args)).len() as u64;
    let profiled = |args: &[&str], code: i32| tb.rr_profiled(args, code);
    // The veths' link-local addresses are not read.
    let v4_only = profiled(&["apply", "--dry-run", config], EXIT_OK);
    assert_eq!(count(&v4_only, "addresses_read"), planned_addresses(&tb, &["rail0"]), "{}", v4_only.stderr());

    // rail0 takes its global IPv6 address; the first host address of its
    // subnet is another link's, and so is an address after it.
    tb.ip_host("-6 addr add 2001:db8:5::10/64 dev rail0 nodad");
    tb.ip_host("-6 addr add 2001:db8:5::1/64 dev cali1 nodad");
    tb.ip_host("-6 addr add 2001:db8:5::3/64 dev cali3 nodad");
    let read = planned_addresses(&tb, &["rail0"]);
    assert!(read + 20 <= lines("-o addr show"), "the veths' IPv6 addresses are more than 20");
    // Before and after the apply (which records the address as found).
    for (code, ok) in [(EXIT_DRIFT, false), (EXIT_OK, true)] {
        let run = profiled(&["check", config, "--json"], code);
        assert_eq!(count(&run, "addresses_read"), read, "IPv4 and rail0's IPv6 ones: {}", run.stderr());
        // ::1, found cali1's, then ::2.
        assert_eq!(count(&run, "addresses_asked"), 2, "{}", run.stderr());
        let report = common::json_doc(&run);
        let lookups: Vec<&serde_json::Value> = (report["traffic"].as_array().expect("traffic").iter())
            .filter(|t| t["from"] == "2001:db8:5::10")
            .collect();
        assert!(!lookups.is_empty(), "a lookup from rail0's IPv6 address: {report:#}");
        for t in lookups {
            assert_eq!(t["to"], "2001:db8:5::2", "not to cali1's own address: {t:#}");
            assert_eq!(t["ok"], ok, "{t:#}");
        }
        if !ok {
            Run::of(tb.rr_cmd(&["apply", config])).expect_code(EXIT_OK);
        }
    }
    // show, for the owned IPv6 rule's lookup; ::2 is cali2's now: asked
    // one after the other, ::1, ::2 and ::3 are the host's, ::4 is not.
    tb.ip_host("-6 addr add 2001:db8:5::2/64 dev cali2 nodad");
    let run = profiled(&["show", "--json"], EXIT_OK);
    assert_eq!(count(&run, "addresses_read"), read, "{}", run.stderr());
    assert_eq!(count(&run, "addresses_asked"), 4, "::1, ::2, ::3 found, ::4 not: {}", run.stderr());
    let shown = common::json_doc(&run);
    let traffic = shown["interfaces"][0]["traffic"].as_array().expect("traffic");
    let from_v6: Vec<&serde_json::Value> = traffic.iter().filter(|t| t["from"] == "2001:db8:5::10").collect();
    assert!(!from_v6.is_empty(), "{shown:#}");
    assert!(from_v6.iter().all(|t| t["to"] == "2001:db8:5::4" && t["ok"] == true), "{shown:#}");
    tb.ip_host("-6 addr del 2001:db8:5::2/64 dev cali2");

    // The address moves to a pod veth: the record says rail0 had it.
    tb.ip_host("-6 addr del 2001:db8:5::10/64 dev rail0");
    tb.ip_host("-6 addr add 2001:db8:5::10/64 dev cali2 nodad");
    let moved = "2001:db8:5::10/64 was found on rail0 at the last apply and is on cali2 now";
    Run::of(tb.rr_cmd(&["apply", "--dry-run", config])).expect_code(EXIT_OK).expect_stdout(&[moved]);
    Run::of(tb.rr_cmd(&["apply", config])).expect_code(EXIT_OK).expect_stderr(&[moved]);
}

/// Another link's IPv6 address that the config lists, or gives as a
/// gateway, is asked for by itself (the veths' addresses are not
/// dumped): a listed address on a pod veth is said to be there, a
/// gateway that is a pod veth's address is said to be the host's own.
#[test]
fn a_listed_ipv6_address_or_gateway_on_another_link_is_found() {
    let tb = Testbed::builder().rails(1).build();
    add_pod_veths(&tb, 4);
    let config = tb.write_config(&format!(
        "[[interface]]\nname = \"rail0\"\ntable = {FIRST_TABLE}\n\
         addresses = [\"198.51.100.10/24\", \"2001:db8:5::10/64\"]\ngateway = [\"2001:db8:5::1\"]\n"
    ));
    let config = path_str(&config);
    let check = |code: i32| tb.rr_profiled(&["check", config], code);
    tb.ip_host("-6 addr add 2001:db8:5::10/64 dev rail0 nodad");
    tb.ip_host("-6 addr add 2001:db8:5::1/64 dev cali1 nodad");
    let run = check(EXIT_DRIFT);
    run.expect_stdout(&["2001:db8:5::1", "is this host's own address (on cali1)"]);
    let read = planned_addresses(&tb, &["rail0"]);
    assert_eq!(profile_count(&run.stderr(), "addresses_read"), read, "{}", run.stderr());
    tb.ip_host("-6 addr del 2001:db8:5::1/64 dev cali1");
    tb.ip_host("-6 addr del 2001:db8:5::10/64 dev rail0");
    tb.ip_host("-6 addr add 2001:db8:5::10/64 dev cali2 nodad");
    check(EXIT_DRIFT).expect_stdout(&["2001:db8:5::10", "is on cali2, not on rail0"]);
    Run::of(tb.rr_cmd(&["apply", "--dry-run", config])).expect_stdout(&["is on cali2, not on rail0"]);
}

/// How many addresses a run that looks for none on other links reads:
/// every IPv4 address of the host and the IPv6 ones of `rails`.
fn planned_addresses(tb: &Testbed, rails: &[&str]) -> u64 {
    let count = |args: &str| canonical_lines(&tb.ip_host(args)).len() as u64;
    count("-4 -o addr show") + rails.iter().map(|r| count(&format!("-6 -o addr show dev {r}"))).sum::<u64>()
}

/// rollback and remove take their links from what they read (the
/// journals' steps, the owned routes, the recorded sysctls), not from a
/// read of every link: on a node with a veth per pod that read was 5-6 ms
/// of their 7. Each link is still found by its name where a step names
/// it (the undo of a route apply added deletes it by its link's name),
/// and named where a read meets it (the owned routes remove prints). The
/// deleted route on a pod veth comes back from its dumped bytes.
#[test]
fn rollback_and_remove_read_no_link_and_still_name_each_one() {
    let tb = Testbed::builder().rails(4).build();
    add_pod_veths(&tb, 20);
    let table = FIRST_TABLE;
    tb.ip_host(&format!("route add 203.0.113.0/24 dev cali7 table {table}"));
    let foreign = |tb: &Testbed| table_routes(tb, table).into_iter().filter(|r| r.contains("cali7")).count();
    // What apply changes (rules, the rails' tables, the sysctls), not the
    // whole host: the veths' IPv6 routes come as their DAD ends.
    let owned_view = |tb: &Testbed| {
        let tables: Vec<Vec<String>> = tb.rails().iter().map(|r| table_routes(tb, r.table)).collect();
        let sysctls = tb.sh_host("sysctl net.ipv4.conf | grep -E 'arp_(ignore|announce)'");
        (all_rules(tb), tables, sysctls)
    };
    let before = owned_view(&tb);
    let rules = |tb: &Testbed| tb.rails().iter().map(|r| rules_to(tb, r.table).len()).sum::<usize>();
    let config = tb.standard_config();
    let config = path_str(&config);
    tb.rr(&["apply", "--adopt", config]).expect_code(EXIT_OK);
    assert_eq!(rules(&tb), 4);
    assert_eq!(foreign(&tb), 0, "the adopted table's route on cali7 was deleted");

    let (dry, links) = links_read(&tb, &["rollback", "--dry-run"], EXIT_OK);
    assert_eq!(links, 0, "{}", dry.stderr());
    dry.expect_stdout(&[&format!("203.0.113.0/24 dev cali7 table {table}")]);
    let (_, links) = links_read(&tb, &["rollback"], EXIT_OK);
    assert_eq!(links, 0);
    assert_eq!(foreign(&tb), 1, "put back on cali7:\n{:?}", table_routes(&tb, table));
    assert_eq!(owned_view(&tb), before, "the apply is undone, each rail's routes deleted by its name");

    tb.rr(&["apply", "--adopt", config]).expect_code(EXIT_OK);
    let (dry, links) = links_read(&tb, &["remove", "--dry-run"], EXIT_OK);
    assert_eq!(links, 0, "{}", dry.stderr());
    let out = dry.stdout();
    for k in 0..4 {
        let r = tb.rail(k);
        assert!(out.contains(&format!("dev {} table {}", r.name, r.table)), "each owned route named:\n{out}");
    }
    assert!(!out.contains(" dev if"), "no link left unnamed:\n{out}");
    let (_, links) = links_read(&tb, &["remove"], EXIT_OK);
    assert_eq!(links, 0);
    assert_eq!(rules(&tb), 0, "removed");
    let (_, links) = links_read(&tb, &["rollback"], EXIT_OK);
    assert_eq!(links, 0);
    assert_fixed(&tb);
}

/// A step of a journal names a rail gone since, whose name another link
/// now carries as an alternative name (`ip link property add altname`),
/// which the kernel's SIOCGIFINDEX answers for too: rollback, which finds
/// each link by name, leaves that link alone, as it did when it read
/// every link (the name was in no link's name then).
#[test]
fn rollback_leaves_alone_a_link_with_a_gone_rails_name_as_its_altname() {
    let tb = Testbed::builder().rails(4).build();
    tb.sh_host("ip link add cali0 type veth peer name calp0; ip link set cali0 up; ip link set calp0 up");
    let config = tb.config_for(4, &[&format!("gateway = \"{GATEWAY_V4}\"")]);
    tb.rr(&["apply", &config]).expect_code(EXIT_OK);
    let (name, table) = (tb.rail(3).name.clone(), tb.rail(3).table);
    tb.ip_host(&format!("link del {name}"));
    tb.ip_host(&format!("link property add dev cali0 altname {name}"));
    tb.ip_host(&format!("route add default via {GATEWAY_V4} dev cali0 onlink table {table} proto 234"));
    let before = table_routes(&tb, table);
    assert_eq!(before.len(), 1, "{before:?}");
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    assert_eq!(table_routes(&tb, table), before, "cali0's route stays: it is no step of {name}'s");
    assert_eq!(rules_to(&tb, table), Vec::<String>::new(), "the apply is undone");
}

/// A rail renamed after apply (by hand or by a udev rule; it must be down
/// for that, which flushes its routes) keeps the ARP sysctls apply set.
/// rollback finds it by the index its journal recorded and gives them
/// back under its new name, as `--dry-run` says first; the other rail is
/// undone as usual.
#[test]
fn rollback_finds_a_rail_renamed_since_by_its_index() {
    let tb = Testbed::builder().rails(2).build();
    let keys = ["arp_ignore", "arp_announce"];
    let before: Vec<u32> = keys.iter().map(|k| tb.host_sysctl("rail0", k)).collect();
    tb.apply_ok(&tb.standard_config());
    assert_ne!(keys.map(|k| tb.host_sysctl("rail0", k)).to_vec(), before, "apply set them");
    tb.rename_host_link("rail0", "ens5");
    let dry = tb.rr(&["rollback", "--dry-run"]).expect_code(EXIT_OK);
    dry.expect_stdout(&["net.ipv4.conf.ens5.arp_ignore", "net.ipv4.conf.ens5.arp_announce"]);
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    assert_eq!(keys.map(|k| tb.host_sysctl("ens5", k)).to_vec(), before, "given back under its new name");
    assert_eq!(keys.map(|k| tb.host_sysctl("rail1", k)).to_vec(), before);
    assert!(tb.ip_host("-4 rule show").lines().all(|l| !l.contains("proto 234")), "the rules went");
}

/// The index a journal recorded may belong to another link by the time
/// of the rollback (the rail re-created under its name got a new one; a
/// link moved in from another namespace, or made with `index`, took the
/// old one): the rail's steps go to the link that has its name, never to
/// the one that has its old index.
#[test]
fn rollback_leaves_alone_a_link_that_took_a_rails_old_index() {
    let tb = Testbed::builder().rails(2).build();
    tb.apply_ok(&tb.standard_config());
    let index = tb.sh_host("cat /sys/class/net/rail0/ifindex").trim().to_string();
    tb.sh_host(&format!(
        "ip link del rail0 && ip link add rail0 type veth peer name rail0p && \
         ip link add other index {index} type veth peer name otherp"
    ));
    assert_eq!(tb.sh_host("cat /sys/class/net/other/ifindex").trim(), index);
    tb.set_host_sysctl("other", "arp_ignore", 2);
    let dry = tb.rr(&["rollback", "--dry-run"]).expect_code(EXIT_OK);
    assert!(!dry.stdout().contains("other"), "{}", dry.stdout());
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    assert_eq!(tb.host_sysctl("other", "arp_ignore"), 2, "not the rail's");
}

// ---------------------------------------------------------------------------
// 2. Idempotence

#[test]
fn a_second_apply_is_in_sync_and_changes_nothing() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let config = tb.standard_config();
    tb.apply_ok(&config);
    assert_reapply_in_sync(&tb, &config, &[]);

    let script = dry_run(&tb, &config, &[]);
    assert!(commands(&script).is_empty(), "a dry-run after apply should print only comments:\n{script}");
}

/// The run that sets one sysctl back reads back that one, not all of
/// them: verify reads again only what the run changed (it read every
/// sysctl again once any was set: 12 reads for 4 rails instead of 1),
/// from the file the run wrote it through (`sysctl::Written`: one pread,
/// not the file opened again), and still finds the value set.
#[test]
fn a_run_that_sets_one_sysctl_reads_back_that_one() {
    let tb = Testbed::builder().rails(4).build();
    let config = tb.standard_config();
    tb.apply_ok(&config);
    // (Files opened and read, values taken from the link replies, files
    // kept from the write read again.)
    let reads = |expect: &[&str]| {
        let run = tb.rr_profiled(&["apply", path_str(&config)], 0);
        run.expect_stdout(expect);
        let count = |name| profile_count(&run.stderr(), name);
        (count("sysctl_reads"), count("sysctls_with_links"), count("sysctl_reads_kept"))
    };
    let in_sync = reads(&["in sync"]);
    assert!(in_sync.0 + in_sync.1 >= 8, "a run reads every rail's ARP sysctls: {in_sync:?}");
    assert_eq!(in_sync.2, 0, "nothing written, nothing read back");
    tb.set_host_sysctl("rail2", "arp_ignore", 0);
    assert_eq!(
        reads(&["applied 1 change"]),
        (in_sync.0, in_sync.1, 1),
        "the reading, and rail2's arp_ignore again from the file it was written through"
    );
    assert_eq!(tb.host_sysctl("rail2", "arp_ignore"), 1);
    assert_reapply_in_sync(&tb, &config, &[]);
}

/// A run takes its rails' sysctl values from the replies of the links it
/// asks for (IFLA_INET_CONF) rather than reading their files: an apply
/// (it holds the namespace's lock before it reads the links), its
/// dry-run, check and show read only `conf/all`'s four files. Red when
/// they read a file per rail and key (12 more files here, 16 for show).
/// The values are the files' values: the tests around this one find a
/// reset sysctl through them.
#[test]
fn a_run_takes_its_rails_sysctls_from_the_links_it_reads() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let config = tb.standard_config();
    tb.apply_ok(&config);
    let cfg = path_str(&config);
    for (args, with_links) in [
        (vec!["apply", cfg], 8),
        (vec!["apply", "--dry-run", cfg], 8),
        (vec!["check", cfg], 8),
        (vec!["show"], 16),
    ] {
        let run = tb.rr_profiled(&args, 0);
        let counts = (
            profile_count(&run.stderr(), "sysctl_reads"),
            profile_count(&run.stderr(), "sysctls_with_links"),
        );
        assert_eq!(counts, (4, with_links), "{args:?}: conf/all's files only:\n{}", run.stderr());
    }
    tb.set_host_sysctl("rail1", "arp_announce", 0);
    tb.rr(&["check", cfg]).expect_code(EXIT_DRIFT).expect_stdout(&["arp_announce"]);
}

/// An apply that changes something reads its record (`record.json`) once:
/// under the namespace lock no other run writes it, so the run's own
/// reading, then what it writes, is kept for the rest of its hold (it was
/// read four times: before the run, at the journal's start, for verify and
/// at the commit; red with each read from the file: 4). What it records is
/// still what a later run needs: the values it found, given back by
/// `remove`. (What is kept after a write is state/tests.rs's.)
#[test]
fn an_apply_reads_its_record_once() {
    let tb = Testbed::builder().rails(2).build();
    let config = tb.standard_config();
    let cfg = path_str(&config);
    tb.set_host_sysctl("rail1", "arp_announce", 1);
    for changed in ["set", "set again"] {
        let run = tb.rr_profiled(&["apply", cfg], EXIT_OK);
        assert!(!run.stdout().contains("in sync"), "{changed}: {}", run.stdout());
        assert_eq!(profile_count(&run.stderr(), "record_reads"), 1, "{changed}:\n{}", run.stderr());
        assert_eq!(tb.host_sysctl("rail1", "arp_announce"), 2);
        // Changed behind its back: the next apply sets it again.
        tb.set_host_sysctl("rail0", "arp_ignore", 0);
    }
    tb.rr(&["remove"]).expect_code(EXIT_OK);
    assert_eq!(tb.host_sysctl("rail1", "arp_announce"), 1, "the value found first, given back");
    assert_eq!(tb.host_sysctl("rail1", "arp_ignore"), 0);
}

/// A request that is not a dump (a link asked by name, a route lookup)
/// reads one datagram from the kernel, its answer: it asks for no ack,
/// which would be a second read each (red with NLM_F_ACK: twice as many
/// reads as requests). A no-op asks for its rails' links; check also for
/// a route lookup per address and family.
#[test]
fn a_lookup_reads_its_answer_alone() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let config = tb.standard_config();
    tb.apply_ok(&config);
    for args in [["apply", path_str(&config)], ["check", path_str(&config)]] {
        let run = tb.rr_profiled(&args, 0);
        let (asks, reads) = (profile_count(&run.stderr(), "asks"), profile_count(&run.stderr(), "ask_reads"));
        assert!(asks >= 4, "{args:?} asks for the 4 rails' links at least:\n{}", run.stderr());
        assert_eq!(reads, asks, "{args:?}: one datagram for each request:\n{}", run.stderr());
        // And they go together: the links in one datagram, the lookups
        // 16 to one (red when each request is sent alone).
        let sends = profile_count(&run.stderr(), "ask_sends");
        assert!(sends * 4 <= asks, "{args:?}: {sends} sends for {asks} requests:\n{}", run.stderr());
    }
}

// ---------------------------------------------------------------------------
// 3. Stale entries go, foreign ones stay

/// Entries roce-route must never touch: a rule and a table of someone
/// else's, and the main table. Returns a snapshot of them.
fn add_foreign_entries(tb: &Testbed) -> Vec<String> {
    tb.ip_host("rule add from 203.0.113.5 lookup 50 priority 500");
    tb.ip_host("route add 203.0.113.0/24 dev rail0 table 50");
    tb.ip_host(&format!("route add 192.0.2.0/24 via {GATEWAY_V4} dev rail1"));
    foreign_entries(tb)
}

fn foreign_entries(tb: &Testbed) -> Vec<String> {
    let mut lines: Vec<String> = all_rules(tb).into_iter().filter(|l| !l.contains(OURS)).collect();
    lines.extend(table_routes(tb, 50));
    lines.extend(canonical_lines(&tb.ip_host("-4 route show table main")));
    lines.extend(canonical_lines(&tb.ip_host("-6 route show table main")));
    lines
}

#[test]
fn dropping_a_rail_removes_its_entries_and_leaves_foreign_ones() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let foreign = add_foreign_entries(&tb);
    assert!(foreign.iter().any(|l| l.contains("from 203.0.113.5 lookup 50")), "{foreign:?}");

    tb.apply_ok(&tb.standard_config());
    assert_eq!(foreign_entries(&tb), foreign, "foreign entries after the 4-rail apply");
    let kept: Vec<(Vec<String>, Vec<String>)> =
        (0..3).map(|k| (table_routes(&tb, tb.rail(k).table), rules_to(&tb, tb.rail(k).table))).collect();
    let dropped = tb.rail(3).table;
    assert!(
        !table_routes(&tb, dropped).is_empty() && rules_to(&tb, dropped).len() == 2,
        "rail3 should have routes and a rule per family after the first apply:\n{}",
        tb.dump()
    );

    tb.apply_ok(&tb.write_config(&tb.render_config_for(|r| r.name != "rail3", |_| Vec::new())));
    assert_eq!(table_routes(&tb, dropped), Vec::<String>::new(), "table {dropped}");
    assert_eq!(rules_to(&tb, dropped), Vec::<String>::new(), "rules to {dropped}");
    for (k, (routes, rules)) in kept.iter().enumerate() {
        let table = tb.rail(k).table;
        assert_eq!(&table_routes(&tb, table), routes, "table {table} changed");
        assert_eq!(&rules_to(&tb, table), rules, "rules to {table} changed");
    }
    assert_eq!(foreign_entries(&tb), foreign, "foreign entries after the 3-rail apply");
}

// ---------------------------------------------------------------------------
// 4. Gateways

#[test]
fn gateway_gives_each_rail_its_default_route() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    let v4_before = tb.try_ip_host(&format!("route get {REMOTE_V4} from {}", tb.rail(1).v4));
    assert!(v4_before.is_err(), "no route to {REMOTE_V4} before apply: {v4_before:?}");

    tb.apply_ok(&tb.write_config(&tb.config_toml_with_gateway()));
    for r in tb.rails() {
        let v6 = r.v6.as_deref().expect("ipv6 testbed");
        for (gw, src, remote) in [(GATEWAY_V4, r.v4.as_str(), REMOTE_V4), (GATEWAY_V6, v6, REMOTE_V6)] {
            let prefix = format!("default via {gw} dev {} {OURS}", r.name);
            let routes = table_routes(&tb, r.table);
            assert!(
                routes.iter().any(|l| l.starts_with(&prefix)),
                "table {} lacks `{prefix}`: {routes:#?}",
                r.table
            );
            assert_route_via(&tb, remote, src, gw, &r.name);
        }
    }
}

// ---------------------------------------------------------------------------
// 5. Dotted interface names

#[test]
fn dotted_interface_names_work_for_apply_and_dry_run() {
    let names = ["rail0.100", "rail1"];
    let build = || Testbed::builder().rail_names(&names).build();
    let (applied, scripted) = (build(), build());
    let toml = applied.config_toml();

    let script = assert_dry_run_exact(&scripted, &applied, &toml, &[]);
    for line in
        ["sysctl -w net.ipv4.conf.rail0/100.arp_ignore=1", "sysctl -w net.ipv4.conf.rail0/100.arp_announce=2"]
    {
        let line = in_netns(scripted.host().name(), line);
        assert!(commands(&script).contains(&line.as_str()), "no `{line}` in\n{script}");
    }
    for tb in [&applied, &scripted] {
        for (key, value) in [("arp_ignore", 1), ("arp_announce", 2)] {
            assert_eq!(tb.host_sysctl("rail0.100", key), value, "/proc/sys/net/ipv4/conf/rail0.100/{key}");
        }
        assert_fixed(tb);
    }
}

// ---------------------------------------------------------------------------
// 6. Adopting a hand-made setup

#[test]
fn a_hand_made_setup_is_refused_then_adopted() {
    let tb = Testbed::builder().rails(4).build();
    tb.fix_by_hand();
    let by_hand = tb.dump();
    let config = tb.standard_config();

    let refused = tb.apply(&config, &[]).expect_code(1);
    for r in tb.rails() {
        refused.expect_stderr(&[
            &format!("from {} lookup {}", r.v4, r.table),
            &format!("{SUBNET_V4} dev {} table {}", r.name, r.table),
        ]);
    }
    refused.expect_stderr(&["--adopt"]);
    assert_dump_eq(&by_hand, &tb.dump(), "a refused apply changed the host");

    tb.apply(&config, &["--adopt"]).expect_code(0);
    for r in tb.rails() {
        let rules = rules_from(&tb, &r.v4);
        assert!(
            rules.len() == 1 && rules[0].starts_with("1000:") && rules[0].contains(OURS),
            "after --adopt, the only rule from {} should be ours at priority 1000: {rules:?}",
            r.v4
        );
        let routes = table_routes(&tb, r.table);
        assert!(
            !routes.is_empty() && routes.iter().all(|l| l.contains(OURS)),
            "after --adopt, every route of table {} should be ours: {routes:#?}",
            r.table
        );
    }
    assert_fixed(&tb);
    assert_reapply_in_sync(&tb, &config, &[]);
}

// ---------------------------------------------------------------------------
// 7. The dry-run is exact

#[test]
fn dry_run_is_exact_on_a_fresh_host() {
    let (a, b) = twin_testbeds(4, true);
    assert_dry_run_exact(&a, &b, &a.config_toml(), &[]);
}

#[test]
fn dry_run_is_exact_for_a_change() {
    let (a, b) = twin_testbeds(4, true);
    for tb in [&a, &b] {
        tb.apply_ok(&tb.standard_config());
    }
    // rail3 dropped, a gateway added, rail1's arp_ignore overridden and
    // its rp_filter set.
    let changed = a.render_config_for(
        |r| r.name != "rail3",
        |r| {
            let mut extra = vec![format!("gateway = {}", toml_str(GATEWAY_V4))];
            if r.name == "rail1" {
                extra.extend(["arp_ignore = 2".to_string(), "rp_filter = 2".to_string()]);
            }
            extra
        },
    );
    let script = assert_dry_run_exact(&a, &b, &changed, &[]);
    for verb in ["route add", "rule del", "route del", "sysctl -w"] {
        assert!(script.contains(verb), "the change should need `{verb}`:\n{script}");
    }
}

#[test]
fn dry_run_is_exact_for_an_adoption() {
    let (a, b) = twin_testbeds(4, true);
    for tb in [&a, &b] {
        tb.fix_by_hand();
    }
    assert_dry_run_exact(&a, &b, &a.config_toml(), &["--adopt"]);
}

// ---------------------------------------------------------------------------
// 8. Rollback on a real failure

/// The first dry-run command that mentions `dev IFACE`, and its index.
fn first_step_on(script: &str, iface: &str) -> (usize, String) {
    let needle = format!("dev {iface} ");
    commands(script)
        .iter()
        .position(|c| c.contains(&needle))
        .map(|i| (i, commands(script)[i].to_string()))
        .unwrap_or_else(|| panic!("no step on {iface} in\n{script}"))
}

/// Applies `config` (one step every 200 ms) and takes `iface` down once
/// the run has planned and recorded its journal: the kernel refuses the
/// first route through it, the apply must fail naming that step and the
/// kernel's reason, undo exactly the steps before it, and leave the host
/// as it was (but for the routes the kernel itself flushed with the link,
/// which are compared without). Returns the number of steps undone. (An
/// interface that is down BEFORE the run is not ready, not a failure: see
/// tests/partial_hosts.rs.)
fn assert_rolled_back_when_taken_down(tb: &Testbed, config: &Path, iface: &str) -> usize {
    let (index, step) = first_step_on(&dry_run(tb, config, &[]), iface);
    assert!(
        step.starts_with("ip ") && step.contains(" route add ") || step.contains(" route replace "),
        "the first step through {iface} should add or replace a route: {step}"
    );
    let before = tb.dump();
    let journals = journal_files(&tb.state_base()).len();
    let mut cmd = tb.rr_cmd(&["apply", path_str(config)]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", "200");
    let mut apply = Background::spawn(cmd, format!("apply {} with 200 ms steps", config.display()));
    poll_until("the apply to record its journal", Duration::from_secs(10), || {
        journal_files(&tb.state_base()).len() > journals || !apply.is_running()
    });
    tb.ip_host(&format!("link set {iface} down"));
    let run = apply.wait().expect_code(1);
    tb.ip_host(&format!("link set {iface} up"));
    let stderr = run.stderr();
    let failed_cmd = stderr
        .split_once("failed: `")
        .and_then(|(_, rest)| rest.split('`').next())
        .unwrap_or_else(|| panic!("no \"failed: `COMMAND`\" in\n{}", run.report()));
    assert!(
        failed_cmd.starts_with("ip ")
            && failed_cmd.contains(" route ")
            && failed_cmd.contains(&format!("dev {iface} ")),
        "the failing step should be the first route through {iface}, not `{failed_cmd}`:\n{}",
        run.report()
    );
    let lower = stderr.to_lowercase();
    assert!(
        lower.contains("network is down") || lower.contains("not up") || lower.contains("invalid gateway"),
        "stderr should give the kernel's reason (network is down, or the gateway that went with the link):\n{}",
        run.report()
    );
    assert_eq!(
        run.steps_rolled_back(),
        index,
        "every step before `{step}` should be undone:\n{}",
        run.report()
    );
    let without = |dump: &str| -> String {
        dump.lines().filter(|l| !l.contains(&format!("dev {iface} "))).map(|l| format!("{l}\n")).collect()
    };
    assert_dump_eq(&without(&before), &without(&tb.dump()), "the host changed despite the rollback");
    index
}

#[test]
fn a_failing_step_rolls_back_a_fresh_apply() {
    let tb = Testbed::builder().rails(4).build();
    let config = tb.standard_config();
    let undone = assert_rolled_back_when_taken_down(&tb, &config, "rail2");
    assert!(undone > 0, "the failure should come after some steps were made");
}

#[test]
fn a_failing_step_rolls_back_replaces_of_an_applied_host() {
    let tb = Testbed::builder().rails(4).build();
    tb.apply_ok(&tb.write_config(&tb.config_toml_with_gateway()));
    // Another gateway for every rail: the default routes of tables
    // 100..102 are replaced before rail3's route is (and fails: rail3 goes
    // down during the run). Deletions come after every add
    // (make-before-break), so a failing add can never follow one; the
    // signal test below covers undoing deletions.
    let moved =
        tb.render_config(|_| vec![format!("gateway = {}", toml_str(PEER_V4)), "rp_filter = 1".into()]);
    let config = tb.write_config(&moved);
    let script = dry_run(&tb, &config, &[]);
    let (index, _) = first_step_on(&script, "rail3");
    let replaces = commands(&script)[..index].iter().filter(|c| c.contains(" route replace ")).count();
    assert!(replaces >= 3, "expected the replaces to come first:\n{script}");
    assert_rolled_back_when_taken_down(&tb, &config, "rail3");
}

/// The source address of the first rule `config`'s apply makes (not among
/// its last steps), and that apply started with `ms` ms before each step.
fn apply_slowly_from_first_rule(tb: &Testbed, config: &Path, ms: u64) -> (String, Background) {
    let script = dry_run(tb, config, &[]);
    let steps = commands(&script);
    let first_rule = steps.iter().position(|c| c.contains(" rule add ")).expect("a rule step");
    assert!(first_rule + 3 < steps.len(), "the rule should not be among the last steps:\n{script}");
    let from = field_after(steps[first_rule], "from").expect("from").to_string();
    let mut cmd = tb.rr_cmd(&["apply", path_str(config)]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", ms.to_string());
    (from, Background::spawn(cmd, format!("apply {} with {ms} ms steps", config.display())))
}

/// A rule another actor deletes while apply runs (after apply made it,
/// before apply reads the host back) is made again: apply undoes its run,
/// reads the host again and ends in place with exit 0, rather than
/// taking it for an entry the kernel normalised and failing. (watch's
/// heal meets this when a purge is still going on as its pass begins.)
#[test]
fn a_rule_deleted_while_applying_is_made_again() {
    let tb = Testbed::builder().rails(4).build();
    let config = tb.standard_config();
    let (from, mut apply) = apply_slowly_from_first_rule(&tb, &config, 60);
    let has_rule = || tb.ip_host("rule show").lines().any(|l| field_after(l, "from") == Some(from.as_str()));
    poll_until(&format!("apply to make the rule from {from}"), Duration::from_secs(20), || {
        has_rule() || !apply.is_running()
    });
    assert!(apply.is_running(), "apply ended before the rule could be deleted");
    tb.ip_host(&format!("rule del from {from}"));
    let run = apply.wait();
    assert_eq!(run.code(), Some(0), "{}", run.report());
    run.expect_stderr(&["deleted meanwhile", "reading it again"]);
    assert!(has_rule(), "the rule from {from} is back");
    tb.apply(&config, &[]).expect_code(0).expect_stdout(&["in sync"]);
}

/// An agent that deletes a rule every time apply makes it: after 3
/// attempts apply says so (exit 1, the host changed), names the entry,
/// and leaves the host as it was, not "the kernel normalised it".
#[test]
fn a_rule_deleted_at_every_attempt_is_said_and_rolled_back() {
    let tb = Testbed::builder().rails(2).build();
    let config = tb.standard_config();
    let before = tb.dump();
    let (from, mut apply) = apply_slowly_from_first_rule(&tb, &config, 30);
    let mut deleted = 0;
    while apply.is_running() {
        if tb.ip_host("rule show").lines().any(|l| field_after(l, "from") == Some(from.as_str())) {
            let _ = tb.try_ip_host(&format!("rule del from {from}"));
            deleted += 1;
        }
        thread::sleep(Duration::from_millis(2));
    }
    let run = apply.wait();
    assert_eq!(run.code(), Some(1), "{}", run.report());
    run.expect_stderr(&["went again right after they were made, 3 times", &from, "rolled back"]);
    assert!(deleted >= 3, "the agent deleted the rule {deleted} times");
    assert!(!run.stderr().contains("normalised"), "{}", run.report());
    assert_dump_eq(&before, &tb.dump(), "the host is as it was");
}

/// The source address of a route is deleted after apply read the host and
/// before the route is made: the kernel refuses it with EINVAL ("Invalid
/// source address"), which is a race, not a failure: apply reads the host
/// again and plans without that address (watch met this when an address
/// was replaced while its pass read the host, and waited 2 s to retry).
#[test]
fn a_source_address_deleted_while_applying_is_read_again() {
    let tb = Testbed::builder().rails(2).ipv6(true).build();
    let config = tb.standard_config();
    let script = dry_run(&tb, &config, &[]);
    let steps = commands(&script);
    let (index, step) = steps
        .iter()
        .enumerate()
        .rfind(|(_, c)| c.contains(" -6 route ") && c.contains(" src "))
        .expect("an IPv6 route with a source");
    assert!(index >= 2, "the route should not be among the first steps:\n{script}");
    let (src, dev) =
        (field_after(step, "src").unwrap().to_string(), field_after(step, "dev").unwrap().to_string());
    let journals = journal_files(&tb.state_base()).len();
    let mut cmd = tb.rr_cmd(&["apply", path_str(&config)]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", "100");
    let mut apply = Background::spawn(cmd, format!("apply {} with 100 ms steps", config.display()));
    poll_until("the apply to record its journal", Duration::from_secs(10), || {
        journal_files(&tb.state_base()).len() > journals || !apply.is_running()
    });
    let prefix = tb.ip_host(&format!("-6 -o addr show dev {dev}"));
    let cidr = prefix
        .split_whitespace()
        .find(|w| w.starts_with(&format!("{src}/")))
        .unwrap_or_else(|| panic!("{src} on {dev}: {prefix}"))
        .to_string();
    tb.ip_host(&format!("-6 addr del {cidr} dev {dev}"));
    let run = apply.wait();
    assert_ne!(run.code(), Some(1), "{}", run.report());
    run.expect_stderr(&["Invalid source address", "reading it again"]);
    let routes = tb.ip_host("-6 route show table all proto 234");
    assert!(!routes.contains(&format!("src {src}")), "no route uses the deleted source:\n{routes}");
}

// ---------------------------------------------------------------------------
// 9. Signals

/// Runs `apply CONFIG` with a pause of `delay` before each step and sends
/// `signal` (e.g. "TERM") `after` the start.
fn apply_with_signal(tb: &Testbed, config: &Path, delay: Duration, signal: &str, after: Duration) -> Run {
    let mut cmd = tb.rr_cmd(&["apply", path_str(config)]);
    cmd.env("ROCE_ROUTE_STEP_DELAY_MS", delay.as_millis().to_string());
    let what = format!("{}\nwith SIG{signal} after {after:?}", describe_with_config(&cmd, config));
    let child = Background::spawn(cmd, what);
    thread::sleep(after);
    let kill = Command::new("kill").arg(format!("-{signal}")).arg(child.pid().to_string()).output();
    // Reap the child before any assertion can unwind.
    let run = child.wait();
    let kill = kill.unwrap_or_else(|e| panic!("cannot run kill: {e}"));
    assert!(kill.status.success(), "kill -{signal} failed:\n{}", describe_output(&kill));
    run
}

/// The run was stopped by `signal` (its number) and rolled back the host to
/// `before`; returns how many steps were undone.
fn assert_interrupted(tb: &Testbed, run: &Run, signal: u8, before: &str) -> usize {
    assert_eq!(run.code(), Some(1), "a signalled apply exits 1:\n{}", run.report());
    run.expect_stderr(&[&format!("signal {signal}"), "rolled back"]);
    assert_dump_eq(before, &tb.dump(), "the host changed despite the signal");
    run.steps_rolled_back()
}

#[test]
fn sigterm_mid_apply_rolls_back() {
    let tb = Testbed::builder().rails(4).build();
    let config = tb.standard_config();
    let steps = commands(&dry_run(&tb, &config, &[])).len();
    let before = tb.dump();
    let delay = Duration::from_millis(100);
    let run = apply_with_signal(&tb, &config, delay, "TERM", Duration::from_millis(450));
    let undone = assert_interrupted(&tb, &run, 15, &before);
    assert!(
        (1..steps).contains(&undone),
        "the signal should land mid-transaction ({steps} steps), not after {undone}:\n{}",
        run.report()
    );
}

#[test]
fn sigint_after_deletions_rolls_them_back() {
    let tb = Testbed::builder().rails(4).build();
    tb.apply_ok(&tb.standard_config());
    // rail3 dropped (a rule and a route deleted), gateways added, and
    // rp_filter set on each remaining rail: the sysctls come last.
    let changed = tb.render_config_for(
        |r| r.name != "rail3",
        |_| vec![format!("gateway = {}", toml_str(GATEWAY_V4)), "rp_filter = 1".into()],
    );
    let config = tb.write_config(&changed);
    let started = Instant::now();
    let script = dry_run(&tb, &config, &[]);
    let startup = started.elapsed();
    let steps = commands(&script);
    let last_delete = steps
        .iter()
        .rposition(|c| c.contains(" del "))
        .unwrap_or_else(|| panic!("the change should delete something:\n{script}"));
    assert!(last_delete + 2 < steps.len(), "the deletions should not come last:\n{script}");

    // Aim between the last deletion and the last step.
    let delay = Duration::from_millis(300);
    let aim = startup + delay.mul_f64((last_delete + steps.len()) as f64 / 2.0 + 0.5);
    let before = tb.dump();
    let run = apply_with_signal(&tb, &config, delay, "INT", aim);
    let undone = assert_interrupted(&tb, &run, 2, &before);
    assert!(
        undone > last_delete && undone < steps.len(),
        "the signal should land after the deletions (step {}) and before the end ({} \
         steps), but {undone} were undone:\n{script}\n{}",
        last_delete + 1,
        steps.len(),
        run.report()
    );
}

// ---------------------------------------------------------------------------
// 10. Bad input

/// Applies `toml`, expecting exit 2 with `path:line:col` and `needles` in
/// stderr, and the host untouched.
fn assert_invalid(tb: &Testbed, toml: &str, line: usize, col: Option<usize>, needles: &[&str]) {
    let config = tb.write_config(toml);
    let before = tb.dump();
    let run = tb.apply(&config, &[]).expect_code(2);
    let at = match col {
        Some(col) => format!("{}:{line}:{col}", config.display()),
        None => format!("{}:{line}:", config.display()),
    };
    run.expect_stderr(&[&at]);
    run.expect_stderr(needles);
    assert_dump_eq(&before, &tb.dump(), "an invalid config changed the host");
}

#[test]
fn invalid_configs_exit_2_with_a_position_and_touch_nothing() {
    let tb = Testbed::builder().rails(2).build();
    assert_invalid(&tb, "[[interface]]\nname = \"rail0\"\ntable = = 5\n", 3, None, &[]);
    assert_invalid(&tb, "[[interface]]\nname = \"rail0\"\ntable = 254\n", 3, Some(9), &["reserved"]);
}

/// What the host lacks is not a config error (exit 2) but a part the host
/// is not ready for: exit 5, named with the reason (and the config line of
/// a missing address), and nothing else to do here, so nothing changed.
#[test]
fn a_missing_interface_or_address_is_not_ready_and_touches_nothing() {
    let tb = Testbed::builder().rails(2).build();
    let before = tb.dump();
    for (text, needles) in [
        ("[[interface]]\nname = \"nosuch0\"\n", vec!["nosuch0: does not exist"]),
        (
            "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.99/24\"]\n",
            vec!["198.51.100.99 on rail0: rail0 does not have it", ":3:14"],
        ),
    ] {
        let config = tb.write_config(text);
        let run = tb.apply(&config, &[]).expect_code(5);
        run.expect_stderr(&needles);
        assert_dump_eq(&before, &tb.dump(), "a config the host is not ready for changed the host");
    }
}

#[test]
fn without_root_apply_fails_untouched_and_dry_run_still_works() {
    let tb = Testbed::builder().rails(2).build();
    // Nobody runs a copy of the binary and reads a copy of the config.
    let nobody = Nobody::new(&tb);
    let config = nobody.config(&tb.config_toml());
    let cfg = path_str(&config);
    let before = tb.dump();

    let denied = nobody.run(&["apply", cfg]).expect_code(1);
    let stderr = denied.stderr();
    assert!(
        stderr.contains("root") || stderr.contains("CAP_NET_ADMIN"),
        "the refusal should say root / CAP_NET_ADMIN is needed:\n{}",
        denied.report()
    );
    assert_dump_eq(&before, &tb.dump(), "a non-root apply changed the host");

    // Reading the host needs no privilege: the unprivileged dry-run prints
    // exactly what root's does.
    let unprivileged = nobody.run(&["apply", "--dry-run", cfg]).expect_code(0);
    // Root's ran with --netns, so its commands name the namespace.
    let root = script_without_netns(tb.host().name(), &dry_run(&tb, &config, &[]));
    assert_eq!(unprivileged.stdout(), root, "{}", unprivileged.report());
    assert!(!commands(&unprivileged.stdout()).is_empty());
    assert_dump_eq(&before, &tb.dump(), "a dry-run changed the host");
}
