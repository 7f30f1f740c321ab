//! Pure: `probe --rdma`'s part of a pair. What the responder tells the
//! prober in the connection's private data (`Accepted`, `Refused`), the
//! pattern its buffer holds, what the prober saw (`RdmaSeen`), and the
//! RDMA verdict added to the pair's IP verdict: the problem, tied to the
//! IP-level cause when the pair has one, or why the RDMA layer was not
//! verified.

use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;

use crate::probe::verdict::{self, ProbeResult};

/// The problem kinds of the RDMA layer, as `--json` names them.
pub const RDMA_UNREACHABLE: &str = "rdma_unreachable";
pub const RDMA_REJECTED: &str = "rdma_rejected";
pub const RDMA_WRONG_DEVICE: &str = "rdma_wrong_device";
pub const RDMA_COMPLETION: &str = "rdma_completion";
pub const RDMA_MTU: &str = "rdma_mtu";
pub const RDMA_DATA: &str = "rdma_data";

/// The RDMA CM port (RDMA_PS_TCP space) the responder listens on.
pub const DEFAULT_PORT: u16 = 7472;

/// The bytes of the large READ: two packets of the largest RDMA MTU, so
/// that the peer's READ response is cut at its path MTU whatever it is.
pub const LARGE: u32 = 8192;
/// The tag written and read back, at the start of the responder's buffer;
/// the large READ reads the pattern after it.
pub const TAG: u32 = 16;
/// The responder's buffer: the tag's room, then the pattern.
pub const BUFFER: u32 = 64 + LARGE;
/// Where the pattern starts in the responder's buffer.
pub const PATTERN_AT: u32 = 64;

const MAGIC_ACCEPT: &[u8; 4] = b"RRA1";
const MAGIC_REFUSE: &[u8; 4] = b"RRR1";
/// A REP carries at most 196 bytes of private data, a REJ 148.
const REJ_ROOM: usize = 148;

/// The byte at `i` of the responder's pattern.
pub fn pattern_byte(i: u32) -> u8 {
    ((i.wrapping_mul(7).wrapping_add(3)) % 251) as u8
}

/// What the responder accepted the connection with: its buffer, and the
/// RDMA port the CM gave the connection next to the rail's own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Accepted {
    /// `rxb1:1`: the device and port the peer's CM took the connection on.
    pub port: String,
    /// `rxb1:1`: the RDMA port of the rail that has the address, as the
    /// responder reads it (None: it knows none).
    pub rail_port: Option<String>,
    #[serde(skip)]
    pub addr: u64,
    #[serde(skip)]
    pub rkey: u32,
    #[serde(skip)]
    pub len: u32,
}

impl Accepted {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(96);
        b.extend_from_slice(MAGIC_ACCEPT);
        b.extend_from_slice(&self.addr.to_be_bytes());
        b.extend_from_slice(&self.rkey.to_be_bytes());
        b.extend_from_slice(&self.len.to_be_bytes());
        push_str(&mut b, &self.port, 40);
        push_str(&mut b, self.rail_port.as_deref().unwrap_or(""), 40);
        b
    }

    pub fn decode(b: &[u8]) -> Option<Accepted> {
        let rest = b.strip_prefix(MAGIC_ACCEPT)?;
        if rest.len() < 16 + 80 {
            return None;
        }
        let port = take_str(&rest[16..56]);
        let rail_port = Some(take_str(&rest[56..96])).filter(|s| !s.is_empty());
        Some(Accepted {
            addr: u64::from_be_bytes(rest[0..8].try_into().ok()?),
            rkey: u32::from_be_bytes(rest[8..12].try_into().ok()?),
            len: u32::from_be_bytes(rest[12..16].try_into().ok()?),
            port,
            rail_port,
        })
    }
}

/// Why the responder refused a connection it got, in the REJ's private data.
pub fn encode_refusal(reason: &str) -> Vec<u8> {
    let mut b = MAGIC_REFUSE.to_vec();
    let mut text = reason.as_bytes();
    if text.len() > REJ_ROOM - 4 {
        let mut cut = REJ_ROOM - 4;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        text = &text[..cut];
    }
    b.extend_from_slice(text);
    b
}

pub fn decode_refusal(b: &[u8]) -> Option<String> {
    let text = b.strip_prefix(MAGIC_REFUSE)?;
    Some(String::from_utf8_lossy(text).trim_end_matches('\0').to_string())
}

fn push_str(b: &mut Vec<u8>, s: &str, room: usize) {
    let mut bytes = s.as_bytes().to_vec();
    bytes.truncate(room);
    bytes.resize(room, 0);
    b.extend_from_slice(&bytes);
}

fn take_str(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Where the RDMA part of a pair stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// rdma_resolve_addr: the source's device, the peer's MAC.
    Address,
    /// rdma_resolve_route.
    Route,
    /// rdma_connect: the CM's REQ to the peer and its REP.
    Connect,
    /// The RDMA WRITE of the tag.
    Write,
    /// The RDMA READ of the tag.
    Read,
    /// The RDMA READ of `LARGE` bytes.
    LargeRead,
}

impl Stage {
    fn words(self) -> &'static str {
        match self {
            Stage::Address => "address resolution",
            Stage::Route => "route resolution",
            Stage::Connect => "connection",
            Stage::Write => "RDMA WRITE",
            Stage::Read => "RDMA READ",
            Stage::LargeRead => "large RDMA READ",
        }
    }
}

/// How the RDMA part of a pair failed, if it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// An error event of the CM (ADDR_ERROR, ROUTE_ERROR, UNREACHABLE,
    /// CONNECT_ERROR) with its status (an errno, negative).
    Cm { stage: Stage, event: String, status: i32 },
    /// The peer's CM rejected the connection: `reason` is the IB CM reject
    /// reason; `said` what the peer's responder gave as its reason.
    Rejected { reason: i32, said: Option<String> },
    /// Nothing came within the limit at `stage` (rxe retries forever; a
    /// NIC gives up after its retries).
    Timeout { stage: Stage },
    /// A work completion with an error status (12: retry exceeded).
    Completion { stage: Stage, status: u32, name: String, vendor_err: u32 },
    /// What was read back is not what was written (or the pattern).
    Data { stage: Stage },
    /// A call on this host failed (no memory to register, a QP refused).
    Local { stage: Stage, error: String },
}

/// The IB CM reject reason for "no listener on this service ID": nobody
/// listens on the peer's address and port.
pub const REJ_INVALID_SERVICE_ID: i32 = 8;

/// What the prober saw of one pair at the RDMA layer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RdmaSeen {
    /// The rail's own RDMA port (`rxa1:1`), from sysfs.
    pub rail_port: Option<String>,
    /// The port the CM bound the connection to here.
    pub port: Option<String>,
    /// The source GID the CM chose, and its index in the port's table.
    pub gid: Option<String>,
    pub gid_index: Option<u32>,
    /// The path MTU the CM chose (bytes).
    pub path_mtu: Option<u32>,
    /// What the responder said when it accepted.
    pub peer: Option<Accepted>,
    /// The small READ's round trip.
    pub rtt: Option<Duration>,
    pub failure: Option<Failure>,
    /// The pair was not tried, and why (no RDMA port on the rail).
    pub skipped: Option<String>,
}

/// `probes[].rdma_probe` in the JSON document.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RdmaOutcome {
    /// `ok`, `failed` or `not_verified`.
    pub result: &'static str,
    /// Where it stopped (null: it did not, or it was not tried).
    pub stage: Option<Stage>,
    /// The rail's RDMA port and the one the CM bound here.
    pub rail_port: Option<String>,
    pub port: Option<String>,
    pub gid: Option<String>,
    pub gid_index: Option<u32>,
    pub path_mtu: Option<u32>,
    /// The peer's responder: the port it took the connection on, and its
    /// rail's own.
    pub peer_port: Option<String>,
    pub peer_rail_port: Option<String>,
    /// The CM event, reject reason or completion status where it failed.
    pub error: Option<String>,
    pub rtt_ms: Option<f64>,
    /// The IP-level problems of the pair that explain the failure.
    pub cause: Vec<&'static str>,
    pub detail: String,
}

/// The IP problems that make RDMA fail between the pair, most telling
/// first: the peer's MAC wrong (ARP flux, a duplicate), replies by another
/// NIC, unreachable, the MTU, this host's own route.
const CAUSES: [&str; 8] = [
    verdict::ARP_FLUX,
    verdict::DUPLICATE_ADDRESS,
    verdict::WRONG_INTERFACE,
    verdict::WRONG_SOURCE_MAC,
    verdict::LOCAL_ROUTE,
    verdict::ARP_NONE,
    verdict::NO_REPLY,
    verdict::MTU,
];

/// Adds the RDMA layer's verdict to `result` (the pair's IP verdict):
/// a problem with its cause and fix, or a reason it is not verified, and
/// `rdma_probe`. `listen`: the command that starts the responder on the
/// peer. `also_answered`: the other peer addresses the MAC that answered
/// for this one answered for in the same run (`shared_answers`).
pub fn judge(result: &mut ProbeResult, seen: &RdmaSeen, listen: &str, also_answered: &[IpAddr]) {
    let peer = result.peer;
    let here = seen.port.clone().or_else(|| seen.rail_port.clone()).unwrap_or_else(|| result.rail.clone());
    let cause: Vec<&'static str> = CAUSES.iter().copied().filter(|c| result.problems.contains(c)).collect();
    let mut out = RdmaOutcome {
        result: "ok",
        stage: None,
        rail_port: seen.rail_port.clone(),
        port: seen.port.clone(),
        gid: seen.gid.clone(),
        gid_index: seen.gid_index,
        path_mtu: seen.path_mtu,
        peer_port: seen.peer.as_ref().map(|p| p.port.clone()),
        peer_rail_port: seen.peer.as_ref().and_then(|p| p.rail_port.clone()),
        error: None,
        rtt_ms: seen.rtt.map(|d| (d.as_secs_f64() * 1e6).round() / 1e3),
        cause: Vec::new(),
        detail: String::new(),
    };
    if let Some(why) = &seen.skipped {
        out.result = "not_verified";
        out.detail = why.clone();
        result.not_verified.push(format!("RDMA: {why}"));
        result.rdma_probe = Some(out);
        return;
    }
    // The CM bound another device here: this host's source address
    // belongs to another RDMA port than the rail's.
    if let (Some(rail), Some(bound)) = (&seen.rail_port, &seen.port)
        && rail != bound
    {
        out.result = "failed";
        out.stage = Some(Stage::Address);
        out.detail = format!("the RDMA CM bound {} to {bound}, not to the rail's own {rail}", result.source);
        add(
            result,
            RDMA_WRONG_DEVICE,
            verdict::THIS_HOST,
            &out.detail.clone(),
            format!(
                "make {} the address of {}'s netdev only (`roce-route show` lists the GID table)",
                result.source, rail
            ),
        );
        result.rdma_probe = Some(out);
        return;
    }
    let Some(failure) = &seen.failure else {
        return finish_ok(result, seen, out);
    };
    let (kind, stage, error, what): (&'static str, Stage, String, String) = match failure {
        Failure::Rejected { reason, said: None } if *reason == REJ_INVALID_SERVICE_ID => {
            out.result = "not_verified";
            out.stage = Some(Stage::Connect);
            out.error = Some(format!("rejected, reason {reason} (no listener)"));
            out.detail =
                format!("no roce-route responder listens on {peer}: start `{listen}` on the peer first");
            result.not_verified.push(format!("RDMA: {}", out.detail));
            result.rdma_probe = Some(out);
            return;
        }
        Failure::Rejected { reason, said } => (
            RDMA_REJECTED,
            Stage::Connect,
            format!("rejected, reason {reason}"),
            match said {
                Some(s) => format!("the peer's responder refused the connection: {s}"),
                None => format!("the peer's CM rejected the connection (IB CM reject reason {reason})"),
            },
        ),
        Failure::Cm { stage, event, status } => (
            RDMA_UNREACHABLE,
            *stage,
            format!("{event}, status {status}"),
            format!("the {} failed: {event} ({})", stage.words(), errno_words(*status)),
        ),
        Failure::Timeout { stage } => (
            RDMA_UNREACHABLE,
            *stage,
            "timeout".to_string(),
            match stage {
                Stage::Address | Stage::Route | Stage::Connect => format!(
                    "the {} got no answer within the limit: the peer's CM never answered from its own NIC",
                    stage.words()
                ),
                _ => format!(
                    "the {} got no completion within the limit (the transport kept retrying; a hardware NIC \
                     reports error 12, retry exceeded)",
                    stage.words()
                ),
            },
        ),
        Failure::Completion { stage, status, name, vendor_err } => (
            RDMA_COMPLETION,
            *stage,
            format!("completion status {status} ({name}), vendor error {vendor_err:#x}"),
            format!("the {} completed with error {status}: {name}", stage.words()),
        ),
        Failure::Data { stage } => (
            RDMA_DATA,
            *stage,
            "data mismatch".to_string(),
            format!("the {} completed, but what came back is not what the peer holds", stage.words()),
        ),
        Failure::Local { stage, error } => {
            out.result = "not_verified";
            out.stage = Some(*stage);
            out.error = Some(error.clone());
            out.detail = format!("this host could not set up the {} on {here}: {error}", stage.words());
            result.not_verified.push(format!("RDMA: {}", out.detail));
            result.rdma_probe = Some(out);
            return;
        }
    };
    // The small READ worked and only the large one failed: the path does
    // not carry the RDMA MTU.
    let kind = if stage == Stage::LargeRead
        && matches!(failure, Failure::Timeout { .. } | Failure::Completion { .. })
    {
        RDMA_MTU
    } else {
        kind
    };
    let cause =
        if kind == RDMA_MTU { cause.into_iter().filter(|c| *c == verdict::MTU).collect() } else { cause };
    out.result = "failed";
    out.stage = Some(stage);
    out.error = Some(error);
    out.cause = cause.clone();
    let mtu_words = match (kind, seen.path_mtu) {
        (RDMA_MTU, Some(m)) => format!(
            "; the tag's 16 bytes went both ways, {LARGE} bytes in packets of the path MTU {m} did not: a link or the \
             peer's netdev does not carry that MTU"
        ),
        (RDMA_MTU, None) => format!("; the tag went both ways, {LARGE} bytes did not"),
        _ => String::new(),
    };
    let because = match cause.first() {
        Some(c) => format!(" (the IP-level {} above explains it)", cause_words(c)),
        None => String::new(),
    };
    out.detail = format!("RDMA from {here} to {peer}: {what}{mtu_words}{because}");
    let (on, fix) = match cause.first() {
        Some(c) => {
            let k = result.problems.iter().position(|p| p == c).unwrap_or(0);
            (
                result.fix_on.get(k).copied().unwrap_or(verdict::PEER),
                format!(
                    "RDMA follows once the {} is fixed: {}",
                    cause_words(c),
                    result.fixes.get(k).cloned().unwrap_or_default()
                ),
            )
        }
        None if kind == RDMA_MTU => (
            verdict::PATH,
            format!(
                "give every link and switch port of the path, and the peer's netdev, an MTU that carries RDMA MTU {} \
                 (RoCE: the netdev MTU at least the RDMA MTU + 96)",
                seen.path_mtu.map_or("the rail's".to_string(), |m| m.to_string())
            ),
        ),
        None if kind == RDMA_REJECTED => (
            verdict::PEER,
            "see the peer's reason above; its `roce-route check` names what the rail lacks".to_string(),
        ),
        // One answer, from a MAC that also answered for other addresses of
        // the peers: flux if those are other NICs, which only the peer's
        // own description tells.
        None if !also_answered.is_empty() && result.arp_answers.len() == 1 => (
            verdict::PEER,
            format!(
                "{} answered ARP for {peer} and also for {}: if those are other NICs of the peer, this is ARP flux \
                 and the RDMA goes to the wrong NIC: run `roce-route apply` on the peer (probe with --peers FILE, \
                 FILE from the peer's `roce-route probe --self --json`, to know which NIC has which MAC)",
                result.arp_answers[0],
                also_answered.iter().map(IpAddr::to_string).collect::<Vec<_>>().join(", ")
            ),
        ),
        None => (
            verdict::PEER,
            "the IP level is right: check the peer's RDMA port (`roce-route check` and `show` there), its \
             rdma_cm and the switch's lossless class (PFC/ECN) for RoCE"
                .to_string(),
        ),
    };
    let detail = out.detail.clone();
    add(result, kind, on, &detail, fix);
    result.rdma_probe = Some(out);
}

fn finish_ok(result: &mut ProbeResult, seen: &RdmaSeen, mut out: RdmaOutcome) {
    let peer = result.peer;
    let here = seen.port.clone().unwrap_or_default();
    // The responder's CM took the connection on another port than the
    // rail that has the address.
    if let Some(p) = &seen.peer
        && let Some(theirs) = &p.rail_port
        && *theirs != p.port
    {
        out.result = "failed";
        out.detail = format!(
            "RDMA works, but the peer's CM took {peer} on {}, not on its rail's own {theirs}",
            p.port
        );
        let detail = out.detail.clone();
        add(
            result,
            RDMA_WRONG_DEVICE,
            verdict::PEER,
            &detail,
            format!("on the peer, make {peer} the address of {theirs}'s netdev only"),
        );
        result.rdma_probe = Some(out);
        return;
    }
    out.detail = format!(
        "RDMA from {here} (GID index {}) to {peer}{}: connected, WRITE and READ of a tag and a READ of {LARGE} bytes \
         verified{}{}",
        seen.gid_index.map_or("?".to_string(), |i| i.to_string()),
        seen.peer.as_ref().map_or(String::new(), |p| format!(" ({})", p.port)),
        seen.path_mtu.map_or(String::new(), |m| format!(", path MTU {m}")),
        out.rtt_ms.map_or(String::new(), |r| format!(", RTT {r} ms")),
    );
    // Right at the RDMA layer while the IP level has a problem: the
    // problem stays, the detail says RDMA worked.
    result.detail = if result.detail.is_empty() {
        out.detail.clone()
    } else {
        format!("{}; {}", result.detail.trim_end_matches('.'), out.detail)
    };
    result.rdma_probe = Some(out);
}

fn add(result: &mut ProbeResult, kind: &'static str, on: &'static str, detail: &str, fix: String) {
    result.problems.push(kind);
    result.fix_on.push(on);
    result.fixes.push(fix);
    if result.detail.is_empty() {
        result.detail = detail.to_string();
    } else {
        result.detail = format!("{}; {detail}", result.detail.trim_end_matches('.'));
    }
}

fn cause_words(kind: &str) -> &'static str {
    match kind {
        verdict::ARP_FLUX => "ARP flux",
        verdict::DUPLICATE_ADDRESS => "duplicate address",
        verdict::WRONG_INTERFACE => "reply by the wrong interface",
        verdict::WRONG_SOURCE_MAC => "reply from the wrong MAC",
        verdict::LOCAL_ROUTE => "route of this host",
        verdict::ARP_NONE => "missing ARP answer",
        verdict::NO_REPLY => "missing echo reply",
        verdict::MTU => "path MTU",
        _ => "problem",
    }
}

/// A CM status (a negative errno) in words.
fn errno_words(status: i32) -> String {
    let e = nix::errno::Errno::from_raw(-status);
    if status < 0 && e != nix::errno::Errno::UnknownErrno {
        format!("{}: {}", e, e.desc())
    } else {
        format!("status {status}")
    }
}

/// For each pair, the other peer addresses that the MAC which answered
/// its ARP (one answer, the peer on the link) answered for too, in the
/// same run. A NIC with several addresses does that; so does ARP flux.
pub fn shared_answers(results: &[ProbeResult]) -> Vec<Vec<IpAddr>> {
    let single = |r: &ProbeResult| match (r.gateway, r.arp_answers.as_slice()) {
        (None, [mac]) => Some(mac.to_ascii_lowercase()),
        _ => None,
    };
    let macs: Vec<Option<String>> = results.iter().map(single).collect();
    results
        .iter()
        .zip(&macs)
        .map(|(r, mac)| {
            let Some(mac) = mac else { return Vec::new() };
            let mut others: Vec<IpAddr> = results
                .iter()
                .filter(|o| o.peer != r.peer && o.gateway.is_none())
                .filter(|o| o.arp_answers.iter().any(|m| m.eq_ignore_ascii_case(mac)))
                .map(|o| o.peer)
                .collect();
            others.sort();
            others.dedup();
            others
        })
        .collect()
}

/// The short word for an RDMA problem in a matrix cell.
pub fn short(kind: &str) -> Option<&'static str> {
    Some(match kind {
        RDMA_UNREACHABLE => "rdma-unreach",
        RDMA_REJECTED => "rdma-rej",
        RDMA_WRONG_DEVICE => "rdma-dev",
        RDMA_COMPLETION => "rdma-wc",
        RDMA_MTU => "rdma-mtu",
        RDMA_DATA => "rdma-data",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(problems: &[(&'static str, &'static str, &str)]) -> ProbeResult {
        ProbeResult {
            rail: "rail1".into(),
            source: "198.51.100.11".parse().unwrap(),
            peer: "198.51.100.21".parse().unwrap(),
            peer_rail: None,
            gateway: None,
            problems: problems.iter().map(|p| p.0).collect(),
            fix_on: problems.iter().map(|p| p.1).collect(),
            arp_answers: Vec::new(),
            reply_interface: None,
            reply_source_mac: None,
            rtt_ms: None,
            rail_mtu: 1500,
            path_mtu: Some(1500),
            rdma_mtu_carried: Some(1024),
            rdma: None,
            detail: if problems.is_empty() {
                "answered.".into()
            } else {
                "the peer's rail0 answered ARP".into()
            },
            fixes: problems.iter().map(|p| p.2.to_string()).collect(),
            not_verified: Vec::new(),
            rdma_probe: None,
        }
    }

    fn seen(failure: Option<Failure>) -> RdmaSeen {
        RdmaSeen {
            rail_port: Some("rxa1:1".into()),
            port: Some("rxa1:1".into()),
            gid: Some("::ffff:198.51.100.11".into()),
            gid_index: Some(1),
            path_mtu: Some(1024),
            peer: Some(Accepted {
                port: "rxb1:1".into(),
                rail_port: Some("rxb1:1".into()),
                addr: 1,
                rkey: 2,
                len: 3,
            }),
            rtt: Some(Duration::from_micros(250)),
            failure,
            skipped: None,
        }
    }

    const LISTEN: &str = "roce-route probe --listen";

    #[test]
    fn accepted_and_refusal_go_through_private_data_intact() {
        let a = Accepted {
            port: "mlx5_3:1".into(),
            rail_port: Some("mlx5_3:1".into()),
            addr: 0x7f00_dead_beef,
            rkey: 0x1234,
            len: BUFFER,
        };
        let b = a.encode();
        assert!(b.len() <= 196, "an REP carries 196 bytes of private data");
        assert_eq!(Accepted::decode(&b), Some(a));
        let none = Accepted { rail_port: None, ..Accepted::decode(&b).unwrap() };
        assert_eq!(Accepted::decode(&none.encode()).unwrap().rail_port, None);
        assert_eq!(Accepted::decode(b"RRA1short"), None);
        assert_eq!(Accepted::decode(&encode_refusal("x")), None, "a refusal is not an accept");

        let long = "é".repeat(200);
        let r = encode_refusal(&long);
        assert!(r.len() <= REJ_ROOM, "an REJ carries 148 bytes");
        let back = decode_refusal(&r).unwrap();
        assert!(long.starts_with(&back) && !back.is_empty(), "cut at a character boundary");
        assert_eq!(decode_refusal(b"RRA1"), None);
    }

    #[test]
    fn a_verified_pair_stays_right_and_says_what_was_checked() {
        let mut r = pair(&[]);
        judge(&mut r, &seen(None), LISTEN, &[]);
        assert!(r.right(), "{r:?}");
        let o = r.rdma_probe.as_ref().unwrap();
        assert_eq!((o.result, o.rtt_ms, o.gid_index), ("ok", Some(0.25), Some(1)));
        assert_eq!(o.peer_port.as_deref(), Some("rxb1:1"));
        assert!(
            r.detail.starts_with("answered; RDMA from rxa1:1 (GID index 1) to 198.51.100.21 (rxb1:1)"),
            "{}",
            r.detail
        );
        assert!(r.detail.contains("path MTU 1024"), "{}", r.detail);
    }

    #[test]
    fn a_failure_behind_arp_flux_names_it_as_the_cause_and_its_fix() {
        let mut r = pair(&[(verdict::ARP_FLUX, verdict::PEER, "set arp_ignore=1 on the peer")]);
        judge(&mut r, &seen(Some(Failure::Timeout { stage: Stage::Connect })), LISTEN, &[]);
        assert_eq!(r.problems, [verdict::ARP_FLUX, RDMA_UNREACHABLE]);
        assert_eq!(r.fix_on, [verdict::PEER, verdict::PEER]);
        assert!(
            r.fixes[1].starts_with("RDMA follows once the ARP flux is fixed: set arp_ignore=1"),
            "{}",
            r.fixes[1]
        );
        let o = r.rdma_probe.as_ref().unwrap();
        assert_eq!(
            (o.result, o.stage, o.cause.clone()),
            ("failed", Some(Stage::Connect), vec![verdict::ARP_FLUX])
        );
        assert!(o.detail.contains("(the IP-level ARP flux above explains it)"), "{}", o.detail);
        assert_eq!(short(RDMA_UNREACHABLE), Some("rdma-unreach"));
    }

    #[test]
    fn a_failure_with_the_ip_level_right_points_at_the_rdma_side() {
        let mut r = pair(&[]);
        let wc = Failure::Completion {
            stage: Stage::Write,
            status: 12,
            name: "transport retry counter exceeded".into(),
            vendor_err: 0x81,
        };
        judge(&mut r, &seen(Some(wc)), LISTEN, &[]);
        assert_eq!(r.problems, [RDMA_COMPLETION]);
        assert!(
            r.detail.contains("completed with error 12: transport retry counter exceeded"),
            "{}",
            r.detail
        );
        assert!(r.fixes[0].contains("the IP level is right"), "{}", r.fixes[0]);
        assert_eq!(
            r.rdma_probe.unwrap().error.unwrap(),
            "completion status 12 (transport retry counter exceeded), vendor error 0x81"
        );
    }

    #[test]
    fn only_the_large_read_failing_is_the_mtu_and_only_the_mtu_is_its_cause() {
        let mut r = pair(&[(verdict::ARP_FLUX, verdict::PEER, "f"), (verdict::MTU, verdict::PATH, "g")]);
        judge(&mut r, &seen(Some(Failure::Timeout { stage: Stage::LargeRead })), LISTEN, &[]);
        assert_eq!(r.problems.last(), Some(&RDMA_MTU));
        assert_eq!(r.rdma_probe.as_ref().unwrap().cause, [verdict::MTU]);
        let mut r = pair(&[]);
        judge(&mut r, &seen(Some(Failure::Timeout { stage: Stage::LargeRead })), LISTEN, &[]);
        assert_eq!((r.problems[0], r.fix_on[0]), (RDMA_MTU, verdict::PATH));
        assert!(r.detail.contains("packets of the path MTU 1024 did not"), "{}", r.detail);
        let mut r = pair(&[]);
        judge(&mut r, &seen(Some(Failure::Timeout { stage: Stage::Read })), LISTEN, &[]);
        assert_eq!(r.problems, [RDMA_UNREACHABLE], "the small READ failing is not the MTU");
    }

    #[test]
    fn what_could_not_be_tried_is_not_verified_never_ok_nor_a_fault() {
        let no_listener = Failure::Rejected { reason: REJ_INVALID_SERVICE_ID, said: None };
        let local = Failure::Local { stage: Stage::Address, error: "cannot load librdmacm.so.1".into() };
        for (f, words) in
            [(no_listener, "start `roce-route probe --listen` on the peer"), (local, "cannot load librdmacm")]
        {
            let mut r = pair(&[]);
            judge(&mut r, &seen(Some(f)), LISTEN, &[]);
            assert!(r.problems.is_empty() && r.unverified(), "{r:?}");
            assert!(r.not_verified[0].contains(words), "{:?}", r.not_verified);
            assert_eq!(r.rdma_probe.unwrap().result, "not_verified");
        }
        let mut r = pair(&[]);
        judge(&mut r, &RdmaSeen { skipped: Some("no RDMA port".into()), ..RdmaSeen::default() }, LISTEN, &[]);
        assert!(r.unverified() && r.not_verified[0] == "RDMA: no RDMA port");
    }

    #[test]
    fn a_refusal_carries_the_peers_reason() {
        let mut r = pair(&[]);
        let f = Failure::Rejected { reason: 28, said: Some("path MTU 4096 above rxb2:1's 1024".into()) };
        judge(&mut r, &seen(Some(f)), LISTEN, &[]);
        assert_eq!((r.problems[0], r.fix_on[0]), (RDMA_REJECTED, verdict::PEER));
        assert!(
            r.detail.contains("the peer's responder refused the connection: path MTU 4096 above"),
            "{}",
            r.detail
        );
    }

    #[test]
    fn the_wrong_device_is_named_on_the_side_that_chose_it() {
        let mut r = pair(&[]);
        judge(&mut r, &RdmaSeen { port: Some("rxa0:1".into()), ..seen(None) }, LISTEN, &[]);
        assert_eq!((r.problems[0], r.fix_on[0]), (RDMA_WRONG_DEVICE, verdict::THIS_HOST));
        assert!(
            r.detail.contains("bound 198.51.100.11 to rxa0:1, not to the rail's own rxa1:1"),
            "{}",
            r.detail
        );

        let mut r = pair(&[]);
        let peer =
            Accepted { port: "rxb0:1".into(), rail_port: Some("rxb1:1".into()), addr: 0, rkey: 0, len: 0 };
        judge(&mut r, &RdmaSeen { peer: Some(peer), ..seen(None) }, LISTEN, &[]);
        assert_eq!((r.problems[0], r.fix_on[0]), (RDMA_WRONG_DEVICE, verdict::PEER));
    }

    #[test]
    fn one_mac_answering_for_several_peer_addresses_is_named_when_rdma_fails() {
        let mut a = pair(&[]);
        a.arp_answers = vec!["02:00:00:00:00:b0".into()];
        let mut b = a.clone();
        b.peer = "198.51.100.20".parse().unwrap();
        b.arp_answers = vec!["02:00:00:00:00:B0".into()];
        let mut c = a.clone();
        c.peer = "198.51.100.22".parse().unwrap();
        c.arp_answers = vec!["02:00:00:00:00:b2".into()];
        let mut routed = a.clone();
        routed.peer = "203.0.113.9".parse().unwrap();
        routed.gateway = Some("198.51.100.1".parse().unwrap());
        let shared = shared_answers(&[a.clone(), b, c, routed]);
        assert_eq!(shared[0], ["198.51.100.20".parse::<IpAddr>().unwrap()]);
        assert!(shared[2].is_empty() && shared[3].is_empty(), "{shared:?}");

        judge(&mut a, &seen(Some(Failure::Timeout { stage: Stage::Connect })), LISTEN, &shared[0]);
        assert_eq!((a.problems.clone(), a.fix_on.clone()), (vec![RDMA_UNREACHABLE], vec![verdict::PEER]));
        assert!(
            a.fixes[0]
                .starts_with("02:00:00:00:00:b0 answered ARP for 198.51.100.21 and also for 198.51.100.20"),
            "{}",
            a.fixes[0]
        );
        assert!(a.rdma_probe.unwrap().cause.is_empty(), "suspected, not seen: no cause");
    }
}
