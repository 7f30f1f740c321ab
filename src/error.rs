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
    /// Anything else (reading the host failed, ...), with context.
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

impl Error {
    /// The JSON error document of `--json` runs: what failed, the exit
    /// code, and for conflicts each entry in the way.
    pub fn json(&self, command: &str) -> serde_json::Value {
        let mut doc = serde_json::json!({
            "command": command, "ok": false, "exit_code": self.exit_code(), "error": self.to_string()
        });
        if let Error::Conflicts { entries, .. } = self {
            let list: Vec<_> =
                entries.iter().map(|(entry, why)| serde_json::json!({"entry": entry, "why": why})).collect();
            doc["conflicts"] = serde_json::Value::Array(list);
        }
        doc
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Config(_) | Error::Usage(_) => exit::INVALID,
            Error::Transaction(TxError::RollbackFailed { .. } | TxError::UndoFailed { .. }) => {
                exit::ROLLBACK_FAILED
            }
            Error::NotPermitted(_)
            | Error::Conflicts { .. }
            | Error::Transaction(_)
            | Error::State(_)
            | Error::NotConfirmed(_)
            | Error::NothingToConfirm(_)
            | Error::Other(_) => exit::FAILED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::FailedStep;

    fn step() -> FailedStep {
        FailedStep { index: 0, command: "ip -4 rule del ...".into(), reason: "EPERM".into(), errno: Some(1) }
    }

    #[test]
    fn conflicts_are_listed_in_the_json_error_document() {
        let e = Error::Conflicts {
            report: "1 entries ...".into(),
            entries: vec![("ip -4 rule: priority 5 from 198.51.100.11 lookup main".into(), "why".into())],
        };
        let doc = e.json("apply");
        assert_eq!(doc["ok"], false);
        assert_eq!(doc["exit_code"], 1);
        assert_eq!(doc["conflicts"][0]["entry"], "ip -4 rule: priority 5 from 198.51.100.11 lookup main");
        assert!(Error::Usage("x".into()).json("show").get("conflicts").is_none());
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
    }
}
