//! `roce-route discover`: prints a config for this host's RDMA NICs (see
//! `crate::discover`). Reads sysfs and the namespace; writes nothing.

use anyhow::Context as _;
use serde::Serialize;

use super::{Ctx, Done, connect, print_text};
use crate::cli::DiscoverArgs;
use crate::discover::{self, Discovered, Host, Selection};
use crate::error::{Error, exit};
use crate::glob;
use crate::model::Family;
use crate::rdma_read;

/// The fields of `discover --json`.
#[derive(Debug, Serialize)]
pub struct DiscoverReport {
    #[serde(flatten)]
    pub found: Discovered,
    /// The config as printed without --json.
    pub config: String,
}

pub async fn run(ctx: &Ctx, args: &DiscoverArgs) -> Result<Done, Error> {
    for g in &args.interfaces {
        glob::validate(g).map_err(|e| Error::Usage(format!("--interfaces {e}")))?;
    }
    let nl = connect().await?;
    let rdma = rdma_read::read(&args.sysfs, nl.links())?;
    let addresses = nl.addresses().await.context("cannot read the interface addresses")?;
    let selection =
        if args.interfaces.is_empty() { Selection::Rdma } else { Selection::Globs(args.interfaces.clone()) };
    let root = args.sysfs.sysfs_root.to_string_lossy();
    let mut host = Host { rdma: &rdma, links: nl.links(), addresses: &addresses, routes: &[] };
    // The rails first (without routes), then the main table's routes out
    // of the netdevs on their subnets, filtered by output interface in the
    // kernel: an uplink's full routing table is not copied to user space.
    let rails = discover::discover(&host, &selection, &root).map_err(|e| Error::NotFound(e.to_string()))?;
    let mut routes = Vec::new();
    for name in &discover::gateway_netdevs(&host, &rails) {
        for family in [Family::V4, Family::V6] {
            let on = nl
                .routes_on(family, 254, name)
                .await
                .with_context(|| format!("cannot read the main routing table's routes via {name}"))?;
            routes.extend(on.into_iter().map(|r| r.item));
        }
    }
    host.routes = &routes;
    let found = discover::discover(&host, &selection, &root).map_err(|e| Error::NotFound(e.to_string()))?;
    let config = discover::render(&found);
    if !ctx.json {
        print_text(&config);
    }
    Ok(Done::new(exit::OK, false, DiscoverReport { found, config }))
}
