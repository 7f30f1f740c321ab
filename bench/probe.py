#!/usr/bin/env python3
"""Benchmark `probe` on a healthy host the size of a GPU server: 8 rails
against 64 peer addresses (512 pairs), all concurrently.

    sudo python3 bench/probe.py [--rounds 10] [--ipv6] [--binary PATH]

Two throwaway network namespaces, A and B, each with 8 rails (veths,
MTU 9000), all on one bridge (MTU 9000) in a third namespace; A's rail k
has 198.51.100.(10+k)/24, B's rail k eight addresses 198.51.100.(100+8k+i)
(with --ipv6 also 2001:db8:1::(10+k) and 2001:db8:1::(100+8k+i), and the
pairs double). roce-route is applied on both (a table and source rule per
rail, arp_ignore 1, arp_announce 2), so every pair is right and the
timeout (default 0.5 s) is never waited for: the run's length is what the
healthy pairs cost.

Measured, `--rounds` times: the wall time of `roce-route --json probe
CONFIG --peer ADDR,ADDR,...` (64 addresses), the probe's own `elapsed_ms` (the packet loop
only), and `frames_sent`. Each run must exit 0 with no problem on any
pair, or the benchmark stops and says which. Reported: median, p90 and
max of each. The namespaces are deleted on exit.

Python standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RAILS = 8
PER_RAIL = 8


def sh(*cmd: str) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r.stdout


def ip(ns: str, *args: str) -> str:
    return sh("ip", "-n", ns, *args)


def sysctl(ns: str, key: str, value: str) -> None:
    sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}={value}")


def build(tag: str, ipv6: bool) -> tuple[str, str, str, list[str], list[list[str]]]:
    a, b, s = f"{tag}-a", f"{tag}-b", f"{tag}-s"
    for ns in (a, b, s):
        sh("ip", "netns", "add", ns)
        ip(ns, "link", "set", "lo", "up")
        for conf in ("all", "default"):
            sysctl(ns, f"net/ipv6/conf/{conf}/accept_dad", "0")
    ip(s, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
    ip(s, "link", "set", "br0", "mtu", "9000", "up")
    a_addrs: list[str] = []
    b_addrs: list[list[str]] = []
    for k in range(RAILS):
        for side, ns in (("a", a), ("b", b)):
            name, port = f"rail{k}", f"{side}{k}"
            ip(ns, "link", "add", name, "type", "veth", "peer", "name", port, "netns", s)
            ip(ns, "link", "set", name, "mtu", "9000")
            ip(s, "link", "set", port, "mtu", "9000", "master", "br0", "up")
            if side == "a":
                addrs = [f"198.51.100.{10 + k}/24"] + ([f"2001:db8:1::{10 + k}/64"] if ipv6 else [])
                a_addrs.append(addrs)
            else:
                addrs = [f"198.51.100.{100 + 8 * k + i}/24" for i in range(PER_RAIL)]
                if ipv6:
                    addrs += [f"2001:db8:1::{100 + 8 * k + i}/64" for i in range(PER_RAIL)]
                b_addrs.append(addrs)
            for cidr in addrs:
                extra = ["nodad"] if ":" in cidr else []
                ip(ns, "addr", "add", cidr, "dev", name, *extra)
            ip(ns, "link", "set", name, "up")
    ip(s, "link", "set", "br0", "mtu", "9000")
    return a, b, s, a_addrs, b_addrs


def config(path: Path, rails: list[list[str]]) -> Path:
    blocks = []
    for k, addrs in enumerate(rails):
        listed = ", ".join(f'"{c}"' for c in addrs)
        blocks.append(f'[[interface]]\nname = "rail{k}"\naddresses = [{listed}]\ntable = {100 + k}\n')
    path.write_text("\n".join(blocks))
    return path


def rr(binary: Path, ns: str, state: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, ROCE_ROUTE_STATE_DIR=str(state))
    return subprocess.run([str(binary), "--netns", ns, *args], capture_output=True, text=True, env=env)


def summary(name: str, values: list[float], unit: str) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]
    return f"{name:<14} median {statistics.median(values):8.1f} {unit}  p90 {p90:8.1f} {unit}  max {values[-1]:8.1f} {unit}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--ipv6", action="store_true")
    ap.add_argument("--binary", type=Path, default=REPO / "target" / "release" / "roce-route")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (it makes network namespaces)")
    tag = f"rrbench-{os.getpid()}"
    namespaces = [f"{tag}-a", f"{tag}-b", f"{tag}-s"]
    with tempfile.TemporaryDirectory(prefix="roce-route-bench-") as tmp:
        tmpdir = Path(tmp)
        try:
            a, b, _, a_rails, b_rails = build(tag, args.ipv6)
            a_cfg = config(tmpdir / "a.toml", a_rails)
            b_cfg = config(tmpdir / "b.toml", b_rails)
            for ns, cfg in ((a, a_cfg), (b, b_cfg)):
                r = rr(args.binary, ns, tmpdir / f"state-{ns}", "apply", "--no-announce", str(cfg))
                if r.returncode != 0:
                    raise SystemExit(f"apply on {ns} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
            peers = [c.split("/")[0] for rail in b_rails for c in rail]
            time.sleep(0.5)  # links settled
            wall, loop, frames = [], [], []
            for _ in range(args.rounds):
                start = time.perf_counter()
                r = rr(args.binary, a, tmpdir / f"state-{a}", "--json", "probe", str(a_cfg), "--peer", ",".join(peers))
                took = (time.perf_counter() - start) * 1e3
                doc = json.loads(r.stdout)
                bad = [p for p in doc.get("probes", []) if p["problems"]]
                if r.returncode != 0 or bad:
                    raise SystemExit(
                        f"probe exited {r.returncode} with {len(bad)} bad pairs: "
                        f"{json.dumps(bad[:3], indent=1)}\n{r.stderr}"
                    )
                wall.append(took)
                loop.append(doc["elapsed_ms"])
                frames.append(doc["frames_sent"])
                pairs = len(doc["probes"])
            print(f"probe: {RAILS} rails x {len(peers)} peer addresses = {pairs} pairs, {args.rounds} rounds")
            print(summary("wall", wall, "ms"))
            print(summary("packet loop", loop, "ms"))
            print(summary("frames sent", frames, "  "))
        finally:
            for ns in namespaces:
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
