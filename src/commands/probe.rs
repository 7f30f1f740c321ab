//! `roce-route probe [CONFIG...] (--peer ADDR[,ADDR...]... | --peers FILE | --self)`:
//! from every rail of CONFIG (or of the latest apply) to every peer
//! address, on the wire: who answers ARP, where the echo reply comes in
//! and from which link-layer address, the path MTU, this host's own route
//! and the RTT; a verdict per pair (see `crate::probe`). Changes nothing;
//! needs CAP_NET_RAW (except `--self`, which only describes this host's
//! rails for the peer's `--peers`).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;

use super::{Ctx, Done, connect_for};
use crate::cli::ProbeArgs;
use crate::config::Config;
use crate::error::{Error, exit};
use crate::model::{HwAddr, LinkType, Prefix};
use crate::netlink::Netlink;
use crate::probe::io::{self, Job, RailIo};
use crate::probe::peers::{self, Peers, SelfDoc, SelfRail};
use crate::probe::verdict::{self, LocalRail, Observation, OwnArp, ProbeResult, RdmaMtu, Reply};
use crate::rdma_read;
use crate::tell;

/// The fields of `probe --json`.
#[derive(Debug, Serialize)]
pub struct ProbeReport {
    pub rails: Vec<String>,
    pub peers: Vec<std::net::IpAddr>,
    /// Peer addresses not probed: this host's own.
    pub skipped: Vec<Skipped>,
    /// This host's configured addresses that are not on their rails: their
    /// pairs are not probed (the rail is not ready).
    pub not_ready: Vec<NotReady>,
    pub probes: Vec<ProbeResult>,
    /// Frames sent by the probe (ARP/NS and echoes), all pairs together.
    pub frames_sent: u32,
    pub elapsed_ms: f64,
}

/// A configured address that is not on its rail now.
#[derive(Debug, Serialize)]
pub struct NotReady {
    pub rail: String,
    pub address: std::net::IpAddr,
    pub reason: String,
}

/// A peer address that was not probed, and why.
#[derive(Debug, Serialize)]
pub struct Skipped {
    pub peer: std::net::IpAddr,
    pub reason: String,
}

pub async fn run(ctx: &Ctx, args: &ProbeArgs, cfg: Option<Config>) -> Result<Done, Error> {
    let timeout = checked_timeout(args)?;
    let mut peers = read_peers(args)?;
    let cfg = match cfg {
        Some(cfg) => cfg,
        None => super::latest_config(ctx, "probe", &["probe", "/etc/roce-route/", "--peer", "ADDRESS"])?,
    };
    // The config's links only, as apply reads them (see `connect_for`);
    // every address, for this host's own among the peers, unless there are
    // no peers (`--self`, `--listen`): then the rails' alone.
    let nl = connect_for(&cfg, &args.sysfs).await?;
    let live = if args.self_ || args.listen {
        let names: Vec<&str> = cfg.rail_names().collect();
        nl.addresses_on(&names).await
    } else {
        nl.addresses().await
    };
    let live = live.context("cannot read the interface addresses")?;
    let rails = local_rails(ctx, args, &cfg, &nl, &live).await?;
    if args.self_ {
        return Ok(describe_self(ctx, &rails));
    }
    if args.listen {
        return super::probe_rdma::listen(ctx, args, &rails);
    }
    if args.rdma {
        super::probe_rdma::checked_limit(args)?;
    }

    // A fleet shares one --peers file: this host's own addresses in it
    // are not peers.
    let skipped = skip_own(&mut peers, &live);
    if ctx.chatty() {
        for s in &skipped {
            tell!("roce-route probe: {} skipped: {}", s.peer, s.reason);
        }
    }
    let not_ready: Vec<NotReady> = rails
        .iter()
        .flat_map(|r| {
            r.missing.iter().map(|a| NotReady {
                rail: r.local.name.clone(),
                address: *a,
                reason: format!(
                    "{a} is in the config but not on {}: its pairs are not probed (`roce-route check` says \
                     what the rail lacks)",
                    r.local.name
                ),
            })
        })
        .collect();
    not_ready.iter().for_each(|n| ctx.warn(n.reason.clone()));
    let local: Vec<LocalRail> = rails.iter().map(|r| r.local.clone()).collect();
    let mut pairs = verdict::pairs(&local, &peers.addresses);
    if args.same_rail {
        pairs = verdict::same_rail(pairs, &peers, &local);
    }
    let left = Left { skipped, not_ready };
    if pairs.is_empty()
        && (!left.not_ready.is_empty() || (!left.skipped.is_empty() && peers.addresses.is_empty()))
    {
        let names = local.iter().map(|l| l.name.clone()).collect();
        return Ok(report(ctx, names, &peers, left, Vec::new(), 0, Duration::ZERO));
    }
    if pairs.is_empty() {
        return Err(Error::Usage(
            "probe: no rail has an address of the peers' family: nothing to probe".into(),
        ));
    }
    // This host's own route for each pair (step 4), asked together.
    let lookups = nl.routes_get(&pairs.iter().map(|p| (p.source, p.peer)).collect::<Vec<_>>());
    let jobs: Vec<Job> = pairs
        .iter()
        .zip(&lookups)
        .map(|(p, lookup)| Job {
            rail: rails.iter().position(|r| r.local.name == p.rail).unwrap_or(0),
            source: p.source,
            peer: p.peer,
            gateway: gateway(p, lookup.as_ref().ok()),
        })
        .collect();
    let started = Instant::now();
    let outcome = probe_jobs(ctx, &rails, &jobs, timeout)?;
    let elapsed = started.elapsed();
    if outcome.drops > 0 {
        ctx.warn(format!(
            "probe: its packet sockets dropped {} frames (their receive queues overflowed): a pair that misses \
             an answer is not verified rather than faulty",
            outcome.drops
        ));
    }

    let apply = ctx.suggest(&super::apply::apply_args(&cfg.files, &[]));
    let own_arp = own_arp(&rails);
    let mut frames_sent = 0;
    let mut results = Vec::new();
    for ((pair, job), (s, lookup)) in pairs.iter().zip(&jobs).zip(outcome.seen.iter().zip(lookups)) {
        frames_sent += s.sent;
        if let Some(e) = &s.send_error {
            ctx.warn(format!("{} -> {}: {e}", pair.rail, pair.peer));
        }
        let obs =
            observation(&rails, &rails[job.rail], s, lookup, own_arp.clone(), job.gateway, outcome.drops);
        results.push(verdict::verdict(pair, &obs, &peers, timeout, &apply));
    }
    if args.rdma {
        super::probe_rdma::judge_pairs(ctx, args, &nl, &rails, &jobs, &mut results).await?;
    }
    let names: Vec<String> = local.iter().map(|l| l.name.clone()).collect();
    Ok(report(ctx, names, &peers, left, results, frames_sent, elapsed))
}

/// What was left out: peer addresses that are this host's own, and this
/// host's configured addresses that are missing.
struct Left {
    skipped: Vec<Skipped>,
    not_ready: Vec<NotReady>,
}

/// Takes this host's own addresses (any interface's) out of the peers.
fn skip_own(peers: &mut Peers, live: &[crate::model::Address]) -> Vec<Skipped> {
    let mut skipped = Vec::new();
    peers.addresses.retain(|p| match live.iter().find(|a| a.addr.addr == *p) {
        Some(a) => {
            skipped.push(Skipped {
                peer: *p,
                reason: format!("it is this host's own address (on {})", a.ifname),
            });
            false
        }
        None => true,
    });
    skipped
}

/// The gateway a pair's neighbour request asks for: the one of this
/// host's route from the pair's source to its peer, when that route
/// leaves by the pair's rail (a peer behind a router: a /31 to a leaf, a
/// subnet per rail). None: the peer itself (on the link, or this host's
/// route is wrong, which step 4 of the verdict names).
fn gateway(pair: &verdict::Pair, route: Option<&crate::model::Route>) -> Option<std::net::IpAddr> {
    let route = route?;
    (route.oif.as_deref() == Some(pair.rail.as_str()))
        .then_some(route.gateway)
        .flatten()
        .filter(|g| *g != pair.peer)
}

/// One rail to probe from: its addresses, what the sockets need, its
/// RDMA port and GID table.
pub(super) struct ProbeRail {
    pub(super) local: LocalRail,
    /// Configured addresses that are not on the rail.
    missing: Vec<std::net::IpAddr>,
    pub(super) io: RailIo,
    pub(super) rdma: Option<RdmaMtu>,
    /// The rail's RDMA port's GIDs (index, GID), to name the index the
    /// RDMA CM chose.
    pub(super) gids: Vec<(u32, std::net::Ipv6Addr)>,
}

/// `--timeout`, and that some peers are named (or `--self`).
fn checked_timeout(args: &ProbeArgs) -> Result<Duration, Error> {
    if !(args.timeout > 0.0 && args.timeout <= 60.0) {
        return Err(Error::Usage(format!("--timeout {}: give 0 < SECONDS <= 60", args.timeout)));
    }
    if !args.self_ && !args.listen && args.peer.is_empty() && args.peers.is_empty() {
        return Err(Error::Usage(
            "probe: name the peers: --peer ADDR (repeatable, or --peer A,B), --peers FILE, --self to describe \
             this host for a peer's --peers, or --listen to answer a peer's --rdma"
                .into(),
        ));
    }
    Ok(Duration::from_secs_f64(args.timeout))
}

/// The peers of `--peer` and of every `--peers` file.
fn read_peers(args: &ProbeArgs) -> Result<Peers, Error> {
    if let Some((ip, why)) = args.peer.iter().find_map(|ip| peers::unfit_peer(ip).map(|w| (ip, w))) {
        return Err(Error::Usage(format!("probe: --peer {ip} {why}")));
    }
    let mut peers = Peers::of(&args.peer);
    for file in &args.peers {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(file)
            .map_err(|e| Error::Usage(format!("--peers {name}: cannot read it: {e}")))?;
        peers.extend(peers::parse(&name, &text).map_err(Error::Usage)?);
    }
    Ok(peers)
}

/// The rails: those of the config that exist, Ethernet or IPoIB with a
/// hardware address, with their addresses now; a warning for the others.
async fn local_rails(
    ctx: &Ctx,
    args: &ProbeArgs,
    cfg: &Config,
    nl: &Netlink,
    live: &[crate::model::Address],
) -> Result<Vec<ProbeRail>, Error> {
    let rdma = rdma_read::read_lenient(&args.sysfs, nl.links())?;
    rdma.unreadable.iter().for_each(|w| ctx.warn(w.to_string()));
    let sysfs = crate::sysfs::Dir::new(&args.sysfs.sysfs_root);
    let mut rails = Vec::new();
    for iface in &cfg.interfaces {
        let Some(link) = nl.links().iter().find(|l| l.name == iface.name) else {
            ctx.warn(format!("{} is not on this host: not probed", iface.name));
            continue;
        };
        let (LinkType::Ether | LinkType::Infiniband, Some(hw)) = (link.link_type, link.mac.clone()) else {
            ctx.warn(format!(
                "{} is neither Ethernet nor IPoIB with a hardware address: not probed",
                iface.name
            ));
            continue;
        };
        let (addresses, missing): (Vec<Prefix>, Vec<Prefix>) = super::rail_addresses(iface, live)
            .into_iter()
            .partition(|p| live.iter().any(|a| a.ifname == iface.name && a.addr.addr == p.addr));
        let port = rdma.rdma.port_of(&iface.name);
        rails.push(ProbeRail {
            missing: missing.iter().map(|p| p.addr).collect(),
            local: LocalRail { name: iface.name.clone(), addresses, missing },
            io: RailIo {
                name: iface.name.clone(),
                ifindex: link.index,
                link_type: link.link_type,
                hw,
                broadcast: nl.broadcast(link.index).map(<[u8]>::to_vec).unwrap_or_else(|| vec![0xff; 6]),
                mtu: nl.mtu(link.index).unwrap_or(1500),
            },
            rdma: port.map(|p| RdmaMtu {
                port: p.hca(),
                roce: p.is_roce(),
                active_mtu: read_active_mtu(&sysfs, &p.device, p.port),
            }),
            gids: port.map(|p| p.gids.iter().map(|g| (g.index, g.gid)).collect()).unwrap_or_default(),
        });
    }
    Ok(rails)
}

/// `--self`: this host's rails, for a peer's `--peers`.
fn describe_self(ctx: &Ctx, rails: &[ProbeRail]) -> Done {
    let doc = SelfDoc {
        rails: rails
            .iter()
            .map(|r| SelfRail {
                name: r.local.name.clone(),
                addresses: r.local.addresses.iter().map(Prefix::to_string).collect(),
                mac: Some(r.io.hw.to_string()),
                mtu: Some(r.io.mtu),
                rdma: r.rdma.as_ref().map(|p| p.port.clone()),
            })
            .collect(),
    };
    if !ctx.json {
        for r in &doc.rails {
            crate::say!(
                "{}  {}  mac {}  mtu {}{}",
                r.name,
                r.addresses.join(" "),
                r.mac.as_deref().unwrap_or("-"),
                r.mtu.unwrap_or(0),
                r.rdma.as_deref().map_or(String::new(), |p| format!("  rdma {p}"))
            );
        }
    }
    Done::new(exit::OK, false, serde_json::json!({ "self": doc }))
}

/// This host's ARP settings on each rail, as the kernel acts on them (the
/// larger of `conf/all` and the rail's own): whether this host itself makes
/// a peer send to the wrong NIC. Read from this namespace's /proc/sys;
/// an unreadable value is None (no evidence either way).
fn own_arp(rails: &[ProbeRail]) -> Vec<OwnArp> {
    use crate::model::SysctlKey;
    let effective = |rail: &str, key: SysctlKey| {
        let all = crate::sysctl::read("all", key).ok()?;
        Some(key.effective(all, crate::sysctl::read(rail, key).ok()?))
    };
    rails
        .iter()
        .map(|r| OwnArp {
            rail: r.local.name.clone(),
            arp_ignore: effective(&r.local.name, SysctlKey::ArpIgnore),
            arp_announce: effective(&r.local.name, SysctlKey::ArpAnnounce),
        })
        .collect()
}

/// The probe on the wire (`probe::io`); a signal ends it as an error.
fn probe_jobs(ctx: &Ctx, rails: &[ProbeRail], jobs: &[Job], timeout: Duration) -> Result<io::Outcome, Error> {
    let rail_io: Vec<RailIo> = rails.iter().map(|r| r.io.clone()).collect();
    let seen = io::run(&rail_io, jobs, timeout, &ctx.stop).map_err(|e| {
        if e.not_permitted() {
            Error::NotPermitted(format!("probe needs CAP_NET_RAW: run it as root ({e})"))
        } else {
            Error::Other(anyhow::anyhow!("{e}"))
        }
    })?;
    if let Some(signal) = ctx.stop.requested() {
        return Err(Error::Other(anyhow::anyhow!(
            "probe: interrupted by signal {signal} before every pair was probed"
        )));
    }
    Ok(seen)
}

/// What was seen for one pair, in the verdict's terms: rails by name,
/// link-layer addresses as text, the route lookup's interface.
fn observation(
    rails: &[ProbeRail],
    rail: &ProbeRail,
    s: &io::Seen,
    lookup: Result<crate::model::Route, impl std::fmt::Display>,
    own_arp: Vec<OwnArp>,
    gateway: Option<std::net::IpAddr>,
    drops: u64,
) -> Observation {
    let replies = |seen: &[(usize, Option<HwAddr>)]| -> Vec<Reply> {
        seen.iter()
            .map(|(r, mac)| Reply {
                interface: rails[*r].io.name.clone(),
                source_mac: mac.as_ref().map(HwAddr::to_string),
            })
            .collect()
    };
    Observation {
        arp_answers: s.arp_answers.iter().map(HwAddr::to_string).collect(),
        replies: replies(&s.replies),
        routed: replies(&s.routed),
        rtts: s.rtts.clone(),
        rail_mtu: rail.io.mtu,
        full_size_back: s.full_size_back,
        largest_back: s.largest_back,
        route_dev: match lookup {
            Ok(route) => route.oif.ok_or_else(|| "the kernel's answer names no interface".to_string()),
            Err(e) => Err(e.to_string()),
        },
        rdma: rail.rdma.clone(),
        own_arp,
        gateway,
        drops,
        send_error: s.send_error.clone(),
    }
}

/// The matrix and the summary line (when chatty), and the report: exit 1
/// when a pair has a problem, else 6 when one could not be verified.
fn report(
    ctx: &Ctx,
    names: Vec<String>,
    peers: &Peers,
    left: Left,
    results: Vec<ProbeResult>,
    frames_sent: u32,
    elapsed: Duration,
) -> Done {
    let bad = results.iter().filter(|r| !r.problems.is_empty()).count();
    let unverified = results.iter().filter(|r| r.unverified()).count();
    let not_ready = left.not_ready.len();
    if ctx.chatty() && results.is_empty() && not_ready > 0 {
        tell!("roce-route probe: nothing probed: no rail has its configured address for the peers");
    } else if ctx.chatty() && results.is_empty() {
        tell!("roce-route probe: nothing to probe: every peer address is this host's own");
    } else if ctx.chatty() {
        super::print_text(&verdict::matrix(
            &names,
            &peers.addresses,
            &results,
            ctx.verbosity == super::Verbosity::Verbose,
        ));
        let n = results.len();
        let mut short = Vec::new();
        if unverified > 0 {
            short.push(format!("{unverified} of {n} pairs not verified"));
        }
        if not_ready > 0 {
            short.push(format!("{not_ready} configured addresses missing"));
        }
        let summary = if bad == 0 && short.is_empty() {
            format!("roce-route probe: all {n} pairs right ({:.0} ms)", elapsed.as_secs_f64() * 1e3)
        } else if bad == 0 {
            format!("roce-route probe: no problem found, but {}", short.join(", "))
        } else {
            let rest: String = short.iter().map(|s| format!(", {s}")).collect();
            format!("roce-route probe: {bad} of {n} pairs with problems{rest}")
        };
        tell!("{summary}");
    }
    let report = ProbeReport {
        rails: names,
        peers: peers.addresses.clone(),
        skipped: left.skipped,
        not_ready: left.not_ready,
        probes: results,
        frames_sent,
        elapsed_ms: (elapsed.as_secs_f64() * 1e6).round() / 1e3,
    };
    let code = if bad > 0 {
        exit::FAILED
    } else if unverified > 0 || not_ready > 0 {
        exit::NOT_VERIFIED
    } else {
        exit::OK
    };
    Done::new(code, false, report)
}

/// `check`'s warnings about the rails' MTUs (`probe::mtu`).
pub async fn mtu_warnings(
    nl: &Netlink,
    cfg: &Config,
    rdma: &crate::rdma_check::Observed,
    sysfs: &crate::cli::SysfsArg,
) -> Vec<String> {
    let fs = crate::sysfs::Dir::new(&sysfs.sysfs_root);
    let rails: Vec<crate::probe::mtu::RailMtu> = cfg
        .interfaces
        .iter()
        .filter_map(|i| {
            let link = nl.links().iter().find(|l| l.name == i.name)?;
            Some(crate::probe::mtu::RailMtu {
                name: i.name.clone(),
                mtu: nl.mtu(link.index)?,
                rdma: rdma.rdma.port_of(&i.name).map(|p| RdmaMtu {
                    port: p.hca(),
                    roce: p.is_roce(),
                    active_mtu: read_active_mtu(&fs, &p.device, p.port),
                }),
            })
        })
        .collect();
    crate::probe::mtu::warnings(&rails)
}

/// `ports/<p>/active_mtu` when sysfs (or the copy) has it: mainline
/// kernels do not export it (ibv_query_port does), so usually None.
/// "4096" or "4096 (5)".
pub fn read_active_mtu(fs: &dyn crate::sysfs::Sysfs, device: &str, port: u32) -> Option<u32> {
    let text = fs.read(&format!("class/infiniband/{device}/ports/{port}/active_mtu")).ok()??;
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_mtu_is_read_when_sysfs_has_it() {
        let mut fs = crate::sysfs::Memory::default();
        fs.file("class/infiniband/mlx5_0/ports/1/active_mtu", "4096 (5)");
        fs.file("class/infiniband/mlx5_1/ports/1/active_mtu", "1024");
        assert_eq!(read_active_mtu(&fs, "mlx5_0", 1), Some(4096));
        assert_eq!(read_active_mtu(&fs, "mlx5_1", 1), Some(1024));
        assert_eq!(read_active_mtu(&fs, "mlx5_2", 1), None, "mainline sysfs has no such file");
    }
}
