//! Names and indexes of links outside a partial link table
//! (`Netlink::connect_for`), asked one at a time with the kernel's
//! SIOCGIFNAME and SIOCGIFINDEX on a socket of the namespace (the
//! connection's dump socket): one system call each, where reading the
//! whole table to name one link is 9 ms on a node with a thousand pod
//! veths. They answer for the namespace the socket was opened in, as the
//! dumps do.

use std::os::fd::RawFd;

use nix::errno::Errno;
use nix::libc;

/// The name of link `index`; None when there is no such link (ENODEV).
pub(super) fn name_of(fd: RawFd, index: u32) -> Result<Option<String>, Errno> {
    let mut req = blank();
    req.ifr_ifru.ifru_ifindex = index as libc::c_int;
    match ioctl(fd, libc::SIOCGIFNAME, &mut req) {
        Ok(()) => {
            let bytes: Vec<u8> = req.ifr_name.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
            Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
        }
        Err(Errno::ENODEV) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The index of link `name`; None when there is no such link (ENODEV, or
/// a name no link can have: SIOCGIFINDEX would take "rail0:1" for rail0).
/// SIOCGIFINDEX also finds a link by an alternative name (`ip link
/// property add altname`): that link is not named `name`, and a step of
/// a journal naming a link gone since must not act on it, so its name is
/// asked back and must be `name`.
pub(super) fn index_of(fd: RawFd, name: &str) -> Result<Option<u32>, Errno> {
    match index_of_any(fd, name)? {
        Some(index) if name_of(fd, index)?.as_deref() == Some(name) => Ok(Some(index)),
        _ => Ok(None),
    }
}

/// SIOCGIFINDEX: the index of the link named `name` or with the
/// alternative name `name`.
fn index_of_any(fd: RawFd, name: &str) -> Result<Option<u32>, Errno> {
    let mut req = blank();
    if crate::sysctl::ifname_problem(name).is_some() {
        return Ok(None);
    }
    for (to, from) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *to = *from as libc::c_char;
    }
    match ioctl(fd, libc::SIOCGIFINDEX, &mut req) {
        // SAFETY: SIOCGIFINDEX wrote the index into this member.
        Ok(()) => Ok(Some(unsafe { req.ifr_ifru.ifru_ifindex } as u32)),
        Err(Errno::ENODEV) => Ok(None),
        Err(e) => Err(e),
    }
}

fn blank() -> libc::ifreq {
    // SAFETY: ifreq is plain data (bytes and a union of plain data), for
    // which all zeroes is a valid value.
    unsafe { std::mem::zeroed() }
}

fn ioctl(fd: RawFd, request: libc::c_ulong, req: &mut libc::ifreq) -> Result<(), Errno> {
    // SAFETY: both requests read and write one ifreq, which `req` is, for
    // the duration of the call.
    let rc = unsafe { libc::ioctl(fd, request as _, req as *mut libc::ifreq) };
    if rc < 0 { Err(Errno::last()) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    /// Both ways for lo, which every namespace has as index 1; a missing
    /// index and name are None, not an error.
    #[test]
    fn lo_both_ways_and_missing_ones_are_none() {
        // Any socket asks its namespace; this one changes nothing in it.
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        let fd = socket.as_raw_fd();
        assert_eq!(name_of(fd, 1).unwrap().as_deref(), Some("lo"));
        assert_eq!(index_of(fd, "lo").unwrap(), Some(1));
        assert_eq!(name_of(fd, u32::MAX >> 1).unwrap(), None);
        assert_eq!(index_of(fd, "no-such-link0").unwrap(), None);
        assert_eq!(index_of(fd, "a-name-far-too-long-for-a-link").unwrap(), None);
    }
}
