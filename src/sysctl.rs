//! Per-interface IPv4 sysctls, read and written through /proc/sys.
//!
//! The interface name is used verbatim as ONE path component
//! (`/proc/sys/net/ipv4/conf/<ifname>/<key>`), which is how names with dots
//! such as `ib0.100` work. A name that could step outside that directory is
//! refused before any path is built, so no config can make roce-route write
//! to a file other than the four documented sysctls.

use std::fs;
use std::io::{self, Read, Write};
use std::path::PathBuf;

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

/// The /proc/sys path of a sysctl; `iface` may also be `all` or `default`.
pub fn path(iface: &str, key: SysctlKey) -> io::Result<PathBuf> {
    if let Some(problem) = ifname_problem(iface) {
        let why = problem.why();
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing interface name {iface:?}: it {why}"),
        ));
    }
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
    let p = path(iface, key)?;
    let mut buf = [0u8; 32];
    let n = fs::File::open(&p).and_then(|mut f| f.read(&mut buf)).map_err(|e| with_path(e, &p))?;
    parse_value(&buf[..n], &p)
}

/// The number a sysctl file holds (`"1\n"`).
fn parse_value(bytes: &[u8], p: &std::path::Path) -> io::Result<u32> {
    let text = String::from_utf8_lossy(bytes);
    text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a number: {:?}", p.display(), text.trim()),
        )
    })
}

pub fn write(iface: &str, key: SysctlKey, value: u32) -> io::Result<()> {
    let p = path(iface, key)?;
    let mut f = fs::OpenOptions::new().write(true).open(&p).map_err(|e| with_path(e, &p))?;
    f.write_all(format!("{value}\n").as_bytes()).map_err(|e| with_path(e, &p))
}

fn with_path(e: io::Error, p: &std::path::Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", p.display()))
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
        let p = std::path::Path::new("/proc/sys/net/ipv4/conf/all/arp_ignore");
        assert_eq!(parse_value(b"2\n", p).unwrap(), 2);
        assert_eq!(parse_value(b"0", p).unwrap(), 0);
        let e = parse_value(b"", p).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().starts_with("/proc/sys/net/ipv4/conf/all/arp_ignore: not a number"), "{e}");
        assert!(parse_value(b"1 2\n", p).is_err(), "one number only");
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
