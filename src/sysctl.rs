//! Per-interface IPv4 sysctls, read and written through /proc/sys.
//!
//! The interface name is used verbatim as ONE path component
//! (`/proc/sys/net/ipv4/conf/<ifname>/<key>`), which is how names with dots
//! such as `ib0.100` work. A name that could step outside that directory is
//! refused before any path is built, so no config can make roce-route write
//! to a file other than the four documented sysctls.

use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;

use crate::model::SysctlKey;

const ROOT: &str = "/proc/sys/net/ipv4/conf";

/// Why Linux would refuse `name` as an interface name, if it would
/// (`dev_valid_name()` in net/core/dev.c), or why roce-route refuses it.
pub fn ifname_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("is empty")
    } else if name.len() > 15 {
        Some("is longer than 15 bytes (IFNAMSIZ)")
    } else if name == "." || name == ".." {
        Some("is '.' or '..'")
    } else if name.contains('/') {
        Some("contains '/'")
    } else if name.contains(':') {
        Some("contains ':' (an address label, not an interface)")
    } else if name.chars().any(|c| c.is_whitespace() || c == '\0') {
        Some("contains whitespace or NUL")
    } else {
        None
    }
}

/// The /proc/sys path of a sysctl; `iface` may also be `all` or `default`.
pub fn path(iface: &str, key: SysctlKey) -> io::Result<PathBuf> {
    if let Some(why) = ifname_problem(iface) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing interface name {iface:?}: it {why}"),
        ));
    }
    Ok(PathBuf::from(ROOT).join(iface).join(key.name()))
}

/// The `sysctl` command's name for it: dots in the interface name become
/// slashes (`net.ipv4.conf.ib0/100.arp_ignore`).
pub fn dotted_name(iface: &str, key: SysctlKey) -> String {
    format!("net.ipv4.conf.{}.{}", iface.replace('.', "/"), key.name())
}

pub fn read(iface: &str, key: SysctlKey) -> io::Result<u32> {
    let p = path(iface, key)?;
    let text = fs::read_to_string(&p).map_err(|e| with_path(e, &p))?;
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
    fn sysctl_cli_name_mangles_dots() {
        assert_eq!(dotted_name("ib0.100", SysctlKey::ArpIgnore), "net.ipv4.conf.ib0/100.arp_ignore");
        assert_eq!(dotted_name("all", SysctlKey::RpFilter), "net.ipv4.conf.all.rp_filter");
    }
}
