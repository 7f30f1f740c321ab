#!/usr/bin/env python3
"""What a node's processes cost roce-route (issue 26, the scale of the host).

An apply that changes something and `check` read the name of every process
(/proc/PID/comm) to warn of a network manager that would undo the change.
A Kubernetes GPU node runs hundreds to thousands of processes. This times,
on bench.py's testbed (8 rails), with --processes idle processes (`sleep`)
and without them, in alternating blocks of rounds:

    a  roce-route apply --no-announce, from scratch
    b  roce-route apply --no-announce, no-op re-apply (no scan: nothing changed)
    k  roce-route check CONFIG

and reports the medians, the ratio with/without, and the median of the
profiled `process scan` phase (ROCE_ROUTE_PROFILE=1) of a and k: the time
the command waited for its scan, which runs beside its other work on a
thread of its own (src/managers.rs, `Background`) when there is another
CPU, so that it is the part that did not overlap.

Run as root:  sudo python3 bench/processes.py [--processes 1000] [--rounds 10]
              [--binary target/release/roce-route]

Throwaway namespaces as in bench.py (deleted on exit, also on failure); the
processes are killed on exit. Python standard library only; reuses bench.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import (  # noqa: E402
    PROFILE_PREFIX,
    Bench,
    BenchError,
    Script,
    Testbed,
    ensure_binary,
    ms,
    stop_on_signal,
    timed,
    write_config,
)


class Idle:
    """`count` sleeping processes, killed and reaped on exit."""

    def __init__(self, count: int):
        self.count = count
        self.children: list[subprocess.Popen] = []

    def __enter__(self) -> "Idle":
        try:
            for _ in range(self.count):
                self.children.append(subprocess.Popen(["sleep", "3600"]))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for c in self.children:
            c.kill()
        for c in self.children:
            c.wait()
        self.children.clear()


def user_processes() -> int:
    """The PIDs of /proc that are not kthreadd's children (what the scan reads)."""
    kernel = set(Path("/proc/2/task/2/children").read_text().split()) | {"2"}
    return sum(1 for p in os.listdir("/proc") if p.isdigit() and p not in kernel)


def profiled(bench: Bench, tb: Testbed, *cmd: str, from_scratch: bool = False) -> dict:
    if from_scratch:
        tb.reset()
    _, p = timed(*bench.roce_route, "--netns", tb.host, *cmd, env={**os.environ, "ROCE_ROUTE_PROFILE": "1"})
    lines = [l for l in p.stderr.splitlines() if l.startswith(PROFILE_PREFIX)]
    if not lines:
        raise BenchError(f"no profile line:\n{p.stderr}")
    return json.loads(lines[-1][len(PROFILE_PREFIX):])


def block(bench: Bench, tb: Testbed, rounds: int, samples: dict, scans: dict, tag: str) -> None:
    check = ("check", bench.config)
    for _ in range(rounds):
        samples[f"a{tag}"].append(bench.apply_from_scratch(tb))
        samples[f"b{tag}"].append(bench.apply_noop(tb))
        ns, p = timed(*bench.roce_route, "--netns", tb.host, *check)
        if p.returncode != 0:
            raise BenchError(f"check failed:\n{p.stdout}{p.stderr}")
        samples[f"k{tag}"].append(ns)
        for case, prof in (("a", profiled(bench, tb, "apply", "--no-announce", bench.config, from_scratch=True)),
                           ("k", profiled(bench, tb, *check))):
            scans[f"{case}{tag}"].append(prof["phases"].get("process scan", {}).get("us", 0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=1000, help="idle processes added (default 1000)")
    ap.add_argument("--rounds", type=int, default=10, help="rounds per block; 2 blocks each (default 10)")
    ap.add_argument("--binary", type=Path, default=Path("target/release/roce-route"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("run as root: the testbed is made of network namespaces", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, stop_on_signal)
    binary = ensure_binary(args.binary)
    with tempfile.TemporaryDirectory(prefix="rr-procs-") as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        config = work / "config.toml"
        write_config(config)
        state = work / "state"
        state.mkdir()
        tb = stack.enter_context(Testbed("procs", work))
        bench = Bench(binary, state, config, tb, tb)
        bench.script = Script(bench.dry_run(tb), work)
        tb.undo_by(bench.script)
        samples = {f"{c}{t}": [] for c in "abk" for t in ("", "+")}
        scans = {f"{c}{t}": [] for c in "ak" for t in ("", "+")}
        counts = {}
        # Two blocks each, alternating, so that a drift of the machine
        # falls on both.
        for n in range(4):
            with_idle = n % 2 == 1
            with Idle(args.processes if with_idle else 0):
                counts["+" if with_idle else ""] = user_processes()
                block(bench, tb, args.rounds, samples, scans, "+" if with_idle else "")
            print(f"\rblock {n + 1}/4", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    print(f"binary {binary}; 8 rails; {os.cpu_count()} CPUs; {2 * args.rounds} rounds each")
    print(f"processes the scan reads: {counts['']} without, {counts['+']} with {args.processes} idle ones\n")
    print("| case | without ms | with ms | with/without | process scan µs without / with |")
    print("|---|---:|---:|---:|---|")
    for c, what in (("a", "apply, from scratch"), ("b", "apply, no-op"), ("k", "check")):
        m0, m1 = statistics.median(samples[c]), statistics.median(samples[c + "+"])
        scan = (f"{statistics.median(scans[c]):.0f} / {statistics.median(scans[c + '+']):.0f}"
                if c in "ak" else "(none)")
        print(f"| {c} {what} | {ms(m0)} | {ms(m1)} | {m1 / m0:.2f} | {scan} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
