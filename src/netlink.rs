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
use rtnetlink::Handle;
use rtnetlink::packet_core::{Emitable, Parseable};
use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkMessage,
    NetlinkPayload,
};
use rtnetlink::packet_route::address::{AddressAttribute, AddressHeaderFlags, AddressMessage};
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteNextHopFlags, RouteProtocol,
    RouteScope, RouteType,
};
use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::sys::AsyncSocket;

use crate::model::{Address, Family, Link, Live, Op, Prefix, RawBytes, Route, Rule};

/// An error the kernel returned for a request: errno and, when the kernel
/// gave one, its extended-ack message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NlError {
    pub errno: i32,
    pub ext_ack: Option<String>,
}

impl NlError {
    fn local(errno: i32, msg: impl Into<String>) -> NlError {
        NlError { errno, ext_ack: Some(msg.into()) }
    }
    pub fn is(&self, errno: i32) -> bool {
        self.errno == errno
    }
}

impl fmt::Display for NlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let os = std::io::Error::from_raw_os_error(self.errno);
        let text = os.to_string();
        let text = text.split(" (os error").next().unwrap_or(&text);
        write!(f, "{text} (errno {})", self.errno)?;
        if let Some(msg) = &self.ext_ack {
            write!(f, ": {msg}")?;
        }
        Ok(())
    }
}

impl std::error::Error for NlError {}

pub const EPERM: i32 = 1;
pub const ENOENT: i32 = 2;
pub const ESRCH: i32 = 3;
pub const EEXIST: i32 = 17;
pub const ENODEV: i32 = 19;

/// A connection to the kernel's routing subsystem in the current network
/// namespace, with a cache of the links (name <-> index).
pub struct Netlink {
    handle: Handle,
    links: Vec<Link>,
    by_index: HashMap<u32, String>,
    by_name: HashMap<String, u32>,
}

impl Netlink {
    /// Opens a socket with extended acks (kernel error strings), capped acks
    /// and strict dump checking (kernel-side filtering of route dumps), and
    /// reads the link table. Must run inside a tokio runtime.
    pub async fn connect() -> Result<Netlink, NlError> {
        let (mut conn, handle, _) =
            rtnetlink::new_connection().map_err(|e| io_error(e, "cannot open a netlink socket"))?;
        {
            let sock = conn.socket_mut().socket_mut();
            sock.set_ext_ack(true).map_err(|e| io_error(e, "NETLINK_EXT_ACK"))?;
            sock.set_cap_ack(true).map_err(|e| io_error(e, "NETLINK_CAP_ACK"))?;
            sock.set_netlink_get_strict_chk(true).map_err(|e| io_error(e, "NETLINK_GET_STRICT_CHK"))?;
        }
        tokio::spawn(conn);
        let mut nl = Netlink { handle, links: Vec::new(), by_index: HashMap::new(), by_name: HashMap::new() };
        nl.refresh_links().await?;
        Ok(nl)
    }

    /// Re-reads the link table.
    pub async fn refresh_links(&mut self) -> Result<(), NlError> {
        let req = RouteNetlinkMessage::GetLink(LinkMessage::default());
        let links: Vec<Link> = self
            .request(req, NLM_F_DUMP)
            .await?
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(link_from(&l)),
                _ => None,
            })
            .collect();
        self.by_index = links.iter().map(|l| (l.index, l.name.clone())).collect();
        self.by_name = links.iter().map(|l| (l.name.clone(), l.index)).collect();
        self.links = links;
        Ok(())
    }

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    fn ifname(&self, index: u32) -> String {
        self.by_index.get(&index).cloned().unwrap_or_else(|| format!("if{index}"))
    }

    fn ifindex(&self, name: &str) -> Result<u32, NlError> {
        self.by_name.get(name).copied().ok_or_else(|| {
            NlError::local(ENODEV, format!("interface {name:?} does not exist in this network namespace"))
        })
    }

    /// Every address of every interface.
    pub async fn addresses(&self) -> Result<Vec<Address>, NlError> {
        let req = RouteNetlinkMessage::GetAddress(AddressMessage::default());
        let msgs = self.request(req, NLM_F_DUMP).await?;
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewAddress(a) => self.address_from(&a),
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
        let msgs = self.request(RouteNetlinkMessage::GetRule(msg), NLM_F_DUMP).await?;
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewRule(r) => {
                    self.rule_from(&r).map(|item| Live { item, raw: emit(&r) })
                }
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
        let msgs = self.request(RouteNetlinkMessage::GetRoute(msg), NLM_F_DUMP).await?;
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewRoute(r) => {
                    let item = self.route_from(&r)?;
                    // The kernel filters; check again so that a kernel
                    // without strict checking cannot widen the result.
                    let wanted =
                        table.is_none_or(|t| t == item.table) && protocol.is_none_or(|p| p == item.protocol);
                    wanted.then(|| Live { item, raw: emit(&restorable(r.clone())) })
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
                RouteNetlinkMessage::NewRoute(r) => self.route_from(r),
                _ => None,
            })
            .ok_or_else(|| NlError::local(61, "the kernel answered the route lookup with no route"))
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
            Op::AddRule { rule, raw } => (RouteNetlinkMessage::NewRule(self.rule_msg(rule, raw)?), create),
            Op::DelRule { rule, raw } => (RouteNetlinkMessage::DelRule(self.rule_msg(rule, raw)?), 0),
            Op::SetSysctl { .. } => {
                return Err(NlError::local(22, "internal error: a sysctl operation reached netlink"));
            }
        };
        self.request(msg, flags).await.map(|_| ())
    }

    /// Sends one request and collects the answer. Errors carry the kernel's
    /// extended-ack text when there is one.
    async fn request(
        &self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>, NlError> {
        let mut req = NetlinkMessage::from(msg);
        req.header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        let mut handle = self.handle.clone();
        let mut stream =
            handle.request(req).map_err(|e| NlError::local(5, format!("netlink request failed: {e}")))?;
        let mut out = Vec::new();
        while let Some(reply) = stream.next().await {
            match reply.payload {
                NetlinkPayload::InnerMessage(m) => out.push(m),
                NetlinkPayload::Error(e) => {
                    if let Some(code) = e.code {
                        return Err(NlError { errno: -code.get(), ext_ack: ext_ack_text(&e.header) });
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }

    fn address_from(&self, m: &AddressMessage) -> Option<Address> {
        let mut local = None;
        let mut address = None;
        let mut tentative = m.header.flags.contains(AddressHeaderFlags::Tentative);
        for a in &m.attributes {
            match a {
                AddressAttribute::Local(ip) => local = Some(*ip),
                AddressAttribute::Address(ip) => address = Some(*ip),
                AddressAttribute::Flags(f) => {
                    tentative |= f.contains(rtnetlink::packet_route::address::AddressFlags::Tentative)
                }
                _ => {}
            }
        }
        // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer
        // on point-to-point links (IPv6 sends only IFA_ADDRESS).
        let ip = local.or(address)?;
        Some(Address {
            ifname: self.ifname(m.header.index),
            addr: Prefix::new(ip, m.header.prefix_len),
            scope: u8::from(m.header.scope),
            tentative,
            ..Address::default()
        })
    }

    fn route_from(&self, m: &RouteMessage) -> Option<Route> {
        let family = family_of(m.header.address_family)?;
        let mut table = u32::from(m.header.table);
        let mut dst = None;
        let (mut metric, mut oif, mut gateway, mut prefsrc) = (0, None, None, None);
        for a in &m.attributes {
            match a {
                RouteAttribute::Table(t) => table = *t,
                RouteAttribute::Destination(d) => dst = ip_of(d),
                RouteAttribute::Priority(p) => metric = *p,
                RouteAttribute::Oif(i) => oif = Some(self.ifname(*i)),
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

    fn rule_from(&self, m: &RuleMessage) -> Option<Rule> {
        let family = family_of(m.header.family)?;
        let mut rule = Rule {
            family,
            priority: 0,
            src: None,
            dst: None,
            iif: None,
            oif: None,
            fwmark: None,
            fwmask: None,
            tos: m.header.tos,
            table: u32::from(m.header.table),
            action: u8::from(m.header.action),
            protocol: 0,
            extra_selectors: false,
            // The other flags are state the kernel reports (detached
            // interface, unresolved goto, the kernel's own rules).
            invert: m.header.flags.contains(RuleFlags::Invert),
            goto: None,
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
                RuleAttribute::SuppressPrefixLen(v) | RuleAttribute::SuppressIfGroup(v) if *v == u32::MAX => {
                }
                RuleAttribute::L3MDev(false) => {}
                RuleAttribute::TunId(0) => {}
                _ => rule.extra_selectors = true,
            }
        }
        Some(rule)
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
        m.header.flags = RouteFlags::empty();
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

    /// The dumped message when there is one (exact restore or delete),
    /// otherwise one built from the plain rule, action set explicitly.
    fn rule_msg(&self, r: &Rule, raw: &Option<RawBytes>) -> Result<RuleMessage, NlError> {
        if let Some(raw) = raw {
            return RuleMessage::parse(&raw.0[..])
                .map_err(|e| NlError::local(22, format!("corrupt saved rule message: {e}")));
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
}

fn link_from(l: &LinkMessage) -> Link {
    let mut name = String::new();
    let mut mac = None;
    for a in &l.attributes {
        match a {
            LinkAttribute::IfName(n) => name = n.clone(),
            LinkAttribute::Address(bytes) if !bytes.is_empty() => {
                mac = Some(bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"))
            }
            _ => {}
        }
    }
    Link {
        index: l.header.index,
        name,
        admin_up: l.header.flags.contains(LinkFlags::Up),
        lower_up: l.header.flags.contains(LinkFlags::LowerUp),
        mac,
    }
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
        .map_err(|e| NlError::local(22, format!("corrupt saved route message: {e}")))
}

fn io_error(e: std::io::Error, what: &str) -> NlError {
    NlError::local(e.raw_os_error().unwrap_or(5), format!("{what}: {e}"))
}

/// The extended-ack message (NLMSGERR_ATTR_MSG) from an error payload.
/// With NETLINK_CAP_ACK the payload after the error code is the request's
/// 16-byte header followed by netlink attributes.
fn ext_ack_text(payload: &[u8]) -> Option<String> {
    const NLMSG_HDRLEN: usize = 16;
    const NLMSGERR_ATTR_MSG: u16 = 1;
    let mut rest = payload.get(NLMSG_HDRLEN..)?;
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
        let e = NlError { errno: 17, ext_ack: None };
        assert_eq!(e.to_string(), "File exists (errno 17)");
        let e = NlError { errno: 101, ext_ack: Some("Nexthop has invalid gateway".into()) };
        assert_eq!(e.to_string(), "Network is unreachable (errno 101): Nexthop has invalid gateway");
    }

    #[test]
    fn big_tables_go_in_the_attribute() {
        assert_eq!(table_header(100), 100);
        assert_eq!(table_header(1000), 0);
    }
}
