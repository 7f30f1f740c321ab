//! roce-route: per-NIC policy routing for multi-NIC RDMA hosts.
//!
//! A pure core (config -> plan -> diff -> render) with thin effect modules
//! (netlink, sysctl) and one executor that runs operations with an undo
//! journal. Follow a config key from `config` through `plan` (desired
//! routes and rules) and `diff` (operations) to `netlink` (messages).

pub mod apply;
pub mod cli;
pub mod config;
pub mod diff;
pub mod error;
pub mod executor;
pub mod host;
pub mod model;
pub mod netlink;
pub mod netns;
pub mod plan;
pub mod render;
pub mod sysctl;
