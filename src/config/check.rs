//! The checks of one file: every value of its raw tables validated, with
//! its position, into the config's types.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::ops::Range;

use toml::Spanned;

use super::error::{key_path_at, loc_of, toml_hint};
use super::raw::{GatewayList, Int, RawArpOnly, RawConfig, RawDefaults, RawInterface, RawSysctls, Str};
use super::{
    ARP_ONLY_KEYS, AddrSpec, ArpOnly, Config, ConfigError, DEFAULT_ANNOUNCE, DEFAULT_PRIORITY,
    DEFAULT_PROTOCOL, DEFAULT_SYSCTLS, DEFAULT_TABLE_BASE, Defaults, Gateway, Interface, Loc, MAX_ANNOUNCE,
    check_protocol,
};
use crate::model::{self, Family, SysctlKey};
use crate::plan::address_policy::{
    AddrOrigin, AddrUse, check_unique_addresses, first_duplicate, off_link_hint, special_address,
    unusable_address, v4_subnet_role,
};
use crate::sysctl::{self, MAX_IFNAME_BYTES, NameProblem};

/// Highest rule priority allowed: 32766 and 32767 are the kernel's `main`
/// and `default` rules, and ours must come before them.
pub(super) const MAX_PRIORITY: u32 = 32765;
/// What every check needs: the file name for messages and the text for
/// turning spans into positions.
pub(super) struct FileChecker<'a> {
    pub(super) file: &'a str,
    pub(super) text: &'a str,
}

type Res<T> = Result<T, ConfigError>;

/// Which interface lists each address, and where.
type Owners<'i> = HashMap<IpAddr, (&'i str, &'i AddrSpec)>;

impl FileChecker<'_> {
    /// The file's TOML read into the raw types: syntax and shape errors.
    pub(super) fn read(&self) -> Res<RawConfig> {
        toml::from_str(self.text).map_err(|e| self.toml_error(&e))
    }

    /// Every check of the file read as `raw`, with the `defaults` that
    /// apply to it (its own, or those of another file); the tables of
    /// interfaces without `table` are not given yet.
    pub(super) fn config(&self, raw: RawConfig, defaults: Defaults) -> Res<Config> {
        let file = self.file;
        if raw.interface.is_empty() {
            return Err(ConfigError::at(
                file,
                None,
                format!("no [[interface]] in {file}"),
                "add one [[interface]] table per RDMA NIC, e.g. [[interface]] name = \"ib0\"",
            ));
        }
        let interfaces =
            raw.interface.into_iter().map(|ri| self.interface(ri, &defaults)).collect::<Res<Vec<_>>>()?;
        self.check_across(&interfaces)?;
        let arp_only = raw.arp_only.iter().map(|ra| self.arp_only(ra, &defaults)).collect::<Res<Vec<_>>>()?;
        self.check_arp_only_names(&interfaces, &arp_only)?;
        Ok(Config { file: file.to_string(), files: vec![file.to_string()], defaults, interfaces, arp_only })
    }

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
        let path = span.clone().and_then(|s| key_path_at(self.text, s.start));
        let hint = toml_hint(&message, path.as_deref());
        let what = match path {
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

    pub(super) fn defaults(&self, raw: Option<&RawDefaults>) -> Res<Defaults> {
        let Some(raw) = raw else { return Ok(Defaults::default()) };
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
            sysctls: self.sysctls(DEFAULT_SYSCTLS.into_iter().collect(), raw.sysctls(), owner)?,
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
                    // A link-local address is unique on its link only: the
                    // kernel takes another link's as this link's gateway.
                    if model::is_v6_link_local(gw.addr) && *owner != iface.name {
                        continue;
                    }
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

fn join<T: fmt::Display>(items: impl Iterator<Item = T>) -> String {
    items.map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
}
