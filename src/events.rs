//! What `watch` listens to: rtnetlink multicast notifications of links,
//! IPv4/IPv6 addresses, routes and rules, on a socket of its own; and when
//! to act on them (`Coalesce`, pure).

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::address::AddressAttribute;
use netlink_packet_route::link::{LinkAttribute, LinkFlags};
use netlink_packet_route::route::RouteAttribute;
use netlink_packet_route::rule::RuleAttribute;
use nix::libc;
use rtnetlink::packet_core::{NetlinkMessage, NetlinkPayload};
use rtnetlink::sys::{AsyncSocket, AsyncSocketExt, SocketAddr, TokioSocket, protocols::NETLINK_ROUTE};

/// The multicast groups `watch` joins.
const GROUPS: [u32; 7] = [
    libc::RTNLGRP_LINK,
    libc::RTNLGRP_IPV4_IFADDR,
    libc::RTNLGRP_IPV6_IFADDR,
    libc::RTNLGRP_IPV4_ROUTE,
    libc::RTNLGRP_IPV6_ROUTE,
    libc::RTNLGRP_IPV4_RULE,
    libc::RTNLGRP_IPV6_RULE,
];

/// The kernel's default, main and local tables: roce-route never puts a
/// route there, so their routes' comings and goings (the connected routes
/// of a link going down and up) are no reason for a pass.
const KERNEL_TABLES: [u32; 3] = [253, 254, 255];

/// One notification, in words ("rail0 down", "rule deleted: ...").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The interface index it is about, when it is about one (named by
    /// the caller, which knows the links).
    pub ifindex: Option<u32>,
    /// The interface name when the message carries it.
    pub ifname: Option<String>,
    pub what: String,
}

impl Event {
    /// "rail0: down" (the name from the message, else from `name_of`).
    pub fn describe(&self, name_of: impl Fn(u32) -> Option<String>) -> String {
        let name = self.ifname.clone().or_else(|| self.ifindex.and_then(&name_of));
        match (name, self.ifindex) {
            (Some(n), _) => format!("{n}: {}", self.what),
            (None, Some(i)) => format!("if{i}: {}", self.what),
            (None, None) => self.what.clone(),
        }
    }
}

/// What one read from the socket gave.
#[derive(Debug)]
pub enum Received {
    /// Notifications that may concern what roce-route owns (possibly none).
    Events(Vec<Event>),
    /// The socket overflowed (ENOBUFS): notifications were lost, so only a
    /// full resync is safe.
    Overflow,
}

/// A netlink socket joined to the groups above.
pub struct Subscription {
    socket: TokioSocket,
}

impl Subscription {
    /// Opens and joins; must run inside a tokio runtime.
    pub fn open() -> io::Result<Subscription> {
        let mut socket = TokioSocket::new(NETLINK_ROUTE)?;
        socket.socket_mut().bind(&SocketAddr::new(0, 0))?;
        for group in GROUPS {
            socket.socket_ref().add_membership(group)?;
        }
        // Room for a burst (a rail deleted with its routes); an overflow
        // still only costs a resync.
        let size = crate::testhooks::watch_rcvbuf().unwrap_or(1 << 20);
        let _ = socket.socket_ref().set_rx_buf_sz(size);
        Ok(Subscription { socket })
    }

    /// Waits for the next datagram (no CPU while idle).
    pub async fn next(&mut self) -> io::Result<Received> {
        match self.socket.recv_from_full().await {
            Ok((buf, _)) => Ok(Received::Events(parse(&buf))),
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(Received::Overflow),
            Err(e) => Err(e),
        }
    }
}

/// Every notification in a datagram that may concern roce-route: links,
/// addresses but IPv6 link-local ones, rules, and routes outside the
/// kernel's own tables.
pub fn parse(mut buf: &[u8]) -> Vec<Event> {
    let mut events = Vec::new();
    // A notification this build cannot read may still be about what
    // roce-route owns: it counts as an event (a pass that finds nothing to
    // do costs little), never as nothing.
    let unreadable =
        |why: &str| Event { ifindex: None, ifname: None, what: format!("unreadable notification ({why})") };
    while !buf.is_empty() {
        if buf.len() < 16 {
            events.push(unreadable("a truncated header"));
            break;
        }
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len < 16 || len > buf.len() {
            events.push(unreadable("a bad length"));
            break;
        }
        match NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[..len]) {
            Ok(msg) => match msg.payload {
                NetlinkPayload::InnerMessage(inner) => events.extend(event_of(&inner)),
                NetlinkPayload::Done(_) | NetlinkPayload::Noop => {}
                _ => events.push(unreadable("an unexpected payload")),
            },
            Err(_) => events.push(unreadable("it does not parse")),
        }
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
    }
    events
}

fn event_of(msg: &RouteNetlinkMessage) -> Option<Event> {
    use RouteNetlinkMessage as M;
    let event = |ifindex, ifname, what: String| Some(Event { ifindex, ifname, what });
    match msg {
        M::NewLink(l) | M::DelLink(l) => {
            let name = l.attributes.iter().find_map(|a| match a {
                LinkAttribute::IfName(n) => Some(n.clone()),
                _ => None,
            });
            let what = if matches!(msg, M::DelLink(_)) {
                "deleted".to_string()
            } else {
                let up = l.header.flags.contains(LinkFlags::Up);
                let carrier = l.header.flags.contains(LinkFlags::LowerUp);
                format!("{}, carrier {}", if up { "up" } else { "down" }, if carrier { "on" } else { "off" })
            };
            event(Some(l.header.index), name, what)
        }
        M::NewAddress(a) | M::DelAddress(a) => {
            let ip: Option<IpAddr> = a.attributes.iter().find_map(|x| match x {
                AddressAttribute::Local(ip) => Some(*ip),
                _ => None,
            });
            let ip = ip.or_else(|| {
                a.attributes.iter().find_map(|x| match x {
                    AddressAttribute::Address(ip) => Some(*ip),
                    _ => None,
                })
            })?;
            // A link-local address is never a rail's source address.
            if crate::model::is_v6_link_local(ip) {
                return None;
            }
            let verb = if matches!(msg, M::DelAddress(_)) { "removed" } else { "added" };
            event(Some(a.header.index), None, format!("address {ip}/{} {verb}", a.header.prefix_len))
        }
        M::NewRoute(r) | M::DelRoute(r) => {
            let table = r
                .attributes
                .iter()
                .find_map(|x| match x {
                    RouteAttribute::Table(t) => Some(*t),
                    _ => None,
                })
                .unwrap_or(u32::from(r.header.table));
            if KERNEL_TABLES.contains(&table) {
                return None;
            }
            let verb = if matches!(msg, M::DelRoute(_)) { "deleted" } else { "added" };
            event(None, None, format!("route {verb} in table {table}"))
        }
        M::NewRule(r) | M::DelRule(r) => {
            let table = r
                .attributes
                .iter()
                .find_map(|x| match x {
                    RuleAttribute::Table(t) => Some(*t),
                    _ => None,
                })
                .unwrap_or(u32::from(r.header.table));
            let verb = if matches!(msg, M::DelRule(_)) { "deleted" } else { "added" };
            event(None, None, format!("rule {verb} (lookup {table})"))
        }
        _ => None,
    }
}

/// When a burst of events is over: a pass runs once no event came for
/// `quiet`, and at the latest `cap` after the first event of the burst
/// (a storm that never pauses still gets a pass every `cap`). Pure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coalesce {
    pub quiet: Duration,
    pub cap: Duration,
}

impl Coalesce {
    /// 20 ms of quiet: the notifications of one flap or one purge come
    /// within a few ms of each other, and a heal should be done well
    /// within 50 ms (bench/watch.py measures it).
    pub const DEFAULT: Coalesce =
        Coalesce { quiet: Duration::from_millis(20), cap: Duration::from_millis(500) };

    /// When the pass for a burst whose first event came at `first` and
    /// whose latest came at `last` is due (times from any common origin).
    pub fn due(&self, first: Duration, last: Duration) -> Duration {
        (last + self.quiet).min(first + self.cap)
    }

    /// The times the passes run for events at `times` (sorted), each pass
    /// taking the events up to it: what the watch loop does, for tests.
    pub fn passes(&self, times: &[Duration]) -> Vec<Duration> {
        let mut passes = Vec::new();
        let mut i = 0;
        while i < times.len() {
            let first = times[i];
            let mut last = first;
            i += 1;
            while i < times.len() && times[i] < self.due(first, last) {
                last = times[i];
                i += 1;
            }
            passes.push(self.due(first, last));
        }
        passes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The arithmetic with round numbers (DEFAULT's quiet period is tuned).
    const RULE: Coalesce = Coalesce { quiet: Duration::from_millis(50), cap: Duration::from_millis(500) };

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().copied().map(Duration::from_millis).collect()
    }

    #[test]
    fn one_event_gets_one_pass_after_the_quiet_period() {
        assert_eq!(RULE.passes(&ms(&[1000])), ms(&[1050]));
    }

    #[test]
    fn a_burst_is_one_pass_after_its_last_event() {
        // A rail deleted: link, addresses, routes, rules within a few ms.
        assert_eq!(RULE.passes(&ms(&[0, 1, 2, 3, 10, 40, 85])), ms(&[135]));
    }

    #[test]
    fn a_storm_that_never_pauses_gets_a_pass_every_cap() {
        // A flap every 20 ms for 2 s: quiet never comes; passes every 500 ms.
        let storm: Vec<u64> = (0..100).map(|k| k * 20).collect();
        let passes = RULE.passes(&ms(&storm));
        assert_eq!(passes, ms(&[500, 1000, 1500, 2000]), "bounded by the cap, not by the event count");
    }

    #[test]
    fn events_after_a_pass_start_a_new_burst() {
        // Its own pass's events (at 60 and 61 ms) give one more pass, the
        // fixed point.
        assert_eq!(RULE.passes(&ms(&[0, 60, 61])), ms(&[50, 111]));
    }

    #[test]
    fn notifications_are_parsed_and_kernel_tables_ignored() {
        use netlink_packet_route::link::LinkMessage;
        use netlink_packet_route::route::RouteMessage;
        use rtnetlink::packet_core::NetlinkHeader;
        let mut link = LinkMessage::default();
        link.header.index = 7;
        link.header.flags = LinkFlags::Up;
        link.attributes.push(LinkAttribute::IfName("rail0".into()));
        let mut main = RouteMessage::default();
        main.header.table = 254;
        let mut ours = RouteMessage::default();
        ours.header.table = 101;
        let mut bytes = Vec::new();
        for inner in [
            RouteNetlinkMessage::NewLink(link),
            RouteNetlinkMessage::DelRoute(main),
            RouteNetlinkMessage::DelRoute(ours),
        ] {
            let mut msg = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::InnerMessage(inner));
            msg.finalize();
            let mut buf = vec![0; msg.buffer_len()];
            msg.serialize(&mut buf);
            bytes.extend(buf);
        }
        let events = parse(&bytes);
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0].describe(|_| None), "rail0: up, carrier off");
        assert_eq!(events[1].describe(|_| None), "route deleted in table 101");
    }

    #[test]
    fn a_notification_that_does_not_parse_is_an_event() {
        // A well-framed RTM_NEWRULE whose body is cut short, a bad length,
        // and a truncated header: each is a reason for a pass.
        let mut bad_body = vec![0u8; 20];
        bad_body[..4].copy_from_slice(&20u32.to_ne_bytes());
        bad_body[4..6].copy_from_slice(&32u16.to_ne_bytes()); // RTM_NEWRULE
        for (bytes, why) in [
            (bad_body, "does not parse"),
            (
                {
                    let mut b = vec![0u8; 16];
                    b[..4].copy_from_slice(&400u32.to_ne_bytes());
                    b
                },
                "bad length",
            ),
            (vec![1, 2, 3], "truncated header"),
        ] {
            let events = parse(&bytes);
            assert_eq!(events.len(), 1, "{why}: {events:?}");
            assert!(events[0].what.contains(why), "{events:?}");
        }
    }
}
