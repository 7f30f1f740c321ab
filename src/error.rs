//! Errors the caller decides on, each with its exit code.

use crate::config::ConfigError;
use crate::executor::TxError;
use crate::state::StateError;

/// Exit codes, documented in the README and `--help`.
pub mod exit {
    pub const OK: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const INVALID: i32 = 2;
    pub const DRIFT: i32 = 3;
    pub const ROLLBACK_FAILED: i32 = 4;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad configuration (syntax, values, or not matching the host).
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// Bad command line (e.g. an unknown network namespace).
    #[error("{0}")]
    Usage(String),
    /// Not allowed to change the network (not root / no CAP_NET_ADMIN).
    #[error("{0}")]
    NotPermitted(String),
    /// Entries roce-route does not own are in the way.
    #[error("{0}")]
    Conflicts(String),
    /// The transaction failed (and was rolled back, or not).
    #[error("{0}")]
    Transaction(#[from] TxError),
    /// The state directory is unsafe, corrupt, locked or unwritable.
    #[error("state: {0}")]
    State(#[from] StateError),
    /// `apply --confirm` was not confirmed and rolled back.
    #[error("{0}")]
    NotConfirmed(String),
    /// `confirm` with no apply waiting.
    #[error("{0}")]
    NothingToConfirm(String),
    /// Anything else (reading the host failed, ...), with context.
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Config(_) | Error::Usage(_) => exit::INVALID,
            Error::Transaction(TxError::RollbackFailed { .. } | TxError::UndoFailed { .. }) => {
                exit::ROLLBACK_FAILED
            }
            Error::NotPermitted(_)
            | Error::Conflicts(_)
            | Error::Transaction(_)
            | Error::State(_)
            | Error::NotConfirmed(_)
            | Error::NothingToConfirm(_)
            | Error::Other(_) => exit::FAILED,
        }
    }
}
