//! Every transcript in the docs is what the binary prints.
//!
//! A transcript is a ```` ```console ```` block in README.md or docs/*.md.
//! Its lines that start with `$ ` are commands run on the host (`peer$ `:
//! on the peer), as root: a leading `sudo ` is shown to the reader and
//! dropped when run, and a `sudo` further on (`a; sudo b`, `| sudo tee`)
//! is a shim that runs its arguments as they are (keeping the test's
//! environment, which a real sudo would reset). The lines after a command, up to the next one,
//! are what it prints (stdout and stderr, as a terminal shows them). A
//! command that exits non-zero ends with a line `[exit N]`. In expected
//! output, `[..]` matches any text within a line and a line `...` any
//! number of lines (trycmd's conventions), for what differs from run to
//! run (MACs of veths, times).
//!
//! Directives in HTML comments set the scene, so the docs show no test
//! plumbing:
//! - `<!-- transcript: rails=ens1np0,ens2np0 ipv6 -->` starts a fresh
//!   testbed for the transcripts after it: a host namespace with those
//!   rails in 198.51.100.0/24 (198.51.100.10, .11, ...; 2001:db8:1::10, ...
//!   with `ipv6`), a peer at 198.51.100.1 behind a bridge, an empty state
//!   directory. `rails=4` names them rail0..rail3.
//! - `<!-- file: /etc/roce-route/rails.toml -->` before a fenced block
//!   writes that block to the path (under the test's own directory: every
//!   `/etc/roce-route` in a command means the test's copy). A file stays
//!   written for the rest of the doc: a later testbed gets it too, so a
//!   section can start afresh without showing the same config again. A
//!   relative path (`<!-- file: rails.toml -->`) is written to the
//!   commands' working directory instead: a draft, a scratch or an invalid
//!   file that must not sit among the boot unit's `/etc/roce-route/*.toml`.
//! - `<!-- sysfs: mixed at bundle/sys -->` copies the sysfs fixture
//!   `tests/fixtures/rdma/mixed/sysfs` to `bundle/sys` in the commands'
//!   working directory (a support bundle, for `--sysfs-root bundle/sys`)
//!   and gives the host the fixture's netdevs with their addresses (its
//!   `netdevs` file): a rail of the testbed by that name is re-addressed,
//!   any other is created as a veth.
//!
//! Commands run inside the host namespace (so no `--netns` shows) and in
//! a PID namespace of the testbed's own, with its own /proc (see `PidNs`:
//! a network manager that runs on the test machine is no part of the
//! docs), with
//! `roce-route` on PATH being the binary under test and
//! `ROCE_ROUTE_STATE_DIR` pointing at the test's state directory; in
//! output, the test's paths read as the real ones again (the state
//! directory as the default `/run/roce-route`, so the `--state-dir` that
//! suggested commands carry for it is dropped, as for the default).
//!
//! `ROCE_ROUTE_BLESS=1` writes what the binary printed into the docs for
//! every step that differs (then review the diff, and put `[..]` back
//! where a value varies).

mod common;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{Netns, Testbed, require_root};

/// What stands for the test's state directory in the docs: the default,
/// which the commands roce-route suggests do not name.
const STATE_DIR: &str = "/run/roce-route";
const CONFIG_DIR: &str = "/etc/roce-route";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, in order.
fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    if let Ok(dir) = std::fs::read_dir(repo().join("docs")) {
        let mut docs: Vec<PathBuf> =
            dir.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "md")).collect();
        docs.sort();
        files.extend(docs);
    }
    files
}

#[derive(Debug, Clone, PartialEq)]
enum Where {
    Host,
    Peer,
}

#[derive(Debug)]
struct Step {
    /// 0-based line of the command in the doc.
    line: usize,
    at: Where,
    command: String,
    /// Expected output lines (without the `[exit N]` line).
    expected: Vec<String>,
    exit: i32,
    /// The doc's lines of this step's output, `[exit N]` included:
    /// line + 1 .. end.
    end: usize,
}

#[derive(Debug)]
enum Item {
    Testbed { rails: Vec<String>, ipv6: bool },
    Sysfs { case: String, at: String },
    File { path: String, content: String },
    Transcript(Vec<Step>),
}

fn directive<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let body = line.trim().strip_prefix("<!--")?.strip_suffix("-->")?.trim();
    body.strip_prefix(name)?.strip_prefix(':').map(str::trim)
}

fn testbed_directive(args: &str, line: usize) -> Result<Item, String> {
    let mut rails = Vec::new();
    let mut ipv6 = false;
    for word in args.split_whitespace() {
        if word == "ipv6" {
            ipv6 = true;
        } else if let Some(list) = word.strip_prefix("rails=") {
            rails = match list.parse::<usize>() {
                Ok(n) => (0..n).map(|k| format!("rail{k}")).collect(),
                Err(_) => list.split(',').map(str::to_string).collect(),
            };
        } else {
            return Err(format!("line {}: unknown transcript option {word:?}", line + 1));
        }
    }
    if rails.is_empty() {
        return Err(format!("line {}: a transcript directive needs rails=N or rails=a,b", line + 1));
    }
    Ok(Item::Testbed { rails, ipv6 })
}

fn sysfs_directive(args: &str, line: usize) -> Result<Item, String> {
    match args.split_whitespace().collect::<Vec<_>>()[..] {
        [case, "at", at] if !at.starts_with('/') => Ok(Item::Sysfs { case: case.into(), at: at.into() }),
        _ => Err(format!("line {}: want `<!-- sysfs: CASE at RELATIVE/PATH -->`", line + 1)),
    }
}

fn steps(lines: &[&str], first: usize) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    for (i, text) in lines.iter().enumerate() {
        let line = first + i;
        let (at, command) = if let Some(c) = text.strip_prefix("peer$ ") {
            (Where::Peer, c)
        } else if let Some(c) = text.strip_prefix("$ ") {
            (Where::Host, c)
        } else {
            let Some(step) = steps.last_mut() else {
                return Err(format!("line {}: a console block must start with a `$ ` command", line + 1));
            };
            if let Some(code) = text.strip_prefix("[exit ").and_then(|t| t.strip_suffix(']')) {
                step.exit = code.parse().map_err(|_| format!("line {}: bad exit line", line + 1))?;
            } else if step.exit != 0 {
                return Err(format!("line {}: output after the `[exit N]` line", line + 1));
            } else {
                step.expected.push(text.trim_end().to_string());
            }
            step.end = line + 1;
            continue;
        };
        steps.push(Step {
            line,
            at,
            command: command.to_string(),
            expected: Vec::new(),
            exit: 0,
            end: line + 1,
        });
    }
    Ok(steps)
}

/// The items of one doc, in order.
fn parse(text: &str) -> Result<Vec<Item>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut items = Vec::new();
    let mut pending_file: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if let Some(args) = directive(l, "transcript") {
            items.push(testbed_directive(args, i)?);
        } else if let Some(args) = directive(l, "sysfs") {
            items.push(sysfs_directive(args, i)?);
        } else if let Some(path) = directive(l, "file") {
            pending_file = Some(path.to_string());
        } else if let Some(info) = l.strip_prefix("```") {
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].starts_with("```"))
                .ok_or_else(|| format!("line {}: unclosed code block", i + 1))?;
            let body = &lines[i + 1..end];
            if let Some(path) = pending_file.take() {
                items.push(Item::File { path, content: body.iter().map(|l| format!("{l}\n")).collect() });
            } else if info.trim() == "console" {
                items.push(Item::Transcript(steps(body, i + 1)?));
            }
            i = end;
        }
        i += 1;
    }
    Ok(items)
}

/// `[..]` in a line, `...` for lines.
fn line_matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.split("[..]").collect();
    if parts.len() == 1 {
        return expected == actual;
    }
    let mut rest = actual;
    for (k, part) in parts.iter().enumerate() {
        if k == 0 {
            let Some(r) = rest.strip_prefix(part) else { return false };
            rest = r;
        } else if k == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            let Some(at) = rest.find(part) else { return false };
            rest = &rest[at + part.len()..];
        }
    }
    true
}

fn lines_match(expected: &[String], actual: &[String]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e == "..." => (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..])),
        Some((e, rest)) => {
            actual.split_first().is_some_and(|(a, arest)| line_matches(e, a) && lines_match(rest, arest))
        }
    }
}

/// A private PID namespace with a /proc of its own, for the commands of
/// one scene. After a change (and in every `check`) roce-route scans /proc
/// for network managers and warns when one runs: on a test machine that
/// runs NetworkManager or systemd-networkd, every such transcript would
/// gain a warning about that machine, not about the docs. Inside, /proc
/// shows the scene's processes only, as on a host that runs no manager.
/// One namespace for all the commands of a scene, since they meet: the
/// guard of `apply --confirm` outlives the apply for a later `confirm`,
/// and /proc/locks names a lock's holder by pid. Its init (a shell that
/// reaps the orphans reparented to it, as a host's init does) is killed on
/// drop, and with it every process still inside.
struct PidNs {
    /// `unshare`, outside: it waits for the init it forked.
    unshare: Child,
    /// The init, by its pid outside; None until it is known.
    init: Option<u32>,
}

impl PidNs {
    fn new() -> PidNs {
        // `--propagation slave`: the testbed's later mounts (/run/netns)
        // reach the namespace's copy of the mount table, their unmounts too.
        let unshare = Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "--propagation", "slave", "--kill-child"])
            .args(["sh", "-c", "sleep infinity & echo ready; wait"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("unshare (util-linux): {e}"));
        let mut ns = PidNs { unshare, init: None };
        // The init says ready once /proc is mounted (before its exec).
        let mut ready = String::new();
        let _ = std::io::BufReader::new(ns.unshare.stdout.take().unwrap()).read_line(&mut ready);
        assert_eq!(ready, "ready\n", "unshare --pid --fork --mount-proc did not start");
        ns.init = Some(child_of(ns.unshare.id()).expect("the init that unshare forked"));
        ns
    }

    /// The start of an argv that runs the rest in the namespace: `nsenter`
    /// into its PID namespace and its mount namespace (for its /proc).
    fn enter(&self) -> Vec<String> {
        let init = self.init.expect("a started namespace");
        ["nsenter", "--target", &init.to_string(), "--pid", "--mount", "--"].map(String::from).to_vec()
    }
}

impl Drop for PidNs {
    fn drop(&mut self) {
        // The kernel kills every process of the namespace with its init;
        // unshare returns once they are all gone. Never panic here.
        match self.init {
            Some(init) => {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(init as i32),
                    nix::sys::signal::SIGKILL,
                );
            }
            None => {
                let _ = self.unshare.kill();
            }
        }
        let _ = self.unshare.wait();
    }
}

/// A child of process `parent`, from the ppid field of /proc/PID/stat.
fn child_of(parent: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
        let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
        (ppid == parent.to_string()).then_some(pid)
    })
}

/// One doc's scene: the testbed and the test's directories.
struct Scene {
    /// First: dropped (its processes killed) before the testbed goes.
    pid_ns: PidNs,
    testbed: Testbed,
    root: PathBuf,
    bin_dir: PathBuf,
}

impl Scene {
    fn new(rails: &[String], ipv6: bool) -> Scene {
        let names: Vec<&str> = rails.iter().map(String::as_str).collect();
        let testbed = Testbed::builder().rail_names(&names).ipv6(ipv6).build();
        let root = testbed.dir().join("scene");
        let bin_dir = root.join("bin");
        for d in [root.join("etc"), root.join("state"), root.join("cwd"), bin_dir.clone()] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::create_dir_all(root.join("etc/roce-route")).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_roce-route"), bin_dir.join("roce-route")).unwrap();
        let sudo = bin_dir.join("sudo");
        std::fs::write(&sudo, "#!/bin/sh\nexec \"$@\"\n").unwrap();
        let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
        std::fs::set_permissions(&sudo, mode).unwrap();
        Scene { pid_ns: PidNs::new(), testbed, root, bin_dir }
    }

    fn config_dir(&self) -> String {
        self.root.join("etc/roce-route").display().to_string()
    }

    /// What the boot unit would make of the scene's /etc/roce-route once
    /// the doc's steps ran: `apply --dry-run` of the directory (every
    /// *.toml in it) must not refuse the config (exit 2), when the doc
    /// left any *.toml there. A doc that left a demo or broken file there,
    /// or two files naming one interface, would fail a reader's boot.
    /// (What the scene's host holds, conflicts say, is not the config's.)
    fn boot_config_problem(&self) -> Option<String> {
        let dir = self.config_dir();
        let tomls = std::fs::read_dir(&dir)
            .ok()?
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "toml"));
        if !tomls {
            return None;
        }
        let out = self.exec(self.testbed.host(), &format!("roce-route apply --dry-run --no-announce {dir}/"));
        let code = out.status.code().unwrap_or(-1);
        (code == 2).then(|| {
            let said = String::from_utf8_lossy(&out.stdout).replace(&dir, CONFIG_DIR);
            format!(
                "the *.toml files it leaves in {CONFIG_DIR} are refused as the boot unit's config \
                 (`apply --dry-run {CONFIG_DIR}/` exit {code}): put demo files elsewhere\n{said}"
            )
        })
    }

    fn state_dir(&self) -> String {
        self.root.join("state").display().to_string()
    }

    fn write(&self, path: &str, content: &str) -> Result<(), String> {
        let target = match path.strip_prefix(CONFIG_DIR) {
            Some(rest) => PathBuf::from(format!("{}{rest}", self.config_dir())),
            None if !path.starts_with('/') => self.root.join("cwd").join(path),
            None => {
                return Err(format!("a doc file must live under {CONFIG_DIR} or be relative, not {path}"));
            }
        };
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(&target, content).map_err(|e| format!("{}: {e}", target.display()))
    }

    /// The fixture's sysfs copy in the working directory, its netdevs on the host.
    fn sysfs(&self, case: &str, at: &str) -> Result<(), String> {
        let fixture = repo().join("tests/fixtures/rdma").join(case);
        let target = self.root.join("cwd").join(at);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let cp = Command::new("cp").arg("-a").arg(fixture.join("sysfs")).arg(&target).status().unwrap();
        if !cp.success() {
            return Err(format!("cannot copy the sysfs of {case}"));
        }
        let netdevs = std::fs::read_to_string(fixture.join("netdevs")).map_err(|e| format!("{case}: {e}"))?;
        let host = self.testbed.host();
        for (k, line) in netdevs.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).enumerate() {
            let mut words = line.split_whitespace();
            let name = words.next().unwrap();
            if host.try_ip(&format!("link show {name}")).is_ok() {
                host.ip(&format!("addr flush dev {name} scope global"));
            } else {
                host.ip(&format!("link add {name} type veth peer name x{k}"));
                host.ip(&format!("link set x{k} up"));
                host.ip(&format!("link set {name} up"));
            }
            for addr in words {
                host.ip(&format!("addr add {addr} dev {name} nodad"));
            }
        }
        Ok(())
    }

    /// What the command prints, with the test's paths as the docs say them.
    fn run(&self, step: &Step) -> (Vec<String>, i32) {
        let ns = match step.at {
            Where::Host => self.testbed.host(),
            Where::Peer => self.testbed.peer(),
        };
        let command = step.command.strip_prefix("sudo ").unwrap_or(&step.command);
        let command = command.replace(CONFIG_DIR, &self.config_dir());
        let out = self.exec(ns, &command);
        let text = String::from_utf8_lossy(&out.stdout)
            .replace(&format!("--state-dir {} ", self.state_dir()), "")
            .replace(&self.config_dir(), CONFIG_DIR)
            .replace(&self.state_dir(), STATE_DIR);
        // Trailing blanks (ip prints some) do not survive editors.
        (text.lines().map(|l| l.trim_end().to_string()).collect(), out.status.code().unwrap_or(-1))
    }

    /// A command line run in the scene's PID namespace.
    fn exec(&self, ns: &Netns, command: &str) -> std::process::Output {
        let argv = [self.pid_ns.enter(), self.argv(ns, command)].concat();
        Command::new(&argv[0]).args(&argv[1..]).output().unwrap()
    }

    /// The argv that runs a command line in network namespace `ns`, with
    /// the scene's environment and working directory.
    fn argv(&self, ns: &Netns, command: &str) -> Vec<String> {
        let path = format!(
            "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            self.bin_dir.display()
        );
        let mut argv: Vec<String> =
            ["ip", "netns", "exec", ns.name(), "env", "-i"].map(String::from).to_vec();
        argv.push(format!("PATH={path}"));
        argv.push(format!("ROCE_ROUTE_STATE_DIR={}", self.state_dir()));
        argv.push(format!("HOME={}", self.root.display()));
        argv.extend(["COLUMNS=100", "LANG=C.UTF-8", "sh", "-c"].map(String::from));
        argv.push(format!("cd {} && exec 2>&1 && {command}", self.root.join("cwd").display()));
        argv
    }
}

/// The output lines of a step as the doc should show them.
fn doc_lines(actual: &[String], exit: i32) -> Vec<String> {
    let mut lines = actual.to_vec();
    if exit != 0 {
        lines.push(format!("[exit {exit}]"));
    }
    lines
}

/// Runs every transcript of one doc; the mismatches, and the doc's text
/// with the actual outputs (for blessing).
fn check_doc(path: &Path) -> (Vec<String>, String) {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.strip_prefix(repo()).unwrap_or(path).display().to_string();
    let items = match parse(&text) {
        Ok(items) => items,
        Err(e) => return (vec![format!("{name}: {e}")], text),
    };
    let mut failures = Vec::new();
    let mut scene: Option<Scene> = None;
    let mut files: Vec<(&str, &str)> = Vec::new();
    let mut replacements: Vec<(usize, usize, Vec<String>)> = Vec::new();
    for item in &items {
        match item {
            Item::Testbed { rails, ipv6 } => {
                if let Some(problem) = scene.as_ref().and_then(Scene::boot_config_problem) {
                    failures.push(format!("{name}: {problem}"));
                }
                let s = Scene::new(rails, *ipv6);
                for (file, content) in &files {
                    if let Err(e) = s.write(file, content) {
                        failures.push(format!("{name}: {e}"));
                    }
                }
                scene = Some(s);
            }
            Item::Sysfs { case, at } => match &scene {
                Some(s) => {
                    if let Err(e) = s.sysfs(case, at) {
                        failures.push(format!("{name}: {e}"));
                    }
                }
                None => {
                    failures.push(format!("{name}: <!-- sysfs: {case} --> before any <!-- transcript -->"))
                }
            },
            Item::File { path: file, content } => match &scene {
                Some(s) => {
                    if let Err(e) = s.write(file, content) {
                        failures.push(format!("{name}: {e}"));
                    }
                    files.push((file, content));
                }
                None => {
                    failures.push(format!("{name}: <!-- file: {file} --> before any <!-- transcript -->"))
                }
            },
            Item::Transcript(steps) => {
                let Some(s) = &scene else {
                    let line = steps.first().map_or(0, |s| s.line + 1);
                    failures.push(format!(
                        "{name}:{line}: a console block with no <!-- transcript: --> before it"
                    ));
                    continue;
                };
                for step in steps {
                    let (actual, exit) = s.run(step);
                    if exit != step.exit || !lines_match(&step.expected, &actual) {
                        failures.push(format!(
                            "{name}:{}: `{}` printed (exit {exit}):\n{}\n--- the doc says (exit {}):\n{}",
                            step.line + 1,
                            step.command,
                            actual.join("\n"),
                            step.exit,
                            step.expected.join("\n")
                        ));
                        replacements.push((step.line + 1, step.end, doc_lines(&actual, exit)));
                    }
                }
            }
        }
    }
    if let Some(problem) = scene.as_ref().and_then(Scene::boot_config_problem) {
        failures.push(format!("{name}: {problem}"));
    }
    (failures, blessed(&text, &replacements))
}

fn blessed(text: &str, replacements: &[(usize, usize, Vec<String>)]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for (from, to, new) in replacements.iter().rev() {
        lines.splice(*from..*to, new.iter().cloned());
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[test]
fn every_transcript_in_the_docs_is_what_the_binary_prints() {
    require_root();
    let bless = std::env::var_os("ROCE_ROUTE_BLESS").is_some();
    let mut failures = Vec::new();
    let mut transcripts = 0;
    for path in doc_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        transcripts += parse(&text)
            .map(|items| items.iter().filter(|i| matches!(i, Item::Transcript(_))).count())
            .unwrap_or(0);
        let (f, new_text) = check_doc(&path);
        if bless && new_text != text {
            std::fs::write(&path, new_text).unwrap();
        }
        failures.extend(f);
    }
    assert!(transcripts > 0, "no transcript found in the docs: this test would check nothing");
    assert!(
        failures.is_empty(),
        "{} transcript step(s) differ from the binary:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// A process of the test machine, named `name` (sleep run through a
/// symlink of that name: /proc/PID/comm is the name the program was run
/// by), killed and reaped on drop. Not a copy: a copy's write descriptor,
/// inherited by a process another test forked meanwhile, made its run fail
/// with ETXTBSY ("Text file busy") once.
struct Impostor(Child);

impl Impostor {
    fn start(dir: &Path, name: &str) -> Impostor {
        let program = dir.join(name);
        std::os::unix::fs::symlink("/bin/sleep", &program).unwrap();
        Impostor(Command::new(&program).arg("600").stdin(Stdio::null()).spawn().unwrap())
    }
}

impl Drop for Impostor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_network_manager_of_the_test_machine_stays_out_of_the_transcripts() {
    require_root();
    let rails = ["rail0".to_string(), "rail1".to_string()];
    let scene = Scene::new(&rails, false);
    scene
        .write(
            &format!("{CONFIG_DIR}/rails.toml"),
            "[[interface]]\nname = \"rail0\"\n\n[[interface]]\nname = \"rail1\"\n",
        )
        .unwrap();
    let apply = format!("roce-route apply {}/rails.toml", scene.config_dir());
    let host = scene.testbed.host();
    let warning = "warning: NetworkManager is running";
    let manager = Impostor::start(&scene.root, "NetworkManager");

    // A change: the scan runs (a no-op apply skips it).
    let inside = scene.exec(host, &apply);
    let inside = String::from_utf8_lossy(&inside.stdout);
    assert!(inside.contains("roce-route: applied 8 changes"), "{inside}");
    assert!(!inside.contains(warning), "the manager outside the PID namespace was seen:\n{inside}");

    // The same change again, outside the PID namespace: the scan sees the
    // manager there, or the absence above proves nothing.
    let rollback = scene.exec(host, "roce-route rollback");
    assert!(rollback.status.success(), "{}", String::from_utf8_lossy(&rollback.stdout));
    let argv = scene.argv(host, &apply);
    let outside = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
    drop(manager);
    let outside = String::from_utf8_lossy(&outside.stdout);
    assert!(outside.contains("roce-route: applied 8 changes"), "{outside}");
    assert!(outside.contains(warning), "the scan missed a NetworkManager of this machine:\n{outside}");
}

// --- the checker itself ---------------------------------------------------

#[test]
fn wildcards_match_within_lines_and_over_lines() {
    let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(line_matches("a [..] c", "a bbb c"));
    assert!(!line_matches("a [..] c", "a bbb d"));
    assert!(line_matches("[..]", "anything"));
    assert!(!line_matches("exact", "exact "));
    assert!(lines_match(&v(&["a", "...", "z"]), &v(&["a", "b", "c", "z"])));
    assert!(lines_match(&v(&["a", "...", "z"]), &v(&["a", "z"])));
    assert!(!lines_match(&v(&["a", "...", "z"]), &v(&["a", "b"])));
    assert!(!lines_match(&v(&["a"]), &v(&["a", "b"])), "extra output is a difference");
}

#[test]
fn the_parser_reads_directives_steps_and_exit_codes() {
    let doc = "<!-- transcript: rails=2 ipv6 -->\n\
               <!-- file: /etc/roce-route/r.toml -->\n```toml\n[[interface]]\n```\n\
               ```console\n$ sudo roce-route check /etc/roce-route/r.toml\nline one\n[exit 3]\npeer$ ip -br link\n```\n\
               ```sh\n$ not a transcript\n```\n";
    let items = parse(doc).unwrap();
    assert!(matches!(&items[0], Item::Testbed { rails, ipv6: true, .. } if rails == &["rail0", "rail1"]));
    assert!(
        matches!(&items[1], Item::File { path, content } if path == "/etc/roce-route/r.toml" && content == "[[interface]]\n")
    );
    let Item::Transcript(steps) = &items[2] else { panic!("{items:?}") };
    assert_eq!(items.len(), 3, "the sh block is no transcript");
    assert_eq!((steps[0].exit, steps[0].expected.clone()), (3, vec!["line one".to_string()]));
    assert_eq!((steps[1].at.clone(), steps[1].command.as_str()), (Where::Peer, "ip -br link"));
    assert!(parse("```console\noutput first\n```\n").is_err());
    let sysfs = parse("<!-- sysfs: mixed at bundle/sys -->\n").unwrap();
    assert!(matches!(&sysfs[0], Item::Sysfs { case, at } if case == "mixed" && at == "bundle/sys"));
    assert!(parse("<!-- sysfs: mixed at /sys -->\n").is_err(), "an absolute path would be the host's");
    assert!(parse("<!-- sysfs: mixed -->\n").is_err());
    assert!(parse("```console\n$ a\n[exit 2]\nmore\n```\n").is_err());
}

#[test]
fn blessing_replaces_only_the_steps_output() {
    let doc = "x\n```console\n$ cmd\nold\nold2\n$ cmd2\nkept\n```\n";
    let out = blessed(doc, &[(3, 5, vec!["new".into(), "[exit 5]".into()])]);
    assert_eq!(out, "x\n```console\n$ cmd\nnew\n[exit 5]\n$ cmd2\nkept\n```\n");
}
