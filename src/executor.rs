//! The one executor: runs an ordered plan as a transaction.
//!
//! Netlink has no transactions, so this builds one: before each step runs,
//! its inverse is pushed on an undo journal; on any failure, or when asked
//! to stop (SIGINT/SIGTERM/SIGHUP), every completed step is undone in
//! reverse order. The effects themselves (netlink, /proc/sys) sit behind
//! the `Effects` trait so that the rollback logic is tested without a kernel.

use nix::errno::Errno;

use crate::model::Op;
use crate::render;
pub use crate::signals::StopFlag;

/// Why a step failed: the errno when there is one, and the text to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepFailure {
    pub errno: Option<Errno>,
    pub message: String,
}

impl From<String> for StepFailure {
    fn from(message: String) -> Self {
        StepFailure { errno: None, message }
    }
}

impl From<&str> for StepFailure {
    fn from(message: &str) -> Self {
        StepFailure { errno: None, message: message.to_string() }
    }
}

/// Something that can carry out one operation.
pub trait Effects {
    /// Runs `op`; the error is the kernel's (or the file system's) reason.
    fn run(&mut self, op: &Op) -> impl std::future::Future<Output = Result<(), StepFailure>>;
}

/// Where the undo journal goes. `record` gets the inverse of every step
/// and must make them durable BEFORE it returns: it is called once, before
/// the first step is sent (write-ahead), so that a crash at any instant
/// leaves a journal that covers every change made.
pub trait Recorder {
    fn record(&mut self, undo: &[Op]) -> Result<(), String>;
    /// Called just before step `step` is sent.
    fn before_step(&mut self, _step: usize) {}
    /// Called once step `step` has been made.
    fn step_done(&mut self, _step: usize) {}
}

/// No durable journal (dry runs, tests).
impl Recorder for () {
    fn record(&mut self, _: &[Op]) -> Result<(), String> {
        Ok(())
    }
}

impl TxError {
    /// A failure that another actor changing the host between our read
    /// and our write explains (an entry appeared or vanished, an interface
    /// went away), after a clean rollback: reading again and retrying can
    /// converge.
    pub fn is_race(&self) -> bool {
        matches!(self, TxError::Failed { step, .. }
            if matches!(step.errno, Some(Errno::EEXIST | Errno::ESRCH | Errno::ENOENT | Errno::ENODEV)))
    }
}

/// An undo step whose effect is already there: deleting what is gone,
/// adding what exists, or touching an interface that no longer exists (the
/// kernel removed its routes and its sysctls with it). Undo steps are
/// replayed after a crash, when the step they undo may never have been
/// sent, so these count as done.
pub fn already_undone(undo: &Op, errno: Option<Errno>) -> bool {
    use Errno::{EEXIST, ENODEV, ENOENT, ESRCH};
    matches!(
        (undo, errno),
        (Op::DelRoute { .. } | Op::DelRule { .. }, Some(ENOENT | ESRCH))
            | (Op::AddRule { .. } | Op::AddRoute { .. }, Some(EEXIST))
            | (
                Op::DelRoute { .. } | Op::AddRoute { .. } | Op::ReplaceRoute { .. } | Op::RestoreRoute { .. },
                Some(ENODEV)
            )
            | (Op::SetSysctl { .. }, Some(ENOENT))
    )
}

/// A step that failed, as the equivalent command and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedStep {
    pub index: usize,
    pub command: String,
    pub reason: String,
    pub errno: Option<Errno>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxError {
    /// A step failed; every completed step was undone.
    Failed { step: FailedStep, undone: usize },
    /// A stop was requested; every completed step was undone.
    Interrupted { signal: i32, undone: usize },
    /// The transaction failed and some undo steps failed too.
    RollbackFailed { cause: Box<TxError>, undo_failures: Vec<FailedStep> },
    /// Undoing a finished run (rollback, unconfirmed apply) failed part-way.
    UndoFailed { what: String, undo_failures: Vec<FailedStep> },
}

impl std::fmt::Display for TxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxError::Failed { step, undone } => write!(
                f,
                "step {} failed: `{}`: {}\n{}",
                step.index + 1,
                step.command,
                step.reason,
                rolled_back(*undone)
            ),
            TxError::Interrupted { signal, undone } => {
                write!(f, "stopped by {}; {}", crate::signals::name(*signal), rolled_back(*undone))
            }
            TxError::RollbackFailed { cause, undo_failures } => {
                let cause = cause.to_string();
                let cause = cause.split("\nrolled back").next().unwrap_or(&cause);
                writeln!(f, "{cause}")?;
                write_undo_failures(f, "ROLLBACK FAILED", undo_failures)
            }
            TxError::UndoFailed { what, undo_failures } => write_undo_failures(f, what, undo_failures),
        }
    }
}

impl std::error::Error for TxError {}

/// "rolled back the 3 steps already made: ..." or "nothing had been changed".
fn rolled_back(undone: usize) -> String {
    match undone {
        0 => "no step had been made: the host is as it was before".to_string(),
        n => format!(
            "rolled back the {}: the host is as it was before",
            crate::render::count(n, "step already made", "steps already made")
        ),
    }
}

fn write_undo_failures(
    f: &mut std::fmt::Formatter<'_>,
    what: &str,
    failures: &[FailedStep],
) -> std::fmt::Result {
    writeln!(f, "{what}: the host is NOT as it was; these undo steps failed:")?;
    for s in failures {
        writeln!(f, "  `{}`: {}", s.command, s.reason)?;
    }
    write!(
        f,
        "fix what the kernel complains about and run `roce-route rollback` again (undo steps already made are skipped)"
    )
}

/// Runs `ops` in order; on failure or stop, undoes what was done.
/// Returns the number of steps made.
pub async fn run<E: Effects, R: Recorder>(
    effects: &mut E,
    ops: &[Op],
    stop: &StopFlag,
    recorder: &mut R,
) -> Result<usize, TxError> {
    let undo: Vec<Op> = ops.iter().map(Op::inverse).collect();
    if let Err(reason) = recorder.record(&undo) {
        let reason = format!("cannot write the undo journal: {reason}");
        let step = FailedStep { index: 0, command: "(before the first step)".into(), reason, errno: None };
        return Err(TxError::Failed { step, undone: 0 });
    }
    let mut journal: Vec<Op> = Vec::with_capacity(ops.len());
    for (index, (op, inverse)) in ops.iter().zip(undo).enumerate() {
        if let Some(signal) = stop.requested() {
            let cause = TxError::Interrupted { signal, undone: 0 };
            return Err(rollback(effects, journal, cause).await);
        }
        recorder.before_step(index);
        if let Err(failure) = effects.run(op).await {
            let reason = failure.message;
            let step = FailedStep { index, command: render::command(op), reason, errno: failure.errno };
            return Err(rollback(effects, journal, TxError::Failed { step, undone: 0 }).await);
        }
        journal.push(inverse);
        recorder.step_done(index);
    }
    // A signal during the last step still stops the run: nothing is
    // committed after a stop was asked for.
    if let Some(signal) = stop.requested() {
        return Err(rollback(effects, journal, TxError::Interrupted { signal, undone: 0 }).await);
    }
    Ok(ops.len())
}

/// Runs undo steps newest first, every one even when some fail; returns
/// the failures. Steps whose effect is already there count as done.
pub async fn undo_all<E: Effects>(effects: &mut E, journal: &[Op]) -> Vec<FailedStep> {
    let mut failures = Vec::new();
    for (index, undo) in journal.iter().enumerate().rev() {
        if let Err(f) = effects.run(undo).await
            && !already_undone(undo, f.errno)
        {
            let command = render::command(undo);
            failures.push(FailedStep { index, command, reason: f.message, errno: f.errno });
        }
    }
    failures
}

/// Undoes the journal in reverse. Every undo step is tried even when one
/// fails, so that as much as possible is put back.
pub async fn rollback<E: Effects>(effects: &mut E, journal: Vec<Op>, cause: TxError) -> TxError {
    let undone = journal.len();
    let failures = undo_all(effects, &journal).await;
    let cause = match cause {
        TxError::Failed { step, .. } => TxError::Failed { step, undone },
        TxError::Interrupted { signal, .. } => TxError::Interrupted { signal, undone },
        other => other,
    };
    if failures.is_empty() {
        cause
    } else {
        TxError::RollbackFailed { cause: Box::new(cause), undo_failures: failures }
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
        async fn run(&mut self, op: &Op) -> Result<(), StepFailure> {
            self.calls += 1;
            if Some(self.calls) == self.fail_at_call {
                return Err(StepFailure::from("Device for nexthop is not up"));
            }
            let Op::SetSysctl { iface, old, new, .. } = op else { unreachable!() };
            let i: usize = iface.trim_start_matches("rail").parse().unwrap();
            if self.fail_undo && self.calls > 1 && *new == 0 {
                return Err(StepFailure::from("EPERM"));
            }
            assert_eq!(self.values[i], *old, "undo must see the value it recorded");
            self.values[i] = *new;
            if let Some((n, flag)) = self.stop_after
                && self.calls == n
            {
                flag.request(15);
            }
            Ok(())
        }
    }

    fn ops(n: usize) -> Vec<Op> {
        (0..n)
            .map(|i| Op::SetSysctl { iface: format!("rail{i}"), key: SysctlKey::ArpIgnore, old: 0, new: 1 })
            .collect()
    }

    fn fake(n: usize) -> Fake {
        Fake { values: vec![0; n], fail_at_call: None, fail_undo: false, calls: 0, stop_after: None }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    }

    #[test]
    fn all_steps_run_in_order() {
        let mut f = fake(4);
        assert_eq!(block_on(run(&mut f, &ops(4), &StopFlag::default(), &mut ())), Ok(4));
        assert_eq!(f.values, [1, 1, 1, 1]);
    }

    #[test]
    fn failure_at_every_step_leaves_the_host_as_before() {
        for k in 1..=5 {
            let mut f = Fake { fail_at_call: Some(k), ..fake(5) };
            let err = block_on(run(&mut f, &ops(5), &StopFlag::default(), &mut ())).unwrap_err();
            assert_eq!(f.values, [0; 5], "failing at step {k}");
            match err {
                TxError::Failed { step, undone } => {
                    assert_eq!(step.index, k - 1);
                    assert_eq!(undone, k - 1);
                    assert!(step.command.contains(&format!("rail{}", k - 1)), "{}", step.command);
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn stop_during_the_last_step_rolls_everything_back() {
        static FLAG: std::sync::OnceLock<StopFlag> = std::sync::OnceLock::new();
        let flag = FLAG.get_or_init(StopFlag::default);
        let mut f = Fake { stop_after: Some((3, flag)), ..fake(3) };
        let err = block_on(run(&mut f, &ops(3), flag, &mut ())).unwrap_err();
        assert_eq!(err, TxError::Interrupted { signal: 15, undone: 3 });
        assert_eq!(f.values, [0; 3]);
    }

    #[test]
    fn stop_request_rolls_back_before_the_next_step() {
        static FLAG: std::sync::OnceLock<StopFlag> = std::sync::OnceLock::new();
        let flag = FLAG.get_or_init(StopFlag::default);
        let mut f = Fake { stop_after: Some((2, flag)), ..fake(4) };
        let err = block_on(run(&mut f, &ops(4), flag, &mut ())).unwrap_err();
        assert_eq!(err, TxError::Interrupted { signal: 15, undone: 2 });
        assert_eq!(f.values, [0; 4]);
    }

    #[test]
    fn journal_is_written_before_the_first_step_and_a_journal_failure_aborts() {
        struct Rec {
            recorded: usize,
            fail: bool,
        }
        impl Recorder for Rec {
            fn record(&mut self, undo: &[Op]) -> Result<(), String> {
                if self.fail {
                    return Err("No space left on device".into());
                }
                self.recorded = undo.len();
                Ok(())
            }
            fn before_step(&mut self, step: usize) {
                assert_eq!(self.recorded, 3, "every undo is durable before step {step}");
            }
        }
        let mut f = fake(3);
        let mut rec = Rec { recorded: 0, fail: false };
        block_on(run(&mut f, &ops(3), &StopFlag::default(), &mut rec)).unwrap();
        assert_eq!(rec.recorded, 3);
        let mut f = fake(3);
        let mut rec = Rec { recorded: 0, fail: true };
        let err = block_on(run(&mut f, &ops(3), &StopFlag::default(), &mut rec)).unwrap_err();
        assert!(
            matches!(&err, TxError::Failed { step, undone: 0 } if step.reason.contains("journal")),
            "{err:?}"
        );
        assert_eq!((f.calls, f.values), (0, vec![0; 3]), "nothing is sent without a journal");
    }

    #[test]
    fn undoing_what_is_already_undone_is_fine() {
        use crate::model::Rule;
        let rule = Rule::source(1, "198.51.100.1".parse().unwrap(), 100, 234);
        assert!(already_undone(&Op::DelRule { rule: rule.clone(), raw: None }, Some(Errno::ENOENT)));
        assert!(already_undone(&Op::AddRule { rule: rule.clone(), raw: None }, Some(Errno::EEXIST)));
        assert!(!already_undone(&Op::AddRule { rule, raw: None }, Some(Errno::EPERM)));
        let gone = Op::SetSysctl { iface: "rail9".into(), key: SysctlKey::ArpIgnore, old: 1, new: 0 };
        assert!(already_undone(&gone, Some(Errno::ENOENT)), "the interface and its sysctls are gone");
        let route = crate::model::Route::connected(
            100,
            crate::model::prefix("198.51.100.0/24"),
            "rail9",
            "198.51.100.19".parse().unwrap(),
            234,
        );
        assert!(already_undone(&Op::DelRoute { route, raw: None }, Some(Errno::ENODEV)));
    }

    #[test]
    fn failed_undo_is_reported_as_such() {
        let mut f = Fake { fail_at_call: Some(3), fail_undo: true, ..fake(3) };
        let err = block_on(run(&mut f, &ops(3), &StopFlag::default(), &mut ())).unwrap_err();
        let TxError::RollbackFailed { undo_failures, .. } = &err else { panic!("{err:?}") };
        assert_eq!(undo_failures.len(), 2);
        assert!(err.to_string().contains("ROLLBACK FAILED"));
    }
}
