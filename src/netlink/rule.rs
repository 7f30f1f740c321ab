//! Policy rules: `model::Rule` to a rule message (action and priority
//! always said), and dumped messages back to a `Rule` plus its bytes.

use nix::errno::Errno;
use rtnetlink::packet_core::Parseable;
use rtnetlink::packet_route::route::RouteProtocol;
use rtnetlink::packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleMessage};

use super::route::table_header;
use super::{NlError, af, emit, family_of};
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

/// A dumped rule with its bytes, as dumped (`rule_msg` adds the priority
/// the dump leaves out when they are sent back).
pub(super) fn live_rule(m: &RuleMessage) -> Option<Live<Rule>> {
    Some(Live { item: rule_from(m)?, raw: emit(m) })
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
}
