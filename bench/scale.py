#!/usr/bin/env python3
"""Benchmark roce-route at the scale of the host (issue 26): a million
foreign routes, 32 dual-stack rails with 4 addresses each, 1,000 non-rail
interfaces.

Run as root:  sudo python3 bench/scale.py [--scenario {routes,rails,links,all}]
              [--rounds 10] [--binary target/release/roce-route]
              [--foreign-routes 1000000] [--rails 32] [--addrs 4] [--links 1000]

Everything happens in throwaway network namespaces (deleted on exit, also on
failure, Ctrl-C or SIGTERM); the host's own namespace is never touched. Each
scenario builds two testbeds, times the same commands on both in
interleaved rounds and reports the ratio of their medians (variant/plain):

    plain  bench.py's testbed: rail0..rail7 (veths whose peers sit on bridge
           br0 in a peer namespace), 198.51.100.1k/24 + 2001:db8:1::1k/64,
           gateway 198.51.100.1 on br0; config: 8 rails, IPv4 gateway

    routes the plain testbed plus --foreign-routes /32 blackhole routes in
           the main table (198.18.0.0/15, RFC 2544, holds 131,072; the rest
           continue in 10.0.0.0/8), added by one `ip -batch` file and
           counted before timing
    rails  --rails rails with --addrs IPv4 and --addrs IPv6 addresses each
           (all unique, in 198.51.100.0/24 and 2001:db8:1::/64; the first
           IPv4 address of a rail is its primary, the others secondary), the
           same bridge and gateway; config: every rail, IPv4 gateway
    links  the plain testbed plus --links veth pairs with CNI-like names
           (`cali` + 11 hex digits) in the host namespace, up, their peers
           (up) in a third namespace as a pod's end would be; every other
           one has a /32 in 10.244.0.0/16 (as watch.py --pods; none with
           --pod-ipv4 none, as on a Calico node), all have an IPv6
           link-local address. They stay outside the rails' subnet on
           purpose: an address in 198.51.100.0/24 on a non-rail interface
           makes apply warn of ARP flux (and `check` fail) - that is a
           misconfiguration to report, not a scale to measure.

The cases, each a whole process timed with perf_counter_ns around
subprocess.run (bench.py's timed()); every round runs each case once, in
this order, rotated by one case from one round to the next, so that no case
always follows the same one (with a fixed order, on a busy machine, case a,
first in every round, took 9.5 ms a run against 4.2 ms profiled later):

    a / A  roce-route apply --no-announce, from scratch (plain / variant)
    b / B  roce-route apply --no-announce, no-op re-apply
    k / K  roce-route check CONFIG (state and traffic lookups; exit 0)
    s / S  roce-route show
    r / R  roce-route rollback --dry-run, after an apply from scratch
           (untimed: the journal undone is a whole apply's)
    m / M  roce-route remove --dry-run, after an apply (untimed, a no-op
           when applied already)
    p / P  roce-route probe --self CONFIG (no frame is sent)
    c1/C1  one `ip -batch` process making the routes and IPv4 rules of the
           from-scratch dry run, after the same reset as a / A (bench.py's
           c1): C1/c1 is what the variant costs the kernel and a process
           that is not roce-route, the floor A/a is held against
    v      roce-route --version (process start-up alone)

"From scratch" is bench.py's reset, untimed, just before, the same on every
testbed: the owned rules flushed (protocol 234), every route of the
from-scratch dry run deleted by name (one `ip -force -batch` per family),
the rails' ARP sysctls 0. It reads no table: a `route flush table N` line
of a batch makes iproute2 dump every route, main's million included, so
the reset before A did far more work than the one before a (16 `ip`
processes against 3, or a 1.4 s batch); on 2026-12-05 that alone put
A/a at 1.02-1.04 against 0.98-1.02 with the same reset on both. Before timing, each testbed is checked once: apply
changes something, a second apply says "in sync", check exits 0, show
names every rail (and on the testbed with foreign routes, all of them are
still there). After the timed rounds, apply (from scratch and no-op), check
and show run --profile-rounds more times on both testbeds with
ROCE_ROUTE_PROFILE=1, and the report gives the median of each phase and of
each count (the route messages the kernel sent, the netlink sockets opened;
these runs are not in the timed medians).

With --scenario all, the scenarios run one after the other (rails, links,
routes: the namespace with a million routes is the last one, so that the
kernel's clean-up of it after deletion runs into no measurement), each with
its own testbeds, deleted before the next is built.

Python standard library only; reuses bench.py.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import (  # noqa: E402
    ARP_SYSCTLS,
    GATEWAY,
    PROFILE_PREFIX,
    PROTO,
    BenchError,
    Bench,
    Script,
    ensure_binary,
    ms,
    report_profile,
    sh,
    stop_on_signal,
    timed,
    undo,
    write_undo,
)

REPO = Path(__file__).resolve().parent.parent
PLAIN_RAILS = 8
# The foreign routes: 198.18.0.0/15 first (RFC 2544, benchmarking), then
# 10.0.0.0/8.
FOREIGN_RANGES = ((0xC6120000, 1 << 17), (0x0A000000, 1 << 24))
POD_NET = "10.244"
MAX_ADDRESSES = 245  # 198.51.100.10 .. 198.51.100.254


def dotted(a: int) -> str:
    return f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}"


def count_lines(*cmd: str) -> int:
    """Lines a command prints, counted on bytes (a million lines is fine)."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise BenchError(f"command failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr.decode()}")
    return p.stdout.count(b"\n")


# ---------------------------------------------------------------------------
# The testbed
# ---------------------------------------------------------------------------


class Bed:
    """bench.py's Testbed with any number of rails and addresses per rail,
    optionally with foreign routes in main and with non-rail veths. Every
    namespace is deleted in __exit__ (and when the build fails)."""

    def __init__(self, tag: str, workdir: Path, rails: int = PLAIN_RAILS, addrs: int = 1,
                 foreign_routes: int = 0, links: int = 0, pod_ipv4: bool = True, v6: bool = True):
        if rails * addrs > MAX_ADDRESSES:
            raise BenchError(f"{rails} rails x {addrs} addresses: at most {MAX_ADDRESSES} fit in 198.51.100.10-254")
        base = f"rrscale-{os.getpid()}-{tag}"
        self.host, self.peer, self.pods = f"{base}-h", f"{base}-p", f"{base}-c"
        self.tag = tag
        self.workdir = workdir / tag
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.rails, self.addrs = rails, addrs
        self.foreign_routes, self.links = foreign_routes, links
        # Every other veth with an IPv4 /32, or none (a Calico node's
        # host-side veths have only their IPv6 link-local address).
        self.pod_ipv4 = pod_ipv4
        # The rails' IPv6 addresses (none with --rails-ipv4-only).
        self.v6_rails = v6
        self.config = self.workdir / "rails.toml"
        self.undo_files: dict[str, Path] = {}
        self.created: list[str] = []
        self.tables: list[int] = []
        self.script: Script | None = None
        self.build_s = 0.0

    def __enter__(self) -> "Bed":
        t0 = time.perf_counter()
        try:
            self._build()
        except BaseException:
            self._delete()
            raise
        self.build_s = time.perf_counter() - t0
        return self

    def __exit__(self, *exc) -> None:
        self._delete()

    def _delete(self) -> None:
        for ns in reversed(self.created):
            sh("ip", "netns", "del", ns, check=False)
        self.created.clear()

    def rail_names(self) -> list[str]:
        return [f"rail{k}" for k in range(self.rails)]

    def v4(self, k: int, j: int) -> str:
        return f"198.51.100.{10 + k * self.addrs + j}"

    def v6(self, k: int, j: int) -> str:
        # As bench.py: the decimal digits read as hex (::10 .. ::254), unique.
        return f"2001:db8:1::{10 + k * self.addrs + j}"

    def batch(self, ns: str, name: str, lines: list[str], *opts: str) -> None:
        path = self.workdir / name
        path.write_text("\n".join(lines) + "\n")
        sh("ip", "-n", ns, *opts, "-batch", str(path))

    def _build(self) -> None:
        spaces = [self.host, self.peer] + ([self.pods] if self.links else [])
        for ns in spaces:
            sh("ip", "netns", "add", ns)
            self.created.append(ns)
            # No duplicate address detection: link-local addresses (and
            # their local routes) are final at once, as in bench.py.
            sh("ip", "netns", "exec", ns, "sysctl", "-qw",
               "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
        self.batch(self.peer, "peer-bridge.batch", [
            "link add br0 type bridge",
            f"addr add {GATEWAY}/24 dev br0",
            "addr add 2001:db8:1::1/64 dev br0 nodad",
            "link set br0 up",
        ])
        host = ["link set lo up"]
        for k, rail in enumerate(self.rail_names()):
            host.append(f"link add {rail} type veth peer name p{k} netns {self.peer}")
            for j in range(self.addrs):
                host.append(f"addr add {self.v4(k, j)}/24 dev {rail}")
                if self.v6_rails:
                    host.append(f"addr add {self.v6(k, j)}/64 dev {rail} nodad")
            host.append(f"link set {rail} up")
        self.batch(self.host, "host-rails.batch", host)
        self.batch(self.peer, "peer-ports.batch",
                   [f"link set p{k} master br0 up" for k in range(self.rails)])
        if self.links:
            self._add_links()
        if self.foreign_routes:
            self._add_foreign_routes()
        self.config.write_text(self._config_text())

    def _config_text(self) -> str:
        parts = [f"# bench/scale.py: {self.rails} rails, IPv4 gateway; addresses taken from the host.\n"]
        for rail in self.rail_names():
            parts.append(f'[[interface]]\nname = "{rail}"\ngateway = "{GATEWAY}"\n')
        return "\n".join(parts)

    def link_names(self) -> list[str]:
        names = [f"cali{hashlib.sha256(f'pod{i}'.encode()).hexdigest()[:11]}" for i in range(self.links)]
        if len(set(names)) != len(names):
            raise BenchError("two CNI-like names collide; change the hash input")
        return names

    def _add_links(self) -> None:
        if self.links > 250 * 256:
            raise BenchError(f"--links {self.links}: at most {250 * 256} addresses in {POD_NET}.0.0/16")
        host, pods = [], []
        for i, name in enumerate(self.link_names()):
            host.append(f"link add {name} type veth peer name eth{i} netns {self.pods}")
            if self.pod_ipv4 and i % 2 == 0:
                host.append(f"addr add {POD_NET}.{i // 250}.{1 + i % 250}/32 dev {name}")
            host.append(f"link set {name} up")
            pods.append(f"link set eth{i} up")
        self.batch(self.host, "host-links.batch", host)
        self.batch(self.pods, "pods.batch", pods)
        got = count_lines("ip", "-n", self.host, "-o", "link", "show")
        want = 1 + self.rails + self.links
        if got != want:
            raise BenchError(f"{self.host}: expected {want} links, found {got}")

    def _add_foreign_routes(self) -> None:
        n = self.foreign_routes
        if n > sum(size for _, size in FOREIGN_RANGES):
            raise BenchError(f"--foreign-routes {n}: 198.18.0.0/15 and 10.0.0.0/8 hold fewer /32s")
        path = self.workdir / "foreign.batch"
        with path.open("w") as f:
            left = n
            for first, size in FOREIGN_RANGES:
                take = min(left, size)
                f.writelines(f"route add blackhole {dotted(first + i)}/32\n" for i in range(take))
                left -= take
        sh("ip", "-n", self.host, "-batch", str(path))
        path.unlink()
        got = self.count_foreign()
        if got != n:
            raise BenchError(f"{self.host}: expected {n} blackhole routes in main, found {got}")

    def count_foreign(self) -> int:
        return count_lines("ip", "-n", self.host, "-4", "route", "show", "table", "main", "type", "blackhole")

    # --- state --------------------------------------------------------------

    def set_tables(self, dry_run: str) -> None:
        """The rails' tables, as the from-scratch dry run names them, and the
        reset that undoes that dry run (bench.py's Script.undo)."""
        tables = sorted({int(t) for t in re.findall(r"\btable (\d+)\b", dry_run)})
        if len(tables) != self.rails:
            raise BenchError(f"{self.tag}: the dry run names {len(tables)} tables for {self.rails} rails:\n{dry_run}")
        self.tables = tables
        self.undo_files = write_undo(Script(dry_run, self.workdir), self.workdir, self.tag)

    def reset(self) -> None:
        """Back to the un-applied state: no proto-234 rules, the dry run's
        routes deleted by name (both families; no table is read, so the
        million routes in main cost this reset nothing, see bench.py's
        Testbed.reset), the rails' ARP sysctls 0."""
        if not self.undo_files:
            raise BenchError("reset before the tables are known")
        undo(self.host, self.undo_files)
        zero = [f"net.ipv4.conf.{r}.{key}=0" for r in self.rail_names() for key in ARP_SYSCTLS]
        sh("ip", "netns", "exec", self.host, "sysctl", "-q", "-w", *zero)

    def describe(self) -> str:
        extra = []
        if self.foreign_routes:
            extra.append(f"{self.foreign_routes:,} foreign /32 blackholes in main")
        if self.links:
            v4 = self.links // 2 + self.links % 2 if self.pod_ipv4 else 0
            extra.append(f"{self.links:,} non-rail veths ({v4} with an IPv4 /32)")
        counts = ""
        if self.script:
            routes_and_v4_rules, v6_rules, sysctls = self.script.counts
            counts = f"; from scratch = {routes_and_v4_rules + v6_rules} routes/rules + {sysctls} sysctls"
        v6 = f" + {self.addrs} IPv6" if self.v6_rails else ""
        return (f"{self.rails} rails x {self.addrs} IPv4{v6} addresses"
                + "".join(f", {e}" for e in extra) + counts + f"; built in {self.build_s:.1f} s")


# ---------------------------------------------------------------------------
# The commands on one testbed
# ---------------------------------------------------------------------------


class Target:
    """roce-route on one testbed with its own config; apply as bench.py's
    Bench does it (the same reset, the same checks)."""

    def __init__(self, binary: Path, state_dir: Path, bed: Bed):
        self.bed = bed
        self.bench = Bench(binary, state_dir, bed.config, bed, bed)
        self.rr = (str(binary), "--state-dir", str(state_dir), "--netns", bed.host)
        self.config = str(bed.config)
        self.apply_warnings: list[str] = []

    def scratch(self) -> int:
        return self.bench.apply_from_scratch(self.bed)

    def noop(self) -> int:
        return self.bench.apply_noop(self.bed)

    def batch(self) -> int:
        """bench.py's c1 on this bed: after the same reset as scratch, one
        `ip -batch` process makes the routes and IPv4 rules of the dry run.
        Its ratio between the beds is what the kernel and a process pay for
        the variant, with roce-route out of it."""
        self.bed.reset()
        ns, _ = timed("ip", "-n", self.bed.host, "-batch", str(self.bed.script.main_file))
        return ns

    def check(self) -> int:
        ns, p = timed(*self.rr, "check", self.config)  # raises unless exit 0
        if "in sync" not in p.stdout:
            raise BenchError(f"check exited 0 but did not say in sync:\n{p.stdout}{p.stderr}")
        return ns

    def show(self) -> int:
        ns, p = timed(*self.rr, "show")
        shown = sum(1 for line in p.stdout.splitlines() if re.match(r"rail\d+\s+table \d+", line))
        if shown != self.bed.rails:
            raise BenchError(f"show named {shown} of {self.bed.rails} rails:\n{p.stdout[:2000]}")
        return ns

    def rollback_dry(self) -> int:
        """rollback --dry-run after an apply from scratch (untimed, so that
        the journal is a whole one whatever case came before): reads the
        journals and the lock, renders the undo steps."""
        self.bed.reset()
        self.bench.apply(self.bed)
        ns, p = timed(*self.rr, "rollback", "--dry-run")
        if "would undo the apply" not in p.stdout:
            raise BenchError(f"rollback --dry-run undoes no apply:\n{p.stdout[:2000]}{p.stderr}")
        return ns

    def remove_dry(self) -> int:
        """remove --dry-run after an apply: reads the owned rules and
        tables and the recorded sysctls."""
        self.bench.ensure_applied(self.bed)
        ns, p = timed(*self.rr, "remove", "--dry-run")
        rules = sum(1 for line in p.stdout.splitlines() if " rule del " in line)
        if rules != (2 if self.bed.v6_rails else 1) * self.bed.rails * self.bed.addrs:
            raise BenchError(f"remove --dry-run deletes {rules} rules:\n{p.stdout[:2000]}{p.stderr}")
        return ns

    def probe_self(self) -> int:
        """probe --self CONFIG: this host's rails with their hardware
        addresses and MTUs (no frame sent)."""
        ns, p = timed(*self.rr, "probe", "--self", self.config)
        shown = sum(1 for line in p.stdout.splitlines() if re.match(r"rail\d+\s", line))
        if shown != self.bed.rails:
            raise BenchError(f"probe --self named {shown} of {self.bed.rails} rails:\n{p.stdout[:2000]}")
        return ns

    def verify(self) -> None:
        """Once, before timing: the dry run has the expected shape, a
        from-scratch apply changes something, a second one is in sync,
        check exits 0 and show names every rail."""
        bed = self.bed
        dry = sh(*self.rr, "apply", "--dry-run", self.config).stdout
        bed.set_tables(dry)
        bed.reset()
        dry = sh(*self.rr, "apply", "--dry-run", self.config).stdout
        bed.script = Script(dry, bed.workdir)
        v4_rules = sum(1 for l in dry.splitlines() if " -4 rule add " in l)
        v6_rules = sum(1 for l in dry.splitlines() if " -6 rule add " in l)
        want = bed.rails * bed.addrs
        if (v4_rules, v6_rules) != (want, want if bed.v6_rails else 0):
            raise BenchError(f"{bed.tag}: the dry run has {v4_rules} IPv4 and {v6_rules} IPv6 rules, "
                             f"expected {want} and {want if bed.v6_rails else 0} (one per address):\n{dry}")
        _, p = self.bench.apply(bed)
        if "in sync" in p.stdout:
            raise BenchError(f"{bed.tag}: apply from scratch changed nothing?\n{p.stdout}{p.stderr}")
        self.apply_warnings = [l for l in p.stderr.splitlines() if "warning" in l]
        _, p = self.bench.apply(bed)
        if "in sync" not in p.stdout:
            raise BenchError(f"{bed.tag}: the second apply was not in sync:\n{p.stdout}{p.stderr}")
        self.check()
        self.show()
        if bed.foreign_routes:
            got = bed.count_foreign()
            if got != bed.foreign_routes:
                raise BenchError(f"{bed.host}: {got} blackhole routes in main after apply, "
                                 f"expected {bed.foreign_routes}")
        bed.reset()
        again = sh(*self.rr, "apply", "--dry-run", self.config).stdout
        if again != dry:
            diff = difflib.unified_diff(dry.splitlines(keepends=True), again.splitlines(keepends=True),
                                        "before the first apply", "after apply and reset")
            raise BenchError(f"{bed.tag}: the reset does not undo apply:\n" + "".join(diff))

    def profiled_scratch(self) -> dict:
        ns, prof = self.bench.profiled(self.bed, True)
        prof["wall_us"] = ns / 1000
        return prof

    def profiled_noop(self) -> dict:
        ns, prof = self.bench.profiled(self.bed, False)
        prof["wall_us"] = ns / 1000
        return prof

    def _profiled(self, *cmd: str) -> dict:
        self.bench.ensure_applied(self.bed)
        ns, p = timed(*self.rr, *cmd, env={"ROCE_ROUTE_PROFILE": "1"})
        lines = [l for l in p.stderr.splitlines() if l.startswith(PROFILE_PREFIX)]
        if not lines:
            raise BenchError(f"no profile line on stderr of {' '.join(cmd)}:\n{p.stderr}")
        prof = json.loads(lines[-1][len(PROFILE_PREFIX):])
        prof["wall_us"] = ns / 1000
        return prof

    def profiled_check(self) -> dict:
        return self._profiled("check", self.config)

    def profiled_show(self) -> dict:
        return self._profiled("show")


# ---------------------------------------------------------------------------
# A scenario: two testbeds, interleaved rounds, report
# ---------------------------------------------------------------------------


class Scenario:
    def __init__(self, name: str, variant_label: str, variant: dict, target: float | None):
        self.name, self.variant_label, self.variant, self.target = name, variant_label, variant, target


def scenarios(args) -> dict[str, Scenario]:
    return {
        "rails": Scenario(
            "rails", f"{args.rails} rails x {args.addrs} addresses, dual-stack",
            {"rails": args.rails, "addrs": args.addrs}, None),
        "links": Scenario(
            "links", f"{args.links:,} non-rail veths",
            {"links": args.links, "pod_ipv4": args.pod_ipv4 == "half"}, None),
        "routes": Scenario(
            "routes", f"{args.foreign_routes:,} foreign routes in main",
            {"foreign_routes": args.foreign_routes}, 1.05),
    }


def quantiles(v: list[int]) -> tuple[float, float, float]:
    q = statistics.quantiles(v, n=10, method="inclusive") if len(v) > 1 else [v[0]] * 9
    return statistics.median(v), q[0], q[8]


def run_scenario(sc: Scenario, args, binary: Path, state_dir: Path, work: Path) -> None:
    times: dict[str, float] = {}
    t_start = time.perf_counter()
    print(f"[{sc.name}] building the testbeds ({sc.variant_label})...", file=sys.stderr, flush=True)
    with contextlib.ExitStack() as stack:
        v6 = not args.rails_ipv4_only
        plain = stack.enter_context(Bed(f"{sc.name}-plain", work, v6=v6))
        var = stack.enter_context(Bed(f"{sc.name}-var", work, v6=v6, **sc.variant))
        times["build"] = time.perf_counter() - t_start
        p, v = Target(binary, state_dir, plain), Target(binary, state_dir, var)
        t0 = time.perf_counter()
        for t in (p, v):
            t.verify()
        times["verify"] = time.perf_counter() - t0
        cases = [
            ("a", f"apply, from scratch: plain ({PLAIN_RAILS} rails)", p.scratch),
            ("A", f"apply, from scratch: {sc.variant_label}", v.scratch),
            ("b", "apply, no-op re-apply: plain", p.noop),
            ("B", f"apply, no-op re-apply: {sc.variant_label}", v.noop),
            ("k", "check CONFIG: plain", p.check),
            ("K", f"check CONFIG: {sc.variant_label}", v.check),
            ("c1", "one `ip -batch` (routes, IPv4 rules) after the same reset: plain", p.batch),
            ("C1", f"the same `ip -batch`: {sc.variant_label}", v.batch),
            ("s", "show: plain", p.show),
            ("S", f"show: {sc.variant_label}", v.show),
            ("r", "rollback --dry-run, after an apply: plain", p.rollback_dry),
            ("R", f"rollback --dry-run: {sc.variant_label}", v.rollback_dry),
            ("m", "remove --dry-run, after an apply: plain", p.remove_dry),
            ("M", f"remove --dry-run: {sc.variant_label}", v.remove_dry),
            ("p", "probe --self CONFIG: plain", p.probe_self),
            ("P", f"probe --self CONFIG: {sc.variant_label}", v.probe_self),
            ("v", "roce-route --version (process start-up alone)",
             lambda: timed(str(binary), "--version")[0]),
        ]
        samples: dict[str, list[int]] = {name: [] for name, _, _ in cases}
        t0 = time.perf_counter()
        for r in range(args.rounds):
            # Each round starts one case later than the one before, so that
            # no case always follows the same one.
            for name, _, fn in cases[r % len(cases):] + cases[:r % len(cases)]:
                samples[name].append(fn())
            print(f"\r[{sc.name}] round {r + 1}/{args.rounds}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        times["rounds"] = time.perf_counter() - t0
        profiles: dict[str, list[dict]] = {}
        if args.profile_rounds:
            t0 = time.perf_counter()
            runs = [("a", p.profiled_scratch), ("b", p.profiled_noop), ("A", v.profiled_scratch),
                    ("B", v.profiled_noop), ("k", p.profiled_check), ("K", v.profiled_check),
                    ("s", p.profiled_show), ("S", v.profiled_show)]
            profiles = {name: [] for name, _ in runs}
            for _ in range(args.profile_rounds):
                for name, fn in runs:
                    profiles[name].append(fn())
            times["profile"] = time.perf_counter() - t0
        if var.foreign_routes:
            left = var.count_foreign()
            if left != var.foreign_routes:
                raise BenchError(f"{var.host}: {left} blackhole routes left after the rounds, "
                                 f"expected {var.foreign_routes}")
        t0 = time.perf_counter()
    times["delete"] = time.perf_counter() - t0
    times["total"] = time.perf_counter() - t_start
    report(sc, args, binary, plain, var, cases, samples, profiles, times, (p, v))


def report(sc: Scenario, args, binary: Path, plain: Bed, var: Bed, cases, samples, profiles, times, targets) -> None:
    print(f"\n## Scenario {sc.name}: {sc.variant_label}\n")
    print(f"kernel {platform.release()}, {os.cpu_count()} CPUs, {args.rounds} rounds (interleaved), "
          f"{sh('ip', '-V').stdout.strip()}")
    print(f"binary {binary}")
    print(f"plain: {plain.describe()}")
    print(f"variant: {var.describe()}")
    print("wall time: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items())
          + " (delete: `ip netns del`; the kernel frees a namespace after it returns)\n")
    for t in targets:
        if t.apply_warnings:
            print(f"note: apply on {t.bed.tag} warned:\n" + "\n".join(f"    {w}" for w in t.apply_warnings) + "\n")
    print("| case | what | median ms | p10 ms | p90 ms |")
    print("|---|---|---:|---:|---:|")
    med = {}
    for name, what, _ in cases:
        m, p10, p90 = quantiles(samples[name])
        med[name] = m
        print(f"| {name} | {what} | {ms(m)} | {ms(p10)} | {ms(p90)} |")
    print("\n| ratio of medians | value | target | |")
    print("|---|---:|---|---|")
    for num, den, target in (("A", "a", sc.target), ("C1", "c1", None), ("B", "b", None), ("K", "k", None),
                             ("S", "s", None), ("R", "r", None), ("M", "m", None), ("P", "p", None)):
        value = med[num] / med[den]
        if target is None:
            goal, verdict = "(info)", ""
        else:
            goal = f"≤ {target:.2f}"
            verdict = "met" if value <= target else f"MISSED by {(value / target - 1) * 100:.0f}%"
        print(f"| {num}/{den} | {value:.2f} | {goal} | {verdict} |")
    if profiles:
        for group, what in ((("a", "b", "A", "B"), "apply"), (("k", "K", "s", "S"), "check and show")):
            print(f"\n{args.profile_rounds} profiled runs of each ({what}; lower case: plain, "
                  f"upper case: {sc.variant_label}):")
            report_profile({c: profiles[c] for c in group}, med["v"])
        cols = list(profiles)
        print("\n| count (median of the profiled runs) | " + " | ".join(cols) + " |")
        print("|---|" + "---:|" * len(cols))
        keys = sorted({k for runs in profiles.values() for r in runs for k in r.get("counts", {})})
        meaning = {"routes_read": "route messages the kernel sent",
                   "netlink_sockets": "netlink sockets opened for dumps, lookups and changes",
                   "asks": "requests that are not dumps: links by name, route lookups",
                   "ask_reads": "datagrams read for those: one each, their answer"}
        for k in keys:
            vals = [statistics.median([r.get("counts", {}).get(k, 0) for r in profiles[c]]) for c in cols]
            label = f"{k} ({meaning[k]})" if k in meaning else k
            print(f"| {label} | " + " | ".join(f"{x:.0f}" for x in vals) + " |")
        vals = [statistics.median([r["phases"].get("dumps", {}).get("n", 0) for r in profiles[c]]) for c in cols]
        print("| `dumps` phases timed (dumps run at once count once) | "
              + " | ".join(f"{x:.0f}" for x in vals) + " |")
    sys.stdout.flush()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", choices=("routes", "rails", "links", "all"), default="all",
                    help="which scenario (default all: rails, links, routes, one after the other)")
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    ap.add_argument("--profile-rounds", type=int, default=5,
                    help="profiled runs (ROCE_ROUTE_PROFILE=1) of each apply, check and show after the "
                         "rounds (default 5; 0: none)")
    ap.add_argument("--binary", type=Path, default=REPO / "target/release/roce-route",
                    help="roce-route binary (default target/release/roce-route; built if missing)")
    ap.add_argument("--foreign-routes", type=int, default=1_000_000,
                    help="routes: /32 blackholes in main (default 1,000,000)")
    ap.add_argument("--rails", type=int, default=32, help="rails: rails (default 32)")
    ap.add_argument("--addrs", type=int, default=4, help="rails: IPv4 and IPv6 addresses per rail (default 4)")
    ap.add_argument("--links", type=int, default=1000, help="links: non-rail veths (default 1000)")
    ap.add_argument("--pod-ipv4", choices=("half", "none"), default="half",
                    help="links: an IPv4 /32 on every other veth (default), or on none, as on a Calico "
                         "node, whose host-side veths have only their IPv6 link-local address")
    ap.add_argument("--rails-ipv4-only", action="store_true",
                    help="the rails of both testbeds without IPv6 addresses (an IPv4 RoCE fabric)")
    ap.add_argument("--tmpfs", type=Path, default=Path("/dev/shm"), metavar="DIR",
                    help="where the private state directory goes (default /dev/shm, like /run)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.rails < 1 or args.addrs < 1 or args.links < 1 or args.foreign_routes < 1:
        ap.error("--rails, --addrs, --links and --foreign-routes must be at least 1")
    if args.rails * args.addrs > MAX_ADDRESSES:
        ap.error(f"--rails x --addrs must be at most {MAX_ADDRESSES} (198.51.100.10-254)")
    if os.geteuid() != 0:
        print("scale.py: must run as root (it creates network namespaces)", file=sys.stderr)
        return 2
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, stop_on_signal)
    all_sc = scenarios(args)
    chosen = list(all_sc) if args.scenario == "all" else [args.scenario]
    state_dir = None
    try:
        binary = ensure_binary(args.binary.resolve())
        state_dir = Path(tempfile.mkdtemp(prefix="rrscale-state-", dir=args.tmpfs))
        with tempfile.TemporaryDirectory(prefix="rrscale-") as tmp:
            print(f"# roce-route at scale (bench/scale.py, issue 26)")
            for name in chosen:
                run_scenario(all_sc[name], args, binary, state_dir, Path(tmp))
    except BenchError as e:
        print(f"scale.py: FAILED: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nscale.py: interrupted; namespaces deleted", file=sys.stderr)
        return 130
    finally:
        if state_dir:
            shutil.rmtree(state_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
