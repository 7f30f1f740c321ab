//! Changes on a socket of their own, without netlink-proto.
//!
//! The kernel carries out an rtnetlink request inside the `sendmsg` that
//! sends it (under the RTNL lock, in the sender's context) and queues its
//! answer before `sendmsg` returns. So a change costs two system calls
//! and the kernel's work; through netlink-proto it also cost a hand-over
//! to the connection's task and back for each request (3 µs a change:
//! 1.2 ms of an apply of 416). Sending the next change before reading
//! this one's answer was measured too and gained nothing (the round trip
//! is the send itself), so the executor reads each answer before it sends
//! the next: its rollback stays exact, one step at a time.
//!
//! Answers are matched to their request by sequence number. The socket
//! is blocking: an answer is queued before `send` returns, so a read never
//! waits for the kernel; the timeout only bounds a read that would wait
//! for an answer that never comes (an answer lost to a full receive
//! buffer, which one request in flight cannot fill).

use std::collections::VecDeque;
use std::time::Duration;

use nix::errno::Errno;
use nix::libc;
use rtnetlink::packet_core::{NLM_F_ACK, NLM_F_REQUEST, NetlinkBuffer, NetlinkMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::sys::Socket;

use super::rawdump::NLMSG_HDRLEN;
use super::{Netlink, NlError};
use crate::model::Op;

const NLMSG_ERROR: u16 = libc::NLMSG_ERROR as u16;

/// The largest answer: NLMSG_ERROR with the request's header (the socket
/// caps acks) and the extended-ack attributes.
const READ_SIZE: usize = 8 * 1024;

/// How long a read waits for an answer the kernel queued before `send`
/// returned: only a broken socket gets there.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// What became of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The kernel made the change.
    Made,
    /// The kernel refused it, with its reason.
    Refused(NlError),
    /// Its answer could not be read: the change may or may not be made.
    Lost(NlError),
}

impl Answer {
    /// The answer as a result: made, or the reason it may not be.
    pub fn into_result(self) -> Result<(), NlError> {
        match self {
            Answer::Made => Ok(()),
            Answer::Refused(e) | Answer::Lost(e) => Err(e),
        }
    }
}

/// A socket for changes: requests sent with `send`, answers read in the
/// same order with `answer`.
pub struct Writer {
    socket: Socket,
    next_seq: u32,
    /// The sequence numbers sent whose answer is not read yet, oldest first.
    unanswered: VecDeque<u32>,
    buf: Vec<u8>,
}

impl Writer {
    /// Opens a socket with extended acks (the kernel's error strings) and
    /// capped acks (an error echoes the request's header, not the request).
    pub fn open() -> Result<Writer, NlError> {
        let io = |what: &'static str| move |e: std::io::Error| NlError::io(e, what);
        let socket = super::rawdump::socket()?;
        socket.set_ext_ack(true).map_err(io("NETLINK_EXT_ACK"))?;
        socket.set_cap_ack(true).map_err(io("NETLINK_CAP_ACK"))?;
        let timeout = nix::sys::time::TimeVal::new(ANSWER_TIMEOUT.as_secs() as _, 0);
        nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::ReceiveTimeout, &timeout)
            .map_err(|e| NlError::io(e.into(), "SO_RCVTIMEO"))?;
        Ok(Writer { socket, next_seq: 1, unanswered: VecDeque::new(), buf: Vec::with_capacity(READ_SIZE) })
    }

    /// Sends the request that carries out `op` (its interfaces named by
    /// `nl`'s link table). When this returns Ok, the kernel has made or
    /// refused it; Err: it was not sent.
    pub fn send(&mut self, nl: &Netlink, op: &Op) -> Result<(), NlError> {
        let (msg, flags) = nl.message(op)?;
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        let bytes = request(msg, flags, seq);
        self.socket.send(&bytes, 0).map_err(|e| NlError::io(e, "cannot send a change to the kernel"))?;
        self.unanswered.push_back(seq);
        Ok(())
    }

    /// The answer to the oldest request not answered yet.
    pub fn answer(&mut self) -> Answer {
        let Some(seq) = self.unanswered.pop_front() else {
            return Answer::Lost(NlError::local(
                Errno::EPROTO,
                "internal error: an answer read for no request",
            ));
        };
        loop {
            self.buf.clear();
            let size = match self.socket.recv(&mut self.buf, libc::MSG_TRUNC) {
                Ok(size) => size,
                Err(e) => return Answer::Lost(NlError::io(e, "cannot read the kernel's answer to a change")),
            };
            if size > self.buf.len() {
                return Answer::Lost(NlError::local(
                    Errno::EMSGSIZE,
                    format!("the kernel's answer to a change ({size} bytes) did not fit the read"),
                ));
            }
            if let Some(answer) = read_answer(&self.buf, seq) {
                return answer;
            }
        }
    }
}

/// The bytes of a request: `msg` with NLM_F_REQUEST, NLM_F_ACK, `flags`
/// and sequence number `seq`. Pure.
fn request(msg: RouteNetlinkMessage, flags: u16, seq: u32) -> Vec<u8> {
    let mut req = NetlinkMessage::from(msg);
    req.header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    req.header.sequence_number = seq;
    req.finalize();
    let mut bytes = vec![0; req.buffer_len()];
    req.serialize(&mut bytes);
    bytes
}

/// The answer to request `seq` in one datagram, or None when the datagram
/// holds none (nothing else is sent to this socket, but a read must not
/// take another message for an answer). An answer to another request is
/// lost order: the answers come in the order of the requests. Pure.
fn read_answer(mut datagram: &[u8], seq: u32) -> Option<Answer> {
    while datagram.len() >= NLMSG_HDRLEN {
        let Ok(msg) = NetlinkBuffer::new_checked(datagram) else {
            let e = NlError::local(
                Errno::EPROTO,
                "the kernel's answer to a change has a length outside its datagram",
            );
            return Some(Answer::Lost(e));
        };
        if msg.message_type() == NLMSG_ERROR {
            if msg.sequence_number() != seq {
                let e = NlError::local(
                    Errno::EPROTO,
                    format!("the kernel answered request {} where {seq} was due", msg.sequence_number()),
                );
                return Some(Answer::Lost(e));
            }
            let payload = msg.payload();
            let Some(code) = payload.get(..4) else {
                return Some(Answer::Lost(NlError::local(Errno::EPROTO, "the kernel's answer is cut short")));
            };
            let code = i32::from_ne_bytes(code.try_into().unwrap());
            return Some(match NlError::of_error_code(code, &payload[4..]) {
                None => Answer::Made,
                Some(e) => Answer::Refused(e),
            });
        }
        datagram = &datagram[(msg.length() as usize).next_multiple_of(4).min(datagram.len())..];
    }
    None
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroI32;

    use rtnetlink::packet_core::{ErrorMessage, NLM_F_CREATE, NLM_F_EXCL, NetlinkHeader, NetlinkPayload};
    use rtnetlink::packet_route::rule::RuleMessage;

    use super::super::extack::nla_msg;
    use super::*;

    /// An answer as the kernel sends it: NLMSG_ERROR with `code`, the
    /// request's header echoed (capped) and, for an error, its text.
    fn answer(seq: u32, code: i32, text: Option<&str>) -> Vec<u8> {
        let mut echoed = vec![0u8; 16];
        if let Some(t) = text {
            echoed.extend(nla_msg(t));
        }
        let mut e = ErrorMessage::default();
        e.code = NonZeroI32::new(code);
        e.header = echoed;
        let mut header = NetlinkHeader::default();
        header.sequence_number = seq;
        let mut m = NetlinkMessage::<RouteNetlinkMessage>::new(header, NetlinkPayload::Error(e));
        m.finalize();
        let mut bytes = vec![0; m.buffer_len()];
        m.serialize(&mut bytes);
        bytes
    }

    #[test]
    fn an_ack_is_made_and_an_error_is_refused_with_the_kernels_words() {
        assert_eq!(read_answer(&answer(7, 0, None), 7), Some(Answer::Made));
        let refused = read_answer(&answer(8, -(Errno::EEXIST as i32), Some("File exists")), 8);
        assert_eq!(
            refused,
            Some(Answer::Refused(NlError { errno: Errno::EEXIST, ext_ack: Some("File exists".into()) }))
        );
        let e = read_answer(&answer(9, -(Errno::ENODEV as i32), None), 9).unwrap().into_result().unwrap_err();
        assert!(e.is(Errno::ENODEV));
    }

    /// An answer to another request is never taken for this one's: the
    /// change it names may be made or not.
    #[test]
    fn an_answer_out_of_order_is_lost_not_taken() {
        match read_answer(&answer(3, 0, None), 4) {
            Some(Answer::Lost(e)) => assert!(e.to_string().contains("answered request 3 where 4"), "{e}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_datagram_without_an_answer_is_none_and_a_broken_one_is_lost() {
        let mut noop = answer(1, 0, None);
        noop[4..6].copy_from_slice(&(libc::NLMSG_NOOP as u16).to_ne_bytes());
        assert_eq!(read_answer(&noop, 1), None);
        let mut broken = answer(1, 0, None);
        broken[0] = 0xff;
        assert!(matches!(read_answer(&broken, 1), Some(Answer::Lost(_))));
        let cut = answer(1, 0, None);
        let mut short = cut[..NLMSG_HDRLEN].to_vec();
        short[0..4].copy_from_slice(&(NLMSG_HDRLEN as u32).to_ne_bytes());
        assert!(matches!(read_answer(&short, 1), Some(Answer::Lost(_))));
    }

    /// The request carries its sequence number and asks for an answer.
    #[test]
    fn a_request_asks_for_its_answer_under_its_number() {
        let bytes =
            request(RouteNetlinkMessage::NewRule(RuleMessage::default()), NLM_F_CREATE | NLM_F_EXCL, 42);
        let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&bytes).unwrap();
        assert_eq!(m.header.sequence_number, 42);
        assert_eq!(m.header.flags, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
        assert_eq!(m.header.length as usize, bytes.len());
        assert!(matches!(m.payload, NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRule(_))));
    }
}
