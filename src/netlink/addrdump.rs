//! The addresses, read on the connection's dump socket (`rawdump`) and
//! parsed only for what `model::Address` holds: the header (family, prefix
//! length, flags, scope, index), IFA_LOCAL, IFA_ADDRESS and IFA_FLAGS.
//!
//! netlink-proto took 1.5-2 ms of a heal to hand over and parse the
//! thousand IPv6 link-local addresses of a node's pod veths, of which the
//! kernel's part is 0.4 ms. `address::address_from` (netlink-packet-route's
//! full parse) stays as the oracle of the tests.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nix::errno::Errno;
use nix::libc;
use rtnetlink::packet_core::NetlinkBuffer;

use super::NlError;
use super::rawdump::{self, Table};
use crate::model::{Address, Prefix};

const IFADDRMSG_LEN: usize = 8;
const RTM_NEWADDR: u16 = libc::RTM_NEWADDR;
const RTM_DELADDR: u16 = libc::RTM_DELADDR;
const RTM_GETADDR: u16 = libc::RTM_GETADDR;
const IFA_ADDRESS: u16 = libc::IFA_ADDRESS;
const IFA_LOCAL: u16 = libc::IFA_LOCAL;
const IFA_FLAGS: u16 = libc::IFA_FLAGS;
const AF_INET: u8 = libc::AF_INET as u8;
const AF_INET6: u8 = libc::AF_INET6 as u8;

/// The dump of every address of every interface, each with the index of
/// its interface (the caller names it; `ifname` is left empty).
pub(super) fn table() -> Table<(u32, Address)> {
    Table { what: "addresses", request: request(), reply: RTM_NEWADDR, parse: row }
}

/// The dump of the addresses of link `index` only, both families (the
/// kernel filters by ifa_index on a strict socket; ENODEV when there is no
/// such link), in the kernel's order, as the dump of every address has
/// them.
pub(super) fn of_link(index: u32) -> Table<(u32, Address)> {
    filtered(None, index)
}

/// The dump of one family's addresses: of every link (`index` 0), or of
/// link `index` only. The kernel walks every link for a dump of every
/// address of a family, also those with none of it: on a node with a
/// thousand pod veths, 0.3 ms for IPv4 and 0.8 ms for their IPv6
/// link-local addresses in a short-lived process (cold caches).
pub(super) fn of_family(family: crate::model::Family, index: u32) -> Table<(u32, Address)> {
    let af = match family {
        crate::model::Family::V4 => AF_INET,
        crate::model::Family::V6 => AF_INET6,
    };
    filtered(Some(af), index)
}

fn filtered(family: Option<u8>, index: u32) -> Table<(u32, Address)> {
    let mut header = [0; IFADDRMSG_LEN];
    header[0] = family.unwrap_or(0);
    header[4..8].copy_from_slice(&index.to_ne_bytes());
    Table {
        what: "addresses",
        request: rawdump::request(RTM_GETADDR, &header),
        reply: RTM_NEWADDR,
        parse: row,
    }
}

/// The IPv6 address `ip`, on whichever link has it: RTM_GETADDR without
/// NLM_F_DUMP, which the kernel answers from its hash of the namespace's
/// IPv6 addresses (`ipv6_get_ifaddr`: the first link found with it,
/// tentative or not), without walking the links; EADDRNOTAVAIL when no
/// link has it. IPv4 has no such request.
pub(super) fn at_address(ip: Ipv6Addr) -> Table<(u32, Address)> {
    let mut body = vec![0; IFADDRMSG_LEN];
    body[0] = AF_INET6;
    let attr_len = 4 + 16u16;
    body.extend_from_slice(&attr_len.to_ne_bytes());
    body.extend_from_slice(&IFA_ADDRESS.to_ne_bytes());
    body.extend_from_slice(&ip.octets());
    Table {
        what: "addresses",
        request: rawdump::ask_request(RTM_GETADDR, &body),
        reply: RTM_NEWADDR,
        parse: row,
    }
}

/// RTM_GETADDR, NLM_F_DUMP, both families.
fn request() -> Vec<u8> {
    rawdump::request(RTM_GETADDR, &[0; IFADDRMSG_LEN])
}

/// What an address notification says of the addresses. watch keeps the
/// addresses of links that are not rails from these between its reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddrNews {
    /// The address, on link `.0`, as it is now (RTM_NEWADDR: a new
    /// address, or a change of its flags or lifetimes).
    Now(u32, Address),
    /// The address left link `.0` (RTM_DELADDR).
    Gone(u32, Address),
    /// An address message that cannot be read: the addresses are not
    /// known until they are read again.
    Unreadable,
}

/// The news in one notification (`message`: its bytes, header first);
/// None when it is not an address message, or of a family no dump
/// reads (`row`).
pub fn news(message: &[u8]) -> Option<AddrNews> {
    let msg = NetlinkBuffer::new_checked(message).ok()?;
    let kind = msg.message_type();
    if kind != RTM_NEWADDR && kind != RTM_DELADDR {
        return None;
    }
    match row(msg.payload()) {
        Ok(Some((index, a))) if kind == RTM_DELADDR => Some(AddrNews::Gone(index, a)),
        Ok(Some((index, a))) => Some(AddrNews::Now(index, a)),
        Ok(None) => None,
        Err(_) => Some(AddrNews::Unreadable),
    }
}

fn malformed(what: &str) -> NlError {
    NlError::local(Errno::EPROTO, format!("cannot read the addresses: {what}"))
}

/// An address from its message's payload (ifaddrmsg, then attributes);
/// None for a family other than IPv4 and IPv6, or one without an address.
fn row(payload: &[u8]) -> Result<Option<(u32, Address)>, NlError> {
    let header = payload.get(..IFADDRMSG_LEN).ok_or_else(|| malformed("an address message is truncated"))?;
    let (family, prefix_len, header_flags, scope) = (header[0], header[1], header[2], header[3]);
    let index = u32::from_ne_bytes(header[4..8].try_into().unwrap());
    let ip_of = |v: &[u8]| -> Option<IpAddr> {
        match family {
            AF_INET => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(v).ok()?))),
            AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(v).ok()?))),
            _ => None,
        }
    };
    if family != AF_INET && family != AF_INET6 {
        return Ok(None);
    }
    // The header has the low 8 flag bits; IFA_FLAGS, when present, all 32.
    let (mut local, mut address, mut flags) = (None, None, u32::from(header_flags));
    for attr in rawdump::attributes(&payload[IFADDRMSG_LEN..]) {
        let (kind, value) = attr.map_err(|_| {
            malformed(&format!("an attribute of an address of if{index} is outside its message"))
        })?;
        match kind {
            IFA_LOCAL => local = ip_of(value),
            IFA_ADDRESS => address = ip_of(value),
            IFA_FLAGS if value.len() == 4 => flags |= u32::from_ne_bytes(value.try_into().unwrap()),
            _ => {}
        }
    }
    // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer
    // on point-to-point links, and equals IFA_LOCAL otherwise (IPv6 sends
    // only IFA_ADDRESS unless there is a peer).
    let Some(ip) = local.or(address) else {
        return Ok(None);
    };
    let peer = address.filter(|a| local.is_some_and(|l| l != *a));
    Ok(Some((
        index,
        Address {
            ifname: String::new(),
            addr: Prefix::new(ip, prefix_len),
            peer,
            scope,
            tentative: flags & libc::IFA_F_TENTATIVE != 0,
            deprecated: flags & libc::IFA_F_DEPRECATED != 0,
            // IFA_F_TEMPORARY is the bit IPv4 calls IFA_F_SECONDARY.
            temporary: family == AF_INET6 && flags & libc::IFA_F_TEMPORARY != 0,
            dad_failed: flags & libc::IFA_F_DADFAILED != 0,
        },
    )))
}

#[cfg(test)]
mod tests {
    use rtnetlink::packet_route::address::{
        AddressAttribute, AddressFlags, AddressHeaderFlags, AddressMessage, AddressScope, CacheInfo,
    };
    use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};

    use super::super::rawdump::NLMSG_HDRLEN;
    use super::super::rawdump::tests::{datagram, read_whole};
    use super::*;

    fn msg(family: AddressFamily, index: u32, len: u8, attributes: Vec<AddressAttribute>) -> AddressMessage {
        let mut m = AddressMessage::default();
        m.header.family = family;
        m.header.index = index;
        m.header.prefix_len = len;
        m.attributes = attributes;
        m
    }

    /// Every address reads as `address::address_from` reads it from
    /// netlink-packet-route's full parse: a point-to-point IPv4 address,
    /// IPv4 with a label and the secondary bit, IPv6 with only
    /// IFA_ADDRESS, flags in the header and in IFA_FLAGS (temporary,
    /// deprecated, tentative, DAD failed), a link-local scope, and
    /// attributes read here and skipped around them.
    #[test]
    fn an_address_reads_as_the_full_parse_reads_it() {
        let v4 = |s: &str| AddressAttribute::Local(s.parse().unwrap());
        let peer4 = |s: &str| AddressAttribute::Address(s.parse().unwrap());
        let v6 = |s: &str| AddressAttribute::Address(s.parse().unwrap());
        let cache = AddressAttribute::CacheInfo(CacheInfo::default());
        let msgs = [
            msg(AddressFamily::Inet, 7, 31, vec![peer4("198.51.100.0"), v4("198.51.100.1")]),
            {
                let mut m = msg(
                    AddressFamily::Inet,
                    8,
                    24,
                    vec![
                        peer4("203.0.113.5"),
                        v4("203.0.113.5"),
                        AddressAttribute::Label("rail1".into()),
                        AddressAttribute::Flags(AddressFlags::Secondary),
                        cache.clone(),
                    ],
                );
                m.header.flags = AddressHeaderFlags::Secondary;
                m
            },
            msg(
                AddressFamily::Inet6,
                9,
                64,
                vec![v6("2001:db8::10"), cache.clone(), AddressAttribute::Flags(AddressFlags::Secondary)],
            ),
            {
                let mut m = msg(AddressFamily::Inet6, 9, 64, vec![cache.clone(), v6("2001:db8::11")]);
                m.header.flags = AddressHeaderFlags::Deprecated | AddressHeaderFlags::Tentative;
                m
            },
            msg(
                AddressFamily::Inet6,
                10,
                64,
                vec![
                    v6("2001:db8::12"),
                    AddressAttribute::Flags(
                        AddressFlags::Dadfailed | AddressFlags::Tentative | AddressFlags::Managetempaddr,
                    ),
                ],
            ),
            {
                let mut m = msg(AddressFamily::Inet6, 11, 64, vec![v6("fe80::1")]);
                m.header.scope = AddressScope::Link;
                m
            },
        ];
        let table = Table { what: "addresses", request: request(), reply: RTM_NEWADDR, parse: row };
        let bytes =
            datagram(msgs.iter().map(|m| (RouteNetlinkMessage::NewAddress(m.clone()), 0)).collect(), Some(0));
        let rows = read_whole(&table, &[bytes]).unwrap();
        let name = |i: u32| format!("if{i}");
        let got: Vec<Address> = rows.into_iter().map(|(i, a)| Address { ifname: name(i), ..a }).collect();
        let want: Vec<Address> =
            msgs.iter().map(|m| super::super::address::address_from(m, name).expect("an address")).collect();
        assert_eq!(got, want);
        assert_eq!(got[0].peer, Some("198.51.100.0".parse().unwrap()));
        assert!(!got[1].temporary && got[2].temporary);
        assert!(got[3].deprecated && got[3].tentative && got[4].dad_failed);
        assert_eq!(got[5].scope, crate::model::scope::LINK);
    }

    #[test]
    fn an_attribute_outside_its_message_is_an_error_not_a_panic() {
        let m =
            msg(AddressFamily::Inet, 7, 24, vec![AddressAttribute::Local("198.51.100.1".parse().unwrap())]);
        let mut bytes = datagram(vec![(RouteNetlinkMessage::NewAddress(m), 0)], None);
        bytes[NLMSG_HDRLEN + IFADDRMSG_LEN] = 0xff;
        assert!(row(&bytes[NLMSG_HDRLEN..]).is_err());
        assert!(row(&bytes[NLMSG_HDRLEN..NLMSG_HDRLEN + 4]).is_err(), "a truncated header");
    }
}
