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
    /// `apply`: applied; some rails or addresses were not ready.
    pub const NOT_READY: i32 = 5;
    /// `probe`: no pair had a problem, but some could not be verified.
    pub const NOT_VERIFIED: i32 = 6;
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
    /// Entries roce-route does not own are in the way: the report, and each
    /// entry (as `ip` prints it) with why it is in the way.
    #[error("{report}")]
    Conflicts { report: String, entries: Vec<(String, String)> },
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
    /// Another run's work stands in the way (an `apply --confirm` waiting).
    #[error("{0}")]
    Busy(String),
    /// The host changed under a run (an interface vanished mid-apply).
    #[error("{0}")]
    HostChanged(String),
    /// Reverting an unconfirmed change failed: the host is not as before.
    #[error("{0}")]
    RevertFailed(String),
    /// `apply --strict`: parts of the config the host is not ready for.
    #[error("{0}")]
    NotReady(String),
    /// The RDMA devices could not be read (sysfs unreadable, or a file not
    /// in the kernel's format).
    #[error("{0}")]
    Rdma(#[from] crate::rdma::RdmaError),
    /// What the command needs is not on this host (no RDMA device, no
    /// netdev matching a pattern, no rail with an RDMA device).
    #[error("{0}")]
    NotFound(String),
    /// Anything else (reading the host failed, ...), with context.
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

impl Error {
    /// The `error` member of the JSON document: the message, and for
    /// conflicts each entry in the way.
    pub fn json(&self) -> serde_json::Value {
        let mut doc = serde_json::json!({ "message": self.to_string(), "kind": self.kind() });
        if let Error::Conflicts { entries, .. } = self {
            let list: Vec<_> =
                entries.iter().map(|(entry, why)| serde_json::json!({"entry": entry, "why": why})).collect();
            doc["conflicts"] = serde_json::Value::Array(list);
        }
        doc
    }

    /// A stable name of the error for automation.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Config(_) => "config",
            Error::Usage(_) => "usage",
            Error::NotPermitted(_) => "not_permitted",
            Error::Conflicts { .. } => "conflicts",
            Error::Transaction(TxError::Interrupted { .. })
            | Error::State(StateError::LockInterrupted { .. }) => "interrupted",
            Error::Transaction(TxError::RollbackFailed { .. } | TxError::UndoFailed { .. }) => {
                "rollback_failed"
            }
            Error::Transaction(_) => "step_failed",
            Error::State(StateError::Locked { .. }) => "locked",
            Error::State(_) => "state",
            Error::NotConfirmed(_) => "not_confirmed",
            Error::NothingToConfirm(_) => "nothing_to_confirm",
            Error::Busy(_) => "busy",
            Error::HostChanged(_) => "host_changed",
            Error::RevertFailed(_) => "revert_failed",
            Error::NotReady(_) => "not_ready",
            Error::Rdma(_) => "rdma",
            Error::NotFound(_) => "not_found",
            Error::Other(_) => "other",
        }
    }

    /// Whether the host was left changed by the failed command: only when
    /// an undo failed (a failed run is otherwise rolled back, and the
    /// other errors happen before anything is changed).
    pub fn changed(&self) -> bool {
        self.exit_code() == exit::ROLLBACK_FAILED
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Config(_) | Error::Usage(_) => exit::INVALID,
            Error::Transaction(TxError::RollbackFailed { .. } | TxError::UndoFailed { .. })
            | Error::RevertFailed(_) => exit::ROLLBACK_FAILED,
            Error::NotPermitted(_)
            | Error::Conflicts { .. }
            | Error::Transaction(_)
            | Error::State(_)
            | Error::NotConfirmed(_)
            | Error::NothingToConfirm(_)
            | Error::Busy(_)
            | Error::HostChanged(_)
            | Error::NotReady(_)
            | Error::Rdma(_)
            | Error::NotFound(_)
            | Error::Other(_) => exit::FAILED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::FailedStep;

    fn step() -> FailedStep {
        FailedStep {
            index: 0,
            command: "ip -4 rule del ...".into(),
            reason: "EPERM".into(),
            errno: Some(nix::errno::Errno::EPERM),
        }
    }

    #[test]
    fn conflicts_are_listed_in_the_json_error_document() {
        let e = Error::Conflicts {
            report: "1 entries ...".into(),
            entries: vec![("ip -4 rule: priority 5 from 198.51.100.11 lookup main".into(), "why".into())],
        };
        let doc = e.json();
        assert_eq!(doc["kind"], "conflicts");
        assert_eq!(doc["conflicts"][0]["entry"], "ip -4 rule: priority 5 from 198.51.100.11 lookup main");
        assert!(Error::Usage("x".into()).json().get("conflicts").is_none());
    }

    #[test]
    fn exit_codes_follow_the_documented_table() {
        let failed = TxError::Failed { step: step(), undone: 2 };
        assert_eq!(Error::Transaction(failed.clone()).exit_code(), exit::FAILED);
        let both = TxError::RollbackFailed { cause: Box::new(failed), undo_failures: vec![step()] };
        assert_eq!(Error::Transaction(both).exit_code(), exit::ROLLBACK_FAILED);
        let undo = TxError::UndoFailed { what: "rollback".into(), undo_failures: vec![step()] };
        assert_eq!(Error::Transaction(undo).exit_code(), exit::ROLLBACK_FAILED);
        assert_eq!(Error::Usage("x".into()).exit_code(), exit::INVALID);
        assert_eq!(Error::NotPermitted("x".into()).exit_code(), exit::FAILED);
        let conflicts = Error::Conflicts { report: "x".into(), entries: vec![] };
        assert_eq!(conflicts.exit_code(), exit::FAILED);
        assert!(!conflicts.changed());
        assert_eq!(Error::RevertFailed("x".into()).exit_code(), exit::ROLLBACK_FAILED);
        assert!(Error::RevertFailed("x".into()).changed());
        assert_eq!(Error::HostChanged("x".into()).exit_code(), exit::FAILED);
    }
}
