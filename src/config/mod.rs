//! Parse and validate the roce-route configuration file.
//!
//! Pure: TOML text in, a [`Config`] or the first [`ConfigError`] out. No I/O
//! and no kernel: checks that need the host (an interface exists, a bare
//! address has a prefix length, a gateway is on-link for addresses the host
//! picks or that may have a point-to-point peer) are done later by the plan,
//! which puts the addresses it finds on the host through the same address
//! policy (`plan::address_policy`) as the addresses listed here.
//!
//! Every error names the file, the line and column of the offending value,
//! the key or interface it belongs to, and a hint saying how to fix it.
//!
//! - `types`: the validated config;
//! - `raw`: the serde types the TOML is read into, with spans;
//! - `error`: [`ConfigError`], [`Loc`] and the rendering of TOML errors;
//! - `check`: the checks of one file ([`FileChecker`](check::FileChecker));
//! - `merge`: [`parse`] and [`parse_many`], several files into one config;
//! - `protocol`: which route protocol numbers are free to take.
//!
//! The tables of interfaces without `table` are given by
//! `reconcile::tables::assign_tables` (provisionally here, for good against
//! the host there).

mod check;
mod error;
mod merge;
mod protocol;
mod raw;
mod types;

pub use error::{ConfigError, Loc};
pub use merge::{parse, parse_many};
pub use protocol::{check_protocol, protocol_owner};
pub use types::*;

#[cfg(test)]
mod tests;
