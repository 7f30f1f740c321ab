//! Per-interface IPv4 sysctls, read and written through /proc/sys.
//!
//! The interface name is used verbatim as ONE path component
//! (`/proc/sys/net/ipv4/conf/<ifname>/<key>`), which is how names with dots
//! such as `ib0.100` work. A name that could step outside that directory is
//! refused before any path is built, so no config can make roce-route write
//! to a file other than the four documented sysctls.
//!
//! Files are opened relative to /proc/sys/net/ipv4/conf, which each thread
//! opens once (`CONF`): the kernel then walks two components of the path,
//! not seven, and /proc/sys's are the slow kind (each compared and checked
//! by the sysctl code): 3.8 µs a read here where the full path took 5.0
//! (an apply from scratch on 8 rails reads 36 and writes 16). That
//! directory belongs to the network namespace it was opened in, whatever
//! namespace the thread is in later: `netns::enter` forgets it
//! (`forget_directory`).
//!
//! A link's reply carries its IPv4 devconf values too (IFLA_INET_CONF, the
//! same `in_device` words these files show): a run may take them from the
//! links it read instead of reading these files, while its `epoch` is the
//! one the read began in (see `epoch`).

use std::cell::RefCell;
use std::ffi::CStr;
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::SysctlKey;

const ROOT: &str = "/proc/sys/net/ipv4/conf";

/// Why Linux would refuse a name as an interface name (`dev_valid_name()`
/// in net/core/dev.c), or why roce-route refuses it (':' only labels an
/// address alias). The one definition the config and the sysctl paths use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameProblem {
    Empty,
    /// Longer than IFNAMSIZ - 1 bytes.
    TooLong,
    /// `.` or `..`.
    Dots,
    Slash,
    Colon,
    /// Whitespace or NUL.
    Blank,
}

/// The most that fits in IFNAMSIZ (16) with the terminating NUL.
pub const MAX_IFNAME_BYTES: usize = 15;

impl NameProblem {
    pub fn why(self) -> &'static str {
        match self {
            NameProblem::Empty => "is empty",
            NameProblem::TooLong => "is longer than 15 bytes (IFNAMSIZ)",
            NameProblem::Dots => "is '.' or '..'",
            NameProblem::Slash => "contains '/'",
            NameProblem::Colon => "contains ':' (an address label, not an interface)",
            NameProblem::Blank => "contains whitespace or NUL",
        }
    }
}

pub fn ifname_problem(name: &str) -> Option<NameProblem> {
    if name.is_empty() {
        Some(NameProblem::Empty)
    } else if name == "." || name == ".." {
        Some(NameProblem::Dots)
    } else if name.len() > MAX_IFNAME_BYTES {
        Some(NameProblem::TooLong)
    } else if name.contains('/') {
        Some(NameProblem::Slash)
    } else if name.contains(':') {
        Some(NameProblem::Colon)
    } else if name.chars().any(|c| c.is_whitespace() || c == '\0') {
        Some(NameProblem::Blank)
    } else {
        None
    }
}

/// An interface name that may be a path component of ROOT, or why not.
fn component(iface: &str) -> io::Result<()> {
    match ifname_problem(iface) {
        None => Ok(()),
        Some(problem) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing interface name {iface:?}: it {}", problem.why()),
        )),
    }
}

/// The /proc/sys path of a sysctl; `iface` may also be `all` or `default`.
pub fn path(iface: &str, key: SysctlKey) -> io::Result<PathBuf> {
    component(iface)?;
    // One allocation (`join` twice made three and checked each part).
    let key = key.name();
    let mut p = String::with_capacity(ROOT.len() + iface.len() + key.len() + 2);
    for part in [ROOT, "/", iface, "/", key] {
        p.push_str(part);
    }
    Ok(PathBuf::from(p))
}

/// The `sysctl` command's name for it: dots in the interface name become
/// slashes (`net.ipv4.conf.ib0/100.arp_ignore`).
pub fn dotted_name(iface: &str, key: SysctlKey) -> String {
    format!("net.ipv4.conf.{}.{}", iface.replace('.', "/"), key.name())
}

/// Reads one value with a single read(2) into a small buffer: a sysctl
/// file hands over its whole text in one read, so the size query and the
/// read that confirms the end (what `read_to_string` adds) are left out;
/// an apply reads some fifty of these.
pub fn read(iface: &str, key: SysctlKey) -> io::Result<u32> {
    crate::profile::count("sysctl_reads", 1);
    let mut buf = [0u8; 32];
    let n =
        open(iface, key, libc::O_RDONLY).and_then(|mut f| f.read(&mut buf)).map_err(|e| at(e, iface, key))?;
    parse_value(&buf[..n]).map_err(|e| at(e, iface, key))
}

thread_local! {
    /// ROOT, opened at this thread's first sysctl.
    static CONF: RefCell<Option<OwnedFd>> = const { RefCell::new(None) };
}

/// Forgets this thread's ROOT, so that the next sysctl opens the one of
/// the network namespace the thread is in now (after `setns`).
pub fn forget_directory() {
    CONF.with(|conf| conf.borrow_mut().take());
}

/// ROOT as a C string.
const ROOT_C: &CStr = c"/proc/sys/net/ipv4/conf";

/// The sysctl file, opened with `flags` (and O_CLOEXEC) relative to this
/// thread's ROOT. A ROOT that cannot be opened is the error (no file
/// under it could be); it is tried again at the next sysctl.
fn open(iface: &str, key: SysctlKey, flags: i32) -> io::Result<fs::File> {
    component(iface)?;
    // "<iface>/<key>\0": at most 15 + 1 + the longest key + 1 bytes.
    let key = key.name();
    let mut name = [0u8; 64];
    let len = iface.len() + 1 + key.len();
    name[..iface.len()].copy_from_slice(iface.as_bytes());
    name[iface.len()] = b'/';
    name[iface.len() + 1..len].copy_from_slice(key.as_bytes());
    let name = CStr::from_bytes_until_nul(&name[..=len])
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    CONF.with(|conf| {
        let mut conf = conf.borrow_mut();
        let dir = match &mut *conf {
            Some(dir) => dir,
            None => {
                // SAFETY: a constant C string; the descriptor is ours alone.
                let fd = unsafe {
                    libc::open(ROOT_C.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
                };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: a descriptor just opened, owned by nothing else.
                conf.insert(unsafe { OwnedFd::from_raw_fd(fd) })
            }
        };
        // SAFETY: a directory descriptor held open by CONF, a C string.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor just opened, owned by nothing else.
        Ok(unsafe { fs::File::from_raw_fd(fd) })
    })
}

/// The number a sysctl file holds (`"1\n"`).
fn parse_value(bytes: &[u8]) -> io::Result<u32> {
    let text = String::from_utf8_lossy(bytes);
    text.trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("not a number: {:?}", text.trim())))
}

pub fn write(iface: &str, key: SysctlKey, value: u32) -> io::Result<()> {
    write_with(iface, key, value, libc::O_WRONLY).map(drop)
}

/// Writes `value` to the file opened with `flags`, and gives the file.
fn write_with(iface: &str, key: SysctlKey, value: u32, flags: i32) -> io::Result<fs::File> {
    let written = open(iface, key, flags)
        .and_then(|mut f| f.write_all(format!("{value}\n").as_bytes()).map(|()| f))
        .map_err(|e| at(e, iface, key));
    // After the write (or its failure): a reading begun before it ended
    // may predate it.
    new_epoch();
    written
}

/// The sysctls a run wrote, their files kept open to be read back
/// (`reconcile::verify`): a read of an open file is one pread(2), where
/// `read` opens the file again through /proc/sys and closes it (two
/// system calls more, ~2.5 µs here; an apply from scratch on 8 rails
/// reads back 16). Each read asks the kernel (a sysctl file computes its
/// text at every read), so what another actor wrote since shows.
///
/// A file belongs to its interface as it was at the write: when the
/// interface is deleted, or renamed (the kernel then registers its
/// sysctls anew), the file answers ENOENT, and the value is read from the
/// path, as without the kept file: the interface of that name now.
#[derive(Debug, Default)]
pub struct Written {
    files: Vec<(String, SysctlKey, fs::File)>,
}

impl Written {
    /// The most files kept open (a run of many rails then reads the rest
    /// back by path, far from the default limit of 1,024 descriptors).
    const MOST: usize = 128;

    /// `write`, the file kept for `read`.
    pub fn write(&mut self, iface: &str, key: SysctlKey, value: u32) -> io::Result<()> {
        let file = write_with(iface, key, value, libc::O_RDWR)?;
        self.files.retain(|(i, k, _)| !(i == iface && *k == key));
        if self.files.len() < Self::MOST {
            self.files.push((iface.to_string(), key, file));
        }
        Ok(())
    }

    /// The value now: from the kept file, or from the path (see `Written`).
    pub fn read(&self, iface: &str, key: SysctlKey) -> io::Result<u32> {
        use std::os::unix::fs::FileExt;
        if let Some((_, _, file)) = self.files.iter().find(|(i, k, _)| i == iface && *k == key) {
            let mut buf = [0u8; 32];
            if let Ok(value) = file.read_at(&mut buf, 0).and_then(|n| parse_value(&buf[..n])) {
                crate::profile::count("sysctl_reads_kept", 1);
                return Ok(value);
            }
        }
        read(iface, key)
    }
}

/// Counts what this process did that may change a sysctl under a reading
/// of it taken earlier: each write of one, each take and release of the
/// namespace's lock (another run changes sysctls only under it), each
/// entry into another namespace. A value read with the links
/// (IFLA_INET_CONF) is used instead of the file only while the epoch is
/// still the one its read began in; otherwise the file is read. Between
/// two such steps nothing roce-route does changes a sysctl, and another
/// actor's change is the same race as one an instant after a read of the
/// file. (Global, not per namespace: a step in another thread only makes
/// a reading read the files.)
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// The epoch now (see `EPOCH`).
pub fn epoch() -> u64 {
    EPOCH.load(Ordering::SeqCst)
}

/// Ends the epoch: values read before now are not used without reading
/// their files (see `EPOCH`).
pub fn new_epoch() {
    EPOCH.fetch_add(1, Ordering::SeqCst);
}

/// `e` said of the sysctl's file (its full path), unless it is the
/// refusal of the name, which says what it is already.
fn at(e: io::Error, iface: &str, key: SysctlKey) -> io::Error {
    match path(iface, key) {
        Ok(p) => io::Error::new(e.kind(), format!("{}: {e}", p.display())),
        Err(_) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_escape_the_directory_are_refused() {
        for bad in ["", ".", "..", "../all", "a/b", "a b", "0123456789abcdef", "eth0:1"] {
            assert!(path(bad, SysctlKey::ArpIgnore).is_err(), "{bad:?}");
        }
        assert_eq!(
            path("ib0.100", SysctlKey::ArpIgnore).unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/conf/ib0.100/arp_ignore")
        );
    }

    #[test]
    fn a_value_is_the_number_the_file_holds() {
        assert_eq!(parse_value(b"2\n").unwrap(), 2);
        assert_eq!(parse_value(b"0").unwrap(), 0);
        let e = parse_value(b"").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let e = at(e, "all", SysctlKey::ArpIgnore);
        assert!(e.to_string().starts_with("/proc/sys/net/ipv4/conf/all/arp_ignore: not a number"), "{e}");
        assert!(parse_value(b"1 2\n").is_err(), "one number only");
    }

    #[test]
    fn the_directory_opened_is_the_root_of_the_paths() {
        assert_eq!(ROOT_C.to_str(), Ok(ROOT));
    }

    #[test]
    fn reading_names_the_file_that_is_missing() {
        let e = read("rr-no-such-if0", SysctlKey::ArpIgnore).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("/proc/sys/net/ipv4/conf/rr-no-such-if0/arp_ignore"), "{e}");
    }

    #[test]
    fn sysctl_cli_name_mangles_dots() {
        assert_eq!(dotted_name("ib0.100", SysctlKey::ArpIgnore), "net.ipv4.conf.ib0/100.arp_ignore");
        assert_eq!(dotted_name("all", SysctlKey::RpFilter), "net.ipv4.conf.all.rp_filter");
    }
}
