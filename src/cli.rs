//! The command line (clap).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

const EXIT_CODES: &str = "\
Exit codes:
  0  success (or already in sync)
  1  failed; the host was left as it was
  2  invalid command line or configuration; nothing touched
  3  reserved for `check`: the live state differs from the config
  4  failed, and the rollback failed too";

/// Per-NIC policy routing for multi-NIC RDMA hosts (InfiniBand/IPoIB, RoCE).
#[derive(Debug, Parser)]
#[command(name = "roce-route", version, after_help = EXIT_CODES)]
pub struct Cli {
    /// Run inside this named network namespace (as `ip -n NAME`).
    #[arg(long, global = true, value_name = "NAME")]
    pub netns: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Make the host's tables, rules and ARP sysctls match CONFIG, as one
    /// transaction that is rolled back on any failure.
    #[command(after_help = EXIT_CODES)]
    Apply(ApplyArgs),
}

#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// The TOML configuration.
    pub config: PathBuf,

    /// Print the changes as iproute2/sysctl commands and change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Take over conflicting entries that roce-route does not own (source
    /// rules for configured addresses, routes in configured tables).
    #[arg(long)]
    pub adopt: bool,
}
