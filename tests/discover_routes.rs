//! `discover` on a host whose uplink carries a full routing table (issue
//! 25, 3): only the rails' routes are read, filtered by output interface
//! in the kernel (the rails and the netdevs on their subnets), and the
//! rails' gateway is found among them; a gateway put `onlink` on a netdev
//! off the rails' subnet is no rail's.

mod common;

use common::*;

/// The routes put on the uplink: a full table is ~1M; 4000 is plenty to
/// tell a filtered dump (a few messages per rail) from an unfiltered one.
const UPLINK_ROUTES: usize = 4000;

#[test]
fn discover_reads_the_rails_routes_only_and_takes_the_gateway_out_of_each_rail() {
    let tb = Testbed::builder().rails(2).ipv6(true).build();
    tb.ip_host("link add uplink type veth peer name uplink-p");
    tb.ip_host("link set uplink up");
    tb.ip_host("link set uplink-p up");
    tb.ip_host("addr add 203.0.113.1/24 dev uplink");
    tb.ip_host("addr add 2001:db8:e::1/64 dev uplink nodad");
    let batch: String = (0..UPLINK_ROUTES)
        .map(|i| format!("route add 2001:db8:f:{i:x}::/64 via 2001:db8:e::2 dev uplink\n"))
        .collect();
    let file = tb.dir().join("uplink-routes.batch");
    std::fs::write(&file, batch).unwrap();
    tb.ip_host(&format!("-batch {}", file.display()));
    // The uplink's default route: its gateway is in no rail's subnet.
    tb.ip_host("route add default via 203.0.113.2 dev uplink");
    // A gateway in the rails' subnet, but `onlink` on the uplink, as the
    // preferred default (lowest metric): no rail's.
    tb.ip_host("route add default via 198.51.100.254 dev uplink onlink metric 5");
    // The rails' gateway: rail0 reaches 203.0.113.128/25 through the peer,
    // which every rail of the subnet reaches.
    let gw = tb.peer_v4();
    tb.ip_host(&format!("route add 203.0.113.128/25 via {gw} dev rail0"));

    let mut cmd = tb.rr_cmd(&["discover", "--interfaces", "rail*"]);
    cmd.env("ROCE_ROUTE_PROFILE", "1");
    let run = Run::of(cmd).expect_code(EXIT_OK);
    let config = run.stdout();
    let cfg: toml::Table = config.parse().unwrap_or_else(|e| panic!("{e}\n{config}"));
    let rails = cfg["interface"].as_array().unwrap();
    assert_eq!(rails.len(), 2, "{config}");
    for r in rails {
        assert_eq!(r["gateway"].as_str(), Some(gw), "the peer, not the uplink's onlink gateway:\n{config}");
    }

    let read = profile_count(&run.stderr(), "routes_read");
    assert!(read > 0, "discover read no route: {}", run.stderr());
    let uplink = tb.ip_host("-6 route show dev uplink").lines().count();
    assert!(uplink >= UPLINK_ROUTES, "the uplink holds {uplink} routes");
    assert!(read < 100, "discover read {read} route messages; the uplink's {uplink} must not be dumped");
}
