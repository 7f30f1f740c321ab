//! Addresses from netlink-packet-route's full parse of an address message
//! to `model::Address` (the local address, a point-to-point peer, and the
//! flags that say whether it can be used yet): the oracle that
//! `addrdump`'s own reading is tested against (test-only).

use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};

use crate::model::{Address, Prefix};

/// IFA_F_TEMPORARY (an IPv6 privacy address) is the bit IPv4 calls
/// IFA_F_SECONDARY (0x01): it means "temporary" only for IPv6.
const IFA_F_TEMPORARY: AddressFlags = AddressFlags::Secondary;

/// An address from its dump message; `ifname` names an interface index.
pub(super) fn address_from(m: &AddressMessage, ifname: impl Fn(u32) -> String) -> Option<Address> {
    let mut local = None;
    let mut address = None;
    // The header has the low 8 flag bits; IFA_FLAGS, when present, all 32.
    let mut flags = AddressFlags::from_bits_retain(u32::from(m.header.flags.bits()));
    for a in &m.attributes {
        match a {
            AddressAttribute::Local(ip) => local = Some(*ip),
            AddressAttribute::Address(ip) => address = Some(*ip),
            AddressAttribute::Flags(f) => flags |= *f,
            _ => {}
        }
    }
    // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer
    // on point-to-point links, and equals IFA_LOCAL otherwise (IPv6 sends
    // only IFA_ADDRESS unless there is a peer).
    let ip = local.or(address)?;
    let peer = address.filter(|a| local.is_some_and(|l| l != *a));
    let v6 = m.header.family == AddressFamily::Inet6;
    Some(Address {
        ifname: ifname(m.header.index),
        addr: Prefix::new(ip, m.header.prefix_len),
        peer,
        scope: u8::from(m.header.scope),
        tentative: flags.contains(AddressFlags::Tentative),
        deprecated: flags.contains(AddressFlags::Deprecated),
        temporary: v6 && flags.contains(IFA_F_TEMPORARY),
        dad_failed: flags.contains(AddressFlags::Dadfailed),
    })
}

#[cfg(test)]
mod tests {
    use rtnetlink::packet_route::address::AddressHeaderFlags;

    use super::*;

    fn addr_msg(family: AddressFamily, attrs: Vec<AddressAttribute>) -> AddressMessage {
        let mut m = AddressMessage::default();
        m.header.family = family;
        m.header.index = 7;
        m.header.prefix_len = 31;
        m.attributes = attrs;
        m
    }

    fn name(i: u32) -> String {
        format!("rail{i}")
    }

    #[test]
    fn a_point_to_point_address_has_its_peer() {
        let (local, peer) = ("198.51.100.1".parse().unwrap(), "198.51.100.0".parse().unwrap());
        let m = addr_msg(
            AddressFamily::Inet,
            vec![AddressAttribute::Address(peer), AddressAttribute::Local(local)],
        );
        let a = address_from(&m, name).unwrap();
        assert_eq!((a.ifname.as_str(), a.addr, a.peer), ("rail7", Prefix::new(local, 31), Some(peer)));
        // IFA_ADDRESS equal to IFA_LOCAL, or alone (IPv6): no peer.
        let m = addr_msg(
            AddressFamily::Inet,
            vec![AddressAttribute::Address(local), AddressAttribute::Local(local)],
        );
        assert_eq!(address_from(&m, name).unwrap().peer, None);
        let v6 = "2001:db8::10".parse().unwrap();
        let m = addr_msg(AddressFamily::Inet6, vec![AddressAttribute::Address(v6)]);
        let a = address_from(&m, name).unwrap();
        assert_eq!((a.addr.addr, a.peer), (v6, None));
    }

    #[test]
    fn the_secondary_bit_is_temporary_only_for_ipv6() {
        let v4 = "198.51.100.1".parse().unwrap();
        let v6 = "2001:db8::10".parse().unwrap();
        let secondary = vec![AddressAttribute::Local(v4), AddressAttribute::Flags(AddressFlags::Secondary)];
        assert!(!address_from(&addr_msg(AddressFamily::Inet, secondary), name).unwrap().temporary);
        let temporary = vec![AddressAttribute::Address(v6), AddressAttribute::Flags(IFA_F_TEMPORARY)];
        assert!(address_from(&addr_msg(AddressFamily::Inet6, temporary), name).unwrap().temporary);
    }

    #[test]
    fn address_flags_come_from_the_header_or_ifa_flags() {
        let v6 = "2001:db8::10".parse().unwrap();
        let mut m = addr_msg(AddressFamily::Inet6, vec![AddressAttribute::Address(v6)]);
        m.header.flags = AddressHeaderFlags::Deprecated | AddressHeaderFlags::Tentative;
        let a = address_from(&m, name).unwrap();
        assert!(a.deprecated && a.tentative && !a.dad_failed && !a.temporary, "{a:?}");
        let flags = AddressFlags::Dadfailed | AddressFlags::Tentative | AddressFlags::Managetempaddr;
        let m = addr_msg(
            AddressFamily::Inet6,
            vec![AddressAttribute::Address(v6), AddressAttribute::Flags(flags)],
        );
        let a = address_from(&m, name).unwrap();
        assert!(a.dad_failed && a.tentative && !a.deprecated && !a.temporary, "{a:?}");
    }
}
