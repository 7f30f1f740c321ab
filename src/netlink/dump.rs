//! The dump protocol: the readers' filtered requests (the kernel filters
//! route and address dumps on a strict socket; rule dumps cannot be
//! filtered), and how a dump's replies become a result: complete,
//! interrupted (asked again) or failed (the error in NLMSG_DONE).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv6Addr};

use nix::errno::Errno;
use nix::libc::{RTM_NEWADDR, RTM_NEWLINK, RTM_NEWNEIGH, RTM_NEWROUTE, RTM_NEWRULE};
use rtnetlink::packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkDeserializable, NetlinkHeader, NetlinkMessage,
};
use rtnetlink::packet_route::route::{
    RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use rtnetlink::packet_route::rule::RuleMessage;
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};

use super::rawdump::{self, Table};
use super::{Netlink, NlError, af, route, rule};
use crate::model::{Address, Family, Live, Prefix, Route, Rule};

impl Netlink {
    /// Sends a dump request and returns the objects the kernel sent, each
    /// parsed whole by netlink-packet-route. Every reader of rules, routes
    /// and neighbours goes through it. A dump is only a result when it
    /// ends in NLMSG_DONE without an error; one the kernel marks as
    /// interrupted (its objects changed while it was being sent) is asked
    /// again, `DUMP_ATTEMPTS` times at most (`rawdump`).
    ///
    /// On a strict socket of its own, kept for the next dump, not through
    /// netlink-proto: there each dump went to the connection's task and
    /// back over channels, and each message was handed over one by one,
    /// about 40 µs a dump even for an empty table; a heal at 32 rails
    /// reads 64 tables. The kernel runs one dump at a time per socket (a
    /// second one meanwhile is refused EBUSY): the socket is held for the
    /// whole dump.
    pub async fn dump(&self, request: RouteNetlinkMessage) -> Result<Vec<RouteNetlinkMessage>, NlError> {
        self.read_kept(&table_of(request, NLM_F_DUMP)?)
    }

    /// Route lookups (`requests`, none a dump), sent together on the
    /// socket dumps are read on, each answered by its one reply or its
    /// error (no ack asked; see `rawdump::ask_all_on`). Through
    /// netlink-proto each lookup also went to the connection's task and
    /// back; `check` asks one per address and family.
    pub(super) fn ask_all(
        &self,
        requests: Vec<RouteNetlinkMessage>,
    ) -> Result<Vec<Result<Vec<RouteNetlinkMessage>, NlError>>, NlError> {
        let tables = requests.into_iter().map(|r| table_of(r, 0)).collect::<Result<Vec<_>, _>>()?;
        self.read_kept_all(&tables)
    }

    /// `tables`' requests (none a dump) on the kept strict socket, sent
    /// together (`rawdump::ask_all_on`).
    pub(super) fn read_kept_all<T>(
        &self,
        tables: &[Table<T>],
    ) -> Result<Vec<Result<Vec<T>, NlError>>, NlError> {
        let mut kept = self.dumper.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        rawdump::ask_all_on(&mut kept, rawdump::strict_socket, tables)
    }

    /// `request`'s dump with each reply read by `parse` (`route::route_row`,
    /// `rule::rule_row`: what roce-route uses of it, straight from its
    /// bytes), not parsed whole as `dump` parses it.
    fn rows_of<T>(
        &self,
        request: RouteNetlinkMessage,
        parse: fn(&[u8]) -> Result<Option<T>, NlError>,
    ) -> Result<Vec<T>, NlError> {
        let Table { what, request, reply, .. } = table_of(request, NLM_F_DUMP)?;
        self.read_kept(&Table { what, request, reply, parse })
    }

    /// `table`'s dump on the kept strict socket (opened at the first
    /// one), every table's: links, addresses, rules, routes, neighbours.
    /// (Requests that are not dumps go together: `read_kept_all`.)
    pub(super) fn read_kept<T>(&self, table: &Table<T>) -> Result<Vec<T>, NlError> {
        let mut kept = self.dumper.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        rawdump::dump_on(&mut kept, rawdump::strict_socket, table)
    }

    /// Every address of every interface (`addrdump`, with a light parser
    /// of its own), each named by its link's name, with one exception: with
    /// a partial table (`connect_for`), an IPv6 link-local address of a
    /// link outside it keeps an empty `ifname`. Such an address is unique
    /// on its link only (Calico gives every host-side veth the same
    /// fe80::ecee:eeff:feee:eeee), so it says nothing of a rail: a gateway
    /// or a listed address that is link-local is looked for on its own
    /// link (`plan`), and ARP flux is IPv4's. Naming them cost a system
    /// call per pod veth (0.9 ms of a no-op at 1,000). Their addresses stay
    /// in the list: a route lookup must not take one for a peer.
    ///
    /// Once watch keeps them (`keep_addresses`), the addresses of the links
    /// it names fresh (the rails) are read from the kernel, one dump each,
    /// and those of every other link come from what the notifications
    /// said.
    pub async fn addresses(&self) -> Result<Vec<Address>, NlError> {
        let rows = match &self.kept_addrs {
            None => self.every_address()?,
            Some(kept) => self.kept_and_fresh(kept)?,
        };
        Ok(self.named(rows))
    }

    /// The addresses a run of apply, check, show or watch plans with:
    /// every IPv4 address, the IPv6 addresses of `rails`, and of other
    /// links only the IPv6 addresses in `looked_for` (neither link-local:
    /// such an address is looked for on its own link only); an address of
    /// a link outside a partial table is named only when the run compares
    /// it with its own (`named_for_run`: `looked_for` says which
    /// addresses the run looks for on other links).
    ///
    /// The kernel walks every link for a family's dump: on a node with a
    /// thousand pod veths, their IPv6 link-local addresses were 0.8 ms of
    /// a 3.3-4.4 ms no-op (a short-lived process finds them cold), and a
    /// dual-stack run wanted them all. Nothing of a run compares another
    /// link's IPv6 address but by equality with one it looks for (`plan`:
    /// a listed or found address moved there, a gateway that is the
    /// host's own; a lookup's destination, which `check` and `show` ask
    /// about themselves: `reconcile::choose_off_local`), and ARP flux is
    /// IPv4's. So the rails' IPv6 addresses come from a dump filtered by
    /// link each, the IPv4 ones from a dump of that family, and each IPv6
    /// address looked for that no rail has from a request of its own
    /// (`addresses_at`). Kept addresses (watch) are narrowed the same way,
    /// so that every command plans on the same view of the host (but for
    /// an address on two links: the kernel answers with one of them,
    /// watch keeps both).
    pub async fn run_addresses(
        &self,
        rails: &[&str],
        looked_for: &BTreeSet<IpAddr>,
    ) -> Result<Vec<Address>, NlError> {
        let rows = self.run_rows(rails, looked_for)?;
        Ok(self.named_for_run(rows, |ip| looked_for.contains(ip)))
    }

    /// `run_addresses`' rows, each with its link's index.
    fn run_rows(
        &self,
        rails: &[&str],
        looked_for: &BTreeSet<IpAddr>,
    ) -> Result<Vec<(u32, Address)>, NlError> {
        let indexes: Vec<u32> = rails.iter().filter_map(|n| self.table.index(n)).collect();
        if let Some(kept) = &self.kept_addrs {
            return Ok(run_view(self.kept_and_fresh(kept)?, &indexes, looked_for));
        }
        let mut v6 = self.addresses_of_links(&indexes, Some(Family::V6))?;
        let elsewhere: Vec<Ipv6Addr> = elsewhere(looked_for, &v6);
        v6.extend(self.addresses_at(&elsewhere)?);
        let mut rows = self.read_kept(&super::addrdump::of_family(Family::V4, 0))?;
        crate::profile::count("addresses_read", rows.len());
        rows.retain(|(_, a)| a.addr.family() == Family::V4);
        // Stable: each link's addresses stay in the kernel's order.
        v6.sort_by_key(|(i, a)| super::addrtable::place(*i, a));
        rows.extend(v6);
        Ok(rows)
    }

    /// The IPv6 addresses `ips`, each on the link that has it (the first
    /// the kernel finds: an address on two links is one of them), one
    /// request each (`addrdump::at_address`), sent together, in the order
    /// of `ips`; an address no link has is not there.
    fn addresses_at(&self, ips: &[Ipv6Addr]) -> Result<Vec<(u32, Address)>, NlError> {
        let tables: Vec<_> = ips.iter().map(|ip| super::addrdump::at_address(*ip)).collect();
        crate::profile::count("addresses_asked", ips.len());
        let mut rows = Vec::new();
        for (ip, answer) in ips.iter().zip(self.read_kept_all(&tables)?) {
            match answer {
                Ok(read) => rows.extend(read.into_iter().filter(|(_, a)| a.addr.addr == IpAddr::V6(*ip))),
                // No link has it; on a kernel booted with ipv6.disable=1
                // there is no IPv6 address to ask for (EOPNOTSUPP).
                Err(e) if e.is(Errno::EADDRNOTAVAIL) || e.is(Errno::EOPNOTSUPP) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(rows)
    }

    /// Every address of the host, without its link (one dump of them all).
    pub async fn host_addresses(&self) -> Result<BTreeSet<IpAddr>, NlError> {
        Ok(self.every_address()?.into_iter().map(|(_, a)| a.addr.addr).collect())
    }

    /// Which of `ips` are addresses of this host (IPv6 only: the caller
    /// has every IPv4 address), each asked (`addresses_at`).
    pub async fn local_among(&self, ips: &[Ipv6Addr]) -> Result<Vec<Ipv6Addr>, NlError> {
        // `addresses_at` keeps only the rows of the addresses it asked for.
        let found = self.addresses_at(ips)?;
        Ok(found
            .into_iter()
            .filter_map(|(_, a)| match a.addr.addr {
                IpAddr::V6(ip) => Some(ip),
                IpAddr::V4(_) => None,
            })
            .collect())
    }

    /// `named`, but with a partial table an address of a link outside it
    /// is named only when the run compares it with its own: `compared`
    /// says so (a listed or found address, a gateway), or it is in or
    /// overlaps the subnet of an address of a link in the table
    /// (`in_subnets`: ARP flux, a managed subnet). The others keep an
    /// empty `ifname`, as a link-local address does in `named`: every
    /// consumer of a run's addresses looks at another link's by one of
    /// those, or at its IPv4 address alone (a route lookup must not take
    /// it for a peer; an IPv6 destination is asked about instead). A
    /// Kubernetes CNI that gives each host-side pod veth an
    /// address (the ptp plugin, GKE's) made naming them a system call per
    /// pod: 0.4-0.7 ms of a 3-5 ms no-op at 500 (`bench/scale.py`).
    fn named_for_run(&self, rows: Vec<(u32, Address)>, compared: impl Fn(&IpAddr) -> bool) -> Vec<Address> {
        if !self.partial {
            return self.named(rows);
        }
        let _p = crate::profile::phase("link names");
        let link_local = |a: &Address| crate::model::is_v6_link_local(a.addr.addr);
        let mut ours: Vec<Prefix> = rows
            .iter()
            .filter(|(i, a)| self.table.name(*i).is_some() && !link_local(a))
            .map(|(_, a)| a.subnet())
            .collect();
        ours.sort_unstable();
        ours.dedup();
        rows.into_iter()
            .map(|(index, a)| {
                let looked_at = !link_local(&a) && (compared(&a.addr.addr) || in_subnets(&ours, &a));
                let ifname = match self.table.name(index) {
                    Some(name) => name.clone(),
                    None if looked_at => self.ifname(index),
                    None => String::new(),
                };
                Address { ifname, ..a }
            })
            .collect()
    }

    /// Each address named by its link's name, with one exception: with a
    /// partial table, an IPv6 link-local address of a link outside it
    /// keeps an empty `ifname` (see `addresses`).
    fn named(&self, rows: Vec<(u32, Address)>) -> Vec<Address> {
        let _p = crate::profile::phase("link names");
        rows.into_iter()
            .map(|(index, a)| {
                let unnamed = self.partial
                    && crate::model::is_v6_link_local(a.addr.addr)
                    && self.table.name(index).is_none();
                let ifname = if unnamed { String::new() } else { self.ifname(index) };
                Address { ifname, ..a }
            })
            .collect()
    }

    /// The dump of every address, each with its link's index.
    fn every_address(&self) -> Result<Vec<(u32, Address)>, NlError> {
        let rows = self.read_kept(&super::addrdump::table())?;
        // Counted for the profile: a command that dumped them twice went
        // unseen (tests/apply.rs holds the count).
        crate::profile::count("addresses_read", rows.len());
        Ok(rows)
    }

    /// `kept`'s addresses, but those of its fresh links read now, in a
    /// dump's order (`AddrTable`). A fresh link that does not exist (or
    /// went since the link table saw it) has none.
    fn kept_and_fresh(&self, kept: &super::KeptAddrs) -> Result<Vec<(u32, Address)>, NlError> {
        let fresh: Vec<u32> = kept.fresh.iter().filter_map(|n| self.table.index(n)).collect();
        // Most links fresh (a host without pod veths): one dump of them all
        // costs less than one per link.
        if 2 * fresh.len() >= self.table.links().len() {
            return self.every_address();
        }
        let mut rows: Vec<(u32, Address)> =
            kept.table.rows().iter().filter(|(i, _)| !fresh.contains(i)).cloned().collect();
        crate::profile::count("addresses_kept", rows.len());
        rows.extend(self.addresses_of_links(&fresh, None)?);
        // Stable: each link's addresses stay in the kernel's order.
        rows.sort_by_key(|(i, a)| super::addrtable::place(*i, a));
        Ok(rows)
    }

    /// The addresses of links `indexes`, of both families or of `family`
    /// only, one dump filtered by `ifa_index` each, each link's in the
    /// kernel's order; a link that does not exist (or went since the link
    /// table saw it) has none.
    fn addresses_of_links(
        &self,
        indexes: &[u32],
        family: Option<Family>,
    ) -> Result<Vec<(u32, Address)>, NlError> {
        let mut rows = Vec::new();
        for &index in indexes {
            let table = match family {
                None => super::addrdump::of_link(index),
                Some(f) => super::addrdump::of_family(f, index),
            };
            match self.read_kept(&table) {
                Ok(read) => {
                    crate::profile::count("addresses_read", read.len());
                    rows.extend(of_link_and_family(read, index, family));
                }
                Err(e) if e.is(Errno::ENODEV) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(rows)
    }

    /// The addresses of the links named `names` only, in a dump's order
    /// (IPv4 first, by link, each link's in the kernel's order): for a
    /// command that looks at its rails' addresses alone (nccl-env, probe
    /// --self, the announcement after a change), without the dump of a
    /// node's pod veths' addresses. The names are the link table's
    /// (`connect_for` reads them all); one that is not there has none.
    pub async fn addresses_on(&self, names: &[&str]) -> Result<Vec<Address>, NlError> {
        let indexes: Vec<u32> = names.iter().filter_map(|n| self.table.index(n)).collect();
        let mut rows = self.addresses_of_links(&indexes, None)?;
        // Stable: each link's addresses stay in the kernel's order.
        rows.sort_by_key(|(i, a)| super::addrtable::place(*i, a));
        Ok(self.named(rows))
    }

    /// From now on, `addresses` takes those of links other than `fresh`
    /// from the notifications `learn_addresses` is given, after one read
    /// of them all now (watch: subscribed before it).
    pub async fn keep_addresses(&mut self, fresh: Vec<String>) -> Result<(), NlError> {
        let rows = self.every_address()?;
        self.kept_addrs = Some(super::KeptAddrs { table: super::addrtable::AddrTable::read(rows), fresh });
        Ok(())
    }

    /// Whether `addresses` takes the addresses of links other than the
    /// fresh ones from notifications (`keep_addresses`).
    pub fn keeps_addresses(&self) -> bool {
        self.kept_addrs.is_some()
    }

    /// The links whose addresses `addresses` reads from the kernel every
    /// time (the rails of the config now).
    pub fn fresh_addresses_of(&mut self, fresh: Vec<String>) {
        if let Some(kept) = &mut self.kept_addrs {
            kept.fresh = fresh;
        }
    }

    /// Takes address notifications into the kept addresses, in the order
    /// they came. Returns false when one could not be read: they must be
    /// read again (`keep_addresses`). Without kept addresses, true.
    pub fn learn_addresses(&mut self, news: &[super::AddrNews]) -> bool {
        self.kept_addrs.as_mut().is_none_or(|kept| kept.table.learn(news))
    }

    /// Every policy rule of both families, with its dumped bytes. Rule dumps
    /// cannot be filtered in the kernel, so callers filter.
    ///
    /// One AF_UNSPEC dump: the kernel walks every family's rules (multicast
    /// routing's, families 128 and 129, are left out here), and the IPv4
    /// ones come first, as two dumps gave them. A kernel that refuses it is
    /// asked family by family (`unspec_refused`); there, a kernel without
    /// IPv6 (`ipv6.disable=1`) answers the IPv6 dump EAFNOSUPPORT: no rules.
    pub async fn rules(&self) -> Result<Vec<Live<Rule>>, NlError> {
        if let Some(mut all) = self.unspec(self.rules_of(None)).await {
            all.sort_by_key(|r| r.item.family == Family::V6);
            return Ok(all);
        }
        let mut all = self.rules_of(Some(Family::V4)).await?;
        match self.rules_of(Some(Family::V6)).await {
            Err(e) if e.is(Errno::EAFNOSUPPORT) => {}
            v6 => all.extend(v6?),
        }
        Ok(all)
    }

    /// The answer of an AF_UNSPEC dump, or None when it failed (the caller
    /// then asks family by family). A refusal of the request itself
    /// (EINVAL, EOPNOTSUPP) is remembered: the next ones are not sent. A
    /// passing failure (interrupted dumps, a full buffer) is not: watch
    /// lives long.
    async fn unspec<T>(&self, dump: impl Future<Output = Result<T, NlError>>) -> Option<T> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.unspec_refused.load(Relaxed) {
            return None;
        }
        match dump.await {
            Ok(answer) => Some(answer),
            Err(e) => {
                if e.is(Errno::EINVAL) || e.is(Errno::EOPNOTSUPP) {
                    self.unspec_refused.store(true, Relaxed);
                }
                None
            }
        }
    }

    async fn rules_of(&self, family: Option<Family>) -> Result<Vec<Live<Rule>>, NlError> {
        let mut msg = RuleMessage::default();
        msg.header.family = family.map_or(AddressFamily::Unspec, af);
        crate::profile::count("rule_dumps", 1);
        self.rows_of(RouteNetlinkMessage::GetRule(msg), rule::rule_row)
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
        self.routes_filtered(Some(family), table, protocol, None).await
    }

    /// Both families' routes of `table`, IPv4's first: one AF_UNSPEC dump,
    /// whose every family's handler filters on the table (strict dump
    /// checking) and answers nothing for one it does not have, where a dump
    /// per family took two. A kernel where a family refuses the filter
    /// (MPLS's handler answers EINVAL "Unsupported attribute in dump
    /// request") is asked family by family, as before.
    pub async fn table_routes(&self, table: u32) -> Result<Vec<Live<Route>>, NlError> {
        if let Some(mut all) = self.unspec(self.routes_filtered(None, Some(table), None, None)).await {
            all.sort_by_key(|r| r.item.family == Family::V6);
            return Ok(all);
        }
        let mut all = self.routes(Family::V4, Some(table), None).await?;
        all.extend(self.routes(Family::V6, Some(table), None).await?);
        Ok(all)
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
        let routes = self.routes_filtered(Some(family), Some(table), None, Some(oif)).await?;
        Ok(routes.into_iter().filter(|r| r.item.oif.as_deref() == Some(ifname)).collect())
    }

    /// Routes of `family` (None: every family's handler) as filtered.
    async fn routes_filtered(
        &self,
        family: Option<Family>,
        table: Option<u32>,
        protocol: Option<u8>,
        oif: Option<u32>,
    ) -> Result<Vec<Live<Route>>, NlError> {
        let mut request = route_filter(family, table, protocol);
        if let Some(i) = oif {
            request.attributes.push(RouteAttribute::Oif(i));
        }
        crate::profile::count("route_dumps", 1);
        let dump = self.rows_of(RouteNetlinkMessage::GetRoute(request), route::route_row);
        let rows = if table.is_some() { empty_if_missing_table(dump)? } else { dump? };
        crate::profile::count("routes_read", rows.len());
        Ok(rows
            .into_iter()
            .filter(|row| {
                // The kernel filters; check again so that a kernel without
                // strict checking cannot widen the result. And on the
                // family: a kernel without IPv6 (`ipv6.disable=1`) answers
                // an IPv6 dump with every family's routes.
                let item = &row.route;
                table.is_none_or(|t| t == item.table)
                    && protocol.is_none_or(|p| p == item.protocol)
                    && family.is_none_or(|f| f == item.family)
            })
            .map(|row| row.live(|i| self.ifname(i)))
            .collect())
    }
}

/// The rows of link `index` (and of `family`) of a dump asked for those
/// only: a kernel without the family's handler (IPv6 off with
/// `ipv6.disable=1`) answers an IPv6 dump with every family's, and one
/// that does not filter by link with every link's. Pure.
fn of_link_and_family(rows: Vec<(u32, Address)>, index: u32, family: Option<Family>) -> Vec<(u32, Address)> {
    rows.into_iter().filter(|(i, a)| *i == index && family.is_none_or(|f| a.addr.family() == f)).collect()
}

/// What `run_addresses` reads of `rows` (every address): every IPv4
/// address, the IPv6 addresses of `rails` (indexes), and another link's
/// IPv6 address only when it is looked for and not link-local; in their
/// order. Pure.
fn run_view(rows: Vec<(u32, Address)>, rails: &[u32], looked_for: &BTreeSet<IpAddr>) -> Vec<(u32, Address)> {
    rows.into_iter()
        .filter(|(i, a)| {
            a.addr.family() == Family::V4
                || rails.contains(i)
                || (crate::model::asked_on_every_link(a.addr.addr) && looked_for.contains(&a.addr.addr))
        })
        .collect()
}

/// The IPv6 addresses of `looked_for` to ask for on other links: neither
/// link-local (looked for on its own link only) nor among `rails_v6` (the
/// rails' IPv6 addresses, read). Pure.
fn elsewhere(looked_for: &BTreeSet<IpAddr>, rails_v6: &[(u32, Address)]) -> Vec<Ipv6Addr> {
    looked_for
        .iter()
        .filter(|ip| crate::model::asked_on_every_link(**ip))
        .filter_map(|ip| match ip {
            IpAddr::V6(v6) => Some(*v6),
            IpAddr::V4(_) => None,
        })
        .filter(|ip| !rails_v6.iter().any(|(_, a)| a.addr.addr == IpAddr::V6(*ip)))
        .collect()
}

/// Whether `a` meets one of `subnets` (`Address::meets`, as ARP flux
/// asks). Pure.
fn in_subnets(subnets: &[Prefix], a: &Address) -> bool {
    subnets.iter().any(|s| a.meets(s))
}

/// The exchange of `request`: its bytes (NLM_F_REQUEST and `flags`:
/// NLM_F_DUMP, or 0 for a request that is not a dump; sequence 1
/// until it is sent with one of its own), and what its replies are: their
/// name in errors, their type, their parse (netlink-packet-route's,
/// whole). Pure.
fn table_of(request: RouteNetlinkMessage, flags: u16) -> Result<Table<RouteNetlinkMessage>, NlError> {
    type Parse = fn(&[u8]) -> Result<Option<RouteNetlinkMessage>, NlError>;
    let (what, reply, parse): (_, _, Parse) = match &request {
        RouteNetlinkMessage::GetRoute(_) => ("routes", RTM_NEWROUTE, |p| whole(RTM_NEWROUTE, "route", p)),
        RouteNetlinkMessage::GetRule(_) => ("rules", RTM_NEWRULE, |p| whole(RTM_NEWRULE, "rule", p)),
        RouteNetlinkMessage::GetNeighbour(_) => {
            ("neighbours", RTM_NEWNEIGH, |p| whole(RTM_NEWNEIGH, "neighbour entry", p))
        }
        // Read whole: the commands read these through `linkdump` and
        // `addrdump`, parsed for what they use.
        RouteNetlinkMessage::GetAddress(_) => {
            ("addresses", RTM_NEWADDR, |p| whole(RTM_NEWADDR, "address", p))
        }
        RouteNetlinkMessage::GetLink(_) => ("links", RTM_NEWLINK, |p| whole(RTM_NEWLINK, "link", p)),
        _ => {
            return Err(NlError::local(Errno::EINVAL, "internal error: not a dump request roce-route makes"));
        }
    };
    let mut req = NetlinkMessage::from(request);
    req.header.flags = NLM_F_REQUEST | flags;
    req.header.sequence_number = 1;
    req.finalize();
    let mut bytes = vec![0; req.buffer_len()];
    req.serialize(&mut bytes);
    Ok(Table { what, request: bytes, reply, parse })
}

/// One message of type `kind` parsed whole. One the parser refuses fails
/// the dump: going on without it could make roce-route add or remove an
/// entry beside one it did not see.
fn whole(kind: u16, what: &str, payload: &[u8]) -> Result<Option<RouteNetlinkMessage>, NlError> {
    let mut header = NetlinkHeader::default();
    header.message_type = kind;
    RouteNetlinkMessage::deserialize(&header, payload)
        .map(Some)
        .map_err(|e| NlError::local(Errno::EPROTO, format!("cannot read a {what} the kernel sent: {e}")))
}

/// A route dump request that the kernel filters on `table` (RTA_TABLE) and
/// `protocol` (header) and on nothing else: type unspec and table unspec
/// in the header, since a strict socket filters on every field that is
/// set (a builder's defaults would ask for static unicast routes of main).
fn route_filter(family: Option<Family>, table: Option<u32>, protocol: Option<u8>) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header.address_family = family.map_or(AddressFamily::Unspec, af);
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

/// The error a route dump filtered on a table gets when that table does
/// not exist: the kernel creates a table with its first route, and
/// inet_dump_fib / inet6_dump_fib answer ENOENT "FIB table does not exist"
/// (in NLMSG_DONE) for one that was never created. For roce-route that is
/// a table without routes.
const FIB_TABLE_DOES_NOT_EXIST: Errno = Errno::ENOENT;

/// The result of a table-filtered route dump, with the missing table read
/// as an empty one. Only for those dumps: anywhere else ENOENT is an error.
fn empty_if_missing_table<T>(dump: Result<Vec<T>, NlError>) -> Result<Vec<T>, NlError> {
    match dump {
        Err(e) if e.is(FIB_TABLE_DOES_NOT_EXIST) => Ok(Vec::new()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroI32;

    use rtnetlink::packet_core::{DoneMessage, ErrorMessage, NetlinkPayload};
    use rtnetlink::packet_route::route::RouteMessage;

    use super::*;
    use crate::netlink::extack::nla_msg;
    use crate::netlink::rawdump::tests::{datagram, framed, read_whole};

    fn route(table: u32, oif: u32) -> RouteNetlinkMessage {
        let mut m = route_filter(Some(Family::V4), Some(table), Some(234));
        m.header.kind = RouteType::Unicast;
        m.header.destination_prefix_length = 24;
        m.attributes.push(RouteAttribute::Oif(oif));
        RouteNetlinkMessage::NewRoute(m)
    }

    fn routes() -> Table<RouteNetlinkMessage> {
        table_of(RouteNetlinkMessage::GetRoute(route_filter(Some(Family::V4), Some(1000), None)), NLM_F_DUMP)
            .unwrap()
    }

    /// The request is a dump of its kind, and its replies are parsed whole
    /// by netlink-packet-route, in the kernel's order.
    #[test]
    fn a_dump_sends_the_request_and_reads_each_reply_whole() {
        let table = routes();
        let req = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&table.request).unwrap();
        assert_eq!(req.header.flags, NLM_F_REQUEST | NLM_F_DUMP);
        assert_eq!(req.header.message_type, nix::libc::RTM_GETROUTE);
        assert_eq!(
            req.payload,
            NetlinkPayload::InnerMessage(RouteNetlinkMessage::GetRoute(route_filter(
                Some(Family::V4),
                Some(1000),
                None
            )))
        );
        let sent = vec![route(1000, 3), route(1000, 4)];
        let read = read_whole(&table, &[datagram(sent.iter().map(|m| (m.clone(), 0)).collect(), Some(0))]);
        assert_eq!(read.unwrap(), sent);
        let rules = table_of(RouteNetlinkMessage::GetRule(RuleMessage::default()), NLM_F_DUMP).unwrap();
        assert_eq!((rules.what, rules.reply), ("rules", RTM_NEWRULE));
        let neigh = RouteNetlinkMessage::GetNeighbour(Default::default());
        assert_eq!(table_of(neigh, NLM_F_DUMP).unwrap().reply, RTM_NEWNEIGH);
        let link = RouteNetlinkMessage::GetLink(Default::default());
        assert_eq!(table_of(link, NLM_F_DUMP).unwrap().reply, RTM_NEWLINK);
        let route = RouteNetlinkMessage::NewRoute(RouteMessage::default());
        assert!(table_of(route, NLM_F_DUMP).is_err(), "not a request roce-route makes");
    }

    /// A missing table is the one error read as an empty table, and it
    /// keeps the kernel's text; any other error stays one.
    #[test]
    fn only_a_missing_table_reads_as_empty() {
        let text = "ipv4: FIB table does not exist";
        let mut done = DoneMessage::default();
        done.code = -(Errno::ENOENT as i32);
        done.extended_ack = nla_msg(text);
        let missing = read_whole(&routes(), &[framed(NetlinkPayload::Done(done), 0)]).unwrap_err();
        assert_eq!(missing, NlError { errno: FIB_TABLE_DOES_NOT_EXIST, ext_ack: Some(text.into()) });
        assert_eq!(empty_if_missing_table::<u32>(Err(missing)), Ok(Vec::new()));
        let other = NlError { errno: Errno::EINVAL, ext_ack: None };
        assert_eq!(empty_if_missing_table::<u32>(Err(other.clone())), Err(other));
        let routes = vec![route(1000, 3)];
        assert_eq!(empty_if_missing_table(Ok(routes.clone())), Ok(routes));
    }

    /// A dump refused before it started answers NLMSG_ERROR: its errno and
    /// ext-ack text (after the capped echo of the request's header).
    #[test]
    fn a_refused_dump_is_its_error_with_the_kernels_text() {
        let text = "Invalid values in header for FIB dump request";
        let mut e = ErrorMessage::default();
        e.code = NonZeroI32::new(-(Errno::EINVAL as i32));
        e.header = [vec![0; 16], nla_msg(text)].concat();
        let got = read_whole(&routes(), &[framed(NetlinkPayload::Error(e), 0)]).unwrap_err();
        assert_eq!(got, NlError { errno: Errno::EINVAL, ext_ack: Some(text.into()) });
    }

    /// A request that is not a dump (a route lookup) asks for no ack and
    /// ends at its one reply, read from a datagram of its own as the
    /// kernel sends it; refused, it is its error with the kernel's text.
    /// An ack ending it (were one asked for) ends it too; the same ack
    /// ending a dump is an error: a dump ends at NLMSG_DONE.
    #[test]
    fn a_lookup_ends_at_its_reply_and_a_dump_does_not() {
        let mut lookup = RouteMessage::default();
        lookup.header.address_family = af(Family::V4);
        let ask = table_of(RouteNetlinkMessage::GetRoute(lookup), 0).unwrap();
        let req = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&ask.request).unwrap();
        assert_eq!(req.header.flags, NLM_F_REQUEST, "no NLM_F_DUMP (a lookup, not every route), no ack");
        let reply = route(1000, 3);
        let alone = datagram(vec![(reply.clone(), 0)], None);
        assert_eq!(read_whole(&ask, std::slice::from_ref(&alone)).unwrap(), std::slice::from_ref(&reply));
        let ack = framed(NetlinkPayload::Error(ErrorMessage::default()), 0);
        assert_eq!(read_whole(&ask, std::slice::from_ref(&ack)).unwrap(), []);

        let text = "Network is unreachable";
        let mut e = ErrorMessage::default();
        e.code = NonZeroI32::new(-(Errno::ENETUNREACH as i32));
        e.header = [vec![0; 16], nla_msg(text)].concat();
        let refused = read_whole(&ask, &[framed(NetlinkPayload::Error(e), 0)]).unwrap_err();
        assert_eq!(refused, NlError { errno: Errno::ENETUNREACH, ext_ack: Some(text.into()) });

        let mut dumped = alone;
        dumped.extend(&ack);
        let e = rawdump::tests::read_whole(&routes(), &[dumped]).unwrap_err();
        assert!(e.to_string().contains("acked the routes dump"), "{e}");
    }

    /// A reply the parser refuses fails the dump: a table read without it
    /// is not the table.
    #[test]
    fn a_reply_that_cannot_be_read_fails_the_dump() {
        let mut bytes = datagram(vec![(route(1000, 3), 0)], Some(0));
        // The route's length cut to its netlink header and 4 bytes: no
        // room for its rtmsg. The next message (NLMSG_DONE) follows.
        let first = u32::from_ne_bytes(bytes[..4].try_into().unwrap()) as usize;
        bytes.drain(20..first);
        bytes[..4].copy_from_slice(&20u32.to_ne_bytes());
        let e = read_whole(&routes(), &[bytes]).unwrap_err();
        assert_eq!(e.errno, Errno::EPROTO, "{e}");
        assert!(e.to_string().contains("cannot read a route"), "{e}");
    }

    /// A dump asked for one link and family keeps those rows only.
    #[test]
    fn a_filtered_dump_keeps_its_link_and_family_only() {
        let a = |cidr: &str| Address { addr: crate::model::prefix(cidr), ..Address::default() };
        let rows = vec![(3, a("198.51.100.10/24")), (3, a("fe80::1/64")), (4, a("fe80::2/64"))];
        let v6: Vec<u32> =
            of_link_and_family(rows.clone(), 3, Some(Family::V6)).iter().map(|r| r.0).collect();
        assert_eq!(v6, [3]);
        assert_eq!(of_link_and_family(rows.clone(), 3, Some(Family::V6))[0].1, a("fe80::1/64"));
        assert_eq!(of_link_and_family(rows, 3, None).len(), 2, "both families of link 3");
    }

    /// Every IPv4 address stays, the rails' IPv6 ones, and another link's
    /// IPv6 address when it is looked for and not link-local; in order.
    #[test]
    fn a_run_keeps_other_links_ipv6_addresses_only_when_looked_for() {
        let a = |cidr: &str| Address { addr: crate::model::prefix(cidr), ..Address::default() };
        let host = vec![
            (1, a("198.51.100.10/24")),
            (5, a("203.0.113.9/32")),
            (1, a("fe80::1/64")),
            (6, a("fe80::ecee:eeff:feee:eeee/64")),
            (5, a("2001:db8:9::1/64")),
            (7, a("2001:db8:9::2/64")),
            (2, a("2001:db8:1::11/64")),
        ];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let shown = |rows: Vec<(u32, Address)>| -> Vec<String> {
            rows.iter().map(|(i, a)| format!("{i} {}", a.addr)).collect()
        };
        let none = BTreeSet::new();
        let rails = ["1 198.51.100.10/24", "5 203.0.113.9/32", "1 fe80::1/64", "2 2001:db8:1::11/64"];
        assert_eq!(shown(run_view(host.clone(), &[1, 2], &none)), rails);
        // Looked for: 2001:db8:9::2 (link 7), a link-local (on its own
        // link only) and one on a rail (read there).
        let looked_for =
            BTreeSet::from([ip("2001:db8:9::2"), ip("fe80::ecee:eeff:feee:eeee"), ip("2001:db8:1::11")]);
        let with = shown(run_view(host, &[1, 2], &looked_for));
        assert_eq!(
            with,
            [
                "1 198.51.100.10/24",
                "5 203.0.113.9/32",
                "1 fe80::1/64",
                "7 2001:db8:9::2/64",
                "2 2001:db8:1::11/64"
            ]
        );
        // Asked for on other links: neither the link-local one nor the
        // rail's, nor an IPv4 address (the IPv4 dump has them all).
        let rails_v6 = vec![(1, a("fe80::1/64")), (2, a("2001:db8:1::11/64"))];
        let mut asked = looked_for.clone();
        asked.insert(ip("198.51.100.99"));
        assert_eq!(elsewhere(&asked, &rails_v6), ["2001:db8:9::2".parse::<Ipv6Addr>().unwrap()]);
        assert!(elsewhere(&none, &rails_v6).is_empty());
    }

    /// An address is in a managed subnet when the subnet holds it, or
    /// when its own subnet (a peer's for a point-to-point address)
    /// overlaps one, either way round; never across families.
    #[test]
    fn an_address_is_in_a_subnet_it_overlaps() {
        let p = crate::model::prefix;
        let a = |cidr: &str| Address { addr: p(cidr), ..Address::default() };
        let managed = [p("198.51.100.0/24"), p("2001:db8:1::/64")];
        assert!(in_subnets(&managed, &a("198.51.100.77/32")), "a /32 inside");
        assert!(in_subnets(&managed, &a("198.51.100.200/25")), "a smaller subnet");
        assert!(in_subnets(&managed, &a("198.51.0.1/16")), "a larger subnet");
        assert!(in_subnets(&managed, &a("2001:db8:1::99/128")));
        assert!(!in_subnets(&managed, &a("203.0.113.9/32")), "a pod's /32");
        assert!(!in_subnets(&managed, &a("198.51.101.1/24")), "the next /24");
        assert!(!in_subnets(&managed, &a("2001:db8:2::1/64")));
        let peer = Address { peer: Some("198.51.100.1".parse().unwrap()), ..a("10.0.0.1/32") };
        assert!(in_subnets(&managed, &peer), "a point-to-point address whose peer is inside");
        assert!(!in_subnets(&[], &a("198.51.100.77/32")));
        let v4 = [p("0.0.0.0/0")];
        assert!(!in_subnets(&v4, &a("2001:db8:1::99/128")), "an IPv4 default holds no IPv6 address");
        assert!(!in_subnets(&[p("::/0")], &a("198.51.100.77/32")), "nor the other way round");
    }

    #[test]
    fn a_route_dump_filters_on_table_and_protocol_only() {
        let m = route_filter(Some(Family::V4), Some(1000), Some(234));
        assert_eq!(m.header.address_family, af(Family::V4));
        assert_eq!(m.header.table, RouteHeader::RT_TABLE_UNSPEC, "tables above 255 need the attribute");
        assert_eq!(m.header.protocol, RouteProtocol::from(234));
        assert_eq!(m.header.kind, RouteType::Unspec, "a type would filter too");
        assert_eq!(m.attributes, [RouteAttribute::Table(1000)]);
        let m = route_filter(Some(Family::V6), None, None);
        assert_eq!(m.header.address_family, af(Family::V6));
        assert_eq!(m.header.protocol, RouteProtocol::Unspec);
        assert!(m.attributes.is_empty(), "no table: every table");
    }
}
