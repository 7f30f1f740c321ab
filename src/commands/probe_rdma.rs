//! `probe --rdma` (the RDMA layer of every pair, after the IP verdicts)
//! and `probe --listen` (the responder on the peer). The work on the
//! wire is `probe::rdma_io`; the verdicts are `probe::rdma`.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Ctx;
use super::probe::ProbeRail;
use crate::cli::ProbeArgs;
use crate::error::{Error, exit};
use crate::netlink::Netlink;
use crate::netlink::neighbour::left_behind;
use crate::probe::io::Job;
use crate::probe::rdma::{self, Failure, RdmaSeen, Stage};
use crate::probe::rdma_io::{self, ListenOn, Listener, RdmaJob, Served};
use crate::probe::verdict::{ProbeResult, rdma_mtu_carried};
use crate::tell;
use crate::verbs::Lib;

/// `--rdma-timeout`: 0 < SECONDS <= 60.
pub fn checked_limit(args: &ProbeArgs) -> Result<Duration, Error> {
    if !(args.rdma_timeout > 0.0 && args.rdma_timeout <= 60.0) {
        return Err(Error::Usage(format!("--rdma-timeout {}: give 0 < SECONDS <= 60", args.rdma_timeout)));
    }
    if !(args.idle > 0.0 && args.idle <= 86400.0) {
        return Err(Error::Usage(format!("--idle {}: give 0 < SECONDS <= 86400", args.idle)));
    }
    Ok(Duration::from_secs_f64(args.rdma_timeout))
}

/// The command that starts the responder on the peer, for the verdicts.
fn listen_command(args: &ProbeArgs) -> String {
    if args.rdma_port == rdma::DEFAULT_PORT {
        "roce-route probe --listen".to_string()
    } else {
        format!("roce-route probe --listen --rdma-port {}", args.rdma_port)
    }
}

/// The RDMA layer of every pair, judged beside its IP verdict. The
/// neighbour entries the RDMA CM's resolutions made on the rails are
/// removed afterwards (those that were there before stay).
pub(super) async fn judge_pairs(
    ctx: &Ctx,
    args: &ProbeArgs,
    nl: &Netlink,
    rails: &[ProbeRail],
    jobs: &[Job],
    results: &mut [ProbeResult],
) -> Result<(), Error> {
    let listen = listen_command(args);
    let limit = checked_limit(args)?;
    let lib = match Lib::get() {
        Ok(lib) => lib,
        Err(e) => {
            ctx.warn(format!("probe --rdma: {e}"));
            let seen = RdmaSeen {
                failure: Some(Failure::Local { stage: Stage::Address, error: e }),
                ..RdmaSeen::default()
            };
            results.iter_mut().for_each(|r| rdma::judge(r, &seen, &listen, &[]));
            return Ok(());
        }
    };
    let rdma_jobs: Vec<RdmaJob> = jobs
        .iter()
        .map(|j| {
            let rail = &rails[j.rail];
            RdmaJob {
                source: j.source,
                peer: j.peer,
                rail_port: rail.rdma.as_ref().map(|p| p.port.clone()),
                gids: rail.gids.clone(),
            }
        })
        .collect();
    let before = nl.neighbours().await;
    let started = Instant::now();
    let seen = rdma_io::probe(lib, &rdma_jobs, args.rdma_port, limit, &ctx.stop);
    let elapsed = started.elapsed();
    match (before, nl.neighbours().await) {
        (Ok(before), Ok(after)) => {
            let ifindexes: Vec<u32> = rails.iter().map(|r| r.io.ifindex).collect();
            let dests: Vec<IpAddr> = jobs.iter().flat_map(|j| [Some(j.peer), j.gateway]).flatten().collect();
            for n in left_behind(&before, &after, &ifindexes, &dests) {
                if let Err(e) = nl.delete_neighbour(&n).await {
                    ctx.warn(format!(
                        "probe --rdma: cannot remove the neighbour entry of {} its RDMA CM left (ifindex {}): {e}",
                        n.dest, n.ifindex
                    ));
                }
            }
        }
        (Err(e), _) | (_, Err(e)) => ctx.warn(format!(
            "probe --rdma: cannot read the neighbour table, so the entries its RDMA CM made stay: {e}"
        )),
    }
    if let Some(signal) = ctx.stop.requested() {
        return Err(Error::Other(anyhow::anyhow!(
            "probe --rdma: interrupted by signal {signal} before every pair was probed"
        )));
    }
    // The RDMA CM could not be opened: every pair that has an RDMA port is
    // not verified, with the reason.
    let seen = seen.unwrap_or_else(|e| {
        ctx.warn(format!("probe --rdma: {e}"));
        rdma_jobs
            .iter()
            .map(|j| match j.rail_port {
                None => RdmaSeen { skipped: Some(rdma_io::NO_PORT.into()), ..RdmaSeen::default() },
                Some(_) => RdmaSeen {
                    failure: Some(Failure::Local { stage: Stage::Address, error: e.clone() }),
                    ..RdmaSeen::default()
                },
            })
            .collect()
    });
    let shared = rdma::shared_answers(results);
    for ((r, s), also) in results.iter_mut().zip(&seen).zip(&shared) {
        rdma::judge(r, s, &listen, also);
    }
    if ctx.chatty() && ctx.verbosity == super::Verbosity::Verbose {
        tell!("roce-route probe: the RDMA layer took {:.0} ms", elapsed.as_secs_f64() * 1e3);
    }
    Ok(())
}

/// The fields of `probe --listen --json`.
#[derive(Debug, Serialize)]
pub struct ListenReport {
    pub port: u16,
    #[serde(flatten)]
    pub served: Served,
}

/// `--listen`: the responder on every rail address, until `--idle`
/// seconds without a connection. Exit 0 when it listened on every
/// address, 6 when on some only, 1 when on none (each address's `error`
/// says why: no rdma-core, no RDMA CM, no RDMA device for it).
pub(super) fn listen(ctx: &Ctx, args: &ProbeArgs, rails: &[ProbeRail]) -> Result<super::Done, Error> {
    checked_limit(args)?;
    let listeners: Vec<Listener> = rails
        .iter()
        .flat_map(|r| {
            r.local.addresses.iter().map(move |a| Listener {
                address: a.addr,
                rail: r.local.name.clone(),
                rail_port: r.rdma.as_ref().map(|p| p.port.clone()),
                rdma_mtu: rdma_mtu_carried(r.io.mtu),
            })
        })
        .collect();
    if listeners.is_empty() {
        return Err(Error::Usage(
            "probe --listen: no rail of the config has its address on this host: nothing to listen on".into(),
        ));
    }
    let idle = Duration::from_secs_f64(args.idle);
    let chatty = ctx.chatty();
    let mut say = |line: String| {
        if chatty {
            tell!("roce-route probe: {line}");
        }
    };
    let served = Lib::get()
        .and_then(|lib| rdma_io::listen(lib, &listeners, args.rdma_port, idle, &ctx.stop, &mut say))
        .unwrap_or_else(|e| Served {
            listening: listeners
                .iter()
                .map(|l| ListenOn {
                    rail: l.rail.clone(),
                    address: l.address,
                    port: None,
                    error: Some(e.clone()),
                })
                .collect(),
            ..Served::default()
        });
    let failed: Vec<&ListenOn> = served.listening.iter().filter(|l| l.error.is_some()).collect();
    let code = if failed.len() == served.listening.len() {
        let mut why: Vec<&str> = failed.iter().filter_map(|l| l.error.as_deref()).collect();
        why.dedup();
        ctx.warn(format!("probe --listen: listening on none of the rails' addresses: {}", why.join("; ")));
        exit::FAILED
    } else if !failed.is_empty() {
        exit::NOT_VERIFIED
    } else {
        exit::OK
    };
    if chatty && code != exit::FAILED {
        tell!(
            "roce-route probe: responder done: {} connections accepted, {} refused",
            served.accepted,
            served.refused.len()
        );
    }
    Ok(super::Done::new(code, false, ListenReport { port: args.rdma_port, served }))
}
