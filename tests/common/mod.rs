//! Real-kernel test bed for roce-route.
//!
//! A `Testbed` is a GPU server in miniature, built from two private network
//! namespaces:
//!
//! - `host`: the server, with rails `rail0..railN-1` (veth ends), all in one
//!   subnet: rail k has 198.51.100.(10+k)/24 and, optionally,
//!   2001:db8:1::(10+k)/64.
//! - `peer`: the rest of the fabric, a bridge `br0` enslaving every rail's
//!   peer end `p0..pN-1`, with the peer's own addresses 198.51.100.1/24 and
//!   2001:db8:1::1/64 and a gateway 198.51.100.254/24, 2001:db8:1::fe/64.
//!   A broadcast from the peer reaches every rail, so ARP is real.
//!
//! The host's own network namespace is never touched: links are created
//! inside the namespaces, and both namespaces and the per-test temp dir are
//! removed on drop, including while a test panics.
//!
//! Observations are made the way a network engineer checks a server:
//! `ip route get`, the peer's neighbour table, interface tx counters, and a
//! canonical dump of rules, routes and ARP sysctls.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// The peer's own address on the rails' subnet.
pub const PEER_V4: &str = "198.51.100.1";
pub const PEER_V6: &str = "2001:db8:1::1";
/// A second peer address, to be used as the rails' default gateway.
pub const GATEWAY_V4: &str = "198.51.100.254";
pub const GATEWAY_V6: &str = "2001:db8:1::fe";
pub const V4_PREFIX_LEN: u8 = 24;
pub const V6_PREFIX_LEN: u8 = 64;
pub const SUBNET_V4: &str = "198.51.100.0/24";
pub const SUBNET_V6: &str = "2001:db8:1::/64";
/// Rail k uses routing table FIRST_TABLE + k in the standard config.
pub const FIRST_TABLE: u32 = 100;
/// Exit codes of roce-route (see `roce-route --help`).
pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_INVALID: i32 = 2;
pub const EXIT_DRIFT: i32 = 3;
pub const EXIT_NOT_VERIFIED: i32 = 6;
/// The per-interface IPv4 sysctls roce-route manages.
pub const ARP_SYSCTLS: [&str; 4] = ["arp_ignore", "arp_announce", "rp_filter", "arp_filter"];

const BRIDGE: &str = "br0";
/// Echo requests sent by `reply_leaves_via*`.
const REPLY_PINGS: u64 = 8;
/// Bound for waiting until links are up and link-local addresses are final.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// `/sys/class/net/<port>/brport/state` of a forwarding bridge port.
const BR_STATE_FORWARDING: &str = "3";

// ---------------------------------------------------------------------------
// Running commands

/// The command line, for error messages.
pub fn describe(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// The command line with the environment it sets, for failure messages
/// (`ROCE_ROUTE_STATE_DIR=... roce-route --netns ... apply ...`).
pub fn describe_with_env(cmd: &Command) -> String {
    let mut parts: Vec<String> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy())))
        .collect();
    parts.push(describe(cmd));
    parts.join(" ")
}

/// How a run with a config is shown in failure messages: its command line
/// and environment, and the config's text.
pub fn describe_with_config(cmd: &Command, config: &Path) -> String {
    let text = fs::read_to_string(config).unwrap_or_else(|e| format!("<unreadable: {e}>"));
    format!("`{}`\n--- {} ---\n{text}", describe_with_env(cmd), config.display())
}

/// Runs `cmd`; panics only if it cannot be started at all.
fn output_of(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("cannot run `{}`: {e}", describe(cmd)))
}

/// Runs `cmd` and returns its trimmed stdout, or a full report of the failure.
fn try_cmd(cmd: &mut Command) -> Result<String, String> {
    let out = output_of(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() {
        return Ok(stdout);
    }
    Err(format!(
        "`{}` failed ({})\n--- stdout ---\n{stdout}\n--- stderr ---\n{}",
        describe(cmd),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// Runs `cmd` and returns its trimmed stdout; panics with the command,
/// status, stdout and stderr on failure.
fn check(cmd: &mut Command) -> String {
    try_cmd(cmd).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `program args...` in the current namespace (used for `ip netns`
/// management only); panics on failure.
pub fn run(program: &str, args: &[&str]) -> String {
    check(Command::new(program).args(args))
}

/// Splits an `ip` argument string on whitespace ("rule add from X lookup 100").
fn words(args: &str) -> Vec<&str> {
    args.split_whitespace().collect()
}

/// The value after `key` in a whitespace-separated line (`dev rail0` -> rail0).
pub fn field_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut it = line.split_whitespace();
    it.find(|w| *w == key)?;
    it.next()
}

/// Calls `ready` until it returns true; panics after `timeout` describing `what`.
pub fn poll_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        thread::sleep(POLL_INTERVAL);
    }
}

/// A process-wide counter making namespace, directory and file names unique.
fn next_id() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

// ---------------------------------------------------------------------------
// Preconditions

/// Panics unless running as root: the kernel tests must never silently skip.
pub fn require_root() {
    let status = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .expect("no Uid line in /proc/self/status");
    assert!(
        euid == "0",
        "the roce-route kernel tests need root (effective uid is {euid}): they create network \
         namespaces, veths and bridges. Run `cargo test` as root; they never skip silently."
    );
}

/// Panics unless `ip` and `ping` (iputils) are installed.
pub fn require_tools() {
    for (tool, arg, package) in [("ip", "-V", "iproute2"), ("ping", "-V", "iputils-ping")] {
        let found = Command::new(tool).arg(arg).output().is_ok_and(|o| o.status.success());
        assert!(found, "the kernel tests need `{tool}`: install the {package} package");
    }
}

// ---------------------------------------------------------------------------
// Owned resources

/// A named network namespace, deleted on drop.
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates namespace `name`, with its loopback up.
    pub fn create(name: String) -> Netns {
        run("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        ns.ip("link set lo up");
        ns
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NS <args>` (args split on whitespace) or the failure report.
    pub fn try_ip(&self, args: &str) -> Result<String, String> {
        try_cmd(Command::new("ip").args(["-n", &self.name]).args(words(args)))
    }

    /// `ip -n NS <args>` (args split on whitespace); panics on failure.
    pub fn ip(&self, args: &str) -> String {
        self.try_ip(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `ip netns exec NS <program> <args...>`. Inside it, /sys is remounted
    /// for the namespace, so /sys/class/net is the namespace's own.
    fn exec_cmd(&self, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, program]).args(args);
        cmd
    }

    /// Runs a program inside the namespace, with no output checking.
    pub fn exec_output(&self, program: &str, args: &[&str]) -> Output {
        output_of(&mut self.exec_cmd(program, args))
    }

    /// Runs a program inside the namespace; trimmed stdout; panics on failure.
    pub fn exec(&self, program: &str, args: &[&str]) -> String {
        check(&mut self.exec_cmd(program, args))
    }

    /// A shell command line run inside the namespace; panics on failure.
    pub fn sh(&self, script: &str) -> String {
        self.exec("sh", &["-c", script])
    }

    /// The trimmed contents of several files read inside the namespace, in
    /// one process (so a set of counters is read at one moment).
    pub fn read_files(&self, paths: &[String]) -> Vec<String> {
        let args: Vec<&str> = paths.iter().map(String::as_str).collect();
        let out = self.exec("cat", &args);
        let values: Vec<String> = out.lines().map(|l| l.trim().to_string()).collect();
        assert_eq!(values.len(), paths.len(), "reading {paths:?} gave {out:?}");
        values
    }

    pub fn read_file(&self, path: &str) -> String {
        self.read_files(&[path.to_string()]).remove(0)
    }

    /// Link-local addresses would otherwise sit tentative for a second after
    /// link up, and their routes appear only once DAD is done, so a dump
    /// would change by itself. Set before any rail exists (`default`).
    pub fn disable_dad(&self) {
        for conf in ["all", "default"] {
            self.set_sysctl(&format!("net/ipv6/conf/{conf}/accept_dad"), "0");
        }
    }

    /// A new namespace copies IPv4 `conf/all` and `conf/default` from the
    /// init namespace (net.core.devconf_inherit_init_net=0), so a box with,
    /// say, rp_filter=2 would leak it in. Start from the kernel defaults (0)
    /// instead; set before any rail exists, so rails inherit `default`.
    pub fn reset_arp_sysctls(&self) {
        for conf in ["all", "default"] {
            for key in ARP_SYSCTLS {
                self.set_sysctl(&format!("net/ipv4/conf/{conf}/{key}"), "0");
            }
        }
    }

    /// `sysctl -w` with '/' separators, so dotted interface names work
    /// (`net/ipv4/conf/rail0.100/arp_ignore`).
    pub fn set_sysctl(&self, path: &str, value: &str) {
        self.exec("sysctl", &["-q", "-w", &format!("{path}={value}")]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // roce-route's lock directory of this namespace (on the host's
        // /run, named by the namespace's inode), removed while the inode is
        // still this namespace's: once deleted, the kernel may give it to a
        // namespace another test is using.
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::metadata(format!("/run/netns/{}", self.name)) {
            let dir = format!("/run/roce-route/netns/ns-{}-{}", meta.dev(), meta.ino());
            let _ = std::fs::remove_dir_all(dir);
        }
        // Deleting the namespace destroys its veths, and with them their
        // peers. Never panic here: this may run while a test unwinds.
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// `roce-route --netns NS ARGS` run from `cwd` with `base` as its state
/// dir, stdin closed and no test hook inherited: see
/// `Testbed::roce_route_in`, and tests that own their namespace otherwise.
pub fn roce_route_command(ns: &str, base: &Path, cwd: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_roce-route"));
    cmd.arg("--netns")
        .arg(ns)
        .args(args)
        .env("ROCE_ROUTE_STATE_DIR", base)
        .env_remove("ROCE_ROUTE_CRASH_AT")
        .env_remove("ROCE_ROUTE_STEP_DELAY_MS")
        .current_dir(cwd)
        .stdin(Stdio::null());
    cmd
}

/// A namespace with two veth rails whose peers are up, as a point-to-point
/// host has them: rail0 with `198.51.100.1 peer 198.51.100.0/32` and
/// `2001:db8::1 peer 2001:db8::2/128`, rail1 with a bare
/// `198.51.100.7/32` (a host address with no subnet on the link).
pub fn point_to_point_host(name: String) -> Netns {
    require_root();
    require_tools();
    let ns = Netns::create(name);
    for (rail, peer) in [("rail0", "p0"), ("rail1", "p1")] {
        ns.ip(&format!("link add {rail} type veth peer name {peer}"));
        ns.ip(&format!("link set {rail} up"));
        ns.ip(&format!("link set {peer} up"));
    }
    ns.ip("addr add 198.51.100.1 peer 198.51.100.0/32 dev rail0");
    ns.ip("-6 addr add 2001:db8::1 peer 2001:db8::2/128 dev rail0 nodad");
    ns.ip("addr add 198.51.100.7/32 dev rail1");
    ns
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// `<temp dir>/<name>`, empty: one left by an earlier process of the
    /// same pid is cleared first.
    pub fn create(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(name);
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

// ---------------------------------------------------------------------------
// The test bed

/// One RDMA rail of the host.
#[derive(Clone, Debug)]
pub struct Rail {
    /// Interface name in the host namespace.
    pub name: String,
    /// Its veth peer, a port of the peer's bridge.
    pub peer_port: String,
    /// IPv4 address, without prefix length (198.51.100.(10+k)).
    pub v4: String,
    /// IPv6 address, without prefix length (2001:db8:1::(10+k)), if enabled.
    pub v6: Option<String>,
    /// MAC address of the host-side interface.
    pub mac: String,
    /// Routing table of this rail in the standard config (100+k).
    pub table: u32,
}

impl Rail {
    /// "198.51.100.1x/24"
    pub fn v4_cidr(&self) -> String {
        format!("{}/{V4_PREFIX_LEN}", self.v4)
    }

    /// "2001:db8:1::1x/64", if IPv6 is enabled.
    pub fn v6_cidr(&self) -> Option<String> {
        self.v6.as_ref().map(|a| format!("{a}/{V6_PREFIX_LEN}"))
    }

    /// All addresses with prefix lengths, IPv4 first.
    pub fn cidrs(&self) -> Vec<String> {
        std::iter::once(self.v4_cidr()).chain(self.v6_cidr()).collect()
    }
}

pub fn rail_v4(k: usize) -> String {
    format!("198.51.100.{}", 10 + k)
}

pub fn rail_v6(k: usize) -> String {
    format!("2001:db8:1::{}", 10 + k)
}

/// Builds a `Testbed`: `Testbed::builder().rails(4).ipv6(true).build()`.
#[derive(Clone, Debug)]
pub struct TestbedBuilder {
    rails: usize,
    ipv6: bool,
    names: Option<Vec<String>>,
}

impl TestbedBuilder {
    /// Number of rails (default 4). Ignored when `rail_names` is given.
    pub fn rails(mut self, n: usize) -> Self {
        self.rails = n;
        self
    }

    /// Also give rails and peer IPv6 addresses (default false).
    pub fn ipv6(mut self, on: bool) -> Self {
        self.ipv6 = on;
        self
    }

    /// Custom rail names, e.g. `&["rail0.100", "rail1.100"]`; sets the count.
    pub fn rail_names(mut self, names: &[&str]) -> Self {
        self.names = Some(names.iter().map(|n| n.to_string()).collect());
        self
    }

    fn resolved_names(&self) -> Vec<String> {
        let names = match &self.names {
            Some(names) => names.clone(),
            None => (0..self.rails).map(|k| format!("rail{k}")).collect(),
        };
        assert!((1..=200).contains(&names.len()), "a testbed has 1 to 200 rails, not {}", names.len());
        names
    }

    pub fn build(self) -> Testbed {
        require_root();
        require_tools();
        let names = self.resolved_names();
        let tag = format!("rr-{}-{}", std::process::id(), next_id());
        // The guards exist before any configuration, so a failure below
        // still removes everything.
        let mut tb = Testbed {
            host: Netns::create(format!("{tag}-h")),
            peer: Netns::create(format!("{tag}-p")),
            dir: TempDir::create(&format!("roce-route-{tag}")),
            rails: Vec::new(),
            ipv6: self.ipv6,
        };
        tb.setup_peer();
        tb.host.disable_dad();
        tb.host.reset_arp_sysctls();
        for (k, name) in names.iter().enumerate() {
            let rail = tb.add_rail(k, name);
            tb.rails.push(rail);
        }
        tb.wait_ready();
        tb
    }
}

/// A host namespace with N rails in one subnet, and a peer behind a bridge.
pub struct Testbed {
    host: Netns,
    peer: Netns,
    dir: TempDir,
    rails: Vec<Rail>,
    ipv6: bool,
}

impl Testbed {
    pub fn builder() -> TestbedBuilder {
        TestbedBuilder { rails: 4, ipv6: false, names: None }
    }

    // --- construction ---------------------------------------------------

    fn setup_peer(&self) {
        let p = &self.peer;
        p.disable_dad();
        // Without snooping every multicast (IPv6 neighbour solicitations
        // included) is flooded to all ports, like unknown multicast on a switch.
        p.ip(&format!("link add {BRIDGE} type bridge mcast_snooping 0"));
        let mut addrs = vec![format!("{PEER_V4}/{V4_PREFIX_LEN}"), format!("{GATEWAY_V4}/{V4_PREFIX_LEN}")];
        if self.ipv6 {
            addrs.push(format!("{PEER_V6}/{V6_PREFIX_LEN} nodad"));
            addrs.push(format!("{GATEWAY_V6}/{V6_PREFIX_LEN} nodad"));
        }
        for addr in addrs {
            p.ip(&format!("addr add {addr} dev {BRIDGE}"));
        }
        p.ip(&format!("link set {BRIDGE} up"));
    }

    fn add_rail(&self, k: usize, name: &str) -> Rail {
        let port = format!("p{k}");
        self.host.ip(&format!("link add {name} type veth peer name {port} netns {}", self.peer.name()));
        self.peer.ip(&format!("link set {port} master {BRIDGE} up"));
        let v4 = rail_v4(k);
        self.host.ip(&format!("addr add {v4}/{V4_PREFIX_LEN} dev {name}"));
        let v6 = self.ipv6.then(|| rail_v6(k));
        if let Some(v6) = &v6 {
            self.host.ip(&format!("addr add {v6}/{V6_PREFIX_LEN} dev {name} nodad"));
        }
        self.host.ip(&format!("link set {name} up"));
        let mac = self.host.read_file(&format!("/sys/class/net/{name}/address"));
        Rail { name: name.to_string(), peer_port: port, v4, v6, mac, table: FIRST_TABLE + k as u32 }
    }

    /// Waits until every rail and bridge port is up and forwarding, and every
    /// rail's link-local address exists and is final.
    fn wait_ready(&self) {
        poll_until("the testbed links to come up", READY_TIMEOUT, || {
            self.host_links_up() && self.peer_ports_forwarding() && self.link_locals_final()
        });
    }

    fn host_links_up(&self) -> bool {
        let paths =
            self.rails.iter().map(|r| format!("/sys/class/net/{}/operstate", r.name)).collect::<Vec<_>>();
        self.host.read_files(&paths).iter().all(|s| s == "up")
    }

    fn peer_ports_forwarding(&self) -> bool {
        let mut paths = vec![format!("/sys/class/net/{BRIDGE}/operstate")];
        paths.extend(self.rails.iter().map(|r| format!("/sys/class/net/{}/brport/state", r.peer_port)));
        let values = self.peer.read_files(&paths);
        values[0] == "up" && values[1..].iter().all(|s| s == BR_STATE_FORWARDING)
    }

    fn link_locals_final(&self) -> bool {
        // One line per address: "2: rail0    inet6 fe80::.../64 scope link ..."
        let out = self.host.ip("-6 -o addr show scope link");
        let final_on = |r: &Rail| {
            out.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(r.name.as_str()) && !l.contains("tentative"))
        };
        self.rails.iter().all(final_on)
    }

    // --- accessors -------------------------------------------------------

    pub fn host_ns(&self) -> &str {
        self.host.name()
    }

    pub fn peer_ns(&self) -> &str {
        self.peer.name()
    }

    pub fn host(&self) -> &Netns {
        &self.host
    }

    pub fn peer(&self) -> &Netns {
        &self.peer
    }

    pub fn rails(&self) -> &[Rail] {
        &self.rails
    }

    pub fn rail(&self, k: usize) -> &Rail {
        &self.rails[k]
    }

    pub fn ipv6(&self) -> bool {
        self.ipv6
    }

    pub fn peer_v4(&self) -> &'static str {
        PEER_V4
    }

    /// Panics on a testbed built without IPv6.
    pub fn peer_v6(&self) -> &'static str {
        assert!(self.ipv6, "peer_v6() on a testbed built without .ipv6(true)");
        PEER_V6
    }

    /// The per-test temp dir (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    // --- commands --------------------------------------------------------

    /// A shell command line inside the host namespace; trimmed stdout.
    pub fn sh_host(&self, script: &str) -> String {
        self.host.sh(script)
    }

    pub fn sh_peer(&self, script: &str) -> String {
        self.peer.sh(script)
    }

    /// Renames host link `from` to `to` as an admin does: down (which
    /// flushes its routes; its sysctls stay), renamed, up.
    pub fn rename_host_link(&self, from: &str, to: &str) {
        self.sh_host(&format!(
            "ip link set {from} down && ip link set {from} name {to} && ip link set {to} up"
        ));
    }

    /// `ip -n HOST <args>`; args are split on whitespace.
    pub fn ip_host(&self, args: &str) -> String {
        self.host.ip(args)
    }

    pub fn try_ip_host(&self, args: &str) -> Result<String, String> {
        self.host.try_ip(args)
    }

    /// `ip -n PEER <args>`; args are split on whitespace.
    pub fn ip_peer(&self, args: &str) -> String {
        self.peer.ip(args)
    }

    /// `/proc/sys/net/ipv4/conf/<iface>/<key>` in the host namespace.
    pub fn host_sysctl(&self, iface: &str, key: &str) -> u32 {
        let path = format!("/proc/sys/net/ipv4/conf/{iface}/{key}");
        let value = self.host.read_file(&path);
        value.parse().unwrap_or_else(|e| panic!("{path} = {value:?}: {e}"))
    }

    /// Writes `/proc/sys/net/ipv4/conf/<iface>/<key>` in the host namespace.
    pub fn set_host_sysctl(&self, iface: &str, key: &str, value: u32) {
        self.host.set_sysctl(&format!("net/ipv4/conf/{iface}/{key}"), &value.to_string());
    }

    /// What the classic manual guide does: arp_ignore=1 and arp_announce=2 on
    /// `all`, and per rail a table holding the subnet route with the rail's
    /// source address, selected by a `from <addr>` rule (IPv4 only).
    pub fn fix_by_hand(&self) {
        self.set_host_sysctl("all", "arp_ignore", 1);
        self.set_host_sysctl("all", "arp_announce", 2);
        for r in &self.rails {
            self.ip_host(&format!("rule add from {} lookup {}", r.v4, r.table));
            self.ip_host(&format!("route add {SUBNET_V4} dev {} src {} table {}", r.name, r.v4, r.table));
        }
    }

    // --- observations ----------------------------------------------------

    /// The output of `ip route get DST from SRC` in the host namespace.
    pub fn route_get(&self, dst: &str, from: &str) -> String {
        self.ip_host(&format!("route get {dst} from {from}"))
    }

    /// The interface `ip route get DST from SRC` says the packet leaves by.
    pub fn route_get_dev(&self, dst: &str, from: &str) -> String {
        let out = self.route_get(dst, from);
        field_after(&out, "dev").unwrap_or_else(|| panic!("no `dev` in route get output: {out}")).to_string()
    }

    /// Sends `count` echo requests from the peer to `ip`; panics unless
    /// every reply arrived.
    pub fn ping_from_peer(&self, ip: &str, count: u64) {
        let count = count.to_string();
        self.peer.exec("ping", &["-n", "-q", "-c", &count, "-i", "0.01", "-W", "1", ip]);
    }

    /// The MAC the peer resolves `ip` to, from scratch: flush the peer's
    /// neighbour cache, ping once from the peer, read `lladdr`. None when
    /// nothing answered.
    pub fn peer_neigh_mac(&self, ip: &str) -> Option<String> {
        self.ip_peer("neigh flush all");
        // A lost reply is fine here: the neighbour entry is what we read.
        self.peer.exec_output("ping", &["-n", "-q", "-c", "1", "-W", "1", ip]);
        let entry = self.ip_peer(&format!("neigh show {ip} dev {BRIDGE}"));
        field_after(&entry, "lladdr").map(str::to_string)
    }

    /// The host rail whose MAC is `mac`, if any.
    pub fn rail_by_mac(&self, mac: &str) -> Option<&Rail> {
        self.rails.iter().find(|r| r.mac.eq_ignore_ascii_case(mac))
    }

    /// tx_packets of one host interface.
    pub fn tx_packets(&self, ifname: &str) -> u64 {
        self.tx_counters(&[ifname.to_string()])[0]
    }

    /// tx_packets of several host interfaces, read at one moment.
    fn tx_counters(&self, ifnames: &[String]) -> Vec<u64> {
        let paths: Vec<String> =
            ifnames.iter().map(|n| format!("/sys/class/net/{n}/statistics/tx_packets")).collect();
        let values = self.host.read_files(&paths);
        values.iter().map(|v| v.parse().unwrap_or_else(|e| panic!("tx_packets {v:?}: {e}"))).collect()
    }

    /// How much each rail's tx_packets grew while `action` ran, by rail name.
    pub fn tx_growth_during(&self, action: impl FnOnce()) -> Vec<(String, u64)> {
        let names: Vec<String> = self.rails.iter().map(|r| r.name.clone()).collect();
        let before = self.tx_counters(&names);
        action();
        let after = self.tx_counters(&names);
        names.into_iter().zip(after.iter().zip(&before).map(|(a, b)| a - b)).collect()
    }

    /// The host rail the replies to the peer's pings of `ip` leave by: the
    /// rail whose tx counter grew by at least the number of pings.
    pub fn reply_leaves_via_ip(&self, ip: &str) -> String {
        let growth = self.tx_growth_during(|| self.ping_from_peer(ip, REPLY_PINGS));
        let (name, grew) = growth.iter().max_by_key(|(_, g)| *g).expect("testbed without rails");
        assert!(
            *grew >= REPLY_PINGS,
            "replies to {REPLY_PINGS} pings of {ip} did not all leave by one rail: {growth:?}"
        );
        name.clone()
    }

    /// The host rail the replies to the peer's pings of rail k's IPv4
    /// address leave by.
    pub fn reply_leaves_via(&self, k: usize) -> String {
        self.reply_leaves_via_ip(&self.rails[k].v4)
    }

    /// A canonical dump of the host's routing state, for before/after
    /// comparisons: rules and routes of all tables for both families (lines
    /// sorted, `cache` lines and `expires` timers dropped, multi-line routes
    /// joined), then the ARP sysctls of `all` and every rail.
    pub fn dump(&self) -> String {
        let sections = [
            ("ip -4 rule", "-4 rule show"),
            ("ip -6 rule", "-6 rule show"),
            ("ip -4 route show table all", "-4 route show table all"),
            ("ip -6 route show table all", "-6 route show table all"),
        ];
        let mut out = String::new();
        for (title, args) in sections {
            push_section(&mut out, title, canonical_lines(&self.ip_host(args)));
        }
        push_section(&mut out, "sysctl net.ipv4.conf", self.sysctl_lines());
        out
    }

    /// `conf/<iface>/<key> = <value>` for `all` and every rail.
    fn sysctl_lines(&self) -> Vec<String> {
        let ifaces: Vec<&str> =
            std::iter::once("all").chain(self.rails.iter().map(|r| r.name.as_str())).collect();
        let keys: Vec<String> =
            ifaces.iter().flat_map(|i| ARP_SYSCTLS.iter().map(move |k| format!("{i}/{k}"))).collect();
        let paths: Vec<String> = keys.iter().map(|k| format!("/proc/sys/net/ipv4/conf/{k}")).collect();
        let values = self.host.read_files(&paths);
        let mut lines: Vec<String> =
            keys.iter().zip(values).map(|(k, v)| format!("conf/{k} = {v}")).collect();
        lines.sort();
        lines
    }

    // --- the product -------------------------------------------------------

    /// The state base of this test's runs of roce-route (journals, lock,
    /// recorded sysctls), passed as ROCE_ROUTE_STATE_DIR: `<temp dir>/state`.
    pub fn state_base(&self) -> PathBuf {
        self.dir().join("state")
    }

    /// `roce-route --netns <host ns> ARGS`, run from the test's temp dir
    /// with `base` as its state dir (ROCE_ROUTE_STATE_DIR; never
    /// /run/roce-route, so tests never share state), stdin closed, and no
    /// test hook (ROCE_ROUTE_CRASH_AT, ROCE_ROUTE_STEP_DELAY_MS) inherited
    /// from the test's environment. Every run of roce-route in the tests
    /// starts here: a test that wants a hook sets it on the command it gets
    /// (a later `env` wins over the removal), then runs or spawns it.
    pub fn roce_route_in(&self, base: &Path, args: &[&str]) -> Command {
        roce_route_command(self.host_ns(), base, self.dir(), args)
    }

    /// Writes `toml` to a new file in the test's temp dir.
    pub fn write_config(&self, toml: &str) -> PathBuf {
        let path = self.dir().join(format!("config-{}.toml", next_id()));
        fs::write(&path, toml).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// The standard config: one `[[interface]]` per rail with its addresses
    /// and table 100+k, no gateway.
    pub fn config_toml(&self) -> String {
        self.render_config(|_| Vec::new())
    }

    /// The standard config with the peer's gateway on every rail:
    /// `gateway = "198.51.100.254"`, or with IPv6
    /// `gateway = ["198.51.100.254", "2001:db8:1::fe"]`.
    pub fn config_toml_with_gateway(&self) -> String {
        let gateway = if self.ipv6 { toml_list(&[GATEWAY_V4, GATEWAY_V6]) } else { toml_str(GATEWAY_V4) };
        self.render_config(|_| vec![format!("gateway = {gateway}")])
    }

    /// The standard config with extra `key = value` lines per rail.
    pub fn render_config(&self, extra: impl Fn(&Rail) -> Vec<String>) -> String {
        self.render_config_for(|_| true, extra)
    }

    /// Like `render_config`, listing only the rails `keep` selects.
    pub fn render_config_for(
        &self,
        keep: impl Fn(&Rail) -> bool,
        extra: impl Fn(&Rail) -> Vec<String>,
    ) -> String {
        let blocks: Vec<String> =
            self.rails.iter().filter(|r| keep(r)).map(|r| interface_block(r, extra(r))).collect();
        blocks.join("\n")
    }
}

// ---------------------------------------------------------------------------
// Runs of roce-route (or any program)

/// One finished run, with what is needed to explain a failure.
pub struct Run {
    /// How the run is shown in failure messages: the command line, and
    /// whatever else explains it (the config, a signal sent, ...).
    pub what: String,
    pub out: Output,
}

impl Run {
    /// Runs `cmd`, shown in failure messages by its command line and the
    /// environment it sets.
    pub fn of(cmd: Command) -> Run {
        let what = format!("`{}`", describe_with_env(&cmd));
        Run::with_what(cmd, what)
    }

    /// The same run, its failure messages starting with `context` (what the
    /// test was doing: "rollback after a crash at step:3").
    pub fn context(mut self, context: &str) -> Run {
        self.what = format!("{context}: {}", self.what);
        self
    }

    /// Runs `cmd`, shown in failure messages as `what`.
    pub fn with_what(mut cmd: Command, what: String) -> Run {
        let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
        Run { what, out }
    }

    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    /// What was run, its exit status, stdout and stderr.
    pub fn report(&self) -> String {
        format!("{}\n{}", self.what, describe_output(&self.out))
    }

    /// Panics unless the run exited with `code` and did not panic.
    pub fn expect_code(self, code: i32) -> Run {
        self.expect_no_panic();
        assert_eq!(self.code(), Some(code), "expected exit code {code} from\n{}", self.report());
        self
    }

    pub fn expect_no_panic(&self) {
        assert!(!self.stderr().contains("panicked"), "roce-route panicked:\n{}", self.report());
    }

    /// Panics unless stderr contains every one of `needles`.
    pub fn expect_stdout(&self, needles: &[&str]) -> &Run {
        let stdout = self.stdout();
        for n in needles {
            assert!(stdout.contains(n), "stdout lacks {n:?}:\n{}", self.report());
        }
        self
    }

    pub fn expect_stderr(&self, needles: &[&str]) -> &Run {
        let stderr = self.stderr();
        for n in needles {
            assert!(stderr.contains(n), "stderr lacks {n:?}:\n{}", self.report());
        }
        self
    }

    /// N of "rolled back the N step(s)" in stderr.
    pub fn steps_rolled_back(&self) -> usize {
        let stderr = self.stderr();
        stderr
            .split("rolled back the ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no \"rolled back the N step(s)\" in\n{}", self.report()))
    }
}

/// A spawned process, killed and reaped if it is dropped before it was
/// waited for, so that a failing test leaves no process behind (holding a
/// lock, say).
pub struct Background {
    child: Option<Child>,
    what: String,
}

impl Background {
    /// Spawns `cmd` with its stdout and stderr captured; `what` names it in
    /// failure messages.
    pub fn spawn(mut cmd: Command, what: impl Into<String>) -> Background {
        let what = what.into();
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        Background { child: Some(child), what }
    }

    /// Like `spawn`, with stdout and stderr written to the files `out`
    /// and `err` instead, to read while it runs (a long-running command).
    pub fn spawn_logged(mut cmd: Command, what: impl Into<String>, out: &Path, err: &Path) -> Background {
        let what = what.into();
        let open = |p: &Path| fs::File::create(p).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        let child = cmd
            .stdout(open(out))
            .stderr(open(err))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        Background { child: Some(child), what }
    }

    pub fn what(&self) -> &str {
        &self.what
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("already waited for").id()
    }

    pub fn is_running(&mut self) -> bool {
        let child = self.child.as_mut().expect("already waited for");
        child.try_wait().unwrap_or_else(|e| panic!("waiting for {}: {e}", self.what)).is_none()
    }

    /// Waits for it to exit.
    /// Kills the process now (SIGKILL, as a crash would) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn wait(mut self) -> Run {
        let child = self.child.take().expect("already waited for");
        let out = child.wait_with_output().unwrap_or_else(|e| panic!("waiting for {}: {e}", self.what));
        Run { what: std::mem::take(&mut self.what), out }
    }

    /// Waits at most `timeout` for it to exit.
    pub fn wait_timeout(mut self, timeout: Duration) -> Run {
        let deadline = Instant::now() + timeout;
        while self.is_running() {
            if Instant::now() >= deadline {
                panic!("{} still running after {timeout:?}", self.what);
            }
            thread::sleep(POLL_INTERVAL);
        }
        self.wait()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("test paths are UTF-8")
}

/// The journal files of every namespace under the state base `base`.
pub fn journal_files(base: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(namespaces) = fs::read_dir(base) else {
        return found;
    };
    for ns in namespaces.flatten() {
        let Ok(files) = fs::read_dir(ns.path()) else {
            continue;
        };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.starts_with("journal-") && name.ends_with(".jsonl") {
                found.push(f.path());
            }
        }
    }
    found.sort();
    found
}

/// The lines of `a` that are not lines of `b`, in `a`'s order.
pub fn lines_only_in<'a>(a: &'a str, b: &str) -> Vec<&'a str> {
    let other: Vec<&str> = b.lines().collect();
    a.lines().filter(|l| !other.contains(l)).collect()
}

/// Panics unless two dumps (or other texts compared line by line) are
/// equal, with the lines missing from `actual`, those unexpected in it, and
/// both texts in full.
pub fn assert_dump_eq(expected: &str, actual: &str, what: &str) {
    if expected == actual {
        return;
    }
    let (missing, unexpected) = (lines_only_in(expected, actual), lines_only_in(actual, expected));
    let listed = |lines: &[&str]| lines.iter().map(|l| format!("  {l}\n")).collect::<String>();
    let full = |text: &str| if text.ends_with('\n') { text.to_string() } else { format!("{text}\n") };
    panic!(
        "{what}: the host differs from the expected state\n\
         --- missing ({}) ---\n{}--- unexpected ({}) ---\n{}\
         --- expected ---\n{}--- actual ---\n{}",
        missing.len(),
        listed(&missing),
        unexpected.len(),
        listed(&unexpected),
        full(expected),
        full(actual),
    );
}

/// Formats an Output for failure messages.
pub fn describe_output(out: &Output) -> String {
    format!(
        "status: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A TOML basic string: `"` and `\` escaped, and every control character
/// TOML forbids raw in one (U+0000 to U+001F, U+007F) as `\uXXXX` (a tab
/// may stand raw, but escaped it reads back the same), so any text reads
/// back as itself.
pub fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML array of basic strings: `["a", "b"]`.
pub fn toml_list<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| toml_str(s.as_ref())).collect();
    format!("[{}]", quoted.join(", "))
}

fn interface_block(rail: &Rail, extra: Vec<String>) -> String {
    let mut lines = vec![
        "[[interface]]".to_string(),
        format!("name = {}", toml_str(&rail.name)),
        format!("addresses = {}", toml_list(&rail.cidrs())),
        format!("table = {}", rail.table),
    ];
    lines.extend(extra);
    lines.join("\n") + "\n"
}

/// Lines of `ip` output made comparable: `cache` lines dropped,
/// continuation lines (multipath nexthops) joined to their route, `expires N`
/// timers removed, whitespace normalised, sorted.
pub fn canonical_lines(text: &str) -> Vec<String> {
    let kept = text.lines().filter(|l| {
        let l = l.trim();
        !l.is_empty() && !l.starts_with("cache")
    });
    let mut joined: Vec<String> = Vec::new();
    for line in kept {
        let starts_indented = line.starts_with(char::is_whitespace);
        match joined.last_mut() {
            Some(prev) if starts_indented => {
                prev.push(' ');
                prev.push_str(line.trim());
            }
            _ => joined.push(line.to_string()),
        }
    }
    let mut lines: Vec<String> = joined.iter().map(|l| without_timers(l)).collect();
    lines.sort();
    lines
}

/// Drops tokens that change by themselves (`expires 296sec`) and joins the
/// rest with single spaces.
pub fn without_timers(line: &str) -> String {
    let mut out = Vec::new();
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == "expires" {
            words.next();
        } else {
            out.push(w);
        }
    }
    out.join(" ")
}

fn push_section(out: &mut String, title: &str, lines: Vec<String>) {
    out.push_str(&format!("## {title}\n"));
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
}

// ---------------------------------------------------------------------------
// Shared by every test file (one definition each)

impl Testbed {
    /// `roce-route --netns <host> ARGS` with this test's state base (see
    /// `roce_route_in`: stdin closed, no test hook inherited), to run or
    /// spawn, e.g. after setting a hook on it.
    pub fn rr_cmd(&self, args: &[&str]) -> Command {
        self.roce_route_in(&self.state_base(), args)
    }

    /// `roce-route --netns <host> ARGS` (as `rr_cmd`), run to completion.
    pub fn rr(&self, args: &[&str]) -> Run {
        Run::of(self.rr_cmd(args))
    }

    /// `rr` with the profile on (ROCE_ROUTE_PROFILE=1: its counts on
    /// stderr, `profile_count`), expecting exit `code`.
    pub fn rr_profiled(&self, args: &[&str], code: i32) -> Run {
        let mut cmd = self.rr_cmd(args);
        cmd.env("ROCE_ROUTE_PROFILE", "1");
        Run::of(cmd).expect_code(code)
    }

    /// Like `rr`, with the state base `base`.
    pub fn rr_in(&self, base: &Path, args: &[&str]) -> Run {
        Run::of(self.roce_route_in(base, args))
    }

    /// Like `rr`; panics unless it exits 0 (without a panic); its stdout.
    pub fn rr_ok(&self, args: &[&str]) -> String {
        self.rr(args).expect_code(EXIT_OK).stdout()
    }

    /// `apply FLAGS CONFIG` (as `rr`), shown in failure messages with the
    /// config's text.
    pub fn apply(&self, config: &Path, flags: &[&str]) -> Run {
        let mut args = vec!["apply"];
        args.extend(flags);
        args.push(path_str(config));
        let cmd = self.rr_cmd(&args);
        let what = describe_with_config(&cmd, config);
        Run::with_what(cmd, what)
    }

    /// `apply CONFIG`; panics unless it exits 0; its stdout.
    pub fn apply_ok(&self, config: &Path) -> String {
        self.apply(config, &[]).expect_code(EXIT_OK).stdout()
    }

    /// Writes the standard config (`config_toml`: every rail with its
    /// addresses, table 100+k); returns its path.
    pub fn standard_config(&self) -> PathBuf {
        self.write_config(&self.config_toml())
    }

    /// Writes a config of the first `rails` rails, each with `extra`
    /// lines; returns its path.
    pub fn config_for(&self, rails: usize, extra: &[&str]) -> String {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let text = self.render_config_for(|r| r.table < FIRST_TABLE + rails as u32, |_| extra.clone());
        self.write_config(&text).to_string_lossy().into_owned()
    }

    /// Every rule and route carrying protocol `proto`, as `ip` prints them.
    pub fn entries_with_proto(&self, proto: u8) -> Vec<String> {
        let needle = format!("proto {proto}");
        let mut out = Vec::new();
        for args in ["-4 rule show", "-6 rule show", "-4 route show table all", "-6 route show table all"] {
            out.extend(
                self.ip_host(args)
                    .lines()
                    .filter(|l| l.split_whitespace().collect::<Vec<_>>().join(" ").contains(&needle))
                    .map(|l| format!("ip {args}: {}", l.trim())),
            );
        }
        out
    }

    /// Every rule and route roce-route owns with its default protocol.
    pub fn owned_entries(&self) -> Vec<String> {
        self.entries_with_proto(234)
    }

    /// The one namespace directory under this testbed's state base.
    pub fn ns_state_dir(&self) -> PathBuf {
        ns_state_dir(&self.state_base())
    }
}

/// The one namespace directory (`net-...`) under the state base `base`.
pub fn ns_state_dir(base: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = fs::read_dir(base)
        .unwrap_or_else(|e| panic!("read {}: {e}", base.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("net-")))
        .collect();
    assert_eq!(dirs.len(), 1, "expected one namespace dir in {}: {dirs:?}", base.display());
    dirs.into_iter().next().unwrap()
}

/// Every file under the state base `base` (all namespaces), relative to
/// it ("net-X/journal-000001.jsonl"), sorted; none without a base.
pub fn state_files(base: &Path) -> Vec<String> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&entry.path(), &format!("{name}/"), out);
            } else {
                out.push(name);
            }
        }
    }
    let mut files = Vec::new();
    walk(base, "", &mut files);
    files.sort();
    files
}

/// Whether an `apply --confirm` under the state base `base` waits for its
/// confirmation with its change made (its `pending` file names the trial's
/// journal; it is written without one before the first step).
pub fn confirmation_pending(base: &Path) -> bool {
    state_files(base).iter().filter(|f| f.ends_with("/pending")).any(|f| {
        fs::read_to_string(base.join(f))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .is_some_and(|doc| doc["journal"].as_str().is_some_and(|j| j.starts_with("journal-")))
    })
}

/// Whether a `pending` file exists under `base` (the guard is armed,
/// whether or not the change is made yet).
pub fn guard_armed(base: &Path) -> bool {
    state_files(base).iter().any(|f| f.ends_with("/pending"))
}

/// The JSON document a `--json` run printed on stdout.
pub fn json_doc(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout())
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}", run.report()))
}

/// The interfaces a `check --json` report names as `arp_flux`, when those
/// are all it reports (and every traffic lookup is ok); None otherwise.
pub fn arp_flux_only(report: &serde_json::Value) -> Option<Vec<String>> {
    let differences = report["differences"].as_array()?;
    let traffic_ok = report["traffic"].as_array()?.iter().all(|t| t["ok"] == true);
    let flux: Vec<String> = differences
        .iter()
        .filter(|d| d["kind"] == "arp_flux")
        .filter_map(|d| {
            d["description"].as_str()?.strip_prefix("ARP flux: ")?.split(' ').next().map(String::from)
        })
        .collect();
    (traffic_ok && !flux.is_empty() && flux.len() == differences.len()).then_some(flux)
}

impl Testbed {
    /// `check CONFIG --json` where the rails `dropped` left the config and
    /// got their recorded sysctls (0) back: they answer ARP for the rails'
    /// addresses, which check reports as `arp_flux` (exit 3; issue 8,
    /// section 4). Panics unless that is all it reports, with every traffic
    /// lookup ok. The report.
    pub fn check_only_arp_flux(&self, config: &str, dropped: &[&str]) -> serde_json::Value {
        let report = json_doc(&self.rr(&["--json", "check", config]).expect_code(EXIT_DRIFT));
        let expected: Vec<String> = dropped.iter().map(|d| d.to_string()).collect();
        assert_eq!(arp_flux_only(&report), Some(expected), "{report:#}");
        report
    }
}

/// The text between the first pair of backticks after `marker` in `text`.
pub fn quoted_after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let start = rest.find('`')? + 1;
    let len = rest[start..].find('`')?;
    Some(&rest[start..start + len])
}

// ---------------------------------------------------------------------------
// Runs without root

/// The uid (and gid) of nobody / nogroup on Debian-like systems.
pub const NOBODY_UID: u32 = 65534;

/// `chmod MODE PATH`; panics on failure.
pub fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

/// How to drop to nobody: setpriv (util-linux), else runuser.
fn drop_privileges() -> Vec<String> {
    let works =
        |prog: &str, arg: &str| Command::new(prog).arg(arg).output().is_ok_and(|o| o.status.success());
    let uid = NOBODY_UID.to_string();
    if works("setpriv", "--version") {
        vec!["setpriv".into(), format!("--reuid={uid}"), format!("--regid={uid}"), "--clear-groups".into()]
    } else if works("runuser", "--version") {
        ["runuser", "-u", "nobody", "--"].map(String::from).to_vec()
    } else {
        panic!("this test needs `setpriv` or `runuser`: install util-linux");
    }
}

/// An unprivileged roce-route inside the host namespace: `ip netns exec`
/// enters it as root (`--netns` needs root), then privileges are dropped.
pub struct Nobody<'a> {
    tb: &'a Testbed,
    bin: PathBuf,
    prefix: Vec<String>,
}

impl<'a> Nobody<'a> {
    /// Makes the test dir traversable and copies the binary there, so that
    /// nobody can run it whatever the target dir's permissions.
    pub fn new(tb: &'a Testbed) -> Nobody<'a> {
        chmod(tb.dir(), 0o755);
        let bin = tb.dir().join("roce-route");
        fs::copy(env!("CARGO_BIN_EXE_roce-route"), &bin).expect("copy the binary");
        chmod(&bin, 0o755);
        Nobody { tb, bin, prefix: drop_privileges() }
    }

    /// Writes a config nobody can read: in the 0755 test dir, mode 0644.
    pub fn config(&self, toml: &str) -> PathBuf {
        let path = self.tb.write_config(toml);
        chmod(&path, 0o644);
        path
    }

    /// `roce-route ARGS` as nobody in the host namespace, with the test's
    /// state base and, as `Testbed::roce_route_in`, no test hook inherited.
    pub fn run(&self, args: &[&str]) -> Run {
        let bin = path_str(&self.bin).to_string();
        let mut all = vec![bin.as_str()];
        all.extend(args);
        self.exec(&all)
    }

    /// Any program as nobody in the host namespace (stdin closed).
    pub fn exec(&self, argv: &[&str]) -> Run {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", self.tb.host_ns()])
            .args(&self.prefix)
            .args(argv)
            .env("ROCE_ROUTE_STATE_DIR", self.tb.state_base())
            .env_remove("ROCE_ROUTE_CRASH_AT")
            .env_remove("ROCE_ROUTE_STEP_DELAY_MS")
            .current_dir(self.tb.dir())
            .stdin(Stdio::null());
        Run::of(cmd)
    }
}

impl Testbed {
    /// `apply CONFIG` with one step every `delay_ms`, taking `iface` down
    /// once the run has planned and recorded its journal, so that a step
    /// through it fails mid-run (a link down BEFORE the run is not ready,
    /// not a failure); `iface` is set up again before returning.
    pub fn apply_failing_mid_run(&self, config: &str, iface: &str, delay_ms: u64) -> Run {
        let journals = journal_files(&self.state_base()).len();
        let mut cmd = self.rr_cmd(&["apply", config]);
        cmd.env("ROCE_ROUTE_STEP_DELAY_MS", delay_ms.to_string());
        let mut apply =
            Background::spawn(cmd, format!("apply {config} with {delay_ms} ms steps, {iface} down mid-run"));
        poll_until("the apply to record its journal", Duration::from_secs(10), || {
            journal_files(&self.state_base()).len() > journals || !apply.is_running()
        });
        self.ip_host(&format!("link set {iface} down"));
        let run = apply.wait();
        self.ip_host(&format!("link set {iface} up"));
        run
    }
}

// ---------------------------------------------------------------------------
// Announcements (tests/announce.rs): the peer's neighbour entries as they
// are, entries planted as ARP flux leaves them, and the frames each rail
// sent. Added for issue 8 §3; nothing above depends on them.

/// One entry of the peer's neighbour table on its bridge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerNeigh {
    pub ip: String,
    /// None for an entry without a link-layer address (INCOMPLETE, FAILED).
    pub mac: Option<String>,
    /// STALE, REACHABLE, PERMANENT, ...
    pub state: String,
}

impl Testbed {
    /// The peer's neighbour table on its bridge, both families, as it is:
    /// nothing is flushed and nothing is sent (unlike `peer_neigh_mac`).
    pub fn peer_neigh_table(&self) -> Vec<PeerNeigh> {
        // "198.51.100.11 lladdr 02:..:0b STALE", "2001:db8:1::11 lladdr ... REACHABLE"
        self.ip_peer(&format!("neigh show dev {BRIDGE}"))
            .lines()
            .filter_map(|l| {
                let ip = l.split_whitespace().next()?.to_string();
                let mac = field_after(l, "lladdr").map(str::to_string);
                let state = l.split_whitespace().last()?.to_string();
                Some(PeerNeigh { ip, mac, state })
            })
            .collect()
    }

    /// Plants an entry in the peer's neighbour table, as ARP flux leaves
    /// one: `ip neigh replace IP lladdr MAC dev br0 nud NUD` (stale,
    /// reachable, ...).
    pub fn plant_peer_neigh(&self, ip: &str, mac: &str, nud: &str) {
        self.ip_peer(&format!("neigh replace {ip} lladdr {mac} dev {BRIDGE} nud {nud}"));
    }

    /// The peer's ARP `locktime` on its bridge (net.ipv4.neigh.br0.locktime,
    /// in USER_HZ = 1/100 s): an ARP update within it of the last one is
    /// ignored, unless it is gratuitous.
    pub fn peer_arp_locktime(&self) -> Duration {
        let value = self.peer.read_file(&format!("/proc/sys/net/ipv4/neigh/{BRIDGE}/locktime"));
        let hundredths: u64 = value.parse().unwrap_or_else(|e| panic!("locktime {value:?}: {e}"));
        Duration::from_millis(hundredths * 10)
    }

    /// rx_packets of every rail's bridge port p<k> on the peer, in rail
    /// order, read at one moment: the frames rail k sent.
    pub fn peer_port_rx(&self) -> Vec<u64> {
        let paths: Vec<String> = self
            .rails
            .iter()
            .map(|r| format!("/sys/class/net/{}/statistics/rx_packets", r.peer_port))
            .collect();
        let values = self.peer.read_files(&paths);
        values.iter().map(|v| v.parse().unwrap_or_else(|e| panic!("rx_packets {v:?}: {e}"))).collect()
    }
}

/// promtool's verdict on `text`: its exit status and everything it printed.
pub fn promtool(text: &str) -> (bool, String) {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "promtool is not installed: it is in the Debian package `prometheus` \
             (apt-get install -y --no-install-recommends prometheus)"
        ),
        Err(e) => panic!("cannot run promtool: {e}"),
    };
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

/// The count `name` from the `ROCE_ROUTE_PROFILE=1` line on stderr (0
/// when the run counted none).
pub fn profile_count(stderr: &str, name: &str) -> u64 {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("roce-route profile: "))
        .unwrap_or_else(|| panic!("no profile line in:\n{stderr}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["counts"][name].as_u64().unwrap_or(0)
}

/// `command` (`ip ...` or `sysctl ...`) as roce-route prints it under
/// `--netns ns`: `ip -n NS ...`, `ip netns exec NS sysctl ...`.
pub fn in_netns(ns: &str, command: &str) -> String {
    if let Some(rest) = command.strip_prefix("sysctl ") {
        format!("ip netns exec {ns} sysctl {rest}")
    } else if let Some(rest) = command.strip_prefix("ip ") {
        format!("ip -n {ns} {rest}")
    } else {
        command.to_string()
    }
}

/// A dry-run script printed under `--netns ns`, every command checked to
/// carry the namespace (pasted as printed it must act there, never on the
/// host's own), and returned without it, as the command alone.
pub fn script_without_netns(ns: &str, script: &str) -> String {
    let (ip, sysctl) = (format!("ip -n {ns} "), format!("ip netns exec {ns} sysctl "));
    let mut out = String::new();
    for line in script.split_inclusive('\n') {
        if line.starts_with('#') || line.trim().is_empty() {
            out.push_str(line);
        } else if let Some(rest) = line.strip_prefix(&ip) {
            out.push_str("ip ");
            out.push_str(rest);
        } else if let Some(rest) = line.strip_prefix(&sysctl) {
            out.push_str("sysctl ");
            out.push_str(rest);
        } else {
            panic!(
                "a command of the script does not act in namespace {ns}: {line}\n--- script ---\n{script}"
            );
        }
    }
    out
}
