//! `roce-route announce CONFIG`: tells the peers now which MAC each
//! configured address has, from its own rail (gratuitous ARP, unsolicited
//! neighbour advertisement; see `announce`), e.g. after a switch was
//! replaced and the peers relearned from flooded traffic. It reads the
//! host and changes nothing on it, so it takes no lock.

use serde::Serialize;

use super::tell::{Announced, announced_lines, tell_peers};
use super::{Ctx, Done, connect_only};
use crate::config::Config;
use crate::error::{Error, exit};
use crate::render::count;
use crate::{plan, say, tell};

/// The fields of `announce --json`.
#[derive(Debug, Serialize)]
pub struct AnnounceReport {
    pub announced: Vec<Announced>,
    /// Addresses not a single announcement could be sent for.
    pub failed: Vec<Failed>,
}

#[derive(Debug, Serialize)]
pub struct Failed {
    pub interface: String,
    pub address: std::net::IpAddr,
    pub error: String,
}

pub async fn run(ctx: &Ctx, cfg: Config) -> Result<Done, Error> {
    // The config's links only, as apply reads them (see `connect_for`).
    let nl = connect_only(&cfg.names().collect::<Vec<_>>()).await?;
    // As apply reads them: another link's address named only where the
    // plan compares it (`Netlink::run_addresses`).
    let addrs = crate::reconcile::read_addresses(&nl, &cfg, &Default::default()).await?;
    // The same checks as apply: the interfaces and addresses must exist.
    let desired = plan::plan(&cfg, nl.links(), &addrs)?;
    // What the host is not ready for (a missing rail, an address in DAD)
    // is not announced: the kernel would not use it yet.
    for nr in &desired.not_ready {
        ctx.warn(format!(
            "{} is not announced: it is not ready: {}",
            nr.subject.text().unwrap_or_else(|| nr.interface.clone()),
            nr.describe()
        ));
    }
    // `announce = 0` turns off the announcements after apply; asked for by
    // name, they are sent at least once.
    let rounds = cfg.defaults.announce.max(1);
    let told = tell_peers(ctx, &nl, &desired, None, rounds).await;
    let report = AnnounceReport {
        announced: told.announced,
        failed: told
            .failed
            .into_iter()
            .map(|(a, error)| Failed { interface: a.interface, address: a.address, error })
            .collect(),
    };
    if ctx.chatty() {
        if !report.announced.is_empty() {
            super::print_lines(&announced_lines(&report.announced, rounds));
        } else if report.failed.is_empty() {
            say!("roce-route: nothing to announce");
        }
    }
    if report.failed.is_empty() {
        return Ok(Done::new(exit::OK, false, report));
    }
    if ctx.chatty() {
        tell!(
            "roce-route: error: could not announce {} of {} (see the warnings above)",
            report.failed.len(),
            count(report.failed.len() + report.announced.len(), "address", "addresses")
        );
    }
    Ok(Done::new(exit::FAILED, false, report))
}
