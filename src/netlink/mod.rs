//! rtnetlink I/O: the only module that speaks netlink.
//!
//! It turns kernel messages into the plain types of `model` (dumps) and
//! plain operations back into kernel messages (changes). Every field is set
//! deliberately: rtnetlink's builders default to protocol static, scope
//! universe, table main and rule action unspec, which silently change what
//! is added or filter dumps to nothing on a strict socket (see
//! shared/netlink-notes.md), so this module builds its messages by hand.
//!
//! Here: the connection (`Netlink`), its link table (`linktable`: every
//! link, or a config's only, with the others named one at a time by
//! `ifname`), the messages of changes, and route lookups. `write` sends the changes on a
//! socket of its own, each answer read before the next. Dumps go on one
//! kept socket of their own, through `rawdump`: `dump` (rules, routes,
//! neighbours, parsed whole by netlink-packet-route), `linkdump` and
//! `addrdump` (parsed for what roce-route uses); `route` and `rule`
//! translate between model and messages (`address` and `link`, test-only,
//! are the full parse the light readers are tested against); `extack`
//! reads the kernel's errors.
//! `rdma` asks RDMA netlink which RDMA ports have their netdev in this
//! namespace.

use std::net::IpAddr;

use futures::StreamExt;
use nix::errno::Errno;
use rtnetlink::Handle;
use rtnetlink::packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkMessage, NetlinkPayload,
};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::sys::AsyncSocket;

use crate::model::{Family, Link, Op, Route};

mod addrdump;
#[cfg(test)]
mod address;
mod addrtable;
mod dump;
mod extack;
#[cfg(test)]
mod fixture;
mod ifname;
#[cfg(test)]
mod link;
mod linkdump;
mod linktable;
pub mod neighbour;
mod rawdump;
pub mod rdma;
mod route;
mod rule;
mod write;

pub use addrdump::{AddrNews, news as addr_news};
pub use extack::NlError;
pub use linkdump::{LinkNews, LinkRow, news as link_news};
use linktable::LinkTable;
use route::{parse_route, route_from, route_msg};
use rule::rule_msg;
use write::Writer;

/// A connection to the kernel's routing subsystem in the current network
/// namespace, with a cache of the links (name <-> index).
pub struct Netlink {
    /// netlink-proto's connection, for the requests that still go through
    /// it (neighbour deletes): opened at the first one. apply, check and
    /// show never open it; its socket, options and task were about 5% of a
    /// no-op apply.
    handle: std::sync::Mutex<Option<Handle>>,
    table: LinkTable,
    /// The links the table is read for (`connect_for`), or None: every
    /// link of the namespace.
    only: Option<Vec<String>>,
    /// Whether the table holds only the links of `only` (they all exist);
    /// a link outside it is named and found by `ifname`, one at a time.
    partial: bool,
    /// The names of links outside a partial table, as `ifname` found them
    /// (None: no such link), until the table is read again.
    outside: std::sync::Mutex<std::collections::HashMap<u32, Option<String>>>,
    /// The socket links, addresses, rules, routes and neighbours are dumped
    /// on (`dump`, `linkdump`, `addrdump`) and routes looked up on, opened
    /// at the first dump and kept; held while a dump runs: the
    /// kernel runs one dump at a time per socket and refuses a second one
    /// meanwhile with EBUSY.
    dumper: std::sync::Mutex<Option<rtnetlink::sys::Socket>>,
    /// The socket changes go on, opened at the first change (read-only
    /// commands never open it) and kept: its port is the one a trace of
    /// the changes (nlmon, `ip monitor`) shows for this process.
    writer: std::sync::Mutex<Option<Writer>>,
    /// The addresses as watch keeps them (`keep_addresses`), or None: every
    /// `addresses` reads them all.
    kept_addrs: Option<KeptAddrs>,
    /// Whether the kernel refused a route or rule dump of every family
    /// (AF_UNSPEC: `table_routes`, `rules`) as a request it does not take:
    /// the next ones go family by family at once, not after another
    /// refusal each.
    unspec_refused: std::sync::atomic::AtomicBool,
    /// The sysctls' epoch (`sysctl::epoch`) the last read of the link
    /// table began in: the devconf values it holds are the files' values
    /// while the epoch is still that one. None after notifications were
    /// taken in (they came at any time).
    devconf_epoch: Option<u64>,
}

/// The addresses kept from notifications, and the links whose addresses
/// are read from the kernel every time all the same (the rails).
struct KeptAddrs {
    table: addrtable::AddrTable,
    fresh: Vec<String>,
}

impl Netlink {
    /// Reads the link table. Each socket is opened at its first use: dumps
    /// and lookups, changes, and netlink-proto's for what is left (all with
    /// extended acks, the kernel's error strings). netlink-proto's, only
    /// inside a tokio runtime.
    pub async fn connect() -> Result<Netlink, NlError> {
        Netlink::connect_with(None)
    }

    /// `connect`, with a table of the links named `names` only (a
    /// config's interfaces), each asked by name: a command that works on
    /// them alone (apply, check) then pays nothing for a node's thousand
    /// pod veths, whose messages are 9 ms of a full read. When one of them
    /// does not exist, the table is read whole, as `connect`'s, so that
    /// what is said of the missing one can name the links there are. A
    /// link outside the table is still named (`ifname`) and found
    /// (`ifindex`) on demand.
    pub async fn connect_for(names: &[&str]) -> Result<Netlink, NlError> {
        let mut names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        names.sort();
        names.dedup();
        Netlink::connect_with(Some(names))
    }

    fn connect_with(only: Option<Vec<String>>) -> Result<Netlink, NlError> {
        let mut nl = Netlink {
            handle: std::sync::Mutex::new(None),
            table: LinkTable::default(),
            only,
            partial: false,
            outside: Default::default(),
            dumper: std::sync::Mutex::new(None),
            writer: std::sync::Mutex::new(None),
            kept_addrs: None,
            unspec_refused: Default::default(),
            devconf_epoch: None,
        };
        nl.read_links()?;
        Ok(nl)
    }

    /// Re-reads the link table (as `connect` or `connect_for` read it).
    pub async fn refresh_links(&mut self) -> Result<(), NlError> {
        self.read_links()
    }

    /// Adds the links named `names` to a partial table, each asked by name;
    /// one that does not exist is left out (a full table has every link
    /// already): for a command that learns as it reads which links it
    /// shows (show).
    pub fn add_links(&mut self, names: &[&str]) -> Result<(), NlError> {
        if !self.partial {
            return Ok(());
        }
        // The links read before and these are of one epoch, or none is used.
        if self.devconf_epoch != Some(crate::sysctl::epoch()) {
            self.devconf_epoch = None;
        }
        // Not already there, nor a name no link can have (the kernel
        // answers one of 16 bytes or more with ERANGE, not ENODEV).
        let mut asked: Vec<&str> = (names.iter().copied())
            .filter(|n| crate::sysctl::ifname_problem(n).is_none() && self.table.index(n).is_none())
            .collect();
        asked.sort_unstable();
        asked.dedup();
        for (name, row) in asked.iter().zip(self.ask_named(&asked)?) {
            if let Some(row) = row {
                crate::profile::count("links_read", 1);
                self.table.learn(&[LinkNews::Now(row)]);
                self.only.get_or_insert_with(Vec::new).push(name.to_string());
            }
        }
        Ok(())
    }

    fn read_links(&mut self) -> Result<(), NlError> {
        // Before the read: a step that ends the epoch during it makes the
        // values it reads unused.
        let epoch = crate::sysctl::epoch();
        self.devconf_epoch = None;
        let Some(names) = &self.only else {
            self.read_whole()?;
            self.devconf_epoch = Some(epoch);
            return Ok(());
        };
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let Some(mut rows) = self.ask_named(&names)?.into_iter().collect::<Option<Vec<_>>>() else {
            // What is said of a missing link names the links there are.
            return self.read_whole();
        };
        // The kernel's order, as a dump gives it.
        rows.sort_by_key(|r| r.link.index);
        crate::profile::count("links_read", rows.len());
        self.table = LinkTable::read(rows);
        self.partial = true;
        self.outside_names().clear();
        self.devconf_epoch = Some(epoch);
        Ok(())
    }

    /// The links named `names`, each asked by name (the requests sent
    /// together); None for a name no link has. The kernel also finds a
    /// link by an alternative name (`ip link property add altname`) and
    /// answers with its name, which a table holds: that is no link of
    /// this name either.
    fn ask_named(&self, names: &[&str]) -> Result<Vec<Option<linkdump::LinkRow>>, NlError> {
        let tables: Vec<_> = names.iter().map(|n| linkdump::named(n)).collect();
        (names.iter().zip(self.read_kept_all(&tables)?))
            .map(|(name, answer)| match answer {
                Ok(rows) => Ok(rows.into_iter().next().filter(|r| r.link.name == *name)),
                Err(e) if e.is(Errno::ENODEV) => Ok(None),
                Err(e) => Err(e),
            })
            .collect()
    }

    fn read_whole(&mut self) -> Result<(), NlError> {
        let rows = self.read_kept(&linkdump::table())?;
        crate::profile::count("links_read", rows.len());
        self.table = LinkTable::read(rows);
        self.partial = false;
        self.outside_names().clear();
        Ok(())
    }

    fn outside_names(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u32, Option<String>>> {
        self.outside.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes link notifications into the link table, in the order they
    /// came, so that it stays what a read would give without reading it
    /// (`watch`: a read is 4-6 ms with 1,000 pod veths). Returns false when
    /// one could not be read: the table must be read again.
    pub fn learn(&mut self, news: &[LinkNews]) -> bool {
        if !news.is_empty() {
            self.devconf_epoch = None;
        }
        self.table.learn(news)
    }

    pub fn links(&self) -> &[Link] {
        self.table.links()
    }

    /// The link-layer broadcast address of link `index` (IFLA_BROADCAST:
    /// ff:ff:ff:ff:ff:ff on Ethernet; on IPoIB 20 bytes that carry the
    /// partition key), as of the last read of the link table and the
    /// notifications `learn` took since.
    pub fn broadcast(&self, index: u32) -> Option<&[u8]> {
        self.table.broadcast(index)
    }

    /// The value of `/proc/sys/net/ipv4/conf/<name>/<key>` as the last
    /// read of the link table gave it (IFLA_INET_CONF), while nothing this
    /// process did since could have changed it (`sysctl::epoch`); None
    /// otherwise, or when that read had no link `name` (or no IPv4 on it):
    /// then the file is read. A no-op apply on 8 rails reads 4 sysctl files
    /// where it read 20.
    pub fn devconf(&self, name: &str, key: crate::model::SysctlKey) -> Option<u32> {
        if self.devconf_epoch != Some(crate::sysctl::epoch()) {
            return None;
        }
        self.table.devconf(self.table.index(name)?)?.get(key)
    }

    /// The MTU of link `index` (IFLA_MTU), as of the last read of the
    /// link table and the notifications `learn` took since.
    pub fn mtu(&self, index: u32) -> Option<u32> {
        self.table.mtu(index)
    }

    /// The name of link `index`: from the table, or, outside a partial
    /// one, from the kernel (once per index); `if{index}` for a link that
    /// is not there. Never called while the dump socket is held.
    fn ifname(&self, index: u32) -> String {
        self.name_by_index(index).unwrap_or_else(|| format!("if{index}"))
    }

    /// The index of link `name` now; None when there is no such link (or
    /// it cannot be asked).
    pub fn index_by_name(&self, name: &str) -> Option<u32> {
        self.ifindex(name).ok()
    }

    /// The name now of the link recorded as `name` with `index`, when it
    /// was renamed since: no link has `name` any more and link `index`
    /// has another name. None otherwise: a name some link has is kept,
    /// whichever link has it (one re-created with the name), and a link
    /// whose index is gone was not renamed (deleted).
    pub fn renamed(&self, name: &str, index: u32) -> Option<String> {
        if self.index_by_name(name).is_some() {
            return None;
        }
        self.name_by_index(index).filter(|now| now != name)
    }

    /// The name of link `index` now; None when there is no such link.
    pub fn name_by_index(&self, index: u32) -> Option<String> {
        match self.table.name(index) {
            Some(name) => Some(name.clone()),
            None if self.partial => self.outside_name(index),
            None => None,
        }
    }

    fn outside_name(&self, index: u32) -> Option<String> {
        if let Some(known) = self.outside_names().get(&index) {
            return known.clone();
        }
        crate::profile::count("links_named", 1);
        // A lookup that fails (no socket can be opened) names nothing,
        // and is asked again next time.
        let name = self.on_dump_socket(|fd| ifname::name_of(fd, index)).ok()?.ok()?;
        self.outside_names().insert(index, name.clone());
        name
    }

    /// The index of link `name`: from the table, or, outside a partial
    /// one, from the kernel.
    fn ifindex(&self, name: &str) -> Result<u32, NlError> {
        let missing = || {
            NlError::local(
                Errno::ENODEV,
                format!("interface {name:?} does not exist in this network namespace"),
            )
        };
        if let Some(index) = self.table.index(name) {
            return Ok(index);
        }
        if !self.partial {
            return Err(missing());
        }
        match self.on_dump_socket(|fd| ifname::index_of(fd, name))? {
            Ok(Some(index)) => Ok(index),
            Ok(None) => Err(missing()),
            Err(e) => Err(NlError::local(e, format!("cannot find interface {name:?}: {e}"))),
        }
    }

    /// `f` on the dump socket (opened if it is not yet): a socket of this
    /// namespace to ask ioctls on.
    fn on_dump_socket<R>(&self, f: impl FnOnce(std::os::fd::RawFd) -> R) -> Result<R, NlError> {
        use std::os::fd::AsRawFd;
        let mut kept = self.dumper.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let socket = match &mut *kept {
            Some(s) => s,
            None => kept.insert(rawdump::strict_socket()?),
        };
        Ok(f(socket.as_raw_fd()))
    }

    /// Asks the kernel which way a packet from `src` to `dst` goes, the way
    /// `ip route get DST from SRC` does, for each `(src, dst)` of `pairs`,
    /// in their order (the lookups sent together): the route it picks,
    /// including the table that matched (RTM_F_LOOKUP_TABLE).
    pub fn routes_get(&self, pairs: &[(IpAddr, IpAddr)]) -> Vec<Result<Route, NlError>> {
        self.lookups(pairs.iter().map(|&(src, dst)| (src, dst, plain_flags(dst))).collect())
    }

    /// `routes_get` for `check` and `show`, which judge the routing the
    /// host is configured with. For IPv6, the route that matched
    /// (RTM_F_FIB_MATCH: the same lookup, answered with the route's own
    /// link, table and gateway, not a redirect's cached gateway): a plain answer
    /// also carries a preferred source address, which for a route without
    /// one (a rail table's default route via its gateway) the kernel
    /// chooses by walking every link's addresses, a thousand pod veths'
    /// included (about 0.1 ms a lookup; `check` makes one per address and
    /// gateway). A route that is not unicast (the local table's: `ip
    /// route get` says `dev lo`) or names no single link (several next
    /// hops) is asked again the plain way, as `routes_get`, once every
    /// first answer is in.
    pub fn routes_matched(&self, pairs: &[(IpAddr, IpAddr)]) -> Vec<Result<Route, NlError>> {
        let first = pairs.iter().map(|&(src, dst)| {
            let flags = if dst.is_ipv6() { RouteFlags::FibMatch } else { plain_flags(dst) };
            (src, dst, flags)
        });
        let mut answers = self.lookups(first.collect());
        let again: Vec<usize> = (0..pairs.len())
            .filter(|&i| {
                pairs[i].1.is_ipv6()
                    && matches!(&answers[i], Ok(m) if m.oif.is_none() || m.kind != crate::model::rtn::UNICAST)
            })
            .collect();
        let plain = again.iter().map(|&i| (pairs[i].0, pairs[i].1, plain_flags(pairs[i].1)));
        for (i, answer) in again.iter().zip(self.lookups(plain.collect())) {
            answers[*i] = answer;
        }
        answers
    }

    /// Route lookups, each from `src` to `dst` with `flags`, sent together;
    /// the answer of each in their order (a failure to ask is each one's).
    fn lookups(&self, asks: Vec<(IpAddr, IpAddr, RouteFlags)>) -> Vec<Result<Route, NlError>> {
        let n = asks.len();
        let requests = asks.into_iter().map(|(src, dst, flags)| lookup_request(src, dst, flags)).collect();
        let answers = match self.ask_all(requests) {
            Ok(answers) => answers,
            Err(e) => return (0..n).map(|_| Err(e.clone())).collect(),
        };
        // Named after the socket is let go (`ifname` may ask the kernel).
        (answers.into_iter())
            .map(|answer| {
                answer?
                    .iter()
                    .find_map(|m| match m {
                        RouteNetlinkMessage::NewRoute(r) => route_from(r, |i| self.ifname(i)),
                        _ => None,
                    })
                    .ok_or_else(|| {
                        NlError::local(Errno::ENODATA, "the kernel answered the route lookup with no route")
                    })
            })
            .collect()
    }

    /// Runs one route or rule operation: sends it and reads its answer.
    /// The kernel makes the change inside the send, so nothing is gained
    /// by sending the next one before this answer is read (measured), and
    /// reading it first keeps the executor's rollback exact, one step at
    /// a time.
    pub fn change(&self, op: &Op) -> Result<(), NlError> {
        let mut writer = self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let writer = match &mut *writer {
            Some(w) => w,
            None => writer.insert(Writer::open()?),
        };
        writer.send(self, op)?;
        writer.answer().into_result()
    }

    /// `change`, for callers in async code.
    pub async fn execute(&self, op: &Op) -> Result<(), NlError> {
        self.change(op)
    }

    /// The request that carries out one route or rule operation, and the
    /// flags it is sent with (besides NLM_F_REQUEST and NLM_F_ACK). Sysctl
    /// operations are not netlink and are refused here.
    fn message(&self, op: &Op) -> Result<(RouteNetlinkMessage, u16), NlError> {
        let create = NLM_F_CREATE | NLM_F_EXCL;
        let replace = NLM_F_CREATE | NLM_F_REPLACE;
        Ok(match op {
            Op::AddRoute { route } => {
                (RouteNetlinkMessage::NewRoute(route_msg(route, |n| self.ifindex(n))?), create)
            }
            Op::ReplaceRoute { new, .. } => {
                (RouteNetlinkMessage::NewRoute(route_msg(new, |n| self.ifindex(n))?), replace)
            }
            Op::RestoreRoute { old, .. } => (RouteNetlinkMessage::NewRoute(parse_route(&old.raw)?), replace),
            Op::DelRoute { route, raw } => {
                let msg = match raw {
                    Some(raw) => parse_route(&raw.0)?,
                    None => route_msg(route, |n| self.ifindex(n))?,
                };
                (RouteNetlinkMessage::DelRoute(msg), 0)
            }
            Op::AddRule { rule, raw } => (RouteNetlinkMessage::NewRule(rule_msg(rule, raw)?), create),
            Op::DelRule { rule, raw } => (RouteNetlinkMessage::DelRule(rule_msg(rule, raw)?), 0),
            Op::SetSysctl { .. } => {
                return Err(NlError::local(
                    Errno::EINVAL,
                    "internal error: a sysctl operation reached netlink",
                ));
            }
        })
    }

    /// Sends one request that is not a dump and collects the answer. Errors
    /// carry the kernel's extended-ack text when there is one.
    async fn request(
        &self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>, NlError> {
        let mut out = Vec::new();
        for reply in self.exchange(msg, NLM_F_ACK | flags).await? {
            match reply.payload {
                NetlinkPayload::InnerMessage(m) => out.push(m),
                NetlinkPayload::Error(e) => {
                    if let Some(e) = NlError::of_nlmsg_error(&e) {
                        return Err(e);
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// netlink-proto's connection, opened at the first call: a socket with
    /// extended and capped acks and strict checking, served by a task of
    /// the runtime this runs in.
    fn handle(&self) -> Result<Handle, NlError> {
        let mut kept = self.handle.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(handle) = &*kept {
            return Ok(handle.clone());
        }
        let (mut conn, handle, _) =
            rtnetlink::new_connection().map_err(|e| NlError::io(e, "cannot open a netlink socket"))?;
        // netlink-proto swallows NLMSG_DONE unless told otherwise, and a
        // dump's error travels in NLMSG_DONE: without this, a failed dump
        // reads as an empty one. (Header flags, NLM_F_DUMP_INTR included,
        // always reach the request stream: it yields whole messages.)
        conn.set_forward_done(true);
        {
            let sock = conn.socket_mut().socket_mut();
            sock.set_ext_ack(true).map_err(|e| NlError::io(e, "NETLINK_EXT_ACK"))?;
            sock.set_cap_ack(true).map_err(|e| NlError::io(e, "NETLINK_CAP_ACK"))?;
            sock.set_netlink_get_strict_chk(true).map_err(|e| NlError::io(e, "NETLINK_GET_STRICT_CHK"))?;
        }
        crate::profile::count("netlink_sockets", 1);
        tokio::spawn(conn);
        Ok(kept.insert(handle).clone())
    }

    /// Sends one message and returns every reply to it, headers included,
    /// up to the one that ends the exchange (ack, error or NLMSG_DONE).
    async fn exchange(
        &self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<NetlinkMessage<RouteNetlinkMessage>>, NlError> {
        let mut req = NetlinkMessage::from(msg);
        req.header.flags = NLM_F_REQUEST | flags;
        let mut handle = self.handle()?;
        let stream = handle
            .request(req)
            .map_err(|e| NlError::local(Errno::EIO, format!("netlink request failed: {e}")))?;
        Ok(stream.collect().await)
    }
}

/// The flags of a plain lookup to `dst`: IPv4 reports the matching table
/// only when asked; IPv6 always reports it and refuses any flag but
/// RTM_F_FIB_MATCH.
fn plain_flags(dst: IpAddr) -> RouteFlags {
    match Family::of(&dst) {
        Family::V4 => RouteFlags::LookupTable,
        Family::V6 => RouteFlags::empty(),
    }
}

/// The request of a route lookup from `src` to `dst` with `flags`, its
/// header otherwise zero, as a strict socket requires.
fn lookup_request(src: IpAddr, dst: IpAddr, flags: RouteFlags) -> RouteNetlinkMessage {
    let family = Family::of(&dst);
    let mut msg = RouteMessage::default();
    msg.header.address_family = af(family);
    msg.header.destination_prefix_length = family.max_len();
    msg.header.source_prefix_length = family.max_len();
    msg.header.table = RouteHeader::RT_TABLE_UNSPEC;
    msg.header.protocol = RouteProtocol::Unspec;
    msg.header.scope = RouteScope::Universe;
    msg.header.kind = RouteType::Unspec;
    msg.header.flags = flags;
    msg.attributes.push(RouteAttribute::Destination(RouteAddress::from(dst)));
    msg.attributes.push(RouteAttribute::Source(RouteAddress::from(src)));
    RouteNetlinkMessage::GetRoute(msg)
}

/// The netlink address family of `f`.
fn af(f: Family) -> AddressFamily {
    match f {
        Family::V4 => AddressFamily::Inet,
        Family::V6 => AddressFamily::Inet6,
    }
}

/// The family of a message, when it is IPv4 or IPv6.
fn family_of(a: AddressFamily) -> Option<Family> {
    match a {
        AddressFamily::Inet => Some(Family::V4),
        AddressFamily::Inet6 => Some(Family::V6),
        _ => None,
    }
}

/// A message's bytes, as the kernel would send them.
#[cfg(test)]
fn emit<T: rtnetlink::packet_core::Emitable>(m: &T) -> Vec<u8> {
    let mut buf = vec![0u8; m.buffer_len()];
    m.emit(&mut buf);
    buf
}
