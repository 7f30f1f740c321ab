//! AF_PACKET: ready-made announcements (from `announce`), each sent out of its
//! interface. A socket belongs to the network namespace the process is in
//! when it is opened, so these are opened after `--netns` was entered.
//! Needs CAP_NET_RAW.
//!
//! On Ethernet the socket is SOCK_RAW and is given whole frames. On IPoIB
//! it is SOCK_DGRAM, as iputils `arping` sends there: the IPoIB driver
//! writes its own 4-byte header and takes the 20-byte destination (QPN and
//! GID) from the socket address. `struct sockaddr_ll` has room for 8 bytes
//! of address only; the kernel reads as many as the address length passed
//! covers (`packet_snd()` wants at least `offsetof(sll_addr) + addr_len`
//! of the device), so the address is built in a larger buffer and passed
//! with that length, as arping does (`sll_len()`: a `sockaddr_storage`,
//! and the length `offsetof(struct sockaddr_ll, sll_addr) + halen`, never
//! less than the struct).

use std::io;

use nix::libc;
use socket2::{Domain, SockAddr, SockAddrStorage, Socket, Type};

/// A packet socket that sends out of any interface of its namespace: each
/// frame names its interface (`sll_ifindex`), so one socket serves every
/// rail. It is bound to nothing and opened with protocol 0, so it receives
/// nothing: it only sends.
///
/// One, not one per interface: closing a packet socket waits for an RCU
/// grace period (`packet_release()` calls `synchronize_net()`), 8-16 ms
/// each on a 2-CPU VM, so eight sockets cost an apply on 8 rails ~80 ms
/// at their close (measured, bench/README "eighteenth session"); the
/// process keeps its one (`commands::tell`).
pub struct PacketSocket {
    socket: Socket,
    /// The frames its send buffer was last made room for (`make_room`).
    room: usize,
}

impl PacketSocket {
    /// `link_header`: SOCK_RAW, frames carry their link-layer header
    /// (Ethernet); otherwise SOCK_DGRAM, the driver writes it (IPoIB).
    pub fn open(link_header: bool) -> io::Result<PacketSocket> {
        let kind = if link_header { Type::RAW } else { Type::DGRAM };
        // socket2 opens it close-on-exec; protocol None is 0.
        let socket = Socket::new(Domain::PACKET, kind, None)?;
        crate::profile::count("packet_sockets", 1);
        Ok(PacketSocket { socket, room: DEFAULT_FRAMES })
    }

    /// Room in the send buffer for `frames` frames in flight at once (all
    /// the rails' announcements of a round share this socket): asked for
    /// past the default's ~270 small frames only, and forced (root), since
    /// `wmem_max` caps a plain request at that default; never shrunk. A
    /// refusal keeps the default: a frame that finds it full is then
    /// reported unsent.
    pub fn make_room(&mut self, frames: usize) {
        const PER_FRAME: usize = 1024;
        if frames > self.room {
            let bytes = frames.saturating_mul(PER_FRAME).min(i32::MAX as usize / 2);
            let _ =
                nix::sys::socket::setsockopt(&self.socket, nix::sys::socket::sockopt::SndBufForce, &bytes);
            self.room = frames;
        }
    }

    /// Sends `packet` out of `ifindex` with link-layer protocol `protocol`
    /// (EtherType) to the link-layer address `dest`. Never blocks: a full
    /// queue is an error (EAGAIN/ENOBUFS), not a wait.
    pub fn send(&self, ifindex: u32, packet: &[u8], protocol: u16, dest: &[u8]) -> io::Result<()> {
        send_to_link(&self.socket, ifindex, packet, protocol, dest)
    }
}

/// Closes packet sockets at once. Each close waits for an RCU grace period
/// (see `PacketSocket`), and closes waiting together share one: probe's
/// three, closed in turn at its end, took 31 ms of an 86 ms run here
/// (strace), and three closed on threads of their own take one grace
/// period, 16 ms, where in turn they took 28-40 (C, this VM). Each socket
/// but the first is closed on a thread of its own (a thread that cannot be
/// made closes it here), the first on this one; returns when all are
/// closed.
pub fn close_together(sockets: Vec<Socket>) {
    let mut sockets = sockets.into_iter();
    let first = sockets.next();
    std::thread::scope(|scope| {
        for socket in sockets {
            crate::profile::count("packet_closes_beside", 1);
            // Refused, the closure is dropped with the socket: closed here.
            let _ = std::thread::Builder::new()
                .name("close".into())
                .stack_size(64 * 1024)
                .spawn_scoped(scope, move || drop(socket));
        }
        drop(first);
    });
}

/// The frames a socket's default send buffer (212,992 bytes) surely holds
/// in flight: ~270 of the size of an announcement (a 42-byte frame takes
/// ~768 bytes of it).
const DEFAULT_FRAMES: usize = 200;

/// Sends `packet` out of `ifindex` on a packet socket (`probe`'s too),
/// to the link-layer address `dest` (however long: see the module), with
/// MSG_DONTWAIT. A packet the kernel takes only part of is an error.
pub fn send_to_link(
    socket: &Socket,
    ifindex: u32,
    packet: &[u8],
    protocol: u16,
    dest: &[u8],
) -> io::Result<()> {
    send_with_flags(socket, ifindex, packet, protocol, dest, libc::MSG_DONTWAIT)
}

/// The same on a blocking socket, without MSG_DONTWAIT: a full send
/// buffer waits rather than drops (`probe`'s echoes, sent in bursts).
pub fn send_to_link_waiting(
    socket: &Socket,
    ifindex: u32,
    packet: &[u8],
    protocol: u16,
    dest: &[u8],
) -> io::Result<()> {
    send_with_flags(socket, ifindex, packet, protocol, dest, 0)
}

fn send_with_flags(
    socket: &Socket,
    ifindex: u32,
    packet: &[u8],
    protocol: u16,
    dest: &[u8],
    flags: libc::c_int,
) -> io::Result<()> {
    let addr = link_sockaddr(ifindex, protocol, dest)?;
    let n = socket.send_to_with_flags(packet, &addr, flags)?;
    if n != packet.len() {
        return Err(io::Error::other(format!("the kernel took {n} of the packet's {} bytes", packet.len())));
    }
    Ok(())
}

/// `link_address` as the socket address socket2 passes to bind(2) and
/// sendto(2), with its length.
fn link_sockaddr(ifindex: u32, protocol: u16, dest: &[u8]) -> io::Result<SockAddr> {
    let ifindex = i32::try_from(ifindex).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))?;
    if dest.len() > MAX_HALEN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a {}-byte link-layer address is longer than any link's", dest.len()),
        ));
    }
    let (addr, len) = storage(&link_address(ifindex, protocol, dest));
    let mut st = SockAddrStorage::zeroed();
    // SAFETY: sockaddr_storage is this platform's own storage type (what
    // view_as asks); it holds an AF_PACKET address of `len` bytes, built
    // by `link_address` (what SockAddr::new asks).
    unsafe {
        *st.view_as::<libc::sockaddr_storage>() = addr;
        Ok(SockAddr::new(st, len))
    }
}

/// MAX_ADDR_LEN: the longest hardware address a Linux device has.
const MAX_HALEN: usize = 32;

/// `struct sockaddr_ll` for `ifindex` as bytes, with `dest` in `sll_addr`
/// however long it is: family AF_PACKET, the protocol in network byte
/// order, the index, hatype and pkttype 0 (the kernel ignores them on
/// send), `sll_halen`, the address. Its length is arping's `sll_len()`:
/// the address's end, but never less than `sizeof(struct sockaddr_ll)`
/// (20 bytes, whose `sll_addr` holds 8).
fn link_address(ifindex: i32, protocol: u16, dest: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(SLL_ADDR_OFFSET + dest.len().max(8));
    b.extend_from_slice(&(libc::AF_PACKET as u16).to_ne_bytes()); // sll_family
    b.extend_from_slice(&protocol.to_be_bytes()); // sll_protocol
    b.extend_from_slice(&ifindex.to_ne_bytes()); // sll_ifindex
    b.extend_from_slice(&0u16.to_ne_bytes()); // sll_hatype
    b.push(0); // sll_pkttype
    b.push(dest.len() as u8); // sll_halen
    b.extend_from_slice(dest); // sll_addr
    b.resize(b.len().max(std::mem::size_of::<libc::sockaddr_ll>()), 0);
    b
}

/// offsetof(struct sockaddr_ll, sll_addr).
const SLL_ADDR_OFFSET: usize = 12;

/// The bytes in a zeroed, suitably aligned `sockaddr_storage`, and their
/// length.
fn storage(bytes: &[u8]) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain bytes; all zeros is a valid value.
    let mut s: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = bytes.len().min(std::mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: `len` bytes fit in both: `bytes` has them and `s` is at least
    // that large.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&mut s as *mut libc::sockaddr_storage).cast(), len)
    };
    (s, len as libc::socklen_t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of a value (for comparing with libc's own structs).
    fn bytes_of<T>(v: &T) -> Vec<u8> {
        // SAFETY: reads size_of::<T>() bytes of a live value; the structs
        // compared here have no padding (checked by their sizes below).
        unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }.to_vec()
    }

    #[test]
    fn the_layout_is_libcs_sockaddr_ll() {
        assert_eq!(std::mem::offset_of!(libc::sockaddr_ll, sll_addr), SLL_ADDR_OFFSET);
        assert_eq!(std::mem::size_of::<libc::sockaddr_ll>(), 20);
        assert!(std::mem::size_of::<libc::sockaddr_storage>() >= SLL_ADDR_OFFSET + MAX_HALEN);
        // An Ethernet destination: exactly the struct libc describes.
        let dest = [0x33, 0x33, 0, 0, 0, 1];
        let mut sll_addr = [0u8; 8];
        sll_addr[..6].copy_from_slice(&dest);
        let libc_one = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as libc::c_ushort,
            sll_protocol: 0x86ddu16.to_be(),
            sll_ifindex: 7,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 6,
            sll_addr,
        };
        assert_eq!(link_address(7, 0x86dd, &dest), bytes_of(&libc_one));
    }

    /// The address arping passes to sendto() on IPoIB, written out by hand
    /// for ifindex 5 (little-endian host: family and index are in host
    /// order, the protocol in network order): 12 bytes of header, then all
    /// 20 bytes of the broadcast address of partition 0x8001, 32 bytes in
    /// all (`sll_len(20)` = offsetof(sll_addr) 12 + 20).
    #[test]
    #[cfg(target_endian = "little")]
    fn an_ipoib_destination_runs_past_the_struct_as_arpings_does() {
        let broadcast: [u8; 20] = [
            0, 0xff, 0xff, 0xff, 0xff, 0x12, 0x40, 0x1b, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
        ];
        let got = link_address(5, 0x0806, &broadcast);
        let mut expected = vec![
            17, 0, // sll_family AF_PACKET (17)
            0x08, 0x06, // sll_protocol ETH_P_ARP, network order
            5, 0, 0, 0, // sll_ifindex
            0, 0,  // sll_hatype
            0,  // sll_pkttype
            20, // sll_halen
        ];
        expected.extend_from_slice(&broadcast);
        assert_eq!(got, expected);
        assert_eq!(got.len(), 32);
        let (s, len) = storage(&got);
        assert_eq!(len, 32);
        assert_eq!(bytes_of(&s)[..32], got[..]);
        assert!(bytes_of(&s)[32..].iter().all(|b| *b == 0));
        // The bind address: no destination, the bare struct.
        assert_eq!(link_address(5, 0, &[]).len(), 20);
    }
}
