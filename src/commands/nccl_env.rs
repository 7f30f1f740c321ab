//! `roce-route nccl-env [CONFIG]`: NCCL's settings for the rails of CONFIG,
//! or of the latest apply (see `crate::nccl`). Reads sysfs and the
//! namespace; changes nothing.

use anyhow::Context as _;

use super::{Ctx, Done, connect, print_text, read_rdma};
use crate::cli::{NcclEnvArgs, NcclFormat};
use crate::config::{self, Config};
use crate::error::{Error, exit};
use crate::model::{Address, Prefix, scope};
use crate::nccl::{self, RailAddrs};
use crate::plan;

/// `cfg`: the config given on the command line, if any.
pub async fn run(ctx: &Ctx, args: &NcclEnvArgs, cfg: Option<Config>) -> Result<Done, Error> {
    let cfg = match cfg {
        Some(cfg) => cfg,
        None => latest(ctx)?,
    };
    let nl = connect().await?;
    let rdma = read_rdma(&args.sysfs, nl.links())?;
    let live = nl.addresses().await.context("cannot read the interface addresses")?;
    let rails: Vec<RailAddrs> = cfg
        .interfaces
        .iter()
        .map(|i| RailAddrs { name: i.name.clone(), addresses: addresses(i, &live) })
        .collect();
    // Every port's pkey table (NCCL_IB_PKEY is an index into it); one that
    // cannot be read is a warning about the rails on that port.
    let sysfs = super::sysfs_dir(&args.sysfs)?;
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

/// The config of the latest apply in this namespace.
fn latest(ctx: &Ctx) -> Result<Config, Error> {
    let record = ctx.readable_record()?;
    if record.config_files.is_empty() {
        let why = if crate::netns::can_admin_network() {
            "no apply is recorded in this network namespace"
        } else {
            "the record of the latest apply can only be read as root"
        };
        return Err(Error::Usage(format!("nccl-env: {why}; give the config: `roce-route nccl-env CONFIG`")));
    }
    Ok(config::parse_many(&record.config_files)?)
}

/// The rail's addresses: the listed ones (a bare one with the prefix
/// length it has on the host), else its global addresses now.
fn addresses(iface: &config::Interface, live: &[Address]) -> Vec<Prefix> {
    let on_rail = || live.iter().filter(move |a| a.ifname == iface.name && a.scope == scope::UNIVERSE);
    match &iface.addresses {
        Some(listed) => listed
            .iter()
            .map(|a| {
                a.prefix().unwrap_or_else(|| {
                    on_rail().find(|l| l.addr.addr == a.addr).map_or(Prefix::host(a.addr), |l| l.addr)
                })
            })
            .collect(),
        // The addresses apply would take for a rail without `addresses`.
        None => on_rail().filter(|a| plan::unfit(a).is_none()).map(|a| a.addr).collect(),
    }
}
