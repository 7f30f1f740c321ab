//! rtnetlink I/O: the only module that speaks netlink.
//!
//! It turns kernel messages into the plain types of `model` (dumps) and
//! plain operations back into kernel messages (changes). Every field is set
//! deliberately: rtnetlink's builders default to protocol static, scope
//! universe, table main and rule action unspec, which silently change what
//! is added or filter dumps to nothing on a strict socket (see
//! shared/netlink-notes.md), so this module builds its messages by hand.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use futures::StreamExt;
use nix::errno::Errno;
use rtnetlink::Handle;
use rtnetlink::packet_core::{Emitable, Parseable};
use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST,
    NetlinkMessage, NetlinkPayload,
};
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteNextHopFlags, RouteProtocol,
    RouteScope, RouteType,
};
use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::sys::AsyncSocket;

use crate::model::{Address, Family, HwAddr, Link, LinkType, Live, Op, Prefix, RawBytes, Route, Rule};

/// An error the kernel returned for a request: errno and, when the kernel
/// gave one, its extended-ack message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NlError {
    pub errno: Errno,
    pub ext_ack: Option<String>,
}

impl NlError {
    fn local(errno: Errno, msg: impl Into<String>) -> NlError {
        NlError { errno, ext_ack: Some(msg.into()) }
    }
    pub fn is(&self, errno: Errno) -> bool {
        self.errno == errno
    }
}

impl fmt::Display for NlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let os = std::io::Error::from_raw_os_error(self.errno as i32);
        let text = os.to_string();
        let text = text.split(" (os error").next().unwrap_or(&text);
        write!(f, "{text} (errno {})", self.errno as i32)?;
        if let Some(msg) = &self.ext_ack {
            write!(f, ": {msg}")?;
        }
        Ok(())
    }
}

impl std::error::Error for NlError {}

/// A connection to the kernel's routing subsystem in the current network
/// namespace, with a cache of the links (name <-> index).
pub struct Netlink {
    handle: Handle,
    links: Vec<Link>,
    by_index: HashMap<u32, String>,
    by_name: HashMap<String, u32>,
    /// Each link's IFLA_BROADCAST (by index), which announcements on
    /// IPoIB are sent to: kept beside `Link` rather than in it, so that
    /// nothing that builds a `Link` changes.
    broadcasts: HashMap<u32, Vec<u8>>,
}

impl Netlink {
    /// Opens a socket with extended acks (kernel error strings), capped acks
    /// and strict dump checking (kernel-side filtering of route dumps), and
    /// reads the link table. Must run inside a tokio runtime.
    pub async fn connect() -> Result<Netlink, NlError> {
        let (mut conn, handle, _) =
            rtnetlink::new_connection().map_err(|e| io_error(e, "cannot open a netlink socket"))?;
        // netlink-proto swallows NLMSG_DONE unless told otherwise, and a
        // dump's error travels in NLMSG_DONE: without this, a failed dump
        // reads as an empty one. (Header flags, NLM_F_DUMP_INTR included,
        // always reach the request stream: it yields whole messages.)
        conn.set_forward_done(true);
        {
            let sock = conn.socket_mut().socket_mut();
            sock.set_ext_ack(true).map_err(|e| io_error(e, "NETLINK_EXT_ACK"))?;
            sock.set_cap_ack(true).map_err(|e| io_error(e, "NETLINK_CAP_ACK"))?;
            sock.set_netlink_get_strict_chk(true).map_err(|e| io_error(e, "NETLINK_GET_STRICT_CHK"))?;
        }
        tokio::spawn(conn);
        let mut nl = Netlink {
            handle,
            links: Vec::new(),
            by_index: HashMap::new(),
            by_name: HashMap::new(),
            broadcasts: HashMap::new(),
        };
        nl.refresh_links().await?;
        Ok(nl)
    }

    /// Re-reads the link table.
    pub async fn refresh_links(&mut self) -> Result<(), NlError> {
        let req = RouteNetlinkMessage::GetLink(LinkMessage::default());
        let msgs: Vec<LinkMessage> = self
            .dump(req)
            .await?
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(l),
                _ => None,
            })
            .collect();
        let links: Vec<Link> = msgs.iter().map(link_from).collect();
        self.broadcasts =
            msgs.iter().filter_map(|l| broadcast_of(l).map(|b| (l.header.index, b.to_vec()))).collect();
        self.by_index = links.iter().map(|l| (l.index, l.name.clone())).collect();
        self.by_name = links.iter().map(|l| (l.name.clone(), l.index)).collect();
        self.links = links;
        Ok(())
    }

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The link-layer broadcast address of link `index` (IFLA_BROADCAST:
    /// ff:ff:ff:ff:ff:ff on Ethernet; on IPoIB 20 bytes that carry the
    /// partition key), as of the last read of the link table.
    pub fn broadcast(&self, index: u32) -> Option<&[u8]> {
        self.broadcasts.get(&index).map(Vec::as_slice)
    }

    fn ifname(&self, index: u32) -> String {
        self.by_index.get(&index).cloned().unwrap_or_else(|| format!("if{index}"))
    }

    fn ifindex(&self, name: &str) -> Result<u32, NlError> {
        self.by_name.get(name).copied().ok_or_else(|| {
            NlError::local(
                Errno::ENODEV,
                format!("interface {name:?} does not exist in this network namespace"),
            )
        })
    }

    /// Every address of every interface.
    pub async fn addresses(&self) -> Result<Vec<Address>, NlError> {
        let req = RouteNetlinkMessage::GetAddress(AddressMessage::default());
        let msgs = self.dump(req).await?;
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewAddress(a) => address_from(&a, |i| self.ifname(i)),
                _ => None,
            })
            .collect())
    }

    /// Every policy rule of both families, with its dumped bytes. Rule dumps
    /// cannot be filtered in the kernel, so callers filter.
    pub async fn rules(&self) -> Result<Vec<Live<Rule>>, NlError> {
        let (v4, v6) = futures::join!(self.rules_of(Family::V4), self.rules_of(Family::V6));
        let mut all = v4?;
        all.extend(v6?);
        Ok(all)
    }

    async fn rules_of(&self, family: Family) -> Result<Vec<Live<Rule>>, NlError> {
        let mut msg = RuleMessage::default();
        msg.header.family = af(family);
        let msgs = self.dump(RouteNetlinkMessage::GetRule(msg)).await?;
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewRule(r) => live_rule(&r),
                _ => None,
            })
            .collect())
    }

    /// Routes of one family, filtered in the kernel by table and/or protocol
    /// (strict dump checking), so that a main table with many routes is not
    /// copied to user space.
    pub async fn routes(
        &self,
        family: Family,
        table: Option<u32>,
        protocol: Option<u8>,
    ) -> Result<Vec<Live<Route>>, NlError> {
        let mut msg = RouteMessage::default();
        msg.header.address_family = af(family);
        msg.header.protocol = RouteProtocol::from(protocol.unwrap_or(0));
        msg.header.scope = RouteScope::Universe;
        msg.header.kind = RouteType::Unspec;
        msg.header.table = RouteHeader::RT_TABLE_UNSPEC;
        if let Some(t) = table {
            msg.attributes.push(RouteAttribute::Table(t));
        }
        let dump = self.dump(RouteNetlinkMessage::GetRoute(msg)).await;
        let msgs = if table.is_some() { empty_if_missing_table(dump)? } else { dump? };
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewRoute(r) => {
                    let live = live_route(&r, |i| self.ifname(i))?;
                    // The kernel filters; check again so that a kernel
                    // without strict checking cannot widen the result.
                    let item = &live.item;
                    let wanted =
                        table.is_none_or(|t| t == item.table) && protocol.is_none_or(|p| p == item.protocol);
                    wanted.then_some(live)
                }
                _ => None,
            })
            .collect())
    }

    /// Asks the kernel which way a packet from `src` to `dst` goes, the way
    /// `ip route get DST from SRC` does: the route it picks, including the
    /// table that matched (RTM_F_LOOKUP_TABLE). The header is otherwise
    /// zero, as a strict socket requires.
    pub async fn route_get(&self, src: IpAddr, dst: IpAddr) -> Result<Route, NlError> {
        let family = Family::of(&dst);
        let mut msg = RouteMessage::default();
        msg.header.address_family = af(family);
        msg.header.destination_prefix_length = family.max_len();
        msg.header.source_prefix_length = family.max_len();
        msg.header.table = RouteHeader::RT_TABLE_UNSPEC;
        msg.header.protocol = RouteProtocol::Unspec;
        msg.header.scope = RouteScope::Universe;
        msg.header.kind = RouteType::Unspec;
        // IPv4 reports the matching table only when asked; IPv6 always
        // reports it and refuses any flag but RTM_F_FIB_MATCH.
        msg.header.flags = match family {
            Family::V4 => RouteFlags::LookupTable,
            Family::V6 => RouteFlags::empty(),
        };
        msg.attributes.push(RouteAttribute::Destination(RouteAddress::from(dst)));
        msg.attributes.push(RouteAttribute::Source(RouteAddress::from(src)));
        let answer = self.request(RouteNetlinkMessage::GetRoute(msg), 0).await?;
        answer
            .iter()
            .find_map(|m| match m {
                RouteNetlinkMessage::NewRoute(r) => route_from(r, |i| self.ifname(i)),
                _ => None,
            })
            .ok_or_else(|| {
                NlError::local(Errno::ENODATA, "the kernel answered the route lookup with no route")
            })
    }

    /// Runs one route or rule operation. Sysctl operations are not netlink
    /// and are refused here.
    pub async fn execute(&self, op: &Op) -> Result<(), NlError> {
        let create = NLM_F_CREATE | NLM_F_EXCL;
        let replace = NLM_F_CREATE | NLM_F_REPLACE;
        let (msg, flags) = match op {
            Op::AddRoute { route } => (RouteNetlinkMessage::NewRoute(self.route_msg(route)?), create),
            Op::ReplaceRoute { new, .. } => (RouteNetlinkMessage::NewRoute(self.route_msg(new)?), replace),
            Op::RestoreRoute { old, .. } => (RouteNetlinkMessage::NewRoute(parse_route(&old.raw)?), replace),
            Op::DelRoute { route, raw } => {
                let msg = match raw {
                    Some(raw) => parse_route(&raw.0)?,
                    None => self.route_msg(route)?,
                };
                (RouteNetlinkMessage::DelRoute(msg), 0)
            }
            Op::AddRule { rule, raw } => (RouteNetlinkMessage::NewRule(rule_msg(rule, raw)?), create),
            Op::DelRule { rule, raw } => (RouteNetlinkMessage::DelRule(rule_msg(rule, raw)?), 0),
            Op::SetSysctl { .. } => {
                return Err(NlError::local(
                    Errno::EINVAL,
                    "internal error: a sysctl operation reached netlink",
                ));
            }
        };
        self.request(msg, flags).await.map(|_| ())
    }

    /// Sends a dump request (NLM_F_DUMP is added) and returns the objects
    /// the kernel sent. Every reader above goes through it. A dump is only
    /// a result when it ends in NLMSG_DONE without an error; one the
    /// kernel marks as interrupted (its objects changed while it was being
    /// sent) is asked again, `DUMP_ATTEMPTS` times at most.
    pub async fn dump(&self, request: RouteNetlinkMessage) -> Result<Vec<RouteNetlinkMessage>, NlError> {
        dump_with_retries(|| self.exchange(request.clone(), NLM_F_DUMP)).await
    }

    /// Sends one request that is not a dump and collects the answer. Errors
    /// carry the kernel's extended-ack text when there is one.
    async fn request(
        &self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>, NlError> {
        let mut out = Vec::new();
        for reply in self.exchange(msg, NLM_F_ACK | flags).await? {
            match reply.payload {
                NetlinkPayload::InnerMessage(m) => out.push(m),
                NetlinkPayload::Error(e) => {
                    if let Some(code) = e.code {
                        return Err(NlError {
                            errno: Errno::from_raw(-code.get()),
                            ext_ack: ext_ack_text(&e.header),
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// Sends one message and returns every reply to it, headers included,
    /// up to the one that ends the exchange (ack, error or NLMSG_DONE).
    async fn exchange(
        &self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<NetlinkMessage<RouteNetlinkMessage>>, NlError> {
        let mut req = NetlinkMessage::from(msg);
        req.header.flags = NLM_F_REQUEST | flags;
        let mut handle = self.handle.clone();
        let stream = handle
            .request(req)
            .map_err(|e| NlError::local(Errno::EIO, format!("netlink request failed: {e}")))?;
        Ok(stream.collect().await)
    }

    /// Builds a route message with every header field set deliberately.
    fn route_msg(&self, r: &Route) -> Result<RouteMessage, NlError> {
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
            m.attributes.push(RouteAttribute::Oif(self.ifindex(dev)?));
        }
        Ok(m)
    }
}

/// How many times a dump is sent when the kernel keeps marking it as
/// interrupted (NLM_F_DUMP_INTR) before giving up with an error.
const DUMP_ATTEMPTS: usize = 4;

/// How a dump ended, read from every message the kernel sent for it.
#[derive(Debug, PartialEq)]
enum DumpOutcome {
    /// NLMSG_DONE without an error, and no message marked as interrupted.
    Complete(Vec<RouteNetlinkMessage>),
    /// Some message carried NLM_F_DUMP_INTR: the objects changed while the
    /// kernel was sending them, so the result may miss or repeat some.
    Interrupted,
    /// An error in NLMSG_DONE or NLMSG_ERROR, or a dump that did not end.
    Failed(NlError),
}

/// Classifies the replies to one dump request. An error wins over an
/// interruption: sending the same request again would not change it.
fn classify_dump(replies: impl IntoIterator<Item = NetlinkMessage<RouteNetlinkMessage>>) -> DumpOutcome {
    let mut out = Vec::new();
    let mut interrupted = false;
    for reply in replies {
        interrupted |= reply.header.flags & NLM_F_DUMP_INTR != 0;
        match reply.payload {
            NetlinkPayload::InnerMessage(m) => out.push(m),
            NetlinkPayload::Done(done) => {
                // The kernel puts the dump callback's result there: 0, or
                // a negative errno followed by the ext-ack attributes.
                if done.code != 0 {
                    return DumpOutcome::Failed(NlError {
                        errno: Errno::from_raw(done.code.saturating_abs()),
                        ext_ack: ext_ack_attr(&done.extended_ack),
                    });
                }
                return if interrupted { DumpOutcome::Interrupted } else { DumpOutcome::Complete(out) };
            }
            NetlinkPayload::Error(e) => {
                // A dump refused before it started (EBUSY, EPERM, ...).
                if let Some(code) = e.code {
                    return DumpOutcome::Failed(NlError {
                        errno: Errno::from_raw(-code.get()),
                        ext_ack: ext_ack_text(&e.header),
                    });
                }
            }
            NetlinkPayload::Overrun(_) => {
                return DumpOutcome::Failed(NlError::local(Errno::ENOBUFS, "netlink overrun during a dump"));
            }
            _ => {}
        }
    }
    DumpOutcome::Failed(NlError::local(Errno::EIO, "the dump ended without NLMSG_DONE"))
}

/// Runs `send` (one dump request and its replies) until the dump is not
/// interrupted, `DUMP_ATTEMPTS` times at most.
async fn dump_with_retries<F, Fut>(mut send: F) -> Result<Vec<RouteNetlinkMessage>, NlError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Vec<NetlinkMessage<RouteNetlinkMessage>>, NlError>>,
{
    for _ in 0..DUMP_ATTEMPTS {
        match classify_dump(send().await?) {
            DumpOutcome::Complete(objects) => return Ok(objects),
            DumpOutcome::Failed(e) => return Err(e),
            DumpOutcome::Interrupted => {}
        }
    }
    Err(NlError::local(
        Errno::EINTR,
        format!("the dump was interrupted by concurrent changes {DUMP_ATTEMPTS} times in a row"),
    ))
}

/// The error a route dump filtered on a table gets when that table does
/// not exist: the kernel creates a table with its first route, and
/// inet_dump_fib / inet6_dump_fib answer ENOENT "FIB table does not exist"
/// (in NLMSG_DONE) for one that was never created. For roce-route that is
/// a table without routes.
const FIB_TABLE_DOES_NOT_EXIST: Errno = Errno::ENOENT;

/// The result of a table-filtered route dump, with the missing table read
/// as an empty one. Only for those dumps: anywhere else ENOENT is an error.
fn empty_if_missing_table(
    dump: Result<Vec<RouteNetlinkMessage>, NlError>,
) -> Result<Vec<RouteNetlinkMessage>, NlError> {
    match dump {
        Err(e) if e.is(FIB_TABLE_DOES_NOT_EXIST) => Ok(Vec::new()),
        other => other,
    }
}

/// The dumped message when there is one (exact restore or delete),
/// otherwise one built from the plain rule, action set explicitly. Either
/// way it carries FRA_PRIORITY (see `with_priority`).
fn rule_msg(r: &Rule, raw: &Option<RawBytes>) -> Result<RuleMessage, NlError> {
    if let Some(raw) = raw {
        return RuleMessage::parse(&raw.0[..])
            .map(with_priority)
            .map_err(|e| NlError::local(Errno::EINVAL, format!("corrupt saved rule message: {e}")));
    }
    let mut m = RuleMessage::default();
    m.header.family = af(r.family);
    m.header.tos = r.tos;
    m.header.table = table_header(r.table);
    m.header.action = RuleAction::from(r.action);
    m.header.flags = if r.invert { RuleFlags::Invert } else { RuleFlags::empty() };
    m.attributes.push(RuleAttribute::Priority(r.priority));
    if let Some(src) = r.src {
        m.header.src_len = src.len;
        m.attributes.push(RuleAttribute::Source(src.addr));
    }
    if let Some(dst) = r.dst {
        m.header.dst_len = dst.len;
        m.attributes.push(RuleAttribute::Destination(dst.addr));
    }
    if let Some(n) = &r.iif {
        m.attributes.push(RuleAttribute::Iifname(n.clone()));
    }
    if let Some(n) = &r.oif {
        m.attributes.push(RuleAttribute::Oifname(n.clone()));
    }
    if let Some(v) = r.fwmark {
        m.attributes.push(RuleAttribute::FwMark(v));
    }
    if let Some(v) = r.fwmask {
        m.attributes.push(RuleAttribute::FwMask(v));
    }
    if r.table != 0 {
        m.attributes.push(RuleAttribute::Table(r.table));
    }
    if r.protocol != 0 {
        m.attributes.push(RuleAttribute::Protocol(RouteProtocol::from(r.protocol)));
    }
    if let Some(target) = r.goto {
        m.attributes.push(RuleAttribute::Goto(target));
    }
    Ok(m)
}

/// A rule message that says its priority. The kernel leaves FRA_PRIORITY
/// out of the dump of a rule at priority 0, and treats a request without
/// it as "any priority": an add gets an automatic priority (just below
/// the first rule after priority 0, e.g. 32765), a delete removes the
/// first rule with those selectors whatever its priority. So a dumped
/// rule sent back gets Priority(0) when it has no priority.
fn with_priority(mut m: RuleMessage) -> RuleMessage {
    if !m.attributes.iter().any(|a| matches!(a, RuleAttribute::Priority(_))) {
        m.attributes.push(RuleAttribute::Priority(0));
    }
    m
}

/// A route from its dump message; `ifname` names an interface index.
fn route_from(m: &RouteMessage, ifname: impl Fn(u32) -> String) -> Option<Route> {
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

/// A rule from its dump message.
fn rule_from(m: &RuleMessage) -> Option<Rule> {
    let family = family_of(m.header.family)?;
    // The attributes below fill in priority, selectors, table, protocol.
    let mut rule = Rule {
        tos: m.header.tos,
        action: u8::from(m.header.action),
        // The other flags are state the kernel reports (detached
        // interface, unresolved goto, the kernel's own rules).
        invert: m.header.flags.contains(RuleFlags::Invert),
        ..Rule::lookup(family, 0, u32::from(m.header.table), 0)
    };
    for a in &m.attributes {
        match a {
            RuleAttribute::Priority(p) => rule.priority = *p,
            RuleAttribute::Source(ip) => rule.src = Some(Prefix::new(*ip, m.header.src_len)),
            RuleAttribute::Destination(ip) => rule.dst = Some(Prefix::new(*ip, m.header.dst_len)),
            RuleAttribute::Iifname(n) => rule.iif = Some(n.clone()),
            RuleAttribute::Oifname(n) => rule.oif = Some(n.clone()),
            RuleAttribute::FwMark(v) => rule.fwmark = Some(*v),
            RuleAttribute::FwMask(v) => rule.fwmask = Some(*v),
            RuleAttribute::Table(t) => rule.table = *t,
            RuleAttribute::Protocol(p) => rule.protocol = u8::from(*p),
            RuleAttribute::Goto(target) => rule.goto = Some(*target),
            // Dumps carry "no suppression" markers on every rule.
            RuleAttribute::SuppressPrefixLen(v) | RuleAttribute::SuppressIfGroup(v) if *v == u32::MAX => {}
            RuleAttribute::L3MDev(false) => {}
            RuleAttribute::TunId(0) => {}
            _ => rule.extra_selectors = true,
        }
    }
    Some(rule)
}

/// A dumped route with the bytes to put it back: the dump without the
/// state flags the kernel refuses on input (`restorable`).
fn live_route(m: &RouteMessage, ifname: impl Fn(u32) -> String) -> Option<Live<Route>> {
    let item = route_from(m, ifname)?;
    Some(Live { item, raw: emit(&restorable(m.clone())) })
}

/// A dumped rule with its bytes, as dumped (`rule_msg` adds the priority
/// the dump leaves out when they are sent back).
fn live_rule(m: &RuleMessage) -> Option<Live<Rule>> {
    Some(Live { item: rule_from(m)?, raw: emit(m) })
}

/// IFA_F_TEMPORARY (an IPv6 privacy address) is the bit IPv4 calls
/// IFA_F_SECONDARY (0x01): it means "temporary" only for IPv6.
const IFA_F_TEMPORARY: AddressFlags = AddressFlags::Secondary;

/// An address from its dump message; `ifname` names an interface index.
fn address_from(m: &AddressMessage, ifname: impl Fn(u32) -> String) -> Option<Address> {
    let mut local = None;
    let mut address = None;
    // The header has the low 8 flag bits; IFA_FLAGS, when present, all 32.
    let mut flags = AddressFlags::from_bits_retain(u32::from(m.header.flags.bits()));
    for a in &m.attributes {
        match a {
            AddressAttribute::Local(ip) => local = Some(*ip),
            AddressAttribute::Address(ip) => address = Some(*ip),
            AddressAttribute::Flags(f) => flags |= *f,
            _ => {}
        }
    }
    // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer
    // on point-to-point links, and equals IFA_LOCAL otherwise (IPv6 sends
    // only IFA_ADDRESS unless there is a peer).
    let ip = local.or(address)?;
    let peer = address.filter(|a| local.is_some_and(|l| l != *a));
    let v6 = m.header.family == AddressFamily::Inet6;
    Some(Address {
        ifname: ifname(m.header.index),
        addr: Prefix::new(ip, m.header.prefix_len),
        peer,
        scope: u8::from(m.header.scope),
        tentative: flags.contains(AddressFlags::Tentative),
        deprecated: flags.contains(AddressFlags::Deprecated),
        temporary: v6 && flags.contains(IFA_F_TEMPORARY),
        dad_failed: flags.contains(AddressFlags::Dadfailed),
    })
}

fn link_from(l: &LinkMessage) -> Link {
    let mut name = String::new();
    let mut mac = None;
    for a in &l.attributes {
        match a {
            LinkAttribute::IfName(n) => name = n.clone(),
            LinkAttribute::Address(bytes) if !bytes.is_empty() => mac = Some(HwAddr::new(bytes)),
            _ => {}
        }
    }
    Link {
        index: l.header.index,
        name,
        admin_up: l.header.flags.contains(LinkFlags::Up),
        lower_up: l.header.flags.contains(LinkFlags::LowerUp),
        mac,
        link_type: LinkType::from(u16::from(l.header.link_layer_type)),
    }
}

/// A link's IFLA_BROADCAST, when it has a non-empty one.
fn broadcast_of(l: &LinkMessage) -> Option<&[u8]> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::Broadcast(bytes) if !bytes.is_empty() => Some(bytes.as_slice()),
        _ => None,
    })
}

/// Tables above 255 travel in RTA_TABLE / FRA_TABLE only; the header then
/// says "unspec", as iproute2 does.
fn table_header(table: u32) -> u8 {
    u8::try_from(table).unwrap_or(RouteHeader::RT_TABLE_UNSPEC)
}

fn af(f: Family) -> AddressFamily {
    match f {
        Family::V4 => AddressFamily::Inet,
        Family::V6 => AddressFamily::Inet6,
    }
}

fn family_of(a: AddressFamily) -> Option<Family> {
    match a {
        AddressFamily::Inet => Some(Family::V4),
        AddressFamily::Inet6 => Some(Family::V6),
        _ => None,
    }
}

fn ip_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

fn emit<T: Emitable>(m: &T) -> Vec<u8> {
    let mut buf = vec![0u8; m.buffer_len()];
    m.emit(&mut buf);
    buf
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

fn parse_route(raw: &[u8]) -> Result<RouteMessage, NlError> {
    RouteMessage::parse(raw)
        .map(restorable)
        .map_err(|e| NlError::local(Errno::EINVAL, format!("corrupt saved route message: {e}")))
}

fn io_error(e: std::io::Error, what: &str) -> NlError {
    NlError::local(e.raw_os_error().map_or(Errno::EIO, Errno::from_raw), format!("{what}: {e}"))
}

/// The extended-ack message (NLMSGERR_ATTR_MSG) from an error payload.
/// With NETLINK_CAP_ACK the payload after the error code is the request's
/// 16-byte header followed by netlink attributes.
fn ext_ack_text(payload: &[u8]) -> Option<String> {
    const NLMSG_HDRLEN: usize = 16;
    ext_ack_attr(payload.get(NLMSG_HDRLEN..)?)
}

/// The NLMSGERR_ATTR_MSG text among ext-ack attributes (what follows the
/// error code of NLMSG_DONE, or the echoed header of NLMSG_ERROR).
fn ext_ack_attr(attributes: &[u8]) -> Option<String> {
    const NLMSGERR_ATTR_MSG: u16 = 1;
    let mut rest = attributes;
    while rest.len() >= 4 {
        let len = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
        let kind = u16::from_ne_bytes([rest[2], rest[3]]) & 0x3fff;
        if len < 4 || len > rest.len() {
            return None;
        }
        if kind == NLMSGERR_ATTR_MSG {
            let text = &rest[4..len];
            let text = text.split(|b| *b == 0).next().unwrap_or(text);
            return Some(String::from_utf8_lossy(text).into_owned()).filter(|s| !s.is_empty());
        }
        rest = &rest[((len + 3) & !3).min(rest.len())..];
    }
    None
}

#[cfg(test)]
mod tests {
    use rtnetlink::packet_route::address::AddressHeaderFlags;

    use super::*;

    #[test]
    fn ext_ack_is_found_after_the_echoed_header() {
        let mut payload = vec![0u8; 16];
        let msg = b"Nexthop has invalid gateway\0";
        let len = (4 + msg.len()) as u16;
        payload.extend_from_slice(&len.to_ne_bytes());
        payload.extend_from_slice(&1u16.to_ne_bytes());
        payload.extend_from_slice(msg);
        assert_eq!(ext_ack_text(&payload).as_deref(), Some("Nexthop has invalid gateway"));
        assert_eq!(ext_ack_text(&payload[..16]), None);
        assert_eq!(ext_ack_text(&payload[..20]), None, "truncated attribute");
    }

    #[test]
    fn errors_read_like_the_kernel() {
        let e = NlError { errno: Errno::EEXIST, ext_ack: None };
        assert_eq!(e.to_string(), "File exists (errno 17)");
        let e = NlError { errno: Errno::ENETUNREACH, ext_ack: Some("Nexthop has invalid gateway".into()) };
        assert_eq!(e.to_string(), "Network is unreachable (errno 101): Nexthop has invalid gateway");
    }

    fn priorities(m: &RuleMessage) -> Vec<u32> {
        m.attributes
            .iter()
            .filter_map(|a| match a {
                RuleAttribute::Priority(p) => Some(*p),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_rule_sent_back_from_its_dump_always_says_its_priority() {
        // A dumped rule at priority 0 has no FRA_PRIORITY.
        let rule = Rule::source(0, "198.51.100.10".parse().unwrap(), 100, 0);
        let mut dumped = rule_msg(&rule, &None).unwrap();
        dumped.attributes.retain(|a| !matches!(a, RuleAttribute::Priority(_)));
        let raw = Some(RawBytes(emit(&dumped)));
        assert_eq!(priorities(&rule_msg(&rule, &raw).unwrap()), [0]);
        // A priority that is there is kept, and not doubled.
        let rule = Rule::source(1000, "198.51.100.10".parse().unwrap(), 100, 0);
        let raw = Some(RawBytes(emit(&rule_msg(&rule, &None).unwrap())));
        assert_eq!(priorities(&rule_msg(&rule, &raw).unwrap()), [1000]);
    }

    #[test]
    fn a_rule_built_from_its_fields_always_says_its_priority() {
        for priority in [0, 1, 32765] {
            let rule = Rule::source(priority, "2001:db8::10".parse().unwrap(), 100, 0);
            assert_eq!(priorities(&rule_msg(&rule, &None).unwrap()), [priority]);
        }
    }

    fn addr_msg(family: AddressFamily, attrs: Vec<AddressAttribute>) -> AddressMessage {
        let mut m = AddressMessage::default();
        m.header.family = family;
        m.header.index = 7;
        m.header.prefix_len = 31;
        m.attributes = attrs;
        m
    }

    fn name(i: u32) -> String {
        format!("rail{i}")
    }

    #[test]
    fn a_point_to_point_address_has_its_peer() {
        let (local, peer) = ("198.51.100.1".parse().unwrap(), "198.51.100.0".parse().unwrap());
        let m = addr_msg(
            AddressFamily::Inet,
            vec![AddressAttribute::Address(peer), AddressAttribute::Local(local)],
        );
        let a = address_from(&m, name).unwrap();
        assert_eq!((a.ifname.as_str(), a.addr, a.peer), ("rail7", Prefix::new(local, 31), Some(peer)));
        // IFA_ADDRESS equal to IFA_LOCAL, or alone (IPv6): no peer.
        let m = addr_msg(
            AddressFamily::Inet,
            vec![AddressAttribute::Address(local), AddressAttribute::Local(local)],
        );
        assert_eq!(address_from(&m, name).unwrap().peer, None);
        let v6 = "2001:db8::10".parse().unwrap();
        let m = addr_msg(AddressFamily::Inet6, vec![AddressAttribute::Address(v6)]);
        let a = address_from(&m, name).unwrap();
        assert_eq!((a.addr.addr, a.peer), (v6, None));
    }

    #[test]
    fn the_secondary_bit_is_temporary_only_for_ipv6() {
        let v4 = "198.51.100.1".parse().unwrap();
        let v6 = "2001:db8::10".parse().unwrap();
        let secondary = vec![AddressAttribute::Local(v4), AddressAttribute::Flags(AddressFlags::Secondary)];
        assert!(!address_from(&addr_msg(AddressFamily::Inet, secondary), name).unwrap().temporary);
        let temporary = vec![AddressAttribute::Address(v6), AddressAttribute::Flags(IFA_F_TEMPORARY)];
        assert!(address_from(&addr_msg(AddressFamily::Inet6, temporary), name).unwrap().temporary);
    }

    #[test]
    fn address_flags_come_from_the_header_or_ifa_flags() {
        let v6 = "2001:db8::10".parse().unwrap();
        let mut m = addr_msg(AddressFamily::Inet6, vec![AddressAttribute::Address(v6)]);
        m.header.flags = AddressHeaderFlags::Deprecated | AddressHeaderFlags::Tentative;
        let a = address_from(&m, name).unwrap();
        assert!(a.deprecated && a.tentative && !a.dad_failed && !a.temporary, "{a:?}");
        let flags = AddressFlags::Dadfailed | AddressFlags::Tentative | AddressFlags::Managetempaddr;
        let m = addr_msg(
            AddressFamily::Inet6,
            vec![AddressAttribute::Address(v6), AddressAttribute::Flags(flags)],
        );
        let a = address_from(&m, name).unwrap();
        assert!(a.dad_failed && a.tentative && !a.deprecated && !a.temporary, "{a:?}");
    }

    #[test]
    fn big_tables_go_in_the_attribute() {
        assert_eq!(table_header(100), 100);
        assert_eq!(table_header(1000), 0);
    }
}

#[cfg(test)]
mod dump_tests {
    use std::num::NonZeroI32;

    use rtnetlink::packet_core::{DoneMessage, ErrorMessage, NLM_F_MULTIPART, NetlinkHeader};

    use super::*;

    type Reply = NetlinkMessage<RouteNetlinkMessage>;

    fn with_flags(payload: NetlinkPayload<RouteNetlinkMessage>, flags: u16) -> Reply {
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        NetlinkMessage::new(header, payload)
    }

    /// One route of a dump (NLM_F_MULTI), with extra header flags.
    fn route(extra_flags: u16) -> Reply {
        let payload = NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(RouteMessage::default()));
        with_flags(payload, NLM_F_MULTIPART | extra_flags)
    }

    /// NLMSG_DONE carrying `code` and, when given, an ext-ack message.
    fn done(code: i32, ext_ack: Option<&str>, extra_flags: u16) -> Reply {
        let mut done = DoneMessage::default();
        done.code = code;
        if let Some(text) = ext_ack {
            done.extended_ack = nla_msg(text);
        }
        with_flags(NetlinkPayload::Done(done), NLM_F_MULTIPART | extra_flags)
    }

    /// An NLMSGERR_ATTR_MSG attribute, as the kernel writes it.
    fn nla_msg(text: &str) -> Vec<u8> {
        let mut value = text.as_bytes().to_vec();
        value.push(0);
        let mut nla = ((4 + value.len()) as u16).to_ne_bytes().to_vec();
        nla.extend_from_slice(&1u16.to_ne_bytes());
        nla.extend_from_slice(&value);
        nla.resize((nla.len() + 3) & !3, 0);
        nla
    }

    fn nlmsg_error(errno: Errno) -> Reply {
        let mut e = ErrorMessage::default();
        e.code = NonZeroI32::new(-(errno as i32));
        e.header = vec![0; 16];
        with_flags(NetlinkPayload::Error(e), 0)
    }

    fn failed(outcome: DumpOutcome) -> NlError {
        match outcome {
            DumpOutcome::Failed(e) => e,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn a_dump_ending_in_a_clean_done_is_complete() {
        let outcome = classify_dump([route(0), route(0), done(0, None, 0)]);
        assert!(matches!(&outcome, DumpOutcome::Complete(v) if v.len() == 2), "{outcome:?}");
        let outcome = classify_dump([done(0, None, 0)]);
        assert_eq!(outcome, DumpOutcome::Complete(Vec::new()), "an empty dump is a result");
    }

    #[test]
    fn an_error_in_done_is_an_error_with_its_ext_ack() {
        let text = "Invalid values in header for FIB dump request";
        let e = failed(classify_dump([done(-(Errno::EINVAL as i32), Some(text), 0)]));
        assert_eq!(e, NlError { errno: Errno::EINVAL, ext_ack: Some(text.into()) });
        // Objects before the error do not make it a result.
        let e = failed(classify_dump([route(0), done(-(Errno::EMSGSIZE as i32), None, 0)]));
        assert_eq!(e.errno, Errno::EMSGSIZE);
        assert_eq!(e.ext_ack, None);
    }

    #[test]
    fn a_dump_refused_with_nlmsg_error_is_an_error() {
        let e = failed(classify_dump([nlmsg_error(Errno::EBUSY)]));
        assert_eq!(e.errno, Errno::EBUSY);
    }

    #[test]
    fn a_dump_without_done_is_an_error() {
        // What netlink-proto hands over when it swallows NLMSG_DONE, or
        // when the connection dies half-way.
        assert_eq!(failed(classify_dump([route(0)])).errno, Errno::EIO);
        assert_eq!(failed(classify_dump([])).errno, Errno::EIO);
    }

    #[test]
    fn dump_intr_on_any_message_makes_the_dump_interrupted() {
        for replies in [
            vec![route(NLM_F_DUMP_INTR), route(0), done(0, None, 0)],
            vec![route(0), route(NLM_F_DUMP_INTR), done(0, None, 0)],
            vec![route(0), done(0, None, NLM_F_DUMP_INTR)],
            vec![done(0, None, NLM_F_DUMP_INTR)],
        ] {
            assert_eq!(classify_dump(replies), DumpOutcome::Interrupted);
        }
        // An error is an error even in an interrupted dump.
        let e = failed(classify_dump([route(NLM_F_DUMP_INTR), done(-(Errno::EINVAL as i32), None, 0)]));
        assert_eq!(e.errno, Errno::EINVAL);
    }

    #[test]
    fn only_a_missing_table_reads_as_empty() {
        let text = "ipv4: FIB table does not exist";
        let missing = failed(classify_dump([done(-(Errno::ENOENT as i32), Some(text), 0)]));
        assert_eq!(missing.errno, FIB_TABLE_DOES_NOT_EXIST);
        assert_eq!(empty_if_missing_table(Err(missing)), Ok(Vec::new()));
        let other = NlError { errno: Errno::EINVAL, ext_ack: None };
        assert_eq!(empty_if_missing_table(Err(other.clone())), Err(other));
        let routes = vec![RouteNetlinkMessage::NewRoute(RouteMessage::default())];
        assert_eq!(empty_if_missing_table(Ok(routes.clone())), Ok(routes));
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    }

    #[test]
    fn an_interrupted_dump_is_asked_again() {
        let mut calls = 0;
        let result = block_on(dump_with_retries(|| {
            calls += 1;
            let flags = if calls < DUMP_ATTEMPTS { NLM_F_DUMP_INTR } else { 0 };
            std::future::ready(Ok(vec![route(flags), done(0, None, 0)]))
        }));
        assert_eq!(result.map(|v| v.len()), Ok(1));
        assert_eq!(calls, DUMP_ATTEMPTS, "the last allowed attempt counts");
    }

    #[test]
    fn a_dump_interrupted_every_time_is_an_error() {
        let mut calls = 0;
        let result = block_on(dump_with_retries(|| {
            calls += 1;
            std::future::ready(Ok(vec![route(NLM_F_DUMP_INTR), done(0, None, 0)]))
        }));
        let e = result.unwrap_err();
        assert_eq!(e.errno, Errno::EINTR);
        assert!(e.to_string().contains("interrupted"), "{e}");
        assert_eq!(calls, DUMP_ATTEMPTS);
    }

    #[test]
    fn errors_are_not_retried() {
        let mut calls = 0;
        let result = block_on(dump_with_retries(|| {
            calls += 1;
            std::future::ready(Ok(vec![done(-(Errno::EINVAL as i32), None, 0)]))
        }));
        assert_eq!(result.unwrap_err().errno, Errno::EINVAL);
        assert_eq!(calls, 1);
    }
}

/// Decoding real kernel messages, recorded once by `record_decode_fixtures`
/// (tests/netlink_kernel.rs) into tests/fixtures/netlink/.
#[cfg(test)]
mod fixture_tests {
    use super::*;
    use crate::model::{rtn, scope};

    /// What a dump puts in the 8-bit header table field for a table above
    /// 255 (RT_TABLE_COMPAT).
    const RT_TABLE_COMPAT: u8 = 252;

    /// A fixture file: the interface names and the named message payloads.
    struct Fixture {
        links: HashMap<u32, String>,
        messages: HashMap<String, Vec<u8>>,
    }

    impl Fixture {
        fn read(text: &str) -> Fixture {
            let mut f = Fixture { links: HashMap::new(), messages: HashMap::new() };
            for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
                let words: Vec<&str> = line.split_whitespace().collect();
                match words[..] {
                    ["link", index, name] => {
                        f.links.insert(index.parse().unwrap(), name.to_string());
                    }
                    [name, hex] => {
                        let bytes = (0..hex.len())
                            .step_by(2)
                            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                            .collect();
                        f.messages.insert(name.to_string(), bytes);
                    }
                    _ => panic!("bad fixture line {line:?}"),
                }
            }
            f
        }
        fn raw(&self, name: &str) -> &[u8] {
            self.messages.get(name).unwrap_or_else(|| panic!("no fixture {name}"))
        }
        fn ifname(&self) -> impl Fn(u32) -> String + '_ {
            |i| self.links.get(&i).cloned().unwrap_or_else(|| panic!("unknown ifindex {i}"))
        }
        fn route(&self, name: &str) -> (RouteMessage, Live<Route>) {
            let m = RouteMessage::parse(self.raw(name)).unwrap();
            let live = live_route(&m, self.ifname()).unwrap();
            (m, live)
        }
        fn rule(&self, name: &str) -> (RuleMessage, Live<Rule>) {
            let m = RuleMessage::parse(self.raw(name)).unwrap();
            let live = live_rule(&m).unwrap();
            (m, live)
        }
    }

    fn routes() -> Fixture {
        Fixture::read(include_str!("../tests/fixtures/netlink/routes.hex"))
    }

    fn rules() -> Fixture {
        Fixture::read(include_str!("../tests/fixtures/netlink/rules.hex"))
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn prefix(s: &str) -> Prefix {
        crate::model::prefix(s)
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

    fn rule(priority: u32, table: u32) -> Rule {
        Rule::lookup(Family::V4, priority, table, 0)
    }

    #[test]
    fn rules_decode_field_by_field() {
        let f = rules();
        let cases = [
            // 0: from all lookup local (the kernel's, proto kernel)
            ("v4_local", Rule { protocol: 2, ..rule(0, 255) }),
            // priority 0 from 198.51.100.10 lookup 100
            ("v4_priority_0", Rule { src: Some(prefix("198.51.100.10/32")), ..rule(0, 100) }),
            // priority 1000 from 198.51.100.10/32 lookup 100 proto 234
            ("v4_from", Rule { src: Some(prefix("198.51.100.10/32")), protocol: 234, ..rule(1000, 100) }),
            // -6 priority 1000 from 2001:db8:1::10 to 2001:db8:2::/64 lookup 100 proto 234
            (
                "v6_from_to",
                Rule {
                    family: Family::V6,
                    src: Some(prefix("2001:db8:1::10/128")),
                    dst: Some(prefix("2001:db8:2::/64")),
                    protocol: 234,
                    ..rule(1000, 100)
                },
            ),
            // priority 1001 iif rr0 fwmark 0x10/0xff lookup 1000
            (
                "v4_iif_fwmark_table_1000",
                Rule { iif: Some("rr0".into()), fwmark: Some(0x10), fwmask: Some(0xff), ..rule(1001, 1000) },
            ),
            // priority 1002 ipproto tcp lookup 100: a selector not modelled
            ("v4_ipproto", Rule { extra_selectors: true, ..rule(1002, 100) }),
        ];
        for (name, expected) in cases {
            let (_, live) = f.rule(name);
            assert_eq!(live.item, expected, "{name}");
            assert_eq!(live.raw, f.raw(name), "{name}: a rule is kept as dumped");
        }
        let (m, _) = f.rule("v4_iif_fwmark_table_1000");
        assert_eq!(m.header.table, RT_TABLE_COMPAT, "table 1000 in FRA_TABLE only");
    }

    #[test]
    fn a_dumped_rule_at_priority_0_goes_back_with_priority_0() {
        let f = rules();
        for name in ["v4_priority_0", "v4_local"] {
            let (m, live) = f.rule(name);
            let dumped: Vec<_> =
                m.attributes.iter().filter(|a| matches!(a, RuleAttribute::Priority(_))).collect();
            assert!(dumped.is_empty(), "{name}: the kernel leaves priority 0 out of the dump");
            let sent = rule_msg(&live.item, &Some(RawBytes(live.raw.clone()))).unwrap();
            let priorities: Vec<_> =
                sent.attributes.iter().filter(|a| matches!(a, RuleAttribute::Priority(_))).collect();
            assert_eq!(priorities, [&RuleAttribute::Priority(0)], "{name}");
        }
    }
}
