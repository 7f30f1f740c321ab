//! The addresses of one interface on the host: the listed ones found (or
//! not ready, and why), or the discovered ones where none are listed.

use std::net::IpAddr;

use super::address_policy::{AddrOrigin, unusable_address};
use crate::config::{AddrSpec, Interface};
use crate::model::{self, Address, Prefix, scope};

/// How `ip addr` takes the address: `A/LEN`, or `A peer P/LEN`.
pub(super) fn addr_spec(a: &Address) -> String {
    match a.peer {
        Some(peer) => format!("{} peer {peer}/{}", a.addr.addr, a.addr.len),
        None => a.addr.to_string(),
    }
}

/// The addresses of one interface: usable ones, and the ones that are not
/// ready (a listed address absent, still in duplicate address detection,
/// failed it, with another prefix length or on another interface; a
/// discovered one gone since the last apply or unusable), each with the
/// reason.
pub(super) struct Resolved<'a> {
    pub(super) found: Vec<(&'a Address, AddrOrigin)>,
    pub(super) missing: Vec<Missing>,
    /// Discovered at the last apply and gone now.
    pub(super) vanished: Vec<Prefix>,
    /// Why there is nothing at all, when there is nothing.
    pub(super) none_reason: Option<String>,
}

/// An address of an interface that is not ready.
pub(super) struct Missing {
    pub(super) addr: IpAddr,
    pub(super) reason: String,
    /// Whether the entries made for it earlier stay (`Keep`). They do,
    /// except where they would now send another interface's traffic out of
    /// this one: the address is on (and, with a rule, owned by) another
    /// interface.
    pub(super) keep: bool,
}

impl Missing {
    pub(super) fn kept(addr: IpAddr, reason: String) -> Missing {
        Missing { addr, reason, keep: true }
    }
}

/// The host's addresses the config lists, or every global address of the
/// interface when the config lists none, each with where it comes from.
/// Both go through the same checks: an unusable address
/// (`address_policy::unusable_address`, as for the config) or one that
/// failed duplicate address detection is not ready when listed (the host
/// must change, or the config), the same when discovered and unusable, and
/// left out when discovered and dad-failed; a deprecated or temporary one
/// is left out when discovered; with a warning when left out or used anyway.
pub(super) fn resolve_addresses<'a>(
    iface: &Interface,
    addrs: &'a [Address],
    last: Option<&Vec<Prefix>>,
    warnings: &mut Vec<String>,
) -> Resolved<'a> {
    let live: Vec<&Address> = addrs.iter().filter(|a| a.ifname == iface.name).collect();
    let Some(specs) = &iface.addresses else {
        return discover_addresses(iface, &live, addrs, last, warnings);
    };
    let mut out =
        Resolved { found: Vec::new(), missing: Vec::new(), vanished: Vec::new(), none_reason: None };
    for spec in specs {
        match listed_address(iface, spec, &live, addrs, warnings) {
            Ok(found) => out.found.push((found, AddrOrigin::Listed(spec.loc))),
            Err(missing) => out.missing.push(missing),
        }
    }
    out
}

/// The address of `live` (the interface's) that `spec` lists, or why it
/// is not ready.
fn listed_address<'a>(
    iface: &Interface,
    spec: &AddrSpec,
    live: &[&'a Address],
    addrs: &'a [Address],
    warnings: &mut Vec<String>,
) -> Result<&'a Address, Missing> {
    let (i, at) = (&iface.name, format!("{}:{}", iface.file, spec.loc));
    let same_ip = || live.iter().copied().filter(|a| a.addr.addr == spec.addr);
    let found = same_ip().find(|a| spec.len.is_none_or(|len| len == a.addr.len)).or_else(|| same_ip().next());
    let Some(found) = found else {
        return Err(absent(iface, spec, live, addrs, &at));
    };
    if found.tentative && !found.dad_failed {
        return Err(Missing::kept(spec.addr, tentative_reason()));
    }
    if let Some(len) = spec.len.filter(|len| *len != found.addr.len) {
        // Kept: the address is still on the interface, its rule still
        // leads its traffic out of it.
        let listed = Address { addr: Prefix::new(spec.addr, len), ..found.clone() };
        let reason = format!(
            "{i} has it as {}, but {at} lists it as {}/{len}: its entries stay as they are; give it \
             the listed length (`ip addr del {} dev {i}; ip addr add {} dev {i}`), or write \
             \"{}\" (or just \"{}\") at {at}",
            found.addr,
            spec.addr,
            addr_spec(found),
            addr_spec(&listed),
            found.addr,
            spec.addr
        );
        return Err(Missing::kept(spec.addr, reason));
    }
    match unfit(found) {
        Some(Unfit::DadFailed) => {
            // Kept: the kernel never takes it as a source, so its rule
            // is never used, and it needs no change once fixed.
            let a = addr_spec(found);
            let reason = format!(
                "{}; its entries stay as they are; find the other host (the kernel logs its MAC: \
                 `dmesg | grep 'duplicate address'`), give one of the two another address, then \
                 re-add this one (`ip addr del {a} dev {i}; ip addr add {a} dev {i}`), or remove it \
                 from `addresses` ({at})",
                Unfit::DadFailed.why()
            );
            Err(Missing::kept(spec.addr, reason))
        }
        Some(u) => {
            warnings.push(format!("{} on {} {}", found.addr, iface.name, u.why()));
            Ok(found)
        }
        None => Ok(found),
    }
}

/// A listed address the interface does not have: on another interface
/// (moved), or nowhere; `at` is where it is listed.
fn absent(iface: &Interface, spec: &AddrSpec, live: &[&Address], addrs: &[Address], at: &str) -> Missing {
    let i = &iface.name;
    // A link-local address is unique on its link only: the same one on
    // another link is not this one moved there.
    let moved = !model::is_v6_link_local(spec.addr);
    if let Some(there) = addrs.iter().find(|a| moved && a.addr.addr == spec.addr) {
        // Moved: its rule would send the other interface's traffic
        // out of this one, so its entries go.
        let (o, a) = (&there.ifname, addr_spec(there));
        return Missing {
            addr: spec.addr,
            reason: format!(
                "is on {o}, not on {i}: traffic from it would leave by {i}, so its entries in \
                 table {} are not kept; move it back (`ip addr del {a} dev {o}; ip addr add {a} dev \
                 {i}`), or list it for {o} instead of {i} ({at})",
                iface.table
            ),
            keep: false,
        };
    }
    let has: Vec<String> = live.iter().map(|a| a.addr.to_string()).collect();
    let reason = format!(
        "{i} does not have it (it has: {}); add it (`ip addr add {}/LEN dev {i}`) or fix {at}",
        if has.is_empty() { "no address".into() } else { has.join(", ") },
        spec.addr,
    );
    Missing::kept(spec.addr, reason)
}

fn tentative_reason() -> String {
    "is tentative (IPv6 duplicate address detection has not finished): the kernel refuses it as a \
     source until it has; apply waits for it up to --settle seconds"
        .into()
}

/// Every global address of an interface that lists no `addresses`.
fn discover_addresses<'a>(
    iface: &Interface,
    live: &[&'a Address],
    host: &[Address],
    last: Option<&Vec<Prefix>>,
    warnings: &mut Vec<String>,
) -> Resolved<'a> {
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    let mut missing = Vec::new();
    for a in live.iter().copied().filter(|a| a.scope == scope::UNIVERSE) {
        if a.tentative && !a.dad_failed {
            missing.push(Missing::kept(a.addr.addr, tentative_reason()));
            continue;
        }
        if let Some(u) = unfit(a) {
            let anyway = match u {
                Unfit::DadFailed => "",
                _ => " (list it in `addresses` to use it anyway)",
            };
            warnings.push(format!("{} on {} {}; left out{anyway}", a.addr, iface.name, u.why()));
            left_out.push(format!("{} ({})", a.addr, u.word()));
            continue;
        }
        // The prefix length of a point-to-point address is its peer's.
        let len = if a.peer.is_some() { None } else { Some(a.addr.len) };
        if let Some(why) = unusable_address(a.addr.addr, len) {
            let reason = format!(
                "{} is {why}: {i} lists no `addresses`, so it takes every global address it has; remove \
                 it (`ip addr del {} dev {i}`), or list the ones to use in `addresses`",
                a.addr,
                addr_spec(a),
                i = iface.name
            );
            missing.push(Missing::kept(a.addr.addr, reason));
            continue;
        }
        out.push((a, AddrOrigin::Discovered(iface.loc)));
    }
    let vanished = vanished_since(iface, live, host, last, warnings, &mut missing);
    let none_reason = out.is_empty().then(|| {
        let has = "add one (`ip addr add ADDR/LEN dev IFACE`) or list `addresses` in the config";
        if left_out.is_empty() {
            format!("has no global address; {has}")
        } else {
            format!("has no usable global address (left out: {}); {has}", left_out.join(", "))
        }
    });
    Resolved { found: out, missing, vanished, none_reason }
}

/// The addresses found at the `last` apply and gone now: not forgotten,
/// not ready (in `missing`); but one that is on another interface now has
/// moved: not expected back (a warning).
fn vanished_since(
    iface: &Interface,
    live: &[&Address],
    host: &[Address],
    last: Option<&Vec<Prefix>>,
    warnings: &mut Vec<String>,
    missing: &mut Vec<Missing>,
) -> Vec<Prefix> {
    let mut vanished = Vec::new();
    for p in last.into_iter().flatten().filter(|p| !live.iter().any(|a| a.addr.addr == p.addr)) {
        if let Some(there) = host.iter().find(|a| a.addr.addr == p.addr) {
            warnings.push(format!(
                "{} was found on {} at the last apply and is on {} now: {} no longer takes it",
                p, iface.name, there.ifname, iface.name
            ));
            continue;
        }
        vanished.push(*p);
        missing.push(Missing::kept(
            p.addr,
            format!(
                "was found on {} at the last apply and is gone (a link that went down loses its static \
                 IPv6 addresses); its entries are kept until it is back; list `addresses` for {} to stop \
                 expecting it",
                iface.name, iface.name
            ),
        ));
    }
    vanished
}

/// An address the host has that is not fit to be a rule's source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unfit {
    DadFailed,
    Deprecated,
    Temporary,
}

pub fn unfit(a: &Address) -> Option<Unfit> {
    if a.dad_failed {
        Some(Unfit::DadFailed)
    } else if a.deprecated {
        Some(Unfit::Deprecated)
    } else if a.temporary {
        Some(Unfit::Temporary)
    } else {
        None
    }
}

impl Unfit {
    /// Completes "ADDR on IFACE ...".
    fn why(self) -> &'static str {
        match self {
            Unfit::DadFailed => {
                "failed duplicate address detection: another host on the link has it, and the kernel \
                 will not use it as a source"
            }
            Unfit::Deprecated => {
                "is deprecated: its preferred lifetime is over, so the kernel no longer picks it as a \
                 source and will remove it when its valid lifetime ends"
            }
            Unfit::Temporary => {
                "is a temporary (privacy) address: the kernel replaces it regularly, and its rule would \
                 outlive it"
            }
        }
    }
    pub fn word(self) -> &'static str {
        match self {
            Unfit::DadFailed => "duplicate address detection failed",
            Unfit::Deprecated => "deprecated",
            Unfit::Temporary => "temporary",
        }
    }
}
