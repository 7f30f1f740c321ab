//! Fault injection for tests, compiled only with the `fault-injection`
//! cargo feature (the test command enables it; the binary users install
//! has none of it: a root tool must not SIGKILL itself because an
//! environment variable says so). Without the feature every hook is an
//! empty inline function.
//!
//! - `ROCE_ROUTE_STEP_DELAY_MS=N`: block N ms before each step. The delay
//!   is a plain blocking sleep, not an await point, so it does not change
//!   how the run is scheduled: a signal is seen only through the flag its
//!   handler sets.
//! - `ROCE_ROUTE_CRASH_AT=record:K` / `step:K`: SIGKILL this process right
//!   before step K is sent (its undo is recorded: the whole plan's undo is
//!   written before step 0) / right after step K was made (from 0).
//! - `ROCE_ROUTE_CRASH_AT=journal:0`: SIGKILL right after the journal is
//!   written, before the record is (between the two state writes).
//! - `ROCE_ROUTE_CRASH_AT=committed:0`: SIGKILL right after a run is
//!   committed (before apply announces, or hands over to its guard).
//! - `ROCE_ROUTE_WATCH_RCVBUF=N`: the receive buffer of watch's
//!   notification socket, to make it overflow.
//! - `ROCE_ROUTE_GUARD_STALL=1`: the confirmation guard stops itself
//!   (SIGSTOP) before it answers anything: a guard that does not answer.
//! - `ROCE_ROUTE_PROBE_RCVBUF=N`, `ROCE_ROUTE_PROBE_DRAIN_DELAY_MS=N`: the
//!   receive buffer of probe's packet sockets, and a wait before it first
//!   reads them, to make them drop frames.
//! - `ROCE_ROUTE_PROBE_ECHO_READ_DELAY_MS=N`: probe waits N ms once its
//!   first echoes are out, before it reads their replies (queued meanwhile).
//! - `ROCE_ROUTE_RDMA_LIBS=RDMACM,IBVERBS`: the library names `probe
//!   --rdma` opens instead of librdmacm.so.1 and libibverbs.so.1, to show
//!   what a host without rdma-core is told.
//! - `ROCE_ROUTE_PANIC=1`: print a line without its newline, then panic,
//!   first thing in main: what a bug makes of the process (its exit code,
//!   what stdout held).

#[cfg(feature = "fault-injection")]
mod hooks {
    use std::sync::OnceLock;
    use std::time::Duration;

    #[derive(Debug, Default, PartialEq, Eq)]
    pub struct Hooks {
        pub step_delay: Option<Duration>,
        pub crash_after_record: Option<usize>,
        pub crash_after_step: Option<usize>,
        pub crash_after_journal: bool,
        pub crash_after_commit: bool,
    }

    /// Parses the two variables. Pure.
    pub fn parse(delay: Option<&str>, crash: Option<&str>) -> Hooks {
        let mut h = Hooks {
            step_delay: delay.and_then(|v| v.parse().ok()).map(Duration::from_millis),
            ..Hooks::default()
        };
        if let Some((point, k)) = crash.and_then(|c| c.split_once(':')) {
            let k = k.parse().ok();
            match point {
                "record" => h.crash_after_record = k,
                "step" => h.crash_after_step = k,
                "journal" => h.crash_after_journal = true,
                "committed" => h.crash_after_commit = true,
                _ => {}
            }
        }
        h
    }

    pub fn hooks() -> &'static Hooks {
        static HOOKS: OnceLock<Hooks> = OnceLock::new();
        HOOKS.get_or_init(|| {
            let delay = std::env::var("ROCE_ROUTE_STEP_DELAY_MS").ok();
            let crash = std::env::var("ROCE_ROUTE_CRASH_AT").ok();
            parse(delay.as_deref(), crash.as_deref())
        })
    }

    fn die() -> ! {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        unreachable!("SIGKILL cannot be caught")
    }

    pub fn before_step(step: usize) {
        if hooks().crash_after_record == Some(step) {
            die();
        }
    }

    pub fn after_step(step: usize) {
        if hooks().crash_after_step == Some(step) {
            die();
        }
    }

    pub fn after_journal() {
        if hooks().crash_after_journal {
            die();
        }
    }

    pub fn after_commit() {
        if hooks().crash_after_commit {
            die();
        }
    }

    pub fn step_delay() {
        if let Some(d) = hooks().step_delay {
            std::thread::sleep(d);
        }
    }

    /// `ROCE_ROUTE_WATCH_RCVBUF=N`: watch's notification socket gets a
    /// receive buffer of N bytes (the kernel's minimum at least), so that
    /// a test can make it overflow.
    pub fn watch_rcvbuf() -> Option<usize> {
        std::env::var("ROCE_ROUTE_WATCH_RCVBUF").ok()?.parse().ok()
    }

    /// `ROCE_ROUTE_GUARD_STALL=1`: the guard stops itself (SIGSTOP) at
    /// start, its socket listening and unanswered, until SIGCONT or SIGKILL.
    pub fn guard_stall() {
        if std::env::var("ROCE_ROUTE_GUARD_STALL").is_ok_and(|v| v == "1") {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
        }
    }

    /// `ROCE_ROUTE_PROBE_RCVBUF=N`: probe's packet sockets get a receive
    /// buffer of N bytes (the kernel's minimum at least).
    pub fn probe_rcvbuf() -> Option<usize> {
        std::env::var("ROCE_ROUTE_PROBE_RCVBUF").ok()?.parse().ok()
    }

    /// `ROCE_ROUTE_PROBE_DRAIN_DELAY_MS=N`: probe waits N ms after its
    /// first requests before it reads what came back.
    pub fn probe_drain_delay() {
        if let Some(ms) = std::env::var("ROCE_ROUTE_PROBE_DRAIN_DELAY_MS").ok().and_then(|v| v.parse().ok()) {
            std::thread::sleep(Duration::from_millis(ms));
        }
    }

    /// `ROCE_ROUTE_PROBE_ECHO_READ_DELAY_MS=N`: probe waits N ms once its
    /// first echoes are sent.
    pub fn probe_echo_read_delay() {
        if let Some(ms) =
            std::env::var("ROCE_ROUTE_PROBE_ECHO_READ_DELAY_MS").ok().and_then(|v| v.parse().ok())
        {
            std::thread::sleep(Duration::from_millis(ms));
        }
    }

    /// `ROCE_ROUTE_RDMA_LIBS=RDMACM,IBVERBS`: the libraries `probe --rdma`
    /// opens.
    pub fn rdma_libs() -> Option<(String, String)> {
        let v = std::env::var("ROCE_ROUTE_RDMA_LIBS").ok()?;
        let (a, b) = v.split_once(',')?;
        Some((a.to_string(), b.to_string()))
    }

    /// `ROCE_ROUTE_PANIC=1`: a partial line on stdout, then a panic.
    pub fn panic_if_asked() {
        if std::env::var("ROCE_ROUTE_PANIC").is_ok_and(|v| v == "1") {
            print!("before the panic");
            panic!("ROCE_ROUTE_PANIC=1");
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn parses_the_crash_points() {
            assert_eq!(parse(None, None), Hooks::default());
            let h = parse(Some("25"), Some("step:7"));
            assert_eq!(h.step_delay, Some(Duration::from_millis(25)));
            assert_eq!(h.crash_after_step, Some(7));
            assert_eq!(parse(None, Some("record:0")).crash_after_record, Some(0));
            assert!(parse(None, Some("journal:0")).crash_after_journal);
            assert!(parse(None, Some("committed:0")).crash_after_commit);
            assert_eq!(parse(None, Some("nonsense")), Hooks::default());
        }
    }
}

#[cfg(feature = "fault-injection")]
pub use hooks::{
    after_commit, after_journal, after_step, before_step, guard_stall, panic_if_asked, probe_drain_delay,
    probe_echo_read_delay, probe_rcvbuf, rdma_libs, step_delay, watch_rcvbuf,
};

#[cfg(not(feature = "fault-injection"))]
mod hooks {
    #[inline(always)]
    pub fn before_step(_: usize) {}
    #[inline(always)]
    pub fn after_step(_: usize) {}
    #[inline(always)]
    pub fn after_journal() {}
    #[inline(always)]
    pub fn after_commit() {}
    #[inline(always)]
    pub fn step_delay() {}
    #[inline(always)]
    pub fn watch_rcvbuf() -> Option<usize> {
        None
    }
    #[inline(always)]
    pub fn guard_stall() {}
    #[inline(always)]
    pub fn panic_if_asked() {}
    #[inline(always)]
    pub fn probe_rcvbuf() -> Option<usize> {
        None
    }
    #[inline(always)]
    pub fn probe_drain_delay() {}
    #[inline(always)]
    pub fn probe_echo_read_delay() {}
    #[inline(always)]
    pub fn rdma_libs() -> Option<(String, String)> {
        None
    }
}

#[cfg(not(feature = "fault-injection"))]
pub use hooks::{
    after_commit, after_journal, after_step, before_step, guard_stall, panic_if_asked, probe_drain_delay,
    probe_echo_read_delay, probe_rcvbuf, rdma_libs, step_delay, watch_rcvbuf,
};
