//! The one executor: runs an ordered plan as a transaction.
//!
//! Netlink has no transactions, so this builds one: before each step runs,
//! its inverse is pushed on an undo journal; on any failure, or when asked
//! to stop (SIGINT/SIGTERM/SIGHUP), every completed step is undone in
//! reverse order. The effects themselves (netlink, /proc/sys) sit behind
//! the `Effects` trait so that the rollback logic is tested without a kernel.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::model::Op;
use crate::render;

/// Something that can carry out one operation.
pub trait Effects {
    /// Runs `op`; the error is the kernel's (or the file system's) reason.
    fn run(&mut self, op: &Op) -> impl std::future::Future<Output = Result<(), String>>;
}

/// Set from a signal handler; checked before every step.
#[derive(Default)]
pub struct StopFlag {
    stop: AtomicBool,
    signal: AtomicI32,
}

impl StopFlag {
    pub fn request(&self, signal: i32) {
        self.signal.store(signal, Ordering::SeqCst);
        self.stop.store(true, Ordering::SeqCst);
    }
    pub fn requested(&self) -> Option<i32> {
        self.stop
            .load(Ordering::SeqCst)
            .then(|| self.signal.load(Ordering::SeqCst))
    }
}

/// A step that failed, as the equivalent command and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedStep {
    pub index: usize,
    pub command: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxError {
    /// A step failed; every completed step was undone.
    Failed { step: FailedStep, undone: usize },
    /// A stop was requested; every completed step was undone.
    Interrupted { signal: i32, undone: usize },
    /// The transaction failed and some undo steps failed too.
    RollbackFailed {
        cause: Box<TxError>,
        undo_failures: Vec<FailedStep>,
    },
}

impl std::fmt::Display for TxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxError::Failed { step, undone } => write!(
                f,
                "step {} failed: `{}`: {}\nrolled back the {undone} step(s) already made: the host is as it was before",
                step.index + 1,
                step.command,
                step.reason
            ),
            TxError::Interrupted { signal, undone } => write!(
                f,
                "stopped by signal {signal}; rolled back the {undone} step(s) already made: the host is as it was before"
            ),
            TxError::RollbackFailed {
                cause,
                undo_failures,
            } => {
                writeln!(f, "{cause}")?;
                writeln!(
                    f,
                    "ROLLBACK FAILED: the host is NOT as it was; these undo steps failed:"
                )?;
                for s in undo_failures {
                    writeln!(f, "  `{}`: {}", s.command, s.reason)?;
                }
                write!(f, "run them by hand or re-run apply")
            }
        }
    }
}

impl std::error::Error for TxError {}

/// Runs `ops` in order; on failure or stop, undoes what was done.
/// Returns the number of steps made.
pub async fn run<E: Effects>(
    effects: &mut E,
    ops: &[Op],
    stop: &StopFlag,
) -> Result<usize, TxError> {
    let mut journal: Vec<Op> = Vec::with_capacity(ops.len());
    for (index, op) in ops.iter().enumerate() {
        if let Some(signal) = stop.requested() {
            return Err(
                rollback(effects, journal, TxError::Interrupted { signal, undone: 0 }).await,
            );
        }
        journal.push(op.inverse());
        if let Err(reason) = effects.run(op).await {
            journal.pop(); // the step did not happen
            let step = FailedStep {
                index,
                command: render::command(op),
                reason,
            };
            return Err(rollback(effects, journal, TxError::Failed { step, undone: 0 }).await);
        }
    }
    Ok(ops.len())
}

/// Undoes the journal in reverse. Every undo step is tried even when one
/// fails, so that as much as possible is put back.
pub async fn rollback<E: Effects>(effects: &mut E, journal: Vec<Op>, cause: TxError) -> TxError {
    let undone = journal.len();
    let mut failures = Vec::new();
    for (index, undo) in journal.iter().enumerate().rev() {
        if let Err(reason) = effects.run(undo).await {
            failures.push(FailedStep {
                index,
                command: render::command(undo),
                reason,
            });
        }
    }
    let cause = match cause {
        TxError::Failed { step, .. } => TxError::Failed { step, undone },
        TxError::Interrupted { signal, .. } => TxError::Interrupted { signal, undone },
        other => other,
    };
    if failures.is_empty() {
        cause
    } else {
        TxError::RollbackFailed {
            cause: Box::new(cause),
            undo_failures: failures,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SysctlKey;

    /// Effects on a fake host: a list of sysctl values, with injectable failures.
    struct Fake {
        values: Vec<u32>,
        fail_at_call: Option<usize>,
        fail_undo: bool,
        calls: usize,
        stop_after: Option<(usize, &'static StopFlag)>,
    }

    impl Effects for Fake {
        async fn run(&mut self, op: &Op) -> Result<(), String> {
            self.calls += 1;
            if Some(self.calls) == self.fail_at_call {
                return Err("Device for nexthop is not up".into());
            }
            let Op::SetSysctl {
                iface, old, new, ..
            } = op
            else {
                unreachable!()
            };
            let i: usize = iface.trim_start_matches("rail").parse().unwrap();
            if self.fail_undo && self.calls > 1 && *new == 0 {
                return Err("EPERM".into());
            }
            assert_eq!(self.values[i], *old, "undo must see the value it recorded");
            self.values[i] = *new;
            if let Some((n, flag)) = self.stop_after {
                if self.calls == n {
                    flag.request(15);
                }
            }
            Ok(())
        }
    }

    fn ops(n: usize) -> Vec<Op> {
        (0..n)
            .map(|i| Op::SetSysctl {
                iface: format!("rail{i}"),
                key: SysctlKey::ArpIgnore,
                old: 0,
                new: 1,
            })
            .collect()
    }

    fn fake(n: usize) -> Fake {
        Fake {
            values: vec![0; n],
            fail_at_call: None,
            fail_undo: false,
            calls: 0,
            stop_after: None,
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn all_steps_run_in_order() {
        let mut f = fake(4);
        assert_eq!(block_on(run(&mut f, &ops(4), &StopFlag::default())), Ok(4));
        assert_eq!(f.values, [1, 1, 1, 1]);
    }

    #[test]
    fn failure_at_every_step_leaves_the_host_as_before() {
        for k in 1..=5 {
            let mut f = Fake {
                fail_at_call: Some(k),
                ..fake(5)
            };
            let err = block_on(run(&mut f, &ops(5), &StopFlag::default())).unwrap_err();
            assert_eq!(f.values, [0; 5], "failing at step {k}");
            match err {
                TxError::Failed { step, undone } => {
                    assert_eq!(step.index, k - 1);
                    assert_eq!(undone, k - 1);
                    assert!(
                        step.command.contains(&format!("rail{}", k - 1)),
                        "{}",
                        step.command
                    );
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn stop_request_rolls_back_before_the_next_step() {
        static FLAG: std::sync::OnceLock<StopFlag> = std::sync::OnceLock::new();
        let flag = FLAG.get_or_init(StopFlag::default);
        let mut f = Fake {
            stop_after: Some((2, flag)),
            ..fake(4)
        };
        let err = block_on(run(&mut f, &ops(4), flag)).unwrap_err();
        assert_eq!(
            err,
            TxError::Interrupted {
                signal: 15,
                undone: 2
            }
        );
        assert_eq!(f.values, [0; 4]);
    }

    #[test]
    fn failed_undo_is_reported_as_such() {
        let mut f = Fake {
            fail_at_call: Some(3),
            fail_undo: true,
            ..fake(3)
        };
        let err = block_on(run(&mut f, &ops(3), &StopFlag::default())).unwrap_err();
        let TxError::RollbackFailed { undo_failures, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(undo_failures.len(), 2);
        assert!(err.to_string().contains("ROLLBACK FAILED"));
    }
}
