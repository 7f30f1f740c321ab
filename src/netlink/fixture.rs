//! Real kernel messages, recorded once by `record_decode_fixtures`
//! (tests/netlink_kernel.rs) into tests/fixtures/netlink/, for the decode
//! tests of the route and rule codecs.

use std::collections::HashMap;
use std::net::IpAddr;

use rtnetlink::packet_core::Parseable;
use rtnetlink::packet_route::route::RouteMessage;
use rtnetlink::packet_route::rule::RuleMessage;

use super::{route::route_row, rule::rule_row};
use crate::model::{Live, Prefix, Route, Rule};

/// What a dump puts in the 8-bit header table field for a table above
/// 255 (RT_TABLE_COMPAT).
pub(super) const RT_TABLE_COMPAT: u8 = 252;

/// A fixture file: the interface names and the named message payloads.
pub(super) struct Fixture {
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
    pub(super) fn raw(&self, name: &str) -> &[u8] {
        self.messages.get(name).unwrap_or_else(|| panic!("no fixture {name}"))
    }
    pub(super) fn ifname(&self) -> impl Fn(u32) -> String + '_ {
        |i| self.links.get(&i).cloned().unwrap_or_else(|| panic!("unknown ifindex {i}"))
    }
    pub(super) fn route(&self, name: &str) -> (RouteMessage, Live<Route>) {
        let m = RouteMessage::parse(self.raw(name)).unwrap();
        let live = route_row(self.raw(name)).unwrap().unwrap().live(self.ifname());
        (m, live)
    }
    pub(super) fn rule(&self, name: &str) -> (RuleMessage, Live<Rule>) {
        let m = RuleMessage::parse(self.raw(name)).unwrap();
        let live = rule_row(self.raw(name)).unwrap().unwrap();
        (m, live)
    }
}

pub(super) fn routes() -> Fixture {
    Fixture::read(include_str!("../../tests/fixtures/netlink/routes.hex"))
}

pub(super) fn rules() -> Fixture {
    Fixture::read(include_str!("../../tests/fixtures/netlink/rules.hex"))
}

pub(super) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub(super) fn prefix(s: &str) -> Prefix {
    crate::model::prefix(s)
}
