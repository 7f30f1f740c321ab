//! Parse and validate the roce-route configuration file.
//!
//! Pure: TOML text in, a [`Config`] or the first [`ConfigError`] out. No I/O
//! and no kernel: checks that need the host (an interface exists, a bare
//! address has a prefix length, a gateway is on-link for addresses the host
//! picks or that may have a point-to-point peer) are done later by the plan,
//! which also puts the addresses it finds on the host through the checks
//! here (`unusable_address`, `check_unique_addresses`).
//!
//! Every error names the file, the line and column of the offending value,
//! the key or interface it belongs to, and a hint saying how to fix it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr};
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use crate::model::{self, Family, Prefix, SysctlKey};
use crate::sysctl::{self, MAX_IFNAME_BYTES, NameProblem};

/// Route and rule protocol number roce-route stamps on what it installs.
pub const DEFAULT_PROTOCOL: u8 = 234;
pub const DEFAULT_TABLE_BASE: u32 = 100;
pub const DEFAULT_PRIORITY: u32 = 1000;
/// How many times apply announces each address of a changed rail to the
/// peers (`[defaults] announce`; 0 turns it off), and the most allowed.
pub const DEFAULT_ANNOUNCE: u32 = 2;
pub const MAX_ANNOUNCE: u32 = 10;
/// Sysctls set on every interface unless the config says otherwise.
pub const DEFAULT_SYSCTLS: [(SysctlKey, u32); 2] = [(SysctlKey::ArpIgnore, 1), (SysctlKey::ArpAnnounce, 2)];

/// Highest rule priority allowed: 32766 and 32767 are the kernel's `main`
/// and `default` rules, and ours must come before them.
const MAX_PRIORITY: u32 = 32765;
/// Protocol numbers 0..=4 belong to the kernel (`rtnetlink.h`).
const KERNEL_PROTOCOLS: [&str; 5] = ["unspec", "redirect", "kernel", "boot", "static"];

/// Protocol numbers that routing daemons stamp on their routes (iproute2's
/// rt_protos, the daemons' own sources): roce-route owns every route and
/// rule with its protocol, so it must not share one with them.
const DAEMON_PROTOCOLS: [(u8, u8, &str); 14] = [
    (8, 8, "gated"),
    (9, 9, "ra (IPv6 router advertisements)"),
    (10, 10, "mrt"),
    (11, 11, "zebra"),
    (12, 12, "bird"),
    (13, 13, "dnrouted"),
    (14, 14, "xorp"),
    (15, 15, "ntk"),
    (16, 17, "dhcp / mrouted"),
    (18, 18, "keepalived"),
    (42, 42, "babel"),
    (66, 66, "a cloud networking agent"),
    (99, 99, "openr"),
    (186, 198, "FRR (bgp, isis, ospf, rip, eigrp, ...)"),
];

/// Validates a protocol number for roce-route's own entries, wherever it
/// is given (`[defaults] protocol`, `--protocol`): `Err((what, hint))`.
pub fn check_protocol(n: i64) -> Result<u8, (String, &'static str)> {
    match u8::try_from(n) {
        Ok(p) if usize::from(p) >= KERNEL_PROTOCOLS.len() => match protocol_owner(p) {
            None => Ok(p),
            Some(daemon) => Err((
                format!("protocol = {p} is used by {daemon}"),
                "roce-route treats every route and rule with its protocol as its own; pick a \
                 number no routing daemon uses (default 234)",
            )),
        },
        Ok(p) => Err((
            format!("protocol = {p} is the kernel's own protocol `{}`", KERNEL_PROTOCOLS[usize::from(p)]),
            "protocols 0..=4 mark routes the kernel or an administrator made; roce-route \
             must tell its own routes apart, so pick 5..=255 (default 234)",
        )),
        Err(_) => Err((
            format!("protocol = {n} is out of range"),
            "the route protocol is one byte: pick 5..=255 (default 234)",
        )),
    }
}

/// The daemon that uses protocol number `p`, if one does.
pub fn protocol_owner(p: u8) -> Option<&'static str> {
    DAEMON_PROTOCOLS.iter().find(|(lo, hi, _)| (*lo..=*hi).contains(&p)).map(|(_, _, name)| *name)
}

// ---------------------------------------------------------------------------
// Output types
// ---------------------------------------------------------------------------

/// A 1-based position in the config text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub line: usize,
    pub col: usize,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// How messages name the config: the file, or the files joined by " + ".
    pub file: String,
    /// The files merged into this config, in the order given.
    pub files: Vec<String>,
    pub defaults: Defaults,
    pub interfaces: Vec<Interface>,
    /// `[[arp_only]]`: interfaces outside the rails (a management NIC)
    /// whose ARP sysctls only are managed: no table, rule, route or probe.
    pub arp_only: Vec<ArpOnly>,
}

/// The ARP sysctls an `[[arp_only]]` interface may set (rp_filter is not
/// an ARP setting, and a management NIC's reverse path is not ours to
/// judge).
pub const ARP_ONLY_KEYS: [SysctlKey; 3] =
    [SysctlKey::ArpIgnore, SysctlKey::ArpAnnounce, SysctlKey::ArpFilter];

/// An interface named for its ARP sysctls only: it has an address in a
/// rail's subnet (or may get one) and must not answer ARP for the rails'
/// addresses.
#[derive(Clone, Debug, PartialEq)]
pub struct ArpOnly {
    pub name: String,
    /// Of the `name` value.
    pub loc: Loc,
    /// Desired values: the defaults of the `ARP_ONLY_KEYS` overlaid by
    /// this table's keys.
    pub sysctls: BTreeMap<SysctlKey, u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Defaults {
    pub table_base: u32,
    pub priority: u32,
    pub protocol: u8,
    pub sysctls: BTreeMap<SysctlKey, u32>,
    /// Announcements of each address after an apply changed its rail.
    pub announce: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Interface {
    pub name: String,
    /// The file it is configured in.
    pub file: String,
    /// Of the `name` value.
    pub loc: Loc,
    /// `None`: take the interface's global addresses at apply time.
    pub addresses: Option<Vec<AddrSpec>>,
    /// At most one per family.
    pub gateways: Vec<Gateway>,
    /// The `table` given, or table_base + position until the host is read:
    /// then `reconcile` keeps the table the interface had at the last apply
    /// or gives it the lowest free one (`plan::assign_tables`).
    pub table: u32,
    /// Whether `table` was written in the config (it then always wins).
    pub table_explicit: bool,
    /// Of the `table` value if given, else of `name`.
    pub table_loc: Loc,
    pub priority: u32,
    /// Of the `priority` value if given, else of `name`.
    pub priority_loc: Loc,
    /// Desired values: the defaults overlaid by this interface's keys.
    pub sysctls: BTreeMap<SysctlKey, u32>,
}

/// An address from `addresses`; `len: None` means "the prefix length the
/// interface has".
#[derive(Clone, Debug, PartialEq)]
pub struct AddrSpec {
    pub addr: IpAddr,
    pub len: Option<u8>,
    pub loc: Loc,
}

impl AddrSpec {
    pub fn prefix(&self) -> Option<Prefix> {
        self.len.map(|len| Prefix::new(self.addr, len))
    }
}

impl fmt::Display for AddrSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.len {
            Some(len) => write!(f, "{}/{}", self.addr, len),
            None => write!(f, "{}", self.addr),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Gateway {
    pub addr: IpAddr,
    /// Of the address value.
    pub loc: Loc,
    /// `{ address = "...", onlink = true }`: the router is reached on the
    /// link although no subnet of the interface holds it (`ip route ...
    /// onlink`), as with a /32 host address.
    pub onlink: bool,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    pub file: String,
    pub loc: Option<Loc>,
    pub what: String,
    pub hint: String,
}

impl ConfigError {
    pub fn at(file: &str, loc: Option<Loc>, what: impl Into<String>, hint: impl Into<String>) -> Self {
        ConfigError { file: file.to_string(), loc, what: what.into(), hint: hint.into() }
    }

    fn render(&self) -> String {
        let mut out = match self.loc {
            Some(loc) => format!("{}:{}: {}", self.file, loc, self.what),
            None => format!("{}: {}", self.file, self.what),
        };
        if !self.hint.is_empty() {
            out.push_str("\n  hint: ");
            out.push_str(&self.hint);
        }
        out
    }
}

/// The 1-based line and column (in characters) of a byte offset in `text`.
/// Offsets past the end or inside a character are clamped, never a panic.
pub fn loc_of(text: &str, byte_offset: usize) -> Loc {
    let mut end = byte_offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Loc { line: before.matches('\n').count() + 1, col: before[line_start..].chars().count() + 1 }
}

// ---------------------------------------------------------------------------
// Raw (as written) types
// ---------------------------------------------------------------------------

/// Integers are read as i64 so that range errors get our own messages.
type Int = Spanned<i64>;
type Str = Spanned<String>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    defaults: Option<RawDefaults>,
    #[serde(default)]
    interface: Vec<RawInterface>,
    #[serde(default)]
    arp_only: Vec<RawArpOnly>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArpOnly {
    name: Str,
    arp_ignore: Option<Int>,
    arp_announce: Option<Int>,
    arp_filter: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    table_base: Option<Int>,
    priority: Option<Int>,
    protocol: Option<Int>,
    arp_ignore: Option<Int>,
    arp_announce: Option<Int>,
    rp_filter: Option<Int>,
    arp_filter: Option<Int>,
    announce: Option<Int>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInterface {
    name: Str,
    addresses: Option<Spanned<Vec<Str>>>,
    gateway: Option<Spanned<GatewayList>>,
    table: Option<Int>,
    priority: Option<Int>,
    arp_ignore: Option<Int>,
    arp_announce: Option<Int>,
    rp_filter: Option<Int>,
    arp_filter: Option<Int>,
}

/// The sysctl keys of a raw table, paired with their model key.
type RawSysctls<'a> = [(SysctlKey, Option<&'a Int>); 4];

/// The same four sysctl keys appear in [defaults] and [[interface]]
/// (separate fields, as `flatten` and `deny_unknown_fields` do not mix).
fn raw_sysctls<'a>(
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
    fn sysctls(&self) -> RawSysctls<'_> {
        raw_sysctls(&self.arp_ignore, &self.arp_announce, &self.rp_filter, &self.arp_filter)
    }
}

impl RawInterface {
    fn sysctls(&self) -> RawSysctls<'_> {
        raw_sysctls(&self.arp_ignore, &self.arp_announce, &self.rp_filter, &self.arp_filter)
    }
}

impl RawArpOnly {
    fn sysctls(&self) -> RawSysctls<'_> {
        raw_sysctls(&self.arp_ignore, &self.arp_announce, &None, &self.arp_filter)
    }
}

/// `gateway = G` or `gateway = [G, G]`, where G is `"a"` or
/// `{ address = "a", onlink = true }`. Hand-written visitors rather than
/// `#[serde(untagged)]`, which would lose the spans.
enum GatewayList {
    One(RawGateway),
    Many(Vec<Spanned<RawGateway>>),
}

enum RawGateway {
    Addr(String),
    Table(RawGatewayTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGatewayTable {
    address: Str,
    #[serde(default)]
    onlink: bool,
}

const GATEWAY_FORMS: &str =
    "a gateway address string, a table { address = \"...\", onlink = true }, or an array of them";

/// The string or table forms, shared by both visitors.
fn raw_gateway_from_map<'de, A: serde::de::MapAccess<'de>>(map: A) -> Result<RawGateway, A::Error> {
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
    fn into_items(self, span: Range<usize>) -> Vec<(Str, bool)> {
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

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

/// Parse and validate `text`; `file` is the path shown in messages.
pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
    parse_inheriting(file, text, None).map(|(cfg, _)| cfg)
}

/// Several files merged into one config, in the order given (a directory's
/// `*.toml` in name order, say): their interfaces together; `[defaults]`
/// in at most one of them, applying to all; an interface, an explicit
/// table or a listed address in two files is an error naming both places.
pub fn parse_many(inputs: &[(String, String)]) -> Result<Config, ConfigError> {
    if let [(file, text)] = inputs {
        return parse(file, text);
    }
    // [defaults] first: the file that has it gives them to the others.
    let mut with_defaults: Option<(&str, Defaults)> = None;
    for (file, text) in inputs {
        let (cfg, has_defaults) = parse_inheriting(file, text, None)?;
        if !has_defaults {
            continue;
        }
        if let Some((first, _)) = &with_defaults {
            return Err(ConfigError::at(
                file,
                text.find("[defaults]").map(|at| loc_of(text, at)),
                format!("[defaults] is also in {first}"),
                "[defaults] applies to every file: keep it in one of them",
            ));
        }
        with_defaults = Some((file, cfg.defaults));
    }
    let inherited = with_defaults.map(|(_, d)| d);
    let mut merged: Option<Config> = None;
    for (file, text) in inputs {
        let (cfg, _) = parse_inheriting(file, text, inherited.as_ref())?;
        let Some(all) = merged.as_mut() else {
            merged = Some(cfg);
            continue;
        };
        for iface in cfg.interfaces {
            check_across_files(&all.interfaces, &iface)?;
            if let Some(a) = all.arp_only.iter().find(|a| a.name == iface.name) {
                return Err(ConfigError::at(
                    file,
                    Some(iface.loc),
                    format!(
                        "interface \"{}\" is also an [[arp_only]] in an earlier file (at {})",
                        iface.name, a.loc
                    ),
                    "name each interface once across the files",
                ));
            }
            all.interfaces.push(iface);
        }
        for a in cfg.arp_only {
            if all.interfaces.iter().any(|i| i.name == a.name)
                || all.arp_only.iter().any(|b| b.name == a.name)
            {
                return Err(ConfigError::at(
                    file,
                    Some(a.loc),
                    format!("arp_only \"{}\" is also named in an earlier file", a.name),
                    "name each interface once across the files",
                ));
            }
            all.arp_only.push(a);
        }
        all.files.push(file.clone());
    }
    let mut cfg =
        merged.ok_or_else(|| ConfigError::at("(no file)", None, "no config file given", "name one"))?;
    cfg.file = cfg.files.join(" + ");
    assign_tables(&mut cfg, &BTreeMap::new(), &|_, _| false)?;
    Ok(cfg)
}

/// What must hold across files (each file checked these within itself).
fn check_across_files(earlier: &[Interface], iface: &Interface) -> Result<(), ConfigError> {
    let at = |i: &Interface, loc: Loc| format!("{}:{loc}", i.file);
    if let Some(first) = earlier.iter().find(|e| e.name == iface.name) {
        return Err(ConfigError::at(
            &iface.file,
            Some(iface.loc),
            format!("interface \"{}\" is also configured in {}", iface.name, at(first, first.loc)),
            "configure each interface in one file only",
        ));
    }
    if iface.table_explicit
        && let Some(first) = earlier.iter().find(|e| e.table_explicit && e.table == iface.table)
    {
        return Err(ConfigError::at(
            &iface.file,
            Some(iface.table_loc),
            format!(
                "interface \"{}\" uses table {}, as \"{}\" does in {}",
                iface.name,
                iface.table,
                first.name,
                at(first, first.table_loc)
            ),
            "each interface needs its own table: change one, or leave `table` out",
        ));
    }
    for spec in iface.addresses.iter().flatten() {
        let listed = earlier
            .iter()
            .find_map(|e| e.addresses.iter().flatten().find(|a| a.addr == spec.addr).map(|a| (e, a)));
        if let Some((first, a)) = listed {
            return Err(ConfigError::at(
                &iface.file,
                Some(spec.loc),
                format!(
                    "address {} of interface \"{}\" is already listed for interface \"{}\" in {}",
                    spec.addr,
                    iface.name,
                    first.name,
                    at(first, a.loc)
                ),
                "each address belongs to exactly one NIC: remove one of the two",
            ));
        }
    }
    Ok(())
}

/// `parse`, taking `inherited` defaults when the file has no [defaults];
/// also says whether it had one.
fn parse_inheriting(
    file: &str,
    text: &str,
    inherited: Option<&Defaults>,
) -> Result<(Config, bool), ConfigError> {
    let cx = Ctx { file, text };
    let raw: RawConfig = toml::from_str(text).map_err(|e| cx.toml_error(&e))?;
    let has_defaults = raw.defaults.is_some();
    let defaults = match (raw.defaults.as_ref(), inherited) {
        (None, Some(d)) => d.clone(),
        (given, _) => cx.defaults(given)?,
    };
    if raw.interface.is_empty() {
        return Err(ConfigError::at(
            file,
            None,
            format!("no [[interface]] in {file}"),
            "add one [[interface]] table per RDMA NIC, e.g. [[interface]] name = \"ib0\"",
        ));
    }
    let interfaces =
        raw.interface.into_iter().map(|ri| cx.interface(ri, &defaults)).collect::<Result<Vec<_>, _>>()?;
    cx.check_across(&interfaces)?;
    let arp_only = raw.arp_only.iter().map(|ra| cx.arp_only(ra, &defaults)).collect::<Result<Vec<_>, _>>()?;
    cx.check_arp_only_names(&interfaces, &arp_only)?;
    let mut cfg =
        Config { file: file.to_string(), files: vec![file.to_string()], defaults, interfaces, arp_only };
    // Provisional tables, before the host is read: the lowest free ones.
    assign_tables(&mut cfg, &BTreeMap::new(), &|_, _| false)?;
    Ok((cfg, has_defaults))
}

/// Gives every interface without an explicit `table` its table: the one it
/// had at the last apply (`kept`, by interface name) unless an explicit
/// table claims it, else the lowest id from `table_base` that is not
/// reserved, not taken by another interface of the config and not
/// `occupied(table, interface)` (used by routes or rules roce-route does
/// not own that are not that interface's own, as a hand-made setup of the
/// classic guide is). So an interface keeps its table across config edits:
/// dropping a rail never renumbers the others. Pure.
pub fn assign_tables(
    cfg: &mut Config,
    kept: &BTreeMap<String, u32>,
    occupied: &dyn Fn(u32, &str) -> bool,
) -> Result<(), ConfigError> {
    let mut taken: BTreeSet<u32> =
        cfg.interfaces.iter().filter(|i| i.table_explicit).map(|i| i.table).collect();
    let mut unassigned = Vec::new();
    for (k, iface) in cfg.interfaces.iter_mut().enumerate().filter(|(_, i)| !i.table_explicit) {
        match kept.get(&iface.name).filter(|t| !taken.contains(t) && model::reserved_table(**t).is_none()) {
            Some(t) => {
                iface.table = *t;
                taken.insert(*t);
            }
            None => unassigned.push(k),
        }
    }
    let mut next = cfg.defaults.table_base;
    for k in unassigned {
        let name = cfg.interfaces[k].name.clone();
        while taken.contains(&next) || occupied(next, &name) || model::reserved_table(next).is_some() {
            next = next.checked_add(1).ok_or_else(|| {
                let iface = &cfg.interfaces[k];
                ConfigError::at(
                    &cfg.file,
                    Some(iface.loc),
                    format!(
                        "interface \"{}\": no free table from table_base {} up to {}",
                        iface.name,
                        cfg.defaults.table_base,
                        u32::MAX
                    ),
                    "set `table` on this interface, or lower table_base in [defaults]",
                )
            })?;
        }
        cfg.interfaces[k].table = next;
        taken.insert(next);
    }
    Ok(())
}

/// What every check needs: the file name for messages and the text for
/// turning spans into positions.
struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

type Res<T> = Result<T, ConfigError>;

/// Which interface lists each address, and where.
type Owners<'i> = HashMap<IpAddr, (&'i str, &'i AddrSpec)>;

impl Ctx<'_> {
    fn loc<T>(&self, s: &Spanned<T>) -> Loc {
        loc_of(self.text, s.span().start)
    }

    fn err(&self, loc: Loc, what: impl Into<String>, hint: impl Into<String>) -> ConfigError {
        ConfigError::at(self.file, Some(loc), what, hint)
    }

    /// A TOML syntax or shape error, keeping toml's message and prefixing
    /// the key it concerns when the message does not say.
    fn toml_error(&self, e: &toml::de::Error) -> ConfigError {
        let span = e.span();
        let loc = span.as_ref().map(|s| loc_of(self.text, s.start));
        let message = e.message().trim_end().replace("expected i64", "expected an integer");
        let hint = toml_hint(&message);
        let what = match span.clone().and_then(|s| key_path_at(self.text, s.start)) {
            Some(path) => format!("`{path}`: {message}"),
            None if message == "duplicate key" => {
                let key = span.and_then(|s| self.text.get(s)).unwrap_or_default();
                format!("duplicate key `{key}`")
            }
            None => message,
        };
        ConfigError::at(self.file, loc, what, hint)
    }

    // --- [defaults] -------------------------------------------------------

    fn defaults(&self, raw: Option<&RawDefaults>) -> Res<Defaults> {
        let base = DEFAULT_SYSCTLS.into_iter().collect();
        let Some(raw) = raw else {
            return Ok(Defaults {
                table_base: DEFAULT_TABLE_BASE,
                priority: DEFAULT_PRIORITY,
                protocol: DEFAULT_PROTOCOL,
                sysctls: base,
                announce: DEFAULT_ANNOUNCE,
            });
        };
        let owner = "[defaults]";
        Ok(Defaults {
            table_base: match &raw.table_base {
                Some(v) => self.table_number(v, owner, "table_base")?,
                None => DEFAULT_TABLE_BASE,
            },
            priority: match &raw.priority {
                Some(v) => self.priority(v, owner)?,
                None => DEFAULT_PRIORITY,
            },
            protocol: match &raw.protocol {
                Some(v) => self.protocol(v)?,
                None => DEFAULT_PROTOCOL,
            },
            sysctls: self.sysctls(base, raw.sysctls(), owner)?,
            announce: match &raw.announce {
                Some(v) => self.announce(v)?,
                None => DEFAULT_ANNOUNCE,
            },
        })
    }

    /// A value that must fit a u32 table id (range only; reserved ids are
    /// checked on the table an interface ends up with).
    fn table_number(&self, v: &Int, owner: &str, key: &str) -> Res<u32> {
        u32::try_from(*v.get_ref()).map_err(|_| {
            self.err(
                self.loc(v),
                format!("{owner}: {key} = {} is out of range", v.get_ref()),
                format!("routing table ids are 1..={} (and 0, 253, 254, 255 are reserved)", u32::MAX),
            )
        })
    }

    fn priority(&self, v: &Int, owner: &str) -> Res<u32> {
        match u32::try_from(*v.get_ref()) {
            Ok(p) if (1..=MAX_PRIORITY).contains(&p) => Ok(p),
            _ => Err(self.err(
                self.loc(v),
                format!("{owner}: priority = {} is out of range 1..={MAX_PRIORITY}", v.get_ref()),
                "rule priority 0 is the kernel's `local` rule and 32766/32767 are `main` and \
                 `default`; pick 1..=32765 so the per-NIC rules come before `main`",
            )),
        }
    }

    fn protocol(&self, v: &Int) -> Res<u8> {
        check_protocol(*v.get_ref())
            .map_err(|(what, hint)| self.err(self.loc(v), format!("[defaults]: {what}"), hint))
    }

    fn announce(&self, v: &Int) -> Res<u32> {
        match u32::try_from(*v.get_ref()) {
            Ok(n) if n <= MAX_ANNOUNCE => Ok(n),
            _ => Err(self.err(
                self.loc(v),
                format!("[defaults]: announce = {} is out of range 0..={MAX_ANNOUNCE}", v.get_ref()),
                "announce is how many times apply announces each address of a rail it changed to the \
                 peers (gratuitous ARP, unsolicited neighbour advertisement), 100 ms apart; 0 turns it off",
            )),
        }
    }

    /// `base` overlaid by the keys set in `raw`, each checked against the
    /// values the kernel documents.
    fn sysctls(
        &self,
        mut base: BTreeMap<SysctlKey, u32>,
        raw: RawSysctls<'_>,
        owner: &str,
    ) -> Res<BTreeMap<SysctlKey, u32>> {
        for (key, v) in raw {
            let Some(v) = v else { continue };
            match u32::try_from(*v.get_ref()) {
                Ok(n) if key.valid(n) => {
                    base.insert(key, n);
                }
                _ => {
                    return Err(self.err(
                        self.loc(v),
                        format!("{owner}: {} = {} is not a valid value", key.name(), v.get_ref()),
                        format!("{} takes {}", key.name(), key.valid_values()),
                    ));
                }
            }
        }
        Ok(base)
    }

    // --- [[interface]] ----------------------------------------------------

    fn interface(&self, raw: RawInterface, d: &Defaults) -> Res<Interface> {
        let loc = self.loc(&raw.name);
        self.check_ifname(&raw.name)?;
        let name = raw.name.get_ref().clone();
        let who = format!("interface \"{name}\"");
        let table_explicit = raw.table.is_some();
        // Without `table`: given by `assign_tables` once every interface is read.
        let (table, table_loc) = match &raw.table {
            Some(v) => (self.explicit_table(v, &who)?, self.loc(v)),
            None => (d.table_base, loc),
        };
        let (priority, priority_loc) = match &raw.priority {
            Some(v) => (self.priority(v, &who)?, self.loc(v)),
            None => (d.priority, loc),
        };
        let sysctls = self.sysctls(d.sysctls.clone(), raw.sysctls(), &who)?;
        let addresses = raw.addresses.map(|list| self.addresses(list, &who)).transpose()?;
        let gateways = match raw.gateway {
            Some(g) => self.gateways(g.span(), g.into_inner(), &who)?,
            None => Vec::new(),
        };
        for gw in &gateways {
            self.check_on_link(gw, addresses.as_deref(), &who)?;
        }
        Ok(Interface {
            name,
            file: self.file.to_string(),
            loc,
            addresses,
            gateways,
            table,
            table_explicit,
            table_loc,
            priority,
            priority_loc,
            sysctls,
        })
    }

    // --- [[arp_only]] -----------------------------------------------------

    fn arp_only(&self, raw: &RawArpOnly, d: &Defaults) -> Res<ArpOnly> {
        self.check_ifname(&raw.name)?;
        let name = raw.name.get_ref().clone();
        let base =
            d.sysctls.iter().filter(|(k, _)| ARP_ONLY_KEYS.contains(k)).map(|(k, v)| (*k, *v)).collect();
        let sysctls = self.sysctls(base, raw.sysctls(), &format!("arp_only \"{name}\""))?;
        Ok(ArpOnly { name, loc: self.loc(&raw.name), sysctls })
    }

    /// An `[[arp_only]]` name is neither a rail nor listed twice.
    fn check_arp_only_names(&self, ifaces: &[Interface], arp_only: &[ArpOnly]) -> Res<()> {
        for (k, a) in arp_only.iter().enumerate() {
            if let Some(rail) = ifaces.iter().find(|i| i.name == a.name) {
                return Err(self.err(
                    a.loc,
                    format!("arp_only \"{}\" is also an [[interface]] (at {})", a.name, rail.loc),
                    "an [[interface]] gets its ARP sysctls already; [[arp_only]] is for an interface \
                     outside the rails (e.g. the management NIC): remove one of the two",
                ));
            }
            if let Some(first) = arp_only[..k].iter().find(|f| f.name == a.name) {
                return Err(self.err(
                    a.loc,
                    format!("arp_only \"{}\" is listed twice (first at {})", a.name, first.loc),
                    "remove one of the two [[arp_only]] tables",
                ));
            }
        }
        Ok(())
    }

    fn check_ifname(&self, name: &Str) -> Res<()> {
        match ifname_problem(name.get_ref()) {
            Some((what, hint)) => Err(self.err(self.loc(name), format!("interface name {what}"), hint)),
            None => Ok(()),
        }
    }

    fn explicit_table(&self, v: &Int, who: &str) -> Res<u32> {
        let t = self.table_number(v, who, "table")?;
        match model::reserved_table(t) {
            Some(kind) => Err(self.err(
                self.loc(v),
                format!("{who}: table = {t} is reserved by the kernel ({kind})"),
                "tables 0, 253, 254 and 255 are the kernel's; pick another id, e.g. 100",
            )),
            None => Ok(t),
        }
    }

    fn addresses(&self, list: Spanned<Vec<Str>>, who: &str) -> Res<Vec<AddrSpec>> {
        if list.get_ref().is_empty() {
            return Err(self.err(
                self.loc(&list),
                format!("{who}: `addresses` is an empty list"),
                "omit the `addresses` key to take every global address of the interface",
            ));
        }
        list.get_ref().iter().map(|s| self.addr_spec(s, who)).collect()
    }

    fn addr_spec(&self, s: &Str, who: &str) -> Res<AddrSpec> {
        let loc = self.loc(s);
        let text = s.get_ref().as_str();
        let (ip_text, len_text) = match text.split_once('/') {
            Some((ip, len)) => (ip, Some(len)),
            None => (text, None),
        };
        let addr: IpAddr = ip_text.parse().map_err(|_| {
            self.err(
                loc,
                format!("{who}: address \"{text}\" is not an IP address"),
                "write an IPv4 or IPv6 address, optionally with a prefix length, e.g. \
                 \"192.168.1.10/24\" or \"2001:db8::10/64\"",
            )
        })?;
        let len = match len_text {
            Some(l) => Some(self.prefix_len(addr, l, text, who, loc)?),
            None => None,
        };
        let spec = AddrSpec { addr, len, loc };
        if let Some(why) = unusable_address(spec.addr, spec.len) {
            return Err(self.err(
                loc,
                format!("{who}: address \"{text}\" is {why}"),
                "list the NIC's own unicast host address (e.g. 198.51.100.10/24), not a \
                 subnet, broadcast, multicast, loopback or unspecified address",
            ));
        }
        Ok(spec)
    }

    fn prefix_len(&self, addr: IpAddr, len: &str, text: &str, who: &str, loc: Loc) -> Res<u8> {
        let max = Family::of(&addr).max_len();
        let parsed = if len.bytes().all(|b| b.is_ascii_digit()) { len.parse::<u8>().ok() } else { None };
        match parsed {
            Some(n) if n <= max => Ok(n),
            Some(n) => Err(self.err(
                loc,
                format!("{who}: prefix length {n} in \"{text}\" is longer than {max} bits"),
                format!("{} prefix lengths are 0..={max}", Family::of(&addr).name()),
            )),
            None => Err(self.err(
                loc,
                format!("{who}: prefix length \"{len}\" in \"{text}\" is not a number"),
                format!(
                    "write the prefix length as a number 0..={max} after '/', or leave \"/len\" \
                     out to use the length the interface has"
                ),
            )),
        }
    }

    fn gateways(&self, span: Range<usize>, list: GatewayList, who: &str) -> Res<Vec<Gateway>> {
        let mut out: Vec<Gateway> = Vec::new();
        for (s, onlink) in &list.into_items(span) {
            let gw = self.gateway(s, *onlink, who)?;
            if let Some(first) = out.iter().find(|g| Family::of(&g.addr) == Family::of(&gw.addr)) {
                return Err(self.err(
                    gw.loc,
                    format!(
                        "{who}: second {} gateway {} (the first is {} at {})",
                        Family::of(&gw.addr).name(),
                        gw.addr,
                        first.addr,
                        first.loc
                    ),
                    "give at most one IPv4 and one IPv6 gateway per interface",
                ));
            }
            out.push(gw);
        }
        Ok(out)
    }

    fn gateway(&self, s: &Str, onlink: bool, who: &str) -> Res<Gateway> {
        let loc = self.loc(s);
        let text = s.get_ref().as_str();
        let addr: IpAddr = text.parse().map_err(|_| {
            self.err(
                loc,
                format!("{who}: gateway \"{text}\" is not an IP address"),
                "a gateway is a bare IPv4 or IPv6 address without /len, e.g. \"192.168.1.1\"",
            )
        })?;
        if let Some(why) = special_address(addr) {
            return Err(self.err(
                loc,
                format!("{who}: gateway {addr} is {why}"),
                "a gateway is the unicast address of a router on the NIC's subnet",
            ));
        }
        Ok(Gateway { addr, loc, onlink })
    }

    /// With explicit prefixes in `addresses`, the gateway must be inside one
    /// of them; bare addresses (or none) leave that to the host check.
    fn check_on_link(&self, gw: &Gateway, addrs: Option<&[AddrSpec]>, who: &str) -> Res<()> {
        let Some(addrs) = addrs else { return Ok(()) };
        let fam = Family::of(&gw.addr);
        let same: Vec<&AddrSpec> = addrs.iter().filter(|a| Family::of(&a.addr) == fam).collect();
        if same.is_empty() {
            return Err(self.err(
                gw.loc,
                format!(
                    "{who}: gateway {} is {} but `addresses` lists no {} address",
                    gw.addr,
                    Family::of(&gw.addr).name(),
                    Family::of(&gw.addr).name()
                ),
                "add an address of that family, remove the gateway, or omit `addresses` \
                 to take every global address of the interface",
            ));
        }
        if model::is_v6_link_local(gw.addr) {
            return Ok(());
        }
        let Some(prefixes) = same.iter().map(|a| a.prefix()).collect::<Option<Vec<_>>>() else {
            return Ok(());
        };
        match prefixes.iter().find(|p| p.contains(&gw.addr)) {
            // Declared on-link: no subnet needs to hold it.
            None if gw.onlink => Ok(()),
            // A /31, /32, /127 or /128 may be one end of a point-to-point
            // link (`ip addr add A peer P/LEN`) whose subnet is the peer's:
            // only the host knows, and the plan checks the gateway there.
            None if prefixes.iter().any(|p| p.len + 1 >= p.family().max_len()) => Ok(()),
            None => Err(self.err(
                gw.loc,
                format!(
                    "{who}: gateway {} is outside every subnet of the interface ({})",
                    gw.addr,
                    join(prefixes.iter().map(|p| p.network()))
                ),
                off_link_hint(gw.addr),
            )),
            Some(p) => match v4_subnet_role(gw.addr, p.len) {
                Some(role) => Err(self.err(
                    gw.loc,
                    format!("{who}: gateway {} is the {role} address of {}", gw.addr, p.network()),
                    "a gateway is a router's host address inside the subnet",
                )),
                None => Ok(()),
            },
        }
    }

    // --- across interfaces ------------------------------------------------

    fn check_across(&self, ifaces: &[Interface]) -> Res<()> {
        self.check_unique_names(ifaces)?;
        self.check_unique_tables(ifaces)?;
        let owners = self.check_unique_addresses(ifaces)?;
        self.check_gateways_not_local(ifaces, &owners)
    }

    fn check_unique_names(&self, ifaces: &[Interface]) -> Res<()> {
        match first_duplicate(ifaces.iter().map(|i| (i.name.as_str(), i))) {
            Some((first, second)) => Err(self.err(
                second.loc,
                format!("interface \"{}\" is listed twice (first at {})", second.name, first.loc),
                "merge the two [[interface]] tables into one",
            )),
            None => Ok(()),
        }
    }

    /// Explicit tables are unique; the others are given at apply time.
    fn check_unique_tables(&self, ifaces: &[Interface]) -> Res<()> {
        match first_duplicate(ifaces.iter().filter(|i| i.table_explicit).map(|i| (i.table, i))) {
            Some((first, second)) => Err(self.err(
                second.table_loc,
                format!(
                    "interfaces \"{}\" (at {}) and \"{}\" both use table {}",
                    first.name, first.table_loc, second.name, second.table
                ),
                "each interface needs its own table: change `table`, or leave it out to get \
                 a free table from table_base",
            )),
            None => Ok(()),
        }
    }

    /// Every address is configured once; returns who owns each address.
    fn check_unique_addresses<'i>(&self, ifaces: &'i [Interface]) -> Res<Owners<'i>> {
        let all = ifaces.iter().flat_map(|i| {
            let name = i.name.as_str();
            i.addresses.iter().flatten().map(move |a| (a.addr, (name, a)))
        });
        let uses: Vec<AddrUse<'_>> = all
            .clone()
            .map(|(addr, (iface, spec))| AddrUse {
                iface,
                file: self.file,
                addr,
                origin: AddrOrigin::Listed(spec.loc),
            })
            .collect();
        check_unique_addresses(&uses)?;
        Ok(all.collect())
    }

    fn check_gateways_not_local(&self, ifaces: &[Interface], owners: &Owners<'_>) -> Res<()> {
        for iface in ifaces {
            for gw in &iface.gateways {
                if let Some((owner, spec)) = owners.get(&gw.addr) {
                    let whose = if *owner == iface.name {
                        "one of its own addresses".to_string()
                    } else {
                        format!("an address of interface \"{owner}\"")
                    };
                    return Err(self.err(
                        gw.loc,
                        format!(
                            "interface \"{}\": gateway {} is {whose} (at {})",
                            iface.name, gw.addr, spec.loc
                        ),
                        "a gateway is another host (the router), never an address of this host",
                    ));
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Checks shared with the plan
// ---------------------------------------------------------------------------

/// Where an interface's address comes from, for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrOrigin {
    /// Listed in `addresses`, at this position.
    Listed(Loc),
    /// Found on the host because the interface lists no `addresses`; the
    /// position of the interface's `name`.
    Discovered(Loc),
}

/// One address an interface will make a source rule for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrUse<'a> {
    pub iface: &'a str,
    /// The file the interface is configured in.
    pub file: &'a str,
    pub addr: IpAddr,
    pub origin: AddrOrigin,
}

/// Every address is listed for one configured interface only: a source
/// rule sends an address's traffic to one table, so a second rule for it
/// never matches. Two listings are the config's fault: an error at the
/// second. The discovered uses in `uses` are not checked here: an address
/// the host has on two interfaces is the host's state, which the plan
/// settles (not ready where it is not owned).
pub(crate) fn check_unique_addresses(uses: &[AddrUse<'_>]) -> Result<(), ConfigError> {
    let listed = uses.iter().filter_map(|u| match u.origin {
        AddrOrigin::Listed(at) => Some((u.addr, (u, at))),
        AddrOrigin::Discovered(_) => None,
    });
    let Some(((first, at), (second, loc))) = first_duplicate(listed) else {
        return Ok(());
    };
    let at = if first.file == second.file { at.to_string() } else { format!("{}:{at}", first.file) };
    Err(ConfigError::at(
        second.file,
        Some(loc),
        format!(
            "address {} of interface \"{}\" is already listed for interface \"{}\" at {at}",
            second.addr, second.iface, first.iface
        ),
        "each address belongs to exactly one NIC: remove one of the two",
    ))
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

/// The first key seen twice, as (first item, second item).
fn first_duplicate<K: Eq + Hash, T: Copy>(items: impl IntoIterator<Item = (K, T)>) -> Option<(T, T)> {
    let mut seen = HashMap::new();
    for (k, item) in items {
        if let Some(first) = seen.insert(k, item) {
            return Some((first, item));
        }
    }
    None
}

/// The dotted path (`interface[1].table`) of the key at `offset` or of the
/// innermost key whose value holds it, when `text` is well-formed TOML.
fn key_path_at(text: &str, offset: usize) -> Option<String> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let mut path = Vec::new();
    path_in_table(doc.get_ref(), offset, &mut path).then(|| path.join("."))
}

fn path_in_table(table: &toml::de::DeTable<'_>, offset: usize, path: &mut Vec<String>) -> bool {
    for (key, value) in table {
        path.push(key.get_ref().to_string());
        if key.span().contains(&offset) || path_in_value(value, offset, path) {
            return true;
        }
        path.pop();
    }
    false
}

fn path_in_value(value: &Spanned<toml::de::DeValue<'_>>, offset: usize, path: &mut Vec<String>) -> bool {
    match value.get_ref() {
        toml::de::DeValue::Table(t) if path_in_table(t, offset, path) => return true,
        toml::de::DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let key = path.pop().unwrap_or_default();
                path.push(format!("{key}[{i}]"));
                if path_in_value(item, offset, path) {
                    return true;
                }
                path.pop();
                path.push(key);
            }
        }
        _ => {}
    }
    value.span().contains(&offset)
}

fn toml_hint(message: &str) -> &'static str {
    if message.starts_with("duplicate key") {
        "a key may appear once per table: remove one of the two"
    } else if message.starts_with("unknown field") {
        "remove the key or fix its spelling; the keys this table accepts are listed above"
    } else if message.starts_with("missing field `address`") {
        "a gateway table needs the router's address: gateway = { address = \"203.0.113.1\", onlink = true }"
    } else if message.starts_with("missing field") {
        "add the key: every [[interface]] and [[arp_only]] needs at least `name`"
    } else if message.starts_with("invalid type") || message.starts_with("invalid value") {
        "check the value's type: numbers are bare (table = 100), names and addresses are \
         quoted strings (name = \"ib0\")"
    } else {
        "fix the TOML syntax at this position"
    }
}

/// Why Linux would refuse `n` as an interface name (`dev_valid_name()`),
/// plus ':', which only alias labels carry: (what, hint).
fn ifname_problem(n: &str) -> Option<(String, &'static str)> {
    if n == "all" || n == "default" {
        let hint = "the kernel keeps these names for /proc/sys/net/ipv4/conf/{all,default} and \
                    refuses them for interfaces; roce-route never writes conf/all or conf/default";
        return Some((format!("\"{n}\" is reserved"), hint));
    }
    let (what, hint) = match sysctl::ifname_problem(n)? {
        NameProblem::Empty => ("is empty".to_string(), "give the kernel's name of the NIC, e.g. \"ib0\""),
        NameProblem::Dots => {
            (format!("\"{n}\" is not allowed"), "\".\" and \"..\" are refused by the kernel")
        }
        NameProblem::TooLong => (
            format!("\"{n}\" is {} bytes long, more than {MAX_IFNAME_BYTES}", n.len()),
            "Linux interface names are at most 15 bytes; `ip link` shows the real name",
        ),
        NameProblem::Slash => (format!("\"{n}\" contains '/'"), "Linux interface names cannot contain '/'"),
        NameProblem::Colon => (
            format!("\"{n}\" contains ':'"),
            "a name with ':' is an address alias label, not an interface: name the \
             interface itself and list the alias's address in its `addresses`",
        ),
        NameProblem::Blank => (
            format!("{n:?} contains whitespace or NUL"),
            "Linux interface names cannot contain spaces, tabs, newlines or NUL",
        ),
    };
    Some((what, hint))
}

/// Why no host may use `ip` as its own address or as a gateway.
fn special_address(ip: IpAddr) -> Option<&'static str> {
    if ip.is_multicast() {
        Some("a multicast address")
    } else if ip.is_unspecified() {
        Some("the unspecified address")
    } else if ip.is_loopback() {
        Some("a loopback address")
    } else if matches!(ip, IpAddr::V4(a) if a == Ipv4Addr::BROADCAST) {
        Some("the limited broadcast address")
    } else {
        None
    }
}

/// "network" or "broadcast" when `ip` is that address of its IPv4 subnet
/// (only subnets larger than /31 have them).
pub(crate) fn v4_subnet_role(ip: IpAddr, len: u8) -> Option<&'static str> {
    let IpAddr::V4(a) = ip else { return None };
    if len >= 31 {
        return None;
    }
    let host_bits = u32::MAX >> len;
    match u32::from(a) & host_bits {
        0 => Some("network"),
        h if h == host_bits => Some("broadcast"),
        _ => None,
    }
}

/// Why `addr` (with prefix length `len`, when known) cannot be a NIC's own
/// address: listed in `addresses`, or found on the host when none are.
pub(crate) fn unusable_address(addr: IpAddr, len: Option<u8>) -> Option<String> {
    if let Some(why) = special_address(addr) {
        return Some(why.to_string());
    }
    let len = len?;
    if len == 0 {
        return Some("a /0 prefix, which would claim the whole address space".to_string());
    }
    let role = v4_subnet_role(addr, len)?;
    let net = Prefix::new(addr, len).network();
    Some(format!("the {role} address of {net}, not a host address"))
}

/// What to do about a gateway outside every subnet of its interface.
pub(crate) fn off_link_hint(gw: IpAddr) -> String {
    format!(
        "a gateway must be on-link: fix the gateway or the prefix length of the address; if the \
         router is reached on the link although no subnet holds it (a /32 host address), say so: \
         gateway = {{ address = \"{gw}\", onlink = true }}"
    )
}

fn join<T: fmt::Display>(items: impl Iterator<Item = T>) -> String {
    items.map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key, every gateway form; also a seed of tests/fuzz_config.rs.
    const FULL: &str = include_str!("../tests/fixtures/full.toml");

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn loc(line: usize, col: usize) -> Loc {
        Loc { line, col }
    }

    fn ok(text: &str) -> Config {
        parse("t.toml", text).unwrap_or_else(|e| panic!("unexpected error:\n{e}"))
    }

    fn err(text: &str) -> ConfigError {
        match parse("t.toml", text) {
            Ok(c) => panic!("expected an error, got {c:#?}"),
            Err(e) => e,
        }
    }

    /// One interface "ib0" whose extra keys start on line 3.
    fn iface(body: &str) -> String {
        format!("[[interface]]\nname = \"ib0\"\n{body}")
    }

    /// `[[interface]]` tables with just these names, two lines each.
    fn named(names: &[&str]) -> String {
        names.iter().map(|n| format!("[[interface]]\nname = \"{n}\"\n")).collect()
    }

    /// The error is at `line:col`, its text contains every needle, and it
    /// has a hint.
    fn assert_err(text: &str, line: usize, col: usize, needles: &[&str]) -> ConfigError {
        let e = err(text);
        let shown = e.to_string();
        assert_eq!(e.loc, Some(loc(line, col)), "wrong position in:\n{shown}\nfor:\n{text}");
        assert!(shown.starts_with(&format!("t.toml:{line}:{col}: ")), "{shown}");
        for n in needles {
            assert!(shown.contains(n), "{n:?} missing from:\n{shown}");
        }
        assert!(!e.hint.is_empty(), "no hint in:\n{shown}");
        e
    }

    fn sysctls(pairs: &[(SysctlKey, u32)]) -> BTreeMap<SysctlKey, u32> {
        pairs.iter().copied().collect()
    }

    // --- valid configs ------------------------------------------------------

    #[test]
    fn full_config() {
        let c = ok(FULL);
        assert_eq!(c.file, "t.toml");
        assert_eq!(
            c.defaults,
            Defaults {
                table_base: 200,
                priority: 900,
                protocol: 250,
                announce: 2,
                sysctls: sysctls(&[
                    (SysctlKey::ArpIgnore, 2),
                    (SysctlKey::ArpAnnounce, 1),
                    (SysctlKey::RpFilter, 2),
                    (SysctlKey::ArpFilter, 1),
                ]),
            }
        );
        assert_eq!(c.interfaces.len(), 3);
        let ib0 = &c.interfaces[0];
        assert_eq!(ib0.name, "ib0");
        assert_eq!(ib0.loc, loc(12, 8));
        assert_eq!(
            ib0.addresses,
            Some(vec![
                AddrSpec { addr: ip("192.168.1.10"), len: Some(24), loc: loc(13, 14) },
                AddrSpec { addr: ip("2001:db8::10"), len: Some(64), loc: loc(13, 33) },
                AddrSpec { addr: ip("192.168.1.11"), len: None, loc: loc(13, 52) },
            ])
        );
        assert_eq!(
            ib0.gateways,
            vec![
                Gateway { addr: ip("192.168.1.1"), loc: loc(14, 12), onlink: false },
                Gateway { addr: ip("2001:db8::1"), loc: loc(14, 27), onlink: false },
            ]
        );
        assert_eq!((ib0.table, ib0.table_loc), (100, loc(15, 9)));
        assert_eq!((ib0.priority, ib0.priority_loc), (1000, loc(16, 12)));
        assert_eq!(
            ib0.sysctls,
            sysctls(&[
                (SysctlKey::ArpIgnore, 1),
                (SysctlKey::ArpAnnounce, 2),
                (SysctlKey::RpFilter, 0),
                (SysctlKey::ArpFilter, 0),
            ])
        );
        let ib1 = &c.interfaces[1];
        assert_eq!(ib1.loc, loc(23, 8));
        assert_eq!(ib1.addresses, None);
        assert_eq!(ib1.gateways, vec![Gateway { addr: ip("fe80::1"), loc: loc(24, 11), onlink: false }]);
        // No `table`: the lowest free from table_base (ib0's 100 is below
        // it); the rest from [defaults].
        assert_eq!((ib1.table, ib1.table_loc), (200, ib1.loc));
        assert!(ib0.table_explicit && !ib1.table_explicit);
        assert_eq!((ib1.priority, ib1.priority_loc), (900, ib1.loc));
        assert_eq!(ib1.sysctls, c.defaults.sysctls);
        let ib2 = &c.interfaces[2];
        assert_eq!(ib2.gateways, vec![Gateway { addr: ip("203.0.113.1"), loc: loc(29, 23), onlink: true }]);
    }

    #[test]
    fn defaults_applied() {
        let c = ok("[[interface]]\nname = \"a\"\n[[interface]]\nname = \"b\"\n\
                    [[interface]]\nname = \"c\"\n");
        assert_eq!(c.defaults.table_base, DEFAULT_TABLE_BASE);
        assert_eq!(c.defaults.priority, DEFAULT_PRIORITY);
        assert_eq!(c.defaults.protocol, DEFAULT_PROTOCOL);
        assert_eq!(DEFAULT_PROTOCOL, 234);
        let expected = sysctls(&[(SysctlKey::ArpIgnore, 1), (SysctlKey::ArpAnnounce, 2)]);
        assert_eq!(c.defaults.sysctls, expected);
        for (pos, i) in c.interfaces.iter().enumerate() {
            assert_eq!(i.table, 100 + pos as u32);
            assert_eq!(i.priority, 1000);
            assert_eq!(i.sysctls, expected, "rp_filter and arp_filter are not managed");
            assert_eq!(i.addresses, None);
            assert!(i.gateways.is_empty());
            assert_eq!(i.loc, loc(2 * pos + 2, 8));
            assert_eq!(i.table_loc, i.loc);
            assert_eq!(i.priority_loc, i.loc);
        }
        // An empty [defaults] table changes nothing.
        let d = ok("[defaults]\n[[interface]]\nname = \"a\"\n");
        assert_eq!(d.defaults, c.defaults);
    }

    #[test]
    fn overrides() {
        let c = ok("[defaults]\ntable_base = 10\npriority = 5\nprotocol = 5\nrp_filter = 1\n\
                    [[interface]]\nname = \"a\"\ntable = 7\npriority = 32765\narp_ignore = 8\n\
                    arp_filter = 1\n[[interface]]\nname = \"b\"\n");
        assert_eq!(c.defaults.protocol, 5);
        let a = &c.interfaces[0];
        assert_eq!((a.table, a.table_loc), (7, loc(8, 9)));
        assert_eq!((a.priority, a.priority_loc), (32765, loc(9, 12)));
        assert_eq!(
            a.sysctls,
            sysctls(&[
                (SysctlKey::ArpIgnore, 8),
                (SysctlKey::ArpAnnounce, 2),
                (SysctlKey::RpFilter, 1),
                (SysctlKey::ArpFilter, 1),
            ])
        );
        let b = &c.interfaces[1];
        assert_eq!((b.table, b.priority), (10, 5));
        assert_eq!(
            b.sysctls,
            sysctls(&[(SysctlKey::ArpIgnore, 1), (SysctlKey::ArpAnnounce, 2), (SysctlKey::RpFilter, 1),])
        );
        assert_eq!(ok("[defaults]\nprotocol = 255\n[[interface]]\nname = \"a\"\n").defaults.protocol, 255);
    }

    #[test]
    fn gateway_as_string_and_as_array() {
        let one = ok(&iface("gateway = \"10.0.0.1\"\n"));
        assert_eq!(
            one.interfaces[0].gateways,
            vec![Gateway { addr: ip("10.0.0.1"), loc: loc(3, 11), onlink: false }]
        );
        let two = ok(&iface("gateway = [\"2001:db8::1\",\n  \"10.0.0.1\"]\n"));
        assert_eq!(
            two.interfaces[0].gateways,
            vec![
                Gateway { addr: ip("2001:db8::1"), loc: loc(3, 12), onlink: false },
                Gateway { addr: ip("10.0.0.1"), loc: loc(4, 3), onlink: false },
            ]
        );
        let none = ok(&iface("gateway = []\n"));
        assert!(none.interfaces[0].gateways.is_empty());
    }

    #[test]
    fn on_link_check_only_with_explicit_prefixes() {
        // Bare addresses: the host's prefix decides, later.
        ok(&iface("addresses = [\"10.0.0.5\"]\ngateway = \"172.16.0.1\"\n"));
        // No addresses at all: same.
        ok(&iface("gateway = [\"172.16.0.1\", \"2001:db8::1\"]\n"));
        // Inside one of several subnets.
        ok(&iface("addresses = [\"10.0.0.5/24\", \"10.1.0.5/16\"]\ngateway = \"10.1.200.1\"\n"));
        // IPv6 link-local gateways are always on-link.
        ok(&iface("addresses = [\"2001:db8::5/64\"]\ngateway = \"fe80::1\"\n"));
        // /31 and /32 have no network or broadcast address.
        ok(&iface("addresses = [\"198.51.100.0/31\", \"198.51.100.7/32\"]\n"));
        ok(&iface("addresses = [\"198.51.100.1/31\"]\ngateway = \"198.51.100.0\"\n"));
    }

    /// Point-to-point sized addresses may have a peer elsewhere
    /// (`ip addr add 198.51.100.1/32 peer 198.51.100.0/32`): the gateway is
    /// then checked against the peer's subnet by the plan, on the host.
    #[test]
    fn on_link_check_waits_for_the_host_for_point_to_point_sizes() {
        for (a, gw) in [
            ("198.51.100.1/32", "198.51.100.0"),
            ("198.51.100.9/31", "203.0.113.0"),
            ("2001:db8::1/128", "2001:db8::2"),
            ("2001:db8::1/127", "2001:db8:1::"),
        ] {
            ok(&iface(&format!("addresses = [\"{a}\"]\ngateway = \"{gw}\"\n")));
        }
        // A /30 or /64 has no such excuse.
        assert_err(
            &iface("addresses = [\"198.51.100.9/30\"]\ngateway = \"203.0.113.0\"\n"),
            4,
            11,
            &["gateway 203.0.113.0 is outside every subnet of the interface (198.51.100.8/30)"],
        );
        assert_err(
            &iface("addresses = [\"2001:db8::1/64\"]\ngateway = \"2001:db8:1::1\"\n"),
            4,
            11,
            &["outside every subnet"],
        );
    }

    /// BGP to the host: a /32 on the NIC and a router outside every subnet,
    /// reached `onlink`. Table form alone, in an array with strings, and as
    /// a sub-table.
    #[test]
    fn onlink_gateway_forms() {
        let onlink = |addr: &str, line, col| Gateway { addr: ip(addr), loc: loc(line, col), onlink: true };
        let plain = |addr: &str, line, col| Gateway { addr: ip(addr), loc: loc(line, col), onlink: false };
        let c = ok(&iface(
            "addresses = [\"198.51.100.7/32\"]\ngateway = { address = \"203.0.113.1\", onlink = true }\n",
        ));
        assert_eq!(c.interfaces[0].gateways, [onlink("203.0.113.1", 4, 23)]);
        // Outside a /24 too: onlink says the router is on the link anyway.
        let c = ok(&iface(
            "addresses = [\"198.51.100.7/24\", \"2001:db8::7/64\"]\n\
             gateway = [{ address = \"203.0.113.1\", onlink = true }, \"2001:db8::1\"]\n",
        ));
        assert_eq!(c.interfaces[0].gateways, [onlink("203.0.113.1", 4, 24), plain("2001:db8::1", 4, 56)]);
        let c = ok(&iface(
            "gateway = [{ address = \"2001:db8:ffff::1\", onlink = true }, { address = \"203.0.113.1\" }]\n",
        ));
        assert_eq!(
            c.interfaces[0].gateways,
            [onlink("2001:db8:ffff::1", 3, 24), plain("203.0.113.1", 3, 73)]
        );
        let c = ok(
            "[[interface]]\nname = \"rail0\"\n[interface.gateway]\naddress = \"203.0.113.1\"\nonlink = true\n",
        );
        assert_eq!(c.interfaces[0].gateways, [onlink("203.0.113.1", 4, 11)]);
    }

    #[test]
    fn onlink_gateway_errors() {
        // Without onlink (or with onlink = false) it is still off-link, and
        // the hint says how to declare it.
        for g in ["\"203.0.113.1\"", "{ address = \"203.0.113.1\", onlink = false }"] {
            let text = iface(&format!("addresses = [\"198.51.100.7/24\"]\ngateway = {g}\n"));
            let col = if g.starts_with('{') { 23 } else { 11 };
            let e = assert_err(&text, 4, col, &["gateway 203.0.113.1 is outside every subnet"]);
            assert!(e.hint.contains("gateway = { address = \"203.0.113.1\", onlink = true }"), "{e}");
        }
        // The other checks of a gateway still apply to the table form.
        assert_err(
            &iface("gateway = { address = \"203.0.113.x\", onlink = true }\n"),
            3,
            23,
            &["gateway \"203.0.113.x\" is not an IP address"],
        );
        assert_err(
            &iface("gateway = { address = \"224.0.0.1\", onlink = true }\n"),
            3,
            23,
            &["gateway 224.0.0.1 is a multicast address"],
        );
        assert_err(
            &iface(
                "addresses = [\"2001:db8::7/128\"]\ngateway = { address = \"203.0.113.1\", onlink = true }\n",
            ),
            4,
            23,
            &["gateway 203.0.113.1 is IPv4 but `addresses` lists no IPv4 address"],
        );
        assert_err(
            &iface("gateway = [{ address = \"203.0.113.1\", onlink = true }, \"198.51.100.1\"]\n"),
            3,
            56,
            &["second IPv4 gateway 198.51.100.1 (the first is 203.0.113.1 at 3:24)"],
        );
        assert_err(
            &iface(
                "addresses = [\"198.51.100.7/32\"]\ngateway = { address = \"198.51.100.7\", onlink = true }\n",
            ),
            4,
            23,
            &["gateway 198.51.100.7 is one of its own addresses"],
        );
        // Shape errors name the key.
        let e = err(&iface("gateway = { address = \"203.0.113.1\", onlnk = true }\n"));
        assert!(e.to_string().contains("unknown field `onlnk`, expected `address` or `onlink`"), "{e}");
        assert_eq!(e.loc.map(|l| l.line), Some(3), "{e}");
        let e = err(&iface("gateway = { onlink = true }\n"));
        assert!(e.to_string().contains("missing field `address`"), "{e}");
        assert!(e.hint.contains("address"), "{e}");
        assert_eq!(e.loc.map(|l| l.line), Some(3), "{e}");
        let e = err(&iface("gateway = { address = \"203.0.113.1\", onlink = \"yes\" }\n"));
        assert!(e.to_string().contains("invalid type"), "{e}");
        assert_eq!(e.loc, Some(loc(3, 47)), "{e}");
    }

    #[test]
    fn names_at_the_edge_of_validity() {
        ok("[[interface]]\nname = \"enp1s0f0np0.123\"\n");
        ok("[[interface]]\nname = \"a-b_c.d@e\"\n");
    }

    // --- TOML shape errors --------------------------------------------------

    #[test]
    fn malformed_toml() {
        assert_err("[[interface]\nname = \"ib0\"\n", 1, 13, &["unclosed array table"]);
        assert_err(&iface("table = \n"), 3, 9, &["t.toml:3:9"]);
        assert_err(&iface("addresses = [\"10.0.0.1/24\"\n"), 3, 27, &["unclosed array"]);
        assert_err(&iface("table = 1\ntable = 2\n"), 4, 1, &["duplicate key `table`"]);
    }

    #[test]
    fn unknown_keys() {
        assert_err("bogus = 1\n[[interface]]\nname = \"ib0\"\n", 1, 1, &["`bogus`"]);
        assert_err(
            "[defaults]\n  tablebase = 1\n[[interface]]\nname = \"a\"\n",
            2,
            3,
            &["`defaults.tablebase`: unknown field `tablebase`"],
        );
        assert_err(
            &iface("gatway = \"10.0.0.1\"\n"),
            3,
            1,
            &["`interface[0].gatway`: unknown field `gatway`", "`gateway`"],
        );
        assert_err("[extra]\nx = 1\n[[interface]]\nname = \"a\"\n", 1, 2, &["`extra`"]);
    }

    #[test]
    fn wrong_types() {
        assert_err(&iface("table = \"x\"\n"), 3, 9, &["`interface[0].table`", "invalid type", "\"x\""]);
        assert_err(&iface("priority = 1.5\n"), 3, 12, &["`interface[0].priority`", "an integer"]);
        assert_err(&iface("addresses = \"10.0.0.1/24\"\n"), 3, 13, &["`interface[0].addresses`"]);
        assert_err(&iface("addresses = [\"10.0.0.1/24\", 7]\n"), 3, 29, &["`interface[0].addresses[1]`"]);
        assert_err(&iface("gateway = 5\n"), 3, 11, &["`interface[0].gateway`", "array"]);
        assert_err(&iface("gateway = [\"10.0.0.1\", true]\n"), 3, 24, &["`interface[0].gateway[1]`"]);
        assert_err("[[interface]]\nname = 3\n", 2, 8, &["`interface[0].name`"]);
        assert_err(
            "[defaults]\narp_ignore = \"1\"\n[[interface]]\nname = \"a\"\n",
            2,
            14,
            &["`defaults.arp_ignore`"],
        );
        assert_err("interface = 5\n", 1, 13, &["`interface`"]);
        assert_err("[[interface]]\naddresses = [\"10.0.0.1/24\"]\n", 1, 1, &["missing field `name`"]);
    }

    #[test]
    fn no_interface() {
        for text in ["", "# nothing\n", "[defaults]\npriority = 5\n", "interface = []\n"] {
            let e = err(text);
            assert_eq!(e.loc, None);
            assert_eq!(e.what, "no [[interface]] in t.toml");
            assert!(e.to_string().starts_with("t.toml: no [[interface]] in t.toml\n  hint: "), "{e}");
        }
    }

    // --- addresses ----------------------------------------------------------

    #[test]
    fn bad_addresses() {
        let cases: &[(&str, &[&str])] = &[
            ("192.168.1.x/24", &["\"192.168.1.x/24\" is not an IP address"]),
            ("ib0", &["\"ib0\" is not an IP address"]),
            ("", &["\"\" is not an IP address"]),
            ("192.168.1.10/33", &["prefix length 33", "32 bits"]),
            ("2001:db8::1/129", &["prefix length 129", "128 bits"]),
            ("192.168.1.10/300", &["prefix length \"300\"", "not a number"]),
            ("192.168.1.10/", &["prefix length \"\"", "not a number"]),
            ("192.168.1.10/+8", &["prefix length \"+8\""]),
            ("192.168.1.10/24/1", &["prefix length \"24/1\""]),
            ("198.51.100.0/24", &["network address of 198.51.100.0/24"]),
            ("10.0.0.0/8", &["network address of 10.0.0.0/8"]),
            ("198.51.100.255/24", &["broadcast address of 198.51.100.0/24"]),
            ("198.51.100.3/30", &["broadcast address of 198.51.100.0/30"]),
            ("255.255.255.255", &["limited broadcast"]),
            ("224.0.0.1/24", &["multicast"]),
            ("ff02::1", &["multicast"]),
            ("0.0.0.0/8", &["unspecified"]),
            ("::", &["unspecified"]),
            ("127.0.0.1/8", &["loopback"]),
            ("::1/128", &["loopback"]),
            ("10.1.2.3/0", &["/0"]),
        ];
        for (addr, needles) in cases {
            let text = iface(&format!("addresses = [\"10.9.9.9/24\", \"{addr}\"]\n"));
            let mut all = vec!["interface \"ib0\""];
            all.extend_from_slice(needles);
            assert_err(&text, 3, 29, &all);
        }
    }

    #[test]
    fn empty_address_list() {
        assert_err(
            &iface("addresses = []\n"),
            3,
            13,
            &["interface \"ib0\"", "`addresses` is an empty list", "omit"],
        );
    }

    #[test]
    fn duplicate_addresses() {
        // Same IP, different prefix length, same interface.
        assert_err(
            &iface("addresses = [\"10.0.0.1/24\", \"10.0.0.1/16\"]\n"),
            3,
            29,
            &["address 10.0.0.1", "interface \"ib0\"", "3:14"],
        );
        // Across interfaces, one bare.
        let text = "[[interface]]\nname = \"a\"\naddresses = [\"2001:db8::1/64\"]\n\
                    [[interface]]\nname = \"b\"\naddresses = [\"2001:db8:0::1\"]\n";
        assert_err(text, 6, 14, &["address 2001:db8::1", "interface \"b\"", "interface \"a\" at 3:14"]);
    }

    // --- gateways -----------------------------------------------------------

    #[test]
    fn bad_gateways() {
        let cases: &[(&str, &[&str])] = &[
            ("10.0.0.x", &["gateway \"10.0.0.x\" is not an IP address"]),
            ("10.0.0.1/24", &["gateway \"10.0.0.1/24\" is not an IP address", "without /len"]),
            ("224.0.0.1", &["gateway 224.0.0.1 is a multicast address"]),
            ("ff02::2", &["multicast"]),
            ("0.0.0.0", &["gateway 0.0.0.0 is the unspecified address"]),
            ("::", &["unspecified"]),
            ("127.0.0.1", &["loopback"]),
            ("255.255.255.255", &["broadcast"]),
        ];
        for (gw, needles) in cases {
            let mut all = vec!["interface \"ib0\""];
            all.extend_from_slice(needles);
            assert_err(&iface(&format!("gateway = \"{gw}\"\n")), 3, 11, &all);
            assert_err(&iface(&format!("gateway = [\"{gw}\"]\n")), 3, 12, &all);
        }
    }

    #[test]
    fn two_gateways_of_one_family() {
        assert_err(
            &iface("gateway = [\"10.0.0.1\", \"2001:db8::1\", \"10.0.0.2\"]\n"),
            3,
            39,
            &["second IPv4 gateway 10.0.0.2", "first is 10.0.0.1 at 3:12", "at most one"],
        );
        assert_err(&iface("gateway = [\"fe80::1\", \"2001:db8::1\"]\n"), 3, 23, &["second IPv6 gateway"]);
    }

    #[test]
    fn gateway_off_link() {
        assert_err(
            &iface("addresses = [\"10.0.0.5/24\", \"10.1.0.5/16\"]\ngateway = \"10.2.0.1\"\n"),
            4,
            11,
            &["gateway 10.2.0.1 is outside every subnet", "10.0.0.0/24, 10.1.0.0/16", "on-link"],
        );
        assert_err(
            &iface("addresses = [\"2001:db8::5/64\"]\ngateway = [\"10.0.0.1\", \"2001:db8:1::1\"]\n"),
            4,
            12,
            &["gateway 10.0.0.1 is IPv4 but `addresses` lists no IPv4 address"],
        );
        assert_err(
            &iface("addresses = [\"2001:db8::5/64\"]\ngateway = [\"2001:db8:1::1\"]\n"),
            4,
            12,
            &["gateway 2001:db8:1::1 is outside every subnet", "2001:db8::/64"],
        );
        assert_err(
            &iface("addresses = [\"10.0.0.5/24\"]\ngateway = \"10.0.0.255\"\n"),
            4,
            11,
            &["gateway 10.0.0.255 is the broadcast address of 10.0.0.0/24"],
        );
        assert_err(
            &iface("addresses = [\"10.0.0.5/24\"]\ngateway = \"10.0.0.0\"\n"),
            4,
            11,
            &["network address"],
        );
    }

    #[test]
    fn gateway_is_a_local_address() {
        assert_err(
            &iface("addresses = [\"10.0.0.5\"]\ngateway = \"10.0.0.5\"\n"),
            4,
            11,
            &["interface \"ib0\": gateway 10.0.0.5 is one of its own addresses (at 3:14)"],
        );
        let text = "[[interface]]\nname = \"a\"\ngateway = \"10.0.0.6\"\n\
                    [[interface]]\nname = \"b\"\naddresses = [\"10.0.0.6/24\"]\n";
        assert_err(
            text,
            3,
            11,
            &["interface \"a\": gateway 10.0.0.6 is an address of interface \"b\" (at 6:14)"],
        );
    }

    // --- interfaces ---------------------------------------------------------

    #[test]
    fn bad_interface_names() {
        let cases: &[(&str, &str)] = &[
            ("", "is empty"),
            (".", "\".\" is not allowed"),
            ("..", "\"..\" is not allowed"),
            ("all", "\"all\" is reserved"),
            ("default", "\"default\" is reserved"),
            ("abcdefghijklmnop", "16 bytes long"),
            ("ééééééééé", "18 bytes long"),
            ("ib/0", "contains '/'"),
            ("ib0:1", "contains ':'"),
            ("ib 0", "whitespace"),
            ("ib\\t0", "whitespace"),
            ("ib\\u00000", "NUL"),
        ];
        for (name, needle) in cases {
            let text = format!("[[interface]]\n  name = \"{name}\"\n");
            assert_err(&text, 2, 10, &["interface name", needle]);
        }
        let alias = err("[[interface]]\nname = \"ib0:1\"\n");
        assert!(alias.hint.contains("alias"), "{alias}");
        ok("[[interface]]\nname = \"abcdefghijklmno\"\n");
    }

    #[test]
    fn duplicate_interface_names() {
        let text = named(&["ib0", "ib1", "ib0"]);
        assert_err(&text, 6, 8, &["interface \"ib0\" is listed twice (first at 2:8)"]);
    }

    // --- [[arp_only]] -------------------------------------------------------

    #[test]
    fn arp_only_takes_the_arp_defaults_and_its_own_keys() {
        let text = "[defaults]\narp_ignore = 2\nrp_filter = 1\narp_filter = 1\n[[interface]]\nname = \"rail0\"\n\
                    [[arp_only]]\nname = \"eno1\"\n[[arp_only]]\nname = \"eno2\"\narp_announce = 1\narp_filter = 0\n";
        let c = ok(text);
        assert_eq!(c.interfaces.len(), 1);
        let eno1 = &c.arp_only[0];
        assert_eq!((eno1.name.as_str(), eno1.loc), ("eno1", loc(8, 8)));
        // rp_filter is not an ARP sysctl: never managed on an [[arp_only]].
        assert_eq!(
            eno1.sysctls,
            sysctls(&[(SysctlKey::ArpIgnore, 2), (SysctlKey::ArpAnnounce, 2), (SysctlKey::ArpFilter, 1)])
        );
        assert_eq!(
            c.arp_only[1].sysctls,
            sysctls(&[(SysctlKey::ArpIgnore, 2), (SysctlKey::ArpAnnounce, 1), (SysctlKey::ArpFilter, 0)])
        );
        // No table: the rails' tables are given as if it were not there.
        assert_eq!(c.interfaces[0].table, 100);
        assert!(ok("[[interface]]\nname = \"a\"\n").arp_only.is_empty());
    }

    #[test]
    fn arp_only_errors_have_positions() {
        let rail = "[[interface]]\nname = \"rail0\"\n";
        let with = |body: &str| format!("{rail}[[arp_only]]\nname = \"eno1\"\n{body}");
        for key in [
            "table = 7",
            "priority = 5",
            "addresses = [\"10.0.0.1/24\"]",
            "gateway = \"10.0.0.1\"",
            "rp_filter = 1",
        ] {
            let name = key.split(' ').next().unwrap();
            assert_err(
                &with(&format!("{key}\n")),
                5,
                1,
                &[&format!("`arp_only[0].{name}`: unknown field `{name}`")],
            );
        }
        assert_err(
            &with("arp_ignore = 4\n"),
            5,
            14,
            &["arp_only \"eno1\": arp_ignore = 4 is not a valid value"],
        );
        assert_err(&with("arp_announce = \"2\"\n"), 5, 16, &["`arp_only[0].arp_announce`", "invalid type"]);
        assert_err(
            &format!("{rail}[[arp_only]]\nname = \"eno:1\"\n"),
            4,
            8,
            &["interface name", "contains ':'"],
        );
        assert_err(&format!("{rail}[[arp_only]]\narp_ignore = 1\n"), 3, 1, &["missing field `name`"]);
        let e = assert_err(
            &format!("{rail}[[arp_only]]\nname = \"rail0\"\n"),
            4,
            8,
            &["arp_only \"rail0\" is also an [[interface]] (at 2:8)"],
        );
        assert!(e.hint.contains("gets its ARP sysctls already"), "{e}");
        assert_err(
            &format!("{rail}[[arp_only]]\nname = \"eno1\"\n[[arp_only]]\nname = \"eno1\"\n"),
            6,
            8,
            &["arp_only \"eno1\" is listed twice (first at 4:8)"],
        );
        // The rails are still required.
        assert!(err("[[arp_only]]\nname = \"eno1\"\n").what.contains("no [[interface]]"));
    }

    // --- tables -------------------------------------------------------------

    #[test]
    fn duplicate_tables() {
        let text = "[[interface]]\nname = \"a\"\ntable = 7\n[[interface]]\nname = \"b\"\ntable = 7\n";
        assert_err(text, 6, 9, &["interfaces \"a\" (at 3:9) and \"b\" both use table 7"]);
        // An explicit table wins over a given one: "a" takes the next free.
        let text = "[[interface]]\nname = \"a\"\n[[interface]]\nname = \"b\"\ntable = 100\n";
        let c = ok(text);
        assert_eq!((c.interfaces[0].table, c.interfaces[1].table), (101, 100));
    }

    #[test]
    fn reserved_tables() {
        for (t, kind) in [(0, "unspecified"), (253, "`default`"), (254, "`main`"), (255, "`local`")] {
            assert_err(&iface(&format!("table = {t}\n")), 3, 9, &[&format!("table = {t} is reserved"), kind]);
        }
        // Given tables skip the kernel's reserved ones.
        let text = format!("[defaults]\ntable_base = 251\n{}", named(&["a", "b", "c"]));
        let tables: Vec<u32> = ok(&text).interfaces.iter().map(|i| i.table).collect();
        assert_eq!(tables, [251, 252, 256]);
        let text = "[defaults]\ntable_base = 0\n[[interface]]\nname = \"a\"\n";
        assert_eq!(ok(text).interfaces[0].table, 1);
        let text = format!("[defaults]\ntable_base = 0\n{}table = 5\n", named(&["a"]));
        let text = format!("{text}{}", named(&["b"]));
        assert_eq!(ok(&text).interfaces[1].table, 1);
    }

    #[test]
    fn several_files_merge_and_name_both_places() {
        let many = |files: &[(&str, &str)]| {
            let inputs: Vec<(String, String)> =
                files.iter().map(|(f, t)| (f.to_string(), t.to_string())).collect();
            parse_many(&inputs)
        };
        let c = many(&[
            ("a.toml", "[defaults]\narp_ignore = 2\n[[interface]]\nname = \"rail0\"\n"),
            ("b.toml", "[[interface]]\nname = \"rail1\"\n"),
        ])
        .unwrap();
        assert_eq!(c.files, ["a.toml", "b.toml"]);
        assert_eq!(c.file, "a.toml + b.toml");
        let names: Vec<(&str, &str, u32)> =
            c.interfaces.iter().map(|i| (i.name.as_str(), i.file.as_str(), i.table)).collect();
        assert_eq!(names, [("rail0", "a.toml", 100), ("rail1", "b.toml", 101)]);
        assert_eq!(
            c.interfaces[1].sysctls[&SysctlKey::ArpIgnore],
            2,
            "[defaults] of a.toml applies to b.toml"
        );
        let e = many(&[
            ("a.toml", "[[interface]]\nname = \"rail0\"\n"),
            ("b.toml", "\n[[interface]]\nname = \"rail0\"\n"),
        ])
        .unwrap_err();
        assert_eq!((e.file.as_str(), e.loc.map(|l| l.line)), ("b.toml", Some(3)));
        assert!(e.what.contains("also configured in a.toml:2:8"), "{e}");
        let e = many(&[
            ("a.toml", "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10\"]\n"),
            ("b.toml", "[[interface]]\nname = \"rail1\"\naddresses = [\"198.51.100.10\"]\n"),
        ])
        .unwrap_err();
        assert!(e.what.contains("already listed for interface \"rail0\" in a.toml:3:14"), "{e}");
        let e = many(&[
            ("a.toml", "[[interface]]\nname = \"rail0\"\ntable = 7\n"),
            ("b.toml", "[[interface]]\nname = \"rail1\"\ntable = 7\n"),
        ])
        .unwrap_err();
        assert!(e.what.contains("as \"rail0\" does in a.toml:3:9"), "{e}");
        let e = many(&[
            ("a.toml", "[defaults]\n[[interface]]\nname = \"a\"\n"),
            ("b.toml", "[defaults]\n[[interface]]\nname = \"b\"\n"),
        ])
        .unwrap_err();
        assert!(e.file == "b.toml" && e.what.contains("[defaults] is also in a.toml"), "{e}");
    }

    #[test]
    fn tables_stay_with_their_interfaces() {
        let four = named(&["rail0", "rail1", "rail2", "rail3"]);
        let mut c = ok(&four);
        let tables = |c: &Config| c.interfaces.iter().map(|i| (i.name.clone(), i.table)).collect::<Vec<_>>();
        let kept: BTreeMap<String, u32> = tables(&c).into_iter().collect();
        assert_eq!(kept.values().copied().collect::<Vec<_>>(), [100, 101, 102, 103]);
        // rail1 dropped: rail2 and rail3 keep 102 and 103.
        let mut three = ok(&named(&["rail0", "rail2", "rail3"]));
        assign_tables(&mut three, &kept, &|_, _| false).unwrap();
        assert_eq!(tables(&three), [("rail0".into(), 100), ("rail2".into(), 102), ("rail3".into(), 103)]);
        // A new rail takes the lowest free table not used by foreign
        // entries of another interface (101: foreign entries of rail1).
        let mut five = ok(&named(&["rail0", "rail2", "rail3", "rail4", "rail5"]));
        assign_tables(&mut five, &kept, &|t, i| t == 101 && i != "rail1").unwrap();
        let got: Vec<u32> = five.interfaces.iter().map(|i| i.table).collect();
        assert_eq!(got, [100, 102, 103, 104, 105]);
        // A hand-made table of the interface itself is its own (adoption).
        let mut fresh = ok(&named(&["rail0", "rail1"]));
        assign_tables(&mut fresh, &BTreeMap::new(), &|t, i| t == 100 && i != "rail0").unwrap();
        assert_eq!(tables(&fresh), [("rail0".into(), 100), ("rail1".into(), 101)]);
        // An explicit table always wins, even over a kept one.
        let text = format!("{}table = 101\n{}", named(&["rail9"]), named(&["rail1"]));
        let mut c2 = ok(&text);
        assign_tables(&mut c2, &kept, &|_, _| false).unwrap();
        assert_eq!(tables(&c2), [("rail9".into(), 101), ("rail1".into(), 100)]);
        assign_tables(&mut c, &kept, &|_, _| false).unwrap();
        assert_eq!(tables(&c), kept.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn table_out_of_range() {
        assert_err(&iface("table = 4294967296\n"), 3, 9, &["table = 4294967296 is out of range"]);
        assert_err(&iface("table = -1\n"), 3, 9, &["table = -1 is out of range"]);
        assert_err(
            "[defaults]\ntable_base = -3\n[[interface]]\nname = \"a\"\n",
            2,
            14,
            &["[defaults]: table_base = -3"],
        );
        assert_eq!(ok(&iface("table = 4294967295\n")).interfaces[0].table, u32::MAX);
        let text = format!("[defaults]\ntable_base = 4294967295\n{}", named(&["a", "b"]));
        assert_err(&text, 6, 8, &["interface \"b\": no free table from table_base 4294967295"]);
    }

    // --- priority, protocol, sysctls ----------------------------------------

    #[test]
    fn priority_out_of_range() {
        for p in ["0", "32766", "32767", "-5", "99999999999"] {
            assert_err(
                &iface(&format!("priority = {p}\n")),
                3,
                12,
                &[&format!("interface \"ib0\": priority = {p} is out of range 1..=32765")],
            );
            let text = format!("[defaults]\npriority = {p}\n[[interface]]\nname = \"a\"\n");
            assert_err(&text, 2, 12, &[&format!("[defaults]: priority = {p}")]);
        }
        assert_eq!(ok(&iface("priority = 1\n")).interfaces[0].priority, 1);
    }

    #[test]
    fn announce_count() {
        assert_eq!(ok(&iface("")).defaults.announce, DEFAULT_ANNOUNCE);
        assert_eq!(DEFAULT_ANNOUNCE, 2);
        for n in [0, 1, 10] {
            let text = format!("[defaults]\nannounce = {n}\n[[interface]]\nname = \"a\"\n");
            assert_eq!(ok(&text).defaults.announce, n);
        }
        for n in ["11", "-1", "99999999999"] {
            let text = format!("[defaults]\ntable_base = 100\nannounce = {n}\n[[interface]]\nname = \"a\"\n");
            let e =
                assert_err(&text, 3, 12, &[&format!("[defaults]: announce = {n} is out of range 0..=10")]);
            assert!(e.hint.contains("0 turns it off"), "{e}");
        }
        assert_err(
            "[defaults]\nannounce = \"2\"\n[[interface]]\nname = \"a\"\n",
            2,
            12,
            &["`defaults.announce`"],
        );
        // Not an interface key.
        assert_err(&iface("announce = 1\n"), 3, 1, &["`interface[0].announce`: unknown field `announce`"]);
    }

    #[test]
    fn kernel_protocols_rejected() {
        for (p, name) in KERNEL_PROTOCOLS.iter().enumerate() {
            let text = format!("[defaults]\nprotocol = {p}\n[[interface]]\nname = \"a\"\n");
            let e =
                assert_err(&text, 2, 12, &[&format!("protocol = {p} is the kernel's own protocol `{name}`")]);
            assert!(e.hint.contains("5..=255"), "{e}");
        }
        for p in ["256", "-1"] {
            let text = format!("[defaults]\nprotocol = {p}\n[[interface]]\nname = \"a\"\n");
            assert_err(&text, 2, 12, &[&format!("protocol = {p} is out of range")]);
        }
        assert_err(&iface("protocol = 99\n"), 3, 1, &["unknown field `protocol`"]);
        for (p, daemon) in [(99, "openr"), (12, "bird"), (188, "FRR")] {
            let text = format!("[defaults]\nprotocol = {p}\n[[interface]]\nname = \"a\"\n");
            assert_err(&text, 2, 12, &[&format!("protocol = {p} is used by"), daemon]);
        }
    }

    #[test]
    fn sysctl_values_checked() {
        let bad = [
            ("arp_ignore", "4"),
            ("arp_ignore", "-1"),
            ("arp_announce", "3"),
            ("rp_filter", "3"),
            ("arp_filter", "2"),
        ];
        for (key, v) in bad {
            let k = SysctlKey::from_name(key).unwrap();
            let e = assert_err(
                &iface(&format!("{key} = {v}\n")),
                3,
                key.len() + 4,
                &[&format!("interface \"ib0\": {key} = {v} is not a valid value")],
            );
            assert!(e.hint.contains(k.valid_values()), "{e}");
            let text = format!("[defaults]\n{key} = {v}\n[[interface]]\nname = \"a\"\n");
            assert_err(&text, 2, key.len() + 4, &[&format!("[defaults]: {key} = {v}")]);
        }
        for key in SysctlKey::ALL {
            let c = ok(&iface(&format!("{} = 0\n", key.name())));
            assert_eq!(c.interfaces[0].sysctls[&key], 0);
        }
    }

    // --- messages and positions ---------------------------------------------

    #[test]
    fn display_format() {
        let e = ConfigError::at("/etc/x.toml", Some(loc(3, 7)), "bad thing", "do this");
        assert_eq!(e.to_string(), "/etc/x.toml:3:7: bad thing\n  hint: do this");
        let e = ConfigError::at("/etc/x.toml", None, "bad thing", "");
        assert_eq!(e.to_string(), "/etc/x.toml: bad thing");
    }

    #[test]
    fn loc_of_counts_lines_and_characters() {
        let text = "ab\nçé = 1\n";
        assert_eq!(loc_of(text, 0), loc(1, 1));
        assert_eq!(loc_of(text, 2), loc(1, 3));
        assert_eq!(loc_of(text, 3), loc(2, 1));
        assert_eq!(loc_of(text, 7), loc(2, 3)); // the space after "çé"
        assert_eq!(loc_of(text, 4), loc(2, 1)); // inside 'ç': clamped back
        assert_eq!(loc_of(text, 1000), loc(3, 1));
        assert_eq!(loc_of("", 5), loc(1, 1));
    }

    #[test]
    fn positions_after_multibyte_text() {
        let text = "# é€ comment\n[[interface]]\nname = \"ib0\" # ü\ntable = 254\n";
        assert_err(text, 4, 9, &["table = 254"]);
    }

    // --- robustness ---------------------------------------------------------

    /// Marsaglia's xorshift64: deterministic and dependency-free.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    fn mutate(rng: &mut XorShift, base: &[u8]) -> String {
        const INTERESTING: &[u8] = b"[]{}\"'=,./:#\n \t0123456789abcdefx-+\\\x00\xff";
        let mut b = base.to_vec();
        for _ in 0..=rng.below(3) {
            let at = rng.below(b.len());
            match rng.below(5) {
                0 => b.truncate(at),
                1 => {
                    let bit = 1u8 << rng.below(8);
                    if let Some(c) = b.get_mut(at) {
                        *c ^= bit;
                    }
                }
                2 => {
                    let new = INTERESTING[rng.below(INTERESTING.len())];
                    if let Some(c) = b.get_mut(at) {
                        *c = new;
                    }
                }
                3 => b.insert(at, INTERESTING[rng.below(INTERESTING.len())]),
                _ => {
                    let end = (at + rng.below(20)).min(b.len());
                    b.drain(at..end);
                }
            }
        }
        String::from_utf8_lossy(&b).into_owned()
    }

    #[test]
    fn never_panics_on_mutations() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let (mut oks, mut errs) = (0, 0);
        for _ in 0..600 {
            let text = mutate(&mut rng, FULL.as_bytes());
            match parse("fuzz.toml", &text) {
                Ok(c) => {
                    oks += 1;
                    for i in &c.interfaces {
                        assert!(!model::RESERVED_TABLES.contains(&i.table), "{text}");
                        assert!((1..=MAX_PRIORITY).contains(&i.priority), "{text}");
                    }
                }
                Err(e) => {
                    errs += 1;
                    let shown = e.to_string();
                    assert!(shown.starts_with("fuzz.toml"), "{shown}");
                    if let Some(l) = e.loc {
                        assert!(l.line >= 1 && l.line <= text.lines().count() + 1, "{shown}\n{text}");
                    }
                }
            }
        }
        assert!(oks > 0 && errs > 0, "mutations too weak or too strong: {oks} ok, {errs} errors");
    }
}
