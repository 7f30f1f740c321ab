//! Telling the peers: after apply, watch's heals and `announce`, each
//! changed rail's addresses are announced from its own interface
//! (gratuitous ARP, unsolicited NA; the frames are `crate::announce`'s),
//! and what was sent is said in one line or one line per rail.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde::Serialize;

use super::Ctx;
use crate::netlink::Netlink;
use crate::plan::Desired;

/// One address announced to the peers (`announced` in the JSON document).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Announced {
    pub interface: String,
    pub address: IpAddr,
}

/// What `tell_peers` did: the addresses announced at least once, and those
/// it could not announce at all, with why.
#[derive(Debug, Default)]
pub struct Told {
    pub announced: Vec<Announced>,
    pub failed: Vec<(Announced, String)>,
}

/// Announces every address of the interfaces `only` names (every planned
/// one when None) to the peers, `rounds` times, `announce::INTERVAL` apart,
/// each from its own interface (see `announce`). Never fails: what it
/// skips or cannot send is a warning. A stop request ends it between rounds.
pub async fn tell_peers(
    ctx: &Ctx,
    nl: &Netlink,
    desired: &Desired,
    only: Option<&BTreeSet<String>>,
    rounds: u32,
) -> Told {
    // Read now, not at planning time: DAD may have ended (or failed) since.
    // Those of the interfaces announced from only (`announce::select`
    // looks at no other): on a node whose CNI gives each pod veth an
    // address, every address named was a system call per veth.
    let names: Vec<&str> = desired
        .interfaces
        .iter()
        .map(|i| i.name.as_str())
        .filter(|n| only.is_none_or(|o| o.contains(*n)))
        .collect();
    let addrs = match nl.addresses_on(&names).await {
        Ok(a) => a,
        Err(e) => {
            ctx.warn(format!("nothing was announced to the peers: cannot read the addresses: {e}"));
            return Told::default();
        }
    };
    let broadcast = |index| nl.broadcast(index).map(<[u8]>::to_vec);
    let selection = crate::announce::select(desired, only, nl.links(), broadcast, &addrs);
    selection.skipped.into_iter().for_each(|w| ctx.warn(w));
    let routers = router_flags(ctx, &selection.targets);
    let mut sends: Vec<Send> = selection
        .targets
        .into_iter()
        .map(|t| {
            let router = routers.get(&t.interface).copied().unwrap_or(false);
            Send {
                out: crate::announce::outgoing(&t.medium, t.address, router),
                target: t,
                sent: 0,
                error: None,
            }
        })
        .collect();
    send_rounds(ctx, &mut sends, rounds).await;
    told(ctx, sends, rounds)
}

/// One address's announcement and how its sending went.
struct Send {
    target: crate::announce::Target,
    out: crate::announce::Outgoing,
    sent: u32,
    error: Option<String>,
}

/// The Router flag of each interface's IPv6 advertisements, read once.
fn router_flags(ctx: &Ctx, targets: &[crate::announce::Target]) -> BTreeMap<String, bool> {
    let mut routers: BTreeMap<String, bool> = BTreeMap::new();
    for t in targets.iter().filter(|t| t.address.is_ipv6()) {
        if !routers.contains_key(&t.interface) {
            let router = ipv6_forwarding(&t.interface).unwrap_or_else(|e| {
                ctx.warn(format!(
                    "cannot read whether {} forwards IPv6 ({e}): its neighbour advertisements go without the \
                     Router flag",
                    t.interface
                ));
                false
            });
            routers.insert(t.interface.clone(), router);
        }
    }
    routers
}

thread_local! {
    /// The packet sockets of this process, one per medium (true: Ethernet),
    /// opened at the first announcement and kept to the end: closing one
    /// waits for an RCU grace period (see `PacketSocket`), which after each
    /// of watch's heals would hold its event loop 8-16 ms. Opened in the
    /// namespace the process works in (entered before any announcement).
    static SOCKETS: std::cell::RefCell<BTreeMap<bool, crate::packet::PacketSocket>> =
        const { std::cell::RefCell::new(BTreeMap::new()) };
}

/// Sends every announcement `rounds` times, `announce::INTERVAL` apart,
/// each frame out of its own interface, from this process's packet socket
/// for its medium (`SOCKETS`); a stop request ends it between rounds.
async fn send_rounds(ctx: &Ctx, sends: &mut [Send], rounds: u32) {
    let sends_of = |kind: bool| sends.iter().filter(|p| p.out.link_header == kind).count();
    let frames: BTreeMap<bool, usize> = [true, false].into_iter().map(|k| (k, sends_of(k))).collect();
    for round in 0..rounds {
        if round > 0 {
            if ctx.stop.requested().is_some() {
                break;
            }
            tokio::time::sleep(crate::announce::INTERVAL).await;
        }
        for p in sends.iter_mut() {
            match send_one(p, frames[&p.out.link_header]) {
                Ok(()) => p.sent += 1,
                Err(e) => p.error = p.error.take().or(Some(e)),
            }
        }
    }
}

/// One frame of `p`, from the socket of its medium (opened if need be,
/// with room for a round of `frames` frames; a socket that cannot be
/// opened is tried again for the next frame).
fn send_one(p: &Send, frames: usize) -> Result<(), String> {
    use crate::packet::PacketSocket;
    let kind = p.out.link_header;
    SOCKETS.with(|sockets| {
        let mut sockets = sockets.borrow_mut();
        let socket = match sockets.entry(kind) {
            std::collections::btree_map::Entry::Occupied(s) => s.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(PacketSocket::open(kind).map_err(|e| socket_error(&e))?)
            }
        };
        socket.make_room(frames);
        socket.send(p.target.ifindex, &p.out.bytes, p.out.protocol, &p.out.dest).map_err(|e| e.to_string())
    })
}

/// What the rounds did: an address sent at least once is announced (short
/// of `rounds`, with a warning), one never sent failed.
fn told(ctx: &Ctx, sends: Vec<Send>, rounds: u32) -> Told {
    let mut told = Told::default();
    for p in sends {
        let what = Announced { interface: p.target.interface, address: p.target.address };
        match (p.sent, p.error) {
            (0, error) => {
                let error = error.unwrap_or_else(|| "stopped before the first announcement".into());
                ctx.warn(format!("cannot announce {} on {}: {error}", what.address, what.interface));
                told.failed.push((what, error));
            }
            (sent, Some(error)) => {
                ctx.warn(format!(
                    "{} on {}: only {sent} of {rounds} announcements sent: {error}",
                    what.address, what.interface
                ));
                told.announced.push(what);
            }
            (_, None) => told.announced.push(what),
        }
    }
    told
}

/// Whether `iface` forwards IPv6 (`/proc/sys/net/ipv6/conf/<iface>/forwarding`
/// of this namespace): the kernel's own unsolicited advertisements carry
/// the Router flag exactly then (`ndisc_send_unsol_na()` passes
/// `!!idev->cnf.forwarding`), and a peer sets or clears its entry's
/// router flag from it, so an announcement must not say otherwise.
fn ipv6_forwarding(iface: &str) -> std::io::Result<bool> {
    if let Some(problem) = crate::sysctl::ifname_problem(iface) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("refusing interface name {iface:?}: it {}", problem.why()),
        ));
    }
    let path = format!("/proc/sys/net/ipv6/conf/{iface}/forwarding");
    let text =
        std::fs::read_to_string(&path).map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))?;
    let value: i64 = text.trim().parse().map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{path}: not a number: {:?}", text.trim()),
        )
    })?;
    Ok(value != 0)
}

fn socket_error(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(nix::libc::EPERM) | Some(nix::libc::EACCES) => {
            format!("cannot open a packet socket: {e} (sending raw frames needs CAP_NET_RAW)")
        }
        _ => format!("cannot open a packet socket: {e}"),
    }
}

/// "announced 6 addresses to the peers, each from its own interface (2
/// times, 100 ms apart):" and one line per interface.
pub fn announced_lines(announced: &[Announced], rounds: u32) -> Vec<String> {
    let by_interface = by_interface(announced);
    let mut lines = vec![format!(
        "roce-route: announced {} to the peers, each from its own interface ({}):",
        crate::render::count(announced.len(), "address", "addresses"),
        how_often(rounds)
    )];
    lines.extend(by_interface.into_iter().map(|(i, addrs)| format!("  {i}: {}", addrs.join(" "))));
    lines
}

/// One line for them all: "announced 64 addresses on 32 rails to the
/// peers, each from its own interface (2 times, 100 ms apart)" (what
/// `announced_lines` lists, summed up for apply at many rails).
pub fn announced_summary(announced: &[Announced], rounds: u32) -> String {
    format!(
        "roce-route: announced {} on {} to the peers, each from its own interface ({})",
        crate::render::count(announced.len(), "address", "addresses"),
        crate::render::count(by_interface(announced).len(), "rail", "rails"),
        how_often(rounds)
    )
}

/// "once", or "2 times, 100 ms apart".
fn how_often(rounds: u32) -> String {
    match rounds {
        1 => "once".to_string(),
        n => format!("{n} times, {} ms apart", crate::announce::INTERVAL.as_millis()),
    }
}

/// The addresses of each interface, interfaces in the order first announced.
fn by_interface(announced: &[Announced]) -> Vec<(&str, Vec<String>)> {
    let mut by_interface: Vec<(&str, Vec<String>)> = Vec::new();
    for a in announced {
        match by_interface.iter_mut().find(|(i, _)| *i == a.interface) {
            Some((_, addrs)) => addrs.push(a.address.to_string()),
            None => by_interface.push((&a.interface, vec![a.address.to_string()])),
        }
    }
    by_interface
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announced(rails: usize) -> Vec<Announced> {
        (0..rails)
            .flat_map(|k| {
                let v4: IpAddr = format!("198.51.100.{}", 10 + k).parse().unwrap();
                let v6: IpAddr = format!("2001:db8:1::{:x}", 0x10 + k).parse().unwrap();
                [v4, v6].map(|address| Announced { interface: format!("rail{k}"), address })
            })
            .collect()
    }

    /// At 32 rails the summary is one line, the list a line per rail under
    /// its header; both count the same addresses.
    #[test]
    fn announcements_sum_up_in_one_line_and_list_per_rail() {
        let all = announced(32);
        assert_eq!(
            announced_summary(&all, 2),
            "roce-route: announced 64 addresses on 32 rails to the peers, each from its own interface (2 times, \
             100 ms apart)"
        );
        let lines = announced_lines(&all, 1);
        assert_eq!(lines.len(), 33);
        assert_eq!(
            lines[0],
            "roce-route: announced 64 addresses to the peers, each from its own interface (once):"
        );
        assert_eq!(lines[2], "  rail1: 198.51.100.11 2001:db8:1::11");
        assert_eq!(
            announced_summary(&announced(1)[..1], 1),
            "roce-route: announced 1 address on 1 rail to the peers, each from its own interface (once)"
        );
    }
}
