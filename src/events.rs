//! What `watch` listens to: rtnetlink multicast notifications of links,
//! IPv4/IPv6 addresses, routes and rules, on a socket of its own; and when
//! to act on them (`Coalesce` and `Burst`, pure, the state machine the
//! watch loop drives).
//!
//! Why a socket of its own rather than the unsolicited-message receiver
//! `rtnetlink::new_connection()` returns (which `Netlink` drops, when it
//! opens that connection at all):
//! - The request socket carries the acks of a heal's steps. A burst of
//!   notifications that fills its receive buffer (ENOBUFS: the kernel drops
//!   whatever does not fit) would drop acks and dump parts too, and
//!   netlink-proto has no request timeout: the heal would wait forever.
//!   Here an overflow costs only a full resync (`Received::Overflow`).
//! - netlink-proto's codec drops a message it cannot decode (it only logs
//!   it through `log`, which nothing here records) and clears the rest of
//!   a datagram whose length field is bad; `parse` makes each of those an
//!   event, since an unreadable notification may be about a rail.
//! - The receiver hears nothing unless the groups are joined on the request
//!   socket before the connection is spawned, i.e. for every command and
//!   every apply, whose own changes would then queue in an unbounded channel
//!   nobody reads; apply's DAD wait (`reconcile::settle_dad`) subscribes only
//!   when something is tentative. Here the kernel's buffer bounds the backlog
//!   while a pass runs.

use std::collections::BTreeSet;
use std::io;
use std::net::IpAddr;
use std::ops::Add;
use std::time::Duration;

use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::address::AddressAttribute;
use netlink_packet_route::link::{LinkAttribute, LinkFlags};
use netlink_packet_route::route::RouteAttribute;
use netlink_packet_route::rule::RuleAttribute;
use nix::libc;
use rtnetlink::packet_core::{NetlinkBuffer, NetlinkMessage, NetlinkPayload};
use rtnetlink::sys::{AsyncSocket, AsyncSocketExt, SocketAddr, TokioSocket, protocols::NETLINK_ROUTE};

use crate::netlink::{AddrNews, LinkNews};

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

/// The size of a netlink message header.
const NLMSG_HDRLEN: usize = 16;

/// What a notification is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    Link,
    Address,
    Route,
    Rule,
    /// A message this build cannot read.
    Unreadable,
}

/// One notification, in words ("rail0 down", "rule deleted: ...").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub subject: Subject,
    /// The interface index it is about, when it is about one (named by
    /// the caller, which knows the links).
    pub ifindex: Option<u32>,
    /// The interface name when the message carries it.
    pub ifname: Option<String>,
    /// The address of an address event.
    pub addr: Option<IpAddr>,
    pub what: String,
}

impl Event {
    /// A rule or a route that came or went with no link or address named:
    /// what an agent does, not what a flap does.
    pub fn is_rule_or_route(&self) -> bool {
        self.ifindex.is_none() && matches!(self.subject, Subject::Rule | Subject::Route)
    }

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
    /// Notifications that may concern what roce-route owns (possibly none),
    /// and what the link messages say of the link table.
    Events(Notes),
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

    /// Throws away every datagram queued now, without waiting (a storm
    /// that fills the queue as fast as it drains stops it after 100,000).
    pub fn drain(&mut self) {
        let mut buf = Vec::with_capacity(64 * 1024);
        for _ in 0..100_000 {
            buf.clear();
            match self.socket.socket_ref().recv(&mut buf, libc::MSG_DONTWAIT) {
                Ok(_) => {}
                // The overflow said again: there is more to throw away.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(_) => return,
            }
        }
    }

    /// Waits for the next datagram from the kernel (no CPU while idle).
    pub async fn next(&mut self) -> io::Result<Received> {
        loop {
            match self.socket.recv_from_full().await {
                // Only the kernel (port 0) tells the host's news. A process
                // with CAP_NET_ADMIN in the namespace can send to the groups
                // or to this socket: what it says must not reach the link
                // table watch keeps. Dropped unread, as libnl does.
                Ok((_, from)) if from.port_number() != 0 => continue,
                Ok((buf, _)) => return Ok(Received::Events(parse(&buf))),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => return Ok(Received::Overflow),
                Err(e) => return Err(e),
            }
        }
    }
}

/// What a datagram of notifications says.
#[derive(Debug, Default)]
pub struct Notes {
    /// Every notification that may concern roce-route.
    pub events: Vec<Event>,
    /// Every link message's news for the link table, of every link (a pod's
    /// veth too: the table stays whole), in order.
    pub links: Vec<LinkNews>,
    /// Every address message's news for the addresses watch keeps, of
    /// every link (a pod veth's link-local address too), in order.
    pub addresses: Vec<AddrNews>,
}

/// Every notification in a datagram that may concern roce-route: links,
/// addresses but IPv6 link-local ones, rules, and routes outside the
/// kernel's own tables; and the news of its link messages.
pub fn parse(mut buf: &[u8]) -> Notes {
    let mut events = Vec::new();
    let mut links = Vec::new();
    let mut addresses = Vec::new();
    // A notification this build cannot read may still be about what
    // roce-route owns: it counts as an event (a pass that finds nothing to
    // do costs little), never as nothing.
    let unreadable = |why: &str| Event {
        subject: Subject::Unreadable,
        ifindex: None,
        ifname: None,
        addr: None,
        what: format!("unreadable notification ({why})"),
    };
    while !buf.is_empty() {
        if buf.len() < NLMSG_HDRLEN {
            events.push(unreadable("a truncated header"));
            links.push(LinkNews::Unreadable);
            addresses.push(AddrNews::Unreadable);
            break;
        }
        // The framing netlink-proto's codec uses: a length field that is
        // shorter than a header or longer than the datagram is refused.
        let Ok(len) = NetlinkBuffer::new_checked(buf).map(|b| b.length() as usize) else {
            events.push(unreadable("a bad length"));
            links.push(LinkNews::Unreadable);
            addresses.push(AddrNews::Unreadable);
            break;
        };
        links.extend(crate::netlink::link_news(&buf[..len]));
        addresses.extend(crate::netlink::addr_news(&buf[..len]));
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
    Notes { events, links, addresses }
}

fn event_of(msg: &RouteNetlinkMessage) -> Option<Event> {
    use RouteNetlinkMessage as M;
    let event =
        |subject, ifindex, ifname, what: String| Some(Event { subject, ifindex, ifname, addr: None, what });
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
            event(Subject::Link, Some(l.header.index), name, what)
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
            let what = format!("address {ip}/{} {verb}", a.header.prefix_len);
            event(Subject::Address, Some(a.header.index), None, what).map(|e| Event { addr: Some(ip), ..e })
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
            event(Subject::Route, None, None, format!("route {verb} in table {table}"))
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
            event(Subject::Rule, None, None, format!("rule {verb} (lookup {table})"))
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
    /// 2 ms of quiet, for a burst that comes while watch is calm: the
    /// notifications of one `ip` command (a flap's up, a purge, an address
    /// added) come within microseconds of each other, so the heal starts
    /// 2 ms after them (bench/watch.py measures the whole heal).
    pub const QUICK: Coalesce = Coalesce { quiet: Duration::from_millis(2), cap: Duration::from_millis(500) };

    /// 20 ms of quiet, once passes come close together (`Pace`): a storm
    /// of flaps gets a pass per pause of 20 ms, at the latest one every
    /// 500 ms, not one per flap.
    pub const DEFAULT: Coalesce =
        Coalesce { quiet: Duration::from_millis(20), cap: Duration::from_millis(500) };

    /// When the pass for a burst whose first event came at `first` and
    /// whose latest came at `last` is due (an `Instant`, or times from any
    /// common origin).
    pub fn due<T: Copy + Ord + Add<Duration, Output = T>>(&self, first: T, last: T) -> T {
        (last + self.quiet).min(first + self.cap)
    }

    /// A burst whose first event came at `first`.
    pub fn burst<T: Copy + Ord + Add<Duration, Output = T>>(self, first: T) -> Burst<T> {
        Burst { rule: self, first, last: first }
    }

    /// The times the passes run for events at `times` (sorted), each pass
    /// taking the events up to it: `Burst` driven as the watch loop drives
    /// it, for tests.
    #[cfg(test)]
    pub fn passes(&self, times: &[Duration]) -> Vec<Duration> {
        let mut passes = Vec::new();
        let mut burst: Option<Burst<Duration>> = None;
        for &at in times {
            if let Some(b) = burst.as_mut()
                && b.joins(at)
            {
                continue;
            }
            passes.extend(burst.map(|b| b.due()));
            burst = Some(self.burst(at));
        }
        passes.extend(burst.map(|b| b.due()));
        passes
    }
}

/// Which `Coalesce` a burst follows (pure): `QUICK` while watch is calm,
/// `DEFAULT` once `BUSY_PASSES` passes ran within `BUSY_WITHIN`, until no
/// notification came for `CALM`. A flap (the down's pass, the up's pass,
/// the echo of the heal's own changes) stays quick; a storm turns busy
/// after a few passes and stays so while it lasts, so that its passes are
/// as few as with `DEFAULT` alone.
#[derive(Clone, Debug)]
pub struct Pace<T> {
    /// The latest passes, oldest first (at most `BUSY_PASSES`).
    passes: std::collections::VecDeque<T>,
    busy: bool,
    /// The latest notification.
    heard: Option<T>,
}

impl<T> Default for Pace<T> {
    fn default() -> Self {
        Pace { passes: Default::default(), busy: false, heard: None }
    }
}

impl<T: Copy + Ord + Add<Duration, Output = T>> Pace<T> {
    pub const BUSY_PASSES: usize = 4;
    pub const BUSY_WITHIN: Duration = Duration::from_millis(250);
    pub const CALM: Duration = Duration::from_millis(250);

    /// The rule of a burst whose first notification came at `at`.
    pub fn rule(&mut self, at: T) -> Coalesce {
        if self.heard.is_some_and(|h| h + Self::CALM <= at) {
            self.busy = false;
            self.passes.clear();
        }
        if self.busy { Coalesce::DEFAULT } else { Coalesce::QUICK }
    }

    /// A notification came at `at`.
    pub fn heard(&mut self, at: T) {
        self.heard = Some(self.heard.map_or(at, |h| h.max(at)));
    }

    /// A pass ran at `at`.
    pub fn passed(&mut self, at: T) {
        if self.passes.len() == Self::BUSY_PASSES {
            self.passes.pop_front();
        }
        self.passes.push_back(at);
        if self.passes.len() == Self::BUSY_PASSES && self.passes[0] + Self::BUSY_WITHIN >= at {
            self.busy = true;
        }
    }

    /// The times the passes run for notifications at `times` (sorted),
    /// each pass taking no time and the notifications up to it: the watch
    /// loop's driving of `Pace` and `Burst`, for tests.
    #[cfg(test)]
    pub fn passes(times: &[Duration]) -> Vec<Duration> {
        let mut pace = Pace::<Duration>::default();
        let mut passes = Vec::new();
        let mut burst: Option<Burst<Duration>> = None;
        for &at in times {
            if let Some(b) = burst.as_mut()
                && b.joins(at)
            {
                pace.heard(at);
                continue;
            }
            if let Some(b) = burst {
                passes.push(b.due());
                pace.passed(b.due());
            }
            burst = Some(pace.rule(at).burst(at));
            pace.heard(at);
        }
        passes.extend(burst.map(|b| b.due()));
        passes
    }
}

/// The events gathered for one pass (pure): the watch loop starts one at
/// the first event after a quiet spell, offers it each event that follows,
/// and runs the pass at `due`; an event that does not join starts the next
/// burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst<T> {
    rule: Coalesce,
    first: T,
    last: T,
}

impl<T: Copy + Ord + Add<Duration, Output = T>> Burst<T> {
    /// When its pass runs.
    pub fn due(&self) -> T {
        self.rule.due(self.first, self.last)
    }

    /// Whether an event at `at` (not before the latest) still belongs to
    /// this burst, i.e. came before its pass is due; if so the pass moves to
    /// `quiet` after it (up to the cap).
    pub fn joins(&mut self, at: T) -> bool {
        if at >= self.due() {
            return false;
        }
        self.last = self.last.max(at);
        true
    }
}

/// What the reads of one burst gave: the events, the link news, and
/// whether the socket overflowed in between.
#[derive(Debug, Default)]
pub struct Heard {
    pub events: Vec<Event>,
    pub links: Vec<LinkNews>,
    pub addresses: Vec<AddrNews>,
    pub overflow: bool,
}

impl Heard {
    /// A datagram that came once this burst's pass was due: its link and
    /// address news join this burst (in order, so that what its pass
    /// keeps has them, as the kernel it reads does), its events are the
    /// next burst's: returned, without the news, to be carried there. An
    /// overflow joins this burst (its pass reads everything, which the
    /// dropped news are in); a failed read is carried as it is.
    pub fn add_late(&mut self, mut got: io::Result<Received>) -> Option<io::Result<Received>> {
        match &mut got {
            Ok(Received::Events(notes)) => {
                self.links.append(&mut notes.links);
                self.addresses.append(&mut notes.addresses);
                Some(got)
            }
            Ok(Received::Overflow) => {
                self.overflow = true;
                None
            }
            Err(_) => Some(got),
        }
    }

    pub fn add(&mut self, got: Received) {
        match got {
            Received::Events(notes) => {
                self.events.extend(notes.events);
                self.links.extend(notes.links);
                self.addresses.extend(notes.addresses);
            }
            Received::Overflow => self.overflow = true,
        }
    }

    /// Nothing that may concern roce-route: no pass.
    pub fn is_empty(&self) -> bool {
        !self.overflow && self.events.is_empty()
    }

    /// Only rules and routes went or came, with no link or address change:
    /// the kernel did not flush them, an agent did it.
    pub fn only_rules_and_routes(&self) -> bool {
        !self.overflow && self.events.iter().all(Event::is_rule_or_route)
    }

    /// Keeps only what may concern a rail: a link event of a rail's name
    /// (a new link by that name, or one renamed to it) or of a rail's
    /// index (a rail renamed away, deleted), an address event of a rail
    /// (by index, also a rail's that appears in this burst) or of an
    /// address that `concerns` the config (a rail's address moved to
    /// another link, one in a rail's subnet), and every route, rule and
    /// unreadable message. A pod's veth coming and going is none of these:
    /// it gets no pass.
    pub fn retain_rails(
        &mut self,
        is_rail: impl Fn(&str) -> bool,
        rail_indexes: &BTreeSet<u32>,
        concerns: impl Fn(IpAddr) -> bool,
    ) {
        let mut indexes = rail_indexes.clone();
        indexes.extend(
            self.events
                .iter()
                .filter(|e| e.subject == Subject::Link && e.ifname.as_deref().is_some_and(&is_rail))
                .filter_map(|e| e.ifindex),
        );
        self.events.retain(|e| match e.subject {
            Subject::Link => {
                e.ifname.as_deref().is_some_and(&is_rail) || e.ifindex.is_some_and(|i| indexes.contains(&i))
            }
            Subject::Address => {
                e.ifindex.is_some_and(|i| indexes.contains(&i)) || e.addr.is_some_and(&concerns)
            }
            Subject::Route | Subject::Rule | Subject::Unreadable => true,
        });
    }

    /// Each event's words once, in order (links named by `name_of`).
    pub fn described(&self, name_of: impl Fn(u32) -> Option<String>) -> Vec<String> {
        let mut seen = Vec::new();
        for e in &self.events {
            let d = e.describe(&name_of);
            if !seen.contains(&d) {
                seen.push(d);
            }
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read that gave these events and no link news.
    fn got(events: Vec<Event>) -> Received {
        Received::Events(Notes { events, links: Vec::new(), addresses: Vec::new() })
    }

    /// The arithmetic with round numbers (DEFAULT's quiet period is tuned).
    const RULE: Coalesce = Coalesce { quiet: Duration::from_millis(50), cap: Duration::from_millis(500) };

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().copied().map(Duration::from_millis).collect()
    }

    /// A datagram after the burst closed: its news are this burst's pass's
    /// (after the burst's own, in order), its events the next burst's,
    /// without the news (learnt twice, a deletion would be undone).
    #[test]
    fn a_late_datagrams_news_join_the_burst_and_its_events_are_carried() {
        let event = |what: &str| Event {
            subject: Subject::Link,
            ifindex: Some(7),
            ifname: None,
            addr: None,
            what: what.to_string(),
        };
        let mut heard = Heard::default();
        heard.add(Received::Events(Notes {
            events: vec![event("rail0 down")],
            links: vec![LinkNews::Gone(4)],
            addresses: Vec::new(),
        }));
        let late = Received::Events(Notes {
            events: vec![event("rail0 up")],
            links: vec![LinkNews::Gone(5)],
            addresses: vec![AddrNews::Unreadable],
        });
        match heard.add_late(Ok(late)) {
            Some(Ok(Received::Events(n))) => {
                assert_eq!(n.events, [event("rail0 up")], "the events are carried");
                assert!(n.links.is_empty() && n.addresses.is_empty(), "without the news: {n:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(heard.events, [event("rail0 down")], "the late events are not this burst's");
        assert_eq!(heard.links, [LinkNews::Gone(4), LinkNews::Gone(5)]);
        assert_eq!(heard.addresses, [AddrNews::Unreadable]);
        assert!(!heard.overflow);

        assert!(heard.add_late(Ok(Received::Overflow)).is_none(), "an overflow is not carried");
        assert!(heard.overflow, "the burst's pass reads everything");
        let failed = heard.add_late(Err(io::Error::from_raw_os_error(libc::EIO)));
        assert!(
            matches!(failed, Some(Err(e)) if e.raw_os_error() == Some(libc::EIO)),
            "a failed read is carried"
        );
        assert_eq!(heard.links.len(), 2);
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
    fn a_burst_moves_its_pass_with_each_event_up_to_the_cap_and_refuses_late_ones() {
        let mut b = RULE.burst(Duration::from_millis(100));
        assert_eq!(b.due(), Duration::from_millis(150));
        assert!(b.joins(Duration::from_millis(140)));
        assert_eq!(b.due(), Duration::from_millis(190), "quiet counts from the latest event");
        for at in [180, 220, 260, 300, 340, 380, 420, 460, 500, 540, 580] {
            assert!(b.joins(Duration::from_millis(at)), "{at}");
        }
        assert_eq!(b.due(), Duration::from_millis(600), "the cap, 500 ms after the first");
        assert!(!b.joins(Duration::from_millis(600)), "an event when the pass is due starts the next burst");
        assert_eq!(b.due(), Duration::from_millis(600));
    }

    fn count_within(passes: &[Duration], from: u64, to: u64) -> usize {
        passes.iter().filter(|p| (ms(&[from])[0]..ms(&[to])[0]).contains(p)).count()
    }

    /// A flap while calm: the down's pass, the up's 3 ms later, and the
    /// echo of the heal's own changes, each 2 ms after its notifications.
    #[test]
    fn a_flap_while_calm_is_healed_2_ms_after_its_up() {
        let times = ms(&[1000, 1003, 1006, 1006]);
        assert_eq!(Pace::<Duration>::passes(&times), ms(&[1002, 1005, 1008]));
    }

    /// A flap every 10 ms for 2 s: a few quick passes, then one per cap
    /// (500 ms), as with DEFAULT alone; calm again after 250 ms of
    /// nothing, and quick.
    #[test]
    fn a_storm_turns_the_pace_busy_until_calm() {
        let mut storm: Vec<u64> = (0..200).map(|k| 1000 + k * 10).collect();
        storm.push(3300);
        let passes = Pace::<Duration>::passes(&ms(&storm));
        let during = count_within(&passes, 1000, 3000);
        assert_eq!(passes[..Pace::<Duration>::BUSY_PASSES], ms(&[1002, 1012, 1022, 1032]), "{passes:?}");
        assert!(during <= Pace::<Duration>::BUSY_PASSES + 5, "{during} passes in the storm: {passes:?}");
        assert_eq!(
            passes.last(),
            Some(&Duration::from_millis(3302)),
            "quick again after the calm: {passes:?}"
        );
        // Without Pace (QUICK always) the storm would get a pass per flap.
        assert_eq!(Coalesce::QUICK.passes(&ms(&storm[..200])).len(), 200);
    }

    /// Passes that are not close together (a flap every 300 ms, each with
    /// its echo) never turn the pace busy.
    #[test]
    fn spaced_flaps_stay_quick() {
        let times: Vec<u64> = (0..10).flat_map(|k| [k * 300, k * 300 + 3, k * 300 + 6]).collect();
        let passes = Pace::<Duration>::passes(&ms(&times));
        assert_eq!(passes.len(), 30);
        assert!(passes.iter().zip(ms(&times)).all(|(p, t)| *p == t + Duration::from_millis(2)), "{passes:?}");
    }

    #[test]
    fn a_burst_runs_on_instants_as_the_watch_loop_uses_it() {
        let t0 = std::time::Instant::now();
        let mut b = Coalesce::DEFAULT.burst(t0);
        assert!(b.joins(t0 + Duration::from_millis(5)));
        assert_eq!(b.due(), t0 + Duration::from_millis(25));
    }

    fn ev(subject: Subject, ifindex: Option<u32>, what: &str) -> Event {
        // An address event's address, from its words.
        let addr =
            what.strip_prefix("address ").and_then(|w| w.split('/').next()).and_then(|ip| ip.parse().ok());
        Event { subject, ifindex, ifname: None, addr, what: what.into() }
    }

    fn named(subject: Subject, ifindex: u32, name: &str) -> Event {
        let what = "up, carrier on".into();
        Event { subject, ifindex: Some(ifindex), ifname: Some(name.into()), addr: None, what }
    }

    /// A pod's veth (any name not a rail's, an index not a rail's) is
    /// dropped with its addresses; a rail's link and address events stay,
    /// also a new link by a rail's name and its address in the same burst,
    /// a rail renamed away (its index), and every rule and route.
    #[test]
    fn only_what_may_concern_a_rail_is_kept() {
        let rails: BTreeSet<u32> = [2, 3].into();
        let is_rail = |n: &str| n == "rail0" || n == "rail1" || n == "rail9";
        let mut heard = Heard::default();
        heard.add(got(vec![
            named(Subject::Link, 40, "veth1a2b3c4d"),
            ev(Subject::Address, Some(40), "address 10.244.1.5/32 added"),
            named(Subject::Link, 2, "rail0"),
            ev(Subject::Address, Some(3), "address 198.51.100.11/24 removed"),
            named(Subject::Link, 3, "renamed"),
            named(Subject::Link, 50, "rail9"),
            ev(Subject::Address, Some(50), "address 198.51.100.19/24 added"),
            ev(Subject::Rule, None, "rule deleted (lookup 100)"),
            ev(Subject::Route, None, "route deleted in table 100"),
        ]));
        let subnet = crate::model::Prefix::new("198.51.100.0".parse().unwrap(), 24);
        let concerns = |ip: IpAddr| subnet.contains(&ip);
        heard.retain_rails(is_rail, &rails, concerns);
        let kept: Vec<Option<u32>> = heard.events.iter().map(|e| e.ifindex).collect();
        assert_eq!(kept, vec![Some(2), Some(3), Some(3), Some(50), Some(50), None, None], "{heard:?}");

        let mut pods = Heard::default();
        pods.add(got(vec![
            named(Subject::Link, 41, "cali0123456789a"),
            ev(Subject::Address, Some(41), "address 10.244.1.6/32 added"),
        ]));
        pods.retain_rails(is_rail, &rails, concerns);
        assert!(pods.is_empty(), "pod churn alone runs no pass: {pods:?}");
        // A rail's address moved to a pod veth after the pass of its
        // removal: its own pass.
        let mut moved = Heard::default();
        moved.add(got(vec![ev(Subject::Address, Some(41), "address 198.51.100.11/24 added")]));
        moved.retain_rails(is_rail, &rails, concerns);
        assert_eq!(moved.events.len(), 1, "{moved:?}");
        let mut lost = Heard { overflow: true, ..Heard::default() };
        lost.retain_rails(is_rail, &rails, concerns);
        assert!(!lost.is_empty(), "an overflow always gets its resync");
    }

    #[test]
    fn what_was_heard_is_classified_by_subject_not_by_words() {
        let rule = ev(Subject::Rule, None, "rule deleted (lookup 100)");
        let route = ev(Subject::Route, None, "route deleted in table 100");
        let link = ev(Subject::Link, Some(7), "down, carrier off");
        let mut heard = Heard::default();
        assert!(heard.is_empty());
        heard.add(got(vec![rule.clone(), route.clone(), rule.clone()]));
        assert!(!heard.is_empty());
        assert!(heard.only_rules_and_routes(), "an agent deleted them");
        assert_eq!(heard.described(|_| None), ["rule deleted (lookup 100)", "route deleted in table 100"]);
        heard.add(got(vec![link]));
        assert!(!heard.only_rules_and_routes(), "a link changed: a flap, not an agent");
        assert_eq!(heard.described(|i| Some(format!("rail{i}")))[2], "rail7: down, carrier off");
        let mut lost = Heard::default();
        lost.add(Received::Overflow);
        assert!(!lost.is_empty() && !lost.only_rules_and_routes());
        // Words alone do not make a rule: an unreadable message never counts as an agent's.
        let odd = ev(Subject::Unreadable, None, "rule-like words");
        assert!(!odd.is_rule_or_route());
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
        let events = parse(&bytes).events;
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0].describe(|_| None), "rail0: up, carrier off");
        assert_eq!(events[1].describe(|_| None), "route deleted in table 101");
        assert_eq!([events[0].subject, events[1].subject], [Subject::Link, Subject::Route]);
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
            let notes = parse(&bytes);
            let events = notes.events;
            assert_eq!(events.len(), 1, "{why}: {events:?}");
            assert!(events[0].what.contains(why), "{events:?}");
            assert_eq!(events[0].subject, Subject::Unreadable);
            if why != "does not parse" {
                assert_eq!(notes.addresses, [AddrNews::Unreadable], "{why}: the kept addresses are lost");
            }
        }
    }

    /// Every address message is news for the addresses watch keeps, a
    /// link-local one too, which is no event (it wakes no pass).
    #[test]
    fn every_address_message_is_news_and_a_link_local_one_no_event() {
        use netlink_packet_route::AddressFamily;
        use netlink_packet_route::address::{AddressAttribute, AddressMessage};
        use rtnetlink::packet_core::NetlinkHeader;
        let address = |index: u32, ip: &str| {
            let mut m = AddressMessage::default();
            m.header.family = AddressFamily::Inet6;
            m.header.index = index;
            m.header.prefix_len = 64;
            m.attributes.push(AddressAttribute::Address(ip.parse().unwrap()));
            m
        };
        let mut bytes = Vec::new();
        for inner in [
            RouteNetlinkMessage::NewAddress(address(7, "fe80::7")),
            RouteNetlinkMessage::DelAddress(address(8, "2001:db8::8")),
        ] {
            let mut msg = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::InnerMessage(inner));
            msg.finalize();
            let mut buf = vec![0; msg.buffer_len()];
            msg.serialize(&mut buf);
            bytes.extend(buf);
        }
        let notes = parse(&bytes);
        assert_eq!(notes.events.len(), 1, "{:?}", notes.events);
        assert_eq!(notes.events[0].describe(|_| None), "if8: address 2001:db8::8/64 removed");
        let news: Vec<(bool, u32, String)> = notes
            .addresses
            .iter()
            .map(|n| match n {
                AddrNews::Now(i, a) => (true, *i, a.addr.to_string()),
                AddrNews::Gone(i, a) => (false, *i, a.addr.to_string()),
                AddrNews::Unreadable => panic!("{n:?}"),
            })
            .collect();
        assert_eq!(news, [(true, 7, "fe80::7/64".into()), (false, 8, "2001:db8::8/64".into())]);
    }
}
