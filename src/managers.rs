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
    let pids: Vec<u32> = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|pid| kernel.binary_search(pid).is_err())
        .collect();
    let processes = match helpers(pids.len()) {
        0 => read_comms(&pids),
        n => comms(&pids, &other_cpus(n)),
    };
    // Read only for a networkd that runs: nothing else looks at it.
    let networkd_conf = if processes.iter().any(|p| p == "systemd-network") {
        networkd_conf(Path::new("/"))
    } else {
        String::new()
    };
    Environment { processes, networkd_conf }
}

/// A scan made on a thread of its own, bound to another CPU than the
/// caller's, while the caller goes on (`Background::wait` gives it). apply
/// starts it when it knows it will change something, before the change:
/// the scan (~40 system calls on /proc here, 0.27 ms of an apply's 2.4;
/// thousands on a node of many processes) then runs beside the change and
/// its verification instead of after them. Where no other CPU can be named
/// there is no thread, and `wait` scans in line.
pub struct Background {
    thread: Option<std::thread::JoinHandle<Environment>>,
    scan: fn() -> Environment,
}

/// `scan` in the background (see `Background`).
pub fn scan_in_background() -> Background {
    in_background(scan)
}

fn in_background(scan: fn() -> Environment) -> Background {
    use std::os::unix::thread::JoinHandleExt;
    let thread = other_cpus(1).first().copied().and_then(|cpu| {
        let thread = std::thread::Builder::new().name("scan".into()).spawn(scan).ok()?;
        // Moved by the caller, at once: a thread that moved itself waited
        // first for the caller's time slice on the caller's CPU, which the
        // change keeps busy (the scan then ended after the change: 0.40 ms
        // waited for where in line it took 0.27).
        // SAFETY: the thread is joined later, by `wait`; a zeroed cpu_set_t
        // is an empty set, CPU_SET adds to it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            bind(thread.as_pthread_t(), &set);
        }
        Some(thread)
    });
    Background { thread, scan }
}

impl Background {
    /// The scan's environment, once it is read (in line when no thread
    /// could be made, or the thread failed).
    pub fn wait(self) -> Environment {
        use std::os::unix::thread::JoinHandleExt;
        let _p = crate::profile::phase("process scan");
        let thread = self.thread.inspect(|t| {
            // Free to run anywhere now, the caller's CPU too, which its
            // wait leaves idle: one still waiting for a CPU that other work
            // took (2.5 ms once here) is not kept there.
            if let Some(set) = process_cpus() {
                // SAFETY: the thread is joined below, after this.
                unsafe { bind(t.as_pthread_t(), &set) }
            }
        });
        thread.and_then(|t| t.join().ok()).unwrap_or_else(self.scan)
    }
}

/// The processes a scan thread reads at least. Each costs three system
/// calls on /proc, ~5-8 µs: a node of a thousand processes took ~7.6 ms,
/// three quarters of an apply that changed something (bench/processes.py).
const PER_THREAD: usize = 256;

/// The most helper threads one scan makes.
const MAX_HELPERS: usize = 15;

/// How many helper threads a scan of `processes` may make (as many more
/// CPUs as it finds to run them on, `other_cpus`). Pure.
fn helpers(processes: usize) -> usize {
    (processes / PER_THREAD).saturating_sub(1).min(MAX_HELPERS)
}

/// Up to `n` CPUs this process may run on (`process_cpus`), the CPU the
/// calling thread is on left out (empty where the set cannot be read).
fn other_cpus(n: usize) -> Vec<usize> {
    let Some(set) = process_cpus() else { return Vec::new() };
    // SAFETY: sched_getcpu takes nothing; CPU_ISSET reads the set.
    unsafe {
        let here = usize::try_from(libc::sched_getcpu()).ok();
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set) && Some(c) != here)
            .take(n)
            .collect()
    }
}

/// The CPUs this process may run on: its first thread's set (its TID is
/// the PID), not the caller's, so that a background scan's thread, bound
/// to one CPU, still finds the others for helpers. None where it cannot
/// be read.
fn process_cpus() -> Option<libc::cpu_set_t> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity writes
    // at most its size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(libc::getpid(), std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0)
            .then_some(set)
    }
}

/// Binds `thread` to the CPUs of `set`; left where it is when that fails.
///
/// # Safety
/// `thread` is a thread of this process that has not been joined.
unsafe fn bind(thread: libc::pthread_t, set: &libc::cpu_set_t) {
    // SAFETY: the caller's; pthread_setaffinity_np reads the set.
    unsafe {
        libc::pthread_setaffinity_np(thread, std::mem::size_of::<libc::cpu_set_t>(), set);
    }
}

/// Binds the calling thread to `cpu`; left where it is when that fails.
fn run_on(cpu: usize) {
    // SAFETY: the calling thread is one of this process, not joined; a
    // zeroed cpu_set_t is an empty set, CPU_SET adds to it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        bind(libc::pthread_self(), &set);
    }
}

/// The names of `pids` (those that still run), in order: one part read by
/// the calling thread, one by a helper on each of `cpus`. A helper binds
/// itself to its CPU before it reads, and the calling thread waits until
/// each has: left to the scheduler, a new thread started on the CPU of the
/// one that made it and waited there until that one's time slice ended
/// (measured here: no faster than in line, on two CPUs, where bound it was
/// 1.6 times as fast). A helper that cannot be made leaves its part to the
/// calling thread.
fn comms(pids: &[u32], cpus: &[usize]) -> Vec<String> {
    let part = pids.len().div_ceil(cpus.len() + 1).max(1);
    let mut parts = pids.chunks(part);
    let first = parts.next().unwrap_or_default();
    let (bound, on_cpu) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let helpers: Vec<_> = parts
            .zip(cpus)
            .map(|(chunk, &cpu)| {
                let bound = bound.clone();
                let helper = std::thread::Builder::new().name("scan".into()).spawn_scoped(s, move || {
                    run_on(cpu);
                    let _ = bound.send(());
                    // Now, not when the part is read: the wait below ends
                    // when every sender is gone.
                    drop(bound);
                    read_comms(chunk)
                });
                (chunk, helper)
            })
            .collect();
        drop(bound);
        // Until every helper made has bound itself (one not made dropped
        // its sender with it).
        while on_cpu.recv().is_ok() {}
        let mut names = read_comms(first);
        for (chunk, helper) in helpers {
            match helper.map(|h| h.join()) {
                Ok(Ok(more)) => names.extend(more),
                _ => names.extend(read_comms(chunk)),
            }
        }
        names
    })
}

/// The names of `pids`, one after the other.
fn read_comms(pids: &[u32]) -> Vec<String> {
    use std::fmt::Write;
    let mut path = String::with_capacity(32);
    pids.iter()
        .filter_map(|pid| {
            path.clear();
            let _ = write!(path, "/proc/{pid}/comm");
            comm(&path)
        })
        .collect()
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

    /// `count` processes named `name` (a symlink to sleep, whose name the
    /// kernel takes for theirs), killed and reaped when dropped.
    struct Named {
        children: Vec<std::process::Child>,
        dir: std::path::PathBuf,
    }

    impl Named {
        fn spawn(name: &str, count: usize) -> Named {
            let dir = std::env::temp_dir().join(format!("rr-managers-{}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            let sleep = ["/bin/sleep", "/usr/bin/sleep"].into_iter().find(|p| Path::new(p).exists()).unwrap();
            std::os::unix::fs::symlink(sleep, dir.join(name)).unwrap();
            let mut named = Named { children: Vec::new(), dir };
            for _ in 0..count {
                let child = std::process::Command::new(named.dir.join(name)).arg("600").spawn().unwrap();
                named.children.push(child);
            }
            named
        }

        fn pids(&self) -> Vec<u32> {
            self.children.iter().map(std::process::Child::id).collect()
        }
    }

    impl Drop for Named {
        fn drop(&mut self) {
            for child in &mut self.children {
                let _ = child.kill();
                let _ = child.wait();
            }
            let _ = fs::remove_dir_all(&self.dir);
        }
    }

    /// The CPUs the calling thread may run on.
    fn allowed_cpus() -> usize {
        // SAFETY: as in other_cpus.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
            usize::try_from(libc::CPU_COUNT(&set)).unwrap()
        }
    }

    /// A background scan's thread is bound to one CPU by the caller (it
    /// does not wait for the caller's CPU to move itself), still names the
    /// other CPUs for a long scan's helpers, is free to run anywhere once
    /// the caller waits for it, and gives the caller what it scanned. Its
    /// "scan" waits to see itself bound, says so, then waits to be free (at
    /// most 10 s each) and returns what it saw.
    #[test]
    fn a_background_scan_is_bound_to_another_cpu_until_the_wait() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::{Duration, Instant};
        static BOUND: AtomicBool = AtomicBool::new(false);
        fn until(done: impl Fn(usize) -> bool) -> usize {
            let started = Instant::now();
            loop {
                let cpus = allowed_cpus();
                if done(cpus) || started.elapsed() > Duration::from_secs(10) {
                    return cpus;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        fn scan() -> Environment {
            let bound = until(|cpus| cpus == 1);
            // Bound, it still finds the other CPUs for a long scan's helpers.
            let helpers = other_cpus(1024).len();
            BOUND.store(true, Ordering::SeqCst);
            let free = until(|cpus| cpus > 1);
            let seen = [bound, helpers, free].map(|n| n.to_string()).to_vec();
            Environment { processes: seen, networkd_conf: String::new() }
        }
        let all = allowed_cpus();
        let background = in_background(scan);
        assert_eq!(background.thread.is_some(), all > 1, "a thread where there is another CPU");
        if all > 1 {
            let started = Instant::now();
            while !BOUND.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let got = background.wait().processes;
        let expected = [1, all - 1, all].map(|n| n.to_string());
        assert_eq!(got, expected, "bound to one, the others named for helpers, then free (in line: one CPU)");
    }

    #[test]
    fn a_scan_makes_helpers_only_when_it_is_long() {
        assert_eq!(helpers(0), 0);
        assert_eq!(helpers(2 * PER_THREAD - 1), 0);
        assert_eq!(helpers(2 * PER_THREAD), 1);
        assert_eq!(helpers(5 * PER_THREAD + 7), 4);
        assert_eq!(helpers(1000 * PER_THREAD), MAX_HELPERS);
    }

    /// Every CPU this process may use but the caller's, each once.
    #[test]
    fn the_other_cpus_leave_out_the_callers_own() {
        let allowed = allowed_cpus();
        // SAFETY: sched_getcpu takes nothing.
        let cpu = || usize::try_from(unsafe { libc::sched_getcpu() }).unwrap();
        // The test's thread may move between CPUs while it asks: asked
        // again until it did not.
        let others = (0..1000)
            .find_map(|_| {
                let before = cpu();
                let others = other_cpus(1024);
                (cpu() == before).then(|| {
                    assert!(!others.contains(&before), "{before} in {others:?}");
                    others
                })
            })
            .expect("the thread stayed on one CPU for one call");
        assert_eq!(others.len(), allowed - 1, "{others:?}");
        assert!(others.windows(2).all(|w| w[0] < w[1]), "{others:?}");
        assert_eq!(other_cpus(1).len(), others.len().min(1));
    }

    /// Split between helpers, every process is read once, in order, and a
    /// PID gone is left out: the same as in line. Helpers bound to one CPU
    /// each, several to the same, or to one that does not exist (left
    /// where they are) read the same.
    #[test]
    fn names_read_by_helpers_are_those_read_in_line() {
        let named = Named::spawn("rr-scan-parts", 37);
        let mut pids = named.pids();
        // A PID no process has (above the kernel's pid_max limit).
        pids.insert(5, 4_194_305);
        let in_line = read_comms(&pids);
        assert_eq!(in_line.iter().filter(|n| *n == "rr-scan-parts").count(), 37, "{in_line:?}");
        let cpus = other_cpus(MAX_HELPERS);
        for helpers_on in [&cpus[..], &[0], &[0, 0, 0], &[libc::CPU_SETSIZE as usize - 1], &[0; 63]] {
            assert_eq!(comms(&pids, helpers_on), in_line, "helpers on {helpers_on:?}");
        }
    }

    /// A node of many processes: the scan, split between the CPUs there
    /// are, still finds every one, and a manager among them.
    #[test]
    fn a_long_scan_finds_every_process() {
        let many = Named::spawn("rr-scan-many", 3 * PER_THREAD);
        let manager = Named::spawn("NetworkManager", 1);
        let env = scan();
        let found = env.processes.iter().filter(|n| *n == "rr-scan-many").count();
        assert_eq!(found, many.children.len());
        assert!(
            warnings(&env).iter().any(|w| w.starts_with("NetworkManager is running")),
            "{:?}",
            warnings(&env)
        );
        drop(manager);
    }

    #[test]
    fn network_manager_warns() {
        let w = warnings(&env(&["NetworkManager"], ""));
        assert!(w[0].contains("NetworkManager"));
    }
}
