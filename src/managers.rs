//! Network managers known to delete policy rules and routes they did not
//! make. `check` warns about them: a host that is right now can be wrong
//! after the next `networkctl reload` or NetworkManager reconnect.

use std::fs;

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
    if running("systemd-network") && manages_foreign_rules(&env.networkd_conf) {
        out.push(
            "systemd-networkd is running with ManageForeignRoutingPolicyRules=yes (the default): it deletes \
             rules it did not make when it restarts or reconfigures a link; set \
             ManageForeignRoutingPolicyRules=no (and ManageForeignRoutes=no) in /etc/systemd/networkd.conf"
                .to_string(),
        );
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

/// The last `ManageForeignRoutingPolicyRules=` in [Network] wins; the
/// default is yes.
fn manages_foreign_rules(conf: &str) -> bool {
    let mut value = true;
    for line in conf.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("ManageForeignRoutingPolicyRules=") {
            value = !matches!(v.trim().to_ascii_lowercase().as_str(), "no" | "false" | "0" | "off");
        }
    }
    value
}

/// Reads the environment of this machine.
pub fn scan() -> Environment {
    let processes = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|e| fs::read_to_string(e.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .collect();
    let mut networkd_conf = fs::read_to_string("/etc/systemd/networkd.conf").unwrap_or_default();
    let mut dropins: Vec<_> = fs::read_dir("/etc/systemd/networkd.conf.d")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .collect();
    dropins.sort();
    for p in dropins {
        networkd_conf.push('\n');
        networkd_conf.push_str(&fs::read_to_string(p).unwrap_or_default());
    }
    Environment { processes, networkd_conf }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(procs: &[&str], conf: &str) -> Environment {
        Environment { processes: procs.iter().map(|s| s.to_string()).collect(), networkd_conf: conf.into() }
    }

    #[test]
    fn networkd_warns_unless_foreign_rules_are_left_alone() {
        assert_eq!(warnings(&env(&["systemd-network"], "")).len(), 1);
        assert!(
            warnings(&env(&["systemd-network"], "[Network]\nManageForeignRoutingPolicyRules=no\n"))
                .is_empty()
        );
        assert_eq!(
            warnings(&env(
                &["systemd-network"],
                "ManageForeignRoutingPolicyRules=no\nManageForeignRoutingPolicyRules=yes"
            ))
            .len(),
            1,
            "the last one wins"
        );
        assert!(warnings(&env(&["sshd"], "")).is_empty());
    }

    #[test]
    fn network_manager_warns() {
        let w = warnings(&env(&["NetworkManager"], ""));
        assert!(w[0].contains("NetworkManager"));
    }
}
