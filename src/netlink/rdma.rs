//! RDMA netlink (NETLINK_RDMA, the nldev interface `rdma link` reads):
//! which netdev each RDMA port has *in this network namespace*.
//!
//! In the kernel's default shared RDMA netns mode every namespace sees every
//! RDMA device in /sys/class/infiniband, and a device's `gid_attrs/ndevs`
//! name its netdev by name only, whichever namespace that netdev is in. Two
//! hosts (containers, test namespaces) with rails of the same names cannot
//! be told apart there. The kernel's answer to RDMA_NLDEV_CMD_PORT_GET
//! carries RDMA_NLDEV_ATTR_NDEV_INDEX/NAME only when the port's netdev is in
//! the asking socket's namespace (fill_port_info() in
//! drivers/infiniband/core/nldev.c checks `net_eq(dev_net(netdev), net)`):
//! that is the test of ownership.
//!
//! The messages carry attributes straight after the netlink header (no
//! family header), so they are built and read by hand here; the socket is
//! netlink-sys's, as rtnetlink re-exports it.

use std::io;

use rtnetlink::sys::{Socket, SocketAddr, protocols::NETLINK_RDMA};

use crate::rdma::NsPort as NlPort;

/// RDMA_NL_NLDEV (include/uapi/rdma/rdma_netlink.h).
const NLDEV: u16 = 5;
/// RDMA_NLDEV_CMD_GET, RDMA_NLDEV_CMD_PORT_GET.
const CMD_GET: u16 = 1;
const CMD_PORT_GET: u16 = 5;
/// RDMA_NLDEV_ATTR_*.
const ATTR_DEV_INDEX: u16 = 1;
const ATTR_DEV_NAME: u16 = 2;
const ATTR_PORT_INDEX: u16 = 3;
const ATTR_NDEV_INDEX: u16 = 50;
const ATTR_NDEV_NAME: u16 = 51;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_MULTI: u16 = 0x2;
const NLM_F_DUMP: u16 = 0x300;

/// RDMA_NL_GET_TYPE(client, op).
const fn nl_type(cmd: u16) -> u16 {
    (NLDEV << 10) + cmd
}

/// A message's attributes: (type, payload).
type Attrs = Vec<(u16, Vec<u8>)>;

/// Every RDMA port of every device this namespace can see, with its netdev
/// where that is in this namespace. An error: the socket could not be
/// opened (no ib_core: then sysfs has no RDMA device either) or the kernel
/// refused a dump.
pub fn ports() -> io::Result<Vec<NlPort>> {
    let mut sock = Socket::new(NETLINK_RDMA)?;
    sock.bind_auto()?;
    sock.connect(&SocketAddr::new(0, 0))?;
    let mut seq = 1;
    let devices = dump(&mut sock, seq, CMD_GET, &[])?;
    let mut ports = Vec::new();
    for dev in devices {
        let Some(index) = u32_attr(&dev, ATTR_DEV_INDEX) else { continue };
        seq += 1;
        for msg in dump(&mut sock, seq, CMD_PORT_GET, &attr_u32(ATTR_DEV_INDEX, index))? {
            if let Some(p) = port_of(&msg) {
                ports.push(p);
            }
        }
    }
    Ok(ports)
}

/// One port message's fields; None when it lacks the device or the port.
fn port_of(attrs: &[(u16, Vec<u8>)]) -> Option<NlPort> {
    let device = str_attr(attrs, ATTR_DEV_NAME)?;
    let port = u32_attr(attrs, ATTR_PORT_INDEX)?;
    let netdev = match (u32_attr(attrs, ATTR_NDEV_INDEX), str_attr(attrs, ATTR_NDEV_NAME)) {
        (Some(i), Some(n)) => Some((i, n)),
        _ => None,
    };
    Some(NlPort { device, port, netdev })
}

/// Sends a dump request of `cmd` with `attrs` (already encoded) and returns
/// the attributes of each message of the answer.
fn dump(sock: &mut Socket, seq: u32, cmd: u16, attrs: &[u8]) -> io::Result<Vec<Attrs>> {
    sock.send(&request(seq, cmd, attrs), 0)?;
    let mut out = Vec::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        buf.clear();
        let n = sock.recv(&mut buf, 0)?;
        if parse_answer(&buf[..n.min(buf.len())], seq, &mut out)? {
            return Ok(out);
        }
    }
}

/// A request: the netlink header, then the attributes.
fn request(seq: u32, cmd: u16, attrs: &[u8]) -> Vec<u8> {
    let len = 16 + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&nl_type(cmd).to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(attrs);
    m
}

fn attr_u32(kind: u16, value: u32) -> Vec<u8> {
    let mut a = Vec::with_capacity(8);
    a.extend_from_slice(&8u16.to_ne_bytes());
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(&value.to_ne_bytes());
    a
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Reads one datagram of a dump's answer into `out`; true when it ended
/// the dump (NLMSG_DONE). NLMSG_ERROR (or an error in NLMSG_DONE) is the
/// kernel's errno; messages of another sequence number are skipped.
fn parse_answer(mut data: &[u8], seq: u32, out: &mut Vec<Attrs>) -> io::Result<bool> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("RDMA netlink: {what}"));
    while data.len() >= 16 {
        let len = u32::from_ne_bytes(data[0..4].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes(data[4..6].try_into().unwrap());
        let flags = u16::from_ne_bytes(data[6..8].try_into().unwrap());
        let msg_seq = u32::from_ne_bytes(data[8..12].try_into().unwrap());
        if len < 16 || len > data.len() {
            return Err(bad("a message's length is past the datagram"));
        }
        let body = &data[16..len];
        data = &data[align4(len).min(data.len())..];
        if msg_seq != seq {
            continue;
        }
        match kind {
            NLMSG_ERROR | NLMSG_DONE => {
                let errno = body.get(0..4).map_or(0, |b| i32::from_ne_bytes(b.try_into().unwrap()));
                if errno < 0 {
                    return Err(io::Error::from_raw_os_error(-errno));
                }
                if kind == NLMSG_DONE || flags & NLM_F_MULTI == 0 {
                    return Ok(true);
                }
            }
            _ => out.push(parse_attrs(body).ok_or_else(|| bad("an attribute's length is past its message"))?),
        }
    }
    Ok(false)
}

/// The attributes (type without the nested/byte-order bits, payload).
fn parse_attrs(mut body: &[u8]) -> Option<Attrs> {
    let mut attrs = Vec::new();
    while body.len() >= 4 {
        let len = u16::from_ne_bytes(body[0..2].try_into().unwrap()) as usize;
        let kind = u16::from_ne_bytes(body[2..4].try_into().unwrap()) & 0x3fff;
        if len < 4 || len > body.len() {
            return None;
        }
        attrs.push((kind, body[4..len].to_vec()));
        body = &body[align4(len).min(body.len())..];
    }
    Some(attrs)
}

fn u32_attr(attrs: &[(u16, Vec<u8>)], kind: u16) -> Option<u32> {
    let (_, v) = attrs.iter().find(|(k, _)| *k == kind)?;
    Some(u32::from_ne_bytes(v.get(0..4)?.try_into().ok()?))
}

fn str_attr(attrs: &[(u16, Vec<u8>)], kind: u16) -> Option<String> {
    let (_, v) = attrs.iter().find(|(k, _)| *k == kind)?;
    let end = v.iter().position(|b| *b == 0).unwrap_or(v.len());
    Some(String::from_utf8_lossy(&v[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr_str(kind: u16, s: &str) -> Vec<u8> {
        let len = 4 + s.len() + 1;
        let mut a = Vec::new();
        a.extend_from_slice(&(len as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(s.as_bytes());
        a.push(0);
        a.resize(align4(len), 0);
        a
    }

    fn msg(kind: u16, flags: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let mut m = request(seq, 0, body);
        m[4..6].copy_from_slice(&kind.to_ne_bytes());
        m[6..8].copy_from_slice(&flags.to_ne_bytes());
        m
    }

    fn port_msg(seq: u32, dev: &str, port: u32, ndev: Option<(u32, &str)>) -> Vec<u8> {
        let mut body = attr_u32(ATTR_DEV_INDEX, 7);
        body.extend(attr_str(ATTR_DEV_NAME, dev));
        body.extend(attr_u32(ATTR_PORT_INDEX, port));
        if let Some((i, n)) = ndev {
            body.extend(attr_u32(ATTR_NDEV_INDEX, i));
            body.extend(attr_str(ATTR_NDEV_NAME, n));
        }
        msg(nl_type(CMD_PORT_GET), NLM_F_MULTI, seq, &body)
    }

    #[test]
    fn the_request_is_what_rdma_link_sends() {
        // RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_PORT_GET) = 0x1405,
        // REQUEST|DUMP, then RDMA_NLDEV_ATTR_DEV_INDEX, which the kernel's
        // nldev_port_get_dumpit() requires (EINVAL without it).
        let r = request(9, CMD_PORT_GET, &attr_u32(ATTR_DEV_INDEX, 3));
        assert_eq!(r.len(), 24);
        assert_eq!(u32::from_ne_bytes(r[0..4].try_into().unwrap()), 24);
        assert_eq!(u16::from_ne_bytes(r[4..6].try_into().unwrap()), 0x1405);
        assert_eq!(u16::from_ne_bytes(r[6..8].try_into().unwrap()), 0x301);
        assert_eq!(u32::from_ne_bytes(r[8..12].try_into().unwrap()), 9);
        assert_eq!(&r[16..], &[8, 0, 1, 0, 3, 0, 0, 0][..]);
    }

    #[test]
    fn a_port_names_its_netdev_only_when_the_kernel_put_it_in() {
        let mut data = port_msg(4, "rxa0", 1, Some((12, "rail0")));
        data.extend(port_msg(4, "rxb0", 1, None));
        data.extend(port_msg(3, "stale", 1, None)); // another request's
        let mut out = Vec::new();
        assert!(!parse_answer(&data, 4, &mut out).unwrap());
        let ports: Vec<NlPort> = out.iter().filter_map(|a| port_of(a)).collect();
        assert_eq!(
            ports,
            vec![
                NlPort { device: "rxa0".into(), port: 1, netdev: Some((12, "rail0".into())) },
                NlPort { device: "rxb0".into(), port: 1, netdev: None },
            ]
        );
        let done = msg(NLMSG_DONE, NLM_F_MULTI, 4, &0i32.to_ne_bytes());
        assert!(parse_answer(&done, 4, &mut out).unwrap());
    }

    #[test]
    fn the_kernels_errno_is_the_error() {
        let err = msg(NLMSG_ERROR, 0, 1, &(-22i32).to_ne_bytes());
        let e = parse_answer(&err, 1, &mut Vec::new()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(22));
        let done = msg(NLMSG_DONE, NLM_F_MULTI, 1, &(-95i32).to_ne_bytes());
        assert_eq!(parse_answer(&done, 1, &mut Vec::new()).unwrap_err().raw_os_error(), Some(95));
    }

    #[test]
    fn a_truncated_message_is_an_error_not_a_short_list() {
        let mut data = port_msg(1, "rxa0", 1, None);
        data[0..4].copy_from_slice(&200u32.to_ne_bytes());
        assert!(parse_answer(&data, 1, &mut Vec::new()).is_err());
        let mut data = port_msg(1, "rxa0", 1, None);
        data[16..18].copy_from_slice(&100u16.to_ne_bytes());
        assert!(parse_answer(&data, 1, &mut Vec::new()).is_err());
    }
}
