//! The dump protocol: the readers' filtered requests (the kernel filters
//! route and address dumps on a strict socket; rule dumps cannot be
//! filtered), and how a dump's replies become a result: complete,
//! interrupted (asked again) or failed (the error in NLMSG_DONE).

use futures::future::Future;
use nix::errno::Errno;
use rtnetlink::packet_core::{NLM_F_DUMP, NLM_F_DUMP_INTR, NetlinkMessage, NetlinkPayload};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::route::{
    RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use rtnetlink::packet_route::rule::RuleMessage;

use super::{Netlink, NlError, af, route, rule};
use crate::model::{Address, Family, Live, Route, Rule};

impl Netlink {
    /// Sends a dump request (NLM_F_DUMP is added) and returns the objects
    /// the kernel sent. Every reader goes through it. A dump is only a
    /// result when it ends in NLMSG_DONE without an error; one the kernel
    /// marks as interrupted (its objects changed while it was being sent)
    /// is asked again, `DUMP_ATTEMPTS` times at most.
    pub async fn dump(&self, request: RouteNetlinkMessage) -> Result<Vec<RouteNetlinkMessage>, NlError> {
        let _p = crate::profile::phase("dumps");
        let _one_at_a_time = self.dumping.lock().await;
        dump_with_retries(|| self.exchange(request.clone(), NLM_F_DUMP)).await
    }

    /// Every address of every interface (`addrdump`, on a socket of its
    /// own).
    pub async fn addresses(&self) -> Result<Vec<Address>, NlError> {
        let rows = super::addrdump::dump()?;
        Ok(rows.into_iter().map(|(index, a)| Address { ifname: self.ifname(index), ..a }).collect())
    }

    /// Every policy rule of both families, with its dumped bytes. Rule dumps
    /// cannot be filtered in the kernel, so callers filter.
    pub async fn rules(&self) -> Result<Vec<Live<Rule>>, NlError> {
        let (v4, v6) = futures::join!(self.rules_of(Family::V4), self.rules_of(Family::V6));
        let mut all = v4?;
        all.extend(v6?);
        Ok(all)
    }

    async fn rules_of(&self, family: Family) -> Result<Vec<Live<Rule>>, NlError> {
        let mut msg = RuleMessage::default();
        msg.header.family = af(family);
        let msgs = self.dump(RouteNetlinkMessage::GetRule(msg)).await?;
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewRule(r) => rule::live_rule(&r),
                _ => None,
            })
            .collect())
    }

    /// Routes of one family, filtered in the kernel by table and/or protocol
    /// (strict dump checking), so that a main table with many routes is not
    /// copied to user space.
    pub async fn routes(
        &self,
        family: Family,
        table: Option<u32>,
        protocol: Option<u8>,
    ) -> Result<Vec<Live<Route>>, NlError> {
        self.routes_filtered(family, table, protocol, None).await
    }

    /// `routes` of one table whose output interface is `ifname` (RTA_OIF,
    /// filtered in the kernel as `ip route show dev IFNAME` is): a rail's
    /// routes without copying a full routing table of another interface
    /// (a BGP-fed uplink) to user space.
    pub async fn routes_on(
        &self,
        family: Family,
        table: u32,
        ifname: &str,
    ) -> Result<Vec<Live<Route>>, NlError> {
        let oif = self.ifindex(ifname)?;
        let routes = self.routes_filtered(family, Some(table), None, Some(oif)).await?;
        Ok(routes.into_iter().filter(|r| r.item.oif.as_deref() == Some(ifname)).collect())
    }

    async fn routes_filtered(
        &self,
        family: Family,
        table: Option<u32>,
        protocol: Option<u8>,
        oif: Option<u32>,
    ) -> Result<Vec<Live<Route>>, NlError> {
        let mut request = route_filter(family, table, protocol);
        if let Some(i) = oif {
            request.attributes.push(RouteAttribute::Oif(i));
        }
        let dump = self.dump(RouteNetlinkMessage::GetRoute(request)).await;
        let msgs = if table.is_some() { empty_if_missing_table(dump)? } else { dump? };
        crate::profile::count("routes_read", msgs.len());
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewRoute(r) => {
                    let live = route::live_route(&r, |i| self.ifname(i))?;
                    // The kernel filters; check again so that a kernel
                    // without strict checking cannot widen the result.
                    let item = &live.item;
                    let wanted =
                        table.is_none_or(|t| t == item.table) && protocol.is_none_or(|p| p == item.protocol);
                    wanted.then_some(live)
                }
                _ => None,
            })
            .collect())
    }
}

/// A route dump request that the kernel filters on `table` (RTA_TABLE) and
/// `protocol` (header) and on nothing else: type unspec and table unspec
/// in the header, since a strict socket filters on every field that is
/// set (a builder's defaults would ask for static unicast routes of main).
fn route_filter(family: Family, table: Option<u32>, protocol: Option<u8>) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header.address_family = af(family);
    msg.header.protocol = RouteProtocol::from(protocol.unwrap_or(0));
    msg.header.scope = RouteScope::Universe;
    msg.header.kind = RouteType::Unspec;
    msg.header.table = RouteHeader::RT_TABLE_UNSPEC;
    if let Some(t) = table {
        msg.attributes.push(RouteAttribute::Table(t));
    }
    msg
}

/// How many times a dump is sent when the kernel keeps marking it as
/// interrupted (NLM_F_DUMP_INTR) before giving up with an error. A node
/// creating pods makes links and their link-local addresses many times a
/// second: 4 attempts in a row were all interrupted by the addresses of
/// 1,000 veths being made (an apply failed), so the attempts are many and
/// spaced (`pause_after`), 120 ms in all at most.
pub(super) const DUMP_ATTEMPTS: usize = 16;

/// The pause after the interrupted attempt `attempt` (from 1): 1 ms more
/// each time, so that a burst of changes can end between attempts.
pub(super) fn pause_after(attempt: usize) -> std::time::Duration {
    std::time::Duration::from_millis(attempt as u64)
}

/// How a dump ended, read from every message the kernel sent for it.
#[derive(Debug, PartialEq)]
enum DumpOutcome {
    /// NLMSG_DONE without an error, and no message marked as interrupted.
    Complete(Vec<RouteNetlinkMessage>),
    /// Some message carried NLM_F_DUMP_INTR: the objects changed while the
    /// kernel was sending them, so the result may miss or repeat some.
    Interrupted,
    /// An error in NLMSG_DONE or NLMSG_ERROR, or a dump that did not end.
    Failed(NlError),
}

/// Classifies the replies to one dump request. An error wins over an
/// interruption: sending the same request again would not change it.
fn classify_dump(replies: impl IntoIterator<Item = NetlinkMessage<RouteNetlinkMessage>>) -> DumpOutcome {
    let mut out = Vec::new();
    let mut interrupted = false;
    for reply in replies {
        interrupted |= reply.header.flags & NLM_F_DUMP_INTR != 0;
        match reply.payload {
            NetlinkPayload::InnerMessage(m) => out.push(m),
            NetlinkPayload::Done(done) => {
                // The kernel puts the dump callback's result there: 0, or
                // a negative errno followed by the ext-ack attributes.
                if let Some(e) = NlError::of_done(done.code, &done.extended_ack) {
                    return DumpOutcome::Failed(e);
                }
                return if interrupted { DumpOutcome::Interrupted } else { DumpOutcome::Complete(out) };
            }
            NetlinkPayload::Error(e) => {
                // A dump refused before it started (EBUSY, EPERM, ...).
                if let Some(e) = NlError::of_nlmsg_error(&e) {
                    return DumpOutcome::Failed(e);
                }
            }
            NetlinkPayload::Overrun(_) => {
                return DumpOutcome::Failed(NlError::local(Errno::ENOBUFS, "netlink overrun during a dump"));
            }
            _ => {}
        }
    }
    DumpOutcome::Failed(NlError::local(Errno::EIO, "the dump ended without NLMSG_DONE"))
}

/// Runs `send` (one dump request and its replies) until the dump is not
/// interrupted, `DUMP_ATTEMPTS` times at most.
async fn dump_with_retries<F, Fut>(mut send: F) -> Result<Vec<RouteNetlinkMessage>, NlError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Vec<NetlinkMessage<RouteNetlinkMessage>>, NlError>>,
{
    for attempt in 1..=DUMP_ATTEMPTS {
        match classify_dump(send().await?) {
            DumpOutcome::Complete(objects) => return Ok(objects),
            DumpOutcome::Failed(e) => return Err(e),
            DumpOutcome::Interrupted if attempt < DUMP_ATTEMPTS => {
                tokio::time::sleep(pause_after(attempt)).await;
            }
            DumpOutcome::Interrupted => {}
        }
    }
    Err(NlError::local(
        Errno::EINTR,
        format!("the dump was interrupted by concurrent changes {DUMP_ATTEMPTS} times in a row"),
    ))
}

/// The error a route dump filtered on a table gets when that table does
/// not exist: the kernel creates a table with its first route, and
/// inet_dump_fib / inet6_dump_fib answer ENOENT "FIB table does not exist"
/// (in NLMSG_DONE) for one that was never created. For roce-route that is
/// a table without routes.
const FIB_TABLE_DOES_NOT_EXIST: Errno = Errno::ENOENT;

/// The result of a table-filtered route dump, with the missing table read
/// as an empty one. Only for those dumps: anywhere else ENOENT is an error.
fn empty_if_missing_table(
    dump: Result<Vec<RouteNetlinkMessage>, NlError>,
) -> Result<Vec<RouteNetlinkMessage>, NlError> {
    match dump {
        Err(e) if e.is(FIB_TABLE_DOES_NOT_EXIST) => Ok(Vec::new()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroI32;

    use rtnetlink::packet_core::{DoneMessage, ErrorMessage, NLM_F_MULTIPART, NetlinkHeader};

    use super::*;
    use crate::netlink::extack::nla_msg;

    type Reply = NetlinkMessage<RouteNetlinkMessage>;

    fn with_flags(payload: NetlinkPayload<RouteNetlinkMessage>, flags: u16) -> Reply {
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        NetlinkMessage::new(header, payload)
    }

    /// One route of a dump (NLM_F_MULTI), with extra header flags.
    fn route(extra_flags: u16) -> Reply {
        let payload = NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewRoute(RouteMessage::default()));
        with_flags(payload, NLM_F_MULTIPART | extra_flags)
    }

    /// NLMSG_DONE carrying `code` and, when given, an ext-ack message.
    fn done(code: i32, ext_ack: Option<&str>, extra_flags: u16) -> Reply {
        let mut done = DoneMessage::default();
        done.code = code;
        if let Some(text) = ext_ack {
            done.extended_ack = nla_msg(text);
        }
        with_flags(NetlinkPayload::Done(done), NLM_F_MULTIPART | extra_flags)
    }

    fn nlmsg_error(errno: Errno) -> Reply {
        let mut e = ErrorMessage::default();
        e.code = NonZeroI32::new(-(errno as i32));
        e.header = vec![0; 16];
        with_flags(NetlinkPayload::Error(e), 0)
    }

    fn failed(outcome: DumpOutcome) -> NlError {
        match outcome {
            DumpOutcome::Failed(e) => e,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn a_dump_ending_in_a_clean_done_is_complete() {
        let outcome = classify_dump([route(0), route(0), done(0, None, 0)]);
        assert!(matches!(&outcome, DumpOutcome::Complete(v) if v.len() == 2), "{outcome:?}");
        let outcome = classify_dump([done(0, None, 0)]);
        assert_eq!(outcome, DumpOutcome::Complete(Vec::new()), "an empty dump is a result");
    }

    #[test]
    fn an_error_in_done_is_an_error_with_its_ext_ack() {
        let text = "Invalid values in header for FIB dump request";
        let e = failed(classify_dump([done(-(Errno::EINVAL as i32), Some(text), 0)]));
        assert_eq!(e, NlError { errno: Errno::EINVAL, ext_ack: Some(text.into()) });
        // Objects before the error do not make it a result.
        let e = failed(classify_dump([route(0), done(-(Errno::EMSGSIZE as i32), None, 0)]));
        assert_eq!(e.errno, Errno::EMSGSIZE);
        assert_eq!(e.ext_ack, None);
    }

    #[test]
    fn a_dump_refused_with_nlmsg_error_is_an_error() {
        let e = failed(classify_dump([nlmsg_error(Errno::EBUSY)]));
        assert_eq!(e.errno, Errno::EBUSY);
    }

    #[test]
    fn a_dump_without_done_is_an_error() {
        // What netlink-proto hands over when it swallows NLMSG_DONE, or
        // when the connection dies half-way.
        assert_eq!(failed(classify_dump([route(0)])).errno, Errno::EIO);
        assert_eq!(failed(classify_dump([])).errno, Errno::EIO);
    }

    #[test]
    fn dump_intr_on_any_message_makes_the_dump_interrupted() {
        for replies in [
            vec![route(NLM_F_DUMP_INTR), route(0), done(0, None, 0)],
            vec![route(0), route(NLM_F_DUMP_INTR), done(0, None, 0)],
            vec![route(0), done(0, None, NLM_F_DUMP_INTR)],
            vec![done(0, None, NLM_F_DUMP_INTR)],
        ] {
            assert_eq!(classify_dump(replies), DumpOutcome::Interrupted);
        }
        // An error is an error even in an interrupted dump.
        let e = failed(classify_dump([route(NLM_F_DUMP_INTR), done(-(Errno::EINVAL as i32), None, 0)]));
        assert_eq!(e.errno, Errno::EINVAL);
    }

    #[test]
    fn only_a_missing_table_reads_as_empty() {
        let text = "ipv4: FIB table does not exist";
        let missing = failed(classify_dump([done(-(Errno::ENOENT as i32), Some(text), 0)]));
        assert_eq!(missing.errno, FIB_TABLE_DOES_NOT_EXIST);
        assert_eq!(empty_if_missing_table(Err(missing)), Ok(Vec::new()));
        let other = NlError { errno: Errno::EINVAL, ext_ack: None };
        assert_eq!(empty_if_missing_table(Err(other.clone())), Err(other));
        let routes = vec![RouteNetlinkMessage::NewRoute(RouteMessage::default())];
        assert_eq!(empty_if_missing_table(Ok(routes.clone())), Ok(routes));
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
    }

    #[test]
    fn an_interrupted_dump_is_asked_again() {
        let mut calls = 0;
        let result = block_on(dump_with_retries(|| {
            calls += 1;
            let flags = if calls < DUMP_ATTEMPTS { NLM_F_DUMP_INTR } else { 0 };
            std::future::ready(Ok(vec![route(flags), done(0, None, 0)]))
        }));
        assert_eq!(result.map(|v| v.len()), Ok(1));
        assert_eq!(calls, DUMP_ATTEMPTS, "the last allowed attempt counts");
    }

    #[test]
    fn a_dump_interrupted_every_time_is_an_error() {
        let mut calls = 0;
        let result = block_on(dump_with_retries(|| {
            calls += 1;
            std::future::ready(Ok(vec![route(NLM_F_DUMP_INTR), done(0, None, 0)]))
        }));
        let e = result.unwrap_err();
        assert_eq!(e.errno, Errno::EINTR);
        assert!(e.to_string().contains("interrupted"), "{e}");
        assert_eq!(calls, DUMP_ATTEMPTS);
    }

    #[test]
    fn errors_are_not_retried() {
        let mut calls = 0;
        let result = block_on(dump_with_retries(|| {
            calls += 1;
            std::future::ready(Ok(vec![done(-(Errno::EINVAL as i32), None, 0)]))
        }));
        assert_eq!(result.unwrap_err().errno, Errno::EINVAL);
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_route_dump_filters_on_table_and_protocol_only() {
        let m = route_filter(Family::V4, Some(1000), Some(234));
        assert_eq!(m.header.address_family, af(Family::V4));
        assert_eq!(m.header.table, RouteHeader::RT_TABLE_UNSPEC, "tables above 255 need the attribute");
        assert_eq!(m.header.protocol, RouteProtocol::from(234));
        assert_eq!(m.header.kind, RouteType::Unspec, "a type would filter too");
        assert_eq!(m.attributes, [RouteAttribute::Table(1000)]);
        let m = route_filter(Family::V6, None, None);
        assert_eq!(m.header.address_family, af(Family::V6));
        assert_eq!(m.header.protocol, RouteProtocol::Unspec);
        assert!(m.attributes.is_empty(), "no table: every table");
    }
}
