//! `probe --rdma` on the RDMA layer, and `probe --listen`, its responder:
//! RDMA CM ids on one event channel, a small RC queue pair per pair.
//!
//! The prober, for each pair (source on a rail, peer address): resolves
//! the address and the route through the RDMA CM from the source (the
//! device it binds is the rail's own or not), connects to the peer's
//! responder, writes a tag with RDMA WRITE into the responder's buffer,
//! reads it back with RDMA READ (the round trip), then reads `LARGE` bytes
//! of the responder's pattern (packets of the path MTU). Every pair runs
//! at once, `IN_FLIGHT` at most, each under its own limit: rxe retries
//! forever, so a failing pair is one still waiting at the limit.
//!
//! The responder listens on each rail address, accepts with its buffer's
//! address and key and the RDMA port the CM took the connection on (next
//! to the rail's own), or refuses with the reason when it cannot accept
//! (the connection's path MTU above its port's). It does nothing on the
//! data path: WRITE and READ are one-sided.
//!
//! Both leave what the kernel's RDMA CM learned in the neighbour table
//! (it resolves the peer's MAC there, as rping does); the prober removes
//! the entries that were not there before it (`commands::probe`).

use std::collections::HashMap;
use std::ffi::c_void;
use std::net::{IpAddr, Ipv6Addr};
use std::time::{Duration, Instant};

use crate::probe::rdma::{
    self, Accepted, BUFFER, Failure, LARGE, PATTERN_AT, RdmaSeen, Stage, TAG, pattern_byte,
};
use crate::signals::StopFlag;
use crate::verbs::{
    self, CmEvent, CmId, Context, Cq, IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_READ,
    IBV_ACCESS_REMOTE_WRITE, IBV_QPT_RC, IBV_SEND_SIGNALED, IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE, Lib, Mr, Pd,
    RDMA_PS_TCP, SockAddr, event, offset,
};

/// Why a pair whose rail has no RDMA port is not tried.
pub const NO_PORT: &str =
    "the rail has no RDMA port in this namespace (`roce-route show` lists the RDMA ports)";

/// Pairs connecting at once.
pub const IN_FLIGHT: usize = 32;
/// How long the CM may take to resolve an address or a route (within the
/// pair's limit).
const RESOLVE_MS: i32 = 2000;
/// How long completions are polled back to back before the CM's events
/// are read again, and for how long after its post a work request is.
const SPIN: Duration = Duration::from_millis(2);
const FRESH: Duration = Duration::from_millis(20);
/// After a "nobody listens" reject, the next try (the peer's responder
/// may be starting).
const RETRY_AFTER: Duration = Duration::from_millis(200);

/// One pair to probe.
#[derive(Clone, Debug)]
pub struct RdmaJob {
    pub source: IpAddr,
    pub peer: IpAddr,
    /// The rail's own RDMA port (`rxa1:1`), from sysfs; None: the rail has
    /// none, the pair is not tried.
    pub rail_port: Option<String>,
    /// The RoCE v2 GIDs of the rail's netdev: (index, GID), to name the
    /// index of the one the CM chose.
    pub gids: Vec<(u32, Ipv6Addr)>,
}

/// An owned event channel, nonblocking.
struct Channel<'l> {
    lib: &'l Lib,
    ptr: *mut verbs::Channel,
    fd: i32,
}

impl<'l> Channel<'l> {
    fn new(lib: &'l Lib) -> Result<Channel<'l>, String> {
        // SAFETY: plain library calls; the channel begins with its fd.
        unsafe {
            let ptr = (lib.create_event_channel)();
            if ptr.is_null() {
                return Err(format!(
                    "cannot open the RDMA CM (/dev/infiniband/rdma_cm): {} (is the rdma_cm module loaded?)",
                    std::io::Error::last_os_error()
                ));
            }
            let fd: i32 = verbs::read(ptr, 0);
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            Ok(Channel { lib, ptr, fd })
        }
    }

    /// Waits up to `wait` for the channel to be readable.
    fn wait(&self, wait: Duration) {
        let mut fds = [libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 }];
        let ms = wait.as_millis().min(1000) as i32;
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) };
    }

    /// The next event, if one is there: (id, listen id, type, status,
    /// private data). Acknowledged before it is returned.
    fn next(&self) -> Option<Event> {
        let mut ev: *mut CmEvent = std::ptr::null_mut();
        // SAFETY: the channel is live; the event is read, then acked.
        unsafe {
            if (self.lib.get_cm_event)(self.ptr, &mut ev) != 0 {
                return None;
            }
            let id: *mut CmId = verbs::read(ev, offset::EVENT_ID);
            let listen_id: *mut CmId = verbs::read(ev, offset::EVENT_LISTEN_ID);
            let kind: u32 = verbs::read(ev, offset::EVENT_EVENT);
            let status: i32 = verbs::read(ev, offset::EVENT_STATUS);
            let data: *const u8 = verbs::read(ev, offset::EVENT_CONN);
            let len: u8 = verbs::read(ev, offset::EVENT_CONN + 8);
            let private = if data.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(data, len as usize).to_vec()
            };
            (self.lib.ack_cm_event)(ev);
            Some(Event { id, listen_id, kind, status, private })
        }
    }
}

impl Drop for Channel<'_> {
    fn drop(&mut self) {
        // SAFETY: every id on it is destroyed first (the owners drop before).
        unsafe { (self.lib.destroy_event_channel)(self.ptr) }
    }
}

struct Event {
    id: *mut CmId,
    listen_id: *mut CmId,
    kind: u32,
    status: i32,
    private: Vec<u8>,
}

/// Protection domains, one per device context.
struct Pds<'l> {
    lib: &'l Lib,
    by_context: HashMap<usize, *mut Pd>,
}

impl<'l> Pds<'l> {
    fn of(&mut self, ctx: *mut Context) -> Result<*mut Pd, String> {
        if let Some(pd) = self.by_context.get(&(ctx as usize)) {
            return Ok(*pd);
        }
        // SAFETY: a live context from a bound id.
        let pd = unsafe { (self.lib.alloc_pd)(ctx) };
        if pd.is_null() {
            return Err(format!("ibv_alloc_pd: {}", std::io::Error::last_os_error()));
        }
        self.by_context.insert(ctx as usize, pd);
        Ok(pd)
    }
}

impl Drop for Pds<'_> {
    fn drop(&mut self) {
        for pd in self.by_context.values() {
            // SAFETY: every MR and QP of the domain is gone before.
            unsafe { (self.lib.dealloc_pd)(*pd) };
        }
    }
}

/// One connection's verbs objects: a CQ, a registered buffer, the QP on
/// the id. Freed in the order the library needs.
struct Verbs<'l> {
    lib: &'l Lib,
    id: *mut CmId,
    cq: *mut Cq,
    mr: *mut Mr,
    qp: bool,
    buf: Vec<u8>,
}

impl<'l> Verbs<'l> {
    /// A CQ, `len` bytes registered with `access`, an RC QP on `id`.
    fn new(
        lib: &'l Lib,
        pds: &mut Pds<'l>,
        id: *mut CmId,
        len: usize,
        access: i32,
    ) -> Result<Verbs<'l>, String> {
        let mut v = Verbs {
            lib,
            id,
            cq: std::ptr::null_mut(),
            mr: std::ptr::null_mut(),
            qp: false,
            buf: vec![0u8; len],
        };
        // SAFETY: `id` is bound to a device (its verbs context is set).
        unsafe {
            let ctx: *mut Context = verbs::read(id, offset::ID_VERBS);
            if ctx.is_null() {
                return Err("the RDMA CM bound no device".into());
            }
            let pd = pds.of(ctx)?;
            v.cq = (lib.create_cq)(ctx, 8, std::ptr::null_mut(), std::ptr::null_mut(), 0);
            if v.cq.is_null() {
                return Err(format!("ibv_create_cq: {}", std::io::Error::last_os_error()));
            }
            v.mr = (lib.reg_mr)(pd, v.buf.as_mut_ptr().cast(), len, access);
            if v.mr.is_null() {
                return Err(format!("ibv_reg_mr: {}", std::io::Error::last_os_error()));
            }
            let mut attr = verbs::ibv_qp_init_attr {
                qp_context: std::ptr::null_mut(),
                send_cq: v.cq,
                recv_cq: v.cq,
                srq: std::ptr::null_mut(),
                cap: verbs::ibv_qp_cap {
                    max_send_wr: 4,
                    max_recv_wr: 1,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 0,
                },
                qp_type: IBV_QPT_RC,
                sq_sig_all: 0,
            };
            if (lib.create_qp)(id, pd, &mut attr) != 0 {
                return Err(format!("rdma_create_qp: {}", std::io::Error::last_os_error()));
            }
            v.qp = true;
        }
        Ok(v)
    }

    fn addr(&self) -> u64 {
        self.buf.as_ptr() as u64
    }
    fn lkey(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { verbs::read(self.mr, offset::MR_LKEY) }
    }
    fn rkey(&self) -> u32 {
        // SAFETY: a live MR.
        unsafe { verbs::read(self.mr, offset::MR_RKEY) }
    }

    /// Posts a signaled RDMA WRITE or READ of `len` bytes at `local` of the
    /// buffer, to or from `remote` of the peer's.
    fn post(&mut self, opcode: u32, local: u32, len: u32, remote: u64, rkey: u32) -> Result<(), String> {
        let mut sge = verbs::ibv_sge { addr: self.addr() + u64::from(local), length: len, lkey: self.lkey() };
        let mut wr = verbs::ibv_send_wr {
            wr_id: u64::from(opcode),
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
            opcode,
            send_flags: IBV_SEND_SIGNALED,
            imm_data: 0,
            remote_addr: remote,
            rkey,
            _rest: [0; 19],
        };
        // SAFETY: a live QP; the SGE names this connection's registered buffer.
        let rc = unsafe {
            let qp: *mut c_void = verbs::read(self.id, offset::ID_QP);
            self.lib.post_send(qp, &mut wr)
        };
        match rc {
            0 => Ok(()),
            e => Err(format!("ibv_post_send: {}", std::io::Error::from_raw_os_error(e.abs()))),
        }
    }

    fn poll(&self) -> Result<Option<verbs::ibv_wc>, String> {
        // SAFETY: a live CQ.
        unsafe { self.lib.poll_one(self.cq) }.map_err(|e| format!("ibv_poll_cq: {e}"))
    }
}

impl Drop for Verbs<'_> {
    fn drop(&mut self) {
        // SAFETY: QP before CQ and MR; the id outlives this (its owner
        // destroys it after).
        unsafe {
            if self.qp {
                (self.lib.destroy_qp)(self.id);
            }
            if !self.mr.is_null() && (self.lib.dereg_mr)(self.mr) != 0 {
                // Still registered (the peer may hold its rkey): never
                // give the memory back to the allocator.
                std::mem::forget(std::mem::take(&mut self.buf));
            }
            if !self.cq.is_null() {
                (self.lib.destroy_cq)(self.cq);
            }
        }
    }
}

/// An id's bound device and port (`rxa1:1`), once it is bound.
fn bound_port(lib: &Lib, id: *mut CmId) -> Option<String> {
    // SAFETY: a live id.
    unsafe {
        let device = lib.id_device(id)?;
        let port: u8 = verbs::read(id, offset::ID_PORT_NUM);
        Some(format!("{device}:{port}"))
    }
}

/// The path MTU of an id's route, once resolved.
fn path_mtu(id: *mut CmId) -> Option<u32> {
    // SAFETY: a live id; path_rec is NULL until the route is resolved.
    unsafe {
        let n: i32 = verbs::read(id, offset::ID_ROUTE + offset::ROUTE_NUM_PATHS);
        let rec: *const c_void = verbs::read(id, offset::ID_ROUTE + offset::ROUTE_PATH_REC);
        if n < 1 || rec.is_null() {
            return None;
        }
        verbs::mtu_bytes(verbs::read::<u8>(rec, offset::PATH_REC_MTU))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Waiting,
    Address,
    Route,
    Connect,
    Write,
    Read,
    LargeRead,
    Done,
}

/// One pair in progress.
struct Conn<'l> {
    job: usize,
    id: *mut CmId,
    state: State,
    deadline: Instant,
    /// When to try again after a "nobody listens" reject.
    retry_at: Option<Instant>,
    verbs: Option<Verbs<'l>>,
    remote: Option<Accepted>,
    posted: Instant,
    seen: RdmaSeen,
}

/// Buffer layout of the prober: the tag at 0, the tag read back at 16,
/// the large READ at 64.
const READ_BACK: u32 = 16;
const LARGE_AT: u32 = 64;

/// Probes every job; one `RdmaSeen` per job, in order.
pub fn probe(
    lib: &Lib,
    jobs: &[RdmaJob],
    port: u16,
    limit: Duration,
    stop: &StopFlag,
) -> Result<Vec<RdmaSeen>, String> {
    let mut out: Vec<Option<RdmaSeen>> = vec![None; jobs.len()];
    // Pairs without an RDMA port are not tried.
    let mut todo: Vec<usize> = Vec::new();
    for (k, job) in jobs.iter().enumerate() {
        match &job.rail_port {
            None => out[k] = Some(RdmaSeen { skipped: Some(NO_PORT.into()), ..RdmaSeen::default() }),
            Some(_) => todo.push(k),
        }
    }
    if todo.is_empty() {
        return Ok(out.into_iter().map(Option::unwrap_or_default).collect());
    }
    todo.reverse();
    let channel = Channel::new(lib)?;
    let mut pds = Pds { lib, by_context: HashMap::new() };
    let mut conns: Vec<Conn> = Vec::new();
    loop {
        if stop.requested().is_some() {
            break;
        }
        while conns.len() < IN_FLIGHT {
            let Some(k) = todo.pop() else { break };
            let mut c = Conn {
                job: k,
                id: std::ptr::null_mut(),
                state: State::Waiting,
                deadline: Instant::now() + limit,
                retry_at: None,
                verbs: None,
                remote: None,
                posted: Instant::now(),
                seen: RdmaSeen { rail_port: jobs[k].rail_port.clone(), ..RdmaSeen::default() },
            };
            start(lib, &channel, &mut c, &jobs[k], port);
            conns.push(c);
        }
        if conns.is_empty() {
            break;
        }
        let data = |c: &Conn| matches!(c.state, State::Write | State::Read | State::LargeRead);
        // A work request posted within FRESH: its completion is polled
        // without a pause (up to SPIN at a time), so that the READ's round
        // trip is the path's, not a sleep's. One still out after that (a
        // path that drops it: rxe retries until the limit) is looked at
        // every millisecond, not spun on.
        let fresh = |c: &Conn| data(c) && c.posted.elapsed() < FRESH;
        if conns.iter().any(fresh) {
            let spin = Instant::now() + SPIN;
            while Instant::now() < spin && conns.iter().any(fresh) {
                conns.iter_mut().filter(|c| data(c)).for_each(|c| on_completion(lib, c));
                std::hint::spin_loop();
            }
            channel.wait(Duration::ZERO);
        } else if conns.iter().any(data) {
            channel.wait(Duration::from_millis(1));
        } else {
            let next =
                conns.iter().map(|c| c.retry_at.unwrap_or(c.deadline)).min().unwrap_or_else(Instant::now);
            channel.wait(next.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)));
        }
        while let Some(ev) = channel.next() {
            if let Some(c) = conns.iter_mut().find(|c| c.id == ev.id) {
                on_event(lib, &mut pds, c, &jobs[c.job], ev);
            }
        }
        let now = Instant::now();
        for c in conns.iter_mut() {
            if matches!(c.state, State::Write | State::Read | State::LargeRead) {
                on_completion(lib, c);
            }
            if c.state == State::Waiting && c.retry_at.is_some_and(|t| t <= now) && now < c.deadline {
                c.retry_at = None;
                start(lib, &channel, c, &jobs[c.job], port);
            }
            if c.state != State::Done && now >= c.deadline {
                if c.seen.failure.is_none() {
                    c.seen.failure = Some(Failure::Timeout { stage: stage_of(c.state) });
                }
                c.state = State::Done;
            }
        }
        // The finished ones: disconnect, free, keep what was seen.
        let mut k = 0;
        while k < conns.len() {
            if conns[k].state == State::Done {
                let c = conns.swap_remove(k);
                let job = c.job;
                out[job] = Some(finish(lib, c));
            } else {
                k += 1;
            }
        }
    }
    for c in conns {
        let job = c.job;
        out[job] = Some(finish(lib, c));
    }
    drop(pds);
    drop(channel);
    if let Some(signal) = stop.requested() {
        return Err(format!("interrupted by signal {signal}"));
    }
    Ok(out.into_iter().map(Option::unwrap_or_default).collect())
}

fn stage_of(s: State) -> Stage {
    match s {
        State::Waiting | State::Connect | State::Done => Stage::Connect,
        State::Address => Stage::Address,
        State::Route => Stage::Route,
        State::Write => Stage::Write,
        State::Read => Stage::Read,
        State::LargeRead => Stage::LargeRead,
    }
}

/// A new id for the pair, and its address resolution from the source.
fn start(lib: &Lib, channel: &Channel, c: &mut Conn, job: &RdmaJob, port: u16) {
    // A retry after "nobody listens" starts afresh: what the try before it
    // saw (its reject above all) is not this one's.
    c.seen = RdmaSeen { rail_port: c.seen.rail_port.take(), ..RdmaSeen::default() };
    c.remote = None;
    // SAFETY: library calls on a live channel; the addresses outlive them.
    unsafe {
        let mut id: *mut CmId = std::ptr::null_mut();
        if (lib.create_id)(channel.ptr, &mut id, std::ptr::null_mut(), RDMA_PS_TCP) != 0 {
            c.seen.failure = Some(Failure::Local {
                stage: Stage::Address,
                error: format!("rdma_create_id: {}", std::io::Error::last_os_error()),
            });
            c.state = State::Done;
            return;
        }
        c.id = id;
        let src = SockAddr::new(job.source, 0);
        let dst = SockAddr::new(job.peer, port);
        let ms = remaining_ms(c.deadline);
        if (lib.resolve_addr)(id, src.as_ptr(), dst.as_ptr(), ms) != 0 {
            c.seen.failure = Some(call_failed(Stage::Address, "rdma_resolve_addr"));
            c.state = State::Done;
            return;
        }
        c.state = State::Address;
    }
}

/// A CM call that failed at once: the call and its errno.
fn call_failed(stage: Stage, call: &str) -> Failure {
    let e = std::io::Error::last_os_error();
    Failure::Cm { stage, event: call.into(), status: -e.raw_os_error().unwrap_or(0) }
}

/// The connection's parameters: one READ in flight each way, 3 retries
/// (rxe: forever), with `data` as private data (at most 196 bytes).
fn conn_param(data: &[u8]) -> verbs::rdma_conn_param {
    verbs::rdma_conn_param {
        private_data: if data.is_empty() { std::ptr::null() } else { data.as_ptr().cast() },
        private_data_len: data.len().min(196) as u8,
        responder_resources: 1,
        initiator_depth: 1,
        flow_control: 0,
        retry_count: 3,
        rnr_retry_count: 3,
        srq: 0,
        qp_num: 0,
    }
}

fn remaining_ms(deadline: Instant) -> i32 {
    (deadline.saturating_duration_since(Instant::now()).as_millis() as i32).clamp(1, RESOLVE_MS)
}

fn on_event<'l>(lib: &'l Lib, pds: &mut Pds<'l>, c: &mut Conn<'l>, job: &RdmaJob, ev: Event) {
    let fail = |c: &mut Conn, f: Failure| {
        c.seen.failure = Some(f);
        c.state = State::Done;
    };
    match (c.state, ev.kind) {
        (State::Address, event::ADDR_RESOLVED) => {
            c.seen.port = bound_port(lib, c.id);
            // SAFETY: a live id, its route's source GID set by the resolution.
            let sgid: [u8; 16] = unsafe { verbs::read(c.id, offset::ID_ROUTE + offset::ROUTE_SGID) };
            let gid = Ipv6Addr::from(sgid);
            c.seen.gid = Some(gid.to_string());
            c.seen.gid_index = job.gids.iter().find(|(_, g)| *g == gid).map(|(i, _)| *i);
            if c.seen.port.is_some() && c.seen.port != c.seen.rail_port {
                // The verdict names the wrong device; nothing more to learn.
                c.state = State::Done;
                return;
            }
            // SAFETY: a live, address-resolved id.
            if unsafe { (lib.resolve_route)(c.id, remaining_ms(c.deadline)) } != 0 {
                return fail(c, call_failed(Stage::Route, "rdma_resolve_route"));
            }
            c.state = State::Route;
        }
        (State::Route, event::ROUTE_RESOLVED) => {
            c.seen.path_mtu = path_mtu(c.id);
            let v = match Verbs::new(lib, pds, c.id, (LARGE_AT + LARGE) as usize, IBV_ACCESS_LOCAL_WRITE) {
                Ok(v) => v,
                Err(e) => return fail(c, Failure::Local { stage: Stage::Connect, error: e }),
            };
            c.verbs = Some(v);
            let mut param = conn_param(&[]);
            // SAFETY: a live id with its QP.
            if unsafe { (lib.connect)(c.id, &mut param) } != 0 {
                return fail(c, call_failed(Stage::Connect, "rdma_connect"));
            }
            c.state = State::Connect;
        }
        (State::Connect, event::ESTABLISHED) => {
            let Some(acc) = Accepted::decode(&ev.private) else {
                return fail(
                    c,
                    Failure::Local {
                        stage: Stage::Connect,
                        error:
                            "the peer accepted, but not as roce-route's responder (no buffer in its answer)"
                                .into(),
                    },
                );
            };
            if acc.len < PATTERN_AT + LARGE {
                return fail(
                    c,
                    Failure::Local {
                        stage: Stage::Connect,
                        error: "the responder's buffer is too small".into(),
                    },
                );
            }
            let v = c.verbs.as_mut().expect("verbs before connect");
            v.buf[..TAG as usize].copy_from_slice(&tag(c.job));
            let posted = v.post(IBV_WR_RDMA_WRITE, 0, TAG, acc.addr, acc.rkey);
            c.seen.peer = Some(acc.clone());
            c.remote = Some(acc);
            if let Err(e) = posted {
                return fail(c, Failure::Local { stage: Stage::Write, error: e });
            }
            c.posted = Instant::now();
            c.state = State::Write;
        }
        (State::Connect, event::REJECTED) => {
            let said = rdma::decode_refusal(&ev.private);
            if ev.status == rdma::REJ_INVALID_SERVICE_ID && said.is_none() {
                // Nobody listens (yet): try again until the limit.
                c.seen.failure = Some(Failure::Rejected { reason: ev.status, said: None });
                c.verbs = None;
                // SAFETY: the id's event is acked; nothing else uses it.
                unsafe { (lib.destroy_id)(c.id) };
                c.id = std::ptr::null_mut();
                c.state = State::Waiting;
                c.retry_at = Some(Instant::now() + RETRY_AFTER);
                return;
            }
            fail(c, Failure::Rejected { reason: ev.status, said })
        }
        (_, event::ADDR_ERROR | event::ROUTE_ERROR | event::UNREACHABLE | event::CONNECT_ERROR) => {
            let stage = match ev.kind {
                event::ADDR_ERROR => Stage::Address,
                event::ROUTE_ERROR => Stage::Route,
                _ => Stage::Connect,
            };
            fail(c, Failure::Cm { stage, event: lib.event_name(ev.kind), status: ev.status })
        }
        (_, event::DEVICE_REMOVAL) => {
            fail(c, Failure::Local { stage: stage_of(c.state), error: "the RDMA device went away".into() })
        }
        // The responder went away mid-pair (it ended, or was stopped):
        // not a fault of the path, and not the MTU a large READ left
        // waiting would read as.
        (State::Write | State::Read | State::LargeRead, event::DISCONNECTED) => fail(
            c,
            Failure::Cm { stage: stage_of(c.state), event: lib.event_name(ev.kind), status: ev.status },
        ),
        _ => {}
    }
}

/// The tag of pair `k`: its number and the time, so that a stale buffer
/// never passes for it.
fn tag(k: usize) -> [u8; TAG as usize] {
    let mut t = [0u8; TAG as usize];
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    t[..8].copy_from_slice(&(k as u64).to_be_bytes());
    t[8..].copy_from_slice(&now.to_be_bytes());
    t
}

fn on_completion(lib: &Lib, c: &mut Conn) {
    let stage = stage_of(c.state);
    let v = c.verbs.as_mut().expect("verbs in the data phase");
    let wc = match v.poll() {
        Ok(None) => return,
        Ok(Some(wc)) => wc,
        Err(e) => {
            c.seen.failure = Some(Failure::Local { stage, error: e });
            c.state = State::Done;
            return;
        }
    };
    if wc.status != 0 {
        let name = lib.status_name(wc.status);
        c.seen.failure =
            Some(Failure::Completion { stage, status: wc.status, name, vendor_err: wc.vendor_err });
        c.state = State::Done;
        return;
    }
    let remote = c.remote.clone().expect("remote before data");
    let next = match c.state {
        State::Write => {
            v.post(IBV_WR_RDMA_READ, READ_BACK, TAG, remote.addr, remote.rkey).map(|_| State::Read)
        }
        State::Read => {
            c.seen.rtt = Some(c.posted.elapsed());
            let (tag, back) = v.buf.split_at(READ_BACK as usize);
            if tag[..TAG as usize] != back[..TAG as usize] {
                c.seen.failure = Some(Failure::Data { stage: Stage::Read });
                c.state = State::Done;
                return;
            }
            v.post(IBV_WR_RDMA_READ, LARGE_AT, LARGE, remote.addr + u64::from(PATTERN_AT), remote.rkey)
                .map(|_| State::LargeRead)
        }
        State::LargeRead => {
            let got = &v.buf[LARGE_AT as usize..(LARGE_AT + LARGE) as usize];
            if got.iter().enumerate().any(|(i, b)| *b != pattern_byte(i as u32)) {
                c.seen.failure = Some(Failure::Data { stage: Stage::LargeRead });
            }
            Ok(State::Done)
        }
        s => Ok(s),
    };
    match next {
        Ok(s) => {
            if matches!(s, State::Read | State::LargeRead) {
                c.posted = Instant::now();
            }
            c.state = s;
        }
        Err(e) => {
            c.seen.failure = Some(Failure::Local { stage, error: e });
            c.state = State::Done;
        }
    }
}

/// Disconnects and frees a pair; what was seen of it.
fn finish(lib: &Lib, mut c: Conn) -> RdmaSeen {
    if !c.id.is_null() {
        // SAFETY: a live id; its QP (in `verbs`) is destroyed before it.
        unsafe {
            if c.remote.is_some() {
                (lib.disconnect)(c.id);
            }
            c.verbs = None;
            (lib.destroy_id)(c.id);
        }
    }
    c.seen
}

/// How long the responder waits, after `--idle`, for the connections
/// still open to end.
const LINGER: Duration = Duration::from_secs(5);

/// One address the responder listens on.
#[derive(Clone, Debug)]
pub struct Listener {
    pub address: IpAddr,
    pub rail: String,
    /// The rail's own RDMA port (`rxb1:1`), from sysfs.
    pub rail_port: Option<String>,
    /// The RDMA MTU the rail's netdev carries (RoCE), for a refusal's words.
    pub rdma_mtu: Option<u32>,
}

/// What the responder did, for its report.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Served {
    /// `rail0 198.51.100.20 on rxb0:1`, one per address listened on.
    pub listening: Vec<ListenOn>,
    /// Connections accepted.
    pub accepted: u32,
    /// Connections refused, with the reason sent back.
    pub refused: Vec<String>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct ListenOn {
    pub rail: String,
    pub address: IpAddr,
    /// The port the CM bound the address to (None: not bound to a device).
    pub port: Option<String>,
    /// Why it could not listen there.
    pub error: Option<String>,
}

/// The responder: listens on every address until `idle` passes without a
/// new connection (or a signal). `say` gets a line for each thing done.
pub fn listen(
    lib: &Lib,
    listeners: &[Listener],
    port: u16,
    idle: Duration,
    stop: &StopFlag,
    say: &mut dyn FnMut(String),
) -> Result<Served, String> {
    let channel = Channel::new(lib)?;
    let mut pds = Pds { lib, by_context: HashMap::new() };
    let mut served = Served::default();
    let mut ids: Vec<(*mut CmId, usize)> = Vec::new();
    for (k, l) in listeners.iter().enumerate() {
        // SAFETY: library calls on a live channel.
        let r = unsafe {
            let mut id: *mut CmId = std::ptr::null_mut();
            if (lib.create_id)(channel.ptr, &mut id, std::ptr::null_mut(), RDMA_PS_TCP) != 0 {
                Err(format!("rdma_create_id: {}", std::io::Error::last_os_error()))
            } else if (lib.bind_addr)(id, SockAddr::new(l.address, port).as_ptr()) != 0 {
                let e = std::io::Error::last_os_error();
                (lib.destroy_id)(id);
                Err(format!("rdma_bind_addr {}:{port}: {e}", l.address))
            } else if (lib.listen)(id, 64) != 0 {
                let e = std::io::Error::last_os_error();
                (lib.destroy_id)(id);
                Err(format!("rdma_listen: {e}"))
            } else {
                Ok(id)
            }
        };
        match r {
            Ok(id) => {
                let bound = bound_port(lib, id);
                say(format!(
                    "listening on {} port {port} ({}, {})",
                    l.address,
                    l.rail,
                    bound.as_deref().unwrap_or("no RDMA device")
                ));
                served.listening.push(ListenOn {
                    rail: l.rail.clone(),
                    address: l.address,
                    port: bound,
                    error: None,
                });
                ids.push((id, k));
            }
            Err(e) => {
                say(format!("cannot listen on {} ({}): {e}", l.address, l.rail));
                served.listening.push(ListenOn {
                    rail: l.rail.clone(),
                    address: l.address,
                    port: None,
                    error: Some(e),
                });
            }
        }
    }
    if ids.is_empty() {
        return Ok(served);
    }
    let mut conns: HashMap<usize, Verbs> = HashMap::new();
    let mut last = Instant::now();
    // Idle counts from the last event; connections still open at its end
    // get LINGER to disconnect (a prober mid-pair is not cut off).
    while stop.requested().is_none()
        && (last.elapsed() < idle || (!conns.is_empty() && last.elapsed() < idle + LINGER))
    {
        channel.wait(Duration::from_millis(100));
        while let Some(ev) = channel.next() {
            match ev.kind {
                event::CONNECT_REQUEST => {
                    last = Instant::now();
                    let Some(&(_, k)) = ids.iter().find(|(id, _)| *id == ev.listen_id) else {
                        // SAFETY: a request of no listener of ours: refused, its id freed.
                        unsafe {
                            (lib.reject)(ev.id, std::ptr::null(), 0);
                            (lib.destroy_id)(ev.id);
                        }
                        continue;
                    };
                    match accept(lib, &mut pds, ev.id, &listeners[k]) {
                        Ok(v) => {
                            served.accepted += 1;
                            conns.insert(ev.id as usize, v);
                        }
                        Err(why) => {
                            say(format!("refused a connection to {}: {why}", listeners[k].address));
                            served.refused.push(why.clone());
                            let data = rdma::encode_refusal(&why);
                            // SAFETY: the request's id, its event acked; destroyed once refused.
                            unsafe {
                                (lib.reject)(ev.id, data.as_ptr().cast(), data.len() as u8);
                                (lib.destroy_id)(ev.id);
                            }
                        }
                    }
                }
                event::DISCONNECTED
                | event::CONNECT_ERROR
                | event::UNREACHABLE
                | event::REJECTED
                | event::DEVICE_REMOVAL => {
                    last = Instant::now();
                    if let Some(v) = conns.remove(&(ev.id as usize)) {
                        drop(v);
                        // SAFETY: its QP is gone, its events acked.
                        unsafe { (lib.destroy_id)(ev.id) };
                    } else if let Some(at) = ids.iter().position(|(id, _)| *id == ev.id) {
                        // A listener's device went away: free it, so that
                        // the device can go.
                        let (id, k) = ids.swap_remove(at);
                        say(format!(
                            "stopped listening on {}: its RDMA device went away",
                            listeners[k].address
                        ));
                        // SAFETY: a listening id of ours, its events acked.
                        unsafe { (lib.destroy_id)(id) };
                    }
                }
                event::ESTABLISHED => last = Instant::now(),
                _ => {}
            }
        }
    }
    for (id, v) in conns.drain() {
        drop(v);
        // SAFETY: as above.
        unsafe { (lib.destroy_id)(id as *mut CmId) };
    }
    for (id, _) in ids {
        // SAFETY: a listening id of ours.
        unsafe { (lib.destroy_id)(id) };
    }
    drop(pds);
    drop(channel);
    Ok(served)
}

/// Accepts a connection request on `id` (to `l`'s address): a QP and the
/// pattern buffer, readable and writable by the peer; or why not.
fn accept<'l>(lib: &'l Lib, pds: &mut Pds<'l>, id: *mut CmId, l: &Listener) -> Result<Verbs<'l>, String> {
    let here = bound_port(lib, id).unwrap_or_else(|| "no device".into());
    let mut v = Verbs::new(
        lib,
        pds,
        id,
        BUFFER as usize,
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
    )
    .map_err(|e| format!("cannot set up a queue pair on {here}: {e}"))?;
    for (i, b) in v.buf[PATTERN_AT as usize..].iter_mut().enumerate() {
        *b = pattern_byte(i as u32);
    }
    let acc = Accepted {
        port: here.clone(),
        rail_port: l.rail_port.clone(),
        addr: v.addr(),
        rkey: v.rkey(),
        len: BUFFER,
    };
    let data = acc.encode();
    let mut param = conn_param(&data);
    // SAFETY: the request's id with its QP; the data outlives the call.
    if unsafe { (lib.accept)(id, &mut param) } != 0 {
        let e = std::io::Error::last_os_error();
        let asked = path_mtu(id).map_or(String::new(), |m| format!("; the connection asks for path MTU {m}"));
        let carried =
            l.rdma_mtu.map_or(String::new(), |m| format!(", {}'s netdev carries RDMA MTU {m}", l.rail));
        return Err(format!("rdma_accept on {here}: {e}{asked}{carried}"));
    }
    Ok(v)
}
