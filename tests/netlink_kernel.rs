//! `netlink` against the real kernel, in private network namespaces.
//!
//! Every test makes its own namespace (`rr-nl-<pid>-<n>`), deleted on drop
//! even when the test panics, and runs roce-route's code inside it on a
//! thread of its own: the thread enters the namespace with setns and then
//! builds a current-thread runtime, so every socket it opens belongs to the
//! namespace and the test process's own namespace is never touched. Only
//! documentation addresses are used.

mod common;

use std::future::Future;
use std::net::IpAddr;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use nix::errno::Errno;
use roce_route::model::{Address, Family, Live, Op, Prefix, RawBytes, Route, Rule};
use roce_route::netlink::Netlink;
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::address::AddressMessage;
use rtnetlink::packet_route::route::{RouteAttribute, RouteMessage, RouteScope};

/// A private network namespace, deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn new() -> Netns {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("rr-nl-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        sh("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        ns.ip("link set lo up");
        ns
    }

    /// `ip -n NS ARGS`; panics with ip's message on failure.
    fn ip(&self, args: &str) -> String {
        let mut all = vec!["-n", &self.name];
        all.extend(args.split_whitespace());
        sh("ip", &all)
    }

    /// The veth rr0 and its peer rr0p, both up (with carrier).
    fn veth_up(&self) {
        self.ip("link add rr0 type veth peer name rr0p");
        self.ip("link set rr0 up");
        self.ip("link set rr0p up");
    }

    /// `ip -n NS FAMILY -batch -` with `commands` on its stdin.
    fn batch(&self, family: &str, commands: &str) {
        batch_in(&self.name, family, commands);
    }

    /// Runs `f` inside the namespace and returns its output: on a new
    /// thread that enters the namespace first and then builds its runtime.
    fn run<T, F, Fut>(&self, f: F) -> T
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T>,
    {
        let path = format!("/run/netns/{}", self.name);
        let thread = std::thread::spawn(move || {
            let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(f())
        });
        thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Never panic here: this may run while a test unwinds.
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// `ip -n NETNS FAMILY -batch -` with `commands` on its stdin.
fn batch_in(netns: &str, family: &str, commands: &str) {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["-n", netns, family, "-batch", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ip -batch");
    child.stdin.take().expect("stdin").write_all(commands.as_bytes()).expect("write batch");
    let out = child.wait_with_output().expect("ip -batch");
    assert!(out.status.success(), "ip -batch: {}", String::from_utf8_lossy(&out.stderr));
}

/// Runs a command; its trimmed stdout, or a panic with its stderr.
fn sh(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "`{program} {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

async fn connect() -> Netlink {
    Netlink::connect().await.expect("netlink connection")
}

// ---------------------------------------------------------------------------
// Dumps

/// A route dump request for one family and table, the way `routes()` builds
/// it (header zero, table in RTA_TABLE).
fn route_dump(family: Family, table: u32) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header.address_family = match family {
        Family::V4 => rtnetlink::packet_route::AddressFamily::Inet,
        Family::V6 => rtnetlink::packet_route::AddressFamily::Inet6,
    };
    msg.attributes.push(RouteAttribute::Table(table));
    msg
}

#[test]
fn a_table_that_does_not_exist_reads_as_empty() {
    let ns = Netns::new();
    ns.veth_up();
    ns.ip("route add 203.0.113.0/24 dev rr0 table 100");
    ns.ip("-6 route add 2001:db8:5::/64 dev rr0 table 100");
    ns.run(|| async {
        let nl = connect().await;
        for family in [Family::V4, Family::V6] {
            // The kernel does answer with an error, in NLMSG_DONE...
            let raw = nl.dump(RouteNetlinkMessage::GetRoute(route_dump(family, 4242))).await;
            let err = raw.expect_err("a dump of a table that does not exist is an error in the kernel");
            assert_eq!(err.errno, Errno::ENOENT, "{family:?}: {err}");
            assert!(err.ext_ack.as_deref().unwrap_or("").contains("FIB table does not exist"), "{err}");
            // ... which routes() reads as an empty table.
            let routes = nl.routes(family, Some(4242), None).await.expect("missing table");
            assert!(routes.is_empty(), "{family:?}: {routes:?}");
            // A table that exists still has its route.
            let routes = nl.routes(family, Some(100), None).await.expect("table 100");
            assert_eq!(routes.len(), 1, "{family:?}: {routes:?}");
            assert_eq!(routes[0].item.oif.as_deref(), Some("rr0"));
        }
    });
}

/// `table_routes` reads a table's routes of both families in one
/// AF_UNSPEC dump: the same routes as a dump per family, IPv4's first, for
/// a table with both families, with one only and with none; not those of
/// another table nor of main. The kernel's own answers first: an AF_UNSPEC
/// dump of table 100 carries both families, and one of a table no family
/// has is empty, not ENOENT as a family's own dump is (else `table_routes`
/// would fall back to a dump per family and read the same).
#[test]
fn both_families_of_a_table_come_in_one_dump() {
    let ns = Netns::new();
    ns.veth_up();
    ns.ip("route add 203.0.113.0/24 dev rr0 table 100");
    ns.ip("route add default via 203.0.113.1 dev rr0 table 100");
    ns.ip("-6 route add 2001:db8:5::/64 dev rr0 table 100");
    ns.ip("-6 route add 2001:db8:6::/64 dev rr0 table 101");
    ns.ip("route add 198.51.100.0/24 dev rr0 table 102");
    ns.ip("route add 198.51.100.0/25 dev rr0");
    ns.run(|| async {
        let nl = connect().await;
        let unspec = |table| {
            let mut m = route_dump(Family::V4, table);
            m.header.address_family = rtnetlink::packet_route::AddressFamily::Unspec;
            RouteNetlinkMessage::GetRoute(m)
        };
        let raw = nl.dump(unspec(100)).await.expect("an AF_UNSPEC dump of table 100");
        assert_eq!(raw.len(), 3, "both families' routes of table 100: {raw:?}");
        let raw = nl.dump(unspec(4242)).await.expect("an AF_UNSPEC dump of a missing table is no error");
        assert!(raw.is_empty(), "{raw:?}");
        for (table, count) in [(100, 3), (101, 1), (102, 1), (4242, 0)] {
            let both = nl.table_routes(table).await.expect("table_routes");
            let mut apart = nl.routes(Family::V4, Some(table), None).await.expect("IPv4");
            apart.extend(nl.routes(Family::V6, Some(table), None).await.expect("IPv6"));
            assert_eq!(both, apart, "table {table}");
            assert_eq!(both.len(), count, "table {table}: {both:?}");
            assert!(both.iter().all(|r| r.item.table == table), "table {table}: {both:?}");
        }
    });
}

#[test]
fn a_dump_the_kernel_rejects_is_an_error_not_an_empty_result() {
    let ns = Netns::new();
    ns.ip("link add rr0 type veth peer name rr0p");
    ns.ip("link set rr0 up");
    ns.ip("addr add 198.51.100.10/24 dev rr0");
    ns.run(|| async {
        let nl = connect().await;
        // Strict checking refuses a route dump whose header sets a scope
        // (routes cannot be filtered on scope); the kernel says so in
        // NLMSG_DONE, after a dump of zero routes.
        let mut msg = route_dump(Family::V4, 254);
        msg.header.scope = RouteScope::Link;
        let err = nl.dump(RouteNetlinkMessage::GetRoute(msg)).await.expect_err("scope filter");
        assert_eq!(err.errno, Errno::EINVAL, "{err}");
        assert!(err.ext_ack.as_deref().unwrap_or("").contains("Invalid values in header"), "{err}");
        // An address dump filtered on an interface that does not exist:
        // ENODEV in NLMSG_DONE.
        let mut msg = AddressMessage::default();
        msg.header.family = rtnetlink::packet_route::AddressFamily::Inet;
        msg.header.index = 999_999;
        let err = nl.dump(RouteNetlinkMessage::GetAddress(msg)).await.expect_err("no such interface");
        assert_eq!(err.errno, Errno::ENODEV, "{err}");
        // The same requests made right succeed, so the errors above are
        // the kernel's answer to the filters and not a broken socket.
        let routes = nl.dump(RouteNetlinkMessage::GetRoute(route_dump(Family::V4, 254))).await;
        assert_eq!(routes.expect("main table").len(), 1);
    });
}

/// Dumps long enough to take many reads, two of them asked for at once
/// as the first requests of a connection (`rules()` asks for the v4 and v6
/// dumps concurrently, as `observe` does the route dumps of every table):
/// each ends in its own NLMSG_DONE and nothing is lost. (The kernel runs
/// one dump at a time per socket and answers a second one EBUSY: this
/// failed so once the link dump no longer went first on the connection,
/// until `Netlink` ran its dumps one at a time.)
#[test]
fn long_concurrent_dumps_are_complete() {
    const N: u32 = 1000;
    let ns = Netns::new();
    let rules = |from: &str| -> String {
        (0..N).map(|k| format!("rule add priority {} from {from} lookup {}\n", 1000 + k, 100 + k)).collect()
    };
    let (v4, v6) = (rules("198.51.100.10"), rules("2001:db8::10"));
    ns.batch("-4", &v4);
    ns.batch("-6", &v6);
    ns.run(|| async {
        let nl = connect().await;
        let rules = nl.rules().await.expect("rules");
        // N of each family, and the default rules: local, main, default
        // for IPv4; local, main for IPv6.
        assert_eq!(rules.len(), 2 * N as usize + 3 + 2, "rules");
    });
}

// ---------------------------------------------------------------------------
// Rules

/// The rules `ip rule show` lists, one per line, whitespace normalised.
fn ip_rules(ns: &Netns, family: &str) -> Vec<String> {
    ns.ip(&format!("{family} rule show"))
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// The kernel leaves FRA_PRIORITY out of the dump of a rule at priority 0,
/// and gives a rule added without FRA_PRIORITY a priority of its own. A
/// rule deleted and put back from its dumped bytes must come back at 0.
#[test]
fn a_rule_at_priority_0_is_restored_at_priority_0() {
    let ns = Netns::new();
    ns.ip("rule add priority 0 from 198.51.100.10 lookup 100");
    ns.ip("-6 rule add priority 0 from 2001:db8::10 lookup 100");
    let before = [ip_rules(&ns, "-4"), ip_rules(&ns, "-6")];
    assert!(before[0].contains(&"0: from 198.51.100.10 lookup 100".to_string()), "{before:?}");
    assert!(before[1].contains(&"0: from 2001:db8::10 lookup 100".to_string()), "{before:?}");
    let ours = |r: &Live<Rule>| r.item.table == 100;
    let saved: Vec<Live<Rule>> = ns.run(move || async move {
        let nl = connect().await;
        let saved: Vec<Live<Rule>> = nl.rules().await.expect("rules").into_iter().filter(ours).collect();
        assert_eq!(saved.len(), 2, "{saved:?}");
        for live in &saved {
            assert_eq!(live.item.priority, 0, "{:?}", live.item);
            let raw = Some(RawBytes(live.raw.clone()));
            nl.execute(&Op::DelRule { rule: live.item.clone(), raw }).await.expect("delete from raw");
        }
        saved
    });
    let gone = [ip_rules(&ns, "-4"), ip_rules(&ns, "-6")];
    assert!(gone.iter().flatten().all(|l| !l.contains("lookup 100")), "{gone:?}");
    ns.run(move || async move {
        let nl = connect().await;
        for live in saved {
            let raw = Some(RawBytes(live.raw.clone()));
            nl.execute(&Op::AddRule { rule: live.item.clone(), raw }).await.expect("restore from raw");
        }
        let back: Vec<Live<Rule>> = nl.rules().await.expect("rules").into_iter().filter(ours).collect();
        assert!(back.iter().all(|r| r.item.priority == 0), "{back:?}");
    });
    assert_eq!([ip_rules(&ns, "-4"), ip_rules(&ns, "-6")], before, "the rules are back as they were");
}

/// Rules as roce-route reads them from their bytes (`rule::rule_row`, not
/// netlink-packet-route's whole parse), of every shape a host has: each
/// keeps the kernel's bytes exactly, and its fields are the kernel's;
/// `not` is an inverted rule, a `goto` jumps, and a selector roce-route
/// does not model (suppress_prefixlength, uidrange, ipproto and dport:
/// the RoCEv2 port) is an extra selector, the kernel's markers on every
/// rule are not.
#[test]
fn rules_read_from_their_bytes_are_the_kernels() {
    use rtnetlink::packet_route::rule::RuleMessage;
    let ns = Netns::new();
    ns.veth_up();
    ns.batch(
        "-4",
        "rule add priority 100 not from 198.51.100.0/24 lookup 100
rule add priority 200 goto 400
rule add priority 300 lookup main suppress_prefixlength 0
rule add priority 400 uidrange 1000-2000 lookup 100
rule add priority 500 ipproto udp dport 4791 lookup 100
rule add priority 600 iif rr0 oif rr0p fwmark 0x10/0xff tos 0x08 lookup 1000 proto 234
rule add priority 700 from 198.51.100.99 blackhole
",
    );
    ns.ip("-6 rule add priority 800 from 2001:db8:1::10 to 2001:db8:2::/64 lookup 100 proto 234");
    let (rules, kernels) = ns.run(|| async {
        let nl = connect().await;
        let rules = nl.rules().await.expect("rules");
        let mut kernels = Vec::new();
        for family in
            [rtnetlink::packet_route::AddressFamily::Inet, rtnetlink::packet_route::AddressFamily::Inet6]
        {
            let mut msg = RuleMessage::default();
            msg.header.family = family;
            kernels.extend(raw_dump(RouteNetlinkMessage::GetRule(msg)));
        }
        (rules, kernels)
    });
    let mut ours: Vec<&Vec<u8>> = rules.iter().map(|r| &r.raw).collect();
    let mut theirs: Vec<&Vec<u8>> = kernels.iter().collect();
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs, "each rule's bytes as the kernel sent them");
    let at = |priority: u32| {
        let found: Vec<&Rule> = rules.iter().map(|r| &r.item).filter(|r| r.priority == priority).collect();
        assert_eq!(found.len(), 1, "{priority}: {rules:?}");
        found[0].clone()
    };
    let not = at(100);
    assert!(not.invert && !not.extra_selectors, "{not:?}");
    let goto = at(200);
    assert_eq!((goto.goto, goto.action, goto.extra_selectors), (Some(400), 2, false));
    for priority in [300, 400, 500] {
        assert!(at(priority).extra_selectors, "{priority}: {:?}", at(priority));
    }
    let marked = at(600);
    assert_eq!(
        (marked.iif.as_deref(), marked.oif.as_deref(), marked.fwmark, marked.fwmask, marked.tos),
        (Some("rr0"), Some("rr0p"), Some(0x10), Some(0xff), 8)
    );
    assert_eq!((marked.table, marked.protocol, marked.extra_selectors), (1000, 234, false));
    assert_eq!((at(700).action, at(700).src.map(|p| p.len)), (6, Some(32)));
    let v6 = at(800);
    assert_eq!((v6.family, v6.dst.map(|p| p.len), v6.protocol), (Family::V6, Some(64), 234));
    let main: Vec<&Rule> = rules.iter().map(|r| &r.item).filter(|r| r.priority == 32766).collect();
    assert_eq!(main.len(), 2, "{main:?}");
    assert!(
        main.iter().all(|r| r.table == 254 && !r.extra_selectors),
        "main, with the kernel's markers: {main:?}"
    );
}

/// Changes go on one socket of their own, kept for the connection, each
/// answer read before the next change: every change gets its own answer
/// (never the one before or after it), with the kernel's errno and text,
/// and a refused change does not spoil the next one.
#[test]
fn each_change_gets_its_own_answer() {
    let ns = Netns::new();
    ns.veth_up();
    ns.ip("addr add 198.51.100.10/24 dev rr0");
    ns.run(|| async {
        let nl = connect().await;
        let src: IpAddr = "198.51.100.10".parse().unwrap();
        let rule = |priority| Op::AddRule { rule: Rule::source(priority, src, 100, 234), raw: None };
        let del = |priority| Op::DelRule { rule: Rule::source(priority, src, 100, 234), raw: None };
        let route = Route::connected(100, Prefix::new("198.51.100.0".parse().unwrap(), 24), "rr0", src, 234);
        let down = Route::connected(100, Prefix::new("203.0.113.0".parse().unwrap(), 24), "rr0p", src, 234);
        let answers: Vec<Result<(), Errno>> = [
            rule(1000),
            rule(1000),
            del(1001),
            Op::AddRoute { route: route.clone() },
            Op::AddRoute { route },
            rule(1001),
            Op::AddRoute { route: down },
            del(1000),
        ]
        .iter()
        .map(|op| nl.change(op).map_err(|e| e.errno))
        .collect();
        assert_eq!(
            answers,
            [
                Ok(()),
                Err(Errno::EEXIST),
                Err(Errno::ENOENT),
                Ok(()),
                Err(Errno::EEXIST),
                Ok(()),
                Ok(()),
                Ok(())
            ],
        );
        let e = nl
            .change(&Op::AddRoute {
                route: Route::connected(
                    100,
                    Prefix::new("198.51.100.0".parse().unwrap(), 24),
                    "rr0",
                    "203.0.113.99".parse().unwrap(),
                    234,
                ),
            })
            .unwrap_err();
        assert_eq!(e.errno, Errno::EINVAL, "{e}");
        assert!(e.to_string().contains("Invalid prefsrc address"), "the kernel's own words: {e}");
    });
    assert_eq!(ip_rules(&ns, "-4").iter().filter(|l| l.contains("lookup 100")).count(), 1);
    let table = ns.ip("-4 route show table 100");
    assert!(
        table.contains("198.51.100.0/24 dev rr0") && table.contains("203.0.113.0/24 dev rr0p"),
        "{table}"
    );
}

// ---------------------------------------------------------------------------
// Neighbours

/// `probe --rdma` removes the neighbour entries its RDMA CM left: the
/// entries read, one deleted (the one request still on netlink-proto's
/// connection, opened at that first use), a second delete of it refused
/// with the kernel's ENOENT, and the other entry and the permanent one
/// still there.
#[test]
fn a_neighbour_entry_is_read_and_deleted() {
    let ns = Netns::new();
    ns.ip("link add rr0 type veth peer name rr0p");
    ns.ip("link set rr0 up");
    // With carrier: a late carrier-off event of a link that is up flushes
    // its entries (arp_evict_nocarrier), and the kernel may handle it only
    // after they were added.
    ns.ip("link set rr0p up");
    ns.ip("addr add 198.51.100.10/24 dev rr0");
    ns.ip("neigh add 198.51.100.20 lladdr 02:00:00:00:00:20 dev rr0 nud reachable");
    ns.ip("neigh add 198.51.100.21 lladdr 02:00:00:00:00:21 dev rr0 nud reachable");
    ns.ip("neigh add 198.51.100.22 lladdr 02:00:00:00:00:22 dev rr0 nud permanent");
    let (deleted, again) = ns.run(|| async {
        let nl = connect().await;
        let found = nl.neighbours().await.expect("neighbours");
        let entry = |dest: &str| {
            found.iter().find(|n| n.dest == dest.parse::<IpAddr>().unwrap()).cloned().expect(dest)
        };
        assert!(!entry("198.51.100.20").fixed && entry("198.51.100.22").fixed, "{found:?}");
        let target = entry("198.51.100.20");
        (nl.delete_neighbour(&target).await, nl.delete_neighbour(&target).await.map_err(|e| e.errno))
    });
    deleted.expect("the delete");
    assert_eq!(again, Err(Errno::ENOENT));
    let left = ns.ip("neigh show dev rr0");
    assert!(!left.contains("198.51.100.20 "), "{left}");
    assert!(left.contains("198.51.100.21 ") && left.contains("198.51.100.22 "), "{left}");
}

// ---------------------------------------------------------------------------
// Route lookups

/// `ip -n NS -6 route get DST from SRC`'s link, table and gateway.
fn ip_route_get(ns: &Netns, dst: &str, src: &str) -> (String, u32, Option<String>) {
    let out = ns.ip(&format!("-6 route get {dst} from {src}"));
    let word = |key: &str| {
        let mut words = out.split_whitespace();
        words.find(|w| *w == key).and_then(|_| words.next()).map(str::to_string)
    };
    let table = match word("table").as_deref() {
        None | Some("main") => 254,
        Some("local") => 255,
        Some(t) => t.parse().unwrap_or_else(|_| panic!("{out}")),
    };
    (word("dev").unwrap_or_else(|| panic!("{out}")), table, word("via"))
}

/// An IPv6 lookup as check and show ask it (`route_matched`) answers
/// with the link, table and gateway `ip route get` says: through a source
/// rule to a default route without a preferred source and to a connected
/// route, by main's connected route, to an address of the host (`dev
/// lo`, table local), and by a route of several next hops with the one
/// the kernel picks for this flow, not with no link.
#[test]
fn ipv6_lookups_answer_as_ip_route_get() {
    let ns = Netns::new();
    for (k, net) in [(0, 1), (1, 2)] {
        ns.ip(&format!("link add rr{k} type veth peer name rr{k}p"));
        ns.ip(&format!("link set rr{k} up"));
        ns.ip(&format!("link set rr{k}p up"));
        ns.ip(&format!("-6 addr add 2001:db8:{net}::10/64 dev rr{k} nodad"));
    }
    ns.ip("-6 route add 2001:db8:1::/64 dev rr0 table 100");
    ns.ip("-6 route add default via 2001:db8:1::1 dev rr0 table 100");
    ns.ip("-6 rule add from 2001:db8:1::10 lookup 100");
    ns.ip("-6 route add default nexthop via 2001:db8:1::1 dev rr0 nexthop via 2001:db8:2::1 dev rr1");
    let cases = [
        ("2001:db8:ffff::1", "2001:db8:1::10"),
        ("2001:db8:1::5", "2001:db8:1::10"),
        ("2001:db8:2::5", "2001:db8:2::10"),
        ("2001:db8:2::10", "2001:db8:1::10"),
        ("2001:db8:ffff::1", "2001:db8:2::10"),
        ("2001:db8:8000::1", "2001:db8:2::10"),
    ];
    let answers = ns.run(move || async move {
        let nl = connect().await;
        // Asked together, as check asks them.
        let pairs: Vec<_> =
            cases.iter().map(|(dst, src)| (src.parse().unwrap(), dst.parse().unwrap())).collect();
        (nl.routes_matched(&pairs).into_iter())
            .map(|r| r.expect("lookup"))
            .map(|r| (r.oif, r.table, r.gateway.map(|g| g.to_string())))
            .collect::<Vec<_>>()
    });
    for ((dst, src), (oif, table, gateway)) in cases.iter().zip(answers) {
        let (dev, ip_table, via) = ip_route_get(&ns, dst, src);
        assert_eq!((oif.as_deref(), table, gateway), (Some(dev.as_str()), ip_table, via), "{dst} from {src}");
    }
    let table = |dst: &str, src: &str| ip_route_get(&ns, dst, src).1;
    assert_eq!(table("2001:db8:ffff::1", "2001:db8:1::10"), 100, "through the rule");
    assert_eq!(table("2001:db8:1::5", "2001:db8:1::10"), 100, "the rule's connected route");
    assert_eq!(ip_route_get(&ns, "2001:db8:2::10", "2001:db8:1::10"), ("lo".into(), 255, None), "local");
}

// ---------------------------------------------------------------------------
// Addresses

/// Reads the addresses inside `ns` until `ready` holds for them (10 s at
/// most), and returns the last read.
fn addresses_when(ns: &Netns, ready: fn(&[Address]) -> bool) -> Vec<Address> {
    ns.run(move || async move {
        let nl = connect().await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let addrs = nl.addresses().await.expect("addresses");
            if ready(&addrs) || std::time::Instant::now() > deadline {
                return addrs;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
}

fn find<'a>(addrs: &'a [Address], addr: &str) -> &'a Address {
    let ip: IpAddr = addr.parse().unwrap();
    addrs.iter().find(|a| a.addr.addr == ip).unwrap_or_else(|| panic!("no {addr} in {addrs:#?}"))
}

fn address(ifname: &str, addr: &str, len: u8, peer: Option<&str>) -> Address {
    Address {
        ifname: ifname.into(),
        addr: Prefix::new(addr.parse().unwrap(), len),
        peer: peer.map(|p| p.parse().unwrap()),
        ..Address::default()
    }
}

#[test]
fn addresses_decode_peer_and_flags() {
    let ns = Netns::new();
    ns.ip("link add rr0 type veth peer name rr0p");
    let sysctl = |key: &str| {
        sh("ip", &["netns", "exec", &ns.name, "sysctl", "-qw", key]);
    };
    // DAD on rr0 lasts 10 s (one probe a second), so an address with DAD
    // is still tentative while the test reads; rr0 makes privacy
    // (temporary) addresses from a `mngtmpaddr` template.
    sysctl("net.ipv6.conf.rr0.dad_transmits=10");
    sysctl("net.ipv6.conf.rr0.use_tempaddr=2");
    ns.ip("link set rr0 up");
    ns.ip("link set rr0p up");
    ns.ip("addr add 198.51.100.1/32 peer 198.51.100.0/31 dev rr0");
    ns.ip("addr add 203.0.113.1/24 dev rr0");
    ns.ip("addr add 203.0.113.2/24 dev rr0"); // secondary: flag 0x01
    ns.ip("-6 addr add 2001:db8:1::10/64 dev rr0 nodad preferred_lft 0");
    ns.ip("-6 addr add 2001:db8:2::10/64 dev rr0 nodad");
    ns.ip("-6 addr add 2001:db8:3::10/64 dev rr0");
    ns.ip("-6 addr add 2001:db8:4::10/64 dev rr0 nodad mngtmpaddr");
    // The peer end answers rr0's DAD probe for its own address.
    ns.ip("-6 addr add 2001:db8:5::10/64 dev rr0p nodad");
    ns.ip("-6 addr add 2001:db8:5::10/64 dev rr0");
    ns.ip("-6 addr add 2001:db8:6::1 peer 2001:db8:6::2/128 dev rr0 nodad");

    let dad_failed = |addrs: &[Address]| addrs.iter().any(|a| a.ifname == "rr0" && a.dad_failed);
    let addrs = addresses_when(&ns, dad_failed);
    let show = ns.ip("addr show");

    let p2p = address("rr0", "198.51.100.1", 31, Some("198.51.100.0"));
    assert_eq!(find(&addrs, "198.51.100.1"), &p2p, "{show}");
    assert_eq!(p2p.subnet().to_string(), "198.51.100.0/31");
    assert_eq!(find(&addrs, "203.0.113.1"), &address("rr0", "203.0.113.1", 24, None), "{show}");
    // IFA_F_SECONDARY is the bit of IFA_F_TEMPORARY: not temporary.
    assert_eq!(find(&addrs, "203.0.113.2"), &address("rr0", "203.0.113.2", 24, None), "{show}");
    let deprecated = Address { deprecated: true, ..address("rr0", "2001:db8:1::10", 64, None) };
    assert_eq!(find(&addrs, "2001:db8:1::10"), &deprecated, "{show}");
    assert_eq!(find(&addrs, "2001:db8:2::10"), &address("rr0", "2001:db8:2::10", 64, None), "{show}");
    let tentative = Address { tentative: true, ..address("rr0", "2001:db8:3::10", 64, None) };
    assert_eq!(find(&addrs, "2001:db8:3::10"), &tentative, "{show}");
    assert_eq!(find(&addrs, "2001:db8:4::10"), &address("rr0", "2001:db8:4::10", 64, None), "{show}");
    let template: IpAddr = "2001:db8:4::10".parse().unwrap();
    let private: Vec<&Address> = addrs
        .iter()
        .filter(|a| a.addr.addr != template && Prefix::new(template, 64).contains(&a.addr.addr))
        .collect();
    assert_eq!(private.len(), 1, "one privacy address made from the template: {show}");
    let expected = Address {
        temporary: true,
        tentative: true,
        ..address("rr0", &private[0].addr.addr.to_string(), 64, None)
    };
    assert_eq!(private[0], &expected, "{show}");
    let failed = Address { tentative: true, dad_failed: true, ..address("rr0", "2001:db8:5::10", 64, None) };
    let on_rr0: Vec<&Address> =
        addrs.iter().filter(|a| a.addr.addr.to_string() == "2001:db8:5::10").collect();
    assert!(on_rr0.contains(&&failed), "{show}");
    assert!(on_rr0.contains(&&address("rr0p", "2001:db8:5::10", 64, None)), "{show}");
    let v6_peer = address("rr0", "2001:db8:6::1", 128, Some("2001:db8:6::2"));
    assert_eq!(find(&addrs, "2001:db8:6::1"), &v6_peer, "{show}");
}

// ---------------------------------------------------------------------------
// Recording the decode fixtures

/// The payloads (after the 16-byte netlink header) of a dump's messages,
/// exactly as the kernel sent them, read on a plain netlink socket without
/// strict checking (so no filtering).
fn raw_dump(request: RouteNetlinkMessage) -> Vec<Vec<u8>> {
    use rtnetlink::packet_core::{NLM_F_DUMP, NLM_F_REQUEST, NLMSG_DONE, NLMSG_ERROR, NetlinkMessage};
    use rtnetlink::sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
    let mut sock = Socket::new(NETLINK_ROUTE).expect("netlink socket");
    sock.bind_auto().expect("bind");
    sock.connect(&SocketAddr::new(0, 0)).expect("connect");
    let mut req = NetlinkMessage::from(request);
    req.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.header.sequence_number = 1;
    req.finalize();
    let mut buf = vec![0; req.buffer_len()];
    req.serialize(&mut buf);
    sock.send(&buf, 0).expect("send");
    let mut payloads = Vec::new();
    loop {
        let (data, _) = sock.recv_from_full().expect("recv");
        let mut rest = &data[..];
        while rest.len() >= 16 {
            let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
            let kind = u16::from_ne_bytes(rest[4..6].try_into().unwrap());
            match kind {
                NLMSG_DONE => return payloads,
                NLMSG_ERROR => panic!("dump refused: {:?}", &rest[16..20]),
                _ => payloads.push(rest[16..len].to_vec()),
            }
            rest = &rest[((len + 3) & !3).min(rest.len())..];
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Records tests/fixtures/netlink/{routes,rules}.hex, which the decode unit
/// tests of src/netlink/{route,rule}.rs read: `cargo test --test netlink_kernel
/// record_decode_fixtures -- --ignored`. Each fixture line is `NAME HEX`
/// (one message payload); `link INDEX NAME` lines give the interface
/// names. Run it again only to re-record on another kernel, and check the
/// unit tests' expectations against what it printed.
#[test]
#[ignore = "one-off: records the decode fixtures from the running kernel"]
fn record_decode_fixtures() {
    use rtnetlink::packet_core::Parseable;
    use rtnetlink::packet_route::route::RouteFlags;
    use rtnetlink::packet_route::rule::{RuleAttribute, RuleMessage};

    let ns = Netns::new();
    for cmd in [
        "link add rr0 type veth peer name rr0p",
        "link set rr0 up",
        "link set rr0p up",
        "addr add 198.51.100.10/24 dev rr0",
        "-6 addr add 2001:db8:1::10/64 dev rr0 nodad",
        "route add 198.51.100.0/24 dev rr0 src 198.51.100.10 table 100 proto 234 scope link",
        "route add default via 198.51.100.1 dev rr0 table 100 proto 234 metric 5",
        "-6 route add default via 2001:db8:1::1 dev rr0 table 100 proto 234",
        "route add 203.0.113.0/24 dev rr0 table 1000 proto 234",
        "-6 route add 2001:db8:2::/64 dev rr0 table 1000 proto 234 metric 7",
        "rule add priority 0 from 198.51.100.10 lookup 100",
        "rule add priority 1000 from 198.51.100.10/32 lookup 100 proto 234",
        "-6 rule add priority 1000 from 2001:db8:1::10 to 2001:db8:2::/64 lookup 100 proto 234",
        "rule add priority 1001 iif rr0 fwmark 0x10/0xff lookup 1000",
        "rule add priority 1002 ipproto tcp lookup 100",
    ] {
        ns.ip(cmd);
    }
    let links = ns.ip("-o link show");
    let index_of = |name: &str| -> u32 {
        let line = links.lines().find(|l| l.contains(&format!(" {name}@"))).expect("link");
        line.split(':').next().unwrap().trim().parse().unwrap()
    };
    let link_lines = format!("link {} rr0\nlink {} rr0p\n", index_of("rr0"), index_of("rr0p"));
    let kernel = sh("uname", &["-r"]);

    let (routes_up, rules) = ns.run(|| async {
        use rtnetlink::packet_route::AddressFamily::{Inet, Inet6};
        let mut routes = Vec::new();
        for family in [Inet, Inet6] {
            let mut msg = RouteMessage::default();
            msg.header.address_family = family;
            routes.extend(raw_dump(RouteNetlinkMessage::GetRoute(msg)));
        }
        let mut rules = Vec::new();
        for family in [Inet, Inet6] {
            let mut msg = RuleMessage::default();
            msg.header.family = family;
            rules.extend(raw_dump(RouteNetlinkMessage::GetRule(msg)));
        }
        (routes, rules)
    });
    // The peer end down: rr0 loses its carrier, and its routes are kept
    // with RTNH_F_LINKDOWN.
    ns.ip("link set rr0p down");
    let routes_down = ns.run(|| async {
        let mut msg = RouteMessage::default();
        msg.header.address_family = rtnetlink::packet_route::AddressFamily::Inet;
        raw_dump(RouteNetlinkMessage::GetRoute(msg))
    });

    let table_of = |m: &RouteMessage| {
        m.attributes
            .iter()
            .find_map(|a| match a {
                RouteAttribute::Table(t) => Some(*t),
                _ => None,
            })
            .unwrap_or(u32::from(m.header.table))
    };
    let route = |raw: &Vec<u8>| RouteMessage::parse(&raw[..]).expect("route");
    let mut out = format!(
        "# Route messages dumped by kernel {kernel} (record_decode_fixtures in tests/netlink_kernel.rs)\n{link_lines}"
    );
    let mut names = Vec::new();
    for raw in &routes_up {
        let m = route(raw);
        let v6 = m.header.address_family == rtnetlink::packet_route::AddressFamily::Inet6;
        let name = match (v6, table_of(&m), m.header.destination_prefix_length) {
            (false, 100, 24) => "v4_connected",
            (false, 100, 0) => "v4_default_via",
            (true, 100, 0) => "v6_default_via",
            (false, 1000, _) => "v4_table_1000",
            (true, 1000, _) => "v6_table_1000",
            _ => continue,
        };
        names.push(name);
        out.push_str(&format!("{name} {}\n", hex(raw)));
    }
    for raw in &routes_down {
        let m = route(raw);
        if table_of(&m) == 100 && m.header.destination_prefix_length == 24 {
            assert!(m.header.flags.contains(RouteFlags::Linkdown), "{m:?}");
            names.push("v4_connected_linkdown");
            out.push_str(&format!("v4_connected_linkdown {}\n", hex(raw)));
        }
    }
    assert_eq!(names.len(), 6, "{names:?}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/netlink");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("routes.hex"), &out).unwrap();
    print!("{out}");

    let mut out = format!(
        "# Rule messages dumped by kernel {kernel} (record_decode_fixtures in tests/netlink_kernel.rs)\n{link_lines}"
    );
    let mut names = Vec::new();
    for raw in &rules {
        let m = RuleMessage::parse(&raw[..]).expect("rule");
        let v6 = m.header.family == rtnetlink::packet_route::AddressFamily::Inet6;
        let priority = m.attributes.iter().find_map(|a| match a {
            RuleAttribute::Priority(p) => Some(*p),
            _ => None,
        });
        let name = match (v6, priority) {
            (false, None) if m.header.src_len == 32 => "v4_priority_0",
            (false, Some(1000)) => "v4_from",
            (true, Some(1000)) => "v6_from_to",
            (false, Some(1001)) => "v4_iif_fwmark_table_1000",
            (false, Some(1002)) => "v4_ipproto",
            (false, None) => "v4_local",
            _ => continue,
        };
        names.push(name);
        out.push_str(&format!("{name} {}\n", hex(raw)));
    }
    assert_eq!(names.len(), 6, "{names:?}");
    std::fs::write(dir.join("rules.hex"), &out).unwrap();
    print!("{out}");
}

/// Routes as roce-route reads them from their bytes (`route::route_row`,
/// not netlink-packet-route's whole parse) on a table of every shape a
/// host has: a connected route with a source, a multipath default with
/// one hop without carrier, an onlink gateway, blackhole and unreachable
/// routes, a TOS, metrics (MTU), an IPv6 preference and an expiry. Each
/// route is what the kernel sent: its bytes parse to the kernel's message
/// without the state flags (LINKDOWN in a hop), its fields are the
/// kernel's; and a flushed table restored from those bytes reads as
/// before in `ip route`.
#[test]
fn routes_read_from_their_bytes_are_the_kernels_and_go_back_as_they_were() {
    use rtnetlink::packet_core::Parseable;
    use rtnetlink::packet_route::route::{RouteFlags, RouteNextHopFlags};
    let ns = Netns::new();
    ns.veth_up();
    ns.ip("link add rr1 type veth peer name rr1p");
    ns.ip("link set rr1 up");
    ns.ip("link set rr1p up");
    ns.ip("addr add 198.51.100.10/24 dev rr0");
    ns.ip("addr add 203.0.113.10/24 dev rr1");
    ns.ip("-6 addr add 2001:db8:1::10/64 dev rr0 nodad");
    ns.batch(
        "-4",
        "route add 198.51.100.0/24 dev rr0 src 198.51.100.10 table 100 proto 234 scope link
route add default table 100 proto 234 nexthop via 198.51.100.1 dev rr0 nexthop via 203.0.113.1 dev rr1
route add 203.0.113.128/25 via 198.51.100.1 dev rr0 table 100 metric 7 tos 8 mtu 9000
route add 198.51.100.200/32 via 203.0.113.99 dev rr0 onlink table 100
route add blackhole 203.0.113.64/26 table 100
route add unreachable 203.0.113.32/27 table 100 metric 3
",
    );
    ns.batch(
        "-6",
        "route add 2001:db8:2::/64 via 2001:db8:1::1 dev rr0 table 100 pref high expires 600
route add 2001:db8:3::/64 dev rr0 table 100 metric 5 mtu 1400
",
    );
    // rr1 loses its carrier: the second hop is kept, marked LINKDOWN.
    ns.ip("link set rr1p down");
    let show = |ns: &Netns| {
        let words = |text: String| {
            // An expiry counts down, and one sent back is not kept: the
            // kernel reports it in RTA_CACHEINFO and takes it in
            // RTA_EXPIRES (as it was before routes were read from their
            // bytes). The rest must be the same.
            let mut lines: Vec<String> = text.lines().map(common::without_timers).collect();
            lines.sort();
            lines
        };
        (words(ns.ip("-d route show table 100")), words(ns.ip("-d -6 route show table 100")))
    };
    let before = show(&ns);
    assert!(before.0.iter().any(|l| l.contains("linkdown")), "{before:?}");
    let (routes, kernels) = ns.run(|| async {
        let nl = connect().await;
        let routes = nl.table_routes(100).await.expect("table 100");
        let mut kernels = Vec::new();
        for family in [Family::V4, Family::V6] {
            let all = raw_dump(RouteNetlinkMessage::GetRoute(route_dump(family, 100)));
            kernels.extend(
                all.iter()
                    .map(|raw| RouteMessage::parse(&raw[..]).expect("route"))
                    .filter(|m| m.attributes.iter().any(|a| matches!(a, RouteAttribute::Table(100)))),
            );
        }
        (routes, kernels)
    });
    // The kernel's own, without the state flags.
    let mut expected: Vec<String> = kernels
        .into_iter()
        .map(|mut m| {
            m.header.flags &= RouteFlags::Onlink | RouteFlags::Pervasive;
            for attr in &mut m.attributes {
                if let RouteAttribute::MultiPath(hops) = attr {
                    for hop in hops {
                        hop.flags &= RouteNextHopFlags::Onlink | RouteNextHopFlags::Pervasive;
                    }
                }
            }
            format!("{m:?}")
        })
        .collect();
    let mut ours: Vec<String> =
        routes.iter().map(|r| format!("{:?}", RouteMessage::parse(&r.raw[..]).expect("our bytes"))).collect();
    expected.sort();
    ours.sort();
    assert_eq!(ours, expected);
    assert_eq!(routes.len(), 8, "{routes:?}");
    let find = |dst: &str| {
        let (addr, len) = dst.split_once('/').unwrap();
        let dst = Prefix::new(addr.parse().unwrap(), len.parse().unwrap());
        routes.iter().find(|r| r.item.dst == dst).unwrap_or_else(|| panic!("{dst}: {routes:?}")).item.clone()
    };
    let connected = find("198.51.100.0/24");
    assert_eq!(
        (connected.oif.as_deref(), connected.prefsrc, connected.protocol, connected.scope),
        (Some("rr0"), Some("198.51.100.10".parse().unwrap()), 234, 253)
    );
    let multipath = find("0.0.0.0/0");
    assert_eq!((multipath.oif, multipath.gateway, multipath.protocol), (None, None, 234));
    let tos = find("203.0.113.128/25");
    assert_eq!((tos.tos, tos.metric, tos.gateway), (8, 7, Some("198.51.100.1".parse().unwrap())));
    let onlink = find("198.51.100.200/32");
    assert!(onlink.onlink, "{onlink:?}");
    assert_eq!((find("203.0.113.64/26").kind, find("203.0.113.32/27").metric), (6, 3));
    let v6 = find("2001:db8:2::/64");
    assert_eq!(
        (v6.family, v6.gateway, v6.metric),
        (Family::V6, Some("2001:db8:1::1".parse().unwrap()), 1024)
    );
    // Put back from their bytes after a flush.
    ns.ip("route flush table 100");
    ns.ip("-6 route flush table 100");
    assert!(show(&ns).0.is_empty(), "flushed");
    ns.run(move || async move {
        let nl = connect().await;
        for old in routes {
            let op = Op::RestoreRoute { current: old.item.clone(), old };
            nl.execute(&op).await.unwrap_or_else(|e| panic!("{op:?}: {e}"));
        }
    });
    assert_eq!(show(&ns), before);
}

// ---------------------------------------------------------------------------
// Links

/// The link table as roce-route reads it (its own socket and parser,
/// `netlink::linkdump`) equals `ip -j link`: every link, over several
/// datagrams (300 veths), with its index, name, state, type, hardware and
/// broadcast addresses and MTU.
#[test]
fn links_read_as_ip_reads_them() {
    let ns = Netns::new();
    let mut batch = String::from("link add br0 type bridge\n");
    for k in 0..150 {
        batch += &format!("link add cali{k:011x} type veth peer name calp{k:011x}\n");
        if k % 3 != 0 {
            batch += &format!("link set cali{k:011x} up\nlink set calp{k:011x} up\n");
        }
    }
    batch += "link set calp00000000001 master br0\nlink set br0 up\nlink set cali00000000002 mtu 9000\n";
    ns.batch("-4", &batch);
    let listed: serde_json::Value = serde_json::from_str(&ns.ip("-j link show")).expect("ip -j link");
    let (links, broadcasts) = ns.run(|| async {
        let nl = connect().await;
        let b: Vec<(Option<Vec<u8>>, Option<u32>)> =
            nl.links().iter().map(|l| (nl.broadcast(l.index).map(<[u8]>::to_vec), nl.mtu(l.index))).collect();
        (nl.links().to_vec(), b)
    });
    let listed = listed.as_array().expect("an array");
    assert_eq!(links.len(), listed.len(), "{links:?}");
    assert_eq!(links.len(), 302, "lo, br0, 300 veths");
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(":");
    for ((link, broadcast), ip) in links.iter().zip(&broadcasts).zip(listed) {
        let what = format!("{link:?} against {ip}");
        assert_eq!(u64::from(link.index), ip["ifindex"].as_u64().unwrap(), "{what}");
        assert_eq!(link.name, ip["ifname"].as_str().unwrap(), "{what}");
        let flags: Vec<&str> = ip["flags"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        assert_eq!(link.admin_up, flags.contains(&"UP"), "{what}");
        assert_eq!(link.lower_up, flags.contains(&"LOWER_UP"), "{what}");
        assert_eq!(link.mac.as_ref().map(ToString::to_string).as_deref(), ip["address"].as_str(), "{what}");
        let (broadcast, mtu) = broadcast;
        assert_eq!(broadcast.as_deref().map(hex).as_deref(), ip["broadcast"].as_str(), "{what}");
        assert_eq!(mtu.map(u64::from), ip["mtu"].as_u64(), "{what}");
        let ether = ip["link_type"] == "ether";
        assert_eq!(link.link_type == roce_route::model::LinkType::Ether, ether, "{what}");
    }
    assert!(links.iter().any(|l| l.admin_up && l.lower_up) && links.iter().any(|l| !l.admin_up));
}

/// The notifications heard until 300 ms pass without one (an overflow
/// fails the test: what was dropped cannot be learnt).
async fn heard_until_quiet(sub: &mut roce_route::events::Subscription) -> Vec<roce_route::events::Notes> {
    use roce_route::events::Received;
    let mut heard = Vec::new();
    while let Ok(got) = tokio::time::timeout(std::time::Duration::from_millis(300), sub.next()).await {
        match got.expect("notifications") {
            Received::Events(notes) => heard.push(notes),
            Received::Overflow => panic!("the notification socket overflowed"),
        }
    }
    heard
}

/// What `watch` keeps of the link table from notifications (`Netlink::
/// learn`: read before the changes, then the notifications heard since)
/// equals a read of it afterwards: new links, carrier and state changes,
/// an MTU and a MAC changed, a rename, a link deleted, one moved to
/// another namespace, and bridge ports that join and leave a bridge (an
/// AF_BRIDGE RTM_DELLINK says a port left its bridge, not that it went).
#[test]
fn the_link_table_kept_from_notifications_equals_a_read() {
    use roce_route::events::Subscription;
    type Table = Vec<(roce_route::model::Link, Option<Vec<u8>>, Option<u32>)>;
    fn table(nl: &Netlink) -> Table {
        nl.links()
            .iter()
            .map(|l| (l.clone(), nl.broadcast(l.index).map(<[u8]>::to_vec), nl.mtu(l.index)))
            .collect()
    }
    let ns = Netns::new();
    let other = Netns::new();
    ns.batch("-4", "link add old0 type veth peer name old1\nlink add br0 type bridge\nlink set br0 up\n");
    let mut batch = String::new();
    for k in 0..40 {
        batch += &format!(
            "link add pod{k} type veth peer name podp{k}\nlink set pod{k} up\nlink set podp{k} up\n"
        );
    }
    batch += "link set old0 up\nlink set old1 up\nlink set old0 mtu 9000\n\
              link set old0 address 02:00:00:00:00:07\nlink set old0 name rail7\nlink set rail7 down\n\
              link set podp3 master br0\nlink set podp3 nomaster\nlink set podp4 master br0\n\
              link set podp8 master br0\nlink del pod5\nlink del podp8\n";
    batch += &format!("link set podp6 netns {}\n", other.name);
    let name = ns.name.clone();
    let (kept, learnt, read, news) = ns.run(move || async move {
        let mut sub = Subscription::open().expect("subscription");
        let mut nl = connect().await;
        batch_in(&name, "-4", &batch);
        // Carrier changes come from the kernel's link watch, up to a second
        // late: the notifications are taken until the table equals a read
        // (on a connection of its own), for 10 s at most.
        let (mut news, mut learnt) = (0, true);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let heard: Vec<_> = heard_until_quiet(&mut sub).await.into_iter().flat_map(|n| n.links).collect();
            news += heard.len();
            learnt &= nl.learn(&heard);
            let read = table(&connect().await);
            if table(&nl) == read || std::time::Instant::now() > deadline {
                return (table(&nl), learnt, read, news);
            }
        }
    });
    assert!(learnt, "every link message could be read");
    assert!(news > 160, "{news} link notifications");
    assert_eq!(kept.len(), read.len(), "{kept:#?}\nagainst {read:#?}");
    for (k, r) in kept.iter().zip(&read) {
        assert_eq!(k, r);
    }
    let names: Vec<&str> = read.iter().map(|(l, ..)| l.name.as_str()).collect();
    assert!(names.contains(&"rail7") && !names.contains(&"old0") && names.contains(&"podp3"), "{names:?}");
    assert!(!names.contains(&"pod5") && !names.contains(&"podp6") && !names.contains(&"podp8"), "{names:?}");
}

/// Only the kernel speaks for the host: a link notification a process
/// sends to the link group (root in the namespace may) is dropped unread,
/// so it neither wakes watch nor enters the link table it keeps; the real
/// notification that follows is heard.
#[test]
fn a_notification_not_from_the_kernel_is_not_heard() {
    use roce_route::events::{Received, Subscription};
    use rtnetlink::packet_core::NetlinkMessage;
    use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage};
    use rtnetlink::sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
    let ns = Netns::new();
    let name = ns.name.clone();
    let (events, names) = ns.run(move || async move {
        let mut sub = Subscription::open().expect("subscription");
        let mut nl = connect().await;
        let mut forged = LinkMessage::default();
        forged.header.index = 4242;
        forged.attributes.push(LinkAttribute::IfName("forged0".into()));
        let mut msg = NetlinkMessage::from(RouteNetlinkMessage::NewLink(forged));
        msg.finalize();
        let mut buf = vec![0; msg.buffer_len()];
        msg.serialize(&mut buf);
        let mut sock = Socket::new(NETLINK_ROUTE).expect("netlink socket");
        sock.bind_auto().expect("bind");
        // RTMGRP_LINK: the group watch listens to for links.
        sock.send_to(&buf, &SocketAddr::new(0, 1), 0).expect("send to the link group");
        batch_in(&name, "-4", "link add real0 type veth peer name real1\n");
        let (mut events, mut heard) = (Vec::new(), Vec::new());
        while let Ok(got) = tokio::time::timeout(std::time::Duration::from_millis(300), sub.next()).await {
            match got.expect("notifications") {
                Received::Events(notes) => {
                    events.extend(notes.events.iter().map(|e| format!("{e:?}")));
                    heard.extend(notes.links);
                }
                Received::Overflow => panic!("the notification socket overflowed"),
            }
        }
        nl.learn(&heard);
        (events, nl.links().iter().map(|l| l.name.clone()).collect::<Vec<_>>())
    });
    assert!(events.iter().any(|e| e.contains("real0")), "the real notification was not heard: {events:#?}");
    assert!(!events.iter().any(|e| e.contains("forged0") || e.contains("4242")), "{events:#?}");
    assert!(names.contains(&"real0".to_string()) && !names.contains(&"forged0".to_string()), "{names:?}");
}

/// The addresses as roce-route reads them (its own socket and parser,
/// `netlink::addrdump`) equal `ip -j addr`: over several datagrams (150
/// veth pairs, each end with IPv4 and IPv6 addresses besides its
/// link-local one), with the interface, address, prefix length, scope,
/// point-to-point peer and the flags.
#[test]
fn addresses_read_as_ip_reads_them() {
    let ns = Netns::new();
    // No DAD: no address leaves the tentative state between the two reads.
    for key in ["net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"] {
        sh("ip", &["netns", "exec", &ns.name, "sysctl", "-qw", key]);
    }
    let (mut batch, mut batch6) = (String::new(), String::new());
    for k in 0..150u32 {
        let (hi, lo) = (k / 100, k % 100);
        batch += &format!(
            "link add cali{k} type veth peer name calp{k}\nlink set cali{k} up\nlink set calp{k} up\n"
        );
        batch += &format!("addr add 198.51.{hi}.{} peer 198.51.{hi}.{}/31 dev cali{k}\n", 2 * lo + 1, 2 * lo);
        batch += &format!("addr add 203.0.113.{}/24 dev calp{k}\n", k % 250 + 1);
        batch6 += &format!("addr add 2001:db8:{k:x}::1/64 dev cali{k} nodad\n");
        batch6 += &format!("addr add 2001:db8:{k:x}::2/64 dev calp{k} preferred_lft 0\n");
    }
    ns.batch("-4", &batch);
    ns.batch("-6", &batch6);
    // The link-local addresses come with the carrier, from the kernel's
    // link watch, up to a second late: both are read until they agree (an
    // address that comes between `ip` and roce-route), for 10 s at most.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (read, want) = loop {
        let (read, want) = ours_and_ips_addresses(&ns);
        if read == want || std::time::Instant::now() > deadline {
            break (read, want);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(read.len() > 750, "{} addresses", read.len());
    assert_eq!(read, want);
}

/// What `watch` keeps of the addresses from notifications (`Netlink::
/// keep_addresses`: read before the changes, then the notifications heard
/// since, `learn_addresses`) holds what a read of them holds afterwards:
/// addresses added and deleted, IPv4 secondaries deleted with their
/// primary or promoted, a point-to-point peer, an IPv6 address made
/// deprecated and one leaving DAD, link-locals coming with a carrier and
/// going with a link down, and the addresses of a link deleted and of one
/// moved to another namespace. Within one link a read may order them
/// otherwise (the kernel puts a new IPv6 address first): the rails',
/// whose order makes their plan, are read from the kernel every time, and
/// come in its order.
#[test]
fn the_addresses_kept_from_notifications_equal_a_read() {
    use roce_route::events::Subscription;
    let ns = Netns::new();
    let other = Netns::new();
    let mut setup = String::from("link add r0 type veth peer name r1\nlink set r0 up\nlink set r1 up\n");
    for k in 0..30 {
        setup +=
            &format!("link add pod{k} type veth peer name podp{k}\naddr add 203.0.113.{k}/32 dev pod{k}\n");
    }
    setup += "addr add 198.51.100.10/24 dev r0\naddr add 198.51.100.20/24 dev r0\n";
    ns.batch("-4", &setup);
    for link in ["pod2", "r0"] {
        let key = format!("net.ipv4.conf.{link}.promote_secondaries=1");
        sh("ip", &["netns", "exec", &ns.name, "sysctl", "-qw", &key]);
    }
    let mut v4 = String::new();
    for k in 0..30 {
        v4 += &format!("link set pod{k} up\nlink set podp{k} up\n");
    }
    v4 += "addr add 198.51.100.11/24 dev pod1\naddr add 198.51.100.12/24 dev pod1\n\
           addr add 198.51.100.13/24 dev pod1\naddr del 198.51.100.11/24 dev pod1\n\
           addr add 198.51.100.21/24 dev pod2\naddr add 198.51.100.22/24 dev pod2\n\
           addr del 198.51.100.21/24 dev pod2\n\
           addr add 198.51.100.31 peer 198.51.100.30/31 dev pod3\n\
           addr add 198.51.100.30/24 dev r0\naddr del 198.51.100.10/24 dev r0\n\
           link set pod4 down\nlink del pod5\n";
    v4 += &format!("link set pod6 netns {}\n", other.name);
    let v6 = "addr add 2001:db8:7::1/64 dev pod7 nodad\naddr add 2001:db8:7::2/64 dev pod7 nodad\n\
              addr add 2001:db8:8::1/64 dev pod8 nodad\naddr add 2001:db8:9::1/64 dev pod9\n\
              addr change 2001:db8:8::1/64 dev pod8 preferred_lft 0\n\
              addr add 2001:db8:a::1/64 dev r0 nodad\naddr add 2001:db8:a::2/64 dev r0 nodad\n\
              addr add 2001:db8:4::1/64 dev pod4 nodad\naddr del 2001:db8:7::1/64 dev pod7\n";
    let name = ns.name.clone();
    let move_pod10 = format!("link set pod10 netns {}\n", other.name);
    let (kept, fresh, read, learnt, news) = ns.run(move || async move {
        let mut sub = Subscription::open().expect("subscription");
        let mut nl = connect().await;
        nl.keep_addresses(Vec::new()).await.expect("addresses");
        batch_in(&name, "-4", &v4);
        batch_in(&name, "-6", v6);
        // Link-locals come with the carrier, DAD ends a second later: the
        // notifications are taken until what is kept equals a read (on a
        // connection of its own), for 10 s at most.
        let (mut news, mut learnt) = (0, true);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let sorted = |mut v: Vec<Address>| {
            v.sort_by_key(|a| (a.addr.family() == Family::V6, a.ifname.clone(), a.addr.addr));
            v
        };
        loop {
            let heard: Vec<_> =
                heard_until_quiet(&mut sub).await.into_iter().flat_map(|n| n.addresses).collect();
            news += heard.len();
            learnt &= nl.learn_addresses(&heard);
            nl.refresh_links().await.expect("links");
            let read = connect().await.addresses().await.expect("addresses");
            let kept = nl.addresses().await.expect("kept addresses");
            if sorted(kept.clone()) == sorted(read.clone()) || std::time::Instant::now() > deadline {
                // A fresh link the link table still has but the namespace
                // no longer does (moved away, its news not learnt yet): its
                // filtered dump says ENODEV, and it has no address.
                batch_in(&name, "-4", &move_pod10);
                nl.fresh_addresses_of(vec!["r0".into(), "pod7".into(), "gone0".into(), "pod10".into()]);
                let fresh = nl.addresses().await.expect("fresh addresses");
                let read = connect().await.addresses().await.expect("addresses");
                return (kept, fresh, read, learnt, news);
            }
        }
    });
    assert!(learnt, "every address message could be read");
    assert!(news > 60, "{news} address notifications");
    let key = |a: &Address| (a.addr.family() == Family::V6, a.ifname.clone(), a.addr.addr);
    let sorted = |v: &[Address]| {
        let mut v = v.to_vec();
        v.sort_by_key(key);
        v
    };
    let without_pod10 =
        |v: &[Address]| -> Vec<Address> { v.iter().filter(|a| a.ifname != "pod10").cloned().collect() };
    assert_eq!(sorted(&without_pod10(&kept)), sorted(&read));
    // Each family, then each link, in a read's order.
    let links = |v: &[Address]| {
        let mut seen: Vec<(bool, String)> =
            v.iter().map(|a| (a.addr.family() == Family::V6, a.ifname.clone())).collect();
        seen.dedup();
        seen
    };
    assert_eq!(links(&without_pod10(&kept)), links(&read));
    let shown: Vec<String> = read.iter().map(|a| format!("{} {}", a.ifname, a.addr)).collect();
    for gone in
        ["198.51.100.11/24", "198.51.100.10/24", "2001:db8:7::1/64", "203.0.113.5/32", "203.0.113.6/32"]
    {
        assert!(!shown.iter().any(|s| s.ends_with(&format!(" {gone}"))), "{gone}: {shown:#?}");
    }
    for here in ["pod2 198.51.100.22/24", "pod3 198.51.100.31/31", "r0 198.51.100.30/24"] {
        assert!(shown.iter().any(|s| s == here), "{here}: {shown:#?}");
    }
    let secondaries = shown.iter().filter(|s| s.starts_with("pod1 198.51.100.")).count();
    assert_eq!(secondaries, 0, "deleted with their primary: {shown:#?}");
    let of = |v: &[Address], name: &str| -> Vec<Address> {
        v.iter().filter(|a| a.ifname == name).cloned().collect()
    };
    assert!(read.iter().any(|a| a.ifname == "pod8" && a.deprecated), "{read:#?}");
    assert!(of(&read, "pod9").iter().any(|a| !a.tentative && a.addr.addr.to_string() == "2001:db8:9::1"));
    // The fresh links' addresses are the kernel's, in its order (the
    // newest IPv6 address first); the others' are the same as kept.
    assert_eq!(sorted(&fresh), sorted(&read));
    assert_eq!(of(&fresh, "r0"), of(&read, "r0"));
    assert_eq!(of(&fresh, "pod7"), of(&read, "pod7"));
    let r0: Vec<String> = of(&fresh, "r0").iter().map(|a| a.addr.to_string()).collect();
    assert_eq!(r0[..3], ["198.51.100.20/24", "198.51.100.30/24", "2001:db8:a::2/64"], "{r0:?}");
}

/// The addresses in `ns` as roce-route reads them and as `ip -j addr` lists
/// them, each sorted by interface and address.
fn ours_and_ips_addresses(ns: &Netns) -> (Vec<Address>, Vec<Address>) {
    let listed: serde_json::Value = serde_json::from_str(&ns.ip("-j addr show")).expect("ip -j addr");
    let read = ns.run(|| async { connect().await.addresses().await.expect("addresses") });
    let mut want = Vec::new();
    for link in listed.as_array().expect("an array") {
        for a in link["addr_info"].as_array().expect("addr_info") {
            let flag = |f: &str| a[f].as_bool().unwrap_or(false);
            let scope = match a["scope"].as_str().unwrap() {
                "global" => 0,
                "link" => 253,
                "host" => 254,
                other => panic!("scope {other}"),
            };
            want.push(Address {
                ifname: link["ifname"].as_str().unwrap().into(),
                addr: Prefix::new(
                    a["local"].as_str().unwrap().parse().unwrap(),
                    a["prefixlen"].as_u64().unwrap() as u8,
                ),
                peer: a["address"].as_str().map(|p| p.parse().unwrap()),
                scope,
                tentative: flag("tentative"),
                deprecated: flag("deprecated"),
                temporary: flag("temporary"),
                dad_failed: flag("dadfailed"),
            });
        }
    }
    let key = |a: &Address| (a.ifname.clone(), a.addr.addr);
    let (mut read, mut want) = (read, want);
    read.sort_by_key(key);
    want.sort_by_key(key);
    (read, want)
}

/// A thread that enters another namespace reads that namespace's sysctls
/// and keys the run directory by it. (Not netlink, but the same
/// namespaces: /proc/sys files are opened relative to a directory of
/// /proc/sys/net, which stays the namespace's it was opened in, and the
/// key is asked of the kernel once; `netns::enter` must forget both. Red
/// when it does not: the second read is the first namespace's 1, and the
/// second key the first's.)
#[test]
fn sysctls_and_the_run_directory_follow_the_namespace_entered_last() {
    use roce_route::model::SysctlKey;
    // `netns::enter` ends the sysctls' epoch.
    let _one = EPOCH_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let (a, b) = (Netns::new(), Netns::new());
    for (ns, value) in [(&a, "1"), (&b, "2")] {
        sh(
            "ip",
            &["netns", "exec", &ns.name, "sysctl", "-qw", &format!("net.ipv4.conf.lo.arp_ignore={value}")],
        );
    }
    let names = (a.name.clone(), b.name.clone());
    let read = std::thread::spawn(move || {
        let (mut values, mut keys) = (Vec::new(), Vec::new());
        for name in [&names.0, &names.1, &names.0] {
            roce_route::netns::enter(name).expect("enter");
            values.push(roce_route::sysctl::read("lo", SysctlKey::ArpIgnore).expect("read"));
            keys.push(roce_route::state::rundir::netns_key().expect("key"));
        }
        (values, keys)
    });
    let (values, keys) = read.join().unwrap();
    assert_eq!(values, [1, 2, 1]);
    assert_ne!(keys[0], keys[1], "{keys:?}");
    assert_eq!(keys[0], keys[2], "{keys:?}");
}

/// Held by the tests of this binary that end the sysctls' epoch or count
/// on it not ending (it is one per process): one at a time.
static EPOCH_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A link's reply carries its IPv4 devconf values (IFLA_INET_CONF), and
/// `Netlink::devconf` gives each of the four keys as its file does (each
/// set to a value of its own, so that a key read from another's word
/// shows), until this process does something that may change one: a
/// sysctl write, the namespace's lock taken or released, notifications
/// taken in. Then the file is read (None) until the links are read again.
/// Red when a step does not end the epoch (a stale value would be
/// planned with) or when a word is misplaced.
#[test]
fn sysctl_values_read_with_the_links_are_the_files_until_the_epoch_ends() {
    use roce_route::model::SysctlKey;
    use roce_route::netlink::LinkNews;
    use roce_route::state::NetnsLock;
    let _one = EPOCH_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let ns = Netns::new();
    ns.veth_up();
    for (key, value) in [("arp_ignore", 2), ("arp_announce", 1), ("rp_filter", 2), ("arp_filter", 1)] {
        sh("ip", &["netns", "exec", &ns.name, "sysctl", "-qw", &format!("net.ipv4.conf.rr0.{key}={value}")]);
    }
    let dir = std::env::temp_dir().join(format!("rr-epoch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let lock_path = dir.join("lock");
    let seen = ns.run(move || async move {
        let mut nl = Netlink::connect_for(&["rr0"]).await.expect("connect");
        let read = |nl: &Netlink| SysctlKey::ALL.map(|k| nl.devconf("rr0", k));
        let files = SysctlKey::ALL.map(|k| roce_route::sysctl::read("rr0", k).ok());
        let mut seen = vec![("read", read(&nl), files)];
        assert_eq!(nl.devconf("lo", SysctlKey::ArpIgnore), None, "lo is not in the table asked for");
        roce_route::sysctl::write("rr0", SysctlKey::ArpIgnore, 1).expect("write");
        seen.push(("written", read(&nl), [None; 4]));
        nl.refresh_links().await.unwrap();
        let files = SysctlKey::ALL.map(|k| roce_route::sysctl::read("rr0", k).ok());
        seen.push(("read again", read(&nl), files));
        let stop = roce_route::signals::StopFlag::default();
        let lock = NetnsLock::acquire_at(&lock_path, std::time::Duration::ZERO, &stop).expect("lock");
        seen.push(("lock taken", read(&nl), [None; 4]));
        nl.refresh_links().await.unwrap();
        seen.push(("read under the lock", read(&nl), files));
        drop(lock);
        seen.push(("lock released", read(&nl), [None; 4]));
        nl.refresh_links().await.unwrap();
        assert!(nl.learn(&[LinkNews::Gone(u32::MAX)]));
        seen.push(("news taken in", read(&nl), [None; 4]));
        seen
    });
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(seen[0].2, [Some(2), Some(1), Some(2), Some(1)], "the files as set");
    for (when, got, want) in &seen {
        assert_eq!(got, want, "{when}: {seen:?}");
    }
    assert_eq!(seen[2].2[0], Some(1), "the write");
}

/// The sysctls a run wrote are read back from their files, kept open
/// (`sysctl::Written`, what verify reads): each read asks the kernel
/// again, so a value another actor wrote since shows (red when the
/// written value is remembered instead); when the interface is deleted
/// and made again under its name, the kept file answers ENOENT and the
/// value read is the new interface's, from its path (red without that
/// fallback: the read fails, or gives the old interface's); once it is
/// gone, the read fails as a read by path does.
#[test]
fn the_sysctls_written_are_read_back_as_the_kernel_has_them_now() {
    use roce_route::model::SysctlKey::{ArpAnnounce, ArpIgnore};
    // A write ends the sysctls' epoch.
    let _one = EPOCH_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let ns = Netns::new();
    ns.veth_up();
    let name = ns.name.clone();
    let seen = ns.run(move || async move {
        let set = |key: &str, value: u32| {
            sh("ip", &["netns", "exec", &name, "sysctl", "-qw", &format!("net.ipv4.conf.rr0.{key}={value}")]);
        };
        let mut written = roce_route::sysctl::Written::default();
        written.write("rr0", ArpIgnore, 1).expect("write");
        written.write("rr0", ArpAnnounce, 2).expect("write");
        let read = |w: &roce_route::sysctl::Written| {
            [w.read("rr0", ArpIgnore).ok(), w.read("rr0", ArpAnnounce).ok()]
        };
        let mut seen = vec![("written", read(&written))];
        set("arp_ignore", 2);
        seen.push(("changed by another actor", read(&written)));
        sh("ip", &["-n", &name, "link", "del", "rr0"]);
        sh("ip", &["-n", &name, "link", "add", "rr0", "type", "veth", "peer", "name", "rr0p"]);
        set("arp_ignore", 3);
        seen.push(("deleted and made again", read(&written)));
        sh("ip", &["-n", &name, "link", "del", "rr0"]);
        seen.push(("deleted", read(&written)));
        seen
    });
    let want = [
        ("written", [Some(1), Some(2)]),
        ("changed by another actor", [Some(2), Some(2)]),
        ("deleted and made again", [Some(3), Some(0)]),
        ("deleted", [None, None]),
    ];
    assert_eq!(seen, want);
}

/// Requests that are not dumps go together, 16 to a datagram, and each
/// answer is its own request's, in their order: 40 links asked by name
/// (rr0 among 39 that do not exist) find rr0 alone; 20 route lookups,
/// with a route and without (ENETUNREACH), IPv4 and IPv6 (also asked
/// again the plain way: a local address), each get theirs; and the socket
/// serves a dump after. Red when an answer is taken for another
/// request's, or one is left in the socket.
#[test]
fn requests_sent_together_get_their_own_answers() {
    let ns = Netns::new();
    ns.veth_up();
    ns.ip("addr add 198.51.100.1/24 dev rr0");
    ns.ip("-6 addr add 2001:db8:1::1/64 dev rr0 nodad");
    let (links, answers, rules) = ns.run(|| async {
        let mut nl = Netlink::connect_for(&[]).await.expect("connect");
        let names: Vec<String> =
            (0..40).map(|i| if i == 21 { "rr0".to_string() } else { format!("rrmiss{i}") }).collect();
        nl.add_links(&names.iter().map(String::as_str).collect::<Vec<_>>()).expect("links");
        let links: Vec<String> = nl.links().iter().map(|l| l.name.clone()).collect();
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let (v4, v6) = (ip("198.51.100.1"), ip("2001:db8:1::1"));
        let pairs: Vec<(IpAddr, IpAddr)> = (0..20)
            .map(|i| match i % 4 {
                0 => (v4, ip(&format!("198.51.100.{}", 10 + i))),
                1 => (v4, ip("203.0.113.9")),
                2 => (v6, ip(&format!("2001:db8:1::{}", 10 + i))),
                _ => (v6, v6),
            })
            .collect();
        let show = |r: Result<Route, roce_route::netlink::NlError>| match r {
            Ok(r) => format!("{} table {} dev {}", r.dst, r.table, r.oif.unwrap_or_default()),
            Err(e) if e.is(Errno::ENETUNREACH) => "unreachable".to_string(),
            Err(e) => format!("error {e}"),
        };
        let answers: Vec<String> = (pairs.iter().zip(nl.routes_matched(&pairs)))
            .map(|((_, dst), r)| format!("{dst}: {}", show(r)))
            .collect();
        let rules = nl.rules().await.map(|r| r.len());
        (links, answers, rules)
    });
    assert_eq!(links, ["rr0"]);
    for (i, a) in answers.iter().enumerate() {
        let want = match i % 4 {
            // IPv4's plain lookup echoes the destination; IPv6's first
            // lookup (RTM_F_FIB_MATCH) names the route that matched, and a
            // local address, asked again plain, is the local table's.
            0 => format!("198.51.100.{0}: 198.51.100.{0}/32 table 254 dev rr0", 10 + i),
            1 => "203.0.113.9: unreachable".to_string(),
            2 => format!("2001:db8:1::{}: 2001:db8:1::/64 table 254 dev rr0", 10 + i),
            _ => "2001:db8:1::1: 2001:db8:1::1/128 table 255 dev lo".to_string(),
        };
        assert_eq!(a, &want, "lookup {i}: {answers:#?}");
    }
    assert!(rules.as_ref().is_ok_and(|n| *n >= 3), "a dump after them: {rules:?}");
}
