//! Which addresses a NIC may use as its own and as its gateway, and that
//! every address belongs to one configured interface: the checks the
//! config makes on what it lists and the plan on what it finds on the host.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr};

use crate::config::{ConfigError, Loc};
use crate::model::Prefix;

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

/// The first key seen twice, as (first item, second item).
pub(crate) fn first_duplicate<K: Eq + Hash, T: Copy>(
    items: impl IntoIterator<Item = (K, T)>,
) -> Option<(T, T)> {
    let mut seen = HashMap::new();
    for (k, item) in items {
        if let Some(first) = seen.insert(k, item) {
            return Some((first, item));
        }
    }
    None
}

/// Why no host may use `ip` as its own address or as a gateway.
pub(crate) fn special_address(ip: IpAddr) -> Option<&'static str> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_nic_address_is_a_unicast_host_address() {
        assert_eq!(unusable_address(ip("198.51.100.10"), Some(24)), None);
        assert_eq!(unusable_address(ip("198.51.100.10"), None), None, "the length is the host's");
        assert_eq!(unusable_address(ip("198.51.100.0"), Some(31)), None, "a /31 has no network address");
        assert_eq!(
            unusable_address(ip("198.51.100.0"), Some(24)).as_deref(),
            Some("the network address of 198.51.100.0/24, not a host address")
        );
        assert_eq!(v4_subnet_role(ip("198.51.100.255"), 24), Some("broadcast"));
        assert_eq!(v4_subnet_role(ip("2001:db8::"), 64), None, "IPv6 has no broadcast address");
        assert!(unusable_address(ip("10.1.2.3"), Some(0)).unwrap().contains("/0"));
        assert_eq!(special_address(ip("ff02::1")), Some("a multicast address"));
        assert_eq!(special_address(ip("255.255.255.255")), Some("the limited broadcast address"));
    }

    #[test]
    fn an_address_listed_twice_is_an_error_at_the_second_found_ones_are_not() {
        let at = |line| Loc { line, col: 14 };
        let a = ip("198.51.100.10");
        let listed =
            |iface, file, line| AddrUse { iface, file, addr: a, origin: AddrOrigin::Listed(at(line)) };
        let found =
            AddrUse { iface: "rail2", file: "a.toml", addr: a, origin: AddrOrigin::Discovered(at(9)) };
        assert_eq!(check_unique_addresses(&[listed("rail0", "a.toml", 3), found]), Ok(()));
        let e = check_unique_addresses(&[listed("rail0", "a.toml", 3), found, listed("rail1", "b.toml", 5)])
            .unwrap_err();
        assert_eq!((e.file.as_str(), e.loc), ("b.toml", Some(at(5))));
        assert!(e.what.ends_with("already listed for interface \"rail0\" at a.toml:3:14"), "{e}");
        assert_eq!(first_duplicate([(1, 'a'), (2, 'b'), (1, 'c')]), Some(('a', 'c')));
    }
}
