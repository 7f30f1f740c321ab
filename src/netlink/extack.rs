//! The kernel's answer when a request fails: an errno and, when the kernel
//! gave one, its extended-ack text (NLMSGERR_ATTR_MSG), which
//! netlink-packet-core leaves as raw bytes.

use std::fmt;

use nix::errno::Errno;
use rtnetlink::packet_core::ErrorMessage;

/// An error the kernel returned for a request: errno and, when the kernel
/// gave one, its extended-ack message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NlError {
    pub errno: Errno,
    pub ext_ack: Option<String>,
}

impl NlError {
    /// An error found on this side of the socket, with what to say.
    pub(super) fn local(errno: Errno, msg: impl Into<String>) -> NlError {
        NlError { errno, ext_ack: Some(msg.into()) }
    }

    /// The error of an NLMSG_ERROR, or None for an ack (code 0).
    pub(super) fn of_nlmsg_error(e: &ErrorMessage) -> Option<NlError> {
        NlError::of_error_code(e.code?.get(), &e.header)
    }

    /// The error of an NLMSG_ERROR read as bytes: its code and what follows
    /// it (the request's header, then ext-ack attributes); None for an ack.
    pub(super) fn of_error_code(code: i32, rest: &[u8]) -> Option<NlError> {
        (code != 0)
            .then(|| NlError { errno: Errno::from_raw(code.saturating_abs()), ext_ack: ext_ack_text(rest) })
    }

    /// The error an NLMSG_DONE carries: the dump callback's negative errno
    /// followed by ext-ack attributes; None when it is 0 (success).
    pub(super) fn of_done(code: i32, extended_ack: &[u8]) -> Option<NlError> {
        (code != 0).then(|| NlError {
            errno: Errno::from_raw(code.saturating_abs()),
            ext_ack: ext_ack_attr(extended_ack),
        })
    }

    /// A socket error, with what was being done.
    pub(super) fn io(e: std::io::Error, what: &str) -> NlError {
        NlError::local(e.raw_os_error().map_or(Errno::EIO, Errno::from_raw), format!("{what}: {e}"))
    }

    pub fn is(&self, errno: Errno) -> bool {
        self.errno == errno
    }
}

impl fmt::Display for NlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let os = std::io::Error::from_raw_os_error(self.errno as i32);
        let text = os.to_string();
        let text = text.split(" (os error").next().unwrap_or(&text);
        write!(f, "{text} (errno {})", self.errno as i32)?;
        if let Some(msg) = &self.ext_ack {
            write!(f, ": {msg}")?;
        }
        Ok(())
    }
}

impl std::error::Error for NlError {}

/// The extended-ack message (NLMSGERR_ATTR_MSG) from an error payload.
/// With NETLINK_CAP_ACK the payload after the error code is the request's
/// 16-byte header followed by netlink attributes.
fn ext_ack_text(payload: &[u8]) -> Option<String> {
    const NLMSG_HDRLEN: usize = 16;
    ext_ack_attr(payload.get(NLMSG_HDRLEN..)?)
}

/// The NLMSGERR_ATTR_MSG text among ext-ack attributes (what follows the
/// error code of NLMSG_DONE, or the echoed header of NLMSG_ERROR).
fn ext_ack_attr(attributes: &[u8]) -> Option<String> {
    const NLMSGERR_ATTR_MSG: u16 = 1;
    let mut rest = attributes;
    while rest.len() >= 4 {
        let len = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
        let kind = u16::from_ne_bytes([rest[2], rest[3]]) & 0x3fff;
        if len < 4 || len > rest.len() {
            return None;
        }
        if kind == NLMSGERR_ATTR_MSG {
            let text = &rest[4..len];
            let text = text.split(|b| *b == 0).next().unwrap_or(text);
            return Some(String::from_utf8_lossy(text).into_owned()).filter(|s| !s.is_empty());
        }
        rest = &rest[((len + 3) & !3).min(rest.len())..];
    }
    None
}

/// An NLMSGERR_ATTR_MSG attribute, as the kernel writes it (for tests that
/// build kernel answers).
#[cfg(test)]
pub(super) fn nla_msg(text: &str) -> Vec<u8> {
    let mut value = text.as_bytes().to_vec();
    value.push(0);
    let mut nla = ((4 + value.len()) as u16).to_ne_bytes().to_vec();
    nla.extend_from_slice(&1u16.to_ne_bytes());
    nla.extend_from_slice(&value);
    nla.resize((nla.len() + 3) & !3, 0);
    nla
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroI32;

    use super::*;

    #[test]
    fn ext_ack_is_found_after_the_echoed_header() {
        let mut payload = vec![0u8; 16];
        let msg = b"Nexthop has invalid gateway\0";
        let len = (4 + msg.len()) as u16;
        payload.extend_from_slice(&len.to_ne_bytes());
        payload.extend_from_slice(&1u16.to_ne_bytes());
        payload.extend_from_slice(msg);
        assert_eq!(ext_ack_text(&payload).as_deref(), Some("Nexthop has invalid gateway"));
        assert_eq!(ext_ack_text(&payload[..16]), None);
        assert_eq!(ext_ack_text(&payload[..20]), None, "truncated attribute");
    }

    #[test]
    fn errors_read_like_the_kernel() {
        let e = NlError { errno: Errno::EEXIST, ext_ack: None };
        assert_eq!(e.to_string(), "File exists (errno 17)");
        let e = NlError { errno: Errno::ENETUNREACH, ext_ack: Some("Nexthop has invalid gateway".into()) };
        assert_eq!(e.to_string(), "Network is unreachable (errno 101): Nexthop has invalid gateway");
    }

    #[test]
    fn an_nlmsg_error_is_an_error_only_with_a_code() {
        let mut e = ErrorMessage::default();
        assert_eq!(NlError::of_nlmsg_error(&e), None, "code 0 is an ack");
        e.code = NonZeroI32::new(-(Errno::EEXIST as i32));
        e.header = vec![0; 16];
        e.header.extend(nla_msg("File exists"));
        let err = NlError::of_nlmsg_error(&e).unwrap();
        assert_eq!(err, NlError { errno: Errno::EEXIST, ext_ack: Some("File exists".into()) });
    }

    #[test]
    fn a_done_is_an_error_only_with_a_code() {
        assert_eq!(NlError::of_done(0, &nla_msg("ignored")), None);
        let err = NlError::of_done(-(Errno::ENOENT as i32), &nla_msg("FIB table does not exist")).unwrap();
        assert_eq!(err.errno, Errno::ENOENT);
        assert_eq!(err.ext_ack.as_deref(), Some("FIB table does not exist"));
    }
}
