//! Real-kernel tests of issue 10: `discover`, `nccl-env`, and RDMA in
//! `check` and `show`.
//!
//! This machine has no RDMA device, so each case reads a sysfs fixture tree
//! (`tests/fixtures/rdma/<case>/sysfs`, written by `make.py` from the
//! kernel's documented formats) through `--sysfs-root`, while the netdevs
//! it names exist as veths with real addresses in a private namespace (the
//! case's `netdevs` file), so addresses, routes and rules come from the
//! real kernel. The expected `discover`, `nccl-env` and `show` outputs are
//! reviewed files beside each tree; `ROCE_ROUTE_BLESS=1` rewrites them
//! (then review the diff).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use serde_json::Value;

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rdma").join(case)
}

/// A namespace holding a fixture's netdevs as veths (the other ends, `xN`,
/// have no address), and a temp dir for state and configs.
struct FixtureHost {
    ns: Netns,
    dir: TempDir,
    sysfs: PathBuf,
    case: String,
}

fn unique(what: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("rr-{what}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

impl FixtureHost {
    fn new(case: &str) -> FixtureHost {
        require_root();
        require_tools();
        let tag = unique("rdma");
        let host = FixtureHost {
            ns: Netns::create(tag.clone()),
            dir: TempDir::create(&tag),
            sysfs: fixture(case).join("sysfs"),
            case: case.to_string(),
        };
        host.ns.disable_dad();
        host.ns.reset_arp_sysctls();
        let netdevs = fs::read_to_string(fixture(case).join("netdevs")).expect("the case's netdevs file");
        for (k, line) in netdevs.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).enumerate() {
            let mut words = line.split_whitespace();
            let name = words.next().unwrap();
            host.ns.ip(&format!("link add {name} type veth peer name x{k}"));
            for addr in words {
                host.ns.ip(&format!("addr add {addr} dev {name} nodad"));
            }
            host.ns.ip(&format!("link set x{k} up"));
            host.ns.ip(&format!("link set {name} up"));
        }
        host
    }

    /// `roce-route --netns NS ARGS`, state in the temp dir.
    fn cmd(&self, args: &[&str]) -> Command {
        roce_route_command(self.ns.name(), &self.dir.path().join("state"), self.dir.path(), args)
    }

    fn rr(&self, args: &[&str]) -> Run {
        Run::of(self.cmd(args))
    }

    /// The same with `--sysfs-root` of the fixture after the command name.
    fn rr_sysfs(&self, command: &str, args: &[&str]) -> Run {
        let root = self.sysfs.to_string_lossy().into_owned();
        let mut all = vec![command, "--sysfs-root", root.as_str()];
        all.extend_from_slice(args);
        self.rr(&all)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// Applies `config` (exit 0), then `check --json` with the fixture's
    /// sysfs, expecting drift (exit 3): the report.
    fn apply_then_check(&self, config: &str) -> Value {
        self.rr(&["apply", config]).expect_code(EXIT_OK);
        json_doc(
            &self
                .rr(&["--json", "check", "--sysfs-root", &self.sysfs.to_string_lossy(), config])
                .expect_code(EXIT_DRIFT),
        )
    }

    /// Compares `actual` with the reviewed file `name` of the case.
    fn golden(&self, name: &str, actual: &str) {
        let path = fixture(&self.case).join(name);
        if std::env::var_os("ROCE_ROUTE_BLESS").is_some() {
            fs::write(&path, actual).unwrap();
            return;
        }
        let expected = fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (ROCE_ROUTE_BLESS=1 writes it; review it)", path.display()));
        assert!(
            expected == actual,
            "{} differs from the reviewed output\n--- expected ---\n{expected}\n--- actual ---\n{actual}",
            path.display()
        );
    }
}

/// Every case: discover prints the reviewed config; apply takes it as it
/// is (exit 0) and check then finds the host in sync, RDMA included;
/// nccl-env for that config and show after the apply print the reviewed
/// outputs. check reads the config's links only, asked by name, unless a
/// port is InfiniBand (`infiniband`): IPoIB netdevs are matched to ports
/// among every link of the namespace.
fn whole_case(case: &str, infiniband: bool) {
    let host = FixtureHost::new(case);
    let discovered = host.rr_sysfs("discover", &[]).expect_code(EXIT_OK).stdout();
    host.golden("discover.toml", &discovered);
    let config = host.write("discovered.toml", &discovered);
    host.rr(&["apply", &config]).expect_code(EXIT_OK);
    let mut cmd = host.cmd(&["check", "--sysfs-root", &host.sysfs.to_string_lossy(), &config]);
    cmd.env("ROCE_ROUTE_PROFILE", "1");
    let check = Run::of(cmd);
    assert_eq!(
        check.code(),
        Some(EXIT_OK),
        "check after applying the discovered config:\n{}",
        check.report()
    );
    let named = discovered.lines().filter(|l| ["[[interface]]", "[[arp_only]]"].contains(&l.trim())).count();
    let all = host.ns.ip("-o link show").lines().count();
    assert!(all > named, "links outside the config: {all} links, {named} in it");
    let read = profile_count(&check.stderr(), "links_read");
    assert_eq!(read, if infiniband { all } else { named } as u64, "links read by check:\n{}", check.report());
    // nccl-env reads the links as check does, and the addresses of the
    // [[interface]]s only (one dump each), not every link's.
    let mut cmd = host.cmd(&["nccl-env", "--sysfs-root", &host.sysfs.to_string_lossy(), &config]);
    cmd.env("ROCE_ROUTE_PROFILE", "1");
    let env = Run::of(cmd).expect_code(EXIT_OK);
    let read = profile_count(&env.stderr(), "links_read");
    assert_eq!(
        read,
        if infiniband { all } else { named } as u64,
        "links read by nccl-env:\n{}",
        env.report()
    );
    let rails: Vec<&str> = discovered
        .split("[[")
        .filter(|part| part.starts_with("interface]]"))
        .filter_map(|part| part.lines().find_map(|l| l.strip_prefix("name = ")))
        .map(|n| n.trim_matches('"'))
        .collect();
    let theirs: usize =
        rails.iter().map(|r| host.ns.ip(&format!("-o addr show dev {r}")).lines().count()).sum();
    let every = host.ns.ip("-o addr show").lines().count();
    assert!(every > theirs, "addresses outside the rails: {every} in all, {theirs} on {rails:?}");
    let addresses = profile_count(&env.stderr(), "addresses_read");
    assert_eq!(addresses, theirs as u64, "addresses read by nccl-env:\n{}", env.report());
    host.golden("nccl-env.sh", &env.stdout());
    let conf = host.rr_sysfs("nccl-env", &["--format", "nccl-conf", &config]).expect_code(EXIT_OK);
    host.golden("nccl.conf", &conf.stdout());
    // --json carries the warnings (stderr otherwise) and each rail's GID.
    let json = host.rr(&["--json", "nccl-env", "--sysfs-root", &host.sysfs.to_string_lossy(), &config]);
    host.golden("nccl-env.json", &json.expect_code(EXIT_OK).stdout().replace(&config, "CONFIG"));
    let show = host.rr_sysfs("show", &[]).expect_code(EXIT_OK).stdout();
    host.golden("show.txt", &show);
}

#[test]
fn ib_8hca_with_two_roce_storage_ports() {
    whole_case("ib-8hca", true);
}

#[test]
fn roce_8rail_dual_stack() {
    whole_case("roce-8rail", false);
}

#[test]
fn ipoib_pkey_children() {
    whole_case("ipoib-pkey", true);
}

#[test]
fn gid_index_moved_by_a_second_link_local() {
    whole_case("gid-moved", false);
}

#[test]
fn mlx5_1_beside_mlx5_10() {
    whole_case("mlx5-1-10", false);
}

#[test]
fn down_port_unmappable_device_and_management_nic() {
    whole_case("mixed", false);
}

/// The differences of `kind` in a `check --json` document.
fn differences(doc: &Value, kind: &str) -> Vec<Value> {
    let all = doc["differences"].as_array().unwrap_or_else(|| panic!("no differences in {doc:#}"));
    all.iter().filter(|d| d["kind"] == kind).cloned().collect()
}

/// A port that is not ACTIVE and an address without its RoCE v2 GID are
/// drift (exit 3), each naming device, port and address; the same host
/// read through a sysfs without RDMA devices has no such difference, so it
/// is the GID table that is checked, not the routing.
#[test]
fn check_reports_a_down_port_and_an_address_without_its_gid() {
    let host = FixtureHost::new("mixed");
    host.ns.ip("addr add 198.51.100.99/24 dev ens2f0np0 nodad");
    let config = host.write(
        "c.toml",
        "[[interface]]\nname = \"ens2f0np0\"\naddresses = [\"198.51.100.70/24\", \"198.51.100.99/24\"]\n\n\
         [[interface]]\nname = \"ens2f1np1\"\naddresses = [\"198.51.100.71/24\"]\n\n\
         [[arp_only]]\nname = \"eno1\"\n",
    );
    let doc = host.apply_then_check(&config);
    let port = differences(&doc, "rdma_port");
    assert_eq!(port.len(), 1, "{doc:#}");
    let text = port[0]["description"].as_str().unwrap();
    assert!(text.starts_with("rocep65s0f1 port 1 of rail ens2f1np1 is DOWN (Disabled)"), "{text}");
    let gid = differences(&doc, "rdma_gid");
    assert_eq!(gid.len(), 1, "only the address the GID table lacks: {doc:#}");
    let text = gid[0]["description"].as_str().unwrap();
    assert!(text.starts_with("198.51.100.99 on ens2f0np0 has no GID at all on rocep65s0f0 port 1"), "{text}");
    assert_eq!(doc["differences"].as_array().unwrap().len(), 2, "nothing else differs: {doc:#}");
    // nccl-env warns that NCCL would skip the port silently.
    let root = host.sysfs.to_string_lossy().into_owned();
    let doc =
        json_doc(&host.rr(&["--json", "nccl-env", "--sysfs-root", &root, &config]).expect_code(EXIT_OK));
    let warned = doc["warnings"].as_array().unwrap().iter().filter_map(|w| w.as_str()).any(|w| {
        w == "rocep65s0f1 port 1 (rail ens2f1np1) is DOWN (Disabled): NCCL skips ports that are not ACTIVE, silently"
    });
    assert!(warned, "{doc:#}");
    // The human report says the same, with what to do.
    let human = host.rr_sysfs("check", &[&config]).expect_code(EXIT_DRIFT).stdout();
    assert!(human.contains("fix: bring the port up"), "{human}");
    // A sysfs copy without RDMA devices: the routing is in sync.
    let plain = TempDir::create(&unique("plain-sysfs"));
    fs::create_dir_all(plain.path().join("class/net")).unwrap();
    let run = host.rr(&["check", "--sysfs-root", &plain.path().to_string_lossy(), &config]);
    assert_eq!(run.code(), Some(EXIT_OK), "{}", run.report());
}

/// An address moved to another rail keeps its GID on the old port until
/// the RDMA core re-registers it: check names it on the new rail.
#[test]
fn check_reports_an_address_whose_gid_belongs_to_another_port() {
    let host = FixtureHost::new("gid-moved");
    host.ns.ip("addr del 198.51.100.141/24 dev ens3f1np1");
    host.ns.ip("addr add 198.51.100.141/24 dev ens3f0np0 nodad");
    let config = host.write(
        "c.toml",
        "[[interface]]\nname = \"ens3f0np0\"\naddresses = [\"198.51.100.40/24\", \"198.51.100.141/24\"]\n\n\
         [[interface]]\nname = \"ens3f1np1\"\naddresses = [\"198.51.100.41/24\"]\n",
    );
    let doc = host.apply_then_check(&config);
    let gid = differences(&doc, "rdma_gid");
    assert_eq!(gid.len(), 1, "{doc:#}");
    let text = gid[0]["description"].as_str().unwrap();
    assert!(
        text.starts_with("198.51.100.141 on ens3f0np0 has no GID at all on rocep193s0f0 port 1"),
        "{text}"
    );
    assert!(
        text.ends_with("; its RoCE v2 GID is on rocep193s0f1 port 1 at index 7 (netdev ens3f1np1)"),
        "names where RDMA resolves it instead: {text}"
    );
    let fix = gid[0]["fix"].as_str().unwrap();
    assert!(
        fix.contains(&format!(
            "`{}`",
            in_netns(host.ns.name(), "ip addr del 198.51.100.141/24 dev ens3f1np1")
        )),
        "{fix}"
    );
}

/// show --json: per rail the device, port, state, rate and the GID index
/// of each address, as the fixture's table has them (5 and 7 on the port
/// whose second link-local address pushed IPv4 up).
#[test]
fn show_json_gives_each_rail_its_port_and_gid_indices() {
    let host = FixtureHost::new("gid-moved");
    let discovered = host.rr_sysfs("discover", &[]).expect_code(EXIT_OK).stdout();
    let config = host.write("d.toml", &discovered);
    host.rr(&["apply", &config]).expect_code(EXIT_OK);
    let doc = json_doc(
        &host.rr(&["--json", "show", "--sysfs-root", &host.sysfs.to_string_lossy()]).expect_code(EXIT_OK),
    );
    let rails = doc["interfaces"].as_array().unwrap();
    let f1 = rails.iter().find(|r| r["name"] == "ens3f1np1").unwrap_or_else(|| panic!("{doc:#}"));
    let rdma = &f1["rdma"];
    assert_eq!(rdma["device"], "rocep193s0f1");
    assert_eq!(rdma["port"], 1);
    assert_eq!(rdma["link_layer"], "Ethernet");
    assert_eq!(rdma["state"], "ACTIVE");
    assert_eq!(rdma["rate"], "200 Gb/sec (4X HDR)");
    assert_eq!(
        rdma["gids"],
        serde_json::json!([{"address": "198.51.100.41", "index": 5}, {"address": "198.51.100.141", "index": 7}])
    );
    let f0 = rails.iter().find(|r| r["name"] == "ens3f0np0").unwrap();
    assert_eq!(f0["rdma"]["gids"], serde_json::json!([{"address": "198.51.100.40", "index": 3}]));
    // Without RDMA devices there is nothing to show for it.
    let plain = TempDir::create(&unique("plain-sysfs"));
    fs::create_dir_all(plain.path().join("class/net")).unwrap();
    let doc = json_doc(
        &host.rr(&["--json", "show", "--sysfs-root", &plain.path().to_string_lossy()]).expect_code(EXIT_OK),
    );
    let interfaces = doc["interfaces"].as_array().unwrap();
    assert_eq!(interfaces.len(), 2, "both rails are shown: {doc:#}");
    assert!(interfaces.iter().all(|i| i["rdma"].is_null()), "{doc:#}");
}

/// nccl-env warns where NCCL would go another way than the config: a
/// device with two IPv4 RoCE v2 GIDs, a rail without RDMA device; with no
/// CONFIG it takes the latest apply's.
#[test]
fn nccl_env_warns_and_follows_the_latest_apply() {
    let host = FixtureHost::new("gid-moved");
    host.ns.ip("link add eth9 type veth peer name x99");
    host.ns.ip("addr add 203.0.113.9/24 dev eth9");
    host.ns.ip("link set x99 up");
    host.ns.ip("link set eth9 up");
    let config = host.write(
        "c.toml",
        "[[interface]]\nname = \"ens3f0np0\"\n\n[[interface]]\nname = \"ens3f1np1\"\naddresses = [\"198.51.100.41\"]\n\n\
         [[interface]]\nname = \"eth9\"\n",
    );
    let doc = json_doc(
        &host
            .rr(&["--json", "nccl-env", "--sysfs-root", &host.sysfs.to_string_lossy(), &config])
            .expect_code(EXIT_OK),
    );
    let warnings: Vec<&str> =
        doc["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert!(
        warnings.iter().any(|w| w.starts_with(
            "rocep193s0f1 port 1 has 2 IPv4 RoCE v2 GIDs (198.51.100.41 at 5, 198.51.100.141 at 7): the configured 198.51.100.41 has the lowest index, so NCCL takes it"
        )),
        "{warnings:#?}"
    );
    assert!(warnings.iter().any(|w| w.starts_with("rail eth9 has no RDMA device")), "{warnings:#?}");
    let vars: Vec<(String, String)> = doc["variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap().to_string(), v["value"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(vars[0], ("NCCL_IB_HCA".into(), "=rocep193s0f0:1,rocep193s0f1:1".into()));
    assert_eq!(vars[1], ("NCCL_SOCKET_IFNAME".into(), "=ens3f0np0,ens3f1np1,eth9".into()));
    assert_eq!(vars[3], ("NCCL_IB_ADDR_RANGE".into(), "198.51.100.0/24".into()), "{vars:?}");
    // Nothing applied yet: no config to take.
    let run = host.rr_sysfs("nccl-env", &[]).expect_code(EXIT_INVALID);
    assert!(run.stderr().contains("no apply is recorded in this network namespace"), "{}", run.report());
    // After an apply, the recorded config.
    host.rr(&["apply", &config]).expect_code(EXIT_OK);
    let out = host.rr_sysfs("nccl-env", &[]).expect_code(EXIT_OK).stdout();
    assert!(out.contains("export NCCL_SOCKET_IFNAME='=ens3f0np0,ens3f1np1,eth9'\n"), "{out}");
    // The exported lines work in a shell, with the exact-match `=`.
    let env = host.ns.sh(&format!("{out}\necho \"$NCCL_IB_HCA\""));
    // zsh (installed by .ci/run) expands a leading `=` unless quoted.
    let zsh = host.ns.exec("zsh", &["-c", &format!("{out}\necho \"$NCCL_IB_HCA\"")]);
    assert_eq!(zsh, "=rocep193s0f0:1,rocep193s0f1:1", "zsh's EQUALS must not expand it");
    assert_eq!(env, "=rocep193s0f0:1,rocep193s0f1:1");
}

/// `discover --interfaces 'rail*'` on the bridged testbed gives a config
/// that apply takes and that leaves the host exactly as the hand-written
/// one does (same dump of rules, routes and sysctls), with the subnet's
/// gateway on every rail because the host has one.
#[test]
fn discover_by_name_round_trips_on_the_testbed() {
    let tb = Testbed::builder().rails(4).ipv6(true).build();
    tb.ip_host(&format!("route add default via {GATEWAY_V4} dev rail0"));
    tb.ip_host(&format!("-6 route add default via {GATEWAY_V6} dev rail0"));
    let rr = |args: &[&str]| Run::of(tb.roce_route_in(&tb.state_base(), args));
    let discovered = rr(&["discover", "--interfaces", "rail*"]).expect_code(EXIT_OK).stdout();
    let cfg = discovered.parse::<toml::Table>().unwrap_or_else(|e| panic!("{e}\n{discovered}"));
    let rails = cfg["interface"].as_array().unwrap();
    assert_eq!(rails.len(), 4, "{discovered}");
    for (k, r) in rails.iter().enumerate() {
        assert_eq!(r["name"].as_str(), Some(format!("rail{k}").as_str()));
        assert_eq!(
            r["gateway"],
            toml::Value::Array(vec![GATEWAY_V4.into(), GATEWAY_V6.into()]),
            "{discovered}"
        );
    }
    let before = tb.dump();
    let path = tb.write_config(&discovered);
    rr(&["apply", &path.to_string_lossy()]).expect_code(EXIT_OK);
    rr(&["check", &path.to_string_lossy()]).expect_code(EXIT_OK);
    for k in 0..4 {
        assert_eq!(tb.reply_leaves_via(k), format!("rail{k}"), "the reply to rail{k}'s address");
    }
    let by_discover = tb.dump();
    assert_ne!(by_discover, before, "apply changed nothing?");
    rr(&["remove"]).expect_code(EXIT_OK);
    let hand = tb.write_config(&tb.config_toml_with_gateway());
    rr(&["apply", &hand.to_string_lossy()]).expect_code(EXIT_OK);
    assert_eq!(tb.dump(), by_discover, "the discovered config does what the hand-written one does");
}

/// What is wrong with a sysfs copy, how to make it so, what the error says.
type Damage<'a> = (&'a str, &'a dyn Fn(&Path), &'a str);

/// A copy of a case's sysfs tree in a temp dir, to damage.
fn copy_tree(case: &str, into: &Path) -> PathBuf {
    let to = into.join("sysfs");
    run("cp", &["-r", &fixture(case).join("sysfs").to_string_lossy(), &to.to_string_lossy()]);
    to
}

/// Every command that reads RDMA, on the sysfs copy `root` damaged as
/// `what` says: discover and nccl-env fail naming the file (`says`) and the
/// copy; check reports it as drift; show and apply warn and go on.
fn each_command_names(host: &FixtureHost, config: &str, root: &str, what: &str, says: &str) {
    // discover and nccl-env would print something wrong: they fail.
    for args in [vec!["discover", "--sysfs-root", root], vec!["nccl-env", "--sysfs-root", root, config]] {
        let run = host.rr(&args).context(what).expect_code(EXIT_FAILED);
        assert!(run.stderr().contains(says), "{what}: {}", run.report());
        assert!(run.stderr().contains(root), "{what}: the path is named: {}", run.report());
    }
    // check still checks the routing and reports the device as drift;
    // show shows the rest and warns.
    let doc = json_doc(
        &host.rr(&["--json", "check", "--sysfs-root", root, config]).context(what).expect_code(EXIT_DRIFT),
    );
    let unreadable = differences(&doc, "rdma_unreadable");
    assert_eq!(unreadable.len(), 1, "{what}: {doc:#}");
    let text = unreadable[0]["description"].as_str().unwrap();
    assert!(text.contains(says) && text.contains(root), "{what}: {text}");
    let run = host.rr(&["show", "--sysfs-root", root]).context(what).expect_code(EXIT_OK);
    assert!(run.stderr().contains(says) && run.stderr().contains(root), "{what}: {}", run.report());
    // apply (a dry run here) warns and goes on.
    let run =
        host.rr(&["apply", "--dry-run", "--sysfs-root", root, config]).context(what).expect_code(EXIT_OK);
    assert!(run.stderr().contains(says), "{what}: {}", run.report());
}

/// Every command that reads RDMA answers bad input with a message naming
/// the path and the documented exit code (2: the argument is wrong; 1:
/// the host, or its sysfs copy, does not have what is needed), never a
/// panic.
#[test]
fn bad_sysfs_roots_and_contents_are_named() {
    let host = FixtureHost::new("gid-moved");
    let config = host.write("c.toml", "[[interface]]\nname = \"ens3f0np0\"\n");
    let tmp = TempDir::create(&unique("bad-sysfs"));
    let file = host.write("not-a-dir", "x");
    fs::create_dir_all(tmp.path().join("empty")).unwrap();
    let empty = tmp.path().join("empty").to_string_lossy().into_owned();
    for (root, says) in [
        ("/nonexistent/sysfs", "--sysfs-root /nonexistent/sysfs: no such directory"),
        (file.as_str(), "not a directory"),
        (empty.as_str(), "not a copy of sysfs (it has neither class/net nor class/infiniband)"),
    ] {
        for args in [
            vec!["discover", "--sysfs-root", root],
            vec!["nccl-env", "--sysfs-root", root, config.as_str()],
            vec!["check", "--sysfs-root", root, config.as_str()],
            vec!["show", "--sysfs-root", root],
        ] {
            let run = host.rr(&args).expect_code(EXIT_INVALID);
            assert!(run.stderr().contains(says), "{}", run.report());
        }
    }
    // Damaged contents: each names the file.
    let damage: [Damage; 4] = [
        (
            "a GID that is not 8 groups of 4 hex digits",
            &|s: &Path| {
                fs::write(
                    s.join("class/infiniband/rocep193s0f1/ports/1/gids/5"),
                    "0000:0000:0000:0000:0000:ffff:c633:629\n",
                )
                .unwrap()
            },
            "class/infiniband/rocep193s0f1/ports/1/gids/5: \"0000:0000:0000:0000:0000:ffff:c633:629\" is not a GID",
        ),
        (
            "an unknown port state",
            &|s: &Path| {
                fs::write(s.join("class/infiniband/rocep193s0f0/ports/1/state"), "4: SLEEPY\n").unwrap()
            },
            "class/infiniband/rocep193s0f0/ports/1/state: \"4: SLEEPY\" is not \"N: NAME\"",
        ),
        (
            "an unknown GID type",
            &|s: &Path| {
                fs::write(s.join("class/infiniband/rocep193s0f0/ports/1/gid_attrs/types/3"), "RoCE v3\n")
                    .unwrap()
            },
            "gid_attrs/types/3: \"RoCE v3\" is neither",
        ),
        (
            "an unreadable file",
            &|s: &Path| {
                let rate = s.join("class/infiniband/rocep193s0f0/ports/1/rate");
                fs::remove_file(&rate).unwrap();
                fs::create_dir(&rate).unwrap();
            },
            "cannot read ",
        ),
    ];
    for (k, (what, damage, says)) in damage.iter().enumerate() {
        let dir = tmp.path().join(format!("d{k}"));
        fs::create_dir_all(&dir).unwrap();
        let root = copy_tree("gid-moved", &dir);
        damage(&root);
        each_command_names(&host, &config, &root.to_string_lossy(), what, says);
    }
    // A netdev's files are read only to match it to an InfiniBand port
    // (by hardware address): damaged on an IPoIB host, each command names
    // the file; on a RoCE host they are not read at all.
    let unreadable_address = |root: &Path, netdev: &str| {
        let address = root.join(format!("class/net/{netdev}/address"));
        fs::remove_file(&address).unwrap();
        fs::create_dir(&address).unwrap();
    };
    let ib = FixtureHost::new("ipoib-pkey");
    let ib_config = ib.write("c.toml", "[[interface]]\nname = \"ib0.8001\"\n");
    fs::create_dir_all(tmp.path().join("ib")).unwrap();
    let root = copy_tree("ipoib-pkey", &tmp.path().join("ib"));
    unreadable_address(&root, "ib1");
    let what = "an unreadable netdev file (class/net)";
    each_command_names(&ib, &ib_config, &root.to_string_lossy(), what, "class/net/ib1/address");
    fs::create_dir_all(tmp.path().join("roce")).unwrap();
    let root = copy_tree("gid-moved", &tmp.path().join("roce"));
    unreadable_address(&root, "ens3f1np1");
    host.rr(&["discover", "--sysfs-root", &root.to_string_lossy()]).expect_code(EXIT_OK);
    // No RDMA device at all: exit 1, pointing at --interfaces.
    let no_rdma = tmp.path().join("no-rdma");
    fs::create_dir_all(no_rdma.join("class/net")).unwrap();
    let run = host.rr(&["discover", "--sysfs-root", &no_rdma.to_string_lossy()]).expect_code(EXIT_FAILED);
    assert!(
        run.stderr().contains("no RDMA device under") && run.stderr().contains("--interfaces GLOB"),
        "{}",
        run.report()
    );
    let run =
        host.rr(&["nccl-env", "--sysfs-root", &no_rdma.to_string_lossy(), &config]).expect_code(EXIT_FAILED);
    assert!(
        run.stderr().contains("none of the rails of the config has an RDMA device (ens3f0np0)"),
        "{}",
        run.report()
    );
    // Patterns: one matching nothing, one that is not a pattern.
    let run = host.rr_sysfs("discover", &["--interfaces", "ens3*", "nothing*"]).expect_code(EXIT_FAILED);
    assert!(
        run.stderr().contains("--interfaces \"nothing*\" matches no netdev in this network namespace"),
        "{}",
        run.report()
    );
    let run = host.rr_sysfs("discover", &["--interfaces", "ens[3"]).expect_code(EXIT_INVALID);
    assert!(run.stderr().contains("`[` without its `]`"), "{}", run.report());
    // --json carries the kind.
    let doc = json_doc(
        &host
            .rr(&["--json", "discover", "--sysfs-root", &no_rdma.to_string_lossy()])
            .expect_code(EXIT_FAILED),
    );
    assert_eq!(doc["error"]["kind"], "not_found");
}

#[test]
fn rails_sharing_a_port_and_an_ipv6_only_rail() {
    whole_case("shared-port", true);
}

/// apply cannot change a port or the GID table, but says so (a warning,
/// as with the other risks), dry run included; a bad --sysfs-root is
/// refused before anything changes.
#[test]
fn apply_warns_about_rdma_it_cannot_change() {
    let host = FixtureHost::new("mixed");
    let config = host.write(
        "c.toml",
        "[[interface]]\nname = \"ens2f0np0\"\n\n[[interface]]\nname = \"ens2f1np1\"\n\n[[arp_only]]\nname = \"eno1\"\n",
    );
    let rules = host.ns.ip("rule show");
    let run = host.rr(&["apply", "--sysfs-root", "/nonexistent/sysfs", &config]).expect_code(EXIT_INVALID);
    assert!(run.stderr().contains("--sysfs-root /nonexistent/sysfs: no such directory"), "{}", run.report());
    assert_eq!(host.ns.ip("rule show"), rules, "a refused apply changed the rules");
    let root = host.sysfs.to_string_lossy().into_owned();
    for args in [
        vec!["--json", "apply", "--dry-run", "--sysfs-root", &root, &config],
        vec!["--json", "apply", "--sysfs-root", &root, &config],
    ] {
        let doc = json_doc(&host.rr(&args).expect_code(EXIT_OK));
        let warnings: Vec<&str> =
            doc["warnings"].as_array().unwrap().iter().filter_map(|w| w.as_str()).collect();
        let down: Vec<&&str> = warnings.iter().filter(|w| w.contains("port 1 of rail")).collect();
        assert_eq!(down.len(), 1, "{args:?}: {warnings:#?}");
        assert!(
            down[0].starts_with("rocep65s0f1 port 1 of rail ens2f1np1 is DOWN (Disabled)"),
            "{}",
            down[0]
        );
    }
    assert_ne!(host.ns.ip("rule show"), rules, "the apply itself went ahead");
}

/// `check --format prometheus` on a RoCE host: each rail's port state and
/// the GID index NCCL would use, the same index `nccl-env --json` gives.
#[test]
fn check_metrics_carry_the_ports_and_nccls_gid_indexes() {
    let host = FixtureHost::new("roce-8rail");
    let discovered = host.rr_sysfs("discover", &[]).expect_code(EXIT_OK).stdout();
    let config = host.write("discovered.toml", &discovered);
    host.rr(&["apply", &config]).expect_code(EXIT_OK);
    let text = host.rr_sysfs("check", &["--format", "prometheus", &config]).expect_code(EXIT_OK).stdout();
    let (ok, said) = promtool(&text);
    assert!(ok && said.trim().is_empty(), "promtool says:\n{said}\non:\n{text}");
    let env =
        json_doc(&host.rr(&["--json", "nccl-env", "--sysfs-root", &host.sysfs.to_string_lossy(), &config]));
    let rails = env["rails"].as_array().unwrap();
    assert_eq!(rails.len(), 8, "{env:#}");
    for rail in rails {
        let name = rail["name"].as_str().unwrap();
        let (device, port) = rail["hca"].as_str().unwrap().split_once(':').unwrap();
        let labels = format!("{{rail=\"{name}\",device=\"{device}\",port=\"{port}\"}}");
        assert!(text.contains(&format!("\nroce_route_rdma_port_state_id{labels} 4\n")), "{labels}\n{text}");
        assert!(text.contains(&format!("\nroce_route_rdma_port_physical_state_id{labels} 5\n")), "{text}");
        let gid = rail["gid_index"].as_u64().expect("a RoCE rail's GID index");
        assert!(text.contains(&format!("\nroce_route_nccl_gid_index{labels} {gid}\n")), "{labels}\n{text}");
    }
}

/// The `roce_route_rdma_*` and `roce_route_nccl_*` lines of a metrics text.
fn rdma_families(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("roce_route_rdma_") || l.starts_with("roce_route_nccl_"))
        .map(str::to_string)
        .collect()
}

/// The 8-rail RoCE fixture host, applied with its discovered config, and
/// `watch --metrics FILE` running on a copy of its sysfs tree with the
/// options `opts`.
struct MetricsWatch {
    host: FixtureHost,
    root: PathBuf,
    root_arg: String,
    config: String,
    file: PathBuf,
    err: PathBuf,
    _watch: Background,
}

impl MetricsWatch {
    fn start(opts: &[&str]) -> MetricsWatch {
        let host = FixtureHost::new("roce-8rail");
        let root = copy_tree("roce-8rail", host.dir.path());
        let root_arg = root.to_string_lossy().into_owned();
        let config =
            host.write("discovered.toml", &host.rr_sysfs("discover", &[]).expect_code(EXIT_OK).stdout());
        host.rr(&["apply", &config]).expect_code(EXIT_OK);
        let file = host.dir.path().join("roce-route.prom");
        let mut args = opts.to_vec();
        args.extend(["--sysfs-root", &root_arg, "--metrics"]);
        let mut cmd = host.cmd(&args);
        cmd.arg(&file);
        let (out, err) = (host.dir.path().join("watch.out"), host.dir.path().join("watch.err"));
        let watch = Background::spawn_logged(cmd, "roce-route watch", &out, &err);
        MetricsWatch { host, root, root_arg, config, file, err, _watch: watch }
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.file).unwrap_or_default()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// mlx5_0's port (the first rail's) goes down in the copied tree:
    /// state 1 (DOWN), physical state 3 (Disabled).
    fn mlx5_0_down(&self) {
        let port = self.root.join("class/infiniband/mlx5_0/ports/1");
        fs::write(port.join("state"), "1: DOWN\n").unwrap();
        fs::write(port.join("phys_state"), "3: Disabled\n").unwrap();
    }
}

/// Whether `text` says mlx5_0's port state is `id`.
fn mlx5_0_state_is(text: &str, id: u32) -> bool {
    text.lines().any(|l| {
        l.starts_with("roce_route_rdma_port_state_id{")
            && l.contains("\"mlx5_0\"")
            && l.ends_with(&format!(" {id}"))
    })
}

/// `watch --metrics` with `--sysfs-root`: its file carries the RDMA
/// families check prints for the same host, and reads them again after
/// each pass: a port that goes down in the (copied) tree shows as down
/// after the next resync. (Red if watch read /sys instead of its
/// --sysfs-root, or read the ports once.)
#[test]
fn watch_metrics_follow_the_rdma_ports() {
    let w = MetricsWatch::start(&["watch", "--resync", "1"]);
    let check = || w.host.rr(&["check", "--sysfs-root", &w.root_arg, "--format", "prometheus", &w.config]);
    let expected = rdma_families(&check().expect_code(EXIT_OK).stdout());
    assert_eq!(expected.iter().filter(|l| l.starts_with("roce_route_nccl_gid_index{")).count(), 8);
    let read = || rdma_families(&w.text());
    poll_until("watch's metrics file with the RDMA families", Duration::from_secs(10), || read() == expected);
    w.mlx5_0_down();
    poll_until("the down port in watch's metrics", Duration::from_secs(10), || mlx5_0_state_is(&w.text(), 1));
    assert_eq!(
        read(),
        rdma_families(&check().stdout()),
        "watch and check differ on the down port\n{}",
        w.log()
    );
}

/// The driver changes a port's state after the kernel has sent the link
/// message (rxe in its NETDEV_DOWN notifier, which runs after
/// `rtmsg_ifinfo`; hardware when its firmware tells): the pass that the
/// link notification wakes reads the old state. watch reads the ports
/// again shortly after (`PORTS_SETTLE`), with no resync to hide it. Found
/// on real rxe in the VM (scenario `devices`: watch's file kept ACTIVE for
/// a port that was DOWN). Red without the second read: the file keeps 4.
#[test]
fn watch_metrics_read_a_port_again_after_its_link_went_down() {
    let w = MetricsWatch::start(&["-v", "watch", "--resync", "0"]);
    poll_until("watch's metrics with mlx5_0 ACTIVE", Duration::from_secs(10), || {
        mlx5_0_state_is(&w.text(), 4)
    });
    w.host.ns.ip("link set ens1f0np0 down");
    // The driver's part, later than the link message.
    std::thread::sleep(Duration::from_millis(300));
    w.mlx5_0_down();
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while !mlx5_0_state_is(&w.text(), 1) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        mlx5_0_state_is(&w.text(), 1),
        "mlx5_0 is not DOWN in watch's metrics 5 s after its link went down\n{}",
        w.log()
    );
}
