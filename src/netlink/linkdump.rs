//! The link table, read on the connection's dump socket (`rawdump`) and
//! parsed only for what roce-route uses: the header (index, flags, type),
//! IFLA_IFNAME, IFLA_ADDRESS, IFLA_BROADCAST, IFLA_MTU and the four IPv4
//! devconf values roce-route manages (IFLA_AF_SPEC). The kernel also
//! leaves the statistics out (RTEXT_FILTER_SKIP_STATS), and a link costs a
//! walk over its attributes. Link notifications read the same way
//! (`news`).

use nix::errno::Errno;
use nix::libc;
use rtnetlink::packet_core::NetlinkBuffer;

use super::NlError;
use super::rawdump::{self, Table};
use crate::model::{HwAddr, Link, LinkType, SysctlKey};

/// A link, its IFLA_BROADCAST (when it has a non-empty one), its MTU and
/// its IPv4 devconf values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkRow {
    pub link: Link,
    pub broadcast: Option<Vec<u8>>,
    pub mtu: Option<u32>,
    /// None for a link without IPv4 (no `in_device`: an MTU below 68),
    /// which has no /proc/sys/net/ipv4/conf directory either.
    pub devconf: Option<DevConf>,
}

/// The values of a link's `/proc/sys/net/ipv4/conf/<link>/` files
/// roce-route manages, as the link's message carries them:
/// IFLA_AF_SPEC → AF_INET → IFLA_INET_CONF, one u32 per IPV4_DEVCONF_*
/// (linux/ip.h), the kernel's `in_device` words those files show
/// (`inet_fill_link_af`). A key the array is too short for is None.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevConf([Option<u32>; 4]);

impl DevConf {
    /// The value of `key`, when the message carried it.
    pub fn get(&self, key: SysctlKey) -> Option<u32> {
        self.0[key as usize]
    }

    /// From IFLA_INET_CONF's value.
    fn from_words(value: &[u8]) -> DevConf {
        let word = |id: usize| {
            let at = (id - 1) * 4;
            value.get(at..at + 4).map(|w| u32::from_ne_bytes(w.try_into().unwrap()))
        };
        let mut conf = DevConf::default();
        for key in SysctlKey::ALL {
            conf.0[key as usize] = word(devconf_id(key));
        }
        conf
    }
}

/// IPV4_DEVCONF_* of `key` (linux/ip.h: the array's first word is id 1).
fn devconf_id(key: SysctlKey) -> usize {
    match key {
        SysctlKey::RpFilter => 8,
        SysctlKey::ArpFilter => 13,
        SysctlKey::ArpAnnounce => 18,
        SysctlKey::ArpIgnore => 19,
    }
}

const IFINFOMSG_LEN: usize = 16;
const RTM_NEWLINK: u16 = libc::RTM_NEWLINK;
const RTM_GETLINK: u16 = libc::RTM_GETLINK;
const RTM_DELLINK: u16 = libc::RTM_DELLINK;
const IFLA_ADDRESS: u16 = libc::IFLA_ADDRESS;
const IFLA_BROADCAST: u16 = libc::IFLA_BROADCAST;
const IFLA_IFNAME: u16 = libc::IFLA_IFNAME;
const IFLA_MTU: u16 = libc::IFLA_MTU;
const IFLA_EXT_MASK: u16 = libc::IFLA_EXT_MASK;
const IFLA_AF_SPEC: u16 = libc::IFLA_AF_SPEC;
/// IFLA_INET_CONF (linux/if_link.h; not in the libc crate).
const IFLA_INET_CONF: u16 = 1;
/// RTEXT_FILTER_SKIP_STATS (linux/rtnetlink.h; not in the libc crate).
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;

/// What a link notification says of the link table. watch keeps the
/// table from these between its reads of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkNews {
    /// The link as it is now (RTM_NEWLINK: a new link, or a change).
    Now(LinkRow),
    /// The link of this index left the namespace (RTM_DELLINK).
    Gone(u32),
    /// A link message that cannot be read: the table is not known until it
    /// is read again.
    Unreadable,
}

/// The news in one notification (`message`: its bytes, header first);
/// None when it is not a link message, or not about the link table: a
/// bridge port's messages (family AF_BRIDGE) come on the same group, and
/// its RTM_DELLINK says the port left its bridge, not that the link went.
pub fn news(message: &[u8]) -> Option<LinkNews> {
    let msg = NetlinkBuffer::new_checked(message).ok()?;
    let kind = msg.message_type();
    if kind != RTM_NEWLINK && kind != RTM_DELLINK {
        return None;
    }
    let payload = msg.payload();
    let Some(header) = payload.get(..IFINFOMSG_LEN) else {
        return Some(LinkNews::Unreadable);
    };
    if header[0] != libc::AF_UNSPEC as u8 {
        return None;
    }
    Some(match (kind, row(payload)) {
        (RTM_DELLINK, Ok(r)) => LinkNews::Gone(r.link.index),
        (_, Ok(r)) => LinkNews::Now(r),
        (_, Err(_)) => LinkNews::Unreadable,
    })
}

/// The dump of every link of this network namespace, in the kernel's order.
pub(super) fn table() -> Table<LinkRow> {
    Table { what: "links", request: request(), reply: RTM_NEWLINK, parse: |p| row(p).map(Some) }
}

/// The one link named `name`, asked by name (RTM_GETLINK with
/// IFLA_IFNAME, not a dump: about 10 µs, where the dump of a node's
/// thousand pod veths is 9 ms, the kernel filling each link's message);
/// a missing one is the kernel's ENODEV.
pub(super) fn named(name: &str) -> Table<LinkRow> {
    let mut request = request();
    let nlattr = |kind: u16, value: &[u8]| {
        let len = 4 + value.len();
        let mut a = Vec::with_capacity(len.next_multiple_of(4));
        a.extend_from_slice(&(len as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(len.next_multiple_of(4), 0);
        a
    };
    request.extend(nlattr(IFLA_IFNAME, &[name.as_bytes(), &[0]].concat()));
    let len = request.len() as u32;
    request[..4].copy_from_slice(&len.to_ne_bytes());
    // Not a dump, and no ack: the link or ENODEV is the whole answer.
    request[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    Table { what: "links", request, reply: RTM_NEWLINK, parse: |p| row(p).map(Some) }
}

/// RTM_GETLINK, NLM_F_DUMP, every family, statistics left out.
fn request() -> Vec<u8> {
    let mut body = vec![0; IFINFOMSG_LEN];
    body.extend_from_slice(&8u16.to_ne_bytes());
    body.extend_from_slice(&IFLA_EXT_MASK.to_ne_bytes());
    body.extend_from_slice(&RTEXT_FILTER_SKIP_STATS.to_ne_bytes());
    rawdump::request(RTM_GETLINK, &body)
}

fn malformed(what: &str) -> NlError {
    NlError::local(Errno::EPROTO, format!("cannot read the links: {what}"))
}

/// A link from its message's payload (ifinfomsg, then attributes).
fn row(payload: &[u8]) -> Result<LinkRow, NlError> {
    let header = payload.get(..IFINFOMSG_LEN).ok_or_else(|| malformed("a link message is truncated"))?;
    let link_type = u16::from_ne_bytes([header[2], header[3]]);
    let index = u32::from_ne_bytes(header[4..8].try_into().unwrap());
    let flags = u32::from_ne_bytes(header[8..12].try_into().unwrap());
    let (mut name, mut mac, mut broadcast, mut mtu, mut devconf) = (String::new(), None, None, None, None);
    let outside = || malformed(&format!("an attribute of link {index} is outside its message"));
    for attr in rawdump::attributes(&payload[IFINFOMSG_LEN..]) {
        let (kind, value) = attr.map_err(|_| outside())?;
        match kind {
            IFLA_IFNAME => {
                // Linux takes any bytes but '/', ':' and white space in a
                // name: one that is not UTF-8 must not make the whole
                // table unreadable (it cannot be a rail of a TOML config).
                let text = value.split(|b| *b == 0).next().unwrap_or_default();
                name = String::from_utf8_lossy(text).into_owned();
            }
            IFLA_ADDRESS if !value.is_empty() => mac = Some(HwAddr::new(value)),
            IFLA_BROADCAST if !value.is_empty() => broadcast = Some(value.to_vec()),
            IFLA_MTU if value.len() == 4 => mtu = Some(u32::from_ne_bytes(value.try_into().unwrap())),
            IFLA_AF_SPEC => devconf = inet_conf(value),
            _ => {}
        }
    }
    let link = Link {
        index,
        name,
        admin_up: flags & libc::IFF_UP as u32 != 0,
        lower_up: flags & libc::IFF_LOWER_UP as u32 != 0,
        mac,
        link_type: LinkType::from(link_type),
    };
    Ok(LinkRow { link, broadcast, mtu, devconf })
}

/// The IPv4 devconf values in IFLA_AF_SPEC's value (a nest per address
/// family); None without an AF_INET nest or IFLA_INET_CONF in it, or when
/// they cannot be read: then the sysctl files are read, and the link
/// itself still is.
fn inet_conf(af_spec: &[u8]) -> Option<DevConf> {
    let find = |buf, wanted| rawdump::attributes(buf).map_while(Result::ok).find(|(kind, _)| *kind == wanted);
    let (_, inet) = find(af_spec, libc::AF_INET as u16)?;
    let (_, conf) = find(inet, IFLA_INET_CONF)?;
    Some(DevConf::from_words(conf))
}

#[cfg(test)]
mod tests {
    use rtnetlink::packet_route::RouteNetlinkMessage;
    use rtnetlink::packet_route::link::{
        AfSpecInet, AfSpecInet6, AfSpecUnspec, InetDevConf, LinkAttribute, LinkExtentMask, LinkFlags,
        LinkLayerType, LinkMessage, State, Stats64,
    };

    use super::super::rawdump::NLMSG_HDRLEN;
    use super::super::rawdump::tests::{datagram, read_whole};
    use super::*;

    fn link(index: u32, attributes: Vec<LinkAttribute>) -> LinkMessage {
        let mut m = LinkMessage::default();
        m.header.index = index;
        m.header.flags = LinkFlags::Up | LinkFlags::LowerUp;
        m.header.link_layer_type = LinkLayerType::Ether;
        m.attributes = attributes;
        m
    }

    /// A link asked by name: RTM_GETLINK with the name and the statistics
    /// left out, not a dump (a dump would send every link) and not acked
    /// (the link is the answer), its
    /// length the message's, as netlink-packet-route reads it.
    #[test]
    fn a_link_asked_by_name_is_one_getlink_of_that_name() {
        use rtnetlink::packet_core::{NLM_F_REQUEST, NetlinkMessage, NetlinkPayload};
        for name in ["rail0", "ens1f0np0", "a", "abcdefghijklmno"] {
            let t = named(name);
            let req = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&t.request).unwrap();
            assert_eq!(req.header.length as usize, t.request.len(), "{name}");
            assert_eq!(req.header.flags, NLM_F_REQUEST, "{name}");
            assert_eq!(req.header.message_type, RTM_GETLINK);
            let NetlinkPayload::InnerMessage(RouteNetlinkMessage::GetLink(m)) = req.payload else {
                panic!("not a GetLink: {:?}", req.payload);
            };
            assert_eq!(m.header, LinkMessage::default().header, "{name}: a zero header (strict checking)");
            assert_eq!(
                m.attributes,
                [LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]), LinkAttribute::IfName(name.into())],
                "{name}"
            );
        }
    }

    /// The fields read here equal what `link::link_from` and
    /// `link::broadcast_of` take from netlink-packet-route's full parse,
    /// also with the attributes skipped here (nested ones included) before
    /// and after them.
    #[test]
    fn a_link_reads_as_the_full_parse_reads_it() {
        let eth = vec![2, 0, 0, 0, 0, 1];
        let msgs = [
            link(
                7,
                vec![
                    LinkAttribute::Mtu(9000),
                    LinkAttribute::IfName("rail0".into()),
                    LinkAttribute::OperState(State::Up),
                    LinkAttribute::Stats64(Stats64::default()),
                    LinkAttribute::AfSpecUnspec(vec![
                        AfSpecUnspec::Inet6(vec![AfSpecInet6::Token("::1".parse().unwrap())]),
                        AfSpecUnspec::Inet(vec![AfSpecInet::DevConf(numbered_devconf())]),
                    ]),
                    LinkAttribute::Address(eth.clone()),
                    LinkAttribute::Broadcast(vec![0xff; 6]),
                ],
            ),
            {
                let mut ib = link(
                    9,
                    vec![LinkAttribute::IfName("ib0".into()), LinkAttribute::Address(vec![0x80; 20])],
                );
                ib.header.link_layer_type = LinkLayerType::Infiniband;
                ib.header.flags = LinkFlags::Up;
                ib
            },
            link(11, vec![LinkAttribute::Address(Vec::new()), LinkAttribute::Broadcast(Vec::new())]),
        ];
        let table = table();
        let rows = read_whole(
            &table,
            &[datagram(msgs.iter().map(|m| (RouteNetlinkMessage::NewLink(m.clone()), 0)).collect(), Some(0))],
        )
        .unwrap();
        let want: Vec<LinkRow> = msgs
            .iter()
            .map(|m| LinkRow {
                link: super::super::link::link_from(m),
                broadcast: super::super::link::broadcast_of(m).map(<[u8]>::to_vec),
                mtu: m.attributes.iter().find_map(|a| match a {
                    LinkAttribute::Mtu(mtu) => Some(*mtu),
                    _ => None,
                }),
                devconf: inet_devconf(m).map(|c| DevConf(SysctlKey::ALL.map(|k| Some(field(&c, k))))),
            })
            .collect();
        assert_eq!(rows, want);
        assert_eq!(rows[0].link.name, "rail0");
        assert_eq!(rows[0].mtu, Some(9000));
        assert_eq!(rows[0].link.mac, Some(HwAddr::new(&eth)));
        assert_eq!(rows[1].link.link_type, LinkType::Infiniband);
        assert!(!rows[1].link.lower_up);
        let conf = rows[0].devconf.expect("rail0's IPv4 devconf");
        assert_eq!(SysctlKey::ALL.map(|k| conf.get(k)), [Some(119), Some(118), Some(108), Some(113)]);
        assert_eq!(rows[1].devconf, None, "no AF_INET in IFLA_AF_SPEC");
    }

    /// Every IPv4 devconf word numbered 100 + its IPV4_DEVCONF_* id, so
    /// that a key read from the wrong word shows.
    fn numbered_devconf() -> InetDevConf {
        let words: Vec<u8> = (1..=33u32).flat_map(|id| (100 + id).to_ne_bytes()).collect();
        InetDevConf::parse(&words).expect("33 words")
    }

    /// netlink-packet-route's reading of a link's IPv4 devconf.
    fn inet_devconf(m: &LinkMessage) -> Option<InetDevConf> {
        m.attributes.iter().find_map(|a| match a {
            LinkAttribute::AfSpecUnspec(specs) => specs.iter().find_map(|s| match s {
                AfSpecUnspec::Inet(inet) => inet.iter().find_map(|i| match i {
                    AfSpecInet::DevConf(c) => Some(*c),
                    _ => None,
                }),
                _ => None,
            }),
            _ => None,
        })
    }

    /// The field of netlink-packet-route's InetDevConf that holds `key`.
    fn field(c: &InetDevConf, key: SysctlKey) -> u32 {
        (match key {
            SysctlKey::ArpIgnore => c.arp_ignore,
            SysctlKey::ArpAnnounce => c.arp_announce,
            SysctlKey::RpFilter => c.rp_filter,
            SysctlKey::ArpFilter => c.arpfilter,
        }) as u32
    }

    /// An IPv4 devconf nest that cannot be read (here IFLA_INET_CONF's
    /// length runs outside it) leaves the values unknown, so that their
    /// files are read; the link itself still reads.
    #[test]
    fn an_unreadable_devconf_leaves_the_values_unknown_not_the_link() {
        let inet = LinkAttribute::AfSpecUnspec(vec![AfSpecUnspec::Inet(vec![AfSpecInet::DevConf(
            numbered_devconf(),
        )])]);
        let m = link(4, vec![LinkAttribute::IfName("r4".into()), inet]);
        let mut bytes = datagram(vec![(RouteNetlinkMessage::NewLink(m), 0)], None);
        let good = row(&bytes[NLMSG_HDRLEN..]).expect("read");
        assert_eq!(good.devconf.map(|c| c.get(SysctlKey::ArpIgnore)), Some(Some(119)));
        let first_word = bytes.windows(4).position(|w| w == 101u32.to_ne_bytes()).expect("the first word");
        bytes[first_word - 4..first_word - 2].copy_from_slice(&u16::MAX.to_ne_bytes());
        let r = row(&bytes[NLMSG_HDRLEN..]).expect("the link reads");
        assert_eq!((r.link.name.as_str(), r.devconf), ("r4", None));
    }

    /// An IFLA_INET_CONF shorter than a key's word (a kernel of fewer
    /// devconf values) leaves that key unknown, not zero.
    #[test]
    fn a_short_devconf_array_leaves_the_keys_past_it_unknown() {
        let words: Vec<u8> = (1..=18u32).flat_map(|id| (100 + id).to_ne_bytes()).collect();
        let conf = DevConf::from_words(&words);
        assert_eq!(SysctlKey::ALL.map(|k| conf.get(k)), [None, Some(118), Some(108), Some(113)]);
        assert_eq!(DevConf::from_words(&[]), DevConf::default());
    }

    /// A name that is not UTF-8 (Linux allows it) reads lossily; it does
    /// not make the whole table unreadable.
    #[test]
    fn a_name_that_is_not_utf8_reads_lossily() {
        let bytes = datagram(
            vec![(RouteNetlinkMessage::NewLink(link(3, vec![LinkAttribute::IfName("rX".into())])), 0)],
            None,
        );
        let mut bytes = bytes;
        let at = bytes.windows(2).position(|w| w == b"rX").expect("the name");
        bytes[at + 1] = 0xff;
        let r = row(&bytes[NLMSG_HDRLEN..]).expect("read");
        assert_eq!((r.link.index, r.link.name.as_str()), (3, "r\u{fffd}"));
    }

    #[test]
    fn an_attribute_outside_its_message_is_an_error_not_a_panic() {
        let mut bytes =
            datagram(vec![(RouteNetlinkMessage::NewLink(link(1, vec![LinkAttribute::Mtu(1)])), 0)], None);
        let at = NLMSG_HDRLEN + IFINFOMSG_LEN;
        bytes[at] = 0xff;
        assert!(row(&bytes[NLMSG_HDRLEN..]).is_err());
        assert!(row(&bytes[NLMSG_HDRLEN..NLMSG_HDRLEN + 8]).is_err(), "a truncated header");
    }
}
