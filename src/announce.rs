//! Telling the peers: after ARP flux the peers keep the MAC they learned
//! from whichever rail answered first (~30 s while traffic flows; an idle
//! entry stays wrong indefinitely). Once a rail's routing or ARP behaviour
//! changed, each of its addresses is announced from the rail itself, the
//! way the kernel announces an address it brings up:
//!
//! - IPv4: a gratuitous ARP request (what `arp_notify` and `arping -U`
//!   send; RFC 5227's "ARP Announcement");
//! - IPv6: an unsolicited neighbour advertisement with the Override flag
//!   (what `ndisc_notify` sends; RFC 4861 §7.2.6).
//!
//! Both on Ethernet (RoCE) and on IPoIB: RDMA CM resolves an InfiniBand
//! peer through IPoIB ARP and neighbour discovery, so a stale entry there
//! misroutes RDMA connections just the same. On IPoIB the hardware type
//! is 32 (ARPHRD_INFINIBAND) and hardware addresses have 20 bytes (RFC
//! 4391); the driver writes the link header, so the socket is SOCK_DGRAM
//! and takes the 20-byte destination in its address, as iputils `arping`
//! sends there.
//!
//! Pure: which interfaces to announce, and the packets, byte for byte.
//! They are sent by `packet` (an AF_PACKET socket, each frame out of its rail).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use crate::model::{ARPHRD_ETHER, ARPHRD_INFINIBAND, Address, HwAddr, Link, LinkType, Op, Route, Rule};
use crate::plan::{Desired, PlannedInterface};

/// Pause between two rounds of announcements. Short enough that the
/// default two rounds add 0.1 s to an apply; long enough that a frame lost
/// to a momentary condition (a switch port still learning, a full queue)
/// is not lost with its repeat.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// An Ethernet (IEEE 802 MAC-48) address.
pub type Mac = [u8; 6];
/// An IPoIB hardware address (RFC 4391 §9.1.1): a flags byte and the
/// 24-bit QPN, then the 16-byte port GID.
pub type IbAddr = [u8; 20];

pub const BROADCAST: Mac = [0xff; 6];
pub const ETHERTYPE_ARP: u16 = 0x0806;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
const ND_OPT_TARGET_LL_ADDR: u8 = 2;
/// Neighbour discovery messages must carry hop limit 255 (RFC 4861 §7.1.2:
/// receivers drop any other, so that they cannot come from off-link).
const ND_HOP_LIMIT: u8 = 255;
/// ff02::1, all nodes on the link.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// A rail's link layer, with what an announcement on it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Medium {
    /// Ethernet (RoCE): the rail's MAC.
    Ethernet { mac: Mac },
    /// IPoIB: the rail's address and its broadcast address (the link's
    /// IFLA_BROADCAST, `00:ff:ff:ff:ff:12:40:1b:<pkey>:00:..:ff:ff:ff:ff`:
    /// it carries the partition key and the multicast scope, so it is
    /// read from the link, never assumed).
    Infiniband { addr: IbAddr, broadcast: IbAddr },
}

/// One announcement, ready for the packet socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// What the socket is given: on Ethernet the whole frame (SOCK_RAW);
    /// on IPoIB the ARP or IPv6 packet, the driver adding its 4-byte
    /// header (SOCK_DGRAM, as arping sends there).
    pub bytes: Vec<u8>,
    /// Whether `bytes` carry their link-layer header (SOCK_RAW).
    pub link_header: bool,
    /// `sll_protocol`: the EtherType.
    pub protocol: u16,
    /// `sll_addr`: the link-layer destination (6 or 20 bytes).
    pub dest: Vec<u8>,
}

/// The announcement of `ip` on `medium`. `router`: the Router flag of an
/// IPv6 advertisement (the rail's IPv6 `forwarding`, as the kernel sets
/// it); IPv4 has none.
pub fn outgoing(medium: &Medium, ip: IpAddr, router: bool) -> Outgoing {
    let protocol = match ip {
        IpAddr::V4(_) => ETHERTYPE_ARP,
        IpAddr::V6(_) => ETHERTYPE_IPV6,
    };
    match (medium, ip) {
        (Medium::Ethernet { mac }, IpAddr::V4(v4)) => {
            Outgoing { bytes: garp_frame(*mac, v4), link_header: true, protocol, dest: BROADCAST.to_vec() }
        }
        (Medium::Ethernet { mac }, IpAddr::V6(v6)) => Outgoing {
            bytes: unsolicited_na(*mac, v6, router),
            link_header: true,
            protocol,
            dest: multicast_mac(ALL_NODES).to_vec(),
        },
        (Medium::Infiniband { addr, broadcast }, IpAddr::V4(v4)) => {
            Outgoing { bytes: ipoib_garp(addr, v4), link_header: false, protocol, dest: broadcast.to_vec() }
        }
        (Medium::Infiniband { addr, broadcast }, IpAddr::V6(v6)) => Outgoing {
            bytes: ipoib_unsolicited_na(addr, v6, router),
            link_header: false,
            protocol,
            dest: ipoib_multicast(ALL_NODES, broadcast).to_vec(),
        },
    }
}

/// A gratuitous ARP as Linux sends it for `arp_notify` (`arp_send(ARPOP_REQUEST,
/// ..., ip, dev, ip, NULL, dev_addr, NULL)`): a broadcast ARP *request* whose
/// sender and target protocol addresses are both `ip`, sender hardware
/// address `mac`, target hardware address zero (RFC 5227 §2.3: ignored,
/// SHOULD be zero). 42 bytes: the driver pads it to the 60-byte minimum, as
/// it does the kernel's own ARP.
///
/// Only the request form is sent, not also the reply form (`arping -A`).
/// RFC 5227 §3 recommends requests for announcements, and §2.6 says
/// broadcast replies are not universally recommended: a reply sent to
/// everyone is unusual, a broadcast request is what every receiver
/// expects, and RFC 826 has it update an existing entry from the sender
/// fields before it looks at the operation. Linux takes both forms as
/// gratuitous (`arp_is_garp()`, which overrides an entry whatever its age:
/// the `locktime` window does not apply), the reply only when its target
/// hardware address equals the sender's. Sending both would double the
/// frames for no peer the request misses.
pub fn garp_frame(mac: Mac, ip: Ipv4Addr) -> Vec<u8> {
    let mut f = ethernet_header(BROADCAST, mac, ETHERTYPE_ARP);
    f.extend(arp_request(ARPHRD_ETHER, &mac, ip, ip));
    f
}

/// The same request on IPoIB, as the kernel's `arp_create()` builds it
/// there and as iputils `arping -U -I ib0` fills it (`send_pack()`):
/// `ar_hrd` is the link type, ARPHRD_INFINIBAND (32); `ar_pro` 0x0800;
/// `ar_hln` the link's address length, 20; `ar_pln` 4; the sender
/// hardware address is the rail's whole 20-byte address (flags and QPN
/// included: a receiver sends to that QPN). 56 bytes, no link header: the
/// IPoIB driver adds its own.
///
/// The target hardware address is zero, as the kernel's announcement has
/// it (arping -U copies the broadcast address there instead; RFC 5227
/// §2.3 says it is ignored and SHOULD be zero, and Linux's `arp_process()`
/// never reads it for a request).
pub fn ipoib_garp(addr: &IbAddr, ip: Ipv4Addr) -> Vec<u8> {
    arp_request(ARPHRD_INFINIBAND, addr, ip, ip)
}

/// An ARP request (RFC 826) for `target` from `sender` at `hw`, hardware
/// type `hardware` (1 Ethernet, 32 IPoIB), built by etherparse: the
/// header, then sender hardware and protocol addresses, then the
/// target's; the target hardware address is zero. An announcement is
/// one whose target is its sender; `probe` asks for another address.
/// etherparse takes any hardware type and address length up to 255, so
/// IPoIB's 20-byte addresses are as plain as Ethernet's.
pub fn arp_request(hardware: u16, hw: &[u8], sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let zero = vec![0; hw.len()];
    let packet = etherparse::ArpPacket::new(
        etherparse::ArpHardwareId(hardware),
        etherparse::EtherType::IPV4,
        etherparse::ArpOperation::REQUEST,
        hw,
        &sender.octets(),
        &zero,
        &target.octets(),
    );
    // Only an address longer than 255 bytes fails; a link has at most 32.
    packet.map(|p| p.to_bytes().to_vec()).unwrap_or_default()
}

/// An unsolicited neighbour advertisement as Linux sends it for
/// `ndisc_notify` (`ndisc_send_unsol_na()`): from `ip` itself to ff02::1
/// (Ethernet 33:33:00:00:00:01), hop limit 255, ICMPv6 type 136 code 0,
/// Override set, Solicited clear (RFC 4861 §7.2.6: an unsolicited one must
/// not claim to answer a solicitation), Router as given (the kernel passes
/// `!!idev->cnf.forwarding`: set when the interface forwards IPv6, and a
/// receiver sets or clears its entry's router flag from it), target `ip`,
/// and the target link-layer address option carrying `mac` (required: a
/// receiver takes the new MAC from it). 86 bytes.
pub fn unsolicited_na(mac: Mac, ip: Ipv6Addr, router: bool) -> Vec<u8> {
    let mut f = ethernet_header(multicast_mac(ALL_NODES), mac, ETHERTYPE_IPV6);
    f.extend(na_packet(ip, router, &mac, 0));
    f
}

/// The same advertisement on IPoIB (88 bytes, no link header): the
/// target link-layer address option is the IPoIB one of RFC 4391 §9.1.2,
/// type 2, length 3 (24 bytes), two reserved zero bytes, then the 20-byte
/// address; the kernel builds it the same way (`ndisc_fill_addr_option()`
/// with `ndisc_addr_option_pad(ARPHRD_INFINIBAND)` = 2).
pub fn ipoib_unsolicited_na(addr: &IbAddr, ip: Ipv6Addr, router: bool) -> Vec<u8> {
    na_packet(ip, router, addr, 2)
}

/// The IPv6 packet of an unsolicited advertisement of `ip` to ff02::1,
/// with a target link-layer address option of `hw` after `pad` zero bytes.
fn na_packet(ip: Ipv6Addr, router: bool, hw: &[u8], pad: usize) -> Vec<u8> {
    let flags =
        etherparse::icmpv6::NeighborAdvertisementHeader { router, solicited: false, r#override: true };
    let kind = etherparse::Icmpv6Type::NeighborAdvertisement(flags);
    nd_packet(ip, ALL_NODES, kind, ip, nd_option(ND_OPT_TARGET_LL_ADDR, hw, pad))
}

/// A neighbour discovery packet (RFC 4861 §4.3, §4.4) built by
/// etherparse: the IPv6 header (hop limit 255, §7.1.2) and the ICMPv6
/// header with its checksum; the message body is the target address and
/// one link-layer address option.
pub fn nd_packet(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    kind: etherparse::Icmpv6Type,
    target: Ipv6Addr,
    option: Vec<u8>,
) -> Vec<u8> {
    let mut body = target.octets().to_vec();
    body.extend(option);
    let builder = etherparse::PacketBuilder::ipv6(src.octets(), dst.octets(), ND_HOP_LIMIT).icmpv6(kind);
    let mut p = Vec::with_capacity(builder.size(body.len()));
    // Writing to a Vec fails only on a payload too long for IPv6.
    let _ = builder.write(&mut p, &body);
    p
}

/// A source or target link-layer address option (RFC 4861 §4.6.1): type,
/// length in 8-byte units, `pad` zero bytes, the address, zero-filled to a
/// multiple of 8 bytes. etherparse reads these options but does not
/// write them, and IPoIB's is RFC 4391's (§9.1.2: 2 bytes of padding
/// before the 20-byte address), so the option stays written out here.
pub fn nd_option(kind: u8, hw: &[u8], pad: usize) -> Vec<u8> {
    let len = (2 + pad + hw.len()).div_ceil(8) * 8;
    let mut o = vec![kind, (len / 8) as u8];
    o.resize(2 + pad, 0);
    o.extend_from_slice(hw);
    o.resize(len, 0);
    o
}

/// The ICMPv6 checksum (RFC 4443 §2.3): the ones' complement of the ones'
/// complement sum of the IPv6 pseudo-header (RFC 8200 §8.1: source,
/// destination, upper-layer length as 32 bits, three zero bytes, next
/// header 58) and the message, whose checksum field is zero.
/// Test-only: etherparse fills the checksums of what is sent; the tests
/// check them with this independent sum.
#[cfg(test)]
pub fn icmpv6_checksum(src: Ipv6Addr, dst: Ipv6Addr, message: &[u8]) -> u16 {
    upper_checksum6(src, dst, 58, message)
}

/// The same sum for any upper-layer protocol `next` (UDP: 17).
#[cfg(test)]
pub fn upper_checksum6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, message: &[u8]) -> u16 {
    let mut pseudo = Vec::with_capacity(40 + message.len());
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&(message.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, next]);
    pseudo.extend_from_slice(message);
    !ones_complement_sum(&pseudo)
}

/// The 16-bit ones' complement sum of `data` (an odd last byte padded
/// with zero), carries folded back in.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|pair| u32::from(u16::from_be_bytes([pair[0], pair.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// 33:33 and the low 32 bits of an IPv6 multicast group (RFC 2464 §7).
pub fn multicast_mac(group: Ipv6Addr) -> Mac {
    let o = group.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

/// The IPoIB hardware address of an IPv6 multicast group (RFC 4391 §4),
/// as the kernel maps it (`ipv6_ib_mc_map()`, include/net/if_inet6.h):
/// reserved 0, the multicast QPN ff:ff:ff, then the MGID ff1<scope>:601b,
/// the partition key, and the group's last 80 bits; scope and partition
/// key come from the link's broadcast address (its bytes 5 and 8..10).
pub fn ipoib_multicast(group: Ipv6Addr, broadcast: &IbAddr) -> IbAddr {
    let g = group.octets();
    let mut m = [0u8; 20];
    m[1..5].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]); // multicast QPN, then the MGID's ff
    m[5] = 0x10 | (broadcast[5] & 0x0f); // flags 1 (transient), the broadcast's scope
    m[6..8].copy_from_slice(&[0x60, 0x1b]); // IPv6 signature
    m[8..10].copy_from_slice(&broadcast[8..10]); // P_Key
    m[10..].copy_from_slice(&g[6..]);
    m
}

fn ethernet_header(dst: Mac, src: Mac, ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(86);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

// ---------------------------------------------------------------------------
// What to announce

/// One address to announce from one interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub interface: String,
    pub ifindex: u32,
    pub medium: Medium,
    pub address: IpAddr,
}

/// The configured interfaces whose routing or ARP behaviour `ops` change:
/// an operation on a route in the interface's table or through it, on a
/// rule for one of its addresses or looking up its table, or on one of
/// its sysctls. Interfaces that left the config are not announced (their
/// addresses now answer as the kernel pleases again).
pub fn touched(desired: &Desired, ops: &[Op]) -> BTreeSet<String> {
    desired
        .interfaces
        .iter()
        .filter(|i| ops.iter().any(|op| touches(i, op)))
        .map(|i| i.name.clone())
        .collect()
}

fn touches(i: &PlannedInterface, op: &Op) -> bool {
    let route = |r: &Route| r.table == i.table || r.oif.as_deref() == Some(i.name.as_str());
    let rule = |r: &Rule| {
        r.table == i.table || r.src.is_some_and(|src| i.addresses.iter().any(|a| src.contains(&a.addr)))
    };
    match op {
        Op::AddRoute { route: r } | Op::DelRoute { route: r, .. } => route(r),
        Op::ReplaceRoute { old, new } => route(&old.item) || route(new),
        Op::RestoreRoute { current, old } => route(current) || route(&old.item),
        Op::AddRule { rule: r, .. } | Op::DelRule { rule: r, .. } => rule(r),
        Op::SetSysctl { iface, .. } => *iface == i.name,
    }
}

/// What to announce, and why anything configured is left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    pub targets: Vec<Target>,
    pub skipped: Vec<String>,
}

/// Every address of the planned interfaces (`only` those, when given), as
/// the host has them now: an interface that is gone or neither Ethernet
/// nor IPoIB is left out (as is one without its hardware address, or on
/// IPoIB without its broadcast address: `broadcast` gives a link's
/// IFLA_BROADCAST by index), and so is an address that is gone, still
/// tentative (duplicate address detection running: the kernel does not
/// use it yet, and an advertisement would break the detection) or failed
/// detection; each with a reason.
pub fn select(
    desired: &Desired,
    only: Option<&BTreeSet<String>>,
    links: &[Link],
    broadcast: impl Fn(u32) -> Option<Vec<u8>>,
    addrs: &[Address],
) -> Selection {
    let mut out = Selection::default();
    for i in desired.interfaces.iter().filter(|i| only.is_none_or(|o| o.contains(&i.name))) {
        let Some(link) = links.iter().find(|l| l.name == i.name) else {
            out.skipped.push(format!("{} is gone: its addresses are not announced", i.name));
            continue;
        };
        let medium = match medium(link, &broadcast) {
            Ok(m) => m,
            Err(why) => {
                out.skipped.push(format!("{} {why}: its addresses are not announced", i.name));
                continue;
            }
        };
        for a in &i.addresses {
            let live = addrs.iter().find(|l| l.ifname == i.name && l.addr.addr == a.addr);
            let why = match live {
                None => Some("it is gone"),
                Some(l) if l.dad_failed => Some("it failed duplicate address detection"),
                Some(l) if l.tentative => Some(
                    "it is tentative (duplicate address detection is still running): the kernel does not use it yet",
                ),
                Some(_) => None,
            };
            match why {
                Some(why) => out.skipped.push(format!("{} on {} is not announced: {why}", a.addr, i.name)),
                None => out.targets.push(Target {
                    interface: i.name.clone(),
                    ifindex: link.index,
                    medium: medium.clone(),
                    address: a.addr,
                }),
            }
        }
    }
    out
}

/// How `link` announces, or why it cannot (a phrase after its name).
fn medium(link: &Link, broadcast: &impl Fn(u32) -> Option<Vec<u8>>) -> Result<Medium, String> {
    let hw = link.mac.as_ref().filter(|m| !m.is_zero());
    match link.link_type {
        LinkType::Ether => hw
            .and_then(HwAddr::mac)
            .map(|mac| Medium::Ethernet { mac })
            .ok_or_else(|| "has no MAC address".to_string()),
        LinkType::Infiniband => {
            let addr = hw.and_then(HwAddr::ipoib);
            let Some(addr) = addr else {
                return Err("is IPoIB without a 20-byte hardware address".into());
            };
            let broadcast = broadcast(link.index).and_then(|b| <IbAddr>::try_from(b.as_slice()).ok());
            let Some(broadcast) = broadcast else {
                return Err("is IPoIB without a 20-byte broadcast address (IFLA_BROADCAST)".into());
            };
            Ok(Medium::Infiniband { addr, broadcast })
        }
        LinkType::Other(other) => Err(format!(
            "is neither Ethernet nor IPoIB (link type {other}; roce-route announces on ARPHRD_ETHER and \
             ARPHRD_INFINIBAND links only)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Live, Prefix, SysctlKey, prefix};

    /// Documentation MACs (RFC 7042 §2.1.2: 00-00-5E-00-53-00 to -FF).
    const MAC_A: Mac = [0x00, 0x00, 0x5e, 0x00, 0x53, 0x0a];
    const MAC_B: Mac = [0x00, 0x00, 0x5e, 0x00, 0x53, 0x0b];

    fn hex(text: &str) -> Vec<u8> {
        let digits: String = text.split_whitespace().collect();
        (0..digits.len()).step_by(2).map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn gratuitous_arp_byte_by_byte() {
        let expected = hex("ff ff ff ff ff ff  00 00 5e 00 53 0a  08 06 \
             00 01  08 00  06  04  00 01 \
             00 00 5e 00 53 0a  c6 33 64 0a \
             00 00 00 00 00 00  c6 33 64 0a");
        assert_eq!(garp_frame(MAC_A, "198.51.100.10".parse().unwrap()), expected);
        assert_eq!(expected.len(), 42);
    }

    /// Two neighbour advertisements written out by hand. The checksums were
    /// worked out by hand too: the 16-bit words of the pseudo-header
    /// (source, ff02::1, length 0x20, next header 0x3a) and of the message
    /// sum to 0x2b5fc for 2001:db8:1::10 with MAC ..:53:0a, folded 0xb5fe,
    /// complemented 0x4a01; for 2001:db8:1::11 with MAC ..:53:0b three
    /// words grow by one: 0x2b5ff, 0xb601, 0x49fe. With the Router flag
    /// (flags byte 0xa0, not 0x20) the flags word grows by 0x8000: 0x335fc,
    /// folded 0x35ff, complemented 0xca00.
    #[test]
    fn unsolicited_neighbour_advertisement_byte_by_byte() {
        let frame_with = |mac_last: &str, addr_last: &str, cksum: &str, flags: &str| {
            hex(&format!(
                "33 33 00 00 00 01  00 00 5e 00 53 {mac_last}  86 dd \
                 60 00 00 00  00 20  3a  ff \
                 20 01 0d b8 00 01 00 00 00 00 00 00 00 00 00 {addr_last} \
                 ff 02 00 00 00 00 00 00 00 00 00 00 00 00 00 01 \
                 88  00  {cksum}  {flags} 00 00 00 \
                 20 01 0d b8 00 01 00 00 00 00 00 00 00 00 00 {addr_last} \
                 02 01  00 00 5e 00 53 {mac_last}"
            ))
        };
        let frame =
            |mac_last: &str, addr_last: &str, cksum: &str| frame_with(mac_last, addr_last, cksum, "20");
        let a = unsolicited_na(MAC_A, "2001:db8:1::10".parse().unwrap(), false);
        assert_eq!(a, frame("0a", "10", "4a 01"));
        assert_eq!(a.len(), 86);
        let b = unsolicited_na(MAC_B, "2001:db8:1::11".parse().unwrap(), false);
        assert_eq!(b, frame("0b", "11", "49 fe"));
        let router = unsolicited_na(MAC_A, "2001:db8:1::10".parse().unwrap(), true);
        assert_eq!(router, frame_with("0a", "10", "ca 00", "a0"));
    }

    /// A receiver's check: the sum over pseudo-header and message,
    /// checksum included, is 0xffff.
    #[test]
    fn the_checksum_verifies_as_a_receiver_checks_it() {
        let cases = [(MAC_A, "2001:db8:1::10"), (MAC_B, "2001:db8:ffff::ffff"), (MAC_A, "fe80::1")];
        for ((mac, ip), router) in cases.into_iter().flat_map(|c| [(c, false), (c, true)]) {
            let ip: Ipv6Addr = ip.parse().unwrap();
            let f = unsolicited_na(mac, ip, router);
            let ib = ipoib_unsolicited_na(&IB_ADDR, ip, router);
            for message in [&f[54..], &ib[40..]] {
                verify_checksum(ip, message);
            }
        }
    }

    fn verify_checksum(ip: Ipv6Addr, message: &[u8]) {
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip.octets());
        pseudo.extend_from_slice(&ALL_NODES.octets());
        pseudo.extend_from_slice(&(message.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 58]);
        pseudo.extend_from_slice(message);
        assert_eq!(ones_complement_sum(&pseudo), 0xffff, "{ip}");
    }

    #[test]
    fn ones_complement_sum_folds_carries_and_pads_odd_lengths() {
        assert_eq!(ones_complement_sum(&[0xff, 0xff, 0x00, 0x01]), 0x0001);
        assert_eq!(ones_complement_sum(&[0x12]), 0x1200);
        assert_eq!(ones_complement_sum(&[]), 0);
    }

    #[test]
    fn ethernet_announcements_go_raw_to_broadcast_and_all_nodes() {
        let eth = Medium::Ethernet { mac: MAC_A };
        let v4 = outgoing(&eth, "198.51.100.10".parse().unwrap(), true);
        assert_eq!((v4.link_header, v4.protocol, v4.dest.as_slice()), (true, 0x0806, &BROADCAST[..]));
        assert_eq!(v4.bytes, garp_frame(MAC_A, "198.51.100.10".parse().unwrap()));
        let v6 = outgoing(&eth, "2001:db8:1::10".parse().unwrap(), false);
        assert_eq!(
            (v6.link_header, v6.protocol, v6.dest.as_slice()),
            (true, 0x86dd, &[0x33, 0x33, 0, 0, 0, 1][..])
        );
        assert_eq!(v6.bytes[..6], [0x33, 0x33, 0, 0, 0, 1]);
        let router = outgoing(&eth, "2001:db8:1::10".parse().unwrap(), true);
        assert_eq!(router.bytes[54 + 4], 0xa0, "R and O set");
        assert_eq!(v6.bytes[54 + 4], 0x20, "O only");
    }

    // --- IPoIB ---

    /// ib0.8001's address in the ipoib-pkey fixture: flags 0x80 (connected
    /// mode capable) and QPN 0x000248, then the port GID fe80::ec0d:9a03:a4:3b5e.
    const IB_ADDR: IbAddr = [
        0x80, 0x00, 0x02, 0x48, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0xec, 0x0d, 0x9a, 0x03, 0x00, 0xa4, 0x3b, 0x5e,
    ];
    /// The broadcast address of partition 0x8001, as the kernel gives
    /// IFLA_BROADCAST of ib0.8001 (ipoib_add_port: the default
    /// 00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff with
    /// bytes 8 and 9 set to the pkey; link-local scope 2 in byte 5).
    const IB_BROADCAST: IbAddr = [
        0x00, 0xff, 0xff, 0xff, 0xff, 0x12, 0x40, 0x1b, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
    ];
    const IB_HEX: &str = "80 00 02 48  fe 80 00 00 00 00 00 00  ec 0d 9a 03 00 a4 3b 5e";

    /// The ARP packet arping's send_pack() builds on ib0.8001, written out
    /// field by field (`struct arphdr`, then the addresses): ar_hrd =
    /// htons(ME->sll_hatype) = ARPHRD_INFINIBAND 0x0020, ar_pro =
    /// htons(ETH_P_IP) 0x0800, ar_hln = ME->sll_halen = 20, ar_pln = 4,
    /// ar_op = ARPOP_REQUEST 1; sender hardware address ME->sll_addr (the
    /// 20-byte address), sender IP; target hardware address (zero, as the
    /// kernel's arp_notify writes it: arping -U would copy the broadcast
    /// address; see `ipoib_garp`), target IP = sender IP (unsolicited).
    /// 8 + 20 + 4 + 20 + 4 = 56 bytes, and no link header.
    #[test]
    fn ipoib_gratuitous_arp_byte_by_byte() {
        let expected = hex(&format!(
            "00 20  08 00  14  04  00 01 \
             {IB_HEX}  c6 33 64 1e \
             00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00  c6 33 64 1e"
        ));
        let ip: Ipv4Addr = "198.51.100.30".parse().unwrap();
        assert_eq!(ipoib_garp(&IB_ADDR, ip), expected);
        assert_eq!(expected.len(), 56);
        let ib = Medium::Infiniband { addr: IB_ADDR, broadcast: IB_BROADCAST };
        let out = outgoing(&ib, IpAddr::V4(ip), true);
        assert_eq!(
            out,
            Outgoing { bytes: expected, link_header: false, protocol: 0x0806, dest: IB_BROADCAST.to_vec() }
        );
    }

    /// ff02::1 on partition 0x8001, as ipv6_ib_mc_map() maps it: 00,
    /// ff:ff:ff (multicast QPN), then the MGID ff12:601b:8001:0000:0000:0000:0000:0001
    /// (ff, 0x10 | scope 2 from broadcast[5], IPv6 signature 60:1b, the
    /// pkey from broadcast[8..10], the group's bytes 6..16).
    #[test]
    fn ipv6_multicast_on_ipoib_is_the_kernels_mapping() {
        let expected = hex("00 ff ff ff  ff 12 60 1b  80 01  00 00 00 00 00 00 00 00 00 01");
        assert_eq!(ipoib_multicast(ALL_NODES, &IB_BROADCAST).to_vec(), expected);
        // Another scope and partition (site-local scope 5, default pkey).
        let mut other = IB_BROADCAST;
        other[5] = 0x15;
        other[8..10].copy_from_slice(&[0xff, 0xff]);
        let expected = hex("00 ff ff ff  ff 15 60 1b  ff ff  00 00 00 00 00 00 00 00 00 01");
        assert_eq!(ipoib_multicast(ALL_NODES, &other).to_vec(), expected);
    }

    /// The advertisement on IPoIB written out by hand: IPv6 header with
    /// payload length 48 (0x30); NA flags 0x20 (O) or 0xa0 (R and O); the
    /// target link-layer address option of RFC 4391 §9.1.2: type 2, length
    /// 3 (24 bytes), 2 reserved zero bytes, the 20-byte address. The
    /// checksum by hand: pseudo-header words (2001:db8:1::30, ff02::1,
    /// length 0x30, next header 0x3a) sum to 0x12d57, the message's to
    /// 0x41ac7 (0x8800 + 0x2000 + target 0x2dea + 0x0203 + 0 + the address
    /// 0x342da); 0x5481e folds to 0x4823, complemented 0xb7dc. With R the
    /// flags word is 0xa000: 0x5c81e, 0xc823, 0x37dc.
    #[test]
    fn ipoib_unsolicited_neighbour_advertisement_byte_by_byte() {
        let packet = |flags: &str, cksum: &str| {
            hex(&format!(
                "60 00 00 00  00 30  3a  ff \
                 20 01 0d b8 00 01 00 00 00 00 00 00 00 00 00 30 \
                 ff 02 00 00 00 00 00 00 00 00 00 00 00 00 00 01 \
                 88  00  {cksum}  {flags} 00 00 00 \
                 20 01 0d b8 00 01 00 00 00 00 00 00 00 00 00 30 \
                 02 03  00 00  {IB_HEX}"
            ))
        };
        let ip: Ipv6Addr = "2001:db8:1::30".parse().unwrap();
        let plain = ipoib_unsolicited_na(&IB_ADDR, ip, false);
        assert_eq!(plain, packet("20", "b7 dc"));
        assert_eq!(plain.len(), 88);
        assert_eq!(ipoib_unsolicited_na(&IB_ADDR, ip, true), packet("a0", "37 dc"));
        let ib = Medium::Infiniband { addr: IB_ADDR, broadcast: IB_BROADCAST };
        let out = outgoing(&ib, IpAddr::V6(ip), false);
        assert_eq!((out.link_header, out.protocol), (false, 0x86dd));
        assert_eq!(out.bytes, plain);
        assert_eq!(out.dest, ipoib_multicast(ALL_NODES, &IB_BROADCAST).to_vec());
    }

    #[test]
    fn macs_parse_only_as_six_octets() {
        let mac = |t: &str| t.parse::<HwAddr>().ok().and_then(|h| h.mac());
        assert_eq!(mac("00:00:5e:00:53:0a"), Some(MAC_A));
        assert_eq!(mac("00:00:5E:00:53:0A"), Some(MAC_A));
        assert_eq!(mac("00:00:5e:00:53"), None);
        assert_eq!(mac("00:00:5e:00:53:0a:01"), None);
        assert_eq!(mac("0:00:5e:00:53:0a"), None);
        assert_eq!(mac("zz:00:5e:00:53:0a"), None);
        assert_eq!(mac(""), None);
        let ib = vec!["80"; 20].join(":");
        assert_eq!(mac(&ib), None);
        assert_eq!(ib.parse::<HwAddr>().unwrap().ipoib(), Some([0x80; 20]));
        assert_eq!("00:00:5E:00:53:0A".parse::<HwAddr>().unwrap().to_string(), "00:00:5e:00:53:0a");
    }

    // --- selection ---

    fn planned(name: &str, table: u32, addrs: &[&str]) -> PlannedInterface {
        let addresses: Vec<Prefix> = addrs.iter().map(|a| prefix(a)).collect();
        PlannedInterface {
            name: name.into(),
            table,
            priority: 1000,
            subnets: addresses.iter().map(|a| a.network()).collect(),
            addresses,
            gateways: vec![],
            onlink_gateways: vec![],
        }
    }

    fn desired() -> Desired {
        Desired {
            protocol: 234,
            interfaces: vec![
                planned("rail0", 100, &["198.51.100.10/24", "2001:db8:1::10/64"]),
                planned("rail1", 101, &["198.51.100.11/24"]),
                planned("rail2", 102, &["198.51.100.12/24"]),
            ],
            ..Desired::default()
        }
    }

    fn link(index: u32, name: &str, mac: &str, link_type: u16) -> Link {
        let mac = Some(mac.parse().unwrap());
        Link { index, name: name.into(), admin_up: true, lower_up: true, mac, link_type: link_type.into() }
    }

    fn addr(ifname: &str, p: &str) -> Address {
        Address { ifname: ifname.into(), addr: prefix(p), ..Address::default() }
    }

    fn links() -> Vec<Link> {
        vec![
            link(2, "rail0", "00:00:5e:00:53:0a", ARPHRD_ETHER),
            link(3, "rail1", "00:00:5e:00:53:0b", ARPHRD_ETHER),
            link(4, "rail2", "00:00:5e:00:53:0c", ARPHRD_ETHER),
        ]
    }

    fn addrs() -> Vec<Address> {
        vec![
            addr("rail0", "198.51.100.10/24"),
            addr("rail0", "2001:db8:1::10/64"),
            addr("rail1", "198.51.100.11/24"),
            addr("rail2", "198.51.100.12/24"),
        ]
    }

    fn route(table: u32, dev: &str, src: &str) -> Route {
        Route::connected(table, prefix("198.51.100.0/24"), dev, src.parse().unwrap(), 234)
    }

    /// No link has a broadcast address (Ethernet does not need one).
    fn none(_: u32) -> Option<Vec<u8>> {
        None
    }

    fn names(set: &BTreeSet<String>) -> Vec<&str> {
        set.iter().map(String::as_str).collect()
    }

    #[test]
    fn touched_by_routes_of_its_table_or_through_it() {
        let d = desired();
        assert!(touched(&d, &[]).is_empty());
        let add = Op::AddRoute { route: route(101, "rail1", "198.51.100.11") };
        assert_eq!(names(&touched(&d, &[add])), ["rail1"]);
        // A route through rail2 in a table no longer configured (renumbered).
        let del = Op::DelRoute { route: route(112, "rail2", "198.51.100.12"), raw: None };
        assert_eq!(names(&touched(&d, &[del])), ["rail2"]);
        let old = Live { item: route(100, "rail0", "198.51.100.10"), raw: vec![] };
        let replace = Op::ReplaceRoute { old, new: route(100, "rail0", "198.51.100.10") };
        assert_eq!(names(&touched(&d, &[replace])), ["rail0"]);
        // A table nobody configured, through an interface nobody configured.
        let other = Op::AddRoute { route: route(50, "eth9", "198.51.100.99") };
        assert!(touched(&d, &[other]).is_empty());
    }

    #[test]
    fn touched_by_rules_for_its_addresses_or_its_table() {
        let d = desired();
        let rule = |src: &str, table| Rule::source(1000, src.parse().unwrap(), table, 234);
        let add = Op::AddRule { rule: rule("2001:db8:1::10", 100), raw: None };
        assert_eq!(names(&touched(&d, &[add])), ["rail0"]);
        // An adopted foreign rule for rail2's address, pointing elsewhere.
        let del = Op::DelRule { rule: rule("198.51.100.12", 7), raw: None };
        assert_eq!(names(&touched(&d, &[del])), ["rail2"]);
        let mut wide = rule("198.51.100.0", 7);
        wide.src = Some(prefix("198.51.100.0/24"));
        let all = Op::DelRule { rule: wide, raw: None };
        assert_eq!(names(&touched(&d, &[all])), ["rail0", "rail1", "rail2"]);
        let to_table = Op::AddRule { rule: rule("192.0.2.1", 101), raw: None };
        assert_eq!(names(&touched(&d, &[to_table])), ["rail1"]);
    }

    #[test]
    fn touched_by_its_sysctls_only() {
        let d = desired();
        let set =
            |iface: &str| Op::SetSysctl { iface: iface.into(), key: SysctlKey::RpFilter, old: 0, new: 1 };
        assert_eq!(names(&touched(&d, &[set("rail2")])), ["rail2"]);
        assert!(touched(&d, &[set("rail9")]).is_empty(), "an interface that left the config");
    }

    #[test]
    fn select_takes_every_address_of_the_chosen_interfaces() {
        let d = desired();
        let all = select(&d, None, &links(), none, &addrs());
        assert!(all.skipped.is_empty(), "{:?}", all.skipped);
        let got: Vec<(&str, u32, Medium, String)> = all
            .targets
            .iter()
            .map(|t| (t.interface.as_str(), t.ifindex, t.medium.clone(), t.address.to_string()))
            .collect();
        let eth = |mac| Medium::Ethernet { mac };
        assert_eq!(
            got,
            [
                ("rail0", 2, eth(MAC_A), "198.51.100.10".to_string()),
                ("rail0", 2, eth(MAC_A), "2001:db8:1::10".to_string()),
                ("rail1", 3, eth(MAC_B), "198.51.100.11".to_string()),
                ("rail2", 4, eth([0, 0, 0x5e, 0, 0x53, 0x0c]), "198.51.100.12".to_string()),
            ]
        );
        let only: BTreeSet<String> = ["rail1".to_string()].into();
        let some = select(&d, Some(&only), &links(), none, &addrs());
        assert_eq!(some.targets.len(), 1);
        assert_eq!(some.targets[0].address.to_string(), "198.51.100.11");
    }

    #[test]
    fn select_skips_tentative_dadfailed_and_vanished_addresses_with_a_reason() {
        let d = desired();
        let mut live = addrs();
        live[1].tentative = true; // rail0's IPv6
        live[2].dad_failed = true; // rail1's (IPv4 has no DAD, but the flag is what counts)
        live.remove(3); // rail2's address is gone
        let s = select(&d, None, &links(), none, &live);
        let got: Vec<String> = s.targets.iter().map(|t| t.address.to_string()).collect();
        assert_eq!(got, ["198.51.100.10"]);
        assert_eq!(s.skipped.len(), 3, "{:?}", s.skipped);
        assert!(
            s.skipped[0].starts_with("2001:db8:1::10 on rail0 is not announced: it is tentative"),
            "{s:?}"
        );
        assert!(
            s.skipped[1].contains("198.51.100.11 on rail1 is not announced: it failed duplicate"),
            "{s:?}"
        );
        assert!(s.skipped[2].contains("198.51.100.12 on rail2 is not announced: it is gone"), "{s:?}");
    }

    /// IPoIB rails are announced (they used to be skipped with a warning
    /// on every apply): each address with the rail's 20-byte address and
    /// the broadcast address its link reports, both families.
    #[test]
    fn select_takes_ipoib_rails_with_their_broadcast_address() {
        let d = desired();
        let ib_text = IB_ADDR.map(|b| format!("{b:02x}")).join(":");
        let links = vec![
            link(2, "rail0", &ib_text, ARPHRD_INFINIBAND),
            link(3, "rail1", "00:00:5e:00:53:0b", ARPHRD_ETHER),
            link(4, "rail2", "00:00:5e:00:53:0c", ARPHRD_ETHER),
        ];
        let broadcast = |index| match index {
            2 => Some(IB_BROADCAST.to_vec()),
            // Ethernet's: taken as no part of an Ethernet announcement.
            _ => Some(BROADCAST.to_vec()),
        };
        let s = select(&d, None, &links, broadcast, &addrs());
        assert!(s.skipped.is_empty(), "no warning for an IPoIB rail: {:?}", s.skipped);
        let ib = Medium::Infiniband { addr: IB_ADDR, broadcast: IB_BROADCAST };
        let rail0: Vec<(&Medium, String)> =
            s.targets.iter().filter(|t| t.ifindex == 2).map(|t| (&t.medium, t.address.to_string())).collect();
        assert_eq!(rail0, [(&ib, "198.51.100.10".to_string()), (&ib, "2001:db8:1::10".to_string())]);
        assert_eq!(s.targets.len(), 4);
    }

    #[test]
    fn select_skips_interfaces_that_are_gone_unaddressed_or_of_another_link_type() {
        let d = desired();
        let ib = vec!["80"; 20].join(":");
        let links = vec![
            // IPoIB without IFLA_BROADCAST (`none`): nowhere to send to.
            link(2, "rail0", &ib, ARPHRD_INFINIBAND),
            link(3, "rail1", "00:00:00:00:00:00", ARPHRD_ETHER),
            // ARPHRD_NONE (a tun device): no link-layer address at all.
            link(4, "rail2", "00:00:5e:00:53:0c", 65534),
        ];
        let s = select(&d, None, &links, none, &addrs());
        assert!(s.targets.is_empty(), "{:?}", s.targets);
        assert_eq!(s.skipped.len(), 3, "{:?}", s.skipped);
        assert!(s.skipped[0].contains("rail0 is IPoIB without a 20-byte broadcast address"), "{s:?}");
        assert!(s.skipped[1].contains("rail1 has no MAC address"), "{s:?}");
        assert!(s.skipped[2].contains("rail2 is neither Ethernet nor IPoIB (link type 65534"), "{s:?}");
        let s = select(&d, None, &links[1..], none, &addrs());
        assert!(s.skipped[0].contains("rail0 is gone"), "{s:?}");
        // An IPoIB address that is not 20 bytes.
        let short = vec![link(2, "rail0", "00:00:5e:00:53:0a", ARPHRD_INFINIBAND)];
        let only: BTreeSet<String> = ["rail0".to_string()].into();
        let s = select(&d, Some(&only), &short, |_| Some(IB_BROADCAST.to_vec()), &addrs());
        assert!(s.skipped[0].contains("rail0 is IPoIB without a 20-byte hardware address"), "{s:?}");
    }
}
