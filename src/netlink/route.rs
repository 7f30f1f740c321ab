//! Routes: `model::Route` to a route message with every header field set
//! deliberately, and dumped messages back to a `Route` plus the bytes that
//! put it back exactly.

use nix::errno::Errno;
use rtnetlink::packet_core::Parseable;
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteNextHopFlags, RouteProtocol,
    RouteScope, RouteType,
};

use super::{NlError, af, emit, family_of};
use crate::model::{Live, Prefix, Route};

/// Builds a route message with every header field set deliberately;
/// `ifindex` finds the index of the output interface.
pub(super) fn route_msg(
    r: &Route,
    ifindex: impl Fn(&str) -> Result<u32, NlError>,
) -> Result<RouteMessage, NlError> {
    let mut m = RouteMessage::default();
    m.header.address_family = af(r.family);
    m.header.destination_prefix_length = r.dst.len;
    m.header.tos = r.tos;
    m.header.table = table_header(r.table);
    m.header.protocol = RouteProtocol::from(r.protocol);
    m.header.scope = RouteScope::from(r.scope);
    m.header.kind = RouteType::from(r.kind);
    m.header.flags = if r.onlink { RouteFlags::Onlink } else { RouteFlags::empty() };
    m.attributes.push(RouteAttribute::Table(r.table));
    if r.dst.len > 0 {
        m.attributes.push(RouteAttribute::Destination(RouteAddress::from(r.dst.addr)));
    }
    if r.metric != 0 {
        m.attributes.push(RouteAttribute::Priority(r.metric));
    }
    if let Some(gw) = r.gateway {
        m.attributes.push(RouteAttribute::Gateway(RouteAddress::from(gw)));
    }
    if let Some(src) = r.prefsrc {
        m.attributes.push(RouteAttribute::PrefSource(RouteAddress::from(src)));
    }
    if let Some(dev) = &r.oif {
        m.attributes.push(RouteAttribute::Oif(ifindex(dev)?));
    }
    Ok(m)
}

/// A route from its dump message; `ifname` names an interface index.
pub(super) fn route_from(m: &RouteMessage, ifname: impl Fn(u32) -> String) -> Option<Route> {
    let family = family_of(m.header.address_family)?;
    let mut table = u32::from(m.header.table);
    let mut dst = None;
    let (mut metric, mut oif, mut gateway, mut prefsrc) = (0, None, None, None);
    for a in &m.attributes {
        match a {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(d) => dst = ip_of(d),
            RouteAttribute::Priority(p) => metric = *p,
            RouteAttribute::Oif(i) => oif = Some(ifname(*i)),
            RouteAttribute::Gateway(g) => gateway = ip_of(g),
            RouteAttribute::PrefSource(s) => prefsrc = ip_of(s),
            _ => {}
        }
    }
    let dst = Prefix::new(dst.unwrap_or(family.unspecified()), m.header.destination_prefix_length);
    Some(Route {
        family,
        table,
        dst: dst.network(),
        tos: m.header.tos,
        metric,
        protocol: u8::from(m.header.protocol),
        scope: u8::from(m.header.scope),
        kind: u8::from(m.header.kind),
        oif,
        gateway,
        prefsrc,
        onlink: m.header.flags.contains(RouteFlags::Onlink),
    })
}

/// A dumped route with the bytes to put it back: the dump without the
/// state flags the kernel refuses on input (`restorable`).
pub(super) fn live_route(m: &RouteMessage, ifname: impl Fn(u32) -> String) -> Option<Live<Route>> {
    let item = route_from(m, ifname)?;
    Some(Live { item, raw: emit(&restorable(m.clone())) })
}

/// A saved route message (a journal's or a dump's bytes) as it is sent
/// back.
pub(super) fn parse_route(raw: &[u8]) -> Result<RouteMessage, NlError> {
    RouteMessage::parse(raw)
        .map(restorable)
        .map_err(|e| NlError::local(Errno::EINVAL, format!("corrupt saved route message: {e}")))
}

/// A dumped route as it can be sent back: without the state flags the
/// kernel reports but refuses on input (IPv4 answers "Invalid rtm_flags -
/// can not contain DEAD or LINKDOWN" for a route saved while its link had
/// no carrier). Only ONLINK and PERVASIVE are requests; the rest is state.
fn restorable(mut m: RouteMessage) -> RouteMessage {
    m.header.flags &= RouteFlags::Onlink | RouteFlags::Pervasive;
    for attr in &mut m.attributes {
        if let RouteAttribute::MultiPath(hops) = attr {
            for hop in hops {
                hop.flags &= RouteNextHopFlags::Onlink | RouteNextHopFlags::Pervasive;
            }
        }
    }
    m
}

/// Tables above 255 travel in RTA_TABLE / FRA_TABLE only; the header then
/// says "unspec", as iproute2 does.
pub(super) fn table_header(table: u32) -> u8 {
    u8::try_from(table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC)
}

fn ip_of(a: &RouteAddress) -> Option<std::net::IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(std::net::IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(std::net::IpAddr::V6(*v6)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;
    use crate::model::{Family, rtn, scope};
    use crate::netlink::fixture::{RT_TABLE_COMPAT, ip, prefix, routes};

    #[test]
    fn big_tables_go_in_the_attribute() {
        assert_eq!(table_header(100), 100);
        assert_eq!(table_header(1000), 0);
    }

    fn rail_index(name: &str) -> Result<u32, NlError> {
        match name {
            "rail7" => Ok(7),
            _ => Err(NlError::local(Errno::ENODEV, format!("no {name}"))),
        }
    }

    #[test]
    fn a_built_route_decodes_to_itself() {
        let mut r = Route::connected(1000, prefix("198.51.100.0/24"), "rail7", ip("198.51.100.17"), 234);
        r.metric = 5;
        let m = route_msg(&r, rail_index).unwrap();
        assert_eq!(m.header.table, RouteHeader::RT_TABLE_UNSPEC);
        let back = route_from(&m, |i: u32| format!("rail{i}")).unwrap();
        assert_eq!(back, r);
        let via: IpAddr = ip("2001:db8::1");
        let r = Route { onlink: true, ..Route::default_via(100, via, "rail7", 234) };
        let m = route_msg(&r, rail_index).unwrap();
        assert_eq!(m.header.table, 100);
        assert_eq!(route_from(&m, |i: u32| format!("rail{i}")).unwrap(), r);
    }

    #[test]
    fn a_route_through_an_unknown_interface_is_not_built() {
        let r = Route::connected(100, prefix("198.51.100.0/24"), "rail9", ip("198.51.100.19"), 234);
        assert_eq!(route_msg(&r, rail_index).unwrap_err().errno, Errno::ENODEV);
    }

    /// `ip route add 198.51.100.0/24 dev rr0 src 198.51.100.10 table 100
    /// proto 234 scope link`, as decoded.
    fn v4_connected() -> Route {
        Route {
            family: Family::V4,
            table: 100,
            dst: prefix("198.51.100.0/24"),
            tos: 0,
            metric: 0,
            protocol: 234,
            scope: scope::LINK,
            kind: rtn::UNICAST,
            oif: Some("rr0".into()),
            gateway: None,
            prefsrc: Some(ip("198.51.100.10")),
            onlink: false,
        }
    }

    #[test]
    fn v4_routes_decode_field_by_field() {
        let f = routes();
        let (m, live) = f.route("v4_connected");
        assert_eq!(live.item, v4_connected());
        assert_eq!(m.header.flags, RouteFlags::empty());
        assert_eq!(live.raw, f.raw("v4_connected"), "a route without state flags goes back as dumped");
        // default via 198.51.100.1 dev rr0 table 100 proto 234 metric 5
        let (_, live) = f.route("v4_default_via");
        let expected = Route {
            family: Family::V4,
            table: 100,
            dst: prefix("0.0.0.0/0"),
            tos: 0,
            metric: 5,
            protocol: 234,
            scope: scope::UNIVERSE,
            kind: rtn::UNICAST,
            oif: Some("rr0".into()),
            gateway: Some(ip("198.51.100.1")),
            prefsrc: None,
            onlink: false,
        };
        assert_eq!(live.item, expected);
    }

    #[test]
    fn v6_routes_decode_field_by_field() {
        let f = routes();
        // -6 default via 2001:db8:1::1 dev rr0 table 100 proto 234: the
        // kernel gives it metric 1024 and reports it.
        let (_, live) = f.route("v6_default_via");
        let expected = Route {
            family: Family::V6,
            table: 100,
            dst: prefix("::/0"),
            tos: 0,
            metric: crate::model::IPV6_DEFAULT_METRIC,
            protocol: 234,
            scope: scope::UNIVERSE,
            kind: rtn::UNICAST,
            oif: Some("rr0".into()),
            gateway: Some(ip("2001:db8:1::1")),
            prefsrc: None,
            onlink: false,
        };
        assert_eq!(live.item, expected);
    }

    #[test]
    fn tables_above_255_are_read_from_the_attribute() {
        let f = routes();
        // 203.0.113.0/24 dev rr0 table 1000 proto 234 (scope link, as ip
        // sets it for a route without gateway).
        let (m, live) = f.route("v4_table_1000");
        assert_eq!(m.header.table, RT_TABLE_COMPAT, "the header says compat (252)");
        let expected = Route {
            family: Family::V4,
            table: 1000,
            dst: prefix("203.0.113.0/24"),
            tos: 0,
            metric: 0,
            protocol: 234,
            scope: scope::LINK,
            kind: rtn::UNICAST,
            oif: Some("rr0".into()),
            gateway: None,
            prefsrc: None,
            onlink: false,
        };
        assert_eq!(live.item, expected);
        // -6 2001:db8:2::/64 dev rr0 table 1000 proto 234 metric 7
        let (m, live) = f.route("v6_table_1000");
        assert_eq!(m.header.table, RT_TABLE_COMPAT);
        let expected = Route {
            family: Family::V6,
            table: 1000,
            dst: prefix("2001:db8:2::/64"),
            tos: 0,
            metric: 7,
            protocol: 234,
            scope: scope::UNIVERSE,
            kind: rtn::UNICAST,
            oif: Some("rr0".into()),
            gateway: None,
            prefsrc: None,
            onlink: false,
        };
        assert_eq!(live.item, expected);
    }

    #[test]
    fn a_linkdown_route_decodes_like_the_live_one_and_is_restored_without_linkdown() {
        let f = routes();
        let (m, live) = f.route("v4_connected_linkdown");
        assert!(m.header.flags.contains(RouteFlags::Linkdown), "{:?}", m.header.flags);
        assert_eq!(live.item, v4_connected());
        let restored = RouteMessage::parse(&live.raw[..]).unwrap();
        assert!(!restored.header.flags.contains(RouteFlags::Linkdown), "{:?}", restored.header.flags);
        assert_eq!(live.raw, f.raw("v4_connected"), "exactly the route as dumped with its carrier");
        // And what execute() sends for a saved one (parse_route).
        assert_eq!(parse_route(f.raw("v4_connected_linkdown")).unwrap(), restored);
    }
}
