//! Policy rules: `model::Rule` to a rule message (action and priority
//! always said), and dumped messages back to a `Rule` plus its bytes.

use std::net::IpAddr;

use nix::errno::Errno;
use rtnetlink::packet_core::Parseable;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::route::RouteProtocol;
use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleMessage};

#[cfg(test)]
use super::emit;
use super::route::table_header;
use super::{NlError, af, family_of};
use crate::model::{Live, Prefix, RawBytes, Rule};

/// The dumped message when there is one (exact restore or delete),
/// otherwise one built from the plain rule, action set explicitly. Either
/// way it carries FRA_PRIORITY (see `with_priority`).
pub(super) fn rule_msg(r: &Rule, raw: &Option<RawBytes>) -> Result<RuleMessage, NlError> {
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

/// A rule from its dump message, parsed whole (the tests' oracle).
#[cfg(test)]
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

/// A dumped rule with its bytes, as dumped (`rule_msg` adds the priority
/// the dump leaves out when they are sent back), through
/// netlink-packet-route's whole parse: the oracle of `rule_row`'s tests.
#[cfg(test)]
pub(super) fn live_rule(m: &RuleMessage) -> Option<Live<Rule>> {
    Some(Live { item: rule_from(m)?, raw: emit(m) })
}

/// fib_rule_hdr: family, dst_len, src_len, tos, table, two reserved
/// bytes, action, flags (u32).
const FIB_RULE_HDR_LEN: usize = 12;
/// FIB_RULE_INVERT and the FRA_* attributes roce-route reads
/// (linux/fib_rules.h; not in the libc crate).
const FIB_RULE_INVERT: u32 = 2;
const FRA_DST: u16 = 1;
const FRA_SRC: u16 = 2;
const FRA_IIFNAME: u16 = 3;
const FRA_GOTO: u16 = 4;
const FRA_PRIORITY: u16 = 6;
const FRA_FWMARK: u16 = 10;
const FRA_TUN_ID: u16 = 12;
const FRA_SUPPRESS_IFGROUP: u16 = 13;
const FRA_SUPPRESS_PREFIXLEN: u16 = 14;
const FRA_TABLE: u16 = 15;
const FRA_FWMASK: u16 = 16;
const FRA_OIFNAME: u16 = 17;
const FRA_L3MDEV: u16 = 19;
const FRA_PROTOCOL: u16 = 21;

/// A dumped rule read from its message's bytes, which it keeps: what
/// `rule_from` takes of netlink-packet-route's whole parse (`live_rule`).
/// Parsing each rule into its types and writing it out again cost ~3k
/// instructions a rule. None for a family other than IPv4 and IPv6; an
/// attribute outside its message, or a value roce-route reads of the
/// wrong size (or a name not UTF-8), fails the dump. A selector it does
/// not model is one, whatever its size (`extra_selectors`).
pub(super) fn rule_row(payload: &[u8]) -> Result<Option<Live<Rule>>, NlError> {
    let malformed =
        |what: &str| NlError::local(Errno::EPROTO, format!("cannot read a rule the kernel sent: {what}"));
    let header = payload.get(..FIB_RULE_HDR_LEN).ok_or_else(|| malformed("its message is truncated"))?;
    let Some(family) = family_of(AddressFamily::from(header[0])) else { return Ok(None) };
    let (dst_len, src_len) = (header[1], header[2]);
    let flags = u32::from_ne_bytes(header[8..12].try_into().unwrap());
    let sized = |v: &[u8], what: &str| malformed(&format!("{what} of {} bytes", v.len()));
    let number =
        |v: &[u8], what: &str| <[u8; 4]>::try_from(v).map(u32::from_ne_bytes).map_err(|_| sized(v, what));
    let ip = |v: &[u8], what: &str| match v.len() {
        4 => Ok(IpAddr::from(<[u8; 4]>::try_from(v).unwrap())),
        16 => Ok(IpAddr::from(<[u8; 16]>::try_from(v).unwrap())),
        _ => Err(sized(v, what)),
    };
    // As netlink-packet-core's parse_string: one trailing NUL taken off.
    let name = |v: &[u8], what: &str| {
        String::from_utf8(v.strip_suffix(&[0]).unwrap_or(v).to_vec())
            .map_err(|_| malformed(&format!("{what} that is not UTF-8")))
    };
    let mut rule = Rule {
        tos: header[3],
        action: header[7],
        // The other flags are state the kernel reports (detached
        // interface, unresolved goto, the kernel's own rules).
        invert: flags & FIB_RULE_INVERT != 0,
        ..Rule::lookup(family, 0, u32::from(header[4]), 0)
    };
    for attr in super::rawdump::attributes(&payload[FIB_RULE_HDR_LEN..]) {
        let (kind, value) = attr.map_err(|_| malformed("an attribute is outside its message"))?;
        match kind {
            FRA_PRIORITY => rule.priority = number(value, "a priority")?,
            FRA_SRC => rule.src = Some(Prefix::new(ip(value, "a source")?, src_len)),
            FRA_DST => rule.dst = Some(Prefix::new(ip(value, "a destination")?, dst_len)),
            FRA_IIFNAME => rule.iif = Some(name(value, "an input interface")?),
            FRA_OIFNAME => rule.oif = Some(name(value, "an output interface")?),
            FRA_FWMARK => rule.fwmark = Some(number(value, "a mark")?),
            FRA_FWMASK => rule.fwmask = Some(number(value, "a mask")?),
            FRA_TABLE => rule.table = number(value, "a table")?,
            FRA_PROTOCOL => {
                rule.protocol =
                    *value.first().filter(|_| value.len() == 1).ok_or_else(|| sized(value, "a protocol"))?
            }
            FRA_GOTO => rule.goto = Some(number(value, "a goto")?),
            // Dumps carry "no suppression" markers on every rule.
            FRA_SUPPRESS_PREFIXLEN | FRA_SUPPRESS_IFGROUP if value == u32::MAX.to_ne_bytes() => {}
            FRA_L3MDEV if value == [0] => {}
            FRA_TUN_ID if value == [0; 8] => {}
            _ => rule.extra_selectors = true,
        }
    }
    Ok(Some(Live { item: rule, raw: payload.to_vec() }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Family;
    use crate::netlink::fixture::{RT_TABLE_COMPAT, prefix, rules};

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

    /// A rule read from its bytes is the rule netlink-packet-route's whole
    /// parse reads, with the bytes as they were: the kernel's messages
    /// (the fixtures) and built ones with every attribute roce-route reads,
    /// the "no suppression" markers with and without their default values,
    /// and selectors it does not model (each alone, so that each must make
    /// `extra_selectors`).
    #[test]
    fn rule_rows_read_as_netlink_packet_route_reads_them() {
        use rtnetlink::packet_core::DefaultNla;
        use rtnetlink::packet_route::IpProtocol;
        use rtnetlink::packet_route::rule::{RulePortRange, RuleUidRange};
        let f = rules();
        let mut messages: Vec<Vec<u8>> =
            ["v4_local", "v4_priority_0", "v4_from", "v6_from_to", "v4_iif_fwmark_table_1000", "v4_ipproto"]
                .map(|name| f.raw(name).to_vec())
                .to_vec();
        let built = |family: Family, flags: RuleFlags, attributes: Vec<RuleAttribute>| {
            let mut m = RuleMessage::default();
            m.header.family = af(family);
            m.header.src_len = 24;
            m.header.dst_len = 64;
            m.header.tos = 4;
            m.header.table = RT_TABLE_COMPAT;
            m.header.action = RuleAction::ToTable;
            m.header.flags = flags;
            m.attributes = attributes;
            emit(&m)
        };
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        let markers = || {
            vec![
                RuleAttribute::SuppressPrefixLen(u32::MAX),
                RuleAttribute::SuppressIfGroup(u32::MAX),
                RuleAttribute::L3MDev(false),
                RuleAttribute::TunId(0),
            ]
        };
        let mut all = vec![
            RuleAttribute::Priority(4000),
            RuleAttribute::Source(ip("198.51.100.0")),
            RuleAttribute::Destination(ip("2001:db8::")),
            RuleAttribute::Iifname("rail0".into()),
            RuleAttribute::Oifname("rail1".into()),
            RuleAttribute::FwMark(0x10),
            RuleAttribute::FwMask(0xff),
            RuleAttribute::Table(1000),
            RuleAttribute::Protocol(RouteProtocol::from(234)),
            RuleAttribute::Goto(5000),
        ];
        all.extend(markers());
        messages.push(built(Family::V4, RuleFlags::Invert | RuleFlags::Unresolved, all));
        messages.push(built(Family::V6, RuleFlags::empty(), markers()));
        for extra in [
            RuleAttribute::SuppressPrefixLen(0),
            RuleAttribute::SuppressIfGroup(7),
            RuleAttribute::L3MDev(true),
            RuleAttribute::TunId(5),
            RuleAttribute::IpProtocol(IpProtocol::Tcp),
            RuleAttribute::UidRange(RuleUidRange { start: 1000, end: 2000 }),
            RuleAttribute::SourcePortRange(RulePortRange { start: 1, end: 2 }),
            RuleAttribute::Other(DefaultNla::new(250, vec![1, 2, 3])),
        ] {
            let mut attributes = markers();
            attributes.push(extra);
            messages.push(built(Family::V4, RuleFlags::empty(), attributes));
        }
        for raw in &messages {
            let theirs = live_rule(&RuleMessage::parse(&raw[..]).unwrap()).unwrap();
            let ours = rule_row(raw).unwrap().unwrap();
            assert_eq!(ours, theirs, "{:?}", RuleMessage::parse(&raw[..]).unwrap());
            assert_eq!(&ours.raw, raw, "kept as dumped");
        }
        // What the built ones test.
        let read = |k: usize| rule_row(&messages[k]).unwrap().unwrap().item;
        let full = read(6);
        assert!(full.invert && !full.extra_selectors, "{full:?}");
        assert_eq!(
            (full.goto, full.oif.as_deref(), full.tos, full.protocol),
            (Some(5000), Some("rail1"), 4, 234)
        );
        assert!(!read(7).extra_selectors);
        assert!((8..messages.len()).all(|k| read(k).extra_selectors));
    }

    /// Another family's rule is no rule of ours; a message cut short, an
    /// attribute outside it, an address or a priority of the wrong size or
    /// a name that is not UTF-8 is an error, never a panic.
    #[test]
    fn a_rule_message_that_cannot_be_read_is_an_error() {
        use rtnetlink::packet_core::DefaultNla;
        let f = rules();
        let good = f.raw("v4_iif_fwmark_table_1000").to_vec();
        let mut other = good.clone();
        other[0] = 7; // AF_BRIDGE
        assert!(rule_row(&other).unwrap().is_none());
        crate::netlink::rawdump::tests::readable_exactly_between_attributes(
            &good,
            FIB_RULE_HDR_LEN,
            rule_row,
        );
        for (kind, value) in
            [(FRA_SRC, vec![198, 51, 100]), (FRA_PRIORITY, vec![1, 0]), (FRA_IIFNAME, vec![0xff, 0])]
        {
            let mut m = RuleMessage::default();
            m.header.family = af(Family::V4);
            m.attributes = vec![RuleAttribute::Other(DefaultNla::new(kind, value))];
            assert!(rule_row(&emit(&m)).is_err(), "{kind}");
        }
    }
}
