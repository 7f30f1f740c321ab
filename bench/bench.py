#!/usr/bin/env python3
"""Benchmark `roce-route apply` against the iproute2 commands it replaces.

Run as root:  sudo bench/bench.py [--rounds 30] [--binary target/release/roce-route]
              [--tmpfs /dev/shm] [--disk /var/tmp]

Everything happens in throwaway network namespaces (deleted on exit, also on
failure or Ctrl-C); the host's own namespace is never touched. Two testbeds
are built, identical except that the second one carries 100,000 foreign
blackhole routes (198.18.0.0/15, RFC 2544) in its main table:

    host namespace: rail0..rail7, 198.51.100.1k/24 + 2001:db8:1::1k/64
    peer namespace: the veth peers on bridge br0, 198.51.100.1/24

Every case is a whole process (or processes) timed with perf_counter_ns
around subprocess.run. Cases are interleaved: each round runs every case
once, in turn, so that drift of the machine spreads over all cases alike.
Any preparation (resetting the namespace to the un-applied state) is done
untimed just before the timed run, the same way on both testbeds: the owned
rules flushed and every route of the from-scratch dry run deleted by name
(one `ip -force -batch` per family), checked once to undo apply.

    a  roce-route apply, from scratch
    b  roce-route apply, no-op (already applied)
    c  the same routes/rules with `ip -batch`: the complete equivalent is two
       processes, because iproute2 infers the family of `route` lines but
       not of `rule` lines (an IPv6 `rule add` without -6 fails with
       "Invalid source address"), and `-4`/`-6` are not accepted per line
    c1 the first of c's two processes alone: the most one `ip -batch`
       process can do (all routes + the IPv4 rules); a lower bound
    d  c plus one `ip netns exec NS sysctl -w k=v ...` process: everything
       apply does
    e  a, on the testbed with 100k foreign routes in the main table
    f  b, on the testbed with 100k foreign routes in the main table
    g  a as users run it: the peers told (gratuitous ARP, 2 rounds 100 ms
       apart, `[defaults] announce`); the others pass --no-announce, as
       iproute2 tells no one. Above a's time by the 100 ms interval and
       the close of the packet socket (an RCU grace period).
    v  `roce-route --version`: roce-route's process start-up and exit alone
    iv `ip -V`: the same for ip

The ratios a/c1 and b/c1 carry issue 26's targets (<= 1.2, <= 0.8). Both
sides of them are mostly process start-up on a small virtual machine, so
the report also gives each side beyond its start-up (a - v, b - v and
c1 - iv): what the runs themselves cost.

Every roce-route case runs twice in the same rounds: with its state
directory on tmpfs (`--tmpfs DIR`, default /dev/shm, like /run on systemd
hosts) and on disk (`--disk DIR`, default /var/tmp; the `'` cases). The
journal is written with write-then-rename and no fsync, so the two should
not differ beyond noise. Both private state directories are deleted on
exit.

After the timed rounds, a and b run again as many times with
ROCE_ROUTE_PROFILE=1, which makes roce-route print the wall time of its
phases (netlink dumps, sysfs and /proc/sys reads, state files, the
changes, the verification) as one JSON line on stderr; the report gives
the median of each (these runs are not in the timed medians above).

Python standard library only.
"""

from __future__ import annotations

import argparse
import difflib
import json
import ipaddress
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RAILS = 8
TABLE_BASE = 100
PROTO = 234
GATEWAY = "198.51.100.1"
FOREIGN_ROUTES = 100_000
FOREIGN_NET = ipaddress.ip_network("198.18.0.0/15")
ARP_SYSCTLS = ("arp_ignore", "arp_announce")


class BenchError(Exception):
    """A precondition or a correctness check failed: the numbers would lie."""


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs a command, capturing its output; raises with that output on failure."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise BenchError(
            f"command failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stdout}{p.stderr}"
        )
    return p


def timed(*cmd: str, env: dict[str, str] | None = None) -> tuple[int, subprocess.CompletedProcess]:
    """Wall-clock nanoseconds of one whole process, and its result."""
    full_env = {**os.environ, **env} if env else None
    t0 = time.perf_counter_ns()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
    t1 = time.perf_counter_ns()
    if p.returncode != 0:
        raise BenchError(
            f"timed command failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stdout}{p.stderr}"
        )
    return t1 - t0, p


# ---------------------------------------------------------------------------
# The testbed
# ---------------------------------------------------------------------------


class Testbed:
    """A host namespace with RAILS veth rails whose peers sit on a bridge in a
    peer namespace; optionally with foreign routes in the main table. Both
    namespaces are deleted in __exit__."""

    def __init__(self, tag: str, workdir: Path, foreign_routes: int = 0):
        self.host = f"rrbench-{os.getpid()}-{tag}-h"
        self.peer = f"rrbench-{os.getpid()}-{tag}-p"
        self.workdir = workdir
        self.foreign_routes = foreign_routes
        self.reset_file = workdir / f"reset-{tag}.batch"
        self.undo_files: dict[str, Path] = {}
        self.created: list[str] = []

    def __enter__(self) -> "Testbed":
        try:
            self._build()
        except BaseException:
            self._delete()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._delete()

    def _delete(self) -> None:
        for ns in reversed(self.created):
            sh("ip", "netns", "del", ns, check=False)
        self.created.clear()

    def _build(self) -> None:
        for ns in (self.host, self.peer):
            sh("ip", "netns", "add", ns)
            self.created.append(ns)
        h, p = ("ip", "-n", self.host), ("ip", "-n", self.peer)
        # No duplicate address detection: link-local addresses (and their
        # local routes) are final at once, so state comparisons are stable.
        for ns in (self.host, self.peer):
            for conf in ("all", "default"):
                sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{conf}.accept_dad=0")
        sh(*p, "link", "add", "br0", "type", "bridge")
        sh(*p, "addr", "add", f"{GATEWAY}/24", "dev", "br0")
        sh(*p, "addr", "add", "2001:db8:1::1/64", "dev", "br0", "nodad")
        sh(*p, "link", "set", "br0", "up")
        sh(*h, "link", "set", "lo", "up")
        for k in range(RAILS):
            rail, peer = f"rail{k}", f"p{k}"
            sh(*h, "link", "add", rail, "type", "veth", "peer", "name", peer, "netns", self.peer)
            sh(*h, "addr", "add", f"198.51.100.{10 + k}/24", "dev", rail)
            sh(*h, "addr", "add", f"2001:db8:1::{10 + k}/64", "dev", rail, "nodad")
            sh(*h, "link", "set", rail, "up")
            sh(*p, "link", "set", peer, "master", "br0", "up")
        lines = [f"rule flush protocol {PROTO}"]
        lines += [f"route flush table {TABLE_BASE + k}" for k in range(RAILS)]
        self.reset_file.write_text("\n".join(lines) + "\n")
        if self.foreign_routes:
            self._add_foreign_routes()

    def _add_foreign_routes(self) -> None:
        first = int(FOREIGN_NET.network_address)
        if self.foreign_routes > FOREIGN_NET.num_addresses:
            raise BenchError(f"{FOREIGN_NET} holds fewer than {self.foreign_routes} /32s")
        batch = self.workdir / "foreign.batch"
        with batch.open("w") as f:
            for i in range(self.foreign_routes):
                f.write(f"route add blackhole {ipaddress.IPv4Address(first + i)}/32\n")
        sh("ip", "-n", self.host, "-batch", str(batch))
        count = sh("ip", "-n", self.host, "-4", "route", "show", "table", "main", "type", "blackhole")
        got = len(count.stdout.splitlines())
        if got != self.foreign_routes:
            raise BenchError(f"{self.host}: expected {self.foreign_routes} blackhole routes, found {got}")

    # --- state --------------------------------------------------------------

    def undo_by(self, script: "Script") -> None:
        """From now on reset deletes what the script adds instead of flushing
        the tables (see reset)."""
        self.undo_files = write_undo(script, self.workdir, self.host)

    def reset(self) -> None:
        """Back to the un-applied state: no proto-234 rules, empty tables
        100..107 (both families), ARP sysctls 0. Once the script is known,
        by deleting its routes by name: a `route flush table N` line of a
        batch makes iproute2 dump every route (its batch mode does not ask
        the kernel to filter by table), main's 100k foreign ones included,
        so the loaded testbed's reset did far more work than the plain
        one's just before the timed case. Both now do the same work."""
        if self.undo_files:
            undo(self.host, self.undo_files)
        else:
            for fam in ("-4", "-6"):
                sh("ip", "-n", self.host, fam, "-batch", str(self.reset_file))
        zero = [f"net.ipv4.conf.rail{k}.{key}=0" for k in range(RAILS) for key in ARP_SYSCTLS]
        sh("ip", "netns", "exec", self.host, "sysctl", "-q", "-w", *zero)

    def snapshot(self, with_sysctls: bool = True) -> dict[str, str]:
        """What apply changes, as iproute2 prints it. Not for the testbed
        with foreign routes (the route listing would be 100k lines)."""
        h = ("ip", "-n", self.host)
        snap = {
            "ip -4 rule": sh(*h, "-4", "rule").stdout,
            "ip -6 rule": sh(*h, "-6", "rule").stdout,
            "ip route show table all": sh(*h, "route", "show", "table", "all").stdout,
        }
        if with_sysctls:
            keys = [f"net.ipv4.conf.rail{k}.{key}" for k in range(RAILS) for key in ARP_SYSCTLS]
            snap["sysctl"] = sh("ip", "netns", "exec", self.host, "sysctl", *keys).stdout
        return snap


# ---------------------------------------------------------------------------
# What apply does, as iproute2 input
# ---------------------------------------------------------------------------


class Script:
    """The dry-run output of a from-scratch apply, split into: one `ip -batch`
    file (every route, family inferred, and the IPv4 rules), one `ip -6
    -batch` file (the IPv6 rules) and the sysctl assignments."""

    def __init__(self, dry_run: str, workdir: Path):
        main_lines, v6_rules, self.sysctls = [], [], []
        # The reset that undoes exactly this, per family: the owned rules
        # flushed, then every route of the script deleted by name, last
        # first. It reads no table, so foreign routes in main cost it
        # nothing (a `route flush table N` line of a batch reads the whole
        # of main: see Testbed.reset).
        routes: dict[str, list[str]] = {"-4": [], "-6": []}
        for line in dry_run.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            words = line.split()
            # Under --netns the script's commands name the namespace
            # (`ip -n NS ...`, `ip netns exec NS sysctl ...`): drop it, the
            # batch files run inside the namespace.
            if words[:3] == ["ip", "netns", "exec"]:
                words = words[4:]
            elif words[:2] == ["ip", "-n"]:
                words = ["ip"] + words[3:]
            if words[:2] == ["sysctl", "-w"] and len(words) == 3:
                self.sysctls.append(words[2])
            elif words[0] == "ip" and words[1] in ("-4", "-6") and words[2] in ("route", "rule"):
                cmd = " ".join(words[2:])
                (v6_rules if words[1:3] == ["-6", "rule"] else main_lines).append(cmd)
                if words[2:4] == ["route", "add"]:
                    routes[words[1]].append("route del " + " ".join(words[4:]))
            else:
                raise BenchError(f"unexpected line in the dry-run output: {line!r}")
        if not main_lines or not self.sysctls:
            raise BenchError(f"the dry-run output has no routes or no sysctls:\n{dry_run}")
        self.undo = {fam: [f"rule flush protocol {PROTO}"] + dels[::-1] for fam, dels in routes.items()}
        self.main_file = workdir / "apply.batch"
        self.main_file.write_text("\n".join(main_lines) + "\n")
        self.v6_rules_file = workdir / "apply-v6-rules.batch" if v6_rules else None
        if self.v6_rules_file:
            self.v6_rules_file.write_text("\n".join(v6_rules) + "\n")
        self.counts = (len(main_lines), len(v6_rules), len(self.sysctls))


# What a failed `route del` of an undo batch may say: the route is not there
# (ESRCH) or its table is not (yet): both mean "already undone".
UNDO_ABSENT = ("RTNETLINK answers: No such process", "Error: FIB table does not exist.")


def write_undo(script: Script, workdir: Path, tag: str) -> dict[str, Path]:
    files = {}
    for fam, lines in script.undo.items():
        files[fam] = workdir / f"undo-{tag}{fam}.batch"
        files[fam].write_text("\n".join(lines) + "\n")
    return files


def undo(host: str, files: dict[str, Path]) -> None:
    """Runs the undo batches (one `ip -force -batch` per family): a route
    already gone is fine, any other error is not."""
    for fam, f in files.items():
        p = sh("ip", "-n", host, fam, "-force", "-batch", str(f), check=False)
        other = [l for l in p.stderr.splitlines()
                 if l.strip() and l not in UNDO_ABSENT and not l.startswith("Command failed ")]
        if other:
            raise BenchError(f"ip -n {host} {fam} -force -batch {f} failed:\n{p.stdout}{p.stderr}")


def write_config(path: Path) -> None:
    parts = [
        "# bench/bench.py: every rail, IPv4 gateway; addresses taken from the host.\n"
    ]
    for k in range(RAILS):
        parts.append(f'[[interface]]\nname = "rail{k}"\ngateway = "{GATEWAY}"\n')
    path.write_text("\n".join(parts))


# ---------------------------------------------------------------------------
# The cases: each prepares untimed, then returns the ns of the timed part
# ---------------------------------------------------------------------------


class Bench:
    def __init__(self, binary: Path, state_dir: Path, config: Path, plain: Testbed, loaded: Testbed):
        self.roce_route = (str(binary), "--state-dir", str(state_dir))
        self.binary = str(binary)
        self.config = str(config)
        self.plain, self.loaded = plain, loaded
        # What a from-scratch apply does, as iproute2 input (see main).
        self.script: Script | None = None

    def apply(
        self, tb: Testbed, env: dict[str, str] | None = None, announce: bool = False
    ) -> tuple[int, subprocess.CompletedProcess]:
        told = () if announce else ("--no-announce",)
        return timed(*self.roce_route, "--netns", tb.host, "apply", *told, self.config, env=env)

    def profiled(self, tb: Testbed, from_scratch: bool) -> tuple[int, dict]:
        """One apply with ROCE_ROUTE_PROFILE=1: its wall time and its phases."""
        if from_scratch:
            tb.reset()
        else:
            self.ensure_applied(tb)
        ns, p = self.apply(tb, env={"ROCE_ROUTE_PROFILE": "1"})
        lines = [l for l in p.stderr.splitlines() if l.startswith(PROFILE_PREFIX)]
        if not lines:
            raise BenchError(f"no profile line on stderr (is {self.binary} older than the profile?):\n{p.stderr}")
        return ns, json.loads(lines[-1][len(PROFILE_PREFIX):])

    def ensure_applied(self, tb: Testbed) -> None:
        sh(*self.roce_route, "--netns", tb.host, "apply", "--no-announce", self.config)

    def dry_run(self, tb: Testbed) -> str:
        return sh(*self.roce_route, "--netns", tb.host, "apply", "--dry-run", self.config).stdout

    def apply_from_scratch(self, tb: Testbed, announce: bool = False) -> int:
        tb.reset()
        ns, p = self.apply(tb, announce=announce)
        if "in sync" in p.stdout:
            raise BenchError(f"apply from scratch changed nothing?\n{p.stdout}{p.stderr}")
        if announce and f" on {RAILS} rails to the peers" not in p.stdout:
            raise BenchError(f"apply did not tell the peers:\n{p.stdout}{p.stderr}")
        return ns

    def apply_noop(self, tb: Testbed) -> int:
        self.ensure_applied(tb)
        ns, p = self.apply(tb)
        if "in sync" not in p.stdout:
            raise BenchError(f"re-apply was not a no-op:\n{p.stdout}{p.stderr}")
        return ns

    def batch_processes(self, tb: Testbed) -> int:
        ns, _ = timed("ip", "-n", tb.host, "-batch", str(self.script.main_file))
        if self.script.v6_rules_file:
            ns6, _ = timed("ip", "-n", tb.host, "-6", "-batch", str(self.script.v6_rules_file))
            ns += ns6
        return ns

    def sysctl_process(self, tb: Testbed) -> int:
        ns, _ = timed("ip", "netns", "exec", tb.host, "sysctl", "-q", "-w", *self.script.sysctls)
        return ns

    # a..f, c1

    def case_a(self) -> int:
        return self.apply_from_scratch(self.plain)

    def case_b(self) -> int:
        return self.apply_noop(self.plain)

    def case_c(self) -> int:
        self.plain.reset()
        return self.batch_processes(self.plain)

    def case_c1(self) -> int:
        self.plain.reset()
        ns, _ = timed("ip", "-n", self.plain.host, "-batch", str(self.script.main_file))
        return ns

    def case_d(self) -> int:
        self.plain.reset()
        return self.batch_processes(self.plain) + self.sysctl_process(self.plain)

    def case_e(self) -> int:
        return self.apply_from_scratch(self.loaded)

    def case_g(self) -> int:
        return self.apply_from_scratch(self.plain, announce=True)

    def case_version(self) -> int:
        ns, _ = timed(self.binary, "--version")
        return ns

    def case_ip_version(self) -> int:
        ns, _ = timed("ip", "-V")
        return ns

    def case_f(self) -> int:
        return self.apply_noop(self.loaded)


def on_disk(case, disk: "Bench"):
    """The same case, run by the Bench whose state directory is on disk."""
    return lambda _tmpfs_bench: case(disk)


def cases(disk: "Bench") -> list:
    return [
        ("a", "roce-route apply, from scratch (state on tmpfs)", Bench.case_a),
        ("a'", "a, state on disk", on_disk(Bench.case_a, disk)),
        ("b", "roce-route apply, no-op re-apply (state on tmpfs)", Bench.case_b),
        ("b'", "b, state on disk", on_disk(Bench.case_b, disk)),
        ("c", "ip -batch (routes + v4 rules) + ip -6 -batch (v6 rules): 2 processes", Bench.case_c),
        ("c1", "one ip -batch process alone (routes + v4 rules; lower bound)", Bench.case_c1),
        ("d", "c + ip netns exec sysctl -w (full equivalent of a): 3 processes", Bench.case_d),
        ("e", f"a with {FOREIGN_ROUTES:,} foreign routes in main", Bench.case_e),
        ("e'", "e, state on disk", on_disk(Bench.case_e, disk)),
        ("f", f"b with {FOREIGN_ROUTES:,} foreign routes in main", Bench.case_f),
        ("f'", "f, state on disk", on_disk(Bench.case_f, disk)),
        ("g", "a, telling the peers as by default (2 rounds, 100 ms apart)", Bench.case_g),
        ("v", "roce-route --version (process start-up alone)", Bench.case_version),
        ("iv", "ip -V (ip's process start-up alone)", Bench.case_ip_version),
    ]


# (numerator, denominator, target or None)
RATIOS = [
    ("a", "d", 0.7),
    ("a'", "d", 0.7),
    ("b", "d", 0.5),
    ("b'", "d", 0.5),
    ("e", "a", 1.1),
    ("e'", "a'", 1.1),
    ("a", "c1", 1.2),
    ("b", "c1", 0.8),
    ("a", "c", None),
    ("f", "b", None),
    ("v", "a", None),
    ("v", "iv", None),
]


# ---------------------------------------------------------------------------
# Checks, measurement, report
# ---------------------------------------------------------------------------


def check_undo(bench: Bench, tb: Testbed, dry: str) -> None:
    """The reset undoes apply: after apply and reset, the dry run is the
    from-scratch one again (the namespace's name aside)."""
    bench.ensure_applied(tb)
    tb.reset()
    again = bench.dry_run(tb).replace(tb.host, bench.plain.host)
    if again != dry:
        diff = difflib.unified_diff(dry.splitlines(keepends=True), again.splitlines(keepends=True),
                                    "from scratch", f"{tb.host} after apply and reset")
        raise BenchError("the reset does not undo apply:\n" + "".join(diff))


def check_equivalent(bench: Bench) -> None:
    """c (and d) must leave exactly the state apply leaves; fail loudly if not."""
    tb = bench.plain
    tb.reset()
    bench.ensure_applied(tb)
    by_apply = tb.snapshot()
    tb.reset()
    bench.batch_processes(tb)
    by_batch = tb.snapshot(with_sysctls=False)
    bench.sysctl_process(tb)
    by_batch_and_sysctl = tb.snapshot()
    for what, got in [("c", by_batch), ("d", by_batch_and_sysctl)]:
        for key, text in got.items():
            if text != by_apply[key]:
                diff = difflib.unified_diff(
                    by_apply[key].splitlines(keepends=True), text.splitlines(keepends=True),
                    "after apply", f"after case {what}",
                )
                raise BenchError(
                    f"case {what} does not give the state apply gives: `{key}` differs\n"
                    + "".join(diff)
                )
    tb.reset()


def measure(bench: Bench, disk: Bench, rounds: int) -> dict[str, list[int]]:
    all_cases = cases(disk)
    samples: dict[str, list[int]] = {name: [] for name, _, _ in all_cases}
    for r in range(rounds):
        for name, _, fn in all_cases:
            samples[name].append(fn(bench))
        print(f"\rround {r + 1}/{rounds}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return samples


PROFILE_PREFIX = "roce-route profile: "


def profile(bench: Bench, rounds: int) -> dict[str, list[dict]]:
    """Runs a, b and e again, profiled (ROCE_ROUTE_PROFILE=1), interleaved."""
    out: dict[str, list[dict]] = {"a": [], "b": [], "e": []}
    for _ in range(rounds):
        for case, tb, scratch in (("a", bench.plain, True), ("b", bench.plain, False), ("e", bench.loaded, True)):
            ns, prof = bench.profiled(tb, scratch)
            prof["wall_us"] = ns / 1000
            out[case].append(prof)
    return out


def report_profile(profiles: dict[str, list[dict]], version_ns: float) -> None:
    """Where the time goes: median per phase of the profiled runs."""
    print("\n## Where the time goes (median of the profiled runs, µs)\n")
    phases = sorted({ph for runs in profiles.values() for r in runs for ph in r["phases"]})
    med = lambda xs: statistics.median(xs) if xs else 0.0  # noqa: E731
    cols = list(profiles)
    print("| part | " + " | ".join(f"{c} µs | {c} share" for c in cols) + " |")
    print("|---|" + "---:|---:|" * len(cols))
    rows: list[tuple[str, dict[str, float]]] = []
    walls = {c: med([r["wall_us"] for r in profiles[c]]) for c in cols}
    totals = {c: med([r["total_us"] for r in profiles[c]]) for c in cols}
    rows.append(("(for comparison, not in the sum) `--version`, a whole process", {c: version_ns / 1000 for c in cols}))
    rows.append(("start-up and exit outside main", {c: walls[c] - totals[c] for c in cols}))
    for ph in phases:
        rows.append((ph, {c: med([r["phases"].get(ph, {}).get("us", 0) for r in profiles[c]]) for c in cols}))
    rows.append(("rest of main (parse, plan, diff, output)", {
        c: totals[c] - sum(v[c] for name, v in rows[2:]) for c in cols}))
    rows.append(("whole process", walls))
    for name, v in rows:
        print(f"| {name} | " + " | ".join(f"{v[c]:.0f} | {100 * v[c] / walls[c]:.0f}%" for c in cols) + " |")


def ms(ns: float) -> str:
    return f"{ns / 1e6:.2f}"


def report(samples: dict[str, list[int]], rounds: int, binary: Path, script: Script,
           tmpfs: Path, disk: Path, disk_bench: "Bench") -> None:
    median = {k: statistics.median(v) for k, v in samples.items()}
    ipver = sh("ip", "-V").stdout.strip()
    print(f"kernel {platform.release()}, {os.cpu_count()} CPUs, {rounds} rounds (interleaved), "
          f"{ipver}")
    routes_and_v4_rules, v6_rules, sysctls = script.counts
    fs = {p: sh("stat", "-f", "-c", "%T", str(p)).stdout.strip() for p in (tmpfs, disk)}
    print(f"binary {binary}; {RAILS} rails; from scratch = {routes_and_v4_rules + v6_rules} "
          f"routes/rules + {sysctls} sysctls; state dirs in {tmpfs} ({fs[tmpfs]}) and "
          f"{disk} ({fs[disk]})\n")
    print("| case | what | median ms | p10 ms | p90 ms |")
    print("|---|---|---:|---:|---:|")
    for name, what, _ in cases(disk_bench):
        v = samples[name]
        q = statistics.quantiles(v, n=10, method="inclusive") if len(v) > 1 else [v[0]] * 9
        print(f"| {name} | {what} | {ms(median[name])} | {ms(q[0])} | {ms(q[8])} |")
    print("\n| ratio of medians | value | target | |")
    print("|---|---:|---|---|")
    for num, den, target in RATIOS:
        value = median[num] / median[den]
        if target is None:
            goal, verdict = "(info)", ""
        else:
            goal = f"≤ {target:.1f}"
            verdict = "met" if value <= target else f"MISSED by {(value / target - 1) * 100:.0f}%"
        print(f"| {num}/{den} | {value:.2f} | {goal} | {verdict} |")
    # Each side without its process's start-up and exit (info): what the
    # runs do, compared where the start of a process does not weigh in.
    # A difference of two noisy medians: c1 - iv may come out at or
    # below zero on a noisy run, and then has no ratio.
    run = {k: median[k] - median[start] for k, start in (("a", "v"), ("b", "v"), ("c1", "iv"))}
    per = lambda k: f"{run[k] / run['c1']:.2f}" if run["c1"] > 0 else "n/a"  # noqa: E731
    print(f"\nBeyond start-up (medians minus `--version` / `ip -V`): a {ms(run['a'])}, "
          f"b {ms(run['b'])}, c1 {ms(run['c1'])} ms; (a - v)/(c1 - iv) = {per('a')}, "
          f"(b - v)/(c1 - iv) = {per('b')} (info)")


def ensure_binary(path: Path) -> Path:
    if not path.exists():
        print(f"{path} is missing: cargo build --release", file=sys.stderr)
        subprocess.run(["cargo", "build", "--release"], cwd=REPO, check=True)
        if not path.exists():
            raise BenchError(f"cargo build --release did not produce {path}")
    for program in [path, shutil.which("ip")]:
        if program:
            as_read_from_disk(Path(program))
    return path


def as_read_from_disk(path: Path) -> None:
    """Drops `path` from the page cache (written back first), so that its next run reads it back
    from the disk, as a program installed long ago is read: a binary just built or copied runs
    from the pages its writer left, which map with fewer page faults (191 against 235 of a no-op
    apply here, the same bytes), so a fresh copy looked faster than the same binary read back.
    Both roce-route and ip are measured so. No effect on a tmpfs, whose pages are the file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def stop_on_signal(signum, _frame):
    # Turn SIGTERM/SIGHUP into an exception so that the namespaces are
    # deleted by the context managers, as on Ctrl-C.
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30, help="interleaved rounds (default 30)")
    ap.add_argument("--binary", type=Path, default=REPO / "target/release/roce-route",
                    help="roce-route binary (default target/release/roce-route; built if missing)")
    ap.add_argument("--tmpfs", type=Path, default=Path("/dev/shm"), metavar="DIR",
                    help="a tmpfs directory for one state directory (default /dev/shm, like /run)")
    ap.add_argument("--disk", type=Path, default=Path("/var/tmp"), metavar="DIR",
                    help="a directory on disk for the other state directory (default /var/tmp)")
    ap.add_argument("--no-profile", dest="profile", action="store_false",
                    help="skip the profiled runs (ROCE_ROUTE_PROFILE=1) that show where the time goes")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if os.geteuid() != 0:
        print("bench.py: must run as root (it creates network namespaces)", file=sys.stderr)
        return 2
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, stop_on_signal)
    state_dir = disk_dir = None
    try:
        binary = ensure_binary(args.binary.resolve())
        state_dir = Path(tempfile.mkdtemp(prefix="rrbench-state-", dir=args.tmpfs))
        disk_dir = Path(tempfile.mkdtemp(prefix="rrbench-state-", dir=args.disk))
        with tempfile.TemporaryDirectory(prefix="rrbench-") as tmp:
            work = Path(tmp)
            config = work / "rails.toml"
            write_config(config)
            print("building the testbeds (100k foreign routes take a few seconds)...",
                  file=sys.stderr)
            with Testbed("plain", work) as plain, \
                    Testbed("loaded", work, FOREIGN_ROUTES) as loaded:
                plain.reset()
                bench = Bench(binary, state_dir, config, plain, loaded)
                disk = Bench(binary, disk_dir, config, plain, loaded)
                dry = bench.dry_run(plain)
                script = bench.script = disk.script = Script(dry, work)
                for tb in (plain, loaded):
                    tb.undo_by(script)
                    check_undo(bench, tb, dry)
                check_equivalent(bench)
                samples = measure(bench, disk, args.rounds)
                profiles = profile(bench, args.rounds) if args.profile else None
        report(samples, args.rounds, binary, script, args.tmpfs, args.disk, disk)
        if profiles:
            report_profile(profiles, statistics.median(samples["v"]))
    except BenchError as e:
        print(f"bench.py: FAILED: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nbench.py: interrupted; namespaces deleted", file=sys.stderr)
        return 130
    finally:
        for d in (state_dir, disk_dir):
            if d:
                shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
