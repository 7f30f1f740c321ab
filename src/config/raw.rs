//! The config as written: the serde types TOML is read into, with the
//! span of every value (for positions in messages).

use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use crate::model::SysctlKey;

/// Integers are read as i64 so that range errors get our own messages.
pub(super) type Int = Spanned<i64>;
pub(super) type Str = Spanned<String>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) defaults: Option<RawDefaults>,
    #[serde(default)]
    pub(super) interface: Vec<RawInterface>,
    #[serde(default)]
    pub(super) arp_only: Vec<RawArpOnly>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawArpOnly {
    pub(super) name: Str,
    pub(super) arp_ignore: Option<Int>,
    pub(super) arp_announce: Option<Int>,
    pub(super) arp_filter: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    pub(super) table_base: Option<Int>,
    pub(super) priority: Option<Int>,
    pub(super) protocol: Option<Int>,
    pub(super) arp_ignore: Option<Int>,
    pub(super) arp_announce: Option<Int>,
    pub(super) rp_filter: Option<Int>,
    pub(super) arp_filter: Option<Int>,
    pub(super) announce: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInterface {
    pub(super) name: Str,
    pub(super) addresses: Option<Spanned<Vec<Str>>>,
    pub(super) gateway: Option<Spanned<GatewayList>>,
    pub(super) table: Option<Int>,
    pub(super) priority: Option<Int>,
    pub(super) arp_ignore: Option<Int>,
    pub(super) arp_announce: Option<Int>,
    pub(super) rp_filter: Option<Int>,
    pub(super) arp_filter: Option<Int>,
}

/// The sysctl keys of a raw table, paired with their model key.
pub(super) type RawSysctls<'a> = [(SysctlKey, Option<&'a Int>); 4];

/// The same four sysctl keys appear in [defaults] and [[interface]]
/// (separate fields, as `flatten` and `deny_unknown_fields` do not mix).
pub(super) fn raw_sysctls<'a>(
    arp_ignore: &'a Option<Int>,
    arp_announce: &'a Option<Int>,
    rp_filter: &'a Option<Int>,
    arp_filter: &'a Option<Int>,
) -> RawSysctls<'a> {
    [
        (SysctlKey::ArpIgnore, arp_ignore.as_ref()),
        (SysctlKey::ArpAnnounce, arp_announce.as_ref()),
        (SysctlKey::RpFilter, rp_filter.as_ref()),
        (SysctlKey::ArpFilter, arp_filter.as_ref()),
    ]
}

impl RawDefaults {
    pub(super) fn sysctls(&self) -> RawSysctls<'_> {
        raw_sysctls(&self.arp_ignore, &self.arp_announce, &self.rp_filter, &self.arp_filter)
    }
}

impl RawInterface {
    pub(super) fn sysctls(&self) -> RawSysctls<'_> {
        raw_sysctls(&self.arp_ignore, &self.arp_announce, &self.rp_filter, &self.arp_filter)
    }
}

impl RawArpOnly {
    pub(super) fn sysctls(&self) -> RawSysctls<'_> {
        raw_sysctls(&self.arp_ignore, &self.arp_announce, &None, &self.arp_filter)
    }
}

/// `gateway = G` or `gateway = [G, G]`, where G is `"a"` or
/// `{ address = "a", onlink = true }`. Hand-written visitors rather than
/// `#[serde(untagged)]`, which would lose the spans.
pub(super) enum GatewayList {
    One(RawGateway),
    Many(Vec<Spanned<RawGateway>>),
}

pub(super) enum RawGateway {
    Addr(String),
    Table(RawGatewayTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGatewayTable {
    pub(super) address: Str,
    #[serde(default)]
    pub(super) onlink: bool,
}

pub(super) const GATEWAY_FORMS: &str =
    "a gateway address string, a table { address = \"...\", onlink = true }, or an array of them";

/// The string or table forms, shared by both visitors.
pub(super) fn raw_gateway_from_map<'de, A: serde::de::MapAccess<'de>>(
    map: A,
) -> Result<RawGateway, A::Error> {
    RawGatewayTable::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(RawGateway::Table)
}

impl<'de> Deserialize<'de> for RawGateway {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawGateway;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(GATEWAY_FORMS)
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<RawGateway, E> {
                Ok(RawGateway::Addr(s.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawGateway, A::Error> {
                raw_gateway_from_map(map)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for GatewayList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = GatewayList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(GATEWAY_FORMS)
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<GatewayList, E> {
                Ok(GatewayList::One(RawGateway::Addr(s.to_string())))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<GatewayList, A::Error> {
                raw_gateway_from_map(map).map(GatewayList::One)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<GatewayList, A::Error> {
                let mut all = Vec::new();
                while let Some(g) = seq.next_element::<Spanned<RawGateway>>()? {
                    all.push(g);
                }
                Ok(GatewayList::Many(all))
            }
        }
        d.deserialize_any(V)
    }
}

impl GatewayList {
    /// Every gateway address with its own span (that of the string, or of
    /// the table's `address`) and its onlink flag; `span` is that of the value.
    pub(super) fn into_items(self, span: Range<usize>) -> Vec<(Str, bool)> {
        let item = |span: Range<usize>, g: RawGateway| match g {
            RawGateway::Addr(s) => (Spanned::new(span, s), false),
            RawGateway::Table(t) => (t.address, t.onlink),
        };
        match self {
            GatewayList::One(g) => vec![item(span, g)],
            GatewayList::Many(all) => all.into_iter().map(|g| item(g.span(), g.into_inner())).collect(),
        }
    }
}
