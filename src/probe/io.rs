//! The sockets and the one event loop that probes every pair at once.
//! Needs CAP_NET_RAW; changes nothing on the host (no sysctl, no
//! neighbour entry: ARP and neighbour solicitation are sent by hand; the
//! kernel resolves the echo's next hop itself, as for any ping).
//!
//! - Observers: one AF_PACKET SOCK_DGRAM socket per protocol (ARP, IPv4,
//!   IPv6) on every interface, a socket filter keeping the rails' frames
//!   only (`SKF_AD_IFINDEX`). They see each answer and echo reply with
//!   the interface it came in on (`sll_ifindex`) and its link-layer
//!   source (`sll_addr`), before rp_filter could drop a reply that came in
//!   on the wrong rail; every rail is observed, so such a reply is seen.
//!   Three sockets, not three per rail: the kernel waits for an RCU grace
//!   period when it closes a packet socket (`packet_release()` calls
//!   `synchronize_net()`), which made 24 of them cost 0.8 s.
//! - Senders: the ARP and IPv6 observers send the ARP requests and
//!   neighbour solicitations too (`sendto` names the rail); per rail and
//!   source address an ICMP raw
//!   socket bound to the address and the rail (SO_BINDTODEVICE), with
//!   IP(V6)_PMTUDISC_PROBE: don't-fragment set, the cached path MTU
//!   ignored, so every size up to the rail's MTU goes out whole.
//!
//! IPv6 only: Linux sends an ICMPv6 echo reply out of the interface the
//! request came in on (`icmpv6_echo_reply()` sets the flow's oif to it),
//! whatever the peer's routing, so the echo cannot show that the peer's
//! replies leave by another NIC. Its ICMPv6 errors are routed, from the
//! address the datagram was sent to: so with the small echoes goes one
//! UDP datagram to an unused port, and the port unreachable that comes
//! back shows the peer's real egress NIC. (The peer rate-limits errors per
//! destination, a burst of 6: past that a pair just lacks that evidence.)
//!
//! Per pair: neighbour resolution (resent once at half the timeout); once
//! answered, three small echoes; once back, one echo of the rail's MTU;
//! if it does not come back, bounded rounds of sizes in between, sent
//! together. A stage waits the full timeout only for what does not
//! answer; the large echoes, sent after small ones came back in RTT, get
//! ten times that RTT (at least 50 ms, at most the timeout).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nix::libc;

use crate::announce::{ETHERTYPE_ARP, ETHERTYPE_IPV6, ipoib_multicast};
use crate::model::ARPHRD_INFINIBAND;
use crate::probe::frames::{self, V4_OVERHEAD, V6_OVERHEAD, V6In};
use crate::signals::StopFlag;

/// Small echoes per pair (their median is the RTT).
pub const SMALL_ECHOES: u16 = 3;
/// The small echo's size on the wire: ping's default (56 bytes of data).
const SMALL_DATA: u32 = 56;
/// Rounds of the path MTU search, and sizes per round.
const SEARCH_ROUNDS: u8 = 3;
const SEARCH_SIZES: u32 = 7;
/// MTUs met in practice, tried first when inside the searched range.
const COMMON_MTUS: [u32; 6] = [1280, 1500, 2044, 4092, 4200, 9000];
/// How long, at least, a second ARP answer is waited for after a request.
const FLUX_GRACE: Duration = Duration::from_millis(50);
const LARGE_GRACE_MIN: Duration = Duration::from_millis(50);

// Linux values libc does not name on every target.
const PACKET_OTHERHOST: u8 = 3;
const PACKET_OUTGOING: u8 = 4;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const SO_RCVBUFFORCE: libc::c_int = 33;
const ICMP_FILTER: libc::c_int = 1;
const ICMP6_FILTER: libc::c_int = 1;
const ETH_P_IP: u16 = 0x0800;
const RCVBUF: libc::c_int = 8 << 20;
/// The UDP port of the IPv6 reply-path datagram: traceroute's first port,
/// plus the pair's index.
pub const UDP_BASE_PORT: u16 = 33434;
const UDP_PORTS: usize = 20000;

/// A local rail as the sockets need it.
#[derive(Clone, Debug)]
pub struct RailIo {
    pub name: String,
    pub ifindex: u32,
    /// ARPHRD_ETHER (1) or ARPHRD_INFINIBAND (32).
    pub link_type: u16,
    pub hw: Vec<u8>,
    pub broadcast: Vec<u8>,
    pub mtu: u32,
}

/// One pair to probe: `rail` is an index into the rails.
#[derive(Clone, Debug)]
pub struct Job {
    pub rail: usize,
    pub source: IpAddr,
    pub peer: IpAddr,
}

/// What was seen for one job.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub arp_answers: Vec<Vec<u8>>,
    /// The small echoes' replies: the rail they came in on, their
    /// link-layer source.
    pub replies: Vec<(usize, Option<Vec<u8>>)>,
    pub rtts: Vec<Duration>,
    /// IPv6: the port unreachable errors (routed by the peer), as replies.
    pub routed: Vec<(usize, Option<Vec<u8>>)>,
    pub full_size_back: Option<bool>,
    pub largest_back: Option<u32>,
    /// Frames this job sent (ARP/NS and echoes).
    pub sent: u32,
    /// Why something could not be sent, if it could not.
    pub send_error: Option<String>,
}

/// Opening a socket failed: EPERM/EACCES means no CAP_NET_RAW.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct OpenError {
    pub what: String,
    #[source]
    pub source: io::Error,
}

impl OpenError {
    pub fn not_permitted(&self) -> bool {
        matches!(self.source.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Arp,
    Echo,
    Full,
    Search,
    Done,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Small,
    Size(u32),
}

struct Sent {
    seq: u16,
    kind: Kind,
    at: Instant,
    back: bool,
}

struct State {
    stage: Stage,
    deadline: Instant,
    arp_at: Instant,
    arp_tries: u8,
    probes: Vec<Sent>,
    next_seq: u16,
    round: u8,
    lo: u32,
    hi: u32,
    seen: Seen,
}

fn open_error(what: String) -> impl FnOnce(io::Error) -> OpenError {
    move |source| OpenError { what, source }
}

/// Probes every job; returns what was seen for each, in order.
pub fn run(
    rails: &[RailIo],
    jobs: &[Job],
    timeout: Duration,
    stop: &StopFlag,
) -> Result<Vec<Seen>, OpenError> {
    // Observers of every rail, one per protocol the jobs need.
    let ifindices: Vec<u32> = rails.iter().map(|r| r.ifindex).collect();
    let rail_of: HashMap<i32, usize> = rails.iter().enumerate().map(|(i, r)| (r.ifindex as i32, i)).collect();
    let v4 = jobs.iter().any(|j| j.peer.is_ipv4());
    let v6 = jobs.iter().any(|j| j.peer.is_ipv6());
    let mut observers: Vec<(OwnedFd, u16)> = Vec::new();
    for (proto, wanted) in [(ETHERTYPE_ARP, v4), (ETH_P_IP, v4), (ETHERTYPE_IPV6, v6)] {
        if wanted {
            let fd = observer(proto, &ifindices).map_err(open_error("cannot open a packet socket".into()))?;
            observers.push((fd, proto));
        }
    }
    let sender_of = |proto: u16| observers.iter().find(|(_, p)| *p == proto).map(|(fd, _)| fd.as_raw_fd());
    let (arp_fd, v6_fd) = (sender_of(ETHERTYPE_ARP), sender_of(ETHERTYPE_IPV6));
    let mut icmp: HashMap<(usize, IpAddr), OwnedFd> = HashMap::new();
    let mut udp: HashMap<(usize, IpAddr), OwnedFd> = HashMap::new();
    for j in jobs {
        let r = &rails[j.rail];
        if let std::collections::hash_map::Entry::Vacant(e) = icmp.entry((j.rail, j.source)) {
            e.insert(
                icmp_socket(&r.name, j.source).map_err(open_error(format!(
                    "cannot open an ICMP socket for {} on {}",
                    j.source, r.name
                )))?,
            );
        }
        if j.source.is_ipv6()
            && let std::collections::hash_map::Entry::Vacant(e) = udp.entry((j.rail, j.source))
        {
            e.insert(
                udp_socket(&r.name, j.source).map_err(open_error(format!(
                    "cannot open a UDP socket for {} on {}",
                    j.source, r.name
                )))?,
            );
        }
    }
    let mut rnd = [0u8; 10];
    random(&mut rnd);
    let base_id = u16::from_be_bytes([rnd[0], rnd[1]]);
    let token = u64::from_be_bytes(rnd[2..10].try_into().unwrap_or([0; 8]));
    let by_pair: HashMap<(usize, IpAddr, IpAddr), usize> =
        jobs.iter().enumerate().map(|(k, j)| ((j.rail, j.source, j.peer), k)).collect();

    let start = Instant::now();
    let mut states: Vec<State> = jobs
        .iter()
        .map(|_| State {
            stage: Stage::Arp,
            deadline: start + timeout,
            arp_at: start,
            arp_tries: 0,
            probes: Vec::new(),
            next_seq: 0,
            round: 0,
            lo: 0,
            hi: 0,
            seen: Seen::default(),
        })
        .collect();
    let mut last_arp = start;
    for (k, j) in jobs.iter().enumerate() {
        send_neighbour(arp_fd, v6_fd, &rails[j.rail], j, &mut states[k].seen);
        states[k].arp_tries = 1;
    }
    let hard_end = start + timeout * 10 + Duration::from_secs(1);
    let mut buf = vec![0u8; 65536];
    let mut pollfds: Vec<libc::pollfd> = observers
        .iter()
        .map(|(fd, _)| libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 })
        .collect();
    loop {
        let now = Instant::now();
        // Advance every pair whose stage is over.
        for (k, j) in jobs.iter().enumerate() {
            let st = &mut states[k];
            let r = &rails[j.rail];
            let sock = icmp[&(j.rail, j.source)].as_raw_fd();
            let before = st.stage;
            advance(st, k, j, r, sock, base_id, token, timeout, now, (arp_fd, v6_fd), &mut last_arp);
            if before == Stage::Arp
                && st.stage == Stage::Echo
                && let Some(u) = udp.get(&(j.rail, j.source))
            {
                let port = UDP_BASE_PORT + (k % UDP_PORTS) as u16;
                match send_datagram(u.as_raw_fd(), j.peer, port, &token.to_be_bytes()) {
                    Ok(()) => st.seen.sent += 1,
                    Err(e) => st.seen.send_error = Some(format!("cannot send the UDP datagram: {e}")),
                }
            }
        }
        let all_done = states.iter().all(|s| s.stage == Stage::Done);
        if (all_done && now >= last_arp + FLUX_GRACE.min(timeout))
            || now >= hard_end
            || stop.requested().is_some()
        {
            break;
        }
        let next = states
            .iter()
            .filter(|s| s.stage != Stage::Done)
            .map(|s| s.deadline)
            .chain(std::iter::once(last_arp + FLUX_GRACE.min(timeout)))
            .min()
            .unwrap_or(now);
        let wait = next.saturating_duration_since(now).min(Duration::from_millis(10));
        let ms = wait.as_millis().max(1) as libc::c_int;
        // SAFETY: a valid array of pollfds, its length passed along.
        let n = unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, ms) };
        if n <= 0 {
            continue;
        }
        for (idx, p) in pollfds.iter_mut().enumerate() {
            if p.revents == 0 {
                continue;
            }
            p.revents = 0;
            let (fd, proto) = (&observers[idx].0, observers[idx].1);
            while let Some((len, ifindex, from)) = recv(fd.as_raw_fd(), &mut buf) {
                // Queued before the filter was attached: another interface.
                let Some(&rail) = rail_of.get(&ifindex) else { continue };
                let at = Instant::now();
                let pkt = &buf[..len];
                match proto {
                    ETHERTYPE_ARP => {
                        let Some(a) = frames::parse_arp_reply(pkt) else { continue };
                        let key = (rail, IpAddr::V4(a.target_ip), IpAddr::V4(a.sender_ip));
                        if let Some(&k) = by_pair.get(&key) {
                            add_answer(&mut states[k].seen, a.sender_hw);
                        }
                    }
                    ETH_P_IP => {
                        if let Some(e) = frames::parse_ipv4(pkt) {
                            echo_back(&mut states, jobs, base_id, token, rail, from, at, &e);
                        }
                    }
                    _ => match frames::parse_ipv6(pkt) {
                        Some(V6In::Echo(e)) => {
                            echo_back(&mut states, jobs, base_id, token, rail, from, at, &e)
                        }
                        Some(V6In::Advert { target, dst, hw }) => {
                            let key = (rail, IpAddr::V6(dst), IpAddr::V6(target));
                            if let Some(&k) = by_pair.get(&key)
                                && let Some(hw) = hw.or(from)
                            {
                                add_answer(&mut states[k].seen, hw);
                            }
                        }
                        Some(V6In::Unreachable { inner_src, inner_dst, port }) => {
                            let key = (IpAddr::V6(inner_src), IpAddr::V6(inner_dst));
                            let k = usize::from(port.wrapping_sub(UDP_BASE_PORT));
                            // The pair with that index, or one UDP_PORTS on.
                            let pair = (k..jobs.len())
                                .step_by(UDP_PORTS)
                                .find(|&k| (jobs[k].source, jobs[k].peer) == key);
                            if let Some(k) = pair
                                && states[k].seen.routed.len() < 4
                            {
                                states[k].seen.routed.push((rail, from));
                            }
                        }
                        None => {}
                    },
                }
            }
        }
    }
    Ok(states.into_iter().map(|s| s.seen).collect())
}

fn add_answer(seen: &mut Seen, hw: Vec<u8>) {
    if !seen.arp_answers.contains(&hw) {
        seen.arp_answers.push(hw);
    }
}

#[allow(clippy::too_many_arguments)]
fn echo_back(
    states: &mut [State],
    jobs: &[Job],
    base_id: u16,
    token: u64,
    rail: usize,
    from: Option<Vec<u8>>,
    at: Instant,
    e: &frames::EchoReply,
) {
    if e.token != token {
        return;
    }
    let k = usize::from(e.id.wrapping_sub(base_id));
    let (Some(st), Some(job)) = (states.get_mut(k), jobs.get(k)) else { return };
    if e.src != job.peer || e.dst != job.source {
        return;
    }
    let Some(p) = st.probes.iter_mut().find(|p| p.seq == e.seq && !p.back) else { return };
    p.back = true;
    match p.kind {
        Kind::Small => {
            st.seen.replies.push((rail, from));
            st.seen.rtts.push(at.saturating_duration_since(p.at));
        }
        Kind::Size(size) => {
            st.seen.largest_back = Some(st.seen.largest_back.map_or(size, |l| l.max(size)));
            st.lo = st.lo.max(size);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn advance(
    st: &mut State,
    k: usize,
    j: &Job,
    r: &RailIo,
    sock: RawFd,
    base_id: u16,
    token: u64,
    timeout: Duration,
    now: Instant,
    sender: (Option<RawFd>, Option<RawFd>),
    last_arp: &mut Instant,
) {
    let v6 = j.peer.is_ipv6();
    let overhead = if v6 { V6_OVERHEAD } else { V4_OVERHEAD };
    let id = base_id.wrapping_add(k as u16);
    let mut send = |st: &mut State, kind: Kind| {
        let seq = st.next_seq;
        st.next_seq = st.next_seq.wrapping_add(1);
        let size = match kind {
            Kind::Small => overhead + SMALL_DATA,
            Kind::Size(s) => s,
        };
        let msg = frames::echo_request(v6, id, seq, token, size);
        match send_echo(sock, j.peer, &msg) {
            Ok(()) => st.seen.sent += 1,
            Err(e) => st.seen.send_error = Some(format!("cannot send an echo of {size} bytes: {e}")),
        }
        st.probes.push(Sent { seq, kind, at: Instant::now(), back: false });
    };
    let grace = |st: &State| {
        let rtt = st.seen.rtts.iter().max().copied().unwrap_or(timeout);
        (rtt * 10).clamp(LARGE_GRACE_MIN.min(timeout), timeout)
    };
    let outstanding =
        |st: &State| st.probes.iter().filter(|p| !p.back && matches!(p.kind, Kind::Size(_))).count();
    match st.stage {
        Stage::Done => {}
        Stage::Arp => {
            if !st.seen.arp_answers.is_empty() {
                for _ in 0..SMALL_ECHOES {
                    send(st, Kind::Small);
                }
                st.stage = Stage::Echo;
                st.deadline = now + timeout;
            } else if now >= st.deadline {
                st.stage = Stage::Done;
            } else if st.arp_tries == 1 && now >= st.arp_at + timeout / 2 {
                send_neighbour(sender.0, sender.1, r, j, &mut st.seen);
                st.arp_tries = 2;
                *last_arp = now;
            }
        }
        Stage::Echo => {
            let back = st.seen.replies.len();
            if back == usize::from(SMALL_ECHOES) || now >= st.deadline {
                if back == 0 {
                    st.stage = Stage::Done;
                } else {
                    st.lo = overhead + SMALL_DATA;
                    st.hi = r.mtu;
                    st.deadline = now + grace(st);
                    send(st, Kind::Size(r.mtu));
                    st.stage = Stage::Full;
                }
            }
        }
        Stage::Full => {
            if st.seen.largest_back == Some(r.mtu) {
                st.seen.full_size_back = Some(true);
                st.stage = Stage::Done;
            } else if now >= st.deadline {
                st.seen.full_size_back = Some(false);
                st.seen.largest_back = Some(st.lo);
                st.stage = Stage::Search;
                start_round(st, now, grace(st), &mut send);
            }
        }
        Stage::Search => {
            if outstanding(st) == 0 || now >= st.deadline {
                // The smallest size above the largest that came back, that
                // did not: the new upper bound.
                let lo = st.lo;
                st.hi = st
                    .probes
                    .iter()
                    .filter_map(|p| match p.kind {
                        Kind::Size(s) if !p.back && s > lo => Some(s),
                        _ => None,
                    })
                    .min()
                    .unwrap_or(st.hi)
                    .min(st.hi);
                st.seen.largest_back = Some(st.lo);
                if st.round >= SEARCH_ROUNDS || st.hi <= st.lo + 1 {
                    st.stage = Stage::Done;
                } else {
                    start_round(st, now, grace(st), &mut send);
                }
            }
        }
    }
}

/// The sizes of one search round strictly between lo and hi: the common
/// MTUs there, then evenly spaced ones.
pub fn round_sizes(lo: u32, hi: u32) -> Vec<u32> {
    let mut sizes: Vec<u32> = COMMON_MTUS.iter().copied().filter(|m| *m > lo && *m < hi).collect();
    let span = hi.saturating_sub(lo);
    for i in 1..=SEARCH_SIZES {
        let s = lo + span * i / (SEARCH_SIZES + 1);
        if s > lo && s < hi && !sizes.contains(&s) {
            sizes.push(s);
        }
    }
    sizes.sort_unstable();
    sizes
}

fn start_round(st: &mut State, now: Instant, grace: Duration, send: &mut impl FnMut(&mut State, Kind)) {
    st.round += 1;
    st.deadline = now + grace;
    for s in round_sizes(st.lo, st.hi) {
        send(st, Kind::Size(s));
    }
}

/// ARP request or neighbour solicitation for the job's peer, from its
/// source, out of its rail.
fn send_neighbour(arp: Option<RawFd>, v6: Option<RawFd>, r: &RailIo, j: &Job, seen: &mut Seen) {
    let ib = r.link_type == ARPHRD_INFINIBAND;
    let result = match (j.source, j.peer, arp, v6) {
        (IpAddr::V4(s), IpAddr::V4(p), Some(fd), _) => {
            let packet = frames::arp_request(r.link_type, &r.hw, s, p);
            send_frame(fd, r.ifindex, &packet, ETHERTYPE_ARP, &r.broadcast)
        }
        (IpAddr::V6(s), IpAddr::V6(p), _, Some(fd)) => {
            let packet = frames::neighbour_solicitation(s, p, &r.hw, if ib { 2 } else { 0 });
            let group = frames::solicited_node(p);
            let dest = match <[u8; 20]>::try_from(r.broadcast.as_slice()) {
                Ok(b) if ib => ipoib_multicast(group, &b).to_vec(),
                _ => frames::multicast_mac(group).to_vec(),
            };
            send_frame(fd, r.ifindex, &packet, ETHERTYPE_IPV6, &dest)
        }
        _ => return,
    };
    match result {
        Ok(()) => seen.sent += 1,
        Err(e) => seen.send_error = Some(format!("cannot send the neighbour request: {e}")),
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: a valid socket and a value of the size passed along.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn socket(domain: libc::c_int, kind: libc::c_int, protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket(2); the descriptor is owned at once.
    let raw = unsafe { libc::socket(domain, kind | libc::SOCK_CLOEXEC, protocol) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// A non-blocking packet socket receiving `proto` on every interface,
/// filtered in the kernel to the interfaces `ifindices` name, without
/// what the host sends itself.
fn observer(proto: u16, ifindices: &[u32]) -> io::Result<OwnedFd> {
    let fd = socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, i32::from(proto.to_be()))?;
    let raw = fd.as_raw_fd();
    let program = ifindex_filter(ifindices);
    let fprog =
        libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr() as *mut libc::sock_filter };
    setsockopt(raw, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)?;
    let _ = setsockopt(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &1 as &libc::c_int);
    if setsockopt(raw, libc::SOL_SOCKET, SO_RCVBUFFORCE, &RCVBUF).is_err() {
        let _ = setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &RCVBUF);
    }
    Ok(fd)
}

/// Classic BPF: accept a frame whose interface is one of `ifindices`,
/// drop the rest. `ld ifidx; jeq #i1, accept; ...; ret #0; accept: ret #-1`.
pub fn ifindex_filter(ifindices: &[u32]) -> Vec<libc::sock_filter> {
    const SKF_AD_OFF: i32 = -0x1000;
    const SKF_AD_IFINDEX: i32 = 8;
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter { code: code as u16, jt, jf, k };
    let n = ifindices.len().min(250);
    let mut p =
        vec![op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, (SKF_AD_OFF + SKF_AD_IFINDEX) as u32)];
    for (i, idx) in ifindices.iter().take(n).enumerate() {
        p.push(op(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, (n - i) as u8, 0, *idx));
    }
    p.push(op(libc::BPF_RET | libc::BPF_K, 0, 0, 0));
    p.push(op(libc::BPF_RET | libc::BPF_K, 0, 0, u32::MAX));
    p
}

/// Sends `packet` (no link header: the driver writes it) out of
/// `ifindex` to the link-layer address `dest`, as `packet::PacketSocket`
/// does (an address longer than `sll_addr`'s 8 bytes, IPoIB's 20, runs
/// past the struct in a larger buffer, as iputils arping passes it).
fn send_frame(fd: RawFd, ifindex: u32, packet: &[u8], protocol: u16, dest: &[u8]) -> io::Result<()> {
    // SAFETY: plain data; zero is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut b = Vec::with_capacity(12 + dest.len().max(8));
    b.extend_from_slice(&(libc::AF_PACKET as u16).to_ne_bytes());
    b.extend_from_slice(&protocol.to_be_bytes());
    b.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    b.extend_from_slice(&[0, 0, 0, dest.len().min(32) as u8]);
    b.extend_from_slice(&dest[..dest.len().min(32)]);
    b.resize(b.len().max(std::mem::size_of::<libc::sockaddr_ll>()), 0);
    // SAFETY: b.len() <= 44 bytes fit in a sockaddr_storage.
    unsafe {
        std::ptr::copy_nonoverlapping(
            b.as_ptr(),
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            b.len(),
        )
    };
    // SAFETY: a valid socket, the packet, an address of b.len() bytes.
    let sent = unsafe {
        libc::sendto(
            fd,
            packet.as_ptr().cast(),
            packet.len(),
            libc::MSG_DONTWAIT,
            (&storage as *const libc::sockaddr_storage).cast(),
            b.len() as libc::socklen_t,
        )
    };
    if sent < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// One packet, if one is waiting: its length and its link-layer source
/// (None when the link gives none). Outgoing packets, and those for
/// another host, are skipped.
fn recv(fd: RawFd, buf: &mut [u8]) -> Option<(usize, i32, Option<Vec<u8>>)> {
    loop {
        // SAFETY: sockaddr_ll is plain data.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: a valid socket, a buffer of buf.len() bytes, an address
        // buffer of `len` bytes.
        let n = unsafe {
            libc::recvfrom(
                fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
                (&mut sll as *mut libc::sockaddr_ll).cast(),
                &mut len,
            )
        };
        let n = usize::try_from(n).ok()?;
        // Not what comes in to this host: what it sends, and frames for
        // another host that a switch floods (an unknown unicast MAC).
        if matches!(sll.sll_pkttype, PACKET_OUTGOING | PACKET_OTHERHOST) {
            continue;
        }
        let halen = usize::from(sll.sll_halen).min(8);
        let from = (halen > 0).then(|| sll.sll_addr[..halen].to_vec());
        return Some((n, sll.sll_ifindex, from));
    }
}

/// A UDP socket bound to `source` and the rail (for the IPv6 reply-path
/// datagram); what it would receive is never read.
fn udp_socket(ifname: &str, source: IpAddr) -> io::Result<OwnedFd> {
    let IpAddr::V6(s) = source else { return Err(io::Error::from_raw_os_error(libc::EAFNOSUPPORT)) };
    let fd = socket(libc::AF_INET6, libc::SOCK_DGRAM, 0)?;
    let raw = fd.as_raw_fd();
    bind_to_device(raw, ifname)?;
    let addr = sockaddr_v6(s);
    // SAFETY: a valid socket and a sockaddr_in6.
    let rc = unsafe {
        libc::bind(
            raw,
            (&addr as *const libc::sockaddr_in6).cast(),
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

fn send_datagram(fd: RawFd, to: IpAddr, port: u16, payload: &[u8]) -> io::Result<()> {
    let IpAddr::V6(a) = to else { return Err(io::Error::from_raw_os_error(libc::EAFNOSUPPORT)) };
    let mut addr = sockaddr_v6(a);
    addr.sin6_port = port.to_be();
    // SAFETY: a valid socket, the payload, a sockaddr_in6.
    let rc = unsafe {
        libc::sendto(
            fd,
            payload.as_ptr().cast(),
            payload.len(),
            0,
            (&addr as *const libc::sockaddr_in6).cast(),
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
        )
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

fn bind_to_device(raw: RawFd, ifname: &str) -> io::Result<()> {
    // SAFETY: the name's bytes and their length.
    let rc = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            ifname.as_ptr().cast(),
            ifname.len() as libc::socklen_t,
        )
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// An ICMP (ICMPv6) raw socket bound to `source` and to the rail, with
/// don't-fragment and the path MTU cache ignored, that receives nothing
/// (its filter blocks every type: the packet sockets observe).
fn icmp_socket(ifname: &str, source: IpAddr) -> io::Result<OwnedFd> {
    let (domain, proto) = match source {
        IpAddr::V4(_) => (libc::AF_INET, libc::IPPROTO_ICMP),
        IpAddr::V6(_) => (libc::AF_INET6, libc::IPPROTO_ICMPV6),
    };
    let fd = socket(domain, libc::SOCK_RAW, proto)?;
    let raw = fd.as_raw_fd();
    bind_to_device(raw, ifname)?;
    match source {
        IpAddr::V4(s) => {
            setsockopt(raw, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, &libc::IP_PMTUDISC_PROBE)?;
            let _ = setsockopt(raw, libc::SOL_RAW, ICMP_FILTER, &u32::MAX);
            let addr = sockaddr_v4(s);
            // SAFETY: a valid socket and a sockaddr_in.
            let rc = unsafe {
                libc::bind(
                    raw,
                    (&addr as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                )
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        IpAddr::V6(s) => {
            setsockopt(raw, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, &libc::IPV6_PMTUDISC_PROBE)?;
            setsockopt(raw, libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG, &1 as &libc::c_int)?;
            let _ = setsockopt(raw, libc::IPPROTO_ICMPV6, ICMP6_FILTER, &[u32::MAX; 8]);
            let addr = sockaddr_v6(s);
            // SAFETY: a valid socket and a sockaddr_in6.
            let rc = unsafe {
                libc::bind(
                    raw,
                    (&addr as *const libc::sockaddr_in6).cast(),
                    std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
                )
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(fd)
}

fn sockaddr_v4(a: Ipv4Addr) -> libc::sockaddr_in {
    // SAFETY: plain data.
    let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(a.octets()) };
    s
}

fn sockaddr_v6(a: Ipv6Addr) -> libc::sockaddr_in6 {
    // SAFETY: plain data.
    let mut s: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    s.sin6_addr = libc::in6_addr { s6_addr: a.octets() };
    s
}

/// Sends one echo (blocking: a full send buffer waits rather than drops).
fn send_echo(fd: RawFd, to: IpAddr, msg: &[u8]) -> io::Result<()> {
    let rc = match to {
        IpAddr::V4(a) => {
            let addr = sockaddr_v4(a);
            // SAFETY: a valid socket, the message, a sockaddr_in.
            unsafe {
                libc::sendto(
                    fd,
                    msg.as_ptr().cast(),
                    msg.len(),
                    0,
                    (&addr as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                )
            }
        }
        IpAddr::V6(a) => {
            let addr = sockaddr_v6(a);
            // SAFETY: a valid socket, the message, a sockaddr_in6.
            unsafe {
                libc::sendto(
                    fd,
                    msg.as_ptr().cast(),
                    msg.len(),
                    0,
                    (&addr as *const libc::sockaddr_in6).cast(),
                    std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
                )
            }
        }
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Random bytes (identifiers and the run's token); the clock and the pid
/// if the kernel has none to give.
fn random(buf: &mut [u8]) {
    // SAFETY: a buffer of buf.len() bytes.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if usize::try_from(n).ok() != Some(buf.len()) {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id());
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (seed >> ((i % 8) * 8)) as u8 ^ i as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_jumps_to_accept_from_every_rail() {
        let p = ifindex_filter(&[7, 9, 12]);
        assert_eq!(p.len(), 6);
        // Instruction 1+i jumps over the rest to the last one: accept.
        for i in 0..3 {
            assert_eq!(1 + i + 1 + usize::from(p[1 + i].jt), p.len() - 1);
            assert_eq!(p[1 + i].jf, 0);
        }
        assert_eq!((p[4].k, p[5].k), (0, u32::MAX));
    }

    #[test]
    fn search_rounds_try_common_mtus_and_close_in() {
        let first = round_sizes(84, 9000);
        assert!(first.contains(&1500) && first.contains(&4200), "{first:?}");
        assert!(first.len() <= COMMON_MTUS.len() + SEARCH_SIZES as usize);
        assert!(first.iter().all(|s| *s > 84 && *s < 9000));
        // 1500 came back, the next one up did not.
        let next = first.iter().copied().find(|s| *s > 1500).unwrap();
        let second = round_sizes(1500, next);
        assert!(second.iter().all(|s| *s > 1500 && *s < next), "{second:?}");
        assert!(round_sizes(1500, 1501).is_empty());
    }
}
