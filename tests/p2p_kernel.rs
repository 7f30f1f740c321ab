//! The real kernel accepts what plan makes for point-to-point addresses and
//! for /32 and /128 addresses with an `onlink` gateway, and then routes
//! every probe `check` would make the way it expects.
//!
//! In one private network namespace (deleted on drop, also on failure):
//! rail0 has `198.51.100.1 peer 198.51.100.0/32` and `2001:db8::1 peer
//! 2001:db8::2/128`, its gateways being the peers; rail1 has the bare
//! 198.51.100.7/32 and 2001:db8:7::7/128 with gateways reached `onlink`
//! outside every subnet (BGP to the host).
//!
//! The addresses are read with `ip -j addr` (the peer and flags are being
//! added to roce-route's own netlink reading separately), and the plan is
//! applied as `apply --dry-run` prints it, with `sh -e`, since the request
//! side of the onlink flag is also being added there. What is checked
//! through roce-route's netlink code: the dumped routes equal the desired
//! ones (the onlink flag is read back), and `route_matched` (check's
//! lookup) + `judge` accept every probe.

mod common;

use std::collections::BTreeSet;
use std::net::IpAddr;

use common::{Netns, point_to_point_host};
use roce_route::behaviour::{self, Probes};
use roce_route::diff;
use roce_route::model::{Address, Family, Link, Prefix, Route, scope};
use roce_route::netlink::Netlink;
use roce_route::observed::Observed;
use roce_route::plan::{self, Desired};
use roce_route::{config, netns, render};

const CONFIG: &str = r#"
[[interface]]
name = "rail0"
gateway = ["198.51.100.0", "2001:db8::2"]

[[interface]]
name = "rail1"
addresses = ["198.51.100.7/32", "2001:db8:7::7/128"]
gateway = [{ address = "203.0.113.1", onlink = true }, { address = "2001:db8:ffff::1", onlink = true }]
"#;

/// The addresses of `ifname` as `ip -j addr` reports them: IFA_LOCAL as the
/// address, IFA_ADDRESS as the peer when it differs.
fn addresses(ns: &Netns, ifname: &str) -> Vec<Address> {
    let json: serde_json::Value =
        serde_json::from_str(&ns.ip(&format!("-j addr show dev {ifname}"))).unwrap();
    let mut out = Vec::new();
    for a in json[0]["addr_info"].as_array().expect("addr_info") {
        let local: IpAddr = a["local"].as_str().unwrap().parse().unwrap();
        let peer: Option<IpAddr> = a["address"].as_str().map(|p| p.parse().unwrap()).filter(|p| *p != local);
        let scope = match a["scope"].as_str() {
            Some("global") => scope::UNIVERSE,
            Some("link") => scope::LINK,
            _ => scope::HOST,
        };
        let len = a["prefixlen"].as_u64().unwrap() as u8;
        out.push(Address {
            ifname: ifname.to_string(),
            addr: Prefix::new(local, len),
            peer,
            scope,
            tentative: a["tentative"].as_bool().unwrap_or(false),
            ..Address::default()
        });
    }
    out
}

/// What roce-route's netlink code reads back inside the namespace: the
/// owned routes of the given tables, and the verdict on every probe.
fn read_back(ns: &str, tables: BTreeSet<u32>, probes: Probes) -> (Vec<Route>, Vec<behaviour::Verdict>) {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        // setns affects this thread only; the runtime runs on it.
        netns::enter(&ns).unwrap_or_else(|e| panic!("{e}"));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let nl = Netlink::connect().await.unwrap_or_else(|e| panic!("{e}"));
            let mut routes = Vec::new();
            for family in [Family::V4, Family::V6] {
                for t in &tables {
                    let dump = nl.routes(family, Some(*t), Some(234)).await.unwrap_or_else(|e| panic!("{e}"));
                    routes.extend(dump.into_iter().map(|r| r.item));
                }
            }
            let verdicts = roce_route::reconcile::ask(&nl, &probes.probes).await;
            (routes, verdicts)
        })
    })
    .join()
    .expect("the read-back thread panicked")
}

fn sorted(mut routes: Vec<Route>) -> Vec<String> {
    routes.sort();
    routes.iter().map(render::route_line).collect()
}

#[test]
fn point_to_point_and_onlink_routes_are_accepted_and_probed() {
    let ns = point_to_point_host(format!("rr-p2p-{}", std::process::id()));
    ns.ip("-6 addr add 2001:db8:7::7/128 dev rail1 nodad");

    let cfg = config::parse("p2p.toml", CONFIG).unwrap_or_else(|e| panic!("{e}"));
    let links: Vec<Link> = ["rail0", "rail1"]
        .iter()
        .enumerate()
        .map(|(i, n)| Link {
            index: i as u32 + 10,
            name: n.to_string(),
            admin_up: true,
            lower_up: true,
            mac: None,
            link_type: roce_route::model::LinkType::Ether,
        })
        .collect();
    let addrs: Vec<Address> = ["rail0", "rail1"].iter().flat_map(|n| addresses(&ns, n)).collect();
    assert!(addrs.iter().any(|a| a.peer.is_some()), "ip -j addr shows no peer: {addrs:#?}");
    let desired: Desired = plan::plan(&cfg, &links, &addrs).unwrap_or_else(|e| panic!("{e}"));
    let lines = sorted(desired.routes.clone());
    for expected in [
        "ip -4 route: 198.51.100.0/32 dev rail0 table 100 proto 234 scope link src 198.51.100.1",
        "ip -6 route: 2001:db8::2/128 dev rail0 table 100 proto 234 src 2001:db8::1 metric 1024",
        "ip -4 route: default via 203.0.113.1 dev rail1 table 101 proto 234 scope global onlink",
        "ip -6 route: default via 2001:db8:ffff::1 dev rail1 table 101 proto 234 metric 1024 onlink",
    ] {
        assert!(lines.iter().any(|l| l == expected), "{expected} not planned:\n{}", lines.join("\n"));
    }

    // Apply it as `apply --dry-run` prints it: the kernel must take every line.
    let ops = diff::diff(&desired, &Observed::default(), false).ops;
    let script = render::script(&[], &ops);
    ns.exec("sh", &["-e", "-x", "-c", &script]);

    let local: BTreeSet<IpAddr> = addrs.iter().map(|a| a.addr.addr).collect();
    let probes = behaviour::probes_for_desired(&desired, &local);
    // Only the bare /32 and /128 have no neighbour to ask about.
    let skipped: Vec<String> = probes.skipped.iter().map(|s| s.from.to_string()).collect();
    assert_eq!(skipped, ["198.51.100.7", "2001:db8:7::7"], "{:#?}", probes.skipped);
    assert_eq!(probes.probes.len(), 6, "{:#?}", probes.probes);

    let (live, verdicts) = read_back(ns.name(), desired.tables(), probes);
    assert_eq!(sorted(live), sorted(desired.routes.clone()), "the dump differs from the plan");
    for v in &verdicts {
        assert!(v.ok, "{}", v.describe());
    }
    // The peers are reached directly, the rest via the gateways.
    let to_peer = verdicts.iter().filter(|v| v.probe.expected_gateway.is_none()).count();
    assert_eq!(to_peer, 2);
}
