//! `roce-route nccl-env [CONFIG]`: NCCL's settings for the rails of CONFIG,
//! or of the latest apply (see `crate::nccl`). Reads sysfs and the
//! namespace; changes nothing.

use anyhow::Context as _;

use super::{Ctx, Done, connect_for, print_text};
use crate::cli::{NcclEnvArgs, NcclFormat};
use crate::config::Config;
use crate::error::{Error, exit};
use crate::nccl::{self, RailAddrs};
use crate::rdma_read;

/// `cfg`: the config given on the command line, if any.
pub async fn run(ctx: &Ctx, args: &NcclEnvArgs, cfg: Option<Config>) -> Result<Done, Error> {
    let cfg = match cfg {
        Some(cfg) => cfg,
        None => super::latest_config(ctx, "nccl-env", &["nccl-env", "/etc/roce-route/"])?,
    };
    // The config's links only (see `connect_for`): nccl-env runs in job
    // prologs, on nodes with a veth per pod.
    let nl = connect_for(&cfg, &args.sysfs).await?;
    let rdma = rdma_read::read(&args.sysfs, nl.links())?;
    // The rails' addresses only: nothing here looks at another link's.
    let names: Vec<&str> = cfg.rail_names().collect();
    let live = nl.addresses_on(&names).await.context("cannot read the interface addresses")?;
    let rails: Vec<RailAddrs> = cfg
        .interfaces
        .iter()
        .map(|i| RailAddrs { name: i.name.clone(), addresses: super::rail_addresses(i, &live) })
        .collect();
    // Every port's pkey table (NCCL_IB_PKEY is an index into it); one that
    // cannot be read is a warning about the rails on that port.
    let sysfs = rdma_read::sysfs_dir(&args.sysfs)?;
    let pkeys: nccl::PkeyTables = rdma
        .ports
        .iter()
        .map(|p| (p.hca(), crate::rdma::pkey_table(&sysfs, &p.device, p.port).map_err(|e| e.to_string())))
        .collect();
    let env = nccl::nccl_env(&rails, &rdma, &pkeys).map_err(|e| Error::NotFound(e.to_string()))?;
    for w in &env.warnings {
        ctx.warn(w.clone());
    }
    if !ctx.json {
        match args.format {
            NcclFormat::Shell => print_text(&nccl::shell(&env)),
            NcclFormat::NcclConf => {
                // The file holds variables only: the reasoning goes to stderr.
                if ctx.chatty() {
                    env.notes.iter().for_each(|n| crate::tell!("roce-route: note: {n}"));
                }
                print_text(&nccl::nccl_conf(&env))
            }
        }
    }
    Ok(Done::new(exit::OK, false, env))
}
