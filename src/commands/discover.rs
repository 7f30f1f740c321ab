//! `roce-route discover`: prints a config for this host's RDMA NICs (see
//! `crate::discover`). Reads sysfs and the namespace; writes nothing.

use anyhow::Context as _;
use serde::Serialize;

use super::{Ctx, Done, connect, print_text, read_rdma};
use crate::cli::DiscoverArgs;
use crate::discover::{self, Discovered, Host, Selection};
use crate::error::{Error, exit};
use crate::glob;
use crate::model::Family;

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
    let rdma = read_rdma(&args.sysfs, nl.links())?;
    let addresses = nl.addresses().await.context("cannot read the interface addresses")?;
    let mut routes = Vec::new();
    for family in [Family::V4, Family::V6] {
        let main = nl.routes(family, Some(254), None).await.context("cannot read the main routing table")?;
        routes.extend(main.into_iter().map(|r| r.item));
    }
    let selection =
        if args.interfaces.is_empty() { Selection::Rdma } else { Selection::Globs(args.interfaces.clone()) };
    let host = Host { rdma: &rdma, links: nl.links(), addresses: &addresses, routes: &routes };
    let root = args.sysfs.sysfs_root.to_string_lossy();
    let found = discover::discover(&host, &selection, &root).map_err(|e| Error::NotFound(e.to_string()))?;
    let config = discover::render(&found);
    if !ctx.json {
        print_text(&config);
    }
    Ok(Done::new(exit::OK, false, DiscoverReport { found, config }))
}
