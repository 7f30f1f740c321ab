//! AF_PACKET: ready-made Ethernet frames (from `announce`) sent out of one
//! interface. A socket belongs to the network namespace the process is in
//! when it is opened, so these are opened after `--netns` was entered.
//! Needs CAP_NET_RAW.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::libc;

use crate::announce::Mac;

/// A SOCK_RAW packet socket bound to one interface. It is bound with
/// protocol 0, so it receives nothing: it only sends.
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
}

impl PacketSocket {
    pub fn bound(ifindex: u32) -> io::Result<PacketSocket> {
        let ifindex = i32::try_from(ifindex).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))?;
        // SAFETY: socket(2) with constant arguments; the descriptor it
        // returns is owned by the OwnedFd at once.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let addr = link_address(ifindex, 0, [0; 6]);
        // SAFETY: a valid socket and a sockaddr_ll whose size is passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PacketSocket { fd, ifindex })
    }

    /// Sends one whole Ethernet frame (header included) to `dest`. Never
    /// blocks: a full queue is an error (EAGAIN/ENOBUFS), not a wait.
    pub fn send(&self, frame: &[u8], ethertype: u16, dest: Mac) -> io::Result<()> {
        let addr = link_address(self.ifindex, ethertype, dest);
        // SAFETY: a valid socket, a buffer of frame.len() bytes, and a
        // sockaddr_ll whose size is passed.
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                libc::MSG_DONTWAIT,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        match usize::try_from(sent) {
            Err(_) => Err(io::Error::last_os_error()),
            Ok(n) if n != frame.len() => {
                Err(io::Error::other(format!("the kernel took {n} of the frame's {} bytes", frame.len())))
            }
            Ok(_) => Ok(()),
        }
    }
}

/// `struct sockaddr_ll` for `ifindex`: the protocol (EtherType) in network
/// byte order, and a 6-byte destination.
fn link_address(ifindex: i32, ethertype: u16, dest: Mac) -> libc::sockaddr_ll {
    let mut sll_addr = [0u8; 8];
    sll_addr[..6].copy_from_slice(&dest);
    libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as libc::c_ushort,
        sll_protocol: ethertype.to_be(),
        sll_ifindex: ifindex,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 6,
        sll_addr,
    }
}
