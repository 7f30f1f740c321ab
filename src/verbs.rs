//! librdmacm and libibverbs, loaded at run time (`dlopen`), for
//! `probe --rdma` and its responder: the binary runs on hosts without
//! rdma-core and asks for it only when RDMA is to be probed. The static
//! build has no `dlopen` (glibc's needs the very glibc it was linked with),
//! so there `Lib::load` says to use the dynamically linked binary.
//!
//! Only what the probe uses: an RDMA CM event channel and ids (resolve,
//! connect, listen, accept, reject), a protection domain, a completion
//! queue, a memory region, an RC queue pair, and RDMA WRITE and READ. The
//! structures the libraries own are read at the offsets rdma-core's
//! headers give (stable ABI since libibverbs 1.1 and librdmacm 1.0);
//! `tests/verbs_layout.rs` compiles a C program against the headers and
//! checks every offset and size below. `ibv_post_send` and `ibv_poll_cq`
//! are inline functions in the headers, calls through the context's ops
//! table: done the same way here.

#![allow(non_camel_case_types)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::net::{IpAddr, SocketAddr};

/// `enum rdma_port_space`: RDMA_PS_TCP (reliable connected).
pub const RDMA_PS_TCP: c_int = 0x0106;
/// `enum ibv_qp_type`: IBV_QPT_RC.
pub const IBV_QPT_RC: u32 = 2;
/// `enum ibv_wr_opcode`.
pub const IBV_WR_RDMA_WRITE: u32 = 0;
pub const IBV_WR_RDMA_READ: u32 = 4;
/// `enum ibv_send_flags`: IBV_SEND_SIGNALED.
pub const IBV_SEND_SIGNALED: u32 = 2;
/// `enum ibv_access_flags`.
pub const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
pub const IBV_ACCESS_REMOTE_WRITE: c_int = 2;
pub const IBV_ACCESS_REMOTE_READ: c_int = 4;

/// `enum rdma_cm_event_type`.
pub mod event {
    pub const ADDR_RESOLVED: u32 = 0;
    pub const ADDR_ERROR: u32 = 1;
    pub const ROUTE_RESOLVED: u32 = 2;
    pub const ROUTE_ERROR: u32 = 3;
    pub const CONNECT_REQUEST: u32 = 4;
    pub const CONNECT_RESPONSE: u32 = 5;
    pub const CONNECT_ERROR: u32 = 6;
    pub const UNREACHABLE: u32 = 7;
    pub const REJECTED: u32 = 8;
    pub const ESTABLISHED: u32 = 9;
    pub const DISCONNECTED: u32 = 10;
    pub const DEVICE_REMOVAL: u32 = 11;
    pub const ADDR_CHANGE: u32 = 14;
    pub const TIMEWAIT_EXIT: u32 = 15;
}

/// Offsets into the structures the libraries own (x86_64 and every LP64
/// target; checked against the headers by `tests/verbs_layout.rs`).
pub mod offset {
    /// `struct ibv_context`: `ops.poll_cq`, `ops.post_send`.
    pub const CONTEXT_POLL_CQ: usize = 96;
    pub const CONTEXT_POST_SEND: usize = 208;
    /// `struct ibv_mr`: `addr`, `lkey`, `rkey`.
    pub const MR_ADDR: usize = 16;
    pub const MR_LKEY: usize = 36;
    pub const MR_RKEY: usize = 40;
    /// `struct rdma_cm_id`: `verbs`, `qp`, `route`, `port_num`.
    pub const ID_VERBS: usize = 0;
    pub const ID_QP: usize = 24;
    pub const ID_ROUTE: usize = 32;
    pub const ID_PORT_NUM: usize = 348;
    /// `struct rdma_route` (inside the id): `addr.addr.ibaddr.sgid`,
    /// `path_rec`, `num_paths`.
    pub const ROUTE_SGID: usize = 256;
    pub const ROUTE_PATH_REC: usize = 296;
    pub const ROUTE_NUM_PATHS: usize = 304;
    /// `struct ibv_sa_path_rec`: `mtu` (enum ibv_mtu).
    pub const PATH_REC_MTU: usize = 58;
    /// `struct rdma_cm_event`: `id`, `listen_id`, `event`, `status`,
    /// `param.conn`.
    pub const EVENT_ID: usize = 0;
    pub const EVENT_LISTEN_ID: usize = 8;
    pub const EVENT_EVENT: usize = 16;
    pub const EVENT_STATUS: usize = 20;
    pub const EVENT_CONN: usize = 24;
}

/// `struct rdma_conn_param`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_send_wr`, with its `wr.rdma` member spelled out and the
/// unions after it as padding (128 bytes in all).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: u32,
    pub send_flags: u32,
    pub imm_data: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    pub _rest: [u32; 19],
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// The sizes the layout test checks, with the structures above.
pub const SIZES: [(&str, usize); 5] = [
    ("rdma_conn_param", std::mem::size_of::<rdma_conn_param>()),
    ("ibv_sge", std::mem::size_of::<ibv_sge>()),
    ("ibv_send_wr", std::mem::size_of::<ibv_send_wr>()),
    ("ibv_qp_init_attr", std::mem::size_of::<ibv_qp_init_attr>()),
    ("ibv_wc", std::mem::size_of::<ibv_wc>()),
];

/// Every offset, size and constant this module takes from rdma-core's
/// headers, by the name `tests/verbs_layout.c` prints it with: the test
/// compiles that program against the headers and compares.
pub fn layout() -> Vec<(&'static str, i64)> {
    use std::mem::offset_of;
    let mut v: Vec<(&'static str, i64)> = vec![
        ("ibv_context.ops.poll_cq", offset::CONTEXT_POLL_CQ as i64),
        ("ibv_context.ops.post_send", offset::CONTEXT_POST_SEND as i64),
        ("ibv_mr.addr", offset::MR_ADDR as i64),
        ("ibv_mr.lkey", offset::MR_LKEY as i64),
        ("ibv_mr.rkey", offset::MR_RKEY as i64),
        ("rdma_cm_id.verbs", offset::ID_VERBS as i64),
        ("rdma_cm_id.qp", offset::ID_QP as i64),
        ("rdma_cm_id.route", offset::ID_ROUTE as i64),
        ("rdma_cm_id.port_num", offset::ID_PORT_NUM as i64),
        ("rdma_route.addr.addr.ibaddr.sgid", offset::ROUTE_SGID as i64),
        ("rdma_route.path_rec", offset::ROUTE_PATH_REC as i64),
        ("rdma_route.num_paths", offset::ROUTE_NUM_PATHS as i64),
        ("ibv_sa_path_rec.mtu", offset::PATH_REC_MTU as i64),
        ("rdma_cm_event.id", offset::EVENT_ID as i64),
        ("rdma_cm_event.listen_id", offset::EVENT_LISTEN_ID as i64),
        ("rdma_cm_event.event", offset::EVENT_EVENT as i64),
        ("rdma_cm_event.status", offset::EVENT_STATUS as i64),
        ("rdma_cm_event.param.conn.private_data", offset::EVENT_CONN as i64),
        ("rdma_cm_event.param.conn.private_data_len", offset::EVENT_CONN as i64 + 8),
        ("rdma_conn_param.private_data_len", offset_of!(rdma_conn_param, private_data_len) as i64),
        ("rdma_conn_param.retry_count", offset_of!(rdma_conn_param, retry_count) as i64),
        ("rdma_conn_param.rnr_retry_count", offset_of!(rdma_conn_param, rnr_retry_count) as i64),
        ("rdma_conn_param.srq", offset_of!(rdma_conn_param, srq) as i64),
        ("rdma_conn_param.qp_num", offset_of!(rdma_conn_param, qp_num) as i64),
        ("ibv_sge.length", offset_of!(ibv_sge, length) as i64),
        ("ibv_sge.lkey", offset_of!(ibv_sge, lkey) as i64),
        ("ibv_send_wr.sg_list", offset_of!(ibv_send_wr, sg_list) as i64),
        ("ibv_send_wr.num_sge", offset_of!(ibv_send_wr, num_sge) as i64),
        ("ibv_send_wr.opcode", offset_of!(ibv_send_wr, opcode) as i64),
        ("ibv_send_wr.send_flags", offset_of!(ibv_send_wr, send_flags) as i64),
        ("ibv_send_wr.wr.rdma.remote_addr", offset_of!(ibv_send_wr, remote_addr) as i64),
        ("ibv_send_wr.wr.rdma.rkey", offset_of!(ibv_send_wr, rkey) as i64),
        ("ibv_qp_init_attr.send_cq", offset_of!(ibv_qp_init_attr, send_cq) as i64),
        ("ibv_qp_init_attr.recv_cq", offset_of!(ibv_qp_init_attr, recv_cq) as i64),
        ("ibv_qp_init_attr.cap", offset_of!(ibv_qp_init_attr, cap) as i64),
        ("ibv_qp_init_attr.qp_type", offset_of!(ibv_qp_init_attr, qp_type) as i64),
        ("ibv_qp_init_attr.sq_sig_all", offset_of!(ibv_qp_init_attr, sq_sig_all) as i64),
        ("ibv_qp_cap.max_inline_data", offset_of!(ibv_qp_cap, max_inline_data) as i64),
        ("ibv_wc.status", offset_of!(ibv_wc, status) as i64),
        ("ibv_wc.opcode", offset_of!(ibv_wc, opcode) as i64),
        ("ibv_wc.vendor_err", offset_of!(ibv_wc, vendor_err) as i64),
        ("ibv_wc.byte_len", offset_of!(ibv_wc, byte_len) as i64),
        ("RDMA_PS_TCP", RDMA_PS_TCP as i64),
        ("IBV_QPT_RC", IBV_QPT_RC as i64),
        ("IBV_WR_RDMA_WRITE", IBV_WR_RDMA_WRITE as i64),
        ("IBV_WR_RDMA_READ", IBV_WR_RDMA_READ as i64),
        ("IBV_SEND_SIGNALED", IBV_SEND_SIGNALED as i64),
        ("IBV_ACCESS_LOCAL_WRITE", IBV_ACCESS_LOCAL_WRITE as i64),
        ("IBV_ACCESS_REMOTE_WRITE", IBV_ACCESS_REMOTE_WRITE as i64),
        ("IBV_ACCESS_REMOTE_READ", IBV_ACCESS_REMOTE_READ as i64),
        ("RDMA_CM_EVENT_ADDR_RESOLVED", event::ADDR_RESOLVED as i64),
        ("RDMA_CM_EVENT_ADDR_ERROR", event::ADDR_ERROR as i64),
        ("RDMA_CM_EVENT_ROUTE_RESOLVED", event::ROUTE_RESOLVED as i64),
        ("RDMA_CM_EVENT_ROUTE_ERROR", event::ROUTE_ERROR as i64),
        ("RDMA_CM_EVENT_CONNECT_REQUEST", event::CONNECT_REQUEST as i64),
        ("RDMA_CM_EVENT_CONNECT_RESPONSE", event::CONNECT_RESPONSE as i64),
        ("RDMA_CM_EVENT_CONNECT_ERROR", event::CONNECT_ERROR as i64),
        ("RDMA_CM_EVENT_UNREACHABLE", event::UNREACHABLE as i64),
        ("RDMA_CM_EVENT_REJECTED", event::REJECTED as i64),
        ("RDMA_CM_EVENT_ESTABLISHED", event::ESTABLISHED as i64),
        ("RDMA_CM_EVENT_DISCONNECTED", event::DISCONNECTED as i64),
        ("RDMA_CM_EVENT_DEVICE_REMOVAL", event::DEVICE_REMOVAL as i64),
        ("RDMA_CM_EVENT_ADDR_CHANGE", event::ADDR_CHANGE as i64),
        ("RDMA_CM_EVENT_TIMEWAIT_EXIT", event::TIMEWAIT_EXIT as i64),
    ];
    v.extend(SIZES.iter().map(|(n, s)| (*n, *s as i64)));
    v
}

/// Opaque handles.
pub type Channel = c_void;
pub type CmId = c_void;
pub type CmEvent = c_void;
pub type Context = c_void;
pub type Pd = c_void;
pub type Cq = c_void;
pub type Mr = c_void;
pub type Qp = c_void;

/// The libraries' functions this program calls.
#[allow(clippy::type_complexity)]
pub struct Lib {
    pub create_event_channel: unsafe extern "C" fn() -> *mut Channel,
    pub destroy_event_channel: unsafe extern "C" fn(*mut Channel),
    pub create_id: unsafe extern "C" fn(*mut Channel, *mut *mut CmId, *mut c_void, c_int) -> c_int,
    pub destroy_id: unsafe extern "C" fn(*mut CmId) -> c_int,
    pub bind_addr: unsafe extern "C" fn(*mut CmId, *const libc::sockaddr) -> c_int,
    pub listen: unsafe extern "C" fn(*mut CmId, c_int) -> c_int,
    pub resolve_addr:
        unsafe extern "C" fn(*mut CmId, *const libc::sockaddr, *const libc::sockaddr, c_int) -> c_int,
    pub resolve_route: unsafe extern "C" fn(*mut CmId, c_int) -> c_int,
    pub create_qp: unsafe extern "C" fn(*mut CmId, *mut Pd, *mut ibv_qp_init_attr) -> c_int,
    pub destroy_qp: unsafe extern "C" fn(*mut CmId),
    pub connect: unsafe extern "C" fn(*mut CmId, *mut rdma_conn_param) -> c_int,
    pub accept: unsafe extern "C" fn(*mut CmId, *mut rdma_conn_param) -> c_int,
    pub reject: unsafe extern "C" fn(*mut CmId, *const c_void, u8) -> c_int,
    pub disconnect: unsafe extern "C" fn(*mut CmId) -> c_int,
    pub get_cm_event: unsafe extern "C" fn(*mut Channel, *mut *mut CmEvent) -> c_int,
    pub ack_cm_event: unsafe extern "C" fn(*mut CmEvent) -> c_int,
    pub event_str: unsafe extern "C" fn(c_int) -> *const c_char,
    pub alloc_pd: unsafe extern "C" fn(*mut Context) -> *mut Pd,
    pub dealloc_pd: unsafe extern "C" fn(*mut Pd) -> c_int,
    pub create_cq: unsafe extern "C" fn(*mut Context, c_int, *mut c_void, *mut c_void, c_int) -> *mut Cq,
    pub destroy_cq: unsafe extern "C" fn(*mut Cq) -> c_int,
    pub reg_mr: unsafe extern "C" fn(*mut Pd, *mut c_void, usize, c_int) -> *mut Mr,
    pub dereg_mr: unsafe extern "C" fn(*mut Mr) -> c_int,
    pub get_device_name: unsafe extern "C" fn(*mut c_void) -> *const c_char,
    pub wc_status_str: unsafe extern "C" fn(u32) -> *const c_char,
}

/// What to install where the libraries are missing.
pub const INSTALL: &str = "install rdma-core's libraries (Debian/Ubuntu: librdmacm1 ibverbs-providers; \
                           RHEL/SUSE: librdmacm libibverbs)";

/// The names `Lib::load` opens (a test build may name others:
/// `crate::testhooks::rdma_libs`).
#[cfg(not(target_feature = "crt-static"))]
fn names() -> (String, String) {
    crate::testhooks::rdma_libs()
        .unwrap_or_else(|| ("librdmacm.so.1".to_string(), "libibverbs.so.1".to_string()))
}

impl Lib {
    /// Opens librdmacm and libibverbs once; the same table after.
    pub fn get() -> Result<&'static Lib, String> {
        static LIB: std::sync::OnceLock<Result<Lib, String>> = std::sync::OnceLock::new();
        LIB.get_or_init(Lib::load).as_ref().map_err(Clone::clone)
    }

    #[cfg(target_feature = "crt-static")]
    fn load() -> Result<Lib, String> {
        Err(format!(
            "this roce-route is the static build, which cannot load librdmacm: --rdma and --listen need the \
             dynamically linked binary (the Debian package's, or `cargo build --release`), and {INSTALL}"
        ))
    }

    #[cfg(not(target_feature = "crt-static"))]
    fn load() -> Result<Lib, String> {
        let (cm_name, verbs_name) = names();
        let cm = open(&cm_name)?;
        let verbs = open(&verbs_name)?;
        // SAFETY: each symbol is cast to the signature rdma-core's headers
        // declare for it.
        unsafe {
            Ok(Lib {
                create_event_channel: sym(cm, "rdma_create_event_channel")?,
                destroy_event_channel: sym(cm, "rdma_destroy_event_channel")?,
                create_id: sym(cm, "rdma_create_id")?,
                destroy_id: sym(cm, "rdma_destroy_id")?,
                bind_addr: sym(cm, "rdma_bind_addr")?,
                listen: sym(cm, "rdma_listen")?,
                resolve_addr: sym(cm, "rdma_resolve_addr")?,
                resolve_route: sym(cm, "rdma_resolve_route")?,
                create_qp: sym(cm, "rdma_create_qp")?,
                destroy_qp: sym(cm, "rdma_destroy_qp")?,
                connect: sym(cm, "rdma_connect")?,
                accept: sym(cm, "rdma_accept")?,
                reject: sym(cm, "rdma_reject")?,
                disconnect: sym(cm, "rdma_disconnect")?,
                get_cm_event: sym(cm, "rdma_get_cm_event")?,
                ack_cm_event: sym(cm, "rdma_ack_cm_event")?,
                event_str: sym(cm, "rdma_event_str")?,
                alloc_pd: sym(verbs, "ibv_alloc_pd")?,
                dealloc_pd: sym(verbs, "ibv_dealloc_pd")?,
                create_cq: sym(verbs, "ibv_create_cq")?,
                destroy_cq: sym(verbs, "ibv_destroy_cq")?,
                reg_mr: sym(verbs, "ibv_reg_mr")?,
                dereg_mr: sym(verbs, "ibv_dereg_mr")?,
                get_device_name: sym(verbs, "ibv_get_device_name")?,
                wc_status_str: sym(verbs, "ibv_wc_status_str")?,
            })
        }
    }

    /// `rdma_event_str`: "RDMA_CM_EVENT_REJECTED".
    pub fn event_name(&self, event: u32) -> String {
        // SAFETY: returns a static string for any value.
        unsafe { cstr((self.event_str)(event as c_int)) }.unwrap_or_else(|| format!("event {event}"))
    }

    /// `ibv_wc_status_str`: "transport retry counter exceeded".
    pub fn status_name(&self, status: u32) -> String {
        // SAFETY: returns a static string for any value.
        unsafe { cstr((self.wc_status_str)(status)) }.unwrap_or_else(|| format!("status {status}"))
    }

    /// The device name of an id's verbs context (`ibv_get_device_name`).
    ///
    /// # Safety
    /// `id` is a live `rdma_cm_id`.
    pub unsafe fn id_device(&self, id: *mut CmId) -> Option<String> {
        // SAFETY: the caller's id; `verbs` is NULL until bound.
        unsafe {
            let ctx: *mut Context = read(id, offset::ID_VERBS);
            if ctx.is_null() {
                return None;
            }
            let dev: *mut c_void = read(ctx, 0);
            cstr((self.get_device_name)(dev))
        }
    }

    /// `ibv_poll_cq` (inline in the headers): at most one completion.
    ///
    /// # Safety
    /// `cq` is a live completion queue.
    pub unsafe fn poll_one(&self, cq: *mut Cq) -> Result<Option<ibv_wc>, c_int> {
        type PollCq = unsafe extern "C" fn(*mut Cq, c_int, *mut ibv_wc) -> c_int;
        // SAFETY: `struct ibv_cq` begins with its context, whose ops table
        // holds poll_cq at CONTEXT_POLL_CQ.
        unsafe {
            let ctx: *mut Context = read(cq, 0);
            let f: PollCq = read(ctx, offset::CONTEXT_POLL_CQ);
            let mut wc = ibv_wc::default();
            match f(cq, 1, &mut wc) {
                0 => Ok(None),
                n if n > 0 => Ok(Some(wc)),
                n => Err(n),
            }
        }
    }

    /// `ibv_post_send` (inline in the headers): one work request.
    ///
    /// # Safety
    /// `qp` is a live queue pair, `wr` names registered memory.
    pub unsafe fn post_send(&self, qp: *mut Qp, wr: &mut ibv_send_wr) -> c_int {
        type PostSend = unsafe extern "C" fn(*mut Qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
        // SAFETY: `struct ibv_qp` begins with its context, whose ops table
        // holds post_send at CONTEXT_POST_SEND.
        unsafe {
            let ctx: *mut Context = read(qp, 0);
            let f: PostSend = read(ctx, offset::CONTEXT_POST_SEND);
            let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
            f(qp, wr, &mut bad)
        }
    }
}

/// A value of type T at `offset` bytes into `base`.
///
/// # Safety
/// `base + offset` holds a T.
pub unsafe fn read<T: Copy>(base: *const c_void, offset: usize) -> T {
    // SAFETY: the caller's promise; unaligned in case.
    unsafe { std::ptr::read_unaligned(base.cast::<u8>().add(offset).cast::<T>()) }
}

/// A C string as an owned String (None for NULL).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
pub unsafe fn cstr(p: *const c_char) -> Option<String> {
    // SAFETY: the caller's promise.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

#[cfg(not(target_feature = "crt-static"))]
fn open(name: &str) -> Result<*mut c_void, String> {
    let c = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: dlopen with a NUL-terminated name; the handle is never
    // closed (the table lives as long as the process).
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        // SAFETY: dlerror after a failed dlopen.
        let why = unsafe { cstr(libc::dlerror()) }.unwrap_or_default();
        return Err(format!("cannot load {name} ({why}): {INSTALL}"));
    }
    Ok(h)
}

#[cfg(not(target_feature = "crt-static"))]
unsafe fn sym<T: Copy>(lib: *mut c_void, name: &str) -> Result<T, String> {
    let c = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: dlsym on an open handle; T is a function pointer type.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    if p.is_null() {
        return Err(format!("{name} is missing from the RDMA libraries: {INSTALL} (rdma-core 17 or later)"));
    }
    // SAFETY: the caller names the symbol's type.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

/// A socket address for the CM (`sockaddr_in` or `sockaddr_in6`), owned.
pub struct SockAddr(libc::sockaddr_storage);

impl SockAddr {
    pub fn new(ip: IpAddr, port: u16) -> SockAddr {
        let sa = socket2::SockAddr::from(SocketAddr::new(ip, port));
        // SAFETY: sockaddr_storage holds any address; copied by length.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        unsafe {
            std::ptr::copy_nonoverlapping(
                sa.as_ptr().cast::<u8>(),
                (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
                sa.len() as usize,
            );
        }
        SockAddr(storage)
    }

    pub fn as_ptr(&self) -> *const libc::sockaddr {
        (&self.0 as *const libc::sockaddr_storage).cast()
    }
}

/// An `enum ibv_mtu` value as bytes (1: 256 .. 5: 4096).
pub fn mtu_bytes(e: u8) -> Option<u32> {
    (1..=5).contains(&e).then(|| 128u32 << e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_structures_this_program_builds_have_the_headers_sizes() {
        // The offsets of the library's structures are checked against the
        // headers by tests/verbs_layout.rs; these need no compiler.
        assert_eq!(std::mem::size_of::<ibv_send_wr>(), 128);
        assert_eq!(std::mem::offset_of!(ibv_send_wr, remote_addr), 40);
        assert_eq!(std::mem::offset_of!(ibv_send_wr, rkey), 48);
        assert_eq!(std::mem::size_of::<ibv_wc>(), 48);
        assert_eq!(std::mem::size_of::<ibv_qp_init_attr>(), 64);
        assert_eq!(std::mem::offset_of!(ibv_qp_init_attr, qp_type), 52);
        assert_eq!(std::mem::size_of::<rdma_conn_param>(), 24);
        assert_eq!(std::mem::offset_of!(rdma_conn_param, qp_num), 16);
    }

    #[test]
    fn ibv_mtu_values_are_bytes() {
        assert_eq!(mtu_bytes(1), Some(256));
        assert_eq!(mtu_bytes(3), Some(1024));
        assert_eq!(mtu_bytes(5), Some(4096));
        assert_eq!(mtu_bytes(0), None);
        assert_eq!(mtu_bytes(6), None);
    }

    #[test]
    fn a_socket_address_for_the_cm_has_its_family_and_port() {
        let v4 = SockAddr::new("198.51.100.1".parse().unwrap(), 7472);
        assert_eq!(v4.0.ss_family as i32, libc::AF_INET);
        let v6 = SockAddr::new("2001:db8::1".parse().unwrap(), 7472);
        assert_eq!(v6.0.ss_family as i32, libc::AF_INET6);
    }
}
