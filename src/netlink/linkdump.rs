//! The link table, read on a socket of its own and parsed only for what
//! roce-route uses: the header (index, flags, type), IFLA_IFNAME,
//! IFLA_ADDRESS, IFLA_BROADCAST and IFLA_MTU.
//!
//! Why not the request socket: netlink-proto parses every attribute of
//! every link into owned values (statistics, each address family's
//! configuration arrays, link info), growing and copying its buffers as it
//! goes. On a Kubernetes node with a thousand pod veths that was about
//! 12 ms of every command and of every watch pass (bench/scale.py), for
//! four fields a link. Here the kernel also leaves the statistics out
//! (RTEXT_FILTER_SKIP_STATS), and a link costs a walk over its attributes.
//!
//! The dump protocol is the one `dump` follows: a result only when it ends
//! in NLMSG_DONE without an error; asked again when the kernel marks a
//! message as interrupted (NLM_F_DUMP_INTR), `DUMP_ATTEMPTS` times at most.

use nix::errno::Errno;
use nix::libc;
use rtnetlink::packet_core::{NLM_F_DUMP_INTR, NetlinkBuffer, NlasIterator};
use rtnetlink::sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use super::NlError;
use super::dump::DUMP_ATTEMPTS;
use crate::model::{HwAddr, Link, LinkType};

/// A link, its IFLA_BROADCAST (when it has a non-empty one) and its MTU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkRow {
    pub link: Link,
    pub broadcast: Option<Vec<u8>>,
    pub mtu: Option<u32>,
}

const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const RTM_NEWLINK: u16 = libc::RTM_NEWLINK;
const RTM_GETLINK: u16 = libc::RTM_GETLINK;
const RTM_DELLINK: u16 = libc::RTM_DELLINK;
const NLMSG_DONE: u16 = libc::NLMSG_DONE as u16;
const NLMSG_ERROR: u16 = libc::NLMSG_ERROR as u16;
const IFLA_ADDRESS: u16 = libc::IFLA_ADDRESS;
const IFLA_BROADCAST: u16 = libc::IFLA_BROADCAST;
const IFLA_IFNAME: u16 = libc::IFLA_IFNAME;
const IFLA_MTU: u16 = libc::IFLA_MTU;
const IFLA_EXT_MASK: u16 = libc::IFLA_EXT_MASK;
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

/// How much one read takes. The kernel fills a dump's datagrams up to the
/// size of the reader's last read (at most 32 KiB): peeking at each
/// datagram's size with an empty buffer first, as netlink-sys's
/// `recv_from_full` does, made it send three links a page (1,336 reads
/// for 2,000 links); a read of this size takes about 29 links (74 reads).
/// The time is mostly the kernel filling the messages either way.
const READ_SIZE: usize = 64 * 1024;

/// Every link of this network namespace, in the kernel's order.
pub(super) fn dump() -> Result<Vec<LinkRow>, NlError> {
    let _p = crate::profile::phase("dumps");
    let mut read_size = READ_SIZE;
    for _ in 0..DUMP_ATTEMPTS {
        match dump_once(read_size)? {
            Attempt::Read(rows) => return Ok(rows),
            Attempt::Interrupted => {}
            // A datagram larger than the read (a link's message can be:
            // the kernel makes room for the largest one): asked again
            // with room for it.
            Attempt::Cut(size) => read_size = size.next_multiple_of(4096),
        }
    }
    Err(NlError::local(
        Errno::EINTR,
        format!("the link dump was interrupted by concurrent changes {DUMP_ATTEMPTS} times in a row"),
    ))
}

/// How one dump went.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    Read(Vec<LinkRow>),
    /// The kernel marked it as interrupted (the links changed meanwhile).
    Interrupted,
    /// A datagram of this size did not fit in the read.
    Cut(usize),
}

/// One dump, each datagram read at once into `read_size` bytes.
fn dump_once(read_size: usize) -> Result<Attempt, NlError> {
    let io = |what: &'static str| move |e: std::io::Error| NlError::io(e, what);
    let mut socket = Socket::new(NETLINK_ROUTE).map_err(io("cannot open a netlink socket"))?;
    socket.bind_auto().map_err(io("cannot bind a netlink socket"))?;
    socket.connect(&SocketAddr::new(0, 0)).map_err(io("cannot connect a netlink socket"))?;
    socket.send(&request(1), 0).map_err(io("cannot ask for the links"))?;
    let mut dump = Dump::default();
    let mut buf = Vec::with_capacity(read_size);
    while !dump.done {
        buf.clear();
        // MSG_TRUNC: the datagram's real size, also when it did not fit.
        let size = socket.recv(&mut buf, libc::MSG_TRUNC).map_err(io("cannot read the links"))?;
        dump.read(&buf, size)?;
    }
    Ok(dump.attempt())
}

/// RTM_GETLINK, NLM_F_DUMP, every family, statistics left out.
fn request(seq: u32) -> Vec<u8> {
    let len = NLMSG_HDRLEN + IFINFOMSG_LEN + 8;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&RTM_GETLINK.to_ne_bytes());
    m.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[0; IFINFOMSG_LEN]);
    m.extend_from_slice(&8u16.to_ne_bytes());
    m.extend_from_slice(&IFLA_EXT_MASK.to_ne_bytes());
    m.extend_from_slice(&RTEXT_FILTER_SKIP_STATS.to_ne_bytes());
    m
}

/// A dump as its datagrams are read. Pure.
#[derive(Debug, Default)]
struct Dump {
    rows: Vec<LinkRow>,
    interrupted: bool,
    cut: Option<usize>,
    done: bool,
}

impl Dump {
    /// The result of a finished dump.
    fn attempt(self) -> Attempt {
        match (self.cut, self.interrupted) {
            (Some(size), _) => Attempt::Cut(size),
            (None, true) => Attempt::Interrupted,
            (None, false) => Attempt::Read(self.rows),
        }
    }

    /// Takes the messages of one datagram (framed by netlink-packet-core's
    /// checked buffer, as `events::parse` frames notifications) whose real
    /// size is `size`: one cut short by the read ends the dump as `Cut`.
    fn read(&mut self, mut buf: &[u8], size: usize) -> Result<(), NlError> {
        if size > buf.len() {
            self.cut = Some(size);
            self.done = true;
            return Ok(());
        }
        while buf.len() >= NLMSG_HDRLEN && !self.done {
            let msg = NetlinkBuffer::new_checked(buf)
                .map_err(|_| malformed("a message length is outside its datagram"))?;
            if msg.flags() & NLM_F_DUMP_INTR != 0 {
                self.interrupted = true;
            }
            let payload = msg.payload();
            let code = || payload.get(..4).map_or(0, |c| i32::from_ne_bytes(c.try_into().unwrap()));
            match msg.message_type() {
                RTM_NEWLINK => self.rows.push(row(payload)?),
                NLMSG_DONE => {
                    self.done = true;
                    if let Some(e) = NlError::of_done(code(), payload.get(4..).unwrap_or_default()) {
                        return Err(e);
                    }
                }
                NLMSG_ERROR => {
                    return Err(NlError::local(
                        Errno::from_raw(code().saturating_abs()),
                        "the kernel refused the link dump",
                    ));
                }
                _ => {}
            }
            buf = &buf[(msg.length() as usize).next_multiple_of(4).min(buf.len())..];
        }
        Ok(())
    }
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
    let (mut name, mut mac, mut broadcast, mut mtu) = (String::new(), None, None, None);
    let outside = || malformed(&format!("an attribute of link {index} is outside its message"));
    for attr in NlasIterator::new(&payload[IFINFOMSG_LEN..]) {
        let attr = attr.map_err(|_| outside())?;
        let value = attr.value();
        match attr.kind() {
            IFLA_IFNAME => {
                let text = value.split(|b| *b == 0).next().unwrap_or_default();
                name = String::from_utf8(text.to_vec())
                    .map_err(|_| malformed(&format!("the name of link {index} is not UTF-8")))?;
            }
            IFLA_ADDRESS if !value.is_empty() => mac = Some(HwAddr::new(value)),
            IFLA_BROADCAST if !value.is_empty() => broadcast = Some(value.to_vec()),
            IFLA_MTU if value.len() == 4 => mtu = Some(u32::from_ne_bytes(value.try_into().unwrap())),
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
    Ok(LinkRow { link, broadcast, mtu })
}

#[cfg(test)]
mod tests {
    use rtnetlink::packet_core::{
        NLM_F_DUMP_INTR, NLM_F_MULTIPART, NetlinkHeader, NetlinkMessage, NetlinkPayload,
    };
    use rtnetlink::packet_route::RouteNetlinkMessage;
    use rtnetlink::packet_route::link::{
        AfSpecInet6, AfSpecUnspec, LinkAttribute, LinkFlags, LinkLayerType, LinkMessage, State, Stats64,
    };

    use super::*;

    /// A datagram of `msgs` as the kernel frames them.
    fn datagram(msgs: Vec<(RouteNetlinkMessage, u16)>, done: Option<i32>) -> Vec<u8> {
        let mut out = Vec::new();
        let mut push = |payload: NetlinkPayload<RouteNetlinkMessage>, flags: u16| {
            let mut header = NetlinkHeader::default();
            header.flags = flags | NLM_F_MULTIPART;
            let mut m = NetlinkMessage::new(header, payload);
            m.finalize();
            let mut bytes = vec![0; m.buffer_len()];
            m.serialize(&mut bytes);
            out.extend(bytes);
        };
        for (m, flags) in msgs {
            push(NetlinkPayload::InnerMessage(m), flags);
        }
        if let Some(code) = done {
            let mut d = rtnetlink::packet_core::DoneMessage::default();
            d.code = code;
            push(NetlinkPayload::Done(d), 0);
        }
        out
    }

    fn link(index: u32, attributes: Vec<LinkAttribute>) -> LinkMessage {
        let mut m = LinkMessage::default();
        m.header.index = index;
        m.header.flags = LinkFlags::Up | LinkFlags::LowerUp;
        m.header.link_layer_type = LinkLayerType::Ether;
        m.attributes = attributes;
        m
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
                    LinkAttribute::AfSpecUnspec(vec![AfSpecUnspec::Inet6(vec![AfSpecInet6::Token(
                        "::1".parse().unwrap(),
                    )])]),
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
        let mut dump = Dump::default();
        whole(
            &mut dump,
            &datagram(msgs.iter().map(|m| (RouteNetlinkMessage::NewLink(m.clone()), 0)).collect(), Some(0)),
        )
        .unwrap();
        assert!(dump.done && !dump.interrupted);
        let want: Vec<LinkRow> = msgs
            .iter()
            .map(|m| LinkRow {
                link: super::super::link::link_from(m),
                broadcast: super::super::link::broadcast_of(m).map(<[u8]>::to_vec),
                mtu: m.attributes.iter().find_map(|a| match a {
                    LinkAttribute::Mtu(mtu) => Some(*mtu),
                    _ => None,
                }),
            })
            .collect();
        assert_eq!(dump.rows, want);
        assert_eq!(dump.rows[0].link.name, "rail0");
        assert_eq!(dump.rows[0].mtu, Some(9000));
        assert_eq!(dump.rows[0].link.mac, Some(HwAddr::new(&eth)));
        assert_eq!(dump.rows[1].link.link_type, LinkType::Infiniband);
        assert!(!dump.rows[1].link.lower_up);
    }

    /// A dump goes on over datagrams until NLMSG_DONE; an error in it
    /// fails it; a message marked interrupted marks the dump.
    #[test]
    fn a_dump_ends_at_done_fails_on_its_error_and_notes_an_interruption() {
        let one =
            || vec![(RouteNetlinkMessage::NewLink(link(1, vec![LinkAttribute::IfName("lo".into())])), 0)];
        let mut dump = Dump::default();
        whole(&mut dump, &datagram(one(), None)).unwrap();
        assert!(!dump.done);
        whole(&mut dump, &datagram(one(), Some(0))).unwrap();
        assert_eq!((dump.done, dump.rows.len()), (true, 2));

        let mut failed = Dump::default();
        let e = whole(&mut failed, &datagram(one(), Some(-libc::EBUSY))).unwrap_err();
        assert!(e.is(Errno::EBUSY), "{e:?}");

        let mut intr = Dump::default();
        let marked = vec![(RouteNetlinkMessage::NewLink(link(1, vec![])), NLM_F_DUMP_INTR)];
        whole(&mut intr, &datagram(marked, Some(0))).unwrap();
        assert!(intr.done && intr.interrupted);
    }

    /// A datagram read whole.
    fn whole(dump: &mut Dump, bytes: &[u8]) -> Result<(), NlError> {
        dump.read(bytes, bytes.len())
    }

    /// A datagram larger than the read ends the dump as cut, with the
    /// size to read it whole, never as the links read up to there; a dump
    /// read whole is the links; one marked interrupted is not.
    #[test]
    fn a_datagram_cut_by_the_read_asks_for_room_not_a_result() {
        let one =
            || vec![(RouteNetlinkMessage::NewLink(link(1, vec![LinkAttribute::IfName("lo".into())])), 0)];
        let bytes = datagram(one(), Some(0));
        let mut cut = Dump::default();
        cut.read(&bytes[..bytes.len() - 20], bytes.len()).unwrap();
        assert!(cut.done);
        assert_eq!(cut.attempt(), Attempt::Cut(bytes.len()));

        let mut whole_dump = Dump::default();
        whole(&mut whole_dump, &bytes).unwrap();
        assert!(matches!(whole_dump.attempt(), Attempt::Read(rows) if rows.len() == 1));

        let marked = vec![(RouteNetlinkMessage::NewLink(link(1, vec![])), NLM_F_DUMP_INTR)];
        let mut intr = Dump::default();
        whole(&mut intr, &datagram(marked, Some(0))).unwrap();
        assert_eq!(intr.attempt(), Attempt::Interrupted);
    }

    #[test]
    fn a_length_outside_the_datagram_is_an_error_not_a_panic() {
        let mut bytes = datagram(vec![(RouteNetlinkMessage::NewLink(link(1, vec![])), 0)], None);
        bytes[0] = 0xff;
        assert!(whole(&mut Dump::default(), &bytes).is_err());
        let mut bytes =
            datagram(vec![(RouteNetlinkMessage::NewLink(link(1, vec![LinkAttribute::Mtu(1)])), 0)], None);
        let at = NLMSG_HDRLEN + IFINFOMSG_LEN;
        bytes[at] = 0xff;
        assert!(whole(&mut Dump::default(), &bytes).is_err());
    }
}
