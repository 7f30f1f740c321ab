//! The validated config: what `parse` returns and the plan reads.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use super::Loc;
use crate::model::{Prefix, SysctlKey};

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

impl Config {
    /// The interfaces it names: `[[interface]]`s, then `[[arp_only]]`s, in
    /// the config's order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.rail_names().chain(self.arp_only.iter().map(|a| a.name.as_str()))
    }

    /// The names of the `[[interface]]`s (the rails), in the config's order.
    pub fn rail_names(&self) -> impl Iterator<Item = &str> {
        self.interfaces.iter().map(|i| i.name.as_str())
    }
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

impl Default for Defaults {
    /// The built-in defaults, for a config without `[defaults]`.
    fn default() -> Self {
        Defaults {
            table_base: DEFAULT_TABLE_BASE,
            priority: DEFAULT_PRIORITY,
            protocol: DEFAULT_PROTOCOL,
            sysctls: DEFAULT_SYSCTLS.into_iter().collect(),
            announce: DEFAULT_ANNOUNCE,
        }
    }
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
    /// or gives it the lowest free one (`reconcile::tables::assign_tables`).
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
