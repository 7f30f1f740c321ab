//! The sockets and the one event loop that probes every pair at once.
//! Needs CAP_NET_RAW; changes nothing on the host (no sysctl, no
//! neighbour entry, no route cache entry of its own making): everything is
//! sent by hand on packet sockets, the echoes too, addressed to the
//! link-layer address that answered the neighbour request. An echo sent
//! through the kernel's IP stack would make it resolve the next hop and
//! keep an entry per peer: at fleet scale, thousands of entries against a
//! `gc_thresh3` of 1024 that the real traffic's new neighbours then find
//! full.
//!
//! - Observers: one AF_PACKET SOCK_DGRAM socket per protocol (ARP, IPv4,
//!   IPv6) on every interface, a socket filter keeping the rails' answers
//!   only (`SKF_AD_IFINDEX`, then the protocol's fields: `observer_filter`),
//!   each with the kernel's receive time (SO_TIMESTAMPNS), which the RTTs
//!   are taken from. They see each answer and echo reply with
//!   the interface it came in on (`sll_ifindex`) and its link-layer
//!   source (`sll_addr`), before rp_filter could drop a reply that came in
//!   on the wrong rail; every rail is observed, so such a reply is seen.
//!   Three sockets, not three per rail: the kernel waits for an RCU grace
//!   period when it closes a packet socket (`packet_release()` calls
//!   `synchronize_net()`), which made 24 of them cost 0.8 s.
//! - Senders: the ARP and IPv6 observers send the ARP requests and
//!   neighbour solicitations too (`sendto` names the rail, non-blocking);
//!   one more packet socket, blocking and bound to no protocol (it
//!   receives nothing), sends the echoes and the IPv6 SYNs as whole
//!   IP packets (`frames::echo_packet`, don't-fragment set), to the first
//!   link-layer address that answered for the next hop, so every size up
//!   to the rail's MTU goes out whole and on the pair's rail, whatever this
//!   host's routing says (step 4 of the verdict checks that separately).
//!
//! IPv6 only: Linux sends an ICMPv6 echo reply out of the interface the
//! request came in on (`icmpv6_echo_reply()` sets the flow's oif to it),
//! whatever the peer's routing, so the echo cannot show that the peer's
//! replies leave by another NIC. Its TCP resets are routed, from the
//! address the SYN was sent to: so with the small echoes goes one TCP SYN
//! to an unused port, and the reset that comes back shows the peer's real
//! egress NIC. (Not its ICMPv6 errors, a port unreachable for a UDP
//! datagram: the peer rate-limits those to a burst of 6 per destination
//! and 50 for the whole host, then one a second per destination and 1,000
//! for the host, so a fleet probing at once would read as unverified.)
//!
//! Per pair: neighbour resolution of the next hop (the peer on the
//! rail's link, else the gateway of this host's route to it; resent once
//! at half the timeout); once answered, three small echoes; once back, an
//! echo of the rail's MTU, sent up to three times and waited for until the
//! timeout (a late one counts); if none comes back, bounded rounds of
//! sizes in between, sent together. A stage waits the full timeout only for what does not
//! answer; the large echoes, sent after small ones came back in RTT, get
//! ten times that RTT (at least 50 ms, at most the timeout).

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant, SystemTime};

use nix::libc;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{setsockopt, sockopt};
use socket2::{Domain, Protocol, SockFilter, Socket, Type};

use crate::announce::{ETHERTYPE_ARP, ETHERTYPE_IPV6, ipoib_multicast};
use crate::model::{HwAddr, LinkType};
use crate::packet::{send_to_link, send_to_link_waiting};
use crate::probe::frames::{self, ETHERTYPE_IPV4, Incoming, V4_OVERHEAD, V6_OVERHEAD};
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
/// IPv6: the reply-path SYN is sent again every SYN_EVERY while its reset
/// is not back (lost, or the peer's queue full), SYNS times in all, the
/// last waited for SYN_EVERY too. A pair that still has none is not
/// verified.
const SYN_EVERY: Duration = Duration::from_millis(1000);
const SYNS: u8 = 4;
const SYN_WAIT: Duration = Duration::from_millis(1000 * SYNS as u64);
/// Echoes of the rail's full MTU before it counts as lost: one lost or
/// late jumbo frame is not an MTU problem.
pub const FULL_TRIES: u8 = 3;
const LARGE_GRACE_MIN: Duration = Duration::from_millis(50);

// Linux values libc does not name on every target.
const PACKET_OTHERHOST: u8 = 3;
const PACKET_OUTGOING: u8 = 4;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const RCVBUF: usize = 8 << 20;
const SNDBUF: usize = 4 << 20;
const SEND_WAIT: Duration = Duration::from_secs(1);
/// The TCP port of the IPv6 reply-path SYN (both ends): traceroute's
/// first port, plus the pair's index.
pub const PATH_BASE_PORT: u16 = 33434;
const PATH_PORTS: usize = 20000;

/// A local rail as the sockets need it.
#[derive(Clone, Debug)]
pub struct RailIo {
    pub name: String,
    pub ifindex: u32,
    /// Ethernet or IPoIB (its ARP hardware type is the link type).
    pub link_type: LinkType,
    pub hw: HwAddr,
    pub broadcast: Vec<u8>,
    pub mtu: u32,
}

/// One pair to probe: `rail` is an index into the rails.
#[derive(Clone, Debug)]
pub struct Job {
    pub rail: usize,
    pub source: IpAddr,
    pub peer: IpAddr,
    /// The gateway this host's route to the peer names (None: the peer is
    /// on the rail's link).
    pub gateway: Option<IpAddr>,
}

impl Job {
    /// Whom the neighbour request asks for: the gateway, else the peer.
    fn next_hop(&self) -> IpAddr {
        self.gateway.unwrap_or(self.peer)
    }
}

/// What was seen for one job.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub arp_answers: Vec<HwAddr>,
    /// The small echoes' replies: the rail they came in on, their
    /// link-layer source.
    pub replies: Vec<(usize, Option<HwAddr>)>,
    pub rtts: Vec<Duration>,
    /// IPv6: the resets to the SYN (routed by the peer), as replies.
    pub routed: Vec<(usize, Option<HwAddr>)>,
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

/// One pair's progress through the stages.
struct State {
    stage: Stage,
    deadline: Instant,
    arp_at: Instant,
    arp_tries: u8,
    probes: Vec<Sent>,
    next_seq: u16,
    round: u8,
    /// Echoes of the full MTU sent, and when the first went out.
    full_tries: u8,
    full_from: Instant,
    lo: u32,
    hi: u32,
    /// IPv6: when the reply-path SYN is due again (its reset not back
    /// yet), and how many were sent.
    syn_at: Option<Instant>,
    syns: u8,
    seen: Seen,
}

impl State {
    fn new(start: Instant, timeout: Duration) -> State {
        State {
            stage: Stage::Arp,
            deadline: start + timeout,
            arp_at: start,
            arp_tries: 0,
            probes: Vec::new(),
            next_seq: 0,
            round: 0,
            full_tries: 0,
            full_from: start,
            lo: 0,
            hi: 0,
            syn_at: None,
            syns: 0,
            seen: Seen::default(),
        }
    }

    /// How long the large echoes wait: ten times the slowest small
    /// echo's RTT, at least LARGE_GRACE_MIN, at most the timeout.
    fn grace(&self, timeout: Duration) -> Duration {
        let rtt = self.seen.rtts.iter().max().copied().unwrap_or(timeout);
        (rtt * 10).clamp(LARGE_GRACE_MIN.min(timeout), timeout)
    }

    /// Search echoes not back yet.
    fn outstanding(&self) -> usize {
        self.probes
            .iter()
            .filter(|p| !p.back && matches!(p.kind, Kind::Size(s) if s > self.lo && s < self.hi))
            .count()
    }

    /// The smallest size above the largest that came back, that did not:
    /// the new upper bound.
    fn lowest_lost(&self) -> u32 {
        self.probes
            .iter()
            .filter_map(|p| match p.kind {
                Kind::Size(s) if !p.back && s > self.lo => Some(s),
                _ => None,
            })
            .min()
            .unwrap_or(self.hi)
            .min(self.hi)
    }

    fn note_sent(&mut self, result: io::Result<()>, what: impl FnOnce() -> String) {
        match result {
            Ok(()) => self.seen.sent += 1,
            Err(e) => self.seen.send_error = Some(format!("{}: {e}", what())),
        }
    }

    fn start_round(&mut self, now: Instant, grace: Duration, echo: &Echoer) {
        self.round += 1;
        self.deadline = now + grace;
        for s in round_sizes(self.lo, self.hi) {
            echo.send(self, Kind::Size(s));
        }
    }
}

/// Sends one pair's echoes: the sender, the pair's rail, source and peer,
/// the link-layer address they go to, the pair's identifier.
struct Echoer<'a> {
    socket: &'a Socket,
    rail: &'a RailIo,
    /// The first link-layer address that answered for the next hop (None
    /// before an answer: nothing is sent).
    to: Option<HwAddr>,
    source: IpAddr,
    peer: IpAddr,
    id: u16,
    token: u64,
}

impl Echoer<'_> {
    fn overhead(&self) -> u32 {
        if self.peer.is_ipv6() { V6_OVERHEAD } else { V4_OVERHEAD }
    }

    fn send(&self, st: &mut State, kind: Kind) {
        let seq = st.next_seq;
        st.next_seq = st.next_seq.wrapping_add(1);
        let size = match kind {
            Kind::Small => self.overhead() + SMALL_DATA,
            Kind::Size(s) => s,
        };
        let packet = frames::echo_packet(self.source, self.peer, self.id, seq, self.token, size);
        // Before the send: over a veth the reply can be received (and
        // timestamped by the kernel) before sendto returns.
        let at = Instant::now();
        let sent = packet
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EAFNOSUPPORT))
            .and_then(|packet| self.send_ip(&packet));
        st.note_sent(sent, || format!("cannot send an echo of {size} bytes"));
        st.probes.push(Sent { seq, kind, at, back: false });
    }

    /// IPv6: the SYN to an unused port whose reset the peer routes back.
    fn send_syn(&self, st: &mut State, port: u16) {
        let (IpAddr::V6(source), IpAddr::V6(peer)) = (self.source, self.peer) else { return };
        let packet = frames::tcp6_syn(source, peer, port, self.token as u32);
        let sent = self.send_ip(&packet);
        st.note_sent(sent, || "cannot send the TCP SYN".into());
    }

    /// A whole IP packet out of the rail, to the answered address.
    fn send_ip(&self, packet: &[u8]) -> io::Result<()> {
        let to = self.to.as_ref().ok_or_else(|| io::Error::from_raw_os_error(libc::EHOSTUNREACH))?;
        let proto = if self.peer.is_ipv6() { ETHERTYPE_IPV6 } else { ETHERTYPE_IPV4 };
        send_to_link_waiting(self.socket, self.rail.ifindex, packet, proto, to.bytes())
    }
}

/// Every socket a run needs.
struct Sockets {
    /// Packet sockets observing every rail, with the protocol each takes.
    observers: Vec<(Socket, u16)>,
    /// The echoes' sender (blocking, receives nothing).
    sender: Socket,
}

fn open_error(what: String) -> impl FnOnce(io::Error) -> OpenError {
    move |source| OpenError { what, source }
}

impl Sockets {
    /// Observers of every rail, one per protocol the jobs need, and the
    /// sender.
    fn open(rails: &[RailIo], jobs: &[Job]) -> Result<Sockets, OpenError> {
        let ifindices: Vec<u32> = rails.iter().map(|r| r.ifindex).collect();
        let v4 = jobs.iter().any(|j| j.peer.is_ipv4());
        let v6 = jobs.iter().any(|j| j.peer.is_ipv6());
        let mut observers = Vec::new();
        for (proto, wanted) in [(ETHERTYPE_ARP, v4), (ETHERTYPE_IPV4, v4), (ETHERTYPE_IPV6, v6)] {
            if wanted {
                let socket =
                    observer(proto, &ifindices).map_err(open_error("cannot open a packet socket".into()))?;
                observers.push((socket, proto));
            }
        }
        let sender = sender().map_err(open_error("cannot open a packet socket".into()))?;
        Ok(Sockets { observers, sender })
    }

    /// The observer of `proto`, which sends its requests too.
    fn sender(&self, proto: u16) -> Option<&Socket> {
        self.observers.iter().find(|(_, p)| *p == proto).map(|(s, _)| s)
    }

    /// ARP request or neighbour solicitation for the job's peer, from its
    /// source, out of its rail.
    fn send_neighbour(&self, r: &RailIo, j: &Job, st: &mut State) {
        let ib = r.link_type == LinkType::Infiniband;
        let result = match (j.source, j.next_hop()) {
            (IpAddr::V4(s), IpAddr::V4(p)) => {
                let Some(socket) = self.sender(ETHERTYPE_ARP) else { return };
                let packet = frames::arp_request(r.link_type.into(), r.hw.bytes(), s, p);
                send_to_link(socket, r.ifindex, &packet, ETHERTYPE_ARP, &r.broadcast)
            }
            (IpAddr::V6(s), IpAddr::V6(p)) => {
                let Some(socket) = self.sender(ETHERTYPE_IPV6) else { return };
                let packet = frames::neighbour_solicitation(s, p, r.hw.bytes(), if ib { 2 } else { 0 });
                let group = frames::solicited_node(p);
                let dest = match <[u8; 20]>::try_from(r.broadcast.as_slice()) {
                    Ok(b) if ib => ipoib_multicast(group, &b).to_vec(),
                    _ => frames::multicast_mac(group).to_vec(),
                };
                send_to_link(socket, r.ifindex, &packet, ETHERTYPE_IPV6, &dest)
            }
            _ => return,
        };
        st.note_sent(result, || "cannot send the neighbour request".into());
    }
}

/// What a run saw: per job, in order; and the frames its observers
/// dropped (their receive queues overflowed).
pub struct Outcome {
    pub seen: Vec<Seen>,
    pub drops: u64,
}

/// Probes every job.
pub fn run(rails: &[RailIo], jobs: &[Job], timeout: Duration, stop: &StopFlag) -> Result<Outcome, OpenError> {
    let sockets = Sockets::open(rails, jobs)?;
    // Reading the statistics resets them: what a socket queued before
    // its filter was attached is not counted.
    for (socket, _) in &sockets.observers {
        let _ = packet_drops(socket);
    }
    let mut run = Run::new(rails, jobs, timeout, sockets);
    let hard_end = run.start + timeout * 10 + SYN_WAIT + Duration::from_secs(1);
    let mut buf = vec![0u8; 65536];
    crate::testhooks::probe_drain_delay();
    #[cfg(feature = "fault-injection")]
    let mut echo_delay = true;
    loop {
        let now = Instant::now();
        run.advance_all(now);
        #[cfg(feature = "fault-injection")]
        if echo_delay && run.states.iter().any(|s| s.stage != Stage::Arp) {
            echo_delay = false;
            crate::testhooks::probe_echo_read_delay();
        }
        let all_done = run.states.iter().all(|s| s.stage == Stage::Done && s.syn_at.is_none());
        if (all_done && now >= run.flux_end()) || now >= hard_end || stop.requested().is_some() {
            break;
        }
        for idx in run.wait(now) {
            run.drain(idx, &mut buf);
        }
    }
    let drops = run.sockets.observers.iter().map(|(s, _)| packet_drops(s).unwrap_or(0)).sum();
    let Run { states, sockets, .. } = run;
    // Each close waits for an RCU grace period: together, not in turn.
    let Sockets { observers, sender } = sockets;
    crate::packet::close_together(observers.into_iter().map(|(s, _)| s).chain([sender]).collect());
    Ok(Outcome { seen: states.into_iter().map(|s| s.seen).collect(), drops })
}

/// Frames the kernel dropped on `socket` since the last call
/// (`PACKET_STATISTICS`: reading resets it).
fn packet_drops(socket: &Socket) -> io::Result<u64> {
    let mut st = libc::tpacket_stats { tp_packets: 0, tp_drops: 0 };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: a valid socket; `st` is a tpacket_stats of `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from(st.tp_drops))
}

/// One run: the jobs, their states and the sockets.
struct Run<'a> {
    rails: &'a [RailIo],
    jobs: &'a [Job],
    timeout: Duration,
    sockets: Sockets,
    start: Instant,
    states: Vec<State>,
    /// When the last ARP request (or solicitation) went out.
    last_arp: Instant,
    base_id: u16,
    token: u64,
    /// The pairs by (rail, source, next hop): every peer behind one
    /// gateway takes its answer.
    by_pair: HashMap<(usize, IpAddr, IpAddr), Vec<usize>>,
    rail_of: HashMap<i32, usize>,
}

impl<'a> Run<'a> {
    /// Every pair's first neighbour request sent.
    fn new(rails: &'a [RailIo], jobs: &'a [Job], timeout: Duration, sockets: Sockets) -> Run<'a> {
        let mut rnd = [0u8; 10];
        random(&mut rnd);
        let start = Instant::now();
        let mut run = Run {
            rails,
            jobs,
            timeout,
            sockets,
            start,
            states: jobs.iter().map(|_| State::new(start, timeout)).collect(),
            last_arp: start,
            base_id: u16::from_be_bytes([rnd[0], rnd[1]]),
            token: u64::from_be_bytes(rnd[2..10].try_into().unwrap_or([0; 8])),
            by_pair: HashMap::new(),
            rail_of: rails.iter().enumerate().map(|(i, r)| (r.ifindex as i32, i)).collect(),
        };
        for (k, j) in jobs.iter().enumerate() {
            run.by_pair.entry((j.rail, j.source, j.next_hop())).or_default().push(k);
        }
        for (j, st) in jobs.iter().zip(&mut run.states) {
            run.sockets.send_neighbour(&rails[j.rail], j, st);
            st.arp_tries = 1;
        }
        run
    }

    /// The end of the wait for a second ARP answer after the last request.
    fn flux_end(&self) -> Instant {
        self.last_arp + FLUX_GRACE.min(self.timeout)
    }

    /// Advances every pair whose stage is over; a pair whose neighbour
    /// answered sends its IPv6 reply-path SYN with its small echoes.
    fn advance_all(&mut self, now: Instant) {
        for (k, j) in self.jobs.iter().enumerate() {
            let st = &mut self.states[k];
            if !st.seen.routed.is_empty() {
                st.syn_at = None;
            }
            if st.stage == Stage::Done && st.syn_at.is_none() {
                continue;
            }
            let echo = Echoer {
                socket: &self.sockets.sender,
                rail: &self.rails[j.rail],
                to: st.seen.arp_answers.first().cloned(),
                source: j.source,
                peer: j.peer,
                id: self.base_id.wrapping_add(k as u16),
                token: self.token,
            };
            let before = st.stage;
            let pair = Pair { job: j, rail: &self.rails[j.rail], echo, timeout: self.timeout, now };
            if pair.advance(st, &self.sockets) {
                self.last_arp = now;
            }
            let due = st.syn_at.is_some_and(|at| now >= at);
            let first = before == Stage::Arp && st.stage == Stage::Echo && j.peer.is_ipv6();
            if due && st.syns >= SYNS {
                // The last one's wait is over too.
                st.syn_at = None;
            } else if first || due {
                pair.echo.send_syn(st, PATH_BASE_PORT + (k % PATH_PORTS) as u16);
                st.syns += 1;
                st.syn_at = Some(now + SYN_EVERY);
            }
        }
    }

    /// Waits for the observers (at most 10 ms, less when a stage ends
    /// sooner); the indices of those with something to read.
    fn wait(&self, now: Instant) -> Vec<usize> {
        let next = self
            .states
            .iter()
            .filter(|s| s.stage != Stage::Done)
            .map(|s| s.deadline)
            .chain(std::iter::once(self.flux_end()))
            .min()
            .unwrap_or(now);
        let wait = next.saturating_duration_since(now).min(Duration::from_millis(10));
        let ms = PollTimeout::from(wait.as_millis().clamp(1, 10) as u16);
        let mut pollfds: Vec<PollFd> =
            self.sockets.observers.iter().map(|(s, _)| PollFd::new(s.as_fd(), PollFlags::POLLIN)).collect();
        if poll(&mut pollfds, ms).unwrap_or(0) <= 0 {
            return Vec::new();
        }
        (0..pollfds.len()).filter(|i| pollfds[*i].revents().is_some_and(|r| !r.is_empty())).collect()
    }

    /// Reads everything waiting on observer `idx`.
    fn drain(&mut self, idx: usize, buf: &mut [u8]) {
        let (socket, proto) = &self.sockets.observers[idx];
        let proto = *proto;
        let fd = socket.as_raw_fd();
        while let Some((len, ifindex, from, kernel)) = recv(fd, buf) {
            // Queued before the filter was attached: another interface.
            let Some(&rail) = self.rail_of.get(&ifindex) else { continue };
            let at = on_monotonic(kernel);
            if let Some(incoming) = frames::parse(proto, &buf[..len]) {
                self.receive(rail, from, at, incoming);
            }
        }
    }

    /// One packet that came in on `rail` from link-layer address `from`:
    /// what it tells of the pair it is for.
    fn receive(&mut self, rail: usize, from: Option<HwAddr>, at: Instant, incoming: Incoming) {
        match incoming {
            Incoming::Answer { local, peer, hw } => {
                if let Some(ks) = self.by_pair.get(&(rail, local, peer))
                    && let Some(hw) = hw.map(|h| HwAddr::new(&h)).or(from)
                {
                    for &k in ks {
                        let seen = &mut self.states[k].seen;
                        if !seen.arp_answers.contains(&hw) {
                            seen.arp_answers.push(hw.clone());
                        }
                    }
                }
            }
            Incoming::Echo(e) => self.echo_back(rail, from, at, &e),
            Incoming::Reset { local, peer, port, ack } => {
                if ack != (self.token as u32).wrapping_add(1) {
                    return;
                }
                let key = (IpAddr::V6(local), IpAddr::V6(peer));
                let k = usize::from(port.wrapping_sub(PATH_BASE_PORT));
                // The pair with that index, or one PATH_PORTS on.
                let pair = (k..self.jobs.len()).step_by(PATH_PORTS).find(|&k| {
                    let j = &self.jobs[k];
                    (j.source, j.peer) == key
                });
                if let Some(k) = pair
                    && self.states[k].seen.routed.len() < 4
                {
                    self.states[k].seen.routed.push((rail, from));
                }
            }
        }
    }

    fn echo_back(&mut self, rail: usize, from: Option<HwAddr>, at: Instant, e: &frames::EchoReply) {
        if e.token != self.token {
            return;
        }
        let k = usize::from(e.id.wrapping_sub(self.base_id));
        let (Some(st), Some(job)) = (self.states.get_mut(k), self.jobs.get(k)) else { return };
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
}

/// One pair at one moment: what its stage needs to move on.
struct Pair<'a> {
    job: &'a Job,
    rail: &'a RailIo,
    echo: Echoer<'a>,
    timeout: Duration,
    now: Instant,
}

impl Pair<'_> {
    /// Moves the pair on if its stage is over. True when it resent its
    /// neighbour request.
    fn advance(&self, st: &mut State, sockets: &Sockets) -> bool {
        match st.stage {
            Stage::Done => {}
            Stage::Arp => return self.arp(st, sockets),
            Stage::Echo => self.echoes(st),
            Stage::Full => self.full(st),
            Stage::Search => self.search(st),
        }
        false
    }

    /// Neighbour resolution: once answered, the small echoes; resent once
    /// at half the timeout; given up at the timeout.
    fn arp(&self, st: &mut State, sockets: &Sockets) -> bool {
        if !st.seen.arp_answers.is_empty() {
            for _ in 0..SMALL_ECHOES {
                self.echo.send(st, Kind::Small);
            }
            st.stage = Stage::Echo;
            st.deadline = self.now + self.timeout;
        } else if self.now >= st.deadline {
            st.stage = Stage::Done;
        } else if st.arp_tries == 1 && self.now >= st.arp_at + self.timeout / 2 {
            sockets.send_neighbour(self.rail, self.job, st);
            st.arp_tries = 2;
            return true;
        }
        false
    }

    /// The small echoes: once back (or timed out), one of the rail's MTU.
    fn echoes(&self, st: &mut State) {
        let back = st.seen.replies.len();
        if back == usize::from(SMALL_ECHOES) || self.now >= st.deadline {
            if back == 0 {
                st.stage = Stage::Done;
            } else {
                st.lo = self.echo.overhead() + SMALL_DATA;
                st.hi = self.rail.mtu;
                st.deadline = self.now + st.grace(self.timeout);
                st.full_from = self.now;
                st.full_tries = 1;
                self.echo.send(st, Kind::Size(self.rail.mtu));
                st.stage = Stage::Full;
            }
        }
    }

    /// The echo of the rail's MTU: back (even late), done; not back in
    /// its grace, sent again, up to FULL_TRIES; the last one waited for
    /// until the timeout since the first: only then lost, and the search.
    fn full(&self, st: &mut State) {
        if st.seen.largest_back == Some(self.rail.mtu) {
            st.seen.full_size_back = Some(true);
            st.stage = Stage::Done;
        } else if self.now >= st.deadline && st.full_tries < FULL_TRIES {
            st.full_tries += 1;
            st.deadline = if st.full_tries == FULL_TRIES {
                (st.full_from + self.timeout).max(self.now + st.grace(self.timeout))
            } else {
                self.now + st.grace(self.timeout)
            };
            self.echo.send(st, Kind::Size(self.rail.mtu));
        } else if self.now >= st.deadline {
            st.seen.full_size_back = Some(false);
            st.seen.largest_back = Some(st.lo);
            st.stage = Stage::Search;
            st.start_round(self.now, st.grace(self.timeout), &self.echo);
        }
    }

    /// One search round over: close in, or stop.
    fn search(&self, st: &mut State) {
        // A full-size echo back late, while searching: no MTU problem.
        if st.lo >= self.rail.mtu {
            st.seen.full_size_back = Some(true);
            st.seen.largest_back = Some(self.rail.mtu);
            st.stage = Stage::Done;
            return;
        }
        if st.outstanding() == 0 || self.now >= st.deadline {
            st.hi = st.lowest_lost();
            st.seen.largest_back = Some(st.lo);
            if st.round >= SEARCH_ROUNDS || st.hi <= st.lo + 1 {
                st.stage = Stage::Done;
            } else {
                st.start_round(self.now, st.grace(self.timeout), &self.echo);
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

/// A raw setsockopt(2) for the options neither socket2 nor nix names:
/// PACKET_IGNORE_OUTGOING, ICMP(6)_FILTER, IP(V6)_MTU_DISCOVER.
fn set_raw_option<T>(socket: &Socket, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: a valid socket and a value of the size passed along.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// A non-blocking packet socket receiving `proto` on every interface,
/// filtered in the kernel to the interfaces `ifindices` name, without
/// what the host sends itself.
fn observer(proto: u16, ifindices: &[u32]) -> io::Result<Socket> {
    let socket = Socket::new(Domain::PACKET, Type::DGRAM, Some(Protocol::from(i32::from(proto.to_be()))))?;
    socket.set_nonblocking(true)?;
    let program: Vec<SockFilter> =
        observer_filter(proto, ifindices).iter().map(|f| SockFilter::new(f.code, f.jt, f.jf, f.k)).collect();
    socket.attach_filter(&program)?;
    setsockopt(&socket, sockopt::ReceiveTimestampns, &true)?;
    let _ = set_raw_option(&socket, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &(1 as libc::c_int));
    let rcvbuf = crate::testhooks::probe_rcvbuf().unwrap_or(RCVBUF);
    if setsockopt(&socket, sockopt::RcvBufForce, &rcvbuf).is_err() {
        let _ = socket.set_recv_buffer_size(rcvbuf);
    }
    Ok(socket)
}

/// What an observer keeps of a frame: enough for every header it reads
/// (an IPoIB ARP reply is 56 bytes, an advertisement with its option 72),
/// never a jumbo echo's padding.
pub const SNAP: u32 = 128;

/// Classic BPF, run by the kernel before a frame is queued: keep the first
/// SNAP bytes of a frame whose interface is one of `ifindices` and that is
/// an answer the probe reads, drop the rest. On a fleet's flat fabric
/// every host's requests reach every rail: 16 hosts of 8 rails probing at
/// once put some 100,000 ARP requests into each host's queues, which
/// overflowed and lost the answers among them.
/// - ARP: replies only (operation 2);
/// - IPv4: ICMP echo replies (type 0, after the header's IHL);
/// - IPv6: ICMPv6 echo replies (129) and neighbour advertisements (136)
///   right after the header, and TCP resets and SYN-ACKs (the answers to
///   the reply-path SYN), no other TCP.
pub fn observer_filter(proto: u16, ifindices: &[u32]) -> Vec<libc::sock_filter> {
    const SKF_AD_OFF: i32 = -0x1000;
    const SKF_AD_IFINDEX: i32 = 8;
    use libc::{
        BPF_ABS, BPF_ALU, BPF_AND, BPF_B, BPF_H, BPF_IND, BPF_JEQ, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_LDX,
        BPF_MSH, BPF_RET, BPF_W,
    };
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter { code: code as u16, jt, jf, k };
    let jeq = |k: u32, jt: u8, jf: u8| op(BPF_JMP | BPF_JEQ | BPF_K, jt, jf, k);
    let (keep, drop) = (op(BPF_RET | BPF_K, 0, 0, SNAP), op(BPF_RET | BPF_K, 0, 0, 0));
    let n = ifindices.len().min(250);
    let mut p = vec![op(BPF_LD | BPF_W | BPF_ABS, 0, 0, (SKF_AD_OFF + SKF_AD_IFINDEX) as u32)];
    // Instruction 1+i jumps over the rest of the list and the drop.
    for (i, idx) in ifindices.iter().take(n).enumerate() {
        p.push(jeq(*idx, (n - i) as u8, 0));
    }
    p.push(drop);
    match proto {
        ETHERTYPE_ARP => p.extend([op(BPF_LD | BPF_H | BPF_ABS, 0, 0, 6), jeq(2, 0, 1), keep, drop]),
        ETHERTYPE_IPV4 => p.extend([
            op(BPF_LD | BPF_B | BPF_ABS, 0, 0, 9),
            jeq(u32::from(frames::IPPROTO_ICMP), 0, 4),
            op(BPF_LDX | BPF_B | BPF_MSH, 0, 0, 0),
            op(BPF_LD | BPF_B | BPF_IND, 0, 0, 0),
            jeq(0, 0, 1),
            keep,
            drop,
        ]),
        _ => p.extend([
            op(BPF_LD | BPF_B | BPF_ABS, 0, 0, 6),
            jeq(u32::from(frames::IPPROTO_TCP), 0, 4),
            // TCP: a reset, or a SYN-ACK; nothing else of the rail's TCP.
            op(BPF_LD | BPF_B | BPF_ABS, 0, 0, 40 + 13),
            op(BPF_JMP | BPF_JSET | BPF_K, 6, 0, 0x04),
            op(BPF_ALU | BPF_AND | BPF_K, 0, 0, 0x12),
            jeq(0x12, 4, 5),
            jeq(u32::from(frames::IPPROTO_ICMPV6), 0, 4),
            op(BPF_LD | BPF_B | BPF_ABS, 0, 0, 40),
            jeq(129, 1, 0),
            jeq(136, 0, 1),
            keep,
            drop,
        ]),
    }
    p
}

/// One packet, if one is waiting: its length, the interface it came in
/// on, its link-layer source (None when the link gives none) and when the
/// kernel received it (SO_TIMESTAMPNS: an RTT is the path's, not the time
/// the packet waited in the queue for this loop). Outgoing packets, and
/// those for another host, are skipped.
///
/// libc's recvmsg, not socket2's (which wants an uninitialised buffer)
/// nor nix's (whose `LinkAddr` refuses an address longer than
/// `sockaddr_ll`, as the kernel reports one of IPoIB's 20 bytes).
fn recv(fd: std::os::fd::RawFd, buf: &mut [u8]) -> Option<(usize, i32, Option<HwAddr>, Option<SystemTime>)> {
    loop {
        // SAFETY: sockaddr_ll, iovec, msghdr and the control buffer are
        // plain data.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut control = [0u64; 8];
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut sll as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: a valid socket; msg points at the buffers above, which
        // outlive the call.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
        let n = usize::try_from(n).ok()?;
        // Not what comes in to this host: what it sends, and frames for
        // another host that a switch floods (an unknown unicast MAC).
        if matches!(sll.sll_pkttype, PACKET_OUTGOING | PACKET_OTHERHOST) {
            continue;
        }
        let halen = usize::from(sll.sll_halen).min(8);
        let from = (halen > 0).then(|| HwAddr::new(&sll.sll_addr[..halen]));
        return Some((n, sll.sll_ifindex, from, received_at(&msg)));
    }
}

/// The SCM_TIMESTAMPNS control message of `msg`, as a time.
fn received_at(msg: &libc::msghdr) -> Option<SystemTime> {
    // SAFETY: msg was filled by recvmsg; the CMSG macros walk its control
    // buffer within msg_controllen, and the data of an SCM_TIMESTAMPNS
    // message is a timespec (read unaligned).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                let d = Duration::new(u64::try_from(ts.tv_sec).ok()?, u32::try_from(ts.tv_nsec).ok()?);
                return SystemTime::UNIX_EPOCH.checked_add(d);
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}

/// The moment `kernel` was, on the monotonic clock the RTTs are measured
/// on: now, less the packet's age.
fn on_monotonic(kernel: Option<SystemTime>) -> Instant {
    let now = Instant::now();
    let age = kernel.and_then(|k| SystemTime::now().duration_since(k).ok()).unwrap_or_default();
    now.checked_sub(age).unwrap_or(now)
}

/// The echoes' sender: a blocking SOCK_DGRAM packet socket of no
/// protocol (it receives nothing), with a send buffer that holds a
/// round of jumbo echoes.
fn sender() -> io::Result<Socket> {
    let socket = Socket::new(Domain::PACKET, Type::DGRAM, None)?;
    if setsockopt(&socket, sockopt::SndBufForce, &SNDBUF).is_err() {
        let _ = socket.set_send_buffer_size(SNDBUF);
    }
    // A link that stops transmitting (a pause storm) must not hold the
    // probe past its end: a send that waits this long fails (send_failed).
    socket.set_write_timeout(Some(SEND_WAIT))?;
    Ok(socket)
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

    /// The classic BPF subset `observer_filter` uses, run as the kernel
    /// runs it on a SOCK_DGRAM packet socket (the packet from its network
    /// header): the snap length kept, 0 for a frame dropped.
    fn run_filter(prog: &[libc::sock_filter], ifindex: u32, pkt: &[u8]) -> u32 {
        use libc::{
            BPF_ABS, BPF_B, BPF_H, BPF_IND, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_LDX, BPF_MSH, BPF_RET, BPF_W,
        };
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let byte = |k: usize| u32::from(pkt.get(k).copied().unwrap_or(0));
        loop {
            let f = prog[pc];
            let code = u32::from(f.code);
            pc += 1;
            match code {
                c if c == BPF_LD | BPF_W | BPF_ABS => a = ifindex, // only the ancillary ifindex is read so
                c if c == BPF_LD | BPF_H | BPF_ABS => a = byte(f.k as usize) << 8 | byte(f.k as usize + 1),
                c if c == BPF_LD | BPF_B | BPF_ABS => a = byte(f.k as usize),
                c if c == BPF_LD | BPF_B | BPF_IND => a = byte((x + f.k) as usize),
                c if c == BPF_LDX | BPF_B | BPF_MSH => x = 4 * (byte(f.k as usize) & 0xf),
                c if c == BPF_JMP | BPF_JEQ | BPF_K => pc += usize::from(if a == f.k { f.jt } else { f.jf }),
                c if c == BPF_JMP | libc::BPF_JSET | BPF_K => {
                    pc += usize::from(if a & f.k != 0 { f.jt } else { f.jf })
                }
                c if c == libc::BPF_ALU | libc::BPF_AND | BPF_K => a &= f.k,
                c if c == BPF_RET | BPF_K => return f.k,
                other => panic!("instruction {other:#x} not in the subset"),
            }
        }
    }

    #[test]
    fn the_filters_keep_the_answers_on_the_rails_and_nothing_else() {
        let arp = observer_filter(ETHERTYPE_ARP, &[7, 9, 12]);
        let mut reply =
            frames::arp_request(1, &[2, 0, 0, 0, 0, 1], [198, 51, 100, 1].into(), [198, 51, 100, 2].into());
        let request = reply.clone();
        reply[7] = 2;
        for rail in [7, 9, 12] {
            assert_eq!(run_filter(&arp, rail, &reply), SNAP, "a reply on rail {rail}");
        }
        assert_eq!(run_filter(&arp, 8, &reply), 0, "not a rail");
        assert_eq!(run_filter(&arp, 9, &request), 0, "another host's request");

        let v4 = observer_filter(ETHERTYPE_IPV4, &[3]);
        let (a, b): (IpAddr, IpAddr) = ("198.51.100.1".parse().unwrap(), "198.51.100.2".parse().unwrap());
        let mut echo = frames::echo_packet(a, b, 1, 2, 3, 9000).unwrap();
        assert_eq!(run_filter(&v4, 3, &echo), 0, "an echo request: another host's probe");
        echo[20] = 0;
        assert_eq!(run_filter(&v4, 3, &echo), SNAP, "an echo reply, cut to SNAP");
        let mut with_options = echo[..20].to_vec();
        with_options[0] = 0x46;
        with_options.extend_from_slice(&[1, 1, 1, 0]);
        with_options.extend_from_slice(&echo[20..60]);
        assert_eq!(run_filter(&v4, 3, &with_options), SNAP, "the ICMP type found after IP options");
        echo[9] = 17;
        assert_eq!(run_filter(&v4, 3, &echo), 0, "UDP");

        let v6 = observer_filter(ETHERTYPE_IPV6, &[3]);
        let (a6, b6): (std::net::Ipv6Addr, std::net::Ipv6Addr) =
            ("2001:db8:1::1".parse().unwrap(), "2001:db8:1::2".parse().unwrap());
        let mut e6 = frames::echo_packet(a6.into(), b6.into(), 1, 2, 3, 1500).unwrap();
        assert_eq!(run_filter(&v6, 3, &e6), 0, "an echo request");
        e6[40] = 129;
        assert_eq!(run_filter(&v6, 3, &e6), SNAP, "an echo reply");
        let ns = frames::neighbour_solicitation(a6, b6, &[2, 0, 0, 0, 0, 1], 0);
        assert_eq!(run_filter(&v6, 3, &ns), 0, "another host's solicitation");
        let mut na = ns.clone();
        na[40] = 136;
        assert_eq!(run_filter(&v6, 3, &na), SNAP, "an advertisement");
        let mut tcp = frames::tcp6_syn(a6, b6, 1, 2);
        assert_eq!(run_filter(&v6, 3, &tcp), 0, "a SYN: another host's probe");
        for (flags, kept, what) in [
            (0x14, SNAP, "RST|ACK"),
            (0x04, SNAP, "RST"),
            (0x12, SNAP, "SYN|ACK"),
            (0x10, 0, "ACK"),
            (0x18, 0, "PSH|ACK: data"),
        ] {
            tcp[53] = flags;
            assert_eq!(run_filter(&v6, 3, &tcp), kept, "{what}");
        }
        assert_eq!(run_filter(&v6, 4, &na), 0, "not a rail");
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
