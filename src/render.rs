//! Rendering: operation -> the equivalent iproute2 / sysctl command.
//!
//! Pure. The output of `apply --dry-run` is meant to be run with `sh -e` on
//! the same starting host and give exactly the state `apply` gives, so each
//! command names every field roce-route sets: table, protocol, scope,
//! metric, type.

use std::fmt::Write;

use crate::model::{Family, Op, Prefix, Route, Rule, fr_act, rtn, scope};
use crate::sysctl;

/// The shell command for one operation.
pub fn command(op: &Op) -> String {
    match op {
        Op::AddRoute { route } => route_cmd("add", route),
        Op::ReplaceRoute { new, .. } => route_cmd("replace", new),
        Op::RestoreRoute { old, .. } => route_cmd("replace", &old.item),
        Op::DelRoute { route, .. } => route_cmd("del", route),
        Op::AddRule { rule, .. } => rule_cmd("add", rule),
        Op::DelRule { rule, .. } => rule_cmd("del", rule),
        Op::SetSysctl { iface, key, new, .. } => {
            // Only the name needs quoting: `=` past its start is literal in
            // every shell.
            format!("sysctl -w {}={new}", quote(&sysctl::dotted_name(iface, *key)))
        }
    }
}

/// An operation in words, as `check` reports the difference it fixes.
pub fn describe(op: &Op) -> String {
    match op {
        Op::AddRoute { route } => format!("route missing: {}", route_line(route)),
        Op::ReplaceRoute { old, new } => {
            format!("route differs: is `{}`, should be `{}`", route_line(&old.item), route_line(new))
        }
        Op::RestoreRoute { old, .. } => format!("route differs: {}", route_line(&old.item)),
        Op::DelRoute { route, .. } => {
            format!("route owned by roce-route but not in the config: {}", route_line(route))
        }
        Op::AddRule { rule, .. } => format!("rule missing: {}", rule_line(rule)),
        Op::DelRule { rule, .. } => {
            format!("rule owned by roce-route but not in the config: {}", rule_line(rule))
        }
        Op::SetSysctl { iface, key, old, new } => {
            format!("{} is {old}, should be {new}", sysctl::dotted_name(iface, *key))
        }
    }
}

/// One line per interface saying what `ops` change there ("rail0: 2
/// routes added, 1 rule added, 2 sysctls set"), in the order interfaces
/// first appear; rules are placed by their table (`owner`: table ->
/// interface), anything else under "other".
pub fn summary(ops: &[Op], owner: &std::collections::BTreeMap<u32, String>) -> Vec<String> {
    use std::borrow::Cow;
    const KINDS: [(&str, &str); 7] = [
        ("route added", "routes added"),
        ("route replaced", "routes replaced"),
        ("route restored", "routes restored"),
        ("route deleted", "routes deleted"),
        ("rule added", "rules added"),
        ("rule deleted", "rules deleted"),
        ("sysctl set", "sysctls set"),
    ];
    // Each interface once, in order, with a count per kind (KINDS' index),
    // and no name copied per step. Looked up from the newest: a plan's
    // steps of one interface mostly follow each other.
    let mut counts: Vec<(Cow<str>, [usize; KINDS.len()])> = Vec::new();
    fn table_owner(owner: &std::collections::BTreeMap<u32, String>, t: u32) -> Cow<'_, str> {
        owner.get(&t).map_or_else(|| Cow::Owned(format!("table {t}")), |o| Cow::Borrowed(o.as_str()))
    }
    fn place<'a>(
        owner: &'a std::collections::BTreeMap<u32, String>,
        route: &'a crate::model::Route,
    ) -> Cow<'a, str> {
        match &route.oif {
            Some(oif) => Cow::Borrowed(oif.as_str()),
            None => table_owner(owner, route.table),
        }
    }
    for op in ops {
        let (iface, kind) = match op {
            Op::AddRoute { route } => (place(owner, route), 0),
            Op::ReplaceRoute { new, .. } => (place(owner, new), 1),
            Op::RestoreRoute { current, .. } => (place(owner, current), 2),
            Op::DelRoute { route, .. } => (place(owner, route), 3),
            Op::AddRule { rule, .. } => (table_owner(owner, rule.table), 4),
            Op::DelRule { rule, .. } => (table_owner(owner, rule.table), 5),
            Op::SetSysctl { iface, .. } => (Cow::Borrowed(iface.as_str()), 6),
        };
        match counts.iter_mut().rev().find(|(name, _)| *name == iface) {
            Some((_, n)) => n[kind] += 1,
            None => {
                let mut n = [0; KINDS.len()];
                n[kind] = 1;
                counts.push((iface, n));
            }
        }
    }
    counts
        .iter()
        .map(|(iface, n)| {
            let parts: Vec<String> = (KINDS.iter().zip(n))
                .filter(|(_, n)| **n > 0)
                .map(|((one, many), n)| count(*n, one, many))
                .collect();
            format!("{iface}: {}", parts.join(", "))
        })
        .collect()
}

/// "1 step", "3 steps": a count with the right form of its noun.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A script: optional comment lines, then one command per line.
pub fn script(comments: &[String], ops: &[Op]) -> String {
    let mut out = String::new();
    for c in comments {
        for line in c.lines() {
            let _ = writeln!(out, "# {line}");
        }
    }
    for op in ops {
        let _ = writeln!(out, "{}", command(op));
    }
    out
}

fn route_cmd(verb: &str, r: &Route) -> String {
    format!("ip {} route {verb} {}", r.family.ip_flag(), route_spec(r))
}

fn rule_cmd(verb: &str, r: &Rule) -> String {
    format!("ip {} rule {verb} {}", r.family.ip_flag(), rule_spec(r))
}

/// A route as `ip route show table all` prints it (close enough to find it).
pub fn route_line(r: &Route) -> String {
    format!("ip {} route: {}", r.family.ip_flag(), route_spec(r))
}

/// A rule as `ip rule` prints it.
pub fn rule_line(r: &Rule) -> String {
    let mut s = format!("ip {} rule: ", r.family.ip_flag());
    s.push_str(&rule_spec(r));
    if r.extra_selectors {
        s.push_str(" (with other selectors)");
    }
    s
}

fn route_spec(r: &Route) -> String {
    let mut s = String::new();
    if r.kind != rtn::UNICAST {
        s.push_str(route_type(r.kind));
        s.push(' ');
    }
    s.push_str(&dst(&r.dst));
    if r.tos != 0 {
        let _ = write!(s, " tos 0x{:02x}", r.tos);
    }
    if let Some(gw) = r.gateway {
        let _ = write!(s, " via {gw}");
    }
    if let Some(dev) = &r.oif {
        let _ = write!(s, " dev {}", quote(dev));
    }
    let _ = write!(s, " table {} proto {}", r.table, r.protocol);
    // IPv6 routes have no scope in the kernel; naming one changes nothing.
    if r.family == Family::V4 {
        let _ = write!(s, " scope {}", scope_name(r.scope));
    }
    if let Some(src) = r.prefsrc {
        let _ = write!(s, " src {src}");
    }
    if r.metric != 0 {
        let _ = write!(s, " metric {}", r.metric);
    }
    // Where `ip route show` prints the nexthop flags.
    if r.onlink {
        s.push_str(" onlink");
    }
    s
}

fn rule_spec(r: &Rule) -> String {
    let mut s = format!("priority {}", r.priority);
    if r.invert {
        s.push_str(" not");
    }
    s.push_str(" from ");
    s.push_str(&r.src.map_or("all".to_string(), |p| host_or_prefix(&p)));
    if let Some(d) = r.dst {
        let _ = write!(s, " to {}", host_or_prefix(&d));
    }
    if r.tos != 0 {
        let _ = write!(s, " tos 0x{:02x}", r.tos);
    }
    if let Some(m) = r.fwmark {
        match r.fwmask {
            Some(mask) if mask != u32::MAX => {
                let _ = write!(s, " fwmark 0x{m:x}/0x{mask:x}");
            }
            _ => {
                let _ = write!(s, " fwmark 0x{m:x}");
            }
        }
    }
    if let Some(i) = &r.iif {
        let _ = write!(s, " iif {}", quote(i));
    }
    if let Some(o) = &r.oif {
        let _ = write!(s, " oif {}", quote(o));
    }
    match r.action {
        fr_act::TO_TBL => {
            let _ = write!(s, " lookup {}", r.table);
        }
        fr_act::GOTO => {
            let _ = write!(s, " goto {}", r.goto.unwrap_or(0));
        }
        fr_act::NOP => s.push_str(" nop"),
        fr_act::BLACKHOLE => s.push_str(" blackhole"),
        fr_act::UNREACHABLE => s.push_str(" unreachable"),
        fr_act::PROHIBIT => s.push_str(" prohibit"),
        other => {
            let _ = write!(s, " action {other}");
        }
    }
    if r.protocol != 0 {
        let _ = write!(s, " proto {}", r.protocol);
    }
    s
}

/// A word as a shell reads it back unchanged (sh, bash, zsh, fish).
/// Linux interface names may hold `;`, `$`, quotes and other characters
/// the shell would act on; only the harmless ones are left bare. shlex also
/// quotes what acts at a word's start in some shell (zsh's `=cmd`, `~`)
/// and avoids the backslash in single quotes that fish reads as an escape.
pub fn quote(word: &str) -> std::borrow::Cow<'_, str> {
    // A NUL cannot be in an interface name, a path or an argument; allowed
    // here, quoting cannot fail.
    shlex::Quoter::new().allow_nul(true).quote(word).unwrap_or_else(|_| "''".into())
}

fn dst(p: &Prefix) -> String {
    if p.is_default() { "default".to_string() } else { p.to_string() }
}

fn host_or_prefix(p: &Prefix) -> String {
    if p.len == p.family().max_len() { p.addr.to_string() } else { p.to_string() }
}

fn scope_name(s: u8) -> String {
    match s {
        scope::UNIVERSE => "global".into(),
        scope::SITE => "site".into(),
        scope::LINK => "link".into(),
        scope::HOST => "host".into(),
        scope::NOWHERE => "nowhere".into(),
        n => n.to_string(),
    }
}

fn route_type(kind: u8) -> &'static str {
    match kind {
        rtn::LOCAL => "local",
        rtn::BROADCAST => "broadcast",
        rtn::ANYCAST => "anycast",
        rtn::MULTICAST => "multicast",
        rtn::BLACKHOLE => "blackhole",
        rtn::UNREACHABLE => "unreachable",
        rtn::PROHIBIT => "prohibit",
        rtn::THROW => "throw",
        rtn::NAT => "nat",
        _ => "unicast",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_says_per_interface_what_changed() {
        use crate::model::{Route, Rule, SysctlKey, prefix};
        let route = |dev: &str, table| {
            Route::connected(table, prefix("198.51.100.0/24"), dev, "198.51.100.10".parse().unwrap(), 234)
        };
        let ops = vec![
            Op::AddRoute { route: route("rail0", 100) },
            Op::AddRoute { route: route("rail1", 101) },
            Op::AddRule { rule: Rule::source(1000, "198.51.100.10".parse().unwrap(), 100, 234), raw: None },
            Op::DelRule { rule: Rule::source(1000, "198.51.100.19".parse().unwrap(), 109, 234), raw: None },
            Op::SetSysctl { iface: "rail0".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 },
            Op::SetSysctl { iface: "rail0".into(), key: SysctlKey::ArpAnnounce, old: 0, new: 2 },
        ];
        let owner = std::collections::BTreeMap::from([(100, "rail0".to_string())]);
        assert_eq!(
            summary(&ops, &owner),
            [
                "rail0: 1 route added, 1 rule added, 2 sysctls set",
                "rail1: 1 route added",
                "table 109: 1 rule deleted"
            ]
        );
    }
    use crate::model::{Live, SysctlKey, prefix};

    fn connected() -> Route {
        Route::connected(100, prefix("198.51.100.0/24"), "rail0", "198.51.100.10".parse().unwrap(), 234)
    }

    #[test]
    fn routes_render_every_field_we_set() {
        assert_eq!(
            command(&Op::AddRoute { route: connected() }),
            "ip -4 route add 198.51.100.0/24 dev rail0 table 100 proto 234 scope link src 198.51.100.10"
        );
        let gw = Route::default_via(100, "198.51.100.1".parse().unwrap(), "rail0", 234);
        assert_eq!(
            command(&Op::ReplaceRoute { old: Live { item: connected(), raw: vec![] }, new: gw }),
            "ip -4 route replace default via 198.51.100.1 dev rail0 table 100 proto 234 scope global"
        );
        let v6 =
            Route::connected(100, prefix("2001:db8:1::/64"), "rail0", "2001:db8:1::10".parse().unwrap(), 234);
        assert_eq!(
            command(&Op::DelRoute { route: v6, raw: None }),
            "ip -6 route del 2001:db8:1::/64 dev rail0 table 100 proto 234 src 2001:db8:1::10 metric 1024"
        );
    }

    #[test]
    fn onlink_gateways_render_the_flag() {
        let mut gw = Route::default_via(100, "203.0.113.1".parse().unwrap(), "rail0", 234);
        gw.onlink = true;
        assert_eq!(
            command(&Op::AddRoute { route: gw }),
            "ip -4 route add default via 203.0.113.1 dev rail0 table 100 proto 234 scope global onlink"
        );
        let mut v6 = Route::default_via(100, "2001:db8:ffff::1".parse().unwrap(), "rail0", 234);
        v6.onlink = true;
        assert_eq!(
            route_line(&v6),
            "ip -6 route: default via 2001:db8:ffff::1 dev rail0 table 100 proto 234 metric 1024 onlink"
        );
    }

    #[test]
    fn rules_render_with_priority_table_and_protocol() {
        let r = Rule::source(1000, "2001:db8:1::10".parse().unwrap(), 100, 234);
        assert_eq!(
            command(&Op::AddRule { rule: r.clone(), raw: None }),
            "ip -6 rule add priority 1000 from 2001:db8:1::10 lookup 100 proto 234"
        );
        let boot = Rule {
            family: Family::V4,
            src: Some(Prefix::new("198.51.100.0".parse().unwrap(), 24)),
            protocol: 0,
            priority: 32765,
            ..r
        };
        assert_eq!(
            command(&Op::DelRule { rule: boot, raw: None }),
            "ip -4 rule del priority 32765 from 198.51.100.0/24 lookup 100"
        );
    }

    #[test]
    fn sysctl_names_with_dots_use_slashes() {
        let op = Op::SetSysctl { iface: "ib0.100".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 };
        assert_eq!(command(&op), "sysctl -w net.ipv4.conf.ib0/100.arp_ignore=1");
    }

    #[test]
    fn names_the_shell_would_act_on_are_quoted() {
        let evil = Route::connected(
            100,
            prefix("198.51.100.0/24"),
            "r;touch",
            "198.51.100.10".parse().unwrap(),
            234,
        );
        assert_eq!(
            command(&Op::AddRoute { route: evil }),
            "ip -4 route add 198.51.100.0/24 dev 'r;touch' table 100 proto 234 scope link src 198.51.100.10"
        );
        let op = Op::SetSysctl { iface: "a'b$(x)".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 };
        assert_eq!(command(&op), "sysctl -w \"net.ipv4.conf.a'b\"'$(x).arp_ignore'=1");
        let op = Op::SetSysctl { iface: "ib0.100".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 };
        assert_eq!(
            command(&op),
            "sysctl -w net.ipv4.conf.ib0/100.arp_ignore=1",
            "no quotes where none are needed"
        );
        assert_eq!(quote("ib0.100"), "ib0.100");
    }

    #[test]
    fn script_prefixes_comments() {
        let s = script(&["two\nlines".into()], &[Op::AddRoute { route: connected() }]);
        assert!(s.starts_with("# two\n# lines\nip -4 route add"), "{s}");
    }

    /// What `quote` makes of hostile words, read back by a real `sh`: the
    /// word itself, never an expansion or a command.
    #[test]
    fn quoted_words_read_back_unchanged_in_sh() {
        let words = [
            "rail0",
            "a'b",
            "r;touch x",
            "$(id)",
            "`id`",
            "a\\b",
            "=cmd",
            "~root",
            "x,y",
            "50%",
            "!x",
            "^x",
            "a\"b",
            "tab\there",
            "new\nline",
            "\u{e9}t\u{e9}",
            "*",
            "",
        ];
        let script: String = words.iter().map(|w| format!("printf '%s\\0' {}\n", quote(w))).collect();
        let out = std::process::Command::new("sh").arg("-c").arg(&script).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let back: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().split_terminator('\0').collect();
        assert_eq!(back, words, "{script}");
    }
}
