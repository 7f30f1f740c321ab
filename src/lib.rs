//! roce-route: per-NIC policy routing for multi-NIC RDMA hosts.
//!
//! A pure core (config -> plan -> diff -> render, plus behaviour probes)
//! with thin effect modules (netlink, sysctl, state) and one executor that
//! runs operations with an undo journal. Follow a config key from `config`
//! through `plan` (desired routes and rules) and `diff` (operations) to
//! `netlink` (messages); the commands in `commands` tie them together.

pub mod announce;
pub mod behaviour;
pub mod cli;
pub mod commands;
pub mod config;
pub mod config_files;
pub mod converge;
pub mod diff;
pub mod discover;
pub mod docs;
pub mod error;
pub mod events;
pub mod executor;
pub mod exit_codes;
pub mod glob;
pub mod man;
pub mod managers;
pub mod metrics;
pub mod model;
pub mod nccl;
pub mod netlink;
pub mod netns;
pub mod observed;
pub mod output;
pub mod packet;
pub mod paste;
pub mod plan;
pub mod probe;
pub mod profile;
pub mod rdma;
pub mod rdma_check;
pub mod rdma_read;
pub mod reconcile;
pub mod render;
pub mod risks;
pub mod signals;
pub mod state;
pub mod suggest;
pub mod sysctl;
pub mod sysfs;
pub mod testhooks;
pub mod transaction;
pub mod verbs;
