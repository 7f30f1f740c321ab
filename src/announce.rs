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
//! Pure: which interfaces to announce, and the frames, byte for byte. The
//! frames are sent by `packet` (an AF_PACKET socket bound to the rail).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use crate::model::{Address, Link, Op, Route, Rule};
use crate::plan::{Desired, PlannedInterface};

/// Pause between two rounds of announcements. Short enough that the
/// default two rounds add 0.1 s to an apply; long enough that a frame lost
/// to a momentary condition (a switch port still learning, a full queue)
/// is not lost with its repeat.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// An Ethernet (IEEE 802 MAC-48) address.
pub type Mac = [u8; 6];

pub const BROADCAST: Mac = [0xff; 6];
pub const ETHERTYPE_ARP: u16 = 0x0806;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_IPV4: u16 = 0x0800;
/// ARPHRD_ETHER: the link type (and ARP hardware type) of Ethernet.
pub const ARPHRD_ETHER: u16 = 1;
/// ARPHRD_INFINIBAND: IPoIB.
const ARPHRD_INFINIBAND: u16 = 32;
const ARPOP_REQUEST: u16 = 1;
const IPPROTO_ICMPV6: u8 = 58;
const ND_NEIGHBOR_ADVERT: u8 = 136;
const ND_OPT_TARGET_LL_ADDR: u8 = 2;
/// The R, S and O bits of a neighbour advertisement's first flags byte.
const NA_FLAG_OVERRIDE: u8 = 0x20;
/// Neighbour discovery messages must carry hop limit 255 (RFC 4861 §7.1.2:
/// receivers drop any other, so that they cannot come from off-link).
const ND_HOP_LIMIT: u8 = 255;
/// ff02::1, all nodes on the link.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// `aa:bb:cc:dd:ee:ff` (as `Link::mac` holds it) as bytes; None for any
/// other length (an InfiniBand address has 20 bytes).
pub fn parse_mac(text: &str) -> Option<Mac> {
    let bytes: Vec<u8> = text
        .split(':')
        .map(|b| (b.len() == 2).then(|| u8::from_str_radix(b, 16).ok()).flatten())
        .collect::<Option<_>>()?;
    bytes.try_into().ok()
}

/// The Ethernet destination of the announcement of `ip`.
pub fn destination(ip: IpAddr) -> Mac {
    match ip {
        IpAddr::V4(_) => BROADCAST,
        IpAddr::V6(_) => multicast_mac(ALL_NODES),
    }
}

/// The EtherType of the announcement of `ip`.
pub fn ethertype(ip: IpAddr) -> u16 {
    match ip {
        IpAddr::V4(_) => ETHERTYPE_ARP,
        IpAddr::V6(_) => ETHERTYPE_IPV6,
    }
}

/// The whole Ethernet frame announcing `ip` as `mac`'s.
pub fn frame(mac: Mac, ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => garp_frame(mac, v4),
        IpAddr::V6(v6) => unsolicited_na(mac, v6),
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
    f.extend_from_slice(&ARPHRD_ETHER.to_be_bytes()); // hardware type
    f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes()); // protocol type
    f.push(6); // hardware address length
    f.push(4); // protocol address length
    f.extend_from_slice(&ARPOP_REQUEST.to_be_bytes());
    f.extend_from_slice(&mac); // sender hardware address
    f.extend_from_slice(&ip.octets()); // sender protocol address
    f.extend_from_slice(&[0; 6]); // target hardware address
    f.extend_from_slice(&ip.octets()); // target protocol address
    f
}

/// An unsolicited neighbour advertisement as Linux sends it for
/// `ndisc_notify` (`ndisc_send_unsol_na()`): from `ip` itself to ff02::1
/// (Ethernet 33:33:00:00:00:01), hop limit 255, ICMPv6 type 136 code 0,
/// Override set, Solicited clear (RFC 4861 §7.2.6: an unsolicited one must
/// not claim to answer a solicitation), Router clear (roce-route's hosts
/// are not routers), target `ip`, and the target link-layer address
/// option carrying `mac` (required: a receiver takes the new MAC from it).
/// 86 bytes.
pub fn unsolicited_na(mac: Mac, ip: Ipv6Addr) -> Vec<u8> {
    let mut icmp = vec![ND_NEIGHBOR_ADVERT, 0, 0, 0]; // type, code, checksum (below)
    icmp.extend_from_slice(&[NA_FLAG_OVERRIDE, 0, 0, 0]); // R S O flags, reserved
    icmp.extend_from_slice(&ip.octets()); // target address
    icmp.extend_from_slice(&[ND_OPT_TARGET_LL_ADDR, 1]); // option type, length in 8-byte units
    icmp.extend_from_slice(&mac);
    let sum = icmpv6_checksum(ip, ALL_NODES, &icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());

    let mut f = ethernet_header(multicast_mac(ALL_NODES), mac, ETHERTYPE_IPV6);
    f.extend_from_slice(&[0x60, 0, 0, 0]); // version 6, traffic class 0, flow label 0
    f.extend_from_slice(&(icmp.len() as u16).to_be_bytes()); // payload length
    f.push(IPPROTO_ICMPV6); // next header
    f.push(ND_HOP_LIMIT);
    f.extend_from_slice(&ip.octets()); // source
    f.extend_from_slice(&ALL_NODES.octets()); // destination
    f.extend_from_slice(&icmp);
    f
}

/// The ICMPv6 checksum (RFC 4443 §2.3): the ones' complement of the ones'
/// complement sum of the IPv6 pseudo-header (RFC 8200 §8.1: source,
/// destination, upper-layer length as 32 bits, three zero bytes, next
/// header 58) and the message, whose checksum field is zero.
pub fn icmpv6_checksum(src: Ipv6Addr, dst: Ipv6Addr, message: &[u8]) -> u16 {
    let mut pseudo = Vec::with_capacity(40 + message.len());
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&(message.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, IPPROTO_ICMPV6]);
    pseudo.extend_from_slice(message);
    !ones_complement_sum(&pseudo)
}

/// The 16-bit ones' complement sum of `data` (an odd last byte padded
/// with zero), carries folded back in.
fn ones_complement_sum(data: &[u8]) -> u16 {
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
fn multicast_mac(group: Ipv6Addr) -> Mac {
    let o = group.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
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
    pub mac: Mac,
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
/// the host has them now: an interface that is gone or not Ethernet is left
/// out, and so is an address that is gone, still tentative (duplicate
/// address detection running: the kernel does not use it yet, and an
/// advertisement would break the detection) or failed detection; each
/// with a reason.
pub fn select(
    desired: &Desired,
    only: Option<&BTreeSet<String>>,
    links: &[Link],
    addrs: &[Address],
) -> Selection {
    let mut out = Selection::default();
    for i in desired.interfaces.iter().filter(|i| only.is_none_or(|o| o.contains(&i.name))) {
        let Some(link) = links.iter().find(|l| l.name == i.name) else {
            out.skipped.push(format!("{} is gone: its addresses are not announced", i.name));
            continue;
        };
        if link.link_type != ARPHRD_ETHER {
            out.skipped.push(format!(
                "{} is not an Ethernet interface (link type {}{}): its addresses are not announced \
                 (roce-route sends gratuitous ARP and neighbour advertisements on Ethernet/RoCE only)",
                i.name,
                link.link_type,
                if link.link_type == ARPHRD_INFINIBAND { ", InfiniBand" } else { "" }
            ));
            continue;
        }
        let Some(mac) = link.mac.as_deref().and_then(parse_mac).filter(|m| *m != [0; 6]) else {
            out.skipped.push(format!("{} has no MAC address: its addresses are not announced", i.name));
            continue;
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
                    mac,
                    address: a.addr,
                }),
            }
        }
    }
    out
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
    /// words grow by one: 0x2b5ff, 0xb601, 0x49fe.
    #[test]
    fn unsolicited_neighbour_advertisement_byte_by_byte() {
        let frame = |mac_last: &str, addr_last: &str, cksum: &str| {
            hex(&format!(
                "33 33 00 00 00 01  00 00 5e 00 53 {mac_last}  86 dd \
                 60 00 00 00  00 20  3a  ff \
                 20 01 0d b8 00 01 00 00 00 00 00 00 00 00 00 {addr_last} \
                 ff 02 00 00 00 00 00 00 00 00 00 00 00 00 00 01 \
                 88  00  {cksum}  20 00 00 00 \
                 20 01 0d b8 00 01 00 00 00 00 00 00 00 00 00 {addr_last} \
                 02 01  00 00 5e 00 53 {mac_last}"
            ))
        };
        let a = unsolicited_na(MAC_A, "2001:db8:1::10".parse().unwrap());
        assert_eq!(a, frame("0a", "10", "4a 01"));
        assert_eq!(a.len(), 86);
        let b = unsolicited_na(MAC_B, "2001:db8:1::11".parse().unwrap());
        assert_eq!(b, frame("0b", "11", "49 fe"));
    }

    /// A receiver's check: the sum over pseudo-header and message,
    /// checksum included, is 0xffff.
    #[test]
    fn the_checksum_verifies_as_a_receiver_checks_it() {
        for (mac, ip) in [(MAC_A, "2001:db8:1::10"), (MAC_B, "2001:db8:ffff::ffff"), (MAC_A, "fe80::1")] {
            let ip: Ipv6Addr = ip.parse().unwrap();
            let f = unsolicited_na(mac, ip);
            let message = &f[54..];
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&ip.octets());
            pseudo.extend_from_slice(&ALL_NODES.octets());
            pseudo.extend_from_slice(&(message.len() as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 58]);
            pseudo.extend_from_slice(message);
            assert_eq!(ones_complement_sum(&pseudo), 0xffff, "{ip}");
        }
    }

    #[test]
    fn ones_complement_sum_folds_carries_and_pads_odd_lengths() {
        assert_eq!(ones_complement_sum(&[0xff, 0xff, 0x00, 0x01]), 0x0001);
        assert_eq!(ones_complement_sum(&[0x12]), 0x1200);
        assert_eq!(ones_complement_sum(&[]), 0);
    }

    #[test]
    fn frame_destination_and_ethertype_by_family() {
        let v4: IpAddr = "198.51.100.10".parse().unwrap();
        let v6: IpAddr = "2001:db8:1::10".parse().unwrap();
        assert_eq!((destination(v4), ethertype(v4)), (BROADCAST, 0x0806));
        assert_eq!((destination(v6), ethertype(v6)), ([0x33, 0x33, 0, 0, 0, 1], 0x86dd));
        assert_eq!(frame(MAC_A, v4)[..6], BROADCAST);
        assert_eq!(frame(MAC_A, v6)[..6], [0x33, 0x33, 0, 0, 0, 1]);
    }

    #[test]
    fn macs_parse_only_as_six_octets() {
        assert_eq!(parse_mac("00:00:5e:00:53:0a"), Some(MAC_A));
        assert_eq!(parse_mac("00:00:5E:00:53:0A"), Some(MAC_A));
        assert_eq!(parse_mac("00:00:5e:00:53"), None);
        assert_eq!(parse_mac("00:00:5e:00:53:0a:01"), None);
        assert_eq!(parse_mac("0:00:5e:00:53:0a"), None);
        assert_eq!(parse_mac("zz:00:5e:00:53:0a"), None);
        assert_eq!(parse_mac(""), None);
        let ib = vec!["80"; 20].join(":");
        assert_eq!(parse_mac(&ib), None);
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
        Link { index, name: name.into(), admin_up: true, lower_up: true, mac: Some(mac.into()), link_type }
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
        let all = select(&d, None, &links(), &addrs());
        assert!(all.skipped.is_empty(), "{:?}", all.skipped);
        let got: Vec<(&str, u32, Mac, String)> = all
            .targets
            .iter()
            .map(|t| (t.interface.as_str(), t.ifindex, t.mac, t.address.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                ("rail0", 2, MAC_A, "198.51.100.10".to_string()),
                ("rail0", 2, MAC_A, "2001:db8:1::10".to_string()),
                ("rail1", 3, MAC_B, "198.51.100.11".to_string()),
                ("rail2", 4, [0, 0, 0x5e, 0, 0x53, 0x0c], "198.51.100.12".to_string()),
            ]
        );
        let only: BTreeSet<String> = ["rail1".to_string()].into();
        let some = select(&d, Some(&only), &links(), &addrs());
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
        let s = select(&d, None, &links(), &live);
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

    #[test]
    fn select_skips_interfaces_that_are_gone_or_not_ethernet() {
        let d = desired();
        let ib = vec!["80"; 20].join(":");
        let links = vec![
            link(2, "rail0", &ib, ARPHRD_INFINIBAND),
            link(3, "rail1", "00:00:00:00:00:00", ARPHRD_ETHER),
        ];
        let s = select(&d, None, &links, &addrs());
        assert!(s.targets.is_empty(), "{:?}", s.targets);
        assert_eq!(s.skipped.len(), 3, "{:?}", s.skipped);
        assert!(s.skipped[0].contains("rail0 is not an Ethernet interface (link type 32, InfiniBand)"));
        assert!(s.skipped[1].contains("rail1 has no MAC address"), "{s:?}");
        assert!(s.skipped[2].contains("rail2 is gone"));
    }
}
