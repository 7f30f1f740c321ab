//! The dump protocol on a socket of its own, a strict one the connection
//! keeps: for the tables read whole and parsed only for what roce-route
//! uses, the links (`linkdump`) and the addresses (`addrdump`); for the
//! rules, routes and neighbours (`dump.rs`), parsed whole. (The links and
//! addresses each opened a socket of their own once: 2 of a no-op's 4.)
//!
//! Why not the request socket: netlink-proto parses every attribute of
//! every object into owned values and hands each message over a channel
//! to the request's stream. On a Kubernetes node with a thousand pod veths
//! that was about 12 ms of the link dump and 1.5-2 ms of the address dump
//! (a thousand IPv6 link-local addresses), of every command and of every
//! watch pass; the kernel's own part of the address dump is 0.4 ms.
//!
//! The protocol is the one `dump` follows: a result only when it ends in
//! NLMSG_DONE without an error; asked again when the kernel marks a
//! message as interrupted (NLM_F_DUMP_INTR), `DUMP_ATTEMPTS` times at most.
//! Requests that are not dumps (route lookups, links or IPv6 addresses
//! asked for by themselves: no NLM_F_DUMP) go several to a datagram on
//! the same socket (`ask_all_on`), each answer, its one reply or its
//! error, read into its own request's place by its sequence number. They
//! ask for no ack: the kernel answers such a request with one message,
//! and sends an error whether asked or not, so an ack would only cost a
//! read (one of each link lookup's two, of each route lookup's two).

use nix::errno::Errno;
use nix::libc;
use rtnetlink::packet_core::{NLM_F_DUMP_INTR, NetlinkBuffer};
use rtnetlink::sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use super::NlError;
use super::dump::{DUMP_ATTEMPTS, pause_after};

pub(super) const NLMSG_HDRLEN: usize = 16;
const NLMSG_DONE: u16 = libc::NLMSG_DONE as u16;
const NLMSG_ERROR: u16 = libc::NLMSG_ERROR as u16;

/// How much one read takes. The kernel fills a dump's datagrams up to the
/// size of the largest read the socket has seen (at most 32 KiB; a page
/// before the first read): peeking at each
/// datagram's size with an empty buffer first, as netlink-sys's
/// `recv_from_full` does, made it send three links a page (1,336 reads
/// for 2,000 links); a read of this size takes about 29 links (74 reads).
/// The time is mostly the kernel filling the messages either way.
const READ_SIZE: usize = 64 * 1024;

/// What is dumped: its name in errors ("links"), the request (header
/// first, NLM_F_DUMP set; or neither NLM_F_DUMP nor NLM_F_ACK for a
/// request that is not a dump, answered by one reply),
/// the type of its reply messages, and how one reads (None: a reply that
/// is not wanted).
pub(super) struct Table<T> {
    pub what: &'static str,
    pub request: Vec<u8>,
    pub reply: u16,
    pub parse: fn(&[u8]) -> Result<Option<T>, NlError>,
}

impl<T> Table<T> {
    /// Whether the request is a dump (NLM_F_DUMP in its header), not a
    /// request answered by one reply.
    fn is_dump(&self) -> bool {
        let flags = self.request.get(6..8).map_or(0, |f| u16::from_ne_bytes(f.try_into().unwrap()));
        flags & libc::NLM_F_DUMP as u16 == libc::NLM_F_DUMP as u16
    }
}

/// A dump request of `kind` (NLM_F_REQUEST | NLM_F_DUMP; sequence 1 until
/// it is sent with one of its own) with `body` after the header.
pub(super) fn request(kind: u16, body: &[u8]) -> Vec<u8> {
    request_with(kind, libc::NLM_F_DUMP as u16, body)
}

/// A request of `kind` that is not a dump, answered by its one reply or
/// its error (NLM_F_REQUEST alone; sequence 1 until it is sent).
pub(super) fn ask_request(kind: u16, body: &[u8]) -> Vec<u8> {
    request_with(kind, 0, body)
}

fn request_with(kind: u16, flags: u16, body: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN + body.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&(libc::NLM_F_REQUEST as u16 | flags).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(body);
    m
}

/// `dump` on the socket `kept` holds (one `open` makes when it holds
/// none), kept there for the next dump when this one was read to its end,
/// also when that end is the kernel's error. A dump that failed before
/// its end (a message that cannot be read, a socket error) or was cut
/// short by the read may have left datagrams of its own in the socket:
/// that socket is closed, never used again.
pub(super) fn dump_on<T>(
    kept: &mut Option<Socket>,
    open: fn() -> Result<Socket, NlError>,
    table: &Table<T>,
) -> Result<Vec<T>, NlError> {
    let _p = crate::profile::phase("dumps");
    let mut read_size = READ_SIZE;
    for attempt in 1..=DUMP_ATTEMPTS {
        let socket = match kept.take() {
            Some(s) => s,
            None => open()?,
        };
        match dump_once(&socket, table, read_size)? {
            Attempt::Read(rows) => {
                *kept = Some(socket);
                return Ok(rows);
            }
            // The kernel's own last answer ended it (a missing table):
            // nothing of it is left to read, so the socket is kept.
            Attempt::Refused(e) => {
                *kept = Some(socket);
                return Err(e);
            }
            // A blocking pause: the dump itself blocks, and nothing else
            // can use these few milliseconds.
            Attempt::Interrupted => {
                *kept = Some(socket);
                if attempt < DUMP_ATTEMPTS {
                    std::thread::sleep(pause_after(attempt));
                }
            }
            // A datagram larger than the read (a message can be: the
            // kernel makes room for the largest one): asked again with
            // room for it, on another socket.
            Attempt::Cut(size) => read_size = size.next_multiple_of(4096),
        }
    }
    Err(NlError::local(
        Errno::EINTR,
        format!(
            "the {} dump was interrupted by concurrent changes {DUMP_ATTEMPTS} times in a row",
            table.what
        ),
    ))
}

/// At most this many requests go in one datagram: each answer waits in
/// the socket's receive queue until it is read, and the kernel drops one
/// that does not fit (the read then fails with ENOBUFS). An answer takes
/// up to a page and its buffer head there (a route lookup's is allocated
/// NLMSG_GOODSIZE), so 16 take some 80 KB of the 208 KB a socket gets
/// unless net.core.rmem_default was lowered.
const ASKS_AT_ONCE: usize = 16;

/// The requests of `tables`, none a dump, sent `ASKS_AT_ONCE` to a
/// datagram on the socket `kept` holds (one `open` makes when it holds
/// none), and each one's answer in their order: its rows, or the kernel's
/// error (a missing link's ENODEV, a lookup without a route). The kernel
/// takes the requests of a datagram one after the other, as if each came
/// alone, and answers each with a datagram of its own carrying the
/// request's sequence number; one send instead of one per request saves
/// about 1.7 µs a request here (`check` on 32 dual-stack rails asks some
/// 400). The socket is kept when every answer was read; a failure before
/// (a message that cannot be read, a socket error, ENOBUFS) may leave
/// answers in it, so it is closed.
pub(super) fn ask_all_on<T>(
    kept: &mut Option<Socket>,
    open: fn() -> Result<Socket, NlError>,
    tables: &[Table<T>],
) -> Result<Vec<Result<Vec<T>, NlError>>, NlError> {
    let _p = crate::profile::phase("dumps");
    let mut answers = Vec::with_capacity(tables.len());
    for chunk in tables.chunks(ASKS_AT_ONCE) {
        let socket = match kept.take() {
            Some(s) => s,
            None => open()?,
        };
        answers.extend(ask_chunk(&socket, chunk)?);
        *kept = Some(socket);
    }
    Ok(answers)
}

/// One datagram of requests that are not dumps, and their answers.
fn ask_chunk<T>(socket: &Socket, tables: &[Table<T>]) -> Result<Vec<Result<Vec<T>, NlError>>, NlError> {
    let io = |what: &'static str| move |e: std::io::Error| NlError::io(e, what);
    let mut datagram = Vec::new();
    let mut asks = Vec::with_capacity(tables.len());
    for table in tables {
        if table.is_dump() {
            return Err(NlError::local(Errno::EINVAL, "internal error: a dump asked with other requests"));
        }
        let seq = next_sequence();
        let at = datagram.len();
        datagram.extend_from_slice(&table.request);
        if let Some(field) = datagram.get_mut(at + 8..at + 12) {
            field.copy_from_slice(&seq.to_ne_bytes());
        }
        datagram.resize(datagram.len().next_multiple_of(4), 0);
        asks.push(Dump::new(table, seq));
    }
    socket.send(&datagram, 0).map_err(io("cannot send a request"))?;
    crate::profile::count("asks", tables.len());
    crate::profile::count("ask_sends", 1);
    let mut left = asks.len();
    let mut buf = Vec::with_capacity(READ_SIZE);
    while left > 0 {
        buf.clear();
        let size = socket.recv(&mut buf, libc::MSG_TRUNC).map_err(io("cannot read an answer"))?;
        crate::profile::count("ask_reads", 1);
        let seq = NetlinkBuffer::new_checked(&buf[..]).map(|m| m.sequence_number()).map_err(|_| {
            NlError::local(Errno::EPROTO, "cannot read an answer: a message length is outside its datagram")
        })?;
        // Each answer is a datagram of its own, of one request.
        let Some(ask) = asks.iter_mut().find(|a| a.seq == seq && !a.done) else {
            return Err(NlError::local(
                Errno::EPROTO,
                format!("the kernel answered request {seq}, which was not asked or was answered already"),
            ));
        };
        ask.read(&buf, size)?;
        if ask.done {
            left -= 1;
        }
    }
    Ok(asks
        .into_iter()
        .map(|a| {
            let what = a.table.what;
            match a.attempt() {
                Attempt::Read(rows) => Ok(rows),
                Attempt::Refused(e) => Err(e),
                Attempt::Cut(_) | Attempt::Interrupted => Err(NlError::local(
                    Errno::EPROTO,
                    format!("the kernel answered a request for {what} as if it were a dump"),
                )),
            }
        })
        .collect())
}

/// A NETLINK_ROUTE socket of this process's own, bound and connected to
/// the kernel (dumps here, changes in `write`).
pub(super) fn socket() -> Result<Socket, NlError> {
    let io = |what: &'static str| move |e: std::io::Error| NlError::io(e, what);
    // Counted for the profile (ROCE_ROUTE_PROFILE=1): each socket costs
    // 7-8 system calls, and an apply that opened one per table went
    // unseen (tests/apply.rs holds the count).
    crate::profile::count("netlink_sockets", 1);
    let mut socket = Socket::new(NETLINK_ROUTE).map_err(io("cannot open a netlink socket"))?;
    socket.bind_auto().map_err(io("cannot bind a netlink socket"))?;
    socket.connect(&SocketAddr::new(0, 0)).map_err(io("cannot connect a netlink socket"))?;
    Ok(socket)
}

/// `socket` with strict dump checking, so that the kernel filters route
/// dumps on the header and attributes of the request (a table, a protocol,
/// an output interface), and extended acks, so that a dump's error carries
/// the kernel's text ("FIB table does not exist"; capped: a refusal echoes
/// the request's header only).
pub(super) fn strict_socket() -> Result<Socket, NlError> {
    let socket = socket()?;
    socket.set_ext_ack(true).map_err(|e| NlError::io(e, "NETLINK_EXT_ACK"))?;
    socket.set_cap_ack(true).map_err(|e| NlError::io(e, "NETLINK_CAP_ACK"))?;
    socket.set_netlink_get_strict_chk(true).map_err(|e| NlError::io(e, "NETLINK_GET_STRICT_CHK"))?;
    Ok(socket)
}

/// How one dump went.
#[derive(Debug, PartialEq, Eq)]
enum Attempt<T> {
    Read(Vec<T>),
    /// The kernel marked it as interrupted (the table changed meanwhile).
    Interrupted,
    /// A datagram of this size did not fit in the read.
    Cut(usize),
    /// The kernel ended it with this error: NLMSG_DONE's for a dump,
    /// NLMSG_ERROR's for a request that is not one.
    Refused(NlError),
}

/// One dump on `socket`, each datagram read at once into `read_size`
/// bytes.
fn dump_once<T>(socket: &Socket, table: &Table<T>, read_size: usize) -> Result<Attempt<T>, NlError> {
    let io = |what: &'static str| move |e: std::io::Error| NlError::io(e, what);
    if !table.is_dump() {
        return Err(NlError::local(
            Errno::EINVAL,
            "internal error: a request that is not a dump read as one",
        ));
    }
    let seq = next_sequence();
    let mut request = table.request.clone();
    if let Some(field) = request.get_mut(8..12) {
        field.copy_from_slice(&seq.to_ne_bytes());
    }
    socket.send(&request, 0).map_err(io("cannot send a dump request"))?;
    let mut dump = Dump::new(table, seq);
    let mut buf = Vec::with_capacity(read_size);
    while !dump.done {
        buf.clear();
        // MSG_TRUNC: the datagram's real size, also when it did not fit.
        let size = socket.recv(&mut buf, libc::MSG_TRUNC).map_err(io("cannot read a dump"))?;
        dump.read(&buf, size)?;
    }
    Ok(dump.attempt())
}

/// A sequence number of this process's own for each request, so that a
/// reply is read as the answer to the request that carried it and to no
/// other (from 2: the tables' requests carry 1 until sent).
fn next_sequence() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(2);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed).max(2)
}

/// A dump as its datagrams are read. Pure.
struct Dump<'t, T> {
    table: &'t Table<T>,
    /// The request's sequence number: every reply carries it.
    seq: u32,
    rows: Vec<T>,
    interrupted: bool,
    cut: Option<usize>,
    refused: Option<NlError>,
    done: bool,
}

impl<'t, T> Dump<'t, T> {
    fn new(table: &'t Table<T>, seq: u32) -> Self {
        Dump { table, seq, rows: Vec::new(), interrupted: false, cut: None, refused: None, done: false }
    }

    /// The result of a finished dump.
    fn attempt(self) -> Attempt<T> {
        match (self.cut, self.refused, self.interrupted) {
            (Some(size), _, _) => Attempt::Cut(size),
            (None, Some(e), _) => Attempt::Refused(e),
            (None, None, true) => Attempt::Interrupted,
            (None, None, false) => Attempt::Read(self.rows),
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
            let msg = NetlinkBuffer::new_checked(buf).map_err(|_| {
                NlError::local(
                    Errno::EPROTO,
                    format!("cannot read the {}: a message length is outside its datagram", self.table.what),
                )
            })?;
            // A reply to another request: one left behind in the socket.
            // Never read as this one's answer; the socket is not kept.
            if msg.sequence_number() != self.seq {
                return Err(NlError::local(
                    Errno::EPROTO,
                    format!(
                        "cannot read the {}: the kernel answered request {} where {} was due",
                        self.table.what,
                        msg.sequence_number(),
                        self.seq
                    ),
                ));
            }
            if msg.flags() & NLM_F_DUMP_INTR != 0 {
                self.interrupted = true;
            }
            let payload = msg.payload();
            let code = || payload.get(..4).map_or(0, |c| i32::from_ne_bytes(c.try_into().unwrap()));
            match msg.message_type() {
                NLMSG_DONE => {
                    self.done = true;
                    self.refused = NlError::of_done(code(), payload.get(4..).unwrap_or_default());
                }
                // A dump refused (EBUSY, EPERM, ENOBUFS), with its ext-ack
                // text: an error, and its socket is not kept, since the
                // kernel may still run a dump on it (EBUSY: one runs
                // already; ENOBUFS for its first datagram leaves it
                // running). A request that is not a dump ends at its
                // error (or an ack, had it asked for one).
                NLMSG_ERROR => match (
                    NlError::of_error_code(code(), payload.get(4..).unwrap_or_default()),
                    self.table.is_dump(),
                ) {
                    (Some(refused), true) => return Err(refused),
                    (Some(refused), false) => (self.done, self.refused) = (true, Some(refused)),
                    (None, false) => self.done = true,
                    (None, true) => {
                        return Err(NlError::local(
                            Errno::EPROTO,
                            format!("the kernel acked the {} dump instead of sending it", self.table.what),
                        ));
                    }
                },
                // A request that is not a dump ends at its one reply.
                t if t == self.table.reply => {
                    self.rows.extend((self.table.parse)(payload)?);
                    self.done = !self.table.is_dump();
                }
                _ => {}
            }
            buf = &buf[(msg.length() as usize).next_multiple_of(4).min(buf.len())..];
        }
        Ok(())
    }
}

/// The attributes of `buf` (a message's payload after its fixed header)
/// as (type, value), the type without NLA_F_NESTED and
/// NLA_F_NET_BYTEORDER, each attribute aligned to 4 bytes; one whose
/// length is below its 4-byte header or past the end is an error and ends
/// the walk. netlink-packet-core's NlasIterator does the same (its walk is
/// the tests' oracle) at ~150 instructions an attribute, a link's 44 of
/// them ~6.6k; this at ~15.
pub(super) fn attributes(buf: &[u8]) -> Attributes<'_> {
    Attributes { rest: buf }
}

pub(super) struct Attributes<'a> {
    rest: &'a [u8],
}

/// An attribute whose length does not fit its message.
#[derive(Debug)]
pub(super) struct Outside;

impl<'a> Iterator for Attributes<'a> {
    type Item = Result<(u16, &'a [u8]), Outside>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let rest = std::mem::take(&mut self.rest);
        let Some(&[l0, l1, t0, t1]) = rest.first_chunk::<4>() else {
            return Some(Err(Outside));
        };
        let len = usize::from(u16::from_ne_bytes([l0, l1]));
        if !(4..=rest.len()).contains(&len) {
            return Some(Err(Outside));
        }
        self.rest = rest.get(len.next_multiple_of(4)..).unwrap_or_default();
        let kind = u16::from_ne_bytes([t0, t1]) & libc::NLA_TYPE_MASK as u16;
        Some(Ok((kind, &rest[4..len])))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use rtnetlink::packet_core::{NLM_F_MULTIPART, NetlinkHeader, NetlinkMessage, NetlinkPayload};
    use rtnetlink::packet_route::RouteNetlinkMessage;
    use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage};

    use super::*;

    /// A datagram of `msgs` as the kernel frames them.
    pub fn datagram(msgs: Vec<(RouteNetlinkMessage, u16)>, done: Option<i32>) -> Vec<u8> {
        let mut out = Vec::new();
        for (m, flags) in msgs {
            out.extend(framed(NetlinkPayload::InnerMessage(m), flags));
        }
        if let Some(code) = done {
            let mut d = rtnetlink::packet_core::DoneMessage::default();
            d.code = code;
            out.extend(framed(NetlinkPayload::Done(d), 0));
        }
        out
    }

    /// One message as the kernel frames it in a dump (NLM_F_MULTI and
    /// `flags`; sequence 0).
    pub fn framed(payload: NetlinkPayload<RouteNetlinkMessage>, flags: u16) -> Vec<u8> {
        let mut header = NetlinkHeader::default();
        header.flags = flags | NLM_F_MULTIPART;
        let mut m = NetlinkMessage::new(header, payload);
        m.finalize();
        let mut bytes = vec![0; m.buffer_len()];
        m.serialize(&mut bytes);
        bytes
    }

    /// `read` of `message` cut at every length succeeds exactly when the
    /// cut falls between two attributes after its `header` bytes
    /// (NlasIterator says where), and fails, without a panic, elsewhere.
    pub fn readable_exactly_between_attributes<T: std::fmt::Debug>(
        message: &[u8],
        header: usize,
        read: impl Fn(&[u8]) -> Result<T, NlError>,
    ) {
        use rtnetlink::packet_core::NlasIterator;
        for cut in 0..message.len() {
            let whole = cut >= header && NlasIterator::new(&message[header..cut]).all(|a| a.is_ok());
            let got = read(&message[..cut]);
            assert_eq!(got.is_ok(), whole, "cut at {cut}: {got:?}");
        }
    }

    /// Reads the rows of `table` from whole datagrams, as a dump would
    /// (their messages carry sequence 0, as these helpers frame them).
    pub fn read_whole<T>(table: &Table<T>, datagrams: &[Vec<u8>]) -> Result<Vec<T>, NlError> {
        let mut dump = Dump::new(table, 0);
        for d in datagrams {
            dump.read(d, d.len())?;
        }
        assert!(dump.done, "the dump did not end");
        match dump.attempt() {
            Attempt::Read(rows) => Ok(rows),
            Attempt::Refused(e) => Err(e),
            other => panic!("not read: {}", matches!(other, Attempt::Interrupted)),
        }
    }

    /// A table of links read as their index.
    fn indexes() -> Table<u32> {
        Table {
            what: "links",
            request: request(libc::RTM_GETLINK, &[0; 16]),
            reply: libc::RTM_NEWLINK,
            parse: |p| Ok(p.get(4..8).map(|i| u32::from_ne_bytes(i.try_into().unwrap()))),
        }
    }

    fn one(index: u32, flags: u16) -> Vec<(RouteNetlinkMessage, u16)> {
        let mut m = LinkMessage::default();
        m.header.index = index;
        m.attributes = vec![LinkAttribute::IfName("lo".into())];
        vec![(RouteNetlinkMessage::NewLink(m), flags)]
    }

    /// A dump goes on over datagrams until NLMSG_DONE; an error in it
    /// fails it; a message marked interrupted makes it no result.
    #[test]
    fn a_dump_ends_at_done_fails_on_its_error_and_notes_an_interruption() {
        let t = indexes();
        let mut dump = Dump::new(&t, 0);
        let first = datagram(one(1, 0), None);
        dump.read(&first, first.len()).unwrap();
        assert!(!dump.done);
        let last = datagram(one(2, 0), Some(0));
        dump.read(&last, last.len()).unwrap();
        assert!(dump.done);
        assert_eq!(dump.attempt(), Attempt::Read(vec![1, 2]));

        let failed = datagram(one(1, 0), Some(-libc::EBUSY));
        let mut refused = Dump::new(&t, 0);
        refused.read(&failed, failed.len()).unwrap();
        assert!(refused.done, "the kernel's error ends the dump: nothing of it is left to read");
        match refused.attempt() {
            Attempt::Refused(e) => assert!(e.is(Errno::EBUSY), "{e:?}"),
            other => panic!("not refused: {:?}", matches!(other, Attempt::Read(_))),
        }

        let marked = datagram(one(1, NLM_F_DUMP_INTR), Some(0));
        let mut intr = Dump::new(&t, 0);
        intr.read(&marked, marked.len()).unwrap();
        assert!(intr.done);
        assert_eq!(intr.attempt(), Attempt::Interrupted);
    }

    /// A dump refused with NLMSG_ERROR is an error, not an end: the
    /// kernel may still run it on the socket (EBUSY; ENOBUFS for its first
    /// datagram), so the socket is not kept. The same error answering a
    /// request that is not a dump is its end.
    #[test]
    fn a_refused_dump_fails_where_a_refused_request_ends() {
        let mut e = rtnetlink::packet_core::ErrorMessage::default();
        e.code = std::num::NonZeroI32::new(-libc::ENOBUFS);
        let error = framed(NetlinkPayload::Error(e), 0);

        let dump = indexes();
        let e = Dump::new(&dump, 0).read(&error, error.len()).unwrap_err();
        assert!(e.is(Errno::ENOBUFS), "{e:?}");

        let lookup = Table { request: Vec::new(), ..indexes() };
        let mut answer = Dump::new(&lookup, 0);
        answer.read(&error, error.len()).unwrap();
        assert!(answer.done);
        assert!(matches!(answer.attempt(), Attempt::Refused(e) if e.is(Errno::ENOBUFS)));
    }

    /// A reply carrying another request's sequence number (one left in
    /// the socket) is never read as this request's answer.
    #[test]
    fn a_reply_to_another_request_is_not_this_ones() {
        let t = indexes();
        let stale = datagram(one(1, 0), Some(0));
        let e = Dump::new(&t, 7).read(&stale, stale.len()).unwrap_err();
        assert!(e.to_string().contains("answered request 0 where 7 was due"), "{e}");
    }

    /// A datagram larger than the read ends the dump as cut, with the
    /// size to read it whole, never as the rows read up to there.
    #[test]
    fn a_datagram_cut_by_the_read_asks_for_room_not_a_result() {
        let t = indexes();
        let bytes = datagram(one(1, 0), Some(0));
        let mut cut = Dump::new(&t, 0);
        cut.read(&bytes[..bytes.len() - 20], bytes.len()).unwrap();
        assert!(cut.done);
        assert_eq!(cut.attempt(), Attempt::Cut(bytes.len()));
        assert_eq!(read_whole(&t, &[bytes]).unwrap(), [1]);
    }

    #[test]
    fn a_length_outside_the_datagram_is_an_error_not_a_panic() {
        let t = indexes();
        let mut bytes = datagram(one(1, 0), None);
        bytes[0] = 0xff;
        assert!(Dump::new(&t, 0).read(&bytes, bytes.len()).is_err());
    }

    /// The attribute walk is NlasIterator's: the same types and values, an
    /// error where it has one, and nothing after it. Buffers of every
    /// shape: attributes of lengths 0 to 11 (unaligned ones padded), flag
    /// bits in their types, each cut at every length, and random bytes.
    #[test]
    fn attributes_are_walked_as_netlink_packet_core_walks_them() {
        use rtnetlink::packet_core::NlasIterator;
        let ours = |buf: &[u8]| -> Vec<Option<(u16, Vec<u8>)>> {
            attributes(buf).map(|a| a.ok().map(|(k, v)| (k, v.to_vec()))).collect()
        };
        let theirs = |buf: &[u8]| -> Vec<Option<(u16, Vec<u8>)>> {
            NlasIterator::new(buf).map(|a| a.ok().map(|a| (a.kind(), a.value().to_vec()))).collect()
        };
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut buffers = Vec::new();
        for _ in 0..300 {
            let mut buf = Vec::new();
            for _ in 0..random() % 5 {
                let value_len = (random() % 12) as usize;
                let kind = (random() % 0x1_0000) as u16;
                buf.extend(u16::try_from(4 + value_len).unwrap().to_ne_bytes());
                buf.extend(kind.to_ne_bytes());
                buf.extend((0..value_len).map(|_| random() as u8));
                buf.resize(buf.len().next_multiple_of(4), 0);
            }
            for cut in 0..=buf.len() {
                buffers.push(buf[..cut].to_vec());
            }
            buffers.push((0..random() % 24).map(|_| random() as u8).collect());
        }
        // A length below the header, and one past the end.
        buffers.push(vec![2, 0, 1, 0, 0, 0, 0, 0]);
        buffers.push(vec![9, 0, 1, 0, 0, 0, 0, 0]);
        let mut errors = 0;
        for buf in &buffers {
            let walked = ours(buf);
            assert_eq!(walked, theirs(buf), "{buf:?}");
            errors += walked.iter().filter(|a| a.is_none()).count();
        }
        assert!(errors > 100, "the cases reach the errors: {errors}");
    }
}
