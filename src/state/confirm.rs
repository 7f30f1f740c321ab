//! The hand-shake of `apply --confirm`.
//!
//! Before the first step of the change, apply starts a guard: a separate
//! process (`roce-route confirm-guard`, in its own session) that listens
//! on the unix socket `confirm.sock` in the run directory of the network
//! namespace (`rundir`) and reverts the change at the deadline unless told
//! to keep it: every journal newer than the one that was the newest when
//! it was armed (`Pending::after`), finished or killed half-way. Only root
//! can create a file there, so no other local user can listen in the
//! guard's place; a user who cannot reach the socket (EACCES) sees no
//! guard, and the guard ignores a connection from any user but root and
//! its own (SO_PEERCRED). Because the guard, not the waiting apply, owns
//! the deadline from before the first netlink message, the change is
//! reverted even when apply is SIGKILLed at any instant of it. Every
//! client gets its answer from the guard itself, so `confirm` reports what
//! really happens. A guard that died (OOM, a stopped unit) leaves
//! `pending` behind: `watch` then reverts the trial itself.
//!
//! Requests and answers are one line each:
//! - `confirm` -> `kept` (the change stays) or `reverted` / `revert-failed
//!   <why>` (too late: the deadline passed first);
//! - `revert`  -> `reverted` or `revert-failed <why>` (the waiting apply
//!   got a signal);
//! - `status`  -> `waiting <seconds left> <pid of the apply>`;
//! - `wait`    -> the outcome once there is one (`kept`, `reverted`,
//!   `revert-failed <why>`);
//! - `ready`   -> `waiting ...`, then on the same connection the outcome
//!   (sent by the apply once its change is made and committed: a `confirm`
//!   that comes earlier waits for it, so that only a complete change is
//!   ever kept; without it the deadline reverts what was made).

use std::io::{self, BufRead, BufReader, ErrorKind, Write};
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::libc;
use nix::sys::socket::{self, UnixAddr, sockopt};
use serde::{Deserialize, Serialize};

use super::{StateError, rundir};

/// The guard's socket file in the run directory.
pub const SOCKET_FILE: &str = "confirm.sock";

/// Where the guard of this network namespace listens (not created).
pub fn socket_path() -> Result<PathBuf, StateError> {
    Ok(rundir::path()?.join(SOCKET_FILE))
}

/// `pending`: what check and show report while a confirmation is awaited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pending {
    /// The apply that waits (it may be gone: the guard carries on).
    pub pid: u32,
    /// The guard process.
    #[serde(default)]
    pub guard_pid: u32,
    pub deadline_unix: u64,
    /// The journal of the change (its file name), once known.
    #[serde(default)]
    pub journal: String,
    /// The newest journal's sequence number when the guard was armed
    /// (before the first step): the trial is every journal after it.
    #[serde(default)]
    pub after: Option<u64>,
    /// A random id the trial's journals carry (`JournalHeader::trial`):
    /// what the revert matches, never a pid that may be reused.
    #[serde(default)]
    pub trial: String,
    #[serde(default)]
    pub config: Option<String>,
    /// `apply --install`: the config file that enters the boot set only
    /// if the trial is confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<super::install::Install>,
}

/// A new random trial id (16 hex digits from the kernel's random pool).
pub fn new_trial_id() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The guard's answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Kept,
    Reverted,
    RevertFailed(String),
    Waiting {
        seconds_left: u64,
        apply_pid: u32,
    },
    /// No guard listens: no apply is waiting for confirmation.
    NoGuard,
}

impl Answer {
    pub fn parse(line: &str) -> Answer {
        let line = line.trim_end();
        let mut words = line.splitn(2, ' ');
        match (words.next().unwrap_or(""), words.next()) {
            ("kept", _) => Answer::Kept,
            ("reverted", _) => Answer::Reverted,
            ("revert-failed", why) => Answer::RevertFailed(why.unwrap_or("").to_string()),
            ("waiting", Some(rest)) => {
                let mut n = rest.split(' ').map(|w| w.parse::<u64>().unwrap_or(0));
                let seconds_left = n.next().unwrap_or(0);
                let apply_pid = n.next().unwrap_or(0) as u32;
                Answer::Waiting { seconds_left, apply_pid }
            }
            _ => Answer::RevertFailed(format!("unexpected answer from the confirmation guard: {line:?}")),
        }
    }

    pub fn line(&self) -> String {
        match self {
            Answer::Kept => "kept".into(),
            Answer::Reverted => "reverted".into(),
            Answer::RevertFailed(why) => format!("revert-failed {}", why.replace('\n', " | ")),
            Answer::Waiting { seconds_left, apply_pid } => format!("waiting {seconds_left} {apply_pid}"),
            Answer::NoGuard => "no-guard".into(),
        }
    }
}

/// Sends one request to the guard of this network namespace and reads its
/// answer (`timeout` None: wait as long as it takes, as `wait` does).
/// No socket, a stale one, or one this user may not reach: `NoGuard`.
pub fn ask(request: &str, timeout: Option<Duration>) -> io::Result<Answer> {
    let path = socket_path().map_err(|e| io::Error::other(e.to_string()))?;
    ask_at(&path, request, timeout)
}

pub fn ask_at(path: &Path, request: &str, timeout: Option<Duration>) -> io::Result<Answer> {
    let mut stream = match UnixStream::connect(path) {
        Ok(s) => s,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ECONNREFUSED | libc::EACCES)) => {
            return Ok(Answer::NoGuard);
        }
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    };
    stream.set_read_timeout(timeout)?;
    stream.write_all(format!("{request}\n").as_bytes())?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    if line.is_empty() {
        return Err(io::Error::new(
            ErrorKind::UnexpectedEof,
            "the confirmation guard closed the connection without an answer",
        ));
    }
    Ok(Answer::parse(&line))
}

/// How long `confirmation` waits for the guard's answer to `status`.
const STATUS_TIMEOUT: Duration = Duration::from_secs(1);

/// Whether an `apply --confirm` waits for its confirmation in this network
/// namespace: the one test every command asks (each reacts in its own way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confirmation {
    /// Nothing waits: no guard listens and no trial is left, or a guard
    /// has just decided (its answer was the outcome).
    None,
    /// A guard waits for the confirmation.
    Waiting { seconds_left: u64, apply_pid: u32 },
    /// A guard listens but does not answer (its deadline passed and it
    /// reverts, or it is starting or busy): as good as waiting. Why, as
    /// the connection said.
    Unanswered(String),
    /// No guard listens, but `pending` is left: the guard is gone without
    /// an answer (the OOM killer, a stopped unit, a kill), and its
    /// unconfirmed change may still be in place.
    Orphaned(Pending),
}

impl Confirmation {
    /// From the guard's answer to `status` and, only when no guard
    /// listens, the `pending` file.
    pub fn of(
        status: io::Result<Answer>,
        pending: impl FnOnce() -> Result<Option<Pending>, StateError>,
    ) -> Result<Confirmation, StateError> {
        Ok(match status {
            Ok(Answer::Waiting { seconds_left, apply_pid }) => {
                Confirmation::Waiting { seconds_left, apply_pid }
            }
            Ok(Answer::NoGuard) => pending()?.map_or(Confirmation::None, Confirmation::Orphaned),
            Ok(Answer::Kept | Answer::Reverted | Answer::RevertFailed(_)) => Confirmation::None,
            Err(e) => Confirmation::Unanswered(e.to_string()),
        })
    }
}

/// Asks the guard of this network namespace for its `status` and, when
/// none listens, `state`'s `pending` (None: only the guard is asked, as by
/// a user who may not read the state; an orphan is then not seen).
pub fn confirmation(state: Option<&super::StateDir>) -> Result<Confirmation, StateError> {
    let status = ask("status", Some(STATUS_TIMEOUT));
    Confirmation::of(status, || state.map_or(Ok(None), super::StateDir::pending))
}

/// The waiting apply's connection to its guard after `ready`: the guard
/// answered `waiting ...` on it and writes the outcome on it later. One
/// connection for both, so that no outcome can fall between the two (a
/// confirm that came first and a guard that exited before a second
/// connection was made).
pub struct ReadyLink {
    reader: BufReader<UnixStream>,
}

impl ReadyLink {
    /// Waits for the outcome; EOF: the guard is gone without one.
    pub fn outcome(mut self) -> io::Result<Answer> {
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        if line.is_empty() {
            return Err(io::Error::new(
                ErrorKind::UnexpectedEof,
                "the confirmation guard is gone without an answer",
            ));
        }
        Ok(Answer::parse(&line))
    }
}

/// Tells the guard the change is made (`ready`): the link to wait on for
/// the outcome, or the outcome itself when it came first.
pub fn ready(timeout: Duration) -> io::Result<Result<ReadyLink, Answer>> {
    let path = socket_path().map_err(|e| io::Error::other(e.to_string()))?;
    let mut stream = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ECONNREFUSED | libc::EACCES)) => {
            return Ok(Err(Answer::NoGuard));
        }
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    };
    stream.set_read_timeout(Some(timeout))?;
    stream.write_all(b"ready\n")?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if line.is_empty() {
        return Err(io::Error::new(
            ErrorKind::UnexpectedEof,
            "the confirmation guard is gone without an answer",
        ));
    }
    match Answer::parse(&line) {
        Answer::Waiting { .. } => {
            reader.get_ref().set_read_timeout(None)?;
            Ok(Ok(ReadyLink { reader }))
        }
        outcome => Ok(Err(outcome)),
    }
}

/// Stops the guard `pid` that apply started and gives up on (it did not
/// answer `status` in time): before the change, so there is nothing for
/// it to revert. SIGKILL (a SIGTERM asks it to revert, which waits for the
/// namespace lock the apply holds), reaped (apply's child: the pid cannot
/// be another process's meanwhile), and its socket removed, so that no
/// later command takes it for a guard that waits. Under the namespace
/// lock: nothing else binds the socket meanwhile.
pub fn stop_guard(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else { return };
    let pid = nix::unistd::Pid::from_raw(raw);
    if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).is_ok() {
        // SAFETY: waitpid only writes the status, here to no buffer.
        unsafe { libc::waitpid(raw, std::ptr::null_mut(), 0) };
    }
    if let Ok(path) = socket_path() {
        let _ = std::fs::remove_file(path);
    }
}

/// Binds the guard's socket in the run directory of this network
/// namespace (created if missing). Called under the namespace lock, so no
/// other roce-route binds meanwhile. A socket file left by a guard that
/// died refuses connections and is replaced; one that answers belongs to
/// a guard that still waits: `AddrInUse`.
pub fn bind_guard() -> Result<UnixListener, StateError> {
    let dir = rundir::ensure()?;
    bind_guard_at(&dir.join(SOCKET_FILE))
}

pub fn bind_guard_at(path: &Path) -> Result<UnixListener, StateError> {
    let io = |e: io::Error| StateError::Io { path: path.to_path_buf(), source: e };
    match UnixListener::bind(path) {
        Err(e) if e.kind() == ErrorKind::AddrInUse => {}
        bound => return bound.map_err(io),
    }
    match UnixStream::connect(path) {
        Ok(_) => {
            return Err(io(io::Error::new(
                ErrorKind::AddrInUse,
                "a confirmation guard listens there: another apply --confirm is waiting",
            )));
        }
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
        Err(e) => return Err(io(e)),
    }
    let meta = std::fs::symlink_metadata(path).map_err(io)?;
    if !meta.file_type().is_socket() {
        return Err(super::files::unsafe_path(
            path,
            "is not a unix socket",
            "remove it; roce-route creates the confirmation socket itself",
        ));
    }
    std::fs::remove_file(path).map_err(io)?;
    UnixListener::bind(path).map_err(io)
}

/// Takes `fd` as the guard's listener once it is what `apply --confirm`
/// hands over: a socket (S_IFSOCK), AF_UNIX, SOCK_STREAM, listening, and
/// bound to `expected`. Anything else is refused with what it is, and
/// `fd` is left alone.
pub fn take_listener(fd: RawFd, expected: &Path) -> Result<UnixListener, String> {
    // SAFETY: fstat only writes the stat buffer; a closed fd is EBADF.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(format!("fd {fd} is not open ({})", io::Error::last_os_error()));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(format!("fd {fd} is not a socket (file mode {:o})", st.st_mode));
    }
    // SAFETY: fstat just showed that the descriptor is open; it is only
    // borrowed for the checks below.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let domain = socket_domain(borrowed).map_err(|e| format!("fd {fd}: SO_DOMAIN: {e}"))?;
    if domain != libc::AF_UNIX {
        return Err(format!("fd {fd} is not a unix socket (address family {domain})"));
    }
    let kind =
        socket::getsockopt(&borrowed, sockopt::SockType).map_err(|e| format!("fd {fd}: SO_TYPE: {e}"))?;
    if kind != socket::SockType::Stream {
        return Err(format!("fd {fd} is a unix socket of type {kind:?}, not a stream socket"));
    }
    if !socket::getsockopt(&borrowed, sockopt::AcceptConn)
        .map_err(|e| format!("fd {fd}: SO_ACCEPTCONN: {e}"))?
    {
        return Err(format!("fd {fd} is a unix stream socket that does not listen"));
    }
    let local: UnixAddr = socket::getsockname(fd).map_err(|e| format!("fd {fd}: getsockname: {e}"))?;
    match local.path() {
        Some(p) if p == expected => {}
        Some(p) => return Err(format!("fd {fd} listens on {}, not on {}", p.display(), expected.display())),
        None => {
            return Err(format!(
                "fd {fd} listens on an unnamed or abstract address, not on {}",
                expected.display()
            ));
        }
    }
    // SAFETY: checked above to be the listening socket handed over; from
    // here on it is owned by the listener alone.
    Ok(UnixListener::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// SO_DOMAIN (nix has no option for it).
fn socket_domain(fd: BorrowedFd<'_>) -> io::Result<i32> {
    use std::os::fd::AsRawFd;
    let mut domain: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid descriptor, and an int buffer whose size is passed along.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut domain as *mut i32).cast(),
            &mut len,
        )
    };
    if rc == 0 { Ok(domain) } else { Err(io::Error::last_os_error()) }
}

/// Whether the guard may answer a connection: its peer is root or the
/// guard's own user (SO_PEERCRED). Only root can reach the socket anyway;
/// this is defence in depth.
pub fn trusted_peer(stream: &UnixStream) -> bool {
    let euid = nix::unistd::geteuid().as_raw();
    socket::getsockopt(stream, sockopt::PeerCredentials).is_ok_and(|c| c.uid() == 0 || c.uid() == euid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip() {
        for a in [
            Answer::Kept,
            Answer::Reverted,
            Answer::RevertFailed("EPERM on step 2".into()),
            Answer::Waiting { seconds_left: 17, apply_pid: 4242 },
        ] {
            assert_eq!(Answer::parse(&a.line()), a);
        }
        assert!(matches!(Answer::parse("bogus"), Answer::RevertFailed(_)));
    }

    use std::os::fd::{AsRawFd, IntoRawFd};
    use std::os::unix::fs::PermissionsExt;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("roce-route-confirm-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        dir
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_live_one_is_busy() {
        let dir = temp("bind");
        let path = dir.join(SOCKET_FILE);
        assert_eq!(ask_at(&path, "status", None).unwrap(), Answer::NoGuard, "no socket file");
        let first = bind_guard_at(&path).unwrap();
        match bind_guard_at(&path) {
            Err(StateError::Io { source, .. }) => assert_eq!(source.kind(), ErrorKind::AddrInUse),
            other => panic!("a live guard's socket was taken over: {other:?}"),
        }
        drop(first);
        assert!(path.exists(), "the socket file stays behind");
        assert_eq!(ask_at(&path, "status", None).unwrap(), Answer::NoGuard, "a stale socket");
        let _second = bind_guard_at(&path).expect("a stale socket is replaced");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_regular_file_in_the_socket_s_place_is_refused() {
        let dir = temp("file");
        let path = dir.join(SOCKET_FILE);
        std::fs::write(&path, b"x").unwrap();
        assert!(matches!(bind_guard_at(&path), Err(StateError::Unsafe { .. })));
        assert_eq!(std::fs::read(&path).unwrap(), b"x");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_the_listening_socket_at_the_expected_path_is_taken_as_the_guard_s() {
        let dir = temp("fd");
        let path = dir.join(SOCKET_FILE);
        let refused = |fd: RawFd, expected: &Path, what: &str, says: &str| match take_listener(fd, expected) {
            Ok(_) => panic!("{what} was taken as the guard's listener"),
            Err(why) => assert!(why.contains(says), "{what}: {why:?} does not say {says:?}"),
        };
        let file = std::fs::File::create(dir.join("plain")).unwrap();
        refused(file.as_raw_fd(), &path, "a regular file", "not a socket");
        let (r, _w) = nix::unistd::pipe().unwrap();
        refused(r.as_raw_fd(), &path, "a pipe", "not a socket");
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        refused(udp.as_raw_fd(), &path, "a UDP socket", "not a unix socket");
        let dgram = std::os::unix::net::UnixDatagram::bind(dir.join("dgram")).unwrap();
        refused(dgram.as_raw_fd(), &path, "a unix datagram socket", "not a stream socket");
        let elsewhere = UnixListener::bind(dir.join("elsewhere.sock")).unwrap();
        refused(elsewhere.as_raw_fd(), &path, "a listener bound elsewhere", "elsewhere.sock");
        let (stream, _peer) = UnixStream::pair().unwrap();
        refused(stream.as_raw_fd(), &path, "a connected stream", "does not listen");
        refused(9999, &path, "a closed descriptor", "not open");

        let guard = bind_guard_at(&path).unwrap();
        let fd = guard.into_raw_fd();
        let listener = take_listener(fd, &path).expect("the socket apply hands over");
        assert_eq!(listener.as_raw_fd(), fd);
        let client = UnixStream::connect(&path).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert!(trusted_peer(&accepted), "a connection of this very user");
        drop(client);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn pending() -> Pending {
        Pending {
            pid: 10,
            guard_pid: 11,
            deadline_unix: 0,
            journal: String::new(),
            after: Some(3),
            trial: "ab".into(),
            config: None,
            install: None,
        }
    }

    /// One answer per situation; `pending` is read only when no guard
    /// listens (a waiting guard owns its trial), and an unreadable
    /// `pending` is an error, not "nothing waits".
    #[test]
    fn confirmation_tells_waiting_unanswered_orphaned_and_none_apart() {
        let unread =
            || -> Result<Option<Pending>, StateError> { panic!("pending read with a guard listening") };
        let waiting = Ok(Answer::Waiting { seconds_left: 5, apply_pid: 42 });
        assert_eq!(
            Confirmation::of(waiting, unread).unwrap(),
            Confirmation::Waiting { seconds_left: 5, apply_pid: 42 }
        );
        let silent = Err(io::Error::new(ErrorKind::WouldBlock, "timed out"));
        assert_eq!(Confirmation::of(silent, unread).unwrap(), Confirmation::Unanswered("timed out".into()));
        for decided in [Answer::Kept, Answer::Reverted, Answer::RevertFailed("x".into())] {
            assert_eq!(Confirmation::of(Ok(decided), unread).unwrap(), Confirmation::None);
        }
        assert_eq!(Confirmation::of(Ok(Answer::NoGuard), || Ok(None)).unwrap(), Confirmation::None);
        assert_eq!(
            Confirmation::of(Ok(Answer::NoGuard), || Ok(Some(pending()))).unwrap(),
            Confirmation::Orphaned(pending())
        );
        let corrupt = || Err(super::super::files::corrupt(Path::new("pending"), "bad"));
        assert!(matches!(Confirmation::of(Ok(Answer::NoGuard), corrupt), Err(StateError::Corrupt { .. })));
    }

    /// Against a real socket: a guard that answers `status` waits, one
    /// that accepts and stays silent does not answer.
    #[test]
    fn a_silent_guard_is_unanswered_and_a_talking_one_waits() {
        let dir = temp("status");
        let path = dir.join(SOCKET_FILE);
        let listener = bind_guard_at(&path).unwrap();
        let guard = std::thread::spawn(move || {
            let (talking, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&talking).read_line(&mut line).unwrap();
            (&talking).write_all(b"waiting 9 77\n").unwrap();
            let (silent, _) = listener.accept().unwrap();
            std::thread::sleep(Duration::from_millis(400));
            drop(silent);
        });
        let status = |t| Confirmation::of(ask_at(&path, "status", Some(t)), || Ok(None)).unwrap();
        assert_eq!(status(STATUS_TIMEOUT), Confirmation::Waiting { seconds_left: 9, apply_pid: 77 });
        assert!(matches!(status(Duration::from_millis(100)), Confirmation::Unanswered(_)));
        guard.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
