//! Links as netlink-packet-route's full parse of a link message gives them
//! (name, index, state, hardware address, link type; the broadcast address
//! announcements use): the oracle `linkdump`'s own reading is tested
//! against.

use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};

use crate::model::{HwAddr, Link, LinkType};

/// A link from its dump message.
pub(super) fn link_from(l: &LinkMessage) -> Link {
    let mut name = String::new();
    let mut mac = None;
    for a in &l.attributes {
        match a {
            LinkAttribute::IfName(n) => name = n.clone(),
            LinkAttribute::Address(bytes) if !bytes.is_empty() => mac = Some(HwAddr::new(bytes)),
            _ => {}
        }
    }
    Link {
        index: l.header.index,
        name,
        admin_up: l.header.flags.contains(LinkFlags::Up),
        lower_up: l.header.flags.contains(LinkFlags::LowerUp),
        mac,
        link_type: LinkType::from(u16::from(l.header.link_layer_type)),
    }
}

/// A link's IFLA_BROADCAST, when it has a non-empty one.
pub(super) fn broadcast_of(l: &LinkMessage) -> Option<&[u8]> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::Broadcast(bytes) if !bytes.is_empty() => Some(bytes.as_slice()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use rtnetlink::packet_route::link::LinkLayerType;

    use super::*;

    fn link_msg(attributes: Vec<LinkAttribute>) -> LinkMessage {
        let mut m = LinkMessage::default();
        m.header.index = 7;
        m.header.flags = LinkFlags::Up;
        m.header.link_layer_type = LinkLayerType::Infiniband;
        m.attributes = attributes;
        m
    }

    #[test]
    fn a_link_has_its_name_state_type_and_address() {
        let ipoib = vec![0x80; 20];
        let m = link_msg(vec![
            LinkAttribute::IfName("ib0".into()),
            LinkAttribute::Address(ipoib.clone()),
            LinkAttribute::Broadcast(vec![0xff; 20]),
        ]);
        let l = link_from(&m);
        assert_eq!((l.index, l.name.as_str(), l.admin_up, l.lower_up), (7, "ib0", true, false));
        assert_eq!(l.link_type, LinkType::Infiniband);
        assert_eq!(l.mac, Some(HwAddr::new(&ipoib)));
        assert_eq!(broadcast_of(&m), Some(&[0xff; 20][..]));
    }

    #[test]
    fn empty_hardware_addresses_are_none() {
        // An IFLA_ADDRESS or IFLA_BROADCAST without bytes is no address.
        let m = link_msg(vec![LinkAttribute::Address(Vec::new()), LinkAttribute::Broadcast(Vec::new())]);
        assert_eq!(link_from(&m).mac, None);
        assert_eq!(broadcast_of(&m), None);
    }
}
