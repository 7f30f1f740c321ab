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
    /// networkd.conf and its drop-ins, concatenated in reading order.
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
    let mut processes = Vec::new();
    let mut path = String::with_capacity(32);
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        path.clear();
        path.push_str("/proc/");
        path.push_str(pid);
        path.push_str("/comm");
        if let Some(comm) = comm(&path) {
            processes.push(comm);
        }
    }
    Environment { processes, networkd_conf: networkd_conf(Path::new("/")) }
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
    fn network_manager_warns() {
        let w = warnings(&env(&["NetworkManager"], ""));
        assert!(w[0].contains("NetworkManager"));
    }
}
