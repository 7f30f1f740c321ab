//! Pure: the packets `probe` sends and the ones it reads back, byte for
//! byte. Packet sockets are SOCK_DGRAM (the driver writes the link
//! header, on Ethernet and IPoIB alike), so everything goes out without
//! one: ARP, neighbour discovery, and the echoes and the IPv6 SYN as
//! whole IP packets, addressed to the link-layer address that answered
//! (so the kernel resolves no neighbour and keeps no entry).
//!
//! - ARP request (RFC 826) from the rail's own address and hardware
//!   address, to broadcast.
//! - Neighbour solicitation (RFC 4861 §4.3) from the rail's address to
//!   the target's solicited-node group, hop limit 255, with the source
//!   link-layer address option (so that the answer can be unicast).
//! - ICMP/ICMPv6 echo (RFC 792, RFC 4443) with a per-run token in the
//!   payload, padded to the size being tried; IPv4 with don't-fragment.
//! - IPv6: a TCP SYN to an unused port (RFC 9293), for the reset the
//!   peer's routing sends back (not rate-limited, unlike its ICMPv6 errors).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::PacketBuilder;

pub use crate::announce::multicast_mac;
use crate::announce::{ETHERTYPE_ARP, ETHERTYPE_IPV6, nd_option, nd_packet};
#[cfg(test)]
use crate::announce::{icmpv6_checksum, ones_complement_sum, upper_checksum6};

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_ICMPV6: u8 = 58;
const ICMP_ECHO_REPLY: u8 = 0;
pub const IPPROTO_TCP: u8 = 6;
const ICMPV6_ECHO_REPLY: u8 = 129;
const ND_NEIGHBOR_ADVERT: u8 = 136;
const ND_OPT_SOURCE_LL_ADDR: u8 = 1;
const ND_OPT_TARGET_LL_ADDR: u8 = 2;
/// IPv4 header without options + ICMP echo header.
pub const V4_OVERHEAD: u32 = 28;
/// IPv6 header + ICMPv6 echo header.
pub const V6_OVERHEAD: u32 = 48;
/// The token (8 bytes) must fit in the payload.
pub const MIN_ECHO_PAYLOAD: u32 = 8;

pub use crate::announce::arp_request;

/// An ARP reply, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArpReply {
    pub sender_hw: Vec<u8>,
    pub sender_ip: Ipv4Addr,
    pub target_hw: Vec<u8>,
    pub target_ip: Ipv4Addr,
}

/// The ARP reply in `p` (an ARP packet without link header), if it is
/// one: an IPv4 ARP reply, read by etherparse (any hardware type and
/// address length, so IPoIB's too).
pub fn parse_arp_reply(p: &[u8]) -> Option<ArpReply> {
    let a = etherparse::ArpPacketSlice::from_slice(p).ok()?;
    if a.proto_addr_type() != etherparse::EtherType::IPV4
        || a.proto_addr_size() != 4
        || a.operation() != etherparse::ArpOperation::REPLY
    {
        return None;
    }
    let ip = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
    Some(ArpReply {
        sender_hw: a.sender_hw_addr().to_vec(),
        sender_ip: ip(a.sender_protocol_addr()),
        target_hw: a.target_hw_addr().to_vec(),
        target_ip: ip(a.target_protocol_addr()),
    })
}

/// ff02::1:ffXX:XXXX, the solicited-node group of `target` (RFC 4291 §2.7.1).
pub fn solicited_node(target: Ipv6Addr) -> Ipv6Addr {
    let o = target.octets();
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00 | u16::from(o[13]), u16::from_be_bytes([o[14], o[15]]))
}

/// A neighbour solicitation for `target` from `src`, as a whole IPv6
/// packet to the solicited-node group, with the source link-layer option
/// carrying `hw` after `pad` zero bytes (IPoIB: 2, RFC 4391 §9.1.2).
pub fn neighbour_solicitation(src: Ipv6Addr, target: Ipv6Addr, hw: &[u8], pad: usize) -> Vec<u8> {
    let option = nd_option(ND_OPT_SOURCE_LL_ADDR, hw, pad);
    nd_packet(src, solicited_node(target), etherparse::Icmpv6Type::NeighborSolicitation, target, option)
}

/// ping's default hop limit, for what `probe` builds whole.
const HOP_LIMIT: u8 = 64;

/// An echo request as a whole IP packet of `size` bytes (at least its
/// headers and the token), from `src` to `dst`: identifier `id`, sequence
/// `seq`, `token` first in the payload, checksums filled in, and (IPv4)
/// don't-fragment set, so that a size a link cannot carry is lost, not
/// fragmented. None when the families differ.
pub fn echo_packet(src: IpAddr, dst: IpAddr, id: u16, seq: u16, token: u64, size: u32) -> Option<Vec<u8>> {
    let overhead = if dst.is_ipv6() { V6_OVERHEAD } else { V4_OVERHEAD };
    let mut payload = token.to_be_bytes().to_vec();
    payload.resize(size.saturating_sub(overhead).max(MIN_ECHO_PAYLOAD) as usize, 0xa5);
    let mut p = Vec::with_capacity(overhead as usize + payload.len());
    // Writing to a Vec fails only on a payload too long for IP.
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let b = PacketBuilder::ipv4(s.octets(), d.octets(), HOP_LIMIT).icmpv4_echo_request(id, seq);
            b.write(&mut p, &payload).ok()?;
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let b = PacketBuilder::ipv6(s.octets(), d.octets(), HOP_LIMIT).icmpv6_echo_request(id, seq);
            b.write(&mut p, &payload).ok()?;
        }
        _ => return None,
    }
    Some(p)
}

/// A TCP SYN over IPv6 from `src` to `dst` port `port` (the same source
/// port), sequence number `seq`, checksum filled in. The peer answers it
/// with a reset (a SYN-ACK if something listens), acknowledging seq + 1,
/// from the address it was sent to and by its routing: for a global
/// address Linux gives the reply no output interface
/// (`tcp_v6_send_response()`), unlike an ICMPv6 echo reply.
pub fn tcp6_syn(src: Ipv6Addr, dst: Ipv6Addr, port: u16, seq: u32) -> Vec<u8> {
    let b = PacketBuilder::ipv6(src.octets(), dst.octets(), HOP_LIMIT).tcp(port, port, seq, 1024).syn();
    let mut p = Vec::with_capacity(b.size(0));
    let _ = b.write(&mut p, &[]);
    p
}

/// An echo reply, as read from an IP packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EchoReply {
    pub src: std::net::IpAddr,
    pub dst: std::net::IpAddr,
    pub id: u16,
    pub seq: u16,
    pub token: u64,
}

/// What an incoming IPv6 packet may be to `probe`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum V6In {
    Echo(EchoReply),
    /// A neighbour advertisement: its target, and the target link-layer
    /// address option's address if it has one.
    Advert {
        target: Ipv6Addr,
        dst: Ipv6Addr,
        hw: Option<Vec<u8>>,
    },
    /// A TCP reset or SYN-ACK from `peer` (its port `port`) to `local`,
    /// acknowledging `ack`.
    Reset {
        local: Ipv6Addr,
        peer: Ipv6Addr,
        port: u16,
        ack: u32,
    },
}

/// What a packet an observer reads is to `probe`, whatever its family:
/// the one receive path of ARP, IPv4 and IPv6 alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// An ARP reply or a neighbour advertisement: `peer` answered `local`
    /// with the link-layer address `hw` (None: the advertisement carries
    /// no target link-layer address option; the frame's source is it).
    Answer {
        local: IpAddr,
        peer: IpAddr,
        hw: Option<Vec<u8>>,
    },
    Echo(EchoReply),
    /// IPv6: the peer's routed answer to the reply-path SYN.
    Reset {
        local: Ipv6Addr,
        peer: Ipv6Addr,
        port: u16,
        ack: u32,
    },
}

/// The packet `p` of link-layer protocol `protocol` (ARP, IPv4, IPv6),
/// if it is one `probe` reads.
pub fn parse(protocol: u16, p: &[u8]) -> Option<Incoming> {
    match protocol {
        ETHERTYPE_ARP => parse_arp_reply(p).map(|a| Incoming::Answer {
            local: a.target_ip.into(),
            peer: a.sender_ip.into(),
            hw: Some(a.sender_hw),
        }),
        ETHERTYPE_IPV4 => parse_ipv4(p).map(Incoming::Echo),
        ETHERTYPE_IPV6 => parse_ipv6(p).map(|v6| match v6 {
            V6In::Echo(e) => Incoming::Echo(e),
            V6In::Advert { target, dst, hw } => {
                Incoming::Answer { local: dst.into(), peer: target.into(), hw }
            }
            V6In::Reset { local, peer, port, ack } => Incoming::Reset { local, peer, port, ack },
        }),
        _ => None,
    }
}

/// The echo reply in an IPv4 packet (the first fragment will do: it has
/// the ICMP header).
pub fn parse_ipv4(p: &[u8]) -> Option<EchoReply> {
    if p.len() < 20 || p[0] >> 4 != 4 || p[9] != IPPROTO_ICMP {
        return None;
    }
    let frag_offset = u16::from_be_bytes([p[6], p[7]]) & 0x1fff;
    if frag_offset != 0 {
        return None;
    }
    let ihl = usize::from(p[0] & 0x0f) * 4;
    let icmp = p.get(ihl..)?;
    if icmp.len() < 16 || icmp[0] != ICMP_ECHO_REPLY {
        return None;
    }
    let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]).into();
    let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]).into();
    Some(echo_fields(src, dst, icmp))
}

fn echo_fields(src: std::net::IpAddr, dst: std::net::IpAddr, icmp: &[u8]) -> EchoReply {
    let mut token = [0u8; 8];
    token.copy_from_slice(&icmp[8..16]);
    EchoReply {
        src,
        dst,
        id: u16::from_be_bytes([icmp[4], icmp[5]]),
        seq: u16::from_be_bytes([icmp[6], icmp[7]]),
        token: u64::from_be_bytes(token),
    }
}

/// An echo reply, a neighbour advertisement or a TCP reset (or SYN-ACK)
/// in an IPv6 packet (right after the fixed header: the kernel sends them
/// without extension headers).
pub fn parse_ipv6(p: &[u8]) -> Option<V6In> {
    if p.len() < 40 || p[0] >> 4 != 6 {
        return None;
    }
    let addr = |b: &[u8]| {
        let mut o = [0u8; 16];
        o.copy_from_slice(b);
        Ipv6Addr::from(o)
    };
    let (src, dst) = (addr(&p[8..24]), addr(&p[24..40]));
    if p[6] == IPPROTO_TCP {
        let tcp = p.get(40..60)?;
        let (syn, rst, ack) = (tcp[13] & 0x02 != 0, tcp[13] & 0x04 != 0, tcp[13] & 0x10 != 0);
        if !(rst || (syn && ack)) {
            return None;
        }
        let port = u16::from_be_bytes([tcp[0], tcp[1]]);
        let ack = u32::from_be_bytes([tcp[8], tcp[9], tcp[10], tcp[11]]);
        return Some(V6In::Reset { local: dst, peer: src, port, ack });
    }
    if p[6] != IPPROTO_ICMPV6 {
        return None;
    }
    let icmp = &p[40..];
    match *icmp.first()? {
        ICMPV6_ECHO_REPLY if icmp.len() >= 16 => Some(V6In::Echo(echo_fields(src.into(), dst.into(), icmp))),
        ND_NEIGHBOR_ADVERT if icmp.len() >= 24 => {
            let target = addr(&icmp[8..24]);
            let mut hw = None;
            let mut opts = &icmp[24..];
            while opts.len() >= 8 {
                let len = usize::from(opts[1]) * 8;
                if len == 0 || len > opts.len() {
                    break;
                }
                if opts[0] == ND_OPT_TARGET_LL_ADDR {
                    // Ethernet: 6 bytes after type and length; IPoIB: 20
                    // after 2 more bytes of padding.
                    hw = Some(if len == 8 { opts[2..8].to_vec() } else { opts[4..len.min(24)].to_vec() });
                }
                opts = &opts[len..];
            }
            Some(V6In::Advert { target, dst, hw })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];

    #[test]
    fn the_arp_request_is_rfc_826() {
        let a = arp_request(1, &MAC, "198.51.100.10".parse().unwrap(), "198.51.100.110".parse().unwrap());
        assert_eq!(
            a,
            [
                0, 1, 8, 0, 6, 4, 0, 1, // header, request
                2, 0, 0, 0, 0, 10, 198, 51, 100, 10, // sender
                0, 0, 0, 0, 0, 0, 198, 51, 100, 110, // target
            ]
        );
        // Its reply (as the peer answers): op 2, sender and target swapped.
        let mut reply = a.clone();
        reply[7] = 2;
        let peer = [0x02, 0, 0, 0, 1, 0x6e];
        reply[8..14].copy_from_slice(&peer);
        reply[14..18].copy_from_slice(&[198, 51, 100, 110]);
        reply[18..24].copy_from_slice(&MAC);
        reply[24..28].copy_from_slice(&[198, 51, 100, 10]);
        let r = parse_arp_reply(&reply).unwrap();
        assert_eq!(crate::model::HwAddr::new(&r.sender_hw).to_string(), "02:00:00:00:01:6e");
        assert_eq!(r.sender_ip.to_string(), "198.51.100.110");
        assert_eq!(r.target_ip.to_string(), "198.51.100.10");
        assert_eq!(parse_arp_reply(&a), None, "a request is not a reply");
        assert_eq!(parse_arp_reply(&reply[..20]), None, "a short packet is not one");
    }

    #[test]
    fn the_solicitation_goes_to_the_solicited_node_group_and_checks_out() {
        let src: Ipv6Addr = "2001:db8:1::10".parse().unwrap();
        let target: Ipv6Addr = "2001:db8:1::1:2:3".parse().unwrap();
        assert_eq!(solicited_node(target).to_string(), "ff02::1:ff02:3");
        assert_eq!(multicast_mac(solicited_node(target)), [0x33, 0x33, 0xff, 0x02, 0, 3]);
        let p = neighbour_solicitation(src, target, &MAC, 0);
        assert_eq!(p.len(), 40 + 32);
        assert_eq!(p[7], 255, "hop limit");
        assert_eq!(&p[40 + 24..40 + 32], &[1, 1, 2, 0, 0, 0, 0, 10]);
        // A correct checksum sums to zero over the pseudo-header.
        assert_eq!(icmpv6_checksum(src, solicited_node(target), &p[40..]), 0);
        let ib = neighbour_solicitation(src, target, &[7u8; 20], 2);
        assert_eq!(ib.len(), 40 + 24 + 24);
        assert_eq!(&ib[40 + 24..40 + 28], &[1, 3, 0, 0]);
    }

    #[test]
    fn echo_sizes_and_replies_parse_back() {
        let (a, b): (IpAddr, IpAddr) = ("198.51.100.10".parse().unwrap(), "198.51.100.110".parse().unwrap());
        let e = echo_packet(a, b, 0x1234, 7, 0xdead_beef_0102_0304, 9000).unwrap();
        assert_eq!(e.len(), 9000);
        assert_eq!(&e[..2], &[0x45, 0], "IPv4, no options");
        assert_eq!(u16::from_be_bytes([e[2], e[3]]), 9000, "total length");
        assert_eq!(e[6] & 0x40, 0x40, "don't fragment");
        assert_eq!((e[8], e[9]), (64, 1), "TTL 64, ICMP");
        assert_eq!(&e[12..20], &[198, 51, 100, 10, 198, 51, 100, 110]);
        assert_eq!(!ones_complement_sum(&e[..20]), 0, "the header checksum checks");
        assert_eq!(!ones_complement_sum(&e[20..]), 0, "the ICMP checksum checks");
        assert_eq!(&e[20..28], &[8, 0, e[22], e[23], 0x12, 0x34, 0, 7], "echo request, id, seq");
        assert_eq!(&e[28..36], &0xdead_beef_0102_0304u64.to_be_bytes(), "the token first");
        let small = echo_packet(a, b, 1, 1, 1, 10).unwrap();
        assert_eq!(small.len(), 20 + 8 + 8, "never shorter than the token");
        let (a6, b6): (Ipv6Addr, Ipv6Addr) =
            ("2001:db8:1::10".parse().unwrap(), "2001:db8:1::110".parse().unwrap());
        let e6 = echo_packet(a6.into(), b6.into(), 1, 2, 3, 1500).unwrap();
        assert_eq!(e6.len(), 1500);
        assert_eq!((e6[0] >> 4, e6[6], e6[7]), (6, 58, 64), "IPv6, ICMPv6, hop limit 64");
        assert_eq!(u16::from_be_bytes([e6[4], e6[5]]), 1460, "payload length");
        assert_eq!(e6[40], 128, "echo request");
        assert_eq!(icmpv6_checksum(a6, b6, &e6[40..]), 0, "the ICMPv6 checksum checks");
        assert_eq!(echo_packet(a, b6.into(), 1, 1, 1, 100), None, "mixed families");
        // The reply the peer sends: its IPv4 header, type 0, same fields.
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 1, 0, 0, 198, 51, 100, 110, 198, 51, 100, 10];
        let mut reply = e[20..].to_vec();
        reply[0] = 0;
        ip.extend_from_slice(&reply);
        let r = parse_ipv4(&ip).unwrap();
        assert_eq!((r.id, r.seq, r.token), (0x1234, 7, 0xdead_beef_0102_0304));
        assert_eq!(r.src.to_string(), "198.51.100.110");
        ip[20] = 8;
        assert_eq!(parse_ipv4(&ip), None, "a request is not a reply");
    }

    #[test]
    fn the_syn_checks_out_and_its_reset_parses_back() {
        let (a, b): (Ipv6Addr, Ipv6Addr) =
            ("2001:db8:1::10".parse().unwrap(), "2001:db8:1::110".parse().unwrap());
        let syn = tcp6_syn(a, b, 33434, 0x0102_0304);
        assert_eq!(syn.len(), 40 + 20);
        assert_eq!((syn[6], syn[7]), (6, 64), "TCP, hop limit 64");
        assert_eq!(&syn[40..44], &[0x82, 0x9a, 0x82, 0x9a], "ports");
        assert_eq!(&syn[44..48], &[1, 2, 3, 4], "sequence number");
        assert_eq!(syn[53], 0x02, "SYN alone");
        assert_eq!(upper_checksum6(a, b, 6, &syn[40..]), 0, "the TCP checksum checks");
        // The peer's reset: from b port 33434 to a, RST|ACK, ack = seq + 1.
        let mut r = vec![0x60, 0, 0, 0, 0, 20, 6, 64];
        r.extend_from_slice(&b.octets());
        r.extend_from_slice(&a.octets());
        r.extend_from_slice(&[0x82, 0x9a, 0x82, 0x9a, 0, 0, 0, 0, 1, 2, 3, 5, 0x50, 0x14, 0, 0, 0, 0, 0, 0]);
        assert_eq!(parse_ipv6(&r), Some(V6In::Reset { local: a, peer: b, port: 33434, ack: 0x0102_0305 }));
        r[40 + 13] = 0x12;
        assert!(parse_ipv6(&r).is_some(), "a SYN-ACK (something listens) is an answer too");
        r[40 + 13] = 0x10;
        assert_eq!(parse_ipv6(&r), None, "a bare ACK is not");
        assert_eq!(parse_ipv6(&r[..50]), None, "nor a short segment");
    }

    #[test]
    fn an_advertisement_gives_its_target_and_link_layer_address() {
        let target: Ipv6Addr = "2001:db8:1::110".parse().unwrap();
        let dst: Ipv6Addr = "2001:db8:1::10".parse().unwrap();
        let mut p = vec![0x60, 0, 0, 0, 0, 32, 58, 255];
        p.extend_from_slice(&target.octets());
        p.extend_from_slice(&dst.octets());
        p.extend_from_slice(&[136, 0, 0, 0, 0x60, 0, 0, 0]);
        p.extend_from_slice(&target.octets());
        p.extend_from_slice(&[2, 1, 2, 0, 0, 0, 1, 0x10]);
        assert_eq!(parse_ipv6(&p), Some(V6In::Advert { target, dst, hw: Some(vec![2, 0, 0, 0, 1, 0x10]) }));
    }
}
