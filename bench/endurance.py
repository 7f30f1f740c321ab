#!/usr/bin/env python3
"""Endurance benchmark: does an apply/check/rollback round get slower or
bigger over time?

    sudo python3 bench/endurance.py [--rails 64] [--rounds 100] [--binary PATH]

Builds a private namespace with RAILS veth rails, two IPv4 addresses each
(198.51.100.x/24 and 203.0.113.x/24; peers in a second namespace), then runs
ROUNDS rounds of `apply`, `check`, `rollback`, timing each process and
reading its peak RSS (GNU time; wall times include its small fork). Prints the medians of the first and the last
ten rounds and their ratio. tests/endurance.rs asserts the state side of
the same loop (host and state directory as before, every round); timings
and memory are measured here, never asserted in a test. Needs GNU time
(Debian package `time`), which the tests do not.
Both namespaces and the state directory are deleted on exit.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import BenchError, ensure_binary, sh  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TIME = "/usr/bin/time"  # GNU time (Debian package `time`)


def run(cmd: list[str], env: dict[str, str], rss_file: Path) -> tuple[float, int, int]:
    """Runs cmd under GNU time; returns (wall seconds, exit code, peak RSS in
    KiB). wait4's ru_maxrss of a child forked from Python would report
    Python's own size: GNU time forks the command from a small process."""
    start = time.perf_counter()
    proc = subprocess.run([TIME, "-f", "%M", "-o", str(rss_file), *cmd],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - start
    return wall, proc.returncode, int(rss_file.read_text().split()[-1])


class Namespaces:
    def __init__(self, rails: int):
        self.rails = rails
        self.host = f"rrendure-{os.getpid()}-h"
        self.peer = f"rrendure-{os.getpid()}-p"

    def __enter__(self) -> "Namespaces":
        try:
            for ns in (self.host, self.peer):
                sh("ip", "netns", "add", ns)
            h = ("ip", "-n", self.host)
            sh(*h, "link", "set", "lo", "up")
            for k in range(self.rails):
                sh(*h, "link", "add", f"rail{k}", "type", "veth", "peer", "name", f"p{k}", "netns", self.peer)
                sh(*h, "addr", "add", f"198.51.100.{10 + k}/24", "dev", f"rail{k}")
                sh(*h, "addr", "add", f"203.0.113.{10 + k}/24", "dev", f"rail{k}")
                sh(*h, "link", "set", f"rail{k}", "up")
                sh("ip", "-n", self.peer, "link", "set", f"p{k}", "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for ns in (self.host, self.peer):
            sh("ip", "netns", "del", ns, check=False)

    def config(self) -> str:
        return "".join(
            f'[[interface]]\nname = "rail{k}"\n'
            f'addresses = ["198.51.100.{10 + k}/24", "203.0.113.{10 + k}/24"]\n\n'
            for k in range(self.rails)
        )


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rails", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--binary", type=Path, default=REPO / "target/release/roce-route")
    args = ap.parse_args()
    if args.rails > 200 or args.rounds < 20:
        raise BenchError("use at most 200 rails (the /24s hold them) and at least 20 rounds")
    binary = ensure_binary(args.binary)
    if not os.access(TIME, os.X_OK):
        raise BenchError(f"{TIME} is missing: apt-get install time")
    work = Path(tempfile.mkdtemp(prefix="rrendure-"))
    env = dict(os.environ, ROCE_ROUTE_STATE_DIR=str(work / "state"))
    try:
        with Namespaces(args.rails) as ns:
            cfg = work / "rails.toml"
            cfg.write_text(ns.config())
            base = [str(binary), "--netns", ns.host]
            rounds: list[dict[str, tuple[float, int]]] = []
            for r in range(args.rounds):
                round_ = {}
                for name, cmd in (("apply", ["apply", "--no-announce", str(cfg)]),
                                  ("check", ["check", str(cfg)]),
                                  ("rollback", ["rollback"])):
                    wall, code, rss = run(base + cmd, env, work / "rss")
                    if code != 0:
                        raise BenchError(f"round {r + 1}: {name} exited {code}")
                    round_[name] = (wall, rss)
                rounds.append(round_)
        first, last = rounds[:10], rounds[-10:]
        print(f"{args.rails} rails x 2 addresses, {args.rounds} rounds of apply/check/rollback, "
              f"kernel {os.uname().release}, {os.cpu_count()} CPUs\n")
        print("| process | first 10 rounds: median ms | last 10: median ms | last/first | peak RSS KiB first/last |")
        print("|---|---:|---:|---:|---:|")
        for name in ("apply", "check", "rollback"):
            a = median_ms([r[name][0] for r in first])
            b = median_ms([r[name][0] for r in last])
            rss_a = max(r[name][1] for r in first)
            rss_b = max(r[name][1] for r in last)
            print(f"| {name} | {a:.2f} | {b:.2f} | {b / a:.2f} | {rss_a} / {rss_b} |")
        total_a = median_ms([sum(v[0] for v in r.values()) for r in first])
        total_b = median_ms([sum(v[0] for v in r.values()) for r in last])
        print(f"| round | {total_a:.2f} | {total_b:.2f} | {total_b / total_a:.2f} | |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"endurance.py: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
