//! Every config in examples/ parses and validates, and does what its
//! comments say: the unit tests check the parsed config (interfaces,
//! names, tables, gateways, /31 peers, inherited defaults), and the kernel
//! tests run the real binary's `apply --dry-run` in a private network
//! namespace holding the example's interfaces and check the routes, rules
//! and sysctls it plans, including every command line quoted in the
//! example's comments. examples/README.md names exactly the files there.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Netns, TempDir, field_after};
use roce_route::config::{self, Config, Interface};
use roce_route::model::{Prefix, SysctlKey};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn read(rel: &str) -> String {
    let path = examples_dir().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Parses one example file, failing the test with the config error if invalid.
fn load(rel: &str) -> Config {
    let path = examples_dir().join(rel);
    config::parse(&path.display().to_string(), &read(rel))
        .unwrap_or_else(|e| panic!("{} is not a valid config:\n{e}", path.display()))
}

/// Loads a file or directory of examples/ as `apply` does (a directory:
/// its `*.toml` in name order, merged).
fn load_as_cli(rel: &str) -> Config {
    let path = examples_dir().join(rel);
    roce_route::config_files::load(std::slice::from_ref(&path))
        .unwrap_or_else(|e| panic!("{} is not a valid config:\n{e}", path.display()))
}

/// The units `apply` is given: each top-level `*.toml`, and `conf.d/` as one.
const UNITS: [&str; 7] = [
    "conf.d/",
    "dual-stack.toml",
    "guide-4-rail.toml",
    "h100-8-rail.toml",
    "ipoib-partitions.toml",
    "l3-31-per-rail.toml",
    "subnet-per-rail.toml",
];

/// The commented template, with its commented-out keys and tables turned
/// on: what a user gets by deleting the `# ` in front of them.
fn template_uncommented() -> String {
    let mut out = String::new();
    for line in read("roce-route.toml.example").lines() {
        let rest = line.strip_prefix("# ").unwrap_or(line);
        let head = rest.trim_start();
        let key = head
            .split_once(" = ")
            .is_some_and(|(k, _)| k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        out.push_str(if head.starts_with('[') || head.starts_with('#') || key { rest } else { line });
        out.push('\n');
    }
    out
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn prefix(s: &str) -> Prefix {
    let (a, len) = s.split_once('/').expect("addr/len");
    Prefix::new(ip(a), len.parse().unwrap())
}

fn gateways(iface: &Interface) -> Vec<IpAddr> {
    iface.gateways.iter().map(|g| g.addr).collect()
}

fn addrs(iface: &Interface) -> Vec<String> {
    iface.addresses.as_ref().expect("explicit addresses").iter().map(|a| a.to_string()).collect()
}

/// The one explicit address of a rail, as a prefix.
fn only_prefix(iface: &Interface) -> Prefix {
    let list = iface.addresses.as_ref().expect("explicit addresses");
    assert_eq!(list.len(), 1, "{}: one address", iface.name);
    list[0].prefix().unwrap_or_else(|| panic!("{}: address without /len", iface.name))
}

fn names(cfg: &Config) -> Vec<&str> {
    cfg.interfaces.iter().map(|i| i.name.as_str()).collect()
}

fn tables(cfg: &Config) -> Vec<u32> {
    cfg.interfaces.iter().map(|i| i.table).collect()
}

/// The DGX H100 compute NICs in GPU order (DGX H100/H200 User Guide,
/// "Network Ports" and "Network Modules": Ethernet names of the eight
/// single-port ConnectX-7).
const DGX_H100_RAILS: [&str; 8] = [
    "enp24s0np0",
    "enp64s0np0",
    "enp79s0np0",
    "enp94s0np0",
    "enp154s0np0",
    "enp192s0np0",
    "enp206s0np0",
    "enp220s0np0",
];

/// A single-port NIC's function has no `f<N>` part and port 0 only.
fn is_single_port_name(name: &str) -> bool {
    name.ends_with("np0") && !name.trim_end_matches("np0").contains('f')
}

// ---------------------------------------------------------------------------
// Every file

/// Every file under examples/ but the README, as paths relative to it.
fn example_files() -> BTreeSet<String> {
    fn walk(dir: &Path, rel: &str, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).expect("examples/ exists") {
            let entry = entry.unwrap();
            let name = format!("{rel}{}", entry.file_name().to_string_lossy());
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &format!("{name}/"), out);
            } else if name != "README.md" {
                out.insert(name);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&examples_dir(), "", &mut out);
    out
}

#[test]
fn every_example_is_valid() {
    let files = example_files();
    for file in &files {
        let in_unit = UNITS.iter().any(|u| file == u || (u.ends_with('/') && file.starts_with(u)));
        assert!(
            in_unit || file == "roce-route.toml.example",
            "examples/{file} is not in UNITS: give it a test (and a line in examples/README.md)"
        );
    }
    for unit in UNITS {
        let cfg = load_as_cli(unit);
        assert!(!cfg.interfaces.is_empty(), "{unit}: no interfaces");
        assert_eq!(cfg.defaults.protocol, 234, "{unit}: protocol");
        if !unit.ends_with('/') {
            assert_eq!(cfg, load(unit), "{unit}: the CLI loader and config::parse differ");
        }
    }
}

/// The template's commented values are the real defaults, and with its
/// tables turned on it is a valid config.
#[test]
fn template_documents_the_defaults() {
    let cfg = config::parse("roce-route.toml.example (uncommented)", &template_uncommented())
        .unwrap_or_else(|e| panic!("the uncommented template is not valid:\n{e}"));
    let bare = config::parse("bare", "[[interface]]\nname = \"ib0\"\n").unwrap();
    assert_eq!(cfg.defaults, bare.defaults, "the template's [defaults] values are not the defaults");
    assert_eq!(names(&cfg), ["ib0", "ib1"]);
    assert_eq!(addrs(&cfg.interfaces[0]), ["198.51.100.10/24"]);
    assert_eq!(gateways(&cfg.interfaces[0]), [ip("198.51.100.1")]);
    assert!(cfg.interfaces[1].addresses.is_none(), "ib1 takes the host's addresses");
    assert_eq!(cfg.arp_only.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), ["eno1"]);
}

/// 198.51.100.0/24 and 203.0.113.0/24 (RFC 5737), 2001:db8::/32 (RFC
/// 3849), or an IPv6 link-local router.
fn is_documentation(addr: IpAddr) -> bool {
    ["198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "fe80::/10"]
        .iter()
        .any(|p| prefix(p).contains(&addr))
}

#[test]
fn examples_use_documentation_addresses_only() {
    let mut configs: Vec<(String, Config)> = UNITS.iter().map(|u| (u.to_string(), load_as_cli(u))).collect();
    let template = config::parse("template", &template_uncommented()).unwrap();
    configs.push(("roce-route.toml.example".into(), template));
    for (unit, cfg) in &configs {
        for iface in &cfg.interfaces {
            let listed = iface.addresses.iter().flatten().map(|a| a.addr);
            for addr in listed.chain(gateways(iface)) {
                assert!(
                    is_documentation(addr),
                    "{unit}: {}: {addr} is not a documentation address",
                    iface.name
                );
            }
        }
    }
}

/// The file names examples/README.md mentions (relative to examples/).
fn names_in_readme(text: &str) -> BTreeSet<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._/-".contains(c);
    text.split(|c: char| !allowed(c))
        .filter(|w| w.ends_with(".toml") || w.ends_with(".example") || w.ends_with(".d/"))
        .filter(|w| !w.starts_with('/') && !w.starts_with('.'))
        .map(|w| w.strip_prefix("examples/").unwrap_or(w).to_string())
        .collect()
}

#[test]
fn readme_names_every_example_and_nothing_else() {
    let named = names_in_readme(&read("README.md"));
    for file in example_files() {
        assert!(named.contains(&file), "examples/README.md does not mention {file}");
    }
    for name in &named {
        assert!(examples_dir().join(name).exists(), "examples/README.md names {name}, which does not exist");
    }
    for unit in UNITS {
        let preview = format!("roce-route apply --dry-run examples/{unit}");
        let shown = read("README.md").contains(&preview) || read(unit_first_file(unit)).contains(&preview);
        assert!(shown, "neither examples/README.md nor {unit} shows `{preview}`");
    }
}

#[test]
fn readme_name_scan_finds_names_and_skips_paths() {
    let found = names_in_readme("`a.toml`, examples/conf.d/ and conf.d/10-x.toml; not /etc/b.toml or *.toml");
    let want: BTreeSet<String> =
        ["a.toml", "conf.d/", "conf.d/10-x.toml"].iter().map(|s| s.to_string()).collect();
    assert_eq!(found, want);
}

/// The file of a unit whose comments say how to preview it.
fn unit_first_file(unit: &str) -> &str {
    if unit == "conf.d/" { "conf.d/10-rails.toml" } else { unit }
}

// ---------------------------------------------------------------------------
// Each example's claims

#[test]
fn guide_4_rail() {
    let cfg = load("guide-4-rail.toml");
    assert_eq!(names(&cfg), ["ib0", "ib1", "ib2", "ib3"]);
    for (k, iface) in cfg.interfaces.iter().enumerate() {
        assert_eq!(iface.table, 100 + k as u32);
        assert_eq!(iface.priority, 1000);
        assert_eq!(gateways(iface), [ip("198.51.100.1")]);
        assert_eq!(addrs(iface), [format!("198.51.100.{}/24", 10 + k)]);
        assert_eq!(iface.sysctls[&SysctlKey::ArpIgnore], 1);
        assert_eq!(iface.sysctls[&SysctlKey::ArpAnnounce], 2);
    }
    assert_eq!(tables(&cfg), (100..=103).collect::<Vec<_>>());
}

#[test]
fn h100_8_rail() {
    let cfg = load("h100-8-rail.toml");
    // Eight single-port ConnectX-7, in GPU order, not four dual-port NICs.
    assert_eq!(names(&cfg), DGX_H100_RAILS);
    for name in names(&cfg) {
        assert!(is_single_port_name(name), "{name} is not a single-port NIC's name");
    }
    assert_eq!(cfg.defaults.sysctls[&SysctlKey::RpFilter], 2);
    assert_eq!(tables(&cfg), (100..=107).collect::<Vec<_>>());
    let subnet = prefix("198.51.100.0/24");
    for (k, iface) in cfg.interfaces.iter().enumerate() {
        assert_eq!(addrs(iface), [format!("198.51.100.{}/24", 21 + k)], "{}", iface.name);
        assert_eq!(only_prefix(iface).network(), subnet, "{}: one subnet for all", iface.name);
        assert_eq!(iface.sysctls[&SysctlKey::RpFilter], 2, "{}", iface.name);
        assert_eq!(iface.sysctls[&SysctlKey::ArpIgnore], 1, "{}", iface.name);
        assert_eq!(gateways(iface), [ip("198.51.100.1")], "{}", iface.name);
    }
}

#[test]
fn single_port_name_test_tells_dual_port_names() {
    assert!(is_single_port_name("enp24s0np0"));
    assert!(is_single_port_name("ens5np0"));
    assert!(!is_single_port_name("ens1f0np0"), "a port of a multi-function card");
    assert!(!is_single_port_name("ens1f1np1"));
    assert!(!is_single_port_name("ibp24s0"));
}

#[test]
fn subnet_per_rail() {
    let cfg = load("subnet-per-rail.toml");
    assert_eq!(names(&cfg), DGX_H100_RAILS);
    assert_eq!(tables(&cfg), (100..=107).collect::<Vec<_>>());
    let mut subnets = BTreeSet::new();
    for (k, iface) in cfg.interfaces.iter().enumerate() {
        let p = only_prefix(iface);
        let net = p.network();
        assert_eq!(net, prefix(&format!("198.51.100.{}/27", 32 * k)), "{}: rail {k}'s subnet", iface.name);
        assert!(subnets.insert(net.to_string()), "{}: a subnet shared with another rail", iface.name);
        // The gateway is the first host of the rail's own subnet.
        assert_eq!(gateways(iface), [ip(&format!("198.51.100.{}", 32 * k + 1))], "{}", iface.name);
        assert!(net.contains(&gateways(iface)[0]));
        assert_eq!(p.addr, ip(&format!("198.51.100.{}", 32 * k + 10)), "{}", iface.name);
    }
}

#[test]
fn l3_31_per_rail() {
    let cfg = load("l3-31-per-rail.toml");
    assert_eq!(names(&cfg), DGX_H100_RAILS);
    assert_eq!(tables(&cfg), (100..=107).collect::<Vec<_>>());
    assert!(!cfg.defaults.sysctls.contains_key(&SysctlKey::RpFilter), "rp_filter is left unmanaged");
    for (k, iface) in cfg.interfaces.iter().enumerate() {
        let p = only_prefix(iface);
        assert_eq!(p.len, 31, "{}: a /31", iface.name);
        assert_eq!(p.network(), prefix(&format!("203.0.113.{}/31", 2 * k)), "{}", iface.name);
        let IpAddr::V4(host) = p.addr else { panic!("{}: IPv4", iface.name) };
        assert_eq!(host.octets()[3] % 2, 1, "{}: the host has the odd end", iface.name);
        // The gateway is the other end of the same /31: the leaf.
        let peer = IpAddr::V4((u32::from(host) ^ 1).into());
        assert_eq!(gateways(iface), [peer], "{}: the gateway is the /31 peer", iface.name);
        assert!(p.network().contains(&peer));
    }
}

#[test]
fn ipoib_partitions() {
    let cfg = load("ipoib-partitions.toml");
    assert_eq!(names(&cfg), ["ib0.8001", "ib1.8001", "ib2.8001", "ib3.8001"]);
    let mut parents = BTreeSet::new();
    for (k, iface) in cfg.interfaces.iter().enumerate() {
        // <parent>.<pkey in hex>, a full member (0x8000 set): a pkey child.
        let (parent, pkey) = iface.name.split_once('.').expect("a pkey child");
        let pkey =
            u16::from_str_radix(pkey, 16).unwrap_or_else(|_| panic!("{}: pkey is not hex", iface.name));
        assert_ne!(pkey & 0x8000, 0, "{}: not a full member", iface.name);
        assert!(parent.starts_with("ib"), "{}: the parent is an IPoIB port", iface.name);
        assert!(parents.insert(parent.to_string()), "{}: one child per port", iface.name);
        assert_eq!(addrs(iface), [format!("203.0.113.{}/24", 20 + k)]);
        assert!(iface.gateways.is_empty(), "{}: no IP router on the IPoIB subnet", iface.name);
        assert_eq!(iface.table, 100 + k as u32);
        assert_eq!(iface.sysctls[&SysctlKey::ArpIgnore], 1);
    }
}

#[test]
fn dual_stack() {
    let cfg = load("dual-stack.toml");
    assert_eq!(names(&cfg), ["ens1f0np0.100", "ens1f1np1.100", "ens2f0np0.100"]);
    for iface in &cfg.interfaces {
        // 802.1Q children of Ethernet ports: IPoIB has no VLANs.
        let (parent, vid) = iface.name.split_once('.').expect("a VLAN child");
        assert!(!parent.starts_with("ib"), "{}: a VLAN on an IPoIB port", iface.name);
        assert_eq!(vid, "100");
    }
    let ib0 = &cfg.interfaces[0];
    let gws = gateways(ib0);
    assert!(gws.iter().any(|g| g.is_ipv4()), "{gws:?}");
    assert!(gws.contains(&ip("2001:db8:100::1")), "{gws:?}");
    let listed = ib0.addresses.as_ref().expect("explicit addresses");
    assert!(listed.iter().any(|a| a.addr.is_ipv6()));
    // A link-local IPv6 gateway, and an interface taking its addresses
    // from the host at apply time.
    assert!(gateways(&cfg.interfaces[1]).contains(&ip("fe80::1")));
    assert_eq!(cfg.interfaces[1].priority, 1001);
    assert!(cfg.interfaces[2].addresses.is_none());
    assert_eq!(cfg.interfaces[2].sysctls[&SysctlKey::ArpIgnore], 2);
}

#[test]
fn conf_d_split() {
    let cfg = load_as_cli("conf.d/");
    let files: Vec<String> =
        cfg.files.iter().map(|f| Path::new(f).file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(files, ["10-rails.toml", "20-storage.toml"], "merged in name order");
    let rails: Vec<String> = (1..=8).map(|k| format!("ens{k}np0")).collect();
    let mut want: Vec<&str> = rails.iter().map(String::as_str).collect();
    want.extend(["ens9f0np0", "ens9f1np1"]);
    assert_eq!(names(&cfg), want);
    let mut want_tables: Vec<u32> = (100..=107).collect();
    want_tables.extend([200, 201]);
    assert_eq!(tables(&cfg), want_tables);
    for iface in &cfg.interfaces {
        // [defaults] of 10-rails.toml reach the storage ports too.
        assert_eq!(iface.sysctls[&SysctlKey::RpFilter], 2, "{}", iface.name);
    }
    for iface in &cfg.interfaces[..8] {
        assert!(iface.addresses.is_none(), "{}: the fleet file names no address", iface.name);
        assert!(is_single_port_name(&iface.name), "{}", iface.name);
        assert_eq!(gateways(iface), [ip("198.51.100.1")]);
    }
    for (iface, host) in cfg.interfaces[8..].iter().zip([41, 42]) {
        assert_eq!(addrs(iface), [format!("203.0.113.{host}/24")]);
        assert_eq!(gateways(iface), [ip("203.0.113.1")]);
    }
    // Alone, the storage file has no rp_filter: the value above is inherited.
    let alone = load("conf.d/20-storage.toml");
    assert!(!alone.interfaces[0].sysctls.contains_key(&SysctlKey::RpFilter));
}

// ---------------------------------------------------------------------------
// The real binary's dry run, in a private namespace

/// Addresses given to the rails of an example that lists none (they take
/// the host's), so the dry run has something to plan for them.
fn host_addresses(unit: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    if unit == "conf.d/" {
        for k in 1..=8 {
            out.insert(format!("ens{k}np0"), vec![format!("198.51.100.{}/24", 50 + k)]);
        }
    }
    if unit == "dual-stack.toml" {
        out.insert("ens2f0np0.100".into(), vec!["203.0.113.12/24".into(), "2001:db8:100::12/64".into()]);
    }
    out
}

/// The command lines an example's comments quote as what apply does.
fn quoted_commands(unit: &str) -> Vec<String> {
    let files: Vec<String> = if unit.ends_with('/') {
        example_files().into_iter().filter(|f| f.starts_with(unit)).collect()
    } else {
        vec![unit.to_string()]
    };
    let prefixes = ["#   ip -4 ", "#   ip -6 ", "#   sysctl -w "];
    files
        .iter()
        .flat_map(|f| read(f).lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|l| prefixes.iter().any(|p| l.starts_with(p)))
        .map(|l| l["#   ".len()..].trim_end().to_string())
        .collect()
}

static NEXT_NS: AtomicUsize = AtomicUsize::new(0);

/// A namespace with the example's interfaces (veth ends, up, with its
/// addresses or `host_addresses`): the dry run's stdout, which must exit 0
/// (every rail ready).
fn dry_run(unit: &str, cfg: &Config) -> String {
    common::require_root();
    common::require_tools();
    let tag = format!("rr-ex-{}-{}", std::process::id(), NEXT_NS.fetch_add(1, Ordering::Relaxed));
    let ns = Netns::create(tag.clone());
    let state = TempDir::create(&format!("roce-route-{tag}"));
    ns.disable_dad();
    ns.reset_arp_sysctls();
    let extra = host_addresses(unit);
    for (k, iface) in cfg.interfaces.iter().enumerate() {
        ns.ip(&format!("link add {} type veth peer name rx{k}", iface.name));
        let listed: Vec<String> = iface.addresses.iter().flatten().map(|a| a.to_string()).collect();
        let given = if listed.is_empty() { extra[&iface.name].clone() } else { listed };
        for a in given {
            ns.ip(&format!("addr add {a} dev {}", iface.name));
        }
        ns.ip(&format!("link set rx{k} up"));
        ns.ip(&format!("link set {} up", iface.name));
    }
    let path = examples_dir().join(unit);
    let mut cmd = common::roce_route_command(
        ns.name(),
        state.path(),
        &examples_dir(),
        &["apply", "--dry-run", path.to_str().unwrap()],
    );
    let out = cmd.output().expect("run roce-route");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "`{}`\n--- stdout ---\n{stdout}\n--- stderr ---\n{}",
        common::describe_with_env(&cmd),
        String::from_utf8_lossy(&out.stderr)
    );
    common::script_without_netns(ns.name(), &stdout)
}

/// The dry run plans, per rail, a source rule per address, the subnet
/// route with that source, a default route per gateway through the rail
/// and the rail's sysctls; and it prints every command the comments quote.
fn dry_run_does_what_the_comments_say(unit: &str) {
    let cfg = load_as_cli(unit);
    let out = dry_run(unit, &cfg);
    let lines: BTreeSet<&str> = out.lines().map(str::trim_end).collect();
    let has = |want: &str| {
        assert!(lines.contains(want), "{unit}: the dry run lacks\n  {want}\n--- it printed ---\n{out}")
    };
    let quoted = quoted_commands(unit);
    for line in &quoted {
        has(line);
    }
    let extra = host_addresses(unit);
    for iface in &cfg.interfaces {
        let (name, table) = (&iface.name, iface.table);
        let listed: Vec<String> = iface.addresses.iter().flatten().map(|a| a.to_string()).collect();
        for a in if listed.is_empty() { extra[name].clone() } else { listed } {
            let p = prefix(&a);
            let f = if p.addr.is_ipv4() { 4 } else { 6 };
            has(&format!(
                "ip -{f} rule add priority {} from {} lookup {table} proto 234",
                iface.priority, p.addr
            ));
            let route = format!("ip -{f} route add {} dev {name} table {table} proto 234 ", p.network());
            assert!(
                out.lines()
                    .any(|l| l.starts_with(&route) && field_after(l, "src") == Some(&p.addr.to_string())),
                "{unit}: no subnet route `{route}... src {}`:\n{out}",
                p.addr
            );
        }
        for gw in gateways(iface) {
            let f = if gw.is_ipv4() { 4 } else { 6 };
            let route = format!("ip -{f} route add default via {gw} dev {name} table {table} proto 234");
            assert!(out.lines().any(|l| l.starts_with(&route)), "{unit}: no `{route}`:\n{out}");
        }
        for (key, value) in &iface.sysctls {
            has(&format!("sysctl -w net.ipv4.conf.{}.{}={value}", name.replace('.', "/"), key.name()));
        }
    }
}

#[test]
fn dry_run_guide_4_rail() {
    dry_run_does_what_the_comments_say("guide-4-rail.toml");
}

#[test]
fn dry_run_h100_8_rail() {
    dry_run_does_what_the_comments_say("h100-8-rail.toml");
}

#[test]
fn dry_run_subnet_per_rail() {
    dry_run_does_what_the_comments_say("subnet-per-rail.toml");
}

#[test]
fn dry_run_l3_31_per_rail() {
    dry_run_does_what_the_comments_say("l3-31-per-rail.toml");
}

#[test]
fn dry_run_ipoib_partitions() {
    dry_run_does_what_the_comments_say("ipoib-partitions.toml");
}

#[test]
fn dry_run_dual_stack() {
    dry_run_does_what_the_comments_say("dual-stack.toml");
}

#[test]
fn dry_run_conf_d() {
    dry_run_does_what_the_comments_say("conf.d/");
}

#[test]
fn every_example_quotes_real_commands_or_none() {
    // The quoted lines the dry-run tests check: the examples that explain
    // their routes quote at least the rule and a route of their first rail.
    for unit in ["guide-4-rail.toml", "subnet-per-rail.toml", "l3-31-per-rail.toml", "ipoib-partitions.toml"]
    {
        let quoted = quoted_commands(unit);
        assert!(quoted.iter().any(|l| l.starts_with("ip -4 rule add")), "{unit}: {quoted:?}");
        assert!(quoted.iter().any(|l| l.starts_with("ip -4 route add")), "{unit}: {quoted:?}");
    }
}
