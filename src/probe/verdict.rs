//! Pure: which pairs to probe, and the verdict on one pair from what was
//! observed (no socket, no root): the problems, the sentence that says
//! what was seen, and what to do about each problem; and the matrix.

use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;

use crate::model::Prefix;
use crate::probe::peers::Peers;

/// The problem kinds, exactly as `--json` names them.
pub const ARP_NONE: &str = "arp_none";
pub const ARP_FLUX: &str = "arp_flux";
pub const WRONG_SOURCE_MAC: &str = "wrong_source_mac";
pub const WRONG_INTERFACE: &str = "wrong_interface";
pub const NO_REPLY: &str = "no_reply";
pub const MTU: &str = "mtu";
pub const LOCAL_ROUTE: &str = "local_route";
pub const DUPLICATE_ADDRESS: &str = "duplicate_address";
pub const SEND_FAILED: &str = "send_failed";

/// Where a problem's fix is, as `fix_on[]` names it: on this host, on the
/// peer, or on the path between (links, switch ports).
pub const THIS_HOST: &str = "this_host";
pub const PEER: &str = "peer";
pub const PATH: &str = "path";

/// This host's ARP settings on one rail, as the kernel acts on them (the
/// larger of `conf/all` and `conf/<rail>`); None where unreadable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnArp {
    pub rail: String,
    pub arp_ignore: Option<u32>,
    pub arp_announce: Option<u32>,
}

/// A local rail with its addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalRail {
    pub name: String,
    pub addresses: Vec<Prefix>,
    /// Configured addresses that are not on the rail now: no pair goes
    /// out from them, but their subnets are still the rail's (a peer in
    /// one is this rail's to reach, not another rail's).
    pub missing: Vec<Prefix>,
}

/// One probe: from `source` on `rail` to `peer`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    pub rail: String,
    pub source: IpAddr,
    pub peer: IpAddr,
}

/// The pairs: every peer address with every rail that has an address of
/// its family. A peer address that is on-link for some rails (inside the
/// subnet of one of their addresses) is probed from those rails only: on a
/// rail-optimized fabric each rail is its own subnet and reaches only its
/// peers' same rail, so probing it from another rail would only report
/// what the design intends. The source is the rail's address whose subnet
/// holds the peer, else its first address of that family.
pub fn pairs(rails: &[LocalRail], peers: &[IpAddr]) -> Vec<Pair> {
    let mut out = Vec::new();
    for peer in peers {
        let on_link: Vec<(&LocalRail, &Prefix)> = rails
            .iter()
            .filter_map(|r| r.addresses.iter().chain(&r.missing).find(|a| a.contains(peer)).map(|a| (r, a)))
            .collect();
        // On-link by a missing address only: that rail's pair, not probed,
        // and no other rail's either.
        let on_link: Vec<(&LocalRail, &Prefix)> = match on_link.is_empty() {
            true => on_link,
            false => {
                let live: Vec<_> = on_link.into_iter().filter(|(r, a)| r.addresses.contains(a)).collect();
                if live.is_empty() {
                    continue;
                }
                live
            }
        };
        if on_link.is_empty() {
            for r in rails {
                if let Some(a) = r.addresses.iter().find(|a| a.addr.is_ipv4() == peer.is_ipv4()) {
                    out.push(Pair { rail: r.name.clone(), source: a.addr, peer: *peer });
                }
            }
        } else {
            out.extend(on_link.into_iter().map(|(r, a)| Pair {
                rail: r.name.clone(),
                source: a.addr,
                peer: *peer,
            }));
        }
    }
    // Rails down, peers across: group by rail, keeping the peers' order.
    let order = |name: &str| rails.iter().position(|r| r.name == name).unwrap_or(usize::MAX);
    out.sort_by_key(|p| order(&p.rail));
    out
}

/// `--same-rail`: keeps a pair only when the peer's NIC that has the
/// address (known from a `--peers` document) has the pair's rail's name.
/// A peer address no document describes, or whose NIC's name is none of
/// this host's rails, keeps all its pairs: nothing tells which rail is
/// its own, and it must not go unprobed.
pub fn same_rail(pairs: Vec<Pair>, peers: &Peers, rails: &[LocalRail]) -> Vec<Pair> {
    pairs
        .into_iter()
        .filter(|p| match peers.rail_of(&p.peer) {
            Some(theirs) if rails.iter().any(|r| r.name == theirs.name) => theirs.name == p.rail,
            _ => true,
        })
        .collect()
}

/// One echo reply as captured: the interface it came in on and its
/// link-layer source (None where the link does not give it: IPoIB).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub interface: String,
    pub source_mac: Option<String>,
}

/// The RDMA port of a rail, for the MTU step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RdmaMtu {
    /// `mlx5_0:1`.
    pub port: String,
    pub roce: bool,
    /// The port's active_mtu, when it could be read (sysfs of mainline
    /// kernels does not export it: None).
    pub active_mtu: Option<u32>,
}

/// What was seen for one pair.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// Every distinct link-layer address that answered ARP (or neighbour
    /// solicitation) on the rail, in the order they came.
    pub arp_answers: Vec<String>,
    /// The replies to the small echoes (wherever they came in).
    pub replies: Vec<Reply>,
    /// Replies the peer routes whatever the request's interface (IPv6:
    /// the TCP reset to a SYN; see `probe::io`), checked
    /// like the echo replies; none is no evidence either way.
    pub routed: Vec<Reply>,
    pub rtts: Vec<Duration>,
    pub rail_mtu: u32,
    /// Whether the echo of the rail's full MTU with don't-fragment came
    /// back; None: it was not sent (no small echo came back).
    pub full_size_back: Option<bool>,
    /// The largest echo size (IP packet length) that came back.
    pub largest_back: Option<u32>,
    /// The interface the kernel's route lookup (source -> peer) leaves
    /// by, or why there is none.
    pub route_dev: Result<String, String>,
    pub rdma: Option<RdmaMtu>,
    /// This host's ARP settings on every rail (IPv4): whether this host
    /// itself lets a peer learn one of its addresses at another NIC.
    pub own_arp: Vec<OwnArp>,
    /// The gateway this host's route to the peer names, when the peer is
    /// behind a router: the neighbour request asked for it, and the echo
    /// replies come from its link-layer address.
    pub gateway: Option<IpAddr>,
    /// Frames the probe's packet sockets dropped during the run (all
    /// pairs together, `PACKET_STATISTICS`): what did not come back may
    /// have been among them.
    pub drops: u64,
    /// Why one of this pair's frames could not be sent (a rail gone down
    /// meanwhile), if one could not.
    pub send_error: Option<String>,
}

/// The verdict on one pair: `probes[]` in the JSON document.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeResult {
    pub rail: String,
    pub source: IpAddr,
    pub peer: IpAddr,
    pub peer_rail: Option<String>,
    /// The gateway the pair goes through (null: the peer is on the link).
    pub gateway: Option<IpAddr>,
    pub problems: Vec<&'static str>,
    /// Where each problem's fix is (`this_host`, `peer`, `path`), one per
    /// problem, in the same order.
    pub fix_on: Vec<&'static str>,
    pub arp_answers: Vec<String>,
    pub reply_interface: Option<String>,
    pub reply_source_mac: Option<String>,
    pub rtt_ms: Option<f64>,
    pub rail_mtu: u32,
    pub path_mtu: Option<u32>,
    /// The RDMA MTU the rail's netdev MTU carries on RoCE (None: not RoCE).
    pub rdma_mtu_carried: Option<u32>,
    pub rdma: Option<RdmaMtu>,
    pub detail: String,
    /// What to do, one line per problem.
    pub fixes: Vec<String>,
    /// Why part of the pair could not be checked, one line per part (empty:
    /// all of it was). A pair without problems is right only when this is
    /// empty.
    pub not_verified: Vec<String>,
    /// With `--rdma`: the pair at the RDMA layer (connect, WRITE and READ
    /// through the RDMA CM from the rail's own device). Null without it.
    pub rdma_probe: Option<crate::probe::rdma::RdmaOutcome>,
}

impl ProbeResult {
    /// No problem, and every check had its evidence.
    pub fn right(&self) -> bool {
        self.problems.is_empty() && self.not_verified.is_empty()
    }

    /// No problem found, yet a check lacked its evidence.
    pub fn unverified(&self) -> bool {
        self.problems.is_empty() && !self.not_verified.is_empty()
    }
}

/// RoCE v2 headers inside the netdev MTU (the kernel's `iboe_get_mtu()`:
/// GRH 40, UDP 8, BTH 12, XRC 4, AtomicETH 28, ICRC 4).
const ROCE_HEADERS: u32 = 96;

/// The largest RDMA MTU (256..4096) a RoCE netdev MTU carries, as the
/// kernel derives a RoCE port's active_mtu: 9000 -> 4096, 1500 -> 1024.
pub fn rdma_mtu_carried(netdev_mtu: u32) -> Option<u32> {
    let room = netdev_mtu.checked_sub(ROCE_HEADERS)?;
    [4096, 2048, 1024, 512, 256].into_iter().find(|m| *m <= room)
}

/// The median of the round-trip times, in milliseconds (3 decimals).
pub fn median_ms(rtts: &[Duration]) -> Option<f64> {
    let mut v: Vec<Duration> = rtts.to_vec();
    v.sort();
    let n = v.len();
    if n == 0 {
        return None;
    }
    let mid = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2 };
    Some((mid.as_secs_f64() * 1e6).round() / 1e3)
}

/// The verdict on `pair` from `obs`. `peers`: what is known of the peer
/// (its NICs, from `--peers` with the peer's `probe --self --json`);
/// `timeout`: how long an answer was waited for; `apply`: the command
/// that fixes this host's own routing.
pub fn verdict(pair: &Pair, obs: &Observation, peers: &Peers, timeout: Duration, apply: &str) -> ProbeResult {
    let judge = Judge::new(pair, obs, peers, timeout);
    let mut found = Findings::default();
    judge.neighbour(&mut found);
    judge.reply_path(&mut found, apply);
    let path_mtu = judge.path_mtu(&mut found);
    let carried = judge.rdma_mtu(&mut found);
    judge.local_route(&mut found, apply);
    judge.send_failed(&mut found);
    let not_verified = judge.unverified(&mut found);
    judge.result(found, path_mtu, carried, not_verified)
}

/// What `roce-route apply` on the peer fixes.
const FIX_PEER: &str =
    "on the peer, run `roce-route apply` (a source rule and table per NIC, arp_ignore=1, arp_announce=2)";

/// The problems found so far: their kinds, the sentences that say them,
/// and what to do about each.
#[derive(Default)]
struct Findings {
    problems: Vec<&'static str>,
    fix_on: Vec<&'static str>,
    said: Vec<String>,
    fixes: Vec<String>,
}

impl Findings {
    /// A problem whose fix is on the peer.
    fn add(&mut self, kind: &'static str, sentence: String, fix: String) {
        self.add_on(kind, PEER, sentence, fix);
    }
    fn add_on(&mut self, kind: &'static str, on: &'static str, sentence: String, fix: String) {
        self.problems.push(kind);
        self.fix_on.push(on);
        self.said.push(sentence);
        self.fixes.push(fix);
    }

    /// Takes out the problems `absent` says are only an absence of
    /// evidence; their kinds, in order.
    fn take_absences(&mut self, absent: impl Fn(&str, &str) -> bool) -> Vec<&'static str> {
        let mut taken = Vec::new();
        let mut k = 0;
        while k < self.problems.len() {
            if absent(self.problems[k], self.fix_on[k]) {
                taken.push(self.problems.remove(k));
                self.fix_on.remove(k);
                self.said.remove(k);
                self.fixes.remove(k);
            } else {
                k += 1;
            }
        }
        taken
    }

    fn has(&self, kind: &str) -> bool {
        self.problems.contains(&kind)
    }
}

/// One pair's observation with what is known of the peer: the steps of
/// the verdict, each adding what it finds.
struct Judge<'a> {
    pair: &'a Pair,
    obs: &'a Observation,
    peers: &'a Peers,
    peer_rail: Option<String>,
    /// The MAC of the peer's NIC that has the address, when known.
    expected_mac: Option<String>,
    /// The peer address, with its rail when known.
    peer_label: String,
    ms: u128,
    /// "ARP" or "neighbour solicitation".
    arp: &'static str,
}

impl<'a> Judge<'a> {
    fn new(pair: &'a Pair, obs: &'a Observation, peers: &'a Peers, timeout: Duration) -> Judge<'a> {
        let peer_rail = peers.rail_of(&pair.peer).map(|r| r.name.clone());
        let peer_label = match &peer_rail {
            Some(r) => format!("{} (peer {r})", pair.peer),
            None => pair.peer.to_string(),
        };
        Judge {
            pair,
            obs,
            peers,
            // Behind a router the frames are the gateway's, never the
            // peer NIC's.
            expected_mac: peers
                .rail_of(&pair.peer)
                .and_then(|r| r.mac.clone())
                .filter(|_| obs.gateway.is_none()),
            peer_rail,
            peer_label,
            ms: timeout.as_millis(),
            arp: if pair.peer.is_ipv4() { "ARP" } else { "neighbour solicitation" },
        }
    }

    /// A MAC, with the peer's NIC that has it when known.
    fn who(&self, mac: &str) -> String {
        match self.peers.rail_of_mac(mac) {
            Some(r) => format!("{mac} = peer {}", r.name),
            None => mac.to_string(),
        }
    }

    /// Whether a reply from `mac` is from the right NIC: the peer's NIC
    /// for the address when known, else one that answered ARP.
    fn mac_fits(&self, mac: &str) -> bool {
        match &self.expected_mac {
            Some(e) => e.eq_ignore_ascii_case(mac),
            None => self.obs.arp_answers.iter().any(|a| a.eq_ignore_ascii_case(mac)),
        }
    }

    /// Why this host itself would make a peer send to `nic`'s MAC what is
    /// meant for the pair's source (IPv4: IPv6 answers a solicitation only
    /// on the interface that has the address): `nic` answers ARP for every
    /// address of the host (arp_ignore=0), or its own ARP requests carry
    /// the other NICs' addresses (arp_announce below 2).
    fn own_flux(&self, nic: &str) -> Option<String> {
        if !self.pair.source.is_ipv4() {
            return None;
        }
        let own = self.obs.own_arp.iter().find(|a| a.rail == nic)?;
        let mut why = Vec::new();
        if own.arp_ignore == Some(0) {
            why.push(format!("arp_ignore=0 on {nic}: it answers ARP for every address of this host"));
        }
        if let Some(v) = own.arp_announce.filter(|v| *v < 2) {
            why.push(format!("arp_announce={v} on {nic}: its ARP requests may carry another NIC's address"));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// The echo replies and the routed replies together.
    fn all_replies(&self) -> impl Iterator<Item = &'a Reply> {
        self.obs.replies.iter().chain(&self.obs.routed)
    }

    /// Step 1: who answers for the address on this rail (behind a router:
    /// who answers for the gateway).
    fn neighbour(&self, found: &mut Findings) {
        if let Some(gw) = self.obs.gateway {
            return self.gateway_neighbour(gw, found);
        }
        let (rail, peer, peer_label, arp, ms) =
            (&self.pair.rail, self.pair.peer, &self.peer_label, self.arp, self.ms);
        match self.obs.arp_answers.as_slice() {
            [] => found.add(
                ARP_NONE,
                format!(
                    "{peer_label} did not answer {arp} on {rail} within {ms} ms: unreachable at layer 2 on this rail"
                ),
                format!(
                    "check that {peer} is configured and up on the peer, that {rail}'s link and switch port are up, \
                     and that {rail} is on the peer's network (on a rail-optimized fabric: the same rail)"
                ),
            ),
            [one] if self.strangers().is_empty() => {
                if let Some(expected) = self.expected_mac.as_deref().filter(|e| !e.eq_ignore_ascii_case(one)) {
                    found.add(
                        ARP_FLUX,
                        format!(
                            "{peer_label} answered by {} on {rail}, not by its own NIC ({expected})",
                            self.who(one)
                        ),
                        FIX_PEER.to_string(),
                    );
                }
            }
            many if peer.is_ipv4() && self.strangers().is_empty() => found.add(
                ARP_FLUX,
                format!(
                    "{} link-layer addresses answered {arp} for {peer_label} on {rail} ({}): ARP flux, every NIC of \
                     the peer answers for every address{}",
                    many.len(),
                    many.iter().map(|m| self.who(m)).collect::<Vec<_>>().join(", "),
                    if self.peers.rail_of(&peer).is_none() {
                        " (or another device has the address: --peers with the peer's `probe --self` tells the two apart)"
                    } else {
                        ""
                    }
                ),
                FIX_PEER.to_string(),
            ),
            answers => self.duplicate(answers, found),
        }
    }

    /// The answers that are no NIC of any host `--peers` describes, when
    /// one of those documents has the peer's address (none otherwise:
    /// then nothing is known to be foreign).
    fn strangers(&self) -> Vec<&'a String> {
        // Only for a peer address some document describes: an
        // undocumented peer's own NIC is unknown, not foreign.
        if self.peers.rail_of(&self.pair.peer).is_none() {
            return Vec::new();
        }
        self.obs.arp_answers.iter().filter(|m| self.peers.rail_of_mac(m).is_none()).collect()
    }

    /// Another device answers for the peer's address: one that is no NIC
    /// of the peers', or (IPv6, which has no flux: a Linux NIC answers a
    /// solicitation only for its own addresses) a second answer at all.
    fn duplicate(&self, answers: &[String], found: &mut Findings) {
        let (rail, peer, peer_label, arp) = (&self.pair.rail, self.pair.peer, &self.peer_label, self.arp);
        let strangers = self.strangers();
        let why = if strangers.is_empty() {
            "IPv6 has no ARP flux (a Linux NIC answers a solicitation only for its own addresses), so another \
             device has the address"
                .to_string()
        } else {
            format!(
                "{} is no NIC of the hosts --peers describes, so another device has the address",
                strangers.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(" and ")
            )
        };
        let at = strangers.first().map_or_else(|| answers.join(" or "), |m| m.to_string());
        found.add_on(
            DUPLICATE_ADDRESS,
            PATH,
            format!(
                "{} link-layer address{} answered {arp} for {peer_label} on {rail} ({}): a duplicate address: {why}",
                answers.len(),
                if answers.len() == 1 { "" } else { "es" },
                answers.iter().map(|m| self.who(m)).collect::<Vec<_>>().join(", ")
            ),
            format!("find the device at {at} on {rail}'s network and take {peer} off it (`ip neigh`, the switch's MAC table)"),
        );
    }

    /// 1, behind a router: the gateway must answer, once.
    fn gateway_neighbour(&self, gw: IpAddr, found: &mut Findings) {
        let (rail, peer_label, arp, ms) = (&self.pair.rail, &self.peer_label, self.arp, self.ms);
        match self.obs.arp_answers.as_slice() {
            [] => found.add_on(
                ARP_NONE,
                PATH,
                format!(
                    "the gateway {gw} (this host's next hop to {peer_label}) did not answer {arp} on {rail} \
                     within {ms} ms: the router is unreachable at layer 2 on this rail"
                ),
                format!(
                    "check that {gw} is up on the router's port of {rail} (the leaf), that {rail}'s link is up, \
                     and that {rail}'s gateway in the config is that port's address"
                ),
            ),
            [_] => {}
            many => found.add_on(
                ARP_FLUX,
                PATH,
                format!(
                    "{} link-layer addresses answered {arp} for the gateway {gw} on {rail} ({}): more than one \
                     device claims the router's address",
                    many.len(),
                    many.join(", ")
                ),
                format!("find the devices that answer for {gw} on {rail}'s network: only the router may"),
            ),
        }
    }

    /// 2. Where the echo reply comes back, and from which MAC.
    fn reply_path(&self, found: &mut Findings, apply: &str) {
        if self.obs.arp_answers.is_empty() {
            return;
        }
        let (rail, peer, peer_label, arp, ms) =
            (&self.pair.rail, self.pair.peer, &self.peer_label, self.arp, self.ms);
        if let (true, Some(gw)) = (self.obs.replies.is_empty(), self.obs.gateway) {
            found.add(
                NO_REPLY,
                format!(
                    "the gateway {gw} answered {arp} on {rail} but no echo reply from {peer_label} came back within \
                     {ms} ms, on any rail: the peer, its route back to {source} or the routers between",
                    source = self.pair.source
                ),
                format!(
                    "{FIX_PEER}; check that the peer answers ICMP echo and has a route back to {}",
                    self.pair.source
                ),
            );
        } else if self.obs.replies.is_empty() {
            found.add(
                NO_REPLY,
                format!(
                    "{peer_label} answered {arp} on {rail} but no echo reply came back within {ms} ms, on any \
                     rail: the peer's reply path is wrong or the rails are isolated"
                ),
                format!("{FIX_PEER}; check that the peer answers ICMP echo"),
            );
        } else if let Some(elsewhere) = self.all_replies().find(|r| r.interface != *rail) {
            let came = &elsewhere.interface;
            match self.own_flux(came) {
                // The reply was addressed to `came`'s MAC: the peer holds
                // that MAC for this host's source, which this host gave.
                Some(why) => found.add_on(
                    WRONG_INTERFACE,
                    THIS_HOST,
                    format!(
                        "the echo reply from {peer_label} came in on {came}, not on {rail}: the peer sent it to \
                         {came}'s MAC, which this host gives out for {source} ({why})",
                        source = self.pair.source
                    ),
                    format!(
                        "run `{apply}` on this host: arp_ignore=1 and arp_announce=2 on every NIC, and it \
                         announces {source} on {rail} so the peer learns it again",
                        source = self.pair.source
                    ),
                ),
                None => found.add(
                    WRONG_INTERFACE,
                    format!(
                        "the echo reply from {peer_label} came in on {came}, not on {rail}: the peer replies \
                         through another NIC, or the rails are cross-connected"
                    ),
                    FIX_PEER.to_string(),
                ),
            }
        } else if let Some(bad) =
            self.all_replies().filter_map(|r| r.source_mac.as_deref()).find(|m| !self.mac_fits(m))
        {
            match self.obs.gateway {
                Some(gw) => found.add_on(
                    WRONG_SOURCE_MAC,
                    PATH,
                    format!(
                        "the echo reply from {peer_label} came from {bad}, not from the gateway {gw} ({}) that \
                         answered {arp}: another router carries the way back to {}",
                        self.obs.arp_answers.join(" or "),
                        self.pair.source
                    ),
                    format!("the route back to {} must come through {gw} on {rail}", self.pair.source),
                ),
                None => {
                    let wanted = self.expected_mac.clone().unwrap_or_else(|| self.obs.arp_answers.join(" or "));
                    found.add(
                        WRONG_SOURCE_MAC,
                        format!(
                            "the echo reply from {peer_label} came from {}, not from {wanted} that answered {arp}: \
                             the peer replies through another NIC",
                            self.who(bad)
                        ),
                        format!("{FIX_PEER}: its replies for {peer} must leave by the NIC that has {peer}"),
                    )
                }
            }
        }
    }

    /// 3. The path MTU; a problem when the rail's MTU did not come back.
    fn path_mtu(&self, found: &mut Findings) -> Option<u32> {
        let (rail, peer, obs) = (&self.pair.rail, self.pair.peer, self.obs);
        if obs.full_size_back == Some(false) {
            let largest = obs.largest_back.map_or("none".to_string(), |l| format!("{l} bytes"));
            found.add_on(
                MTU,
                PATH,
                format!(
                    "an echo of {rail}'s MTU ({} bytes) with don't-fragment did not come back from {}; the \
                     largest that did: {largest}",
                    obs.rail_mtu, self.peer_label
                ),
                format!(
                    "make the MTU the same on {rail}, every switch port on the way and the peer's NIC for {peer} \
                     (`ip link show` on each end)"
                ),
            );
        }
        match obs.full_size_back {
            Some(true) => Some(obs.rail_mtu),
            Some(false) => obs.largest_back,
            None => None,
        }
    }

    /// 3b. RoCE: the RDMA MTU the rail's MTU carries; a problem when it
    /// is less than the port's active_mtu.
    fn rdma_mtu(&self, found: &mut Findings) -> Option<u32> {
        let (rail, obs) = (&self.pair.rail, self.obs);
        let roce = obs.rdma.as_ref().filter(|r| r.roce);
        let carried = roce.and_then(|_| rdma_mtu_carried(obs.rail_mtu));
        if let Some(r) = roce
            && let Some(active) = r.active_mtu
            && carried.is_none_or(|c| c < active)
        {
            found.add_on(
                MTU,
                THIS_HOST,
                format!(
                    "{rail}'s MTU {} cannot carry the active_mtu {active} of its RDMA port {}: RoCE needs the \
                     netdev MTU at least {active} + {ROCE_HEADERS}",
                    obs.rail_mtu, r.port
                ),
                format!("raise {rail}'s MTU to at least {} (9000 is usual for 4096)", active + ROCE_HEADERS),
            );
        }
        carried
    }

    /// 4. This host's own path.
    fn local_route(&self, found: &mut Findings, apply: &str) {
        let (rail, peer, source) = (&self.pair.rail, self.pair.peer, self.pair.source);
        match &self.obs.route_dev {
            Ok(dev) if dev == rail => {}
            Ok(dev) => found.add_on(
                LOCAL_ROUTE,
                THIS_HOST,
                format!("this host's route lookup from {source} to {peer} leaves by {dev}, not by {rail}"),
                format!("run `{apply}` on this host: it gives {source} its own source rule and table"),
            ),
            Err(why) => found.add_on(
                LOCAL_ROUTE,
                THIS_HOST,
                format!("this host has no route from {source} to {peer}: {why}"),
                format!("run `{apply}` on this host"),
            ),
        }
    }

    /// 4b. A frame this host could not send (a full or throttled queue:
    /// ENOBUFS; a rail gone down: ENETDOWN), when something is missing
    /// for it (no answer, no reply, a lost full-size echo), is this host's
    /// fault: the absence says nothing of the peer or the path.
    fn send_failed(&self, found: &mut Findings) {
        let Some(e) = &self.obs.send_error else { return };
        let rail = &self.pair.rail;
        let taken = found
            .take_absences(|kind, on| kind == ARP_NONE || kind == NO_REPLY || (kind == MTU && on == PATH));
        // A failed send that was made up for (the resend, or another pair's
        // request to the same next hop, got the answer) left nothing
        // missing: no problem.
        if taken.is_empty() {
            return;
        }
        let instead = format!(" (not {})", taken.join(", "));
        found.add_on(
            SEND_FAILED,
            THIS_HOST,
            format!("this host could not send the pair's frames on {rail} ({e}){instead}: its own queue or link"),
            format!(
                "look at {rail} on this host: `ip link show {rail}` (up?) and `tc -s qdisc show dev {rail}` (a \
                 full or throttled queue drops what is sent)"
            ),
        );
    }

    /// Step 5: what could not be checked for want of evidence, one reason per
    /// part. Frames dropped by the probe's own sockets make an absence
    /// (no answer, no reply, a lost full-size echo) no evidence: those
    /// problems become a reason here. An IPv6 pair whose TCP reset
    /// never came back has no evidence of the peer's reply path (its echo
    /// replies leave by the request's NIC whatever its routing); a link
    /// without source link-layer addresses (IPoIB) none of the replying
    /// NIC.
    fn unverified(&self, found: &mut Findings) -> Vec<String> {
        let (obs, peer_label) = (self.obs, &self.peer_label);
        let mut why = Vec::new();
        if obs.drops > 0 {
            let taken = found.take_absences(|kind, on| {
                kind == ARP_NONE || kind == NO_REPLY || (kind == MTU && on == PATH)
            });
            if !taken.is_empty() {
                why.push(format!(
                    "the probe's packet sockets dropped {} frames during the run, so what did not come back \
                     ({}) is no evidence: probe again, with fewer peers at once",
                    obs.drops,
                    taken.join(", ")
                ));
            }
        }
        let replied = !obs.replies.is_empty();
        let misrouted = found.has(WRONG_INTERFACE) || found.has(WRONG_SOURCE_MAC);
        if replied && !misrouted && self.pair.peer.is_ipv6() && obs.routed.is_empty() {
            why.push(format!(
                "no TCP reset came back from {peer_label} for the SYN to a closed port (a firewall drops it, \
                 or its answer), so the NIC its routing answers from is not checked: an ICMPv6 echo reply \
                 always leaves by the NIC the request came in on"
            ));
        }
        if replied && !misrouted && self.all_replies().all(|r| r.source_mac.is_none()) {
            why.push(format!(
                "{}'s link gives no source link-layer address (IPoIB), so which of {peer_label}'s NICs sent \
                 the reply is not checked, only that it came in on {}",
                self.pair.rail, self.pair.rail
            ));
        }
        why
    }

    /// The verdict: the reply shown is one that shows a problem, else the
    /// first echo's; the detail is what was found, or what went right.
    fn result(
        self,
        found: Findings,
        path_mtu: Option<u32>,
        carried: Option<u32>,
        not_verified: Vec<String>,
    ) -> ProbeResult {
        let (pair, obs, rail) = (self.pair, self.obs, &self.pair.rail);
        let rtt_ms = median_ms(&obs.rtts);
        let shown = self
            .all_replies()
            .find(|r| r.interface != *rail || r.source_mac.as_deref().is_some_and(|m| !self.mac_fits(m)))
            .or(obs.replies.first());
        let detail = if found.said.is_empty() {
            let answer = obs.arp_answers.first().map(|m| self.who(m)).unwrap_or_default();
            let rtt = rtt_ms.map_or(String::new(), |r| format!(", rtt {r} ms"));
            let mtu = path_mtu.map_or(String::new(), |m| format!(", path MTU {m}"));
            match obs.gateway {
                Some(gw) => format!(
                    "{} through the gateway {gw} (answered by {answer} on {rail}), echo back in on {rail}{rtt}{mtu}.",
                    self.peer_label
                ),
                None => format!(
                    "{} answered by {answer} on {rail}, echo back in on {rail}{rtt}{mtu}.",
                    self.peer_label
                ),
            }
        } else {
            let mut s = found.said.join("; ");
            s.push('.');
            s
        };
        ProbeResult {
            rail: pair.rail.clone(),
            source: pair.source,
            peer: pair.peer,
            peer_rail: self.peer_rail,
            gateway: obs.gateway,
            problems: found.problems,
            fix_on: found.fix_on,
            arp_answers: obs.arp_answers.clone(),
            reply_interface: shown.map(|r| r.interface.clone()),
            reply_source_mac: shown.and_then(|r| r.source_mac.clone()),
            rtt_ms,
            rail_mtu: obs.rail_mtu,
            path_mtu,
            rdma_mtu_carried: carried,
            rdma: obs.rdma.clone(),
            detail,
            fixes: found.fixes,
            not_verified,
            rdma_probe: None,
        }
    }
}

/// The short word for a problem in a matrix cell.
fn short(kind: &str) -> &'static str {
    match kind {
        ARP_NONE => "no-arp",
        ARP_FLUX => "flux",
        WRONG_SOURCE_MAC => "mac",
        WRONG_INTERFACE => "iface",
        NO_REPLY => "no-reply",
        MTU => "mtu",
        LOCAL_ROUTE => "route",
        DUPLICATE_ADDRESS => "dup",
        SEND_FAILED => "send",
        _ => crate::probe::rdma::short(kind).unwrap_or("?"),
    }
}

/// The matrix: rails down, peers across, one short verdict per cell ("-":
/// not probed, another family or another rail's subnet), then one line
/// per problem with what to do; with `verbose`, first one line per right
/// pair with what was measured (who answered, the RTT, the path MTU).
pub fn matrix(rails: &[String], peers: &[IpAddr], results: &[ProbeResult], verbose: bool) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut header = vec!["rail".to_string()];
    header.extend(peers.iter().map(|p| p.to_string()));
    rows.push(header);
    for rail in rails {
        let mut row = vec![rail.clone()];
        for peer in peers {
            let cell = match results.iter().find(|r| r.rail == *rail && r.peer == *peer) {
                None => "-".to_string(),
                Some(r) if r.right() => "ok".to_string(),
                Some(r) if r.unverified() => "unverified".to_string(),
                Some(r) => {
                    let mut words: Vec<&str> = r.problems.iter().map(|k| short(k)).collect();
                    words.dedup();
                    words.join(",")
                }
            };
            row.push(cell);
        }
        rows.push(row);
    }
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> =
        (0..columns).map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    let peer_of = |r: &ProbeResult| match &r.peer_rail {
        Some(pr) => format!("{} (peer {pr})", r.peer),
        None => r.peer.to_string(),
    };
    let right: Vec<&ProbeResult> = results.iter().filter(|r| r.right()).collect();
    if verbose && !right.is_empty() {
        out.push('\n');
        for r in right {
            out.push_str(&format!("{} ({}) -> {}: ok: {}\n", r.rail, r.source, peer_of(r), r.detail));
        }
    }
    let bad: Vec<&ProbeResult> = results.iter().filter(|r| !r.problems.is_empty()).collect();
    if !bad.is_empty() {
        out.push('\n');
    }
    for r in bad {
        let peer = peer_of(r);
        let kinds = r.problems.join(", ");
        out.push_str(&format!("{} ({}) -> {peer}: {kinds}: {}\n", r.rail, r.source, r.detail));
        let mut fixes = r.fixes.clone();
        fixes.dedup();
        for f in fixes {
            out.push_str(&format!("    fix: {f}\n"));
        }
    }
    let unverified: Vec<&ProbeResult> = results.iter().filter(|r| r.unverified()).collect();
    if !unverified.is_empty() {
        out.push('\n');
    }
    for r in unverified {
        out.push_str(&format!(
            "{} ({}) -> {}: not verified: {}.\n",
            r.rail,
            r.source,
            peer_of(r),
            r.not_verified.join("; ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::peers::PeerRail;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
    fn prefix(s: &str) -> Prefix {
        let (a, l) = s.split_once('/').unwrap();
        Prefix::new(ip(a), l.parse().unwrap())
    }
    fn rail(name: &str, addrs: &[&str]) -> LocalRail {
        LocalRail { name: name.into(), addresses: addrs.iter().map(|a| prefix(a)).collect(), missing: vec![] }
    }
    const M0: &str = "02:00:00:00:01:00";
    const M1: &str = "02:00:00:00:01:01";

    fn pair() -> Pair {
        Pair { rail: "rail1".into(), source: ip("198.51.100.11"), peer: ip("198.51.100.111") }
    }
    fn healthy() -> Observation {
        Observation {
            arp_answers: vec![M1.into()],
            replies: vec![Reply { interface: "rail1".into(), source_mac: Some(M1.into()) }; 3],
            routed: vec![],
            rtts: vec![Duration::from_micros(80), Duration::from_micros(60), Duration::from_micros(900)],
            rail_mtu: 9000,
            full_size_back: Some(true),
            largest_back: Some(9000),
            route_dev: Ok("rail1".into()),
            rdma: None,
            own_arp: ["rail0", "rail1"]
                .map(|r| OwnArp { rail: r.into(), arp_ignore: Some(1), arp_announce: Some(2) })
                .to_vec(),
            gateway: None,
            drops: 0,
            send_error: None,
        }
    }
    fn peers_json() -> Peers {
        Peers {
            addresses: vec![ip("198.51.100.110"), ip("198.51.100.111")],
            rails: vec![
                PeerRail {
                    name: "ib0".into(),
                    addresses: vec![ip("198.51.100.110")],
                    mac: Some(M0.into()),
                    mtu: None,
                    rdma: None,
                },
                PeerRail {
                    name: "ib1".into(),
                    addresses: vec![ip("198.51.100.111")],
                    mac: Some(M1.into()),
                    mtu: None,
                    rdma: None,
                },
            ],
        }
    }
    fn judge(obs: &Observation, peers: &Peers) -> ProbeResult {
        verdict(&pair(), obs, peers, Duration::from_millis(500), "roce-route apply c.toml")
    }

    #[test]
    fn pairs_are_same_family_and_on_link_rails_only() {
        let rails = [
            rail("rail0", &["198.51.100.10/24", "2001:db8:1::10/64"]),
            rail("rail1", &["198.51.100.11/24"]),
            rail("r2", &["203.0.113.2/27"]),
        ];
        let peers = [ip("198.51.100.110"), ip("2001:db8:1::110"), ip("203.0.113.20"), ip("203.0.113.200")];
        let got: Vec<(String, String, String)> = pairs(&rails, &peers)
            .into_iter()
            .map(|p| (p.rail, p.source.to_string(), p.peer.to_string()))
            .collect();
        let want = [
            ("rail0", "198.51.100.10", "198.51.100.110"),
            ("rail0", "2001:db8:1::10", "2001:db8:1::110"),
            // Off-link for every rail: every rail of the family.
            ("rail0", "198.51.100.10", "203.0.113.200"),
            ("rail1", "198.51.100.11", "198.51.100.110"),
            ("rail1", "198.51.100.11", "203.0.113.200"),
            ("r2", "203.0.113.2", "203.0.113.20"),
            ("r2", "203.0.113.2", "203.0.113.200"),
        ];
        let want: Vec<(String, String, String)> =
            want.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn same_rail_keeps_the_pairs_of_the_peers_nic_of_the_rails_name_and_every_unknown_one() {
        let rails = [rail("ib0", &["198.51.100.10/24"]), rail("ib1", &["198.51.100.11/24"])];
        let mut peers = peers_json();
        // One more address: on no documented NIC; one on a NIC named as no rail here.
        peers.addresses.extend([ip("198.51.100.112"), ip("198.51.100.113")]);
        peers.rails.push(PeerRail {
            name: "eth9".into(),
            addresses: vec![ip("198.51.100.113")],
            mac: None,
            mtu: None,
            rdma: None,
        });
        let all = pairs(&rails, &peers.addresses);
        assert_eq!(all.len(), 8);
        let got: Vec<(String, String)> =
            same_rail(all, &peers, &rails).into_iter().map(|p| (p.rail, p.peer.to_string())).collect();
        let want = [
            ("ib0", "198.51.100.110"),
            ("ib0", "198.51.100.112"),
            ("ib0", "198.51.100.113"),
            ("ib1", "198.51.100.111"),
            ("ib1", "198.51.100.112"),
            ("ib1", "198.51.100.113"),
        ];
        assert_eq!(got, want.map(|(a, b)| (a.to_string(), b.to_string())));
    }

    #[test]
    fn a_healthy_pair_has_no_problem_and_the_median_rtt() {
        let r = judge(&healthy(), &Peers::default());
        assert!(r.problems.is_empty(), "{r:?}");
        assert_eq!(r.rtt_ms, Some(0.08));
        assert_eq!(r.path_mtu, Some(9000));
        assert_eq!(r.reply_interface.as_deref(), Some("rail1"));
        assert!(r.detail.contains("answered by 02:00:00:00:01:01 on rail1"), "{}", r.detail);
    }

    #[test]
    fn each_fault_is_named_with_its_kind() {
        let none = Peers::default();
        let mut o = healthy();
        o.arp_answers = vec![];
        o.replies = vec![];
        o.full_size_back = None;
        assert_eq!(judge(&o, &none).problems, [ARP_NONE], "no answer is arp_none alone, not also no_reply");

        let mut o = healthy();
        o.arp_answers = vec![M0.into(), M1.into()];
        let r = judge(&o, &none);
        assert_eq!(r.problems, [ARP_FLUX]);
        assert!(r.detail.contains("2 link-layer addresses"), "{}", r.detail);

        let mut o = healthy();
        o.replies = vec![Reply { interface: "rail1".into(), source_mac: Some(M0.into()) }];
        assert_eq!(judge(&o, &none).problems, [WRONG_SOURCE_MAC]);

        let mut o = healthy();
        o.replies = vec![Reply { interface: "rail0".into(), source_mac: Some(M1.into()) }];
        let r = judge(&o, &none);
        assert_eq!(r.problems, [WRONG_INTERFACE]);
        assert_eq!(r.fix_on, [PEER], "this host answers ARP right: the peer replies by another NIC");

        // IPv6: the echo reply comes back right (Linux sends it out of the
        // request's interface) but the routed error shows the real NIC.
        let mut o = healthy();
        o.routed = vec![Reply { interface: "rail1".into(), source_mac: Some(M0.into()) }];
        let r = judge(&o, &none);
        assert_eq!(r.problems, [WRONG_SOURCE_MAC]);
        assert_eq!(r.reply_source_mac.as_deref(), Some(M0));

        let mut o = healthy();
        o.replies = vec![];
        o.rtts = vec![];
        o.full_size_back = None;
        let r = judge(&o, &none);
        assert_eq!(r.problems, [NO_REPLY]);
        assert_eq!(r.rtt_ms, None);

        let mut o = healthy();
        o.full_size_back = Some(false);
        o.largest_back = Some(1500);
        let r = judge(&o, &none);
        assert_eq!(r.problems, [MTU]);
        assert_eq!(r.path_mtu, Some(1500));
        assert!(r.detail.contains("largest that did: 1500 bytes"), "{}", r.detail);

        let mut o = healthy();
        o.route_dev = Ok("rail0".into());
        let r = judge(&o, &none);
        assert_eq!(r.problems, [LOCAL_ROUTE]);
        assert!(r.fixes[0].contains("roce-route apply c.toml"), "{:?}", r.fixes);
    }

    /// With the peer's --self document the verdicts name the peer's NICs,
    /// and a single answer from the wrong NIC is flux too.
    #[test]
    fn a_reply_on_another_nic_is_this_hosts_fault_when_that_nic_answers_arp_for_every_address() {
        let wrong = Reply { interface: "rail0".into(), source_mac: Some(M1.into()) };
        for (ignore, announce, why) in [
            (0, 2, "arp_ignore=0 on rail0: it answers ARP for every address of this host"),
            (1, 0, "arp_announce=0 on rail0"),
            (1, 1, "arp_announce=1 on rail0"),
        ] {
            let mut o = healthy();
            o.replies = vec![wrong.clone()];
            o.own_arp[0] =
                OwnArp { rail: "rail0".into(), arp_ignore: Some(ignore), arp_announce: Some(announce) };
            let r = judge(&o, &Peers::default());
            assert_eq!(
                (r.problems.as_slice(), r.fix_on.as_slice()),
                ([WRONG_INTERFACE].as_slice(), [THIS_HOST].as_slice())
            );
            assert!(
                r.detail
                    .contains("the peer sent it to rail0's MAC, which this host gives out for 198.51.100.11"),
                "{}",
                r.detail
            );
            assert!(r.detail.contains(why), "{}", r.detail);
            assert_eq!(
                r.fixes,
                [
                    "run `roce-route apply c.toml` on this host: arp_ignore=1 and arp_announce=2 on every NIC, and it \
                  announces 198.51.100.11 on rail1 so the peer learns it again"
                ]
            );
        }
        // Only the NIC the reply came in on counts: rail1's own settings
        // do not make the peer send to rail0.
        let mut o = healthy();
        o.replies = vec![wrong.clone()];
        o.own_arp[1].arp_ignore = Some(0);
        assert_eq!(judge(&o, &Peers::default()).fix_on, [PEER]);
        // Unreadable settings are no evidence against this host.
        o.own_arp[0] = OwnArp { rail: "rail0".into(), arp_ignore: None, arp_announce: None };
        assert_eq!(judge(&o, &Peers::default()).fix_on, [PEER]);
        // IPv6 has no flux: a neighbour advertisement comes only from the
        // NIC that has the address.
        let v6 = Pair { rail: "rail1".into(), source: ip("2001:db8::11"), peer: ip("2001:db8::111") };
        let mut o = healthy();
        o.replies = vec![wrong];
        o.own_arp[0].arp_ignore = Some(0);
        let r = verdict(&v6, &o, &Peers::default(), Duration::from_millis(500), "roce-route apply c.toml");
        assert_eq!(r.fix_on, [PEER]);
    }

    #[test]
    fn behind_a_router_the_gateway_answers_and_is_named_when_it_fails() {
        let gw = ip("198.51.100.1");
        let routed = |o: &mut Observation| {
            o.gateway = Some(gw);
            o.arp_answers = vec![M0.into()];
            o.replies = vec![Reply { interface: "rail1".into(), source_mac: Some(M0.into()) }; 3];
        };
        // The peer's own NIC MAC (from --peers) is not expected: the
        // frames are the router's.
        let mut o = healthy();
        routed(&mut o);
        let r = judge(&o, &peers_json());
        assert!(r.problems.is_empty(), "{r:?}");
        assert_eq!(r.gateway, Some(gw));
        assert!(
            r.detail.contains("through the gateway 198.51.100.1 (answered by 02:00:00:00:01:00"),
            "{}",
            r.detail
        );

        let mut o = healthy();
        routed(&mut o);
        o.arp_answers = vec![];
        o.replies = vec![];
        let r = judge(&o, &peers_json());
        assert_eq!((r.problems.as_slice(), r.fix_on.as_slice()), ([ARP_NONE].as_slice(), [PATH].as_slice()));
        assert!(r.detail.starts_with("the gateway 198.51.100.1 (this host's next hop to 198.51.100.111 (peer ib1)) did not answer ARP on rail1"), "{}", r.detail);

        let mut o = healthy();
        routed(&mut o);
        o.replies = vec![];
        let r = judge(&o, &peers_json());
        assert_eq!(r.problems, [NO_REPLY]);
        assert!(
            r.detail.contains("the gateway 198.51.100.1 answered ARP on rail1 but no echo reply"),
            "{}",
            r.detail
        );

        let mut o = healthy();
        routed(&mut o);
        o.replies[0].source_mac = Some(M1.into());
        let r = judge(&o, &peers_json());
        assert_eq!(
            (r.problems.as_slice(), r.fix_on.as_slice()),
            ([WRONG_SOURCE_MAC].as_slice(), [PATH].as_slice())
        );
        assert!(r.detail.contains("another router carries the way back"), "{}", r.detail);

        let mut o = healthy();
        routed(&mut o);
        o.arp_answers = vec![M0.into(), M1.into()];
        let r = judge(&o, &peers_json());
        assert_eq!(r.problems, [ARP_FLUX]);
        assert!(r.detail.contains("for the gateway 198.51.100.1"), "{}", r.detail);
    }

    #[test]
    fn each_problem_says_where_its_fix_is() {
        let mut o = healthy();
        o.full_size_back = Some(false);
        o.largest_back = Some(1500);
        o.route_dev = Ok("rail0".into());
        let r = judge(&o, &Peers::default());
        assert_eq!(r.problems, [MTU, LOCAL_ROUTE]);
        assert_eq!(r.fix_on, [PATH, THIS_HOST]);
        let mut o = healthy();
        o.arp_answers = vec![M0.into(), M1.into()];
        assert_eq!(judge(&o, &Peers::default()).fix_on, [PEER]);
    }

    #[test]
    fn the_peers_nics_are_named() {
        let peers = peers_json();
        let mut o = healthy();
        o.arp_answers = vec![M0.into()];
        o.replies = vec![Reply { interface: "rail1".into(), source_mac: Some(M0.into()) }];
        let r = judge(&o, &peers);
        assert_eq!(r.peer_rail.as_deref(), Some("ib1"));
        assert_eq!(r.problems, [ARP_FLUX, WRONG_SOURCE_MAC]);
        assert!(
            r.detail.starts_with("198.51.100.111 (peer ib1) answered by 02:00:00:00:01:00 = peer ib0"),
            "{}",
            r.detail
        );
        assert!(judge(&healthy(), &peers).problems.is_empty());
    }

    #[test]
    fn roce_mtu_mapping_and_the_active_mtu_check() {
        assert_eq!(rdma_mtu_carried(9000), Some(4096));
        assert_eq!(rdma_mtu_carried(4200), Some(4096));
        assert_eq!(rdma_mtu_carried(4191), Some(2048));
        assert_eq!(rdma_mtu_carried(1500), Some(1024));
        assert_eq!(rdma_mtu_carried(300), None);
        let mut o = healthy();
        o.rail_mtu = 1500;
        o.rdma = Some(RdmaMtu { port: "mlx5_1:1".into(), roce: true, active_mtu: Some(4096) });
        let r = judge(&o, &Peers::default());
        assert_eq!(r.problems, [MTU]);
        assert_eq!(r.rdma_mtu_carried, Some(1024));
        o.rail_mtu = 9000;
        assert!(judge(&o, &Peers::default()).problems.is_empty());
    }

    #[test]
    fn the_matrix_has_a_cell_per_pair_and_a_line_per_problem() {
        let mut bad = healthy();
        bad.arp_answers = vec![M0.into(), M1.into()];
        let ok = judge(&healthy(), &Peers::default());
        let mut other = ok.clone();
        other.rail = "rail0".into();
        let flux = judge(&bad, &Peers::default());
        let mut flux0 = flux.clone();
        flux0.rail = "rail0".into();
        flux0.peer = ip("198.51.100.110");
        let text = matrix(
            &["rail0".into(), "rail1".into()],
            &[ip("198.51.100.110"), ip("198.51.100.111"), ip("2001:db8:1::110")],
            &[flux0, other, ok],
            false,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["rail", "198.51.100.110", "198.51.100.111", "2001:db8:1::110"]
        );
        assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), ["rail0", "flux", "ok", "-"]);
        assert_eq!(lines[2].split_whitespace().collect::<Vec<_>>(), ["rail1", "-", "ok", "-"]);
        assert!(lines[4].starts_with("rail0 (198.51.100.11) -> 198.51.100.110: arp_flux:"), "{text}");
        assert!(lines[5].trim_start().starts_with("fix: on the peer"), "{text}");
        assert!(!text.contains(": ok:"), "the right pairs' measures are for -v: {text}");
    }

    /// A configured address missing from its rail (not_ready) takes its
    /// rail's pairs out, and its subnet stays the rail's: on a subnet per
    /// rail, the peers there are not handed to the other rails as if
    /// off-link (which would read arp_none or local_route there).
    #[test]
    fn a_missing_address_keeps_its_subnet_and_makes_no_pairs() {
        let mut r1 = rail("rail1", &[]);
        r1.missing = vec![prefix("198.51.100.42/27")];
        let rails = [rail("rail0", &["198.51.100.10/27"]), r1];
        let got = pairs(&rails, &[ip("198.51.100.50"), ip("198.51.100.20"), ip("203.0.113.9")]);
        let got: Vec<(&str, String)> = got.iter().map(|p| (p.rail.as_str(), p.peer.to_string())).collect();
        assert_eq!(
            got,
            [("rail0", "198.51.100.20".to_string()), ("rail0", "203.0.113.9".to_string())],
            "rail1's subnet peer .50: no pair at all; off-link 203.0.113.9: from the rails that have an address"
        );
    }

    /// A send that failed but was made up for (everything came back) is
    /// no problem.
    #[test]
    fn a_send_error_made_up_for_is_no_problem() {
        let mut o = healthy();
        o.send_error = Some("cannot send the neighbour request: No buffer space available".into());
        let r = judge(&o, &Peers::default());
        assert!(r.right(), "{r:?}");
    }

    /// Issue 24 item 5: a second device answering for the address is a
    /// duplicate address, not flux: always on IPv6 (no flux there), and on
    /// IPv4 when an answer is no NIC of the hosts --peers describes.
    /// Without --peers documents, IPv4's two answers stay flux, with a hint.
    #[test]
    fn another_device_answering_is_a_duplicate_address_not_flux() {
        const STRANGER: &str = "02:00:00:00:09:09";
        let none = Peers::default();
        let v6 = Pair { rail: "rail1".into(), source: ip("2001:db8:1::11"), peer: ip("2001:db8:1::111") };
        let mut o = healthy();
        o.arp_answers = vec![M1.into(), STRANGER.into()];
        o.routed = vec![Reply { interface: "rail1".into(), source_mac: Some(M1.into()) }];
        let r = verdict(&v6, &o, &none, Duration::from_millis(500), "a");
        assert_eq!(r.problems, [DUPLICATE_ADDRESS], "{r:?}");
        assert_eq!(r.fix_on, [PATH]);
        assert!(r.detail.contains("IPv6 has no ARP flux"), "{}", r.detail);

        let r = judge(&o, &peers_json());
        assert_eq!(r.problems, [DUPLICATE_ADDRESS], "{r:?}");
        assert!(
            r.detail.contains(&format!("{STRANGER} is no NIC of the hosts --peers describes")),
            "{}",
            r.detail
        );
        assert!(r.fixes[0].contains(&format!("the device at {STRANGER}")), "{:?}", r.fixes);
        o.arp_answers = vec![STRANGER.into()];
        assert_eq!(judge(&o, &peers_json()).problems[0], DUPLICATE_ADDRESS, "a stranger alone too");

        o.arp_answers = vec![M0.into(), M1.into()];
        assert_eq!(judge(&o, &peers_json()).problems[0], ARP_FLUX, "both the peer's own NICs: flux");
        // Documents for other hosts, none for this peer: its NIC is
        // unknown, not foreign.
        let mut others = peers_json();
        others.rails.retain(|r| r.name == "ib0");
        o.arp_answers = vec![STRANGER.into()];
        assert!(
            !judge(&o, &others).problems.contains(&DUPLICATE_ADDRESS),
            "an undocumented peer's one answer is no duplicate"
        );
        o.arp_answers = vec![M1.into(), STRANGER.into()];
        let r = judge(&o, &none);
        assert_eq!(r.problems[0], ARP_FLUX, "nothing known of the peer: flux, with the hint");
        assert!(r.detail.contains("or another device has the address"), "{}", r.detail);
        let text = matrix(&["rail1".into()], &[r.peer], &[judge(&o, &peers_json())], false);
        assert!(text.lines().nth(1).unwrap().ends_with("dup"), "{text}");
    }

    /// Issue 24: a pair whose evidence is missing is not verified (its own
    /// state, exit 6), never `ok`: IPv6 without the routed TCP reset,
    /// IPoIB without source MACs; and frames the probe's own
    /// sockets dropped turn an absence (no answer, no reply, a lost
    /// full-size echo) into a reason, not a problem.
    #[test]
    fn missing_evidence_is_not_verified_never_ok() {
        let none = Peers::default();
        let v6 = Pair { rail: "rail1".into(), source: ip("2001:db8:1::11"), peer: ip("2001:db8:1::111") };
        let judge6 = |o: &Observation| verdict(&v6, o, &none, Duration::from_millis(500), "a");
        let r = judge6(&healthy());
        assert!(r.problems.is_empty(), "{r:?}");
        assert!(r.unverified() && !r.right(), "{r:?}");
        assert!(r.not_verified[0].starts_with("no TCP reset came back from 2001:db8:1::111"), "{r:?}");
        let mut o = healthy();
        o.routed = vec![Reply { interface: "rail1".into(), source_mac: Some(M1.into()) }];
        assert!(judge6(&o).right(), "with the routed reply every part is checked");
        // A misrouted reply is a problem, and the routed part is then moot.
        let mut o = healthy();
        o.replies[0].interface = "rail0".into();
        let r = judge6(&o);
        assert_eq!((r.problems.clone(), r.not_verified.len()), (vec![WRONG_INTERFACE], 0), "{r:?}");

        // IPoIB: no source MAC on any reply.
        let mut o = healthy();
        for r in &mut o.replies {
            r.source_mac = None;
        }
        let r = judge(&o, &none);
        assert!(r.unverified(), "{r:?}");
        assert!(r.not_verified[0].contains("(IPoIB)"), "{r:?}");
        assert!(judge(&healthy(), &none).right(), "Ethernet IPv4 with its MACs is verified");

        // Drops: arp_none and no_reply and the path MTU become reasons;
        // what was seen (flux, a wrong MAC) stays a problem.
        for (what, change) in [
            ("arp_none", (|o: &mut Observation| o.arp_answers.clear()) as fn(&mut Observation)),
            ("no_reply", |o: &mut Observation| o.replies.clear()),
            ("mtu", |o: &mut Observation| o.full_size_back = Some(false)),
        ] {
            let mut o = healthy();
            change(&mut o);
            assert_eq!(judge(&o, &none).problems, [what], "without drops, {what} is a problem");
            o.drops = 3;
            let r = judge(&o, &none);
            assert!(r.problems.is_empty() && r.unverified(), "{what}: {r:?}");
            assert!(
                r.not_verified[0].contains(&format!(
                    "dropped 3 frames during the run, so what did not come back ({what})"
                )),
                "{r:?}"
            );
        }
        let mut o = healthy();
        o.drops = 3;
        o.arp_answers = vec![M0.into(), M1.into()];
        assert_eq!(judge(&o, &none).problems, [ARP_FLUX], "flux was seen: drops do not excuse it");
        let mut o = healthy();
        o.drops = 3;
        assert!(judge(&o, &none).right(), "drops do not touch a pair that has all its evidence");

        // A frame that could not be sent: this host's send_failed, not
        // the absence it leaves (arp_none, mtu).
        for (what, change) in [
            ("arp_none", (|o: &mut Observation| o.arp_answers.clear()) as fn(&mut Observation)),
            ("mtu", |o: &mut Observation| o.full_size_back = Some(false)),
        ] {
            let mut o = healthy();
            change(&mut o);
            o.send_error = Some("cannot send: No buffer space available".into());
            let r = judge(&o, &none);
            assert_eq!((r.problems.clone(), r.fix_on.clone()), (vec![SEND_FAILED], vec![THIS_HOST]), "{r:?}");
            assert!(
                r.detail.contains(&format!("could not send the pair's frames on rail1 (cannot send: No buffer space available) (not {what})")),
                "{}",
                r.detail
            );
        }

        // The matrix: its own cell and a line with the reason.
        let un = judge6(&healthy());
        let text = matrix(&["rail1".into()], &[un.peer], std::slice::from_ref(&un), false);
        assert_eq!(
            text.lines().nth(1).unwrap().split_whitespace().collect::<Vec<_>>(),
            ["rail1", "unverified"]
        );
        assert!(
            text.contains("rail1 (2001:db8:1::11) -> 2001:db8:1::111: not verified: no TCP reset came back"),
            "{text}"
        );
    }

    /// Issue 27: with -v, each right pair's line shows its RTT and path MTU
    /// (the matrix alone says only `ok`).
    #[test]
    fn verbose_shows_each_right_pair_s_rtt_and_path_mtu() {
        let ok = judge(&healthy(), &Peers::default());
        let text = matrix(&["rail1".into()], &[ok.peer], std::slice::from_ref(&ok), true);
        let line = text.lines().find(|l| l.contains(": ok: ")).unwrap_or_else(|| panic!("{text}"));
        assert!(line.starts_with(&format!("rail1 ({}) -> {}: ok: ", ok.source, ok.peer)), "{line}");
        assert!(line.contains("rtt 0.08 ms") && line.contains("path MTU 9000"), "{line}");
    }
}
