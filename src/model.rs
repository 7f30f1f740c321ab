//! Plain data types shared by the pure core (config, plan, diff, render) and
//! the thin effect modules (netlink, sysctl, executor).
//!
//! Nothing here talks to the kernel. Values are kept in the kernel's own
//! terms (table ids, scope and type numbers, protocol numbers) so that a
//! reader can follow a field straight to the netlink attribute it becomes.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

/// Address family of a route, rule or address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(ip: &IpAddr) -> Family {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }
    /// The `-4` / `-6` flag of iproute2.
    pub fn ip_flag(self) -> &'static str {
        match self {
            Family::V4 => "-4",
            Family::V6 => "-6",
        }
    }
    pub fn max_len(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }
    pub fn unspecified(self) -> IpAddr {
        match self {
            Family::V4 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Family::V6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        }
    }
    /// "IPv4" or "IPv6", as messages say it.
    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
    /// `AF_INET` or `AF_INET6`, as NCCL's variables say it.
    pub fn af_name(self) -> &'static str {
        match self {
            Family::V4 => "AF_INET",
            Family::V6 => "AF_INET6",
        }
    }
}

/// An IPv6 link-local unicast address (fe80::/10): never a rail's source
/// address, never announced, never in a plan.
pub fn is_v6_link_local(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(a) if a.is_unicast_link_local())
}

/// Whether a run that looks for `ip` asks for it on every link, by itself
/// (`Netlink::run_addresses`): an IPv6 address that is not link-local. A
/// link-local one is unique on its own link only, and a run reads every
/// IPv4 address anyway.
pub fn asked_on_every_link(ip: IpAddr) -> bool {
    ip.is_ipv6() && !is_v6_link_local(ip)
}

/// An address with a prefix length. `addr` is kept as given: for a route
/// destination it is the network address, for an interface address or a
/// rule selector it is the host address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Default for Prefix {
    fn default() -> Prefix {
        Prefix::default_route(Family::V4)
    }
}

impl Prefix {
    pub fn new(addr: IpAddr, len: u8) -> Prefix {
        Prefix { addr, len }
    }
    /// A host prefix: /32 or /128.
    pub fn host(addr: IpAddr) -> Prefix {
        Prefix { addr, len: Family::of(&addr).max_len() }
    }
    pub fn default_route(family: Family) -> Prefix {
        Prefix { addr: family.unspecified(), len: 0 }
    }
    pub fn family(&self) -> Family {
        Family::of(&self.addr)
    }
    pub fn is_default(&self) -> bool {
        self.len == 0
    }
    /// The network this prefix belongs to (host bits cleared).
    pub fn network(&self) -> Prefix {
        let net = self.ipnet();
        Prefix { addr: net.network(), len: self.len }
    }
    pub fn contains(&self, ip: &IpAddr) -> bool {
        Family::of(ip) == self.family() && self.ipnet().contains(ip)
    }
    /// The same prefix as an `ipnet::IpNet` (the length clamped to the family).
    pub fn ipnet(&self) -> ipnet::IpNet {
        let len = self.len.min(self.family().max_len());
        ipnet::IpNet::new(self.addr, len).expect("length clamped to the family's maximum")
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// Kernel route scopes (`enum rt_scope_t`).
pub mod scope {
    pub const UNIVERSE: u8 = 0;
    pub const SITE: u8 = 200;
    pub const LINK: u8 = 253;
    pub const HOST: u8 = 254;
    pub const NOWHERE: u8 = 255;
}

/// Kernel route types (`RTN_*`).
pub mod rtn {
    pub const UNSPEC: u8 = 0;
    pub const UNICAST: u8 = 1;
    pub const LOCAL: u8 = 2;
    pub const BROADCAST: u8 = 3;
    pub const ANYCAST: u8 = 4;
    pub const MULTICAST: u8 = 5;
    pub const BLACKHOLE: u8 = 6;
    pub const UNREACHABLE: u8 = 7;
    pub const PROHIBIT: u8 = 8;
    pub const THROW: u8 = 9;
    pub const NAT: u8 = 10;
}

/// Rule actions (`FR_ACT_*`).
pub mod fr_act {
    pub const UNSPEC: u8 = 0;
    pub const TO_TBL: u8 = 1;
    pub const GOTO: u8 = 2;
    pub const NOP: u8 = 3;
    pub const BLACKHOLE: u8 = 6;
    pub const UNREACHABLE: u8 = 7;
    pub const PROHIBIT: u8 = 8;
}

/// Tables the kernel reserves: unspec, default, main, local.
pub const RESERVED_TABLES: [u32; 4] = [0, 253, 254, 255];

/// What a reserved table is, for messages; None for any other id.
pub fn reserved_table(t: u32) -> Option<&'static str> {
    match t {
        0 => Some("0 means unspecified"),
        253 => Some("the `default` table"),
        254 => Some("the `main` table"),
        255 => Some("the `local` table"),
        _ => None,
    }
}

/// One route, in the kernel's terms. The identity of a route in the kernel
/// (what NLM_F_REPLACE matches on) is `key()`; the rest are its attributes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Route {
    pub family: Family,
    pub table: u32,
    /// Destination network (host bits cleared); /0 for a default route.
    pub dst: Prefix,
    pub tos: u8,
    /// RTA_PRIORITY, printed by `ip` as `metric`.
    pub metric: u32,
    pub protocol: u8,
    pub scope: u8,
    /// rtm_type (`rtn::*`).
    pub kind: u8,
    /// Output interface by name.
    pub oif: Option<String>,
    pub gateway: Option<IpAddr>,
    pub prefsrc: Option<IpAddr>,
    /// RTNH_F_ONLINK (`ip route ... onlink`): the gateway is reached on the
    /// link even though no subnet of the interface holds it (a /32 host
    /// address routed by a router outside it). Absent in journals written
    /// before the flag existed: false.
    #[serde(default)]
    pub onlink: bool,
}

/// What the kernel uses to tell one route from another in a table.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteKey {
    pub family: Family,
    pub table: u32,
    pub dst: Prefix,
    pub tos: u8,
    pub metric: u32,
}

/// The kernel gives IPv6 routes without a metric this one (IP6_RT_PRIO_USER);
/// roce-route sets it explicitly so that desired and dumped routes compare equal.
pub const IPV6_DEFAULT_METRIC: u32 = 1024;

impl Family {
    /// The metric roce-route gives its routes: what the kernel would pick.
    pub fn default_metric(self) -> u32 {
        match self {
            Family::V4 => 0,
            Family::V6 => IPV6_DEFAULT_METRIC,
        }
    }
    /// Scope of a connected route; the kernel keeps no scope for IPv6
    /// routes (it reports universe whatever is asked).
    pub fn connected_scope(self) -> u8 {
        match self {
            Family::V4 => scope::LINK,
            Family::V6 => scope::UNIVERSE,
        }
    }
}

impl Route {
    /// `<subnet> dev <dev> src <src> scope link table <table> proto <protocol>`.
    pub fn connected(table: u32, subnet: Prefix, dev: &str, src: IpAddr, protocol: u8) -> Route {
        let family = subnet.family();
        Route {
            family,
            table,
            dst: subnet.network(),
            tos: 0,
            metric: family.default_metric(),
            protocol,
            scope: family.connected_scope(),
            kind: rtn::UNICAST,
            oif: Some(dev.to_string()),
            gateway: None,
            prefsrc: Some(src),
            onlink: false,
        }
    }

    /// `default via <gateway> dev <dev> table <table> proto <protocol>`.
    pub fn default_via(table: u32, gateway: IpAddr, dev: &str, protocol: u8) -> Route {
        let family = Family::of(&gateway);
        Route {
            family,
            table,
            dst: Prefix::default_route(family),
            tos: 0,
            metric: family.default_metric(),
            protocol,
            scope: scope::UNIVERSE,
            kind: rtn::UNICAST,
            oif: Some(dev.to_string()),
            gateway: Some(gateway),
            prefsrc: None,
            onlink: false,
        }
    }

    pub fn key(&self) -> RouteKey {
        RouteKey { family: self.family, table: self.table, dst: self.dst, tos: self.tos, metric: self.metric }
    }
}

/// One policy rule. Only the selectors roce-route models are here; a live
/// rule with other selectors has `extra_selectors` set, so it never equals a
/// desired rule, and is deleted or restored from its raw dump only.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Rule {
    pub family: Family,
    pub priority: u32,
    pub src: Option<Prefix>,
    pub dst: Option<Prefix>,
    pub iif: Option<String>,
    pub oif: Option<String>,
    pub fwmark: Option<u32>,
    pub fwmask: Option<u32>,
    pub tos: u8,
    /// Table looked up for `fr_act::TO_TBL`; 0 otherwise.
    pub table: u32,
    pub action: u8,
    pub protocol: u8,
    /// The rule carries selectors or flags not listed above (not, goto,
    /// suppress_prefixlength, uidrange, ipproto, ports, l3mdev, ...).
    pub extra_selectors: bool,
    /// `not`: the selectors are inverted (FIB_RULE_INVERT).
    #[serde(default)]
    pub invert: bool,
    /// The priority a `goto` rule jumps to.
    #[serde(default)]
    pub goto: Option<u32>,
}

impl Rule {
    /// `priority <priority> lookup <table> proto <protocol>`: a rule with
    /// no selector (it matches every packet of its family).
    pub fn lookup(family: Family, priority: u32, table: u32, protocol: u8) -> Rule {
        Rule {
            family,
            priority,
            src: None,
            dst: None,
            iif: None,
            oif: None,
            fwmark: None,
            fwmask: None,
            tos: 0,
            table,
            action: fr_act::TO_TBL,
            protocol,
            extra_selectors: false,
            invert: false,
            goto: None,
        }
    }

    /// `priority <priority> from <src> lookup <table> proto <protocol>`.
    pub fn source(priority: u32, src: IpAddr, table: u32, protocol: u8) -> Rule {
        Rule { src: Some(Prefix::host(src)), ..Rule::lookup(Family::of(&src), priority, table, protocol) }
    }
}

/// Parses "ADDR/LEN" (tests and fixtures).
#[cfg(test)]
pub fn prefix(s: &str) -> Prefix {
    let (ip, len) = s.split_once('/').expect("ADDR/LEN");
    Prefix::new(ip.parse().expect("address"), len.parse().expect("length"))
}

/// A live kernel object together with the exact bytes the kernel dumped
/// for it (a netlink message payload), so that it can be deleted or put
/// back exactly as it was, whatever attributes roce-route does not model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Live<T> {
    pub item: T,
    #[serde(with = "hex_bytes")]
    pub raw: Vec<u8>,
}

/// The per-interface IPv4 sysctls roce-route manages, under
/// `/proc/sys/net/ipv4/conf/<ifname>/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SysctlKey {
    ArpIgnore,
    ArpAnnounce,
    RpFilter,
    ArpFilter,
}

/// How the kernel combines `conf/all/<key>` with `conf/<iface>/<key>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    Max,
    Or,
}

impl SysctlKey {
    pub const ALL: [SysctlKey; 4] =
        [SysctlKey::ArpIgnore, SysctlKey::ArpAnnounce, SysctlKey::RpFilter, SysctlKey::ArpFilter];

    pub fn name(self) -> &'static str {
        match self {
            SysctlKey::ArpIgnore => "arp_ignore",
            SysctlKey::ArpAnnounce => "arp_announce",
            SysctlKey::RpFilter => "rp_filter",
            SysctlKey::ArpFilter => "arp_filter",
        }
    }
    pub fn from_name(name: &str) -> Option<SysctlKey> {
        SysctlKey::ALL.into_iter().find(|k| k.name() == name)
    }
    /// Values the kernel documents (ip-sysctl.rst); the kernel itself does
    /// not range-check these, so roce-route does.
    pub fn valid(self, v: u32) -> bool {
        match self {
            SysctlKey::ArpIgnore => matches!(v, 0..=3 | 8),
            SysctlKey::ArpAnnounce => v <= 2,
            SysctlKey::RpFilter => v <= 2,
            SysctlKey::ArpFilter => v <= 1,
        }
    }
    pub fn valid_values(self) -> &'static str {
        match self {
            SysctlKey::ArpIgnore => "0, 1, 2, 3 or 8",
            SysctlKey::ArpAnnounce => "0, 1 or 2",
            SysctlKey::RpFilter => "0, 1 or 2",
            SysctlKey::ArpFilter => "0 or 1",
        }
    }
    pub fn combine(self) -> Combine {
        match self {
            SysctlKey::ArpFilter => Combine::Or,
            _ => Combine::Max,
        }
    }
    /// The value the kernel acts on, given `conf/all` and `conf/<iface>`.
    pub fn effective(self, all: u32, iface: u32) -> u32 {
        match self.combine() {
            Combine::Max => all.max(iface),
            Combine::Or => u32::from(all != 0 || iface != 0),
        }
    }
}

/// A per-interface sysctl setting.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Sysctl {
    pub iface: String,
    pub key: SysctlKey,
    pub value: u32,
}

/// A network interface as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// IFF_UP: administratively up.
    pub admin_up: bool,
    /// IFF_LOWER_UP: carrier.
    pub lower_up: bool,
    /// IFLA_ADDRESS, when the link has a non-empty one.
    pub mac: Option<HwAddr>,
    /// The link layer type (`ARPHRD_*`, `ip link`'s `link/ether`,
    /// `link/infiniband`).
    #[serde(default)]
    pub link_type: LinkType,
}

#[cfg(test)]
impl Link {
    /// An Ethernet link that is up with carrier, without a MAC: what most
    /// unit tests need (change a field for the rest).
    pub fn up(index: u32, name: &str) -> Link {
        Link {
            index,
            name: name.into(),
            admin_up: true,
            lower_up: true,
            mac: None,
            link_type: LinkType::Ether,
        }
    }
}

/// ARPHRD_ETHER: the link type (and ARP hardware type) of Ethernet.
pub const ARPHRD_ETHER: u16 = 1;
/// ARPHRD_INFINIBAND: IPoIB, link type and ARP hardware type alike.
pub const ARPHRD_INFINIBAND: u16 = 32;

/// A link's layer (`ARPHRD_*`): the two a rail can be, and any other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "u16", into = "u16")]
pub enum LinkType {
    /// ARPHRD_ETHER (1): Ethernet, RoCE.
    Ether,
    /// ARPHRD_INFINIBAND (32): IPoIB.
    Infiniband,
    /// Any other ARPHRD_* number (tun is 65534, loopback 772).
    Other(u16),
}

impl Default for LinkType {
    /// A link whose type was not recorded (older state files): 0, NET/ROM.
    fn default() -> LinkType {
        LinkType::Other(0)
    }
}

impl From<u16> for LinkType {
    fn from(n: u16) -> LinkType {
        match n {
            ARPHRD_ETHER => LinkType::Ether,
            ARPHRD_INFINIBAND => LinkType::Infiniband,
            other => LinkType::Other(other),
        }
    }
}

impl From<LinkType> for u16 {
    fn from(t: LinkType) -> u16 {
        match t {
            LinkType::Ether => ARPHRD_ETHER,
            LinkType::Infiniband => ARPHRD_INFINIBAND,
            LinkType::Other(n) => n,
        }
    }
}

/// A link-layer address as the kernel holds it (IFLA_ADDRESS): 6 bytes
/// on Ethernet, 20 on IPoIB. Parsed once, from netlink or from text
/// (`aa:bb:cc:dd:ee:ff`, two hex digits per octet), and printed as
/// `ip link` prints it (lowercase).
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HwAddr(Vec<u8>);

impl HwAddr {
    pub fn new(bytes: &[u8]) -> HwAddr {
        HwAddr(bytes.to_vec())
    }
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|b| *b == 0)
    }
    /// The six bytes of an Ethernet MAC; None for any other length.
    pub fn mac(&self) -> Option<[u8; 6]> {
        self.0.as_slice().try_into().ok()
    }
    /// The twenty bytes of an IPoIB address; None for any other length.
    pub fn ipoib(&self) -> Option<[u8; 20]> {
        self.0.as_slice().try_into().ok()
    }
}

impl std::str::FromStr for HwAddr {
    type Err = String;
    fn from_str(text: &str) -> Result<HwAddr, String> {
        let bytes: Option<Vec<u8>> = text
            .split(':')
            .map(|b| (b.len() == 2).then(|| u8::from_str_radix(b, 16).ok()).flatten())
            .collect();
        match bytes {
            Some(b) if !b.is_empty() && b.len() <= 32 => Ok(HwAddr(b)),
            _ => Err(format!("{text:?} is not a hardware address (hex octets separated by colons)")),
        }
    }
}

impl fmt::Display for HwAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for HwAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HwAddr({self})")
    }
}

impl Serialize for HwAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HwAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<HwAddr, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// An address configured on an interface.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    pub ifname: String,
    /// The interface's own address (IFA_LOCAL, or IFA_ADDRESS when there is
    /// no IFA_LOCAL, as for IPv6) with the address's prefix length.
    pub addr: Prefix,
    /// The peer of a point-to-point address (`ip addr add A peer P/LEN`):
    /// IFA_ADDRESS when it differs from IFA_LOCAL. The prefix length then
    /// belongs to the peer, and the subnet is the peer's (`subnet()`).
    pub peer: Option<IpAddr>,
    pub scope: u8,
    /// IFA_F_TENTATIVE (IPv6 duplicate address detection still running).
    pub tentative: bool,
    /// IFA_F_DEPRECATED: preferred lifetime over; not picked as a source.
    pub deprecated: bool,
    /// IFA_F_TEMPORARY: an IPv6 privacy address (RFC 8981), short-lived.
    pub temporary: bool,
    /// IFA_F_DADFAILED: duplicate address detection found a duplicate.
    pub dad_failed: bool,
}

impl Address {
    /// Whether `subnet` holds this address, or its subnet (`subnet()`)
    /// overlaps `subnet`, either way round; never across families: an
    /// address on the link of `subnet`'s hosts, or reaching them (ARP
    /// flux, and which other link's address a run names). Pure.
    pub fn meets(&self, subnet: &Prefix) -> bool {
        let own = self.subnet();
        subnet.contains(&self.addr.addr)
            || subnet.contains(&own.network().addr)
            || own.contains(&subnet.network().addr)
    }

    /// The subnet the address reaches on-link: the peer's prefix for a
    /// point-to-point address, otherwise the address's own network.
    pub fn subnet(&self) -> Prefix {
        match self.peer {
            Some(peer) => Prefix::new(peer, self.addr.len).network(),
            None => self.addr.network(),
        }
    }
}

/// One change to the host. Every operation carries what is needed to undo
/// it exactly (`inverse()`), which is how the executor builds its journal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    AddRoute {
        route: Route,
    },
    /// Replace a live route (same key) by `new`; `old` is kept to undo.
    ReplaceRoute {
        old: Live<Route>,
        new: Route,
    },
    /// Delete a live route; `raw` holds the dumped message when known.
    DelRoute {
        route: Route,
        raw: Option<RawBytes>,
    },
    AddRule {
        rule: Rule,
        raw: Option<RawBytes>,
    },
    DelRule {
        rule: Rule,
        raw: Option<RawBytes>,
    },
    SetSysctl {
        iface: String,
        key: SysctlKey,
        old: u32,
        new: u32,
    },
    /// Put a route back from its dumped bytes (undo of a replace).
    RestoreRoute {
        current: Route,
        old: Live<Route>,
    },
}

/// Raw netlink payload bytes, serialised as hex.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawBytes(#[serde(with = "hex_bytes")] pub Vec<u8>);

impl Op {
    /// The operation's name in reports and journals (its serde tag).
    pub fn kind(&self) -> &'static str {
        match self {
            Op::AddRoute { .. } => "add_route",
            Op::ReplaceRoute { .. } => "replace_route",
            Op::RestoreRoute { .. } => "restore_route",
            Op::DelRoute { .. } => "del_route",
            Op::AddRule { .. } => "add_rule",
            Op::DelRule { .. } => "del_rule",
            Op::SetSysctl { .. } => "set_sysctl",
        }
    }

    /// The operation that undoes this one.
    pub fn inverse(&self) -> Op {
        match self {
            Op::AddRoute { route } => Op::DelRoute { route: route.clone(), raw: None },
            Op::ReplaceRoute { old, new } => Op::RestoreRoute { current: new.clone(), old: old.clone() },
            Op::RestoreRoute { current, old } => Op::ReplaceRoute { old: old.clone(), new: current.clone() },
            Op::DelRoute { route, raw: Some(raw) } => {
                // Re-adding the dumped message reproduces the route exactly.
                Op::RestoreRoute {
                    current: route.clone(),
                    old: Live { item: route.clone(), raw: raw.0.clone() },
                }
            }
            Op::DelRoute { route, raw: None } => Op::AddRoute { route: route.clone() },
            Op::AddRule { rule, raw } => Op::DelRule { rule: rule.clone(), raw: raw.clone() },
            Op::DelRule { rule, raw } => Op::AddRule { rule: rule.clone(), raw: raw.clone() },
            Op::SetSysctl { iface, key, old, new } => {
                Op::SetSysctl { iface: iface.clone(), key: *key, old: *new, new: *old }
            }
        }
    }
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Two lower-case digits a byte, from a table: `format!("{b:02x}")`
    /// a byte was ~300 instructions and an allocation.
    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let out: String = bytes
            .iter()
            .flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 0xf)]])
            .map(char::from)
            .collect();
        s.serialize_str(&out)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        let digit =
            |b: u8| (b as char).to_digit(16).ok_or_else(|| serde::de::Error::custom("not a hex digit"));
        let bytes = s.as_bytes();
        if bytes.len() % 2 != 0 {
            return Err(serde::de::Error::custom("odd number of hex digits"));
        }
        bytes.chunks(2).map(|pair| Ok((digit(pair[0])? * 16 + digit(pair[1])?) as u8)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_network_and_contains() {
        let p = Prefix::new("198.51.100.10".parse().unwrap(), 24);
        assert_eq!(p.network().to_string(), "198.51.100.0/24");
        assert!(p.contains(&"198.51.100.200".parse().unwrap()));
        assert!(!p.contains(&"198.51.101.1".parse().unwrap()));
        assert!(!p.contains(&"2001:db8::1".parse().unwrap()));
        let p6 = Prefix::new("2001:db8:0:1::10".parse().unwrap(), 64);
        assert_eq!(p6.network().to_string(), "2001:db8:0:1::/64");
        assert_eq!(Prefix::default_route(Family::V4).to_string(), "0.0.0.0/0");
        assert_eq!(Prefix::new("10.1.2.3".parse().unwrap(), 0).network().to_string(), "0.0.0.0/0");
    }

    #[test]
    fn effective_sysctl_values() {
        assert_eq!(SysctlKey::ArpIgnore.effective(2, 1), 2);
        assert_eq!(SysctlKey::ArpAnnounce.effective(0, 2), 2);
        assert_eq!(SysctlKey::ArpFilter.effective(1, 0), 1);
        assert_eq!(SysctlKey::ArpFilter.effective(0, 0), 0);
        assert!(!SysctlKey::ArpIgnore.valid(4));
        assert!(SysctlKey::ArpIgnore.valid(8));
    }

    #[test]
    fn inverse_of_inverse_is_identity() {
        let r =
            Route::connected(100, prefix("198.51.100.0/24"), "rail0", "198.51.100.10".parse().unwrap(), 234);
        let ops = vec![
            Op::AddRoute { route: r.clone() },
            Op::ReplaceRoute { old: Live { item: r.clone(), raw: vec![1, 2] }, new: r.clone() },
            Op::SetSysctl { iface: "rail0".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 },
        ];
        for op in ops {
            assert_eq!(op.inverse().inverse(), op);
        }
    }

    #[test]
    fn corrupt_hex_is_an_error_not_a_panic() {
        for bad in ["\"0\u{e9}0\"", "\"abc\"", "\"zz\""] {
            let r: Result<RawBytes, _> = serde_json::from_str(bad);
            assert!(r.is_err(), "{bad}");
        }
        let r: RawBytes = serde_json::from_str("\"00ff\"").unwrap();
        assert_eq!(r.0, vec![0, 255]);
    }

    #[test]
    fn op_kind_is_its_journal_tag() {
        let r =
            Route::connected(100, prefix("198.51.100.0/24"), "rail0", "198.51.100.10".parse().unwrap(), 234);
        let rule = Rule::source(1000, "198.51.100.10".parse().unwrap(), 100, 234);
        let live = Live { item: r.clone(), raw: vec![] };
        let ops = [
            Op::AddRoute { route: r.clone() },
            Op::ReplaceRoute { old: live.clone(), new: r.clone() },
            Op::RestoreRoute { current: r.clone(), old: live },
            Op::DelRoute { route: r, raw: None },
            Op::AddRule { rule: rule.clone(), raw: None },
            Op::DelRule { rule, raw: None },
            Op::SetSysctl { iface: "rail0".into(), key: SysctlKey::ArpIgnore, old: 0, new: 1 },
        ];
        for op in ops {
            let json = serde_json::to_value(&op).unwrap();
            assert_eq!(json["op"], op.kind(), "{json}");
        }
    }

    #[test]
    fn journals_without_the_onlink_flag_still_parse() {
        let mut r = Route::default_via(100, "203.0.113.1".parse().unwrap(), "rail0", 234);
        let mut json = serde_json::to_value(Op::AddRoute { route: r.clone() }).unwrap();
        json["route"].as_object_mut().unwrap().remove("onlink").expect("the flag is serialised");
        let old: Op = serde_json::from_value(json).unwrap();
        assert_eq!(old, Op::AddRoute { route: r.clone() });
        r.onlink = true;
        let json = serde_json::to_string(&Op::AddRoute { route: r.clone() }).unwrap();
        assert_eq!(serde_json::from_str::<Op>(&json).unwrap(), Op::AddRoute { route: r });
    }

    #[test]
    fn op_serialises_raw_as_hex() {
        let op = Op::DelRule {
            rule: Rule::source(1000, "2001:db8::10".parse().unwrap(), 100, 234),
            raw: Some(RawBytes(vec![0xde, 0xad, 0x0f, 0x00, 0xf0, 0x9a])),
        };
        let json = serde_json::to_string(&op).unwrap();
        assert!(json.contains("\"dead0f00f09a\""), "{json}");
        let back: Op = serde_json::from_str(&json).unwrap();
        assert_eq!(back, op);
    }
}
