//! Network managers known to delete policy rules and routes they did not
//! make. `check` warns about them: a host that is right now can be wrong
//! after the next `networkctl reload` or NetworkManager reconnect.

use std::fs;
use std::path::Path;

/// What is running and how systemd-networkd is configured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Environment {
    /// Process names (/proc/PID/comm).
    pub processes: Vec<String>,
    /// networkd.conf and its drop-ins, concatenated in reading order (read
    /// by `scan` only when systemd-networkd runs).
    pub networkd_conf: String,
}

/// The warnings for an environment. Pure.
pub fn warnings(env: &Environment) -> Vec<String> {
    let mut out = Vec::new();
    let running = |name: &str| env.processes.iter().any(|p| p == name);
    if running("systemd-network") {
        let on: Vec<&str> = ["ManageForeignRoutingPolicyRules", "ManageForeignRoutes"]
            .into_iter()
            .filter(|key| setting_is_on(&env.networkd_conf, key))
            .collect();
        if !on.is_empty() {
            out.push(format!(
                "systemd-networkd is running with {} (the default): it deletes the rules and routes it did \
                 not make when it starts or reconfigures a link, roce-route's too; install \
                 dist/systemd/networkd.conf.d/90-roce-route.conf as /etc/systemd/networkd.conf.d/ (it sets \
                 both to no) and `networkctl reload`",
                on.iter().map(|k| format!("{k}=yes")).collect::<Vec<_>>().join(" and ")
            ));
        }
    }
    if running("NetworkManager") {
        out.push(
            "NetworkManager is running: on a reconnect of an interface it manages, the kernel drops that \
             interface's routes; re-run roce-route from a dispatcher script (or mark the RDMA interfaces unmanaged)"
                .to_string(),
        );
    }
    out
}

/// Agents that may undo what roce-route makes, among the running
/// processes: network managers and the routing parts of Kubernetes
/// networking. For `watch` to name when its heals are undone over and
/// over. Pure.
pub fn suspects(env: &Environment) -> Vec<String> {
    let running = |name: &str| env.processes.iter().any(|p| p == name);
    let mut out = Vec::new();
    if running("systemd-network") {
        let foreign = ["ManageForeignRoutingPolicyRules", "ManageForeignRoutes"]
            .into_iter()
            .any(|key| setting_is_on(&env.networkd_conf, key));
        out.push(if foreign {
            "systemd-networkd (ManageForeignRoutingPolicyRules/ManageForeignRoutes on: it deletes rules and \
             routes it did not make)"
                .to_string()
        } else {
            "systemd-networkd".to_string()
        });
    }
    // /proc/PID/comm is cut at 15 characters.
    for (comm, what) in [
        ("NetworkManager", "NetworkManager"),
        ("wickedd", "wicked"),
        ("cilium-agent", "Cilium (cilium-agent)"),
        ("calico-node", "Calico (calico-node)"),
        ("bird", "BIRD (a routing daemon, e.g. Calico's)"),
        ("kube-router", "kube-router"),
        ("sriov-network-c", "the SR-IOV network config daemon"),
        ("keepalived", "keepalived"),
    ] {
        if running(comm) {
            out.push(what.to_string());
        }
    }
    out
}

/// The last `KEY=` of the concatenated configuration wins; the default
/// is yes (both settings roce-route cares about default to yes).
fn setting_is_on(conf: &str, key: &str) -> bool {
    let mut value = true;
    for line in conf.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix(key).and_then(|rest| rest.trim_start().strip_prefix('=')) {
            value = !matches!(v.trim().to_ascii_lowercase().as_str(), "no" | "false" | "0" | "off");
        }
    }
    value
}

/// Reads the environment of this machine.
pub fn scan() -> Environment {
    let _p = crate::profile::phase("process scan");
    let kernel = kernel_threads();
    let mut processes = Vec::new();
    let mut path = String::with_capacity(32);
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        if pid.parse().is_ok_and(|p: u32| kernel.binary_search(&p).is_ok()) {
            continue;
        }
        path.clear();
        path.push_str("/proc/");
        path.push_str(pid);
        path.push_str("/comm");
        if let Some(comm) = comm(&path) {
            processes.push(comm);
        }
    }
    // Read only for a networkd that runs: nothing else looks at it.
    let networkd_conf = if processes.iter().any(|p| p == "systemd-network") {
        networkd_conf(Path::new("/"))
    } else {
        String::new()
    };
    Environment { processes, networkd_conf }
}

/// The kernel's threads, which no network manager is: kthreadd (PID 2 of
/// the host's PID namespace) and its children, sorted. Most PIDs of a node
/// are kernel threads (several per CPU), and each costs the scan three
/// system calls: 61 of 70 here, thousands on a large GPU node.
///
/// Empty, so that every process is read, unless PID 2 is the kernel's
/// (PF_KTHREAD in /proc/2/stat, which no process can set: in a container's
/// PID namespace PID 2 is an ordinary process, and its children are not to
/// be skipped), or without /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN).
/// That list may miss a thread made or gone while it is read: the thread is
/// then read like a process, never the other way round.
fn kernel_threads() -> Vec<u32> {
    let is_kthreadd = proc_text("/proc/2/stat").is_some_and(|stat| is_kernel_thread(&stat));
    let mut pids: Vec<u32> = if is_kthreadd {
        proc_text("/proc/2/task/2/children")
            .unwrap_or_default()
            .split_ascii_whitespace()
            .filter_map(|p| p.parse().ok())
            .chain([2])
            .collect()
    } else {
        Vec::new()
    };
    pids.sort_unstable();
    pids
}

/// A /proc file's text, read into a page from the start. /proc files say
/// their size is 0, so `fs::read_to_string` asked for it (statx) and then
/// read 32, 32, 64, 128... bytes at a time: six system calls for
/// /proc/2/stat, where this makes two reads (the text, then its end).
fn proc_text(path: &str) -> Option<String> {
    use std::io::Read;
    let mut text = String::with_capacity(4096);
    // `take` reads without asking for the size first.
    fs::File::open(path).ok()?.take(u64::MAX).read_to_string(&mut text).ok()?;
    Some(text)
}

/// PF_KTHREAD, in the flags of a task's /proc/PID/stat.
const PF_KTHREAD: u64 = 0x0020_0000;

/// Whether a /proc/PID/stat line is a kernel thread's: its flags (the 9th
/// field; the name, the 2nd, is in parentheses and may hold spaces and
/// parentheses of its own) carry PF_KTHREAD. Pure.
fn is_kernel_thread(stat: &str) -> bool {
    let Some((_, after_name)) = stat.rsplit_once(')') else {
        return false;
    };
    // state, ppid, pgrp, session, tty_nr, tpgid, flags
    after_name
        .split_ascii_whitespace()
        .nth(6)
        .and_then(|f| f.parse::<u64>().ok())
        .is_some_and(|f| f & PF_KTHREAD != 0)
}

/// A process's name from its /proc/PID/comm (at most 15 bytes and a
/// newline): one open, one read, one close. `fs::read_to_string` also
/// asks for the file's size first, a fourth system call for each of the
/// hundreds of processes of a busy node.
fn comm(path: &str) -> Option<String> {
    use std::io::Read;
    let mut buf = [0u8; 64];
    let n = fs::File::open(path).ok()?.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).trim().to_string())
}

/// networkd.conf as systemd reads it under `root`: the main file (/etc,
/// else the vendor one), then the drop-ins of /etc, /run, /usr/local/lib
/// and /usr/lib `systemd/networkd.conf.d/*.conf` in file-name order, a
/// name in an earlier directory hiding the same name in a later one.
pub fn networkd_conf(root: &Path) -> String {
    let at = |p: &str| root.join(p.trim_start_matches('/'));
    let main = ["/etc/systemd/networkd.conf", "/usr/lib/systemd/networkd.conf"]
        .iter()
        .find_map(|p| fs::read_to_string(at(p)).ok())
        .unwrap_or_default();
    let mut dropins: std::collections::BTreeMap<std::ffi::OsString, std::path::PathBuf> = Default::default();
    for dir in [
        "/usr/lib/systemd/networkd.conf.d",
        "/usr/local/lib/systemd/networkd.conf.d",
        "/run/systemd/networkd.conf.d",
        "/etc/systemd/networkd.conf.d",
    ] {
        for entry in fs::read_dir(at(dir)).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|x| x == "conf") {
                // Later (higher-priority) directories replace the same name.
                dropins.insert(entry.file_name(), path);
            }
        }
    }
    let mut conf = main;
    for path in dropins.values() {
        conf.push('\n');
        conf.push_str(&fs::read_to_string(path).unwrap_or_default());
    }
    conf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(procs: &[&str], conf: &str) -> Environment {
        Environment { processes: procs.iter().map(|s| s.to_string()).collect(), networkd_conf: conf.into() }
    }

    #[test]
    fn suspects_name_the_agents_that_undo_routing() {
        assert!(suspects(&env(&["sshd", "bash"], "")).is_empty());
        let s = suspects(&env(&["systemd-network", "calico-node"], ""));
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].contains("ManageForeignRoutingPolicyRules"), "on by default: {s:?}");
        assert!(s[1].contains("Calico"));
        let off = "[Network]\nManageForeignRoutingPolicyRules=no\nManageForeignRoutes=no\n";
        assert_eq!(suspects(&env(&["systemd-network"], off)), ["systemd-networkd"]);
    }

    #[test]
    fn networkd_warns_unless_foreign_rules_are_left_alone() {
        assert_eq!(warnings(&env(&["systemd-network"], "")).len(), 1);
        let both_off = "[Network]\nManageForeignRoutingPolicyRules=no\nManageForeignRoutes = no\n";
        assert!(warnings(&env(&["systemd-network"], both_off)).is_empty());
        let rules_off =
            warnings(&env(&["systemd-network"], "[Network]\nManageForeignRoutingPolicyRules=no\n"));
        assert!(rules_off[0].contains("ManageForeignRoutes=yes"), "{rules_off:?}");
        assert_eq!(
            warnings(&env(
                &["systemd-network"],
                "ManageForeignRoutes=no\nManageForeignRoutingPolicyRules=no\nManageForeignRoutingPolicyRules=yes"
            ))
            .len(),
            1,
            "the last one wins"
        );
        assert!(warnings(&env(&["sshd"], "")).is_empty());
    }

    #[test]
    fn both_networkd_settings_are_read_from_every_drop_in_directory() {
        let root = std::env::temp_dir().join(format!("roce-route-networkd-{}", std::process::id()));
        let dir = |d: &str| {
            let p = root.join(d);
            fs::create_dir_all(&p).unwrap();
            p
        };
        fs::write(dir("usr/lib/systemd").join("networkd.conf"), "[Network]\n").unwrap();
        fs::write(dir("usr/lib/systemd/networkd.conf.d").join("10-vendor.conf"), "ManageForeignRoutes=no\n")
            .unwrap();
        fs::write(dir("etc/systemd/networkd.conf.d").join("10-vendor.conf"), "ManageForeignRoutes=yes\n")
            .unwrap();
        fs::write(
            dir("run/systemd/networkd.conf.d").join("90-roce-route.conf"),
            "ManageForeignRoutingPolicyRules=no\n",
        )
        .unwrap();
        let conf = networkd_conf(&root);
        let w = warnings(&env(&["systemd-network"], &conf));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("ManageForeignRoutes=yes") && !w[0].contains("ManageForeignRoutingPolicyRules=yes"),
            "{w:?}"
        );
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn a_kernel_thread_is_told_by_its_flags_not_its_name() {
        let kthreadd =
            "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 25 0 0 18446744073709551615";
        assert!(is_kernel_thread(kthreadd));
        // A process named like one, with a space and a parenthesis in its
        // name, in a container's PID namespace (PF_FORKNOEXEC | PF_RANDOMIZE).
        assert!(!is_kernel_thread("2 (kthreadd) x) S 1 2 2 0 -1 4194624 0 0 0 0 0 0 0 0 20 0 1 0 25"));
        assert!(is_kernel_thread("77 (kworker/1:1-(events)) I 2 0 0 0 -1 69238880 0 0"));
        assert!(!is_kernel_thread("2 (cut"), "no end of the name");
        assert!(!is_kernel_thread("2 (short) S 0 0"), "no flags");
    }

    /// The scan reads every process but the kernel's threads: this test's
    /// own process is there, none of kthreadd's children is (where this
    /// kernel lists them and PID 2 is kthreadd).
    #[test]
    fn the_scan_skips_the_kernel_threads_and_reads_the_rest() {
        let own = comm("/proc/self/comm").unwrap();
        let kernel = kernel_threads();
        let comm_of = |pid: &u32| comm(&format!("/proc/{pid}/comm"));
        let scanned = scan().processes;
        assert!(scanned.contains(&own), "{own} not in {scanned:?}");
        if fs::read_to_string("/proc/2/comm").is_ok_and(|c| c.trim() == "kthreadd") {
            assert!(kernel.len() > 1, "kthreadd and its children: {kernel:?}");
            assert!(!scanned.iter().any(|p| p == "kthreadd"), "{scanned:?}");
            let threads: Vec<String> = kernel.iter().filter_map(comm_of).collect();
            let read: Vec<&String> = threads.iter().filter(|t| scanned.contains(t)).collect();
            assert!(read.is_empty(), "kernel threads read by the scan: {read:?}");
        }
    }

    #[test]
    fn network_manager_warns() {
        let w = warnings(&env(&["NetworkManager"], ""));
        assert!(w[0].contains("NetworkManager"));
    }
}
