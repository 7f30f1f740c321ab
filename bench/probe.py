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

    sudo python3 bench/probe.py --fleet 16 [--rails 2] [--ipv6] [--rounds 3]

A fleet instead: 16 hosts (namespaces) of --rails rails each on one bridge, all
applied, every host probing at once with one shared `--peers` file that
lists every host's addresses (its own are skipped). Reported per round:
the wall time until the last host is done, and over all hosts the pairs
that are right, not verified and with problems, the frames sent, and the
neighbour entries added (each host's table before and after), split into
those a probed host learns from the others' requests (as for any traffic:
its reply needs them; only in the first round, they stay) and the probes'
own. The namespaces share one kernel, and so one neighbour table and its
gc_thresh3 (1024 by default, set in the host's own namespace only): every
pair makes its peer learn the prober's source, N x rails x (N-1) x rails
entries in all, which must stay under it (16 hosts: 2 rails). Real hosts
each have their own table (but see bench/README.md).

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


def hosts_and_switch(hosts: list[str], switch: str) -> None:
    """The namespaces (no DAD) and the switch's bridge br0, MTU 9000."""
    for ns in hosts + [switch]:
        sh("ip", "netns", "add", ns)
        ip(ns, "link", "set", "lo", "up")
        for conf in ("all", "default"):
            sysctl(ns, f"net/ipv6/conf/{conf}/accept_dad", "0")
    ip(switch, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
    ip(switch, "link", "set", "br0", "mtu", "9000", "up")


def build(tag: str, ipv6: bool) -> tuple[str, str, str, list[str], list[list[str]]]:
    a, b, s = f"{tag}-a", f"{tag}-b", f"{tag}-s"
    hosts_and_switch([a, b], s)
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


def neighbours(ns: str) -> set[str]:
    return {" ".join(l.split()[:3]) for l in ip(ns, "neigh", "show").splitlines() if l.strip()}


def fleet(args: argparse.Namespace, tmpdir: Path, tag: str, namespaces: list[str]) -> None:
    n, rails_n = args.fleet, args.rails
    if n * rails_n > 240:
        raise SystemExit(f"--fleet {n}: at most {240 // rails_n} hosts of {rails_n} rails fit in one /24")
    s = f"{tag}-s"
    hosts = [f"{tag}-h{i}" for i in range(n)]
    namespaces += [s] + hosts
    hosts_and_switch(hosts, s)
    rails: dict[str, list[list[str]]] = {}
    for i, h in enumerate(hosts):
        rails[h] = []
        for k in range(rails_n):
            name, port = f"rail{k}", f"h{i}r{k}"
            ip(h, "link", "add", name, "type", "veth", "peer", "name", port, "netns", s)
            ip(h, "link", "set", name, "mtu", "9000")
            ip(s, "link", "set", port, "mtu", "9000", "master", "br0", "up")
            x = 10 + rails_n * i + k
            addrs = [f"198.51.100.{x}/24"] + ([f"2001:db8:1::{x}/64"] if args.ipv6 else [])
            for cidr in addrs:
                ip(h, "addr", "add", cidr, "dev", name, *(["nodad"] if ":" in cidr else []))
            ip(h, "link", "set", name, "up")
            rails[h].append(addrs)
    for h in hosts:
        cfg = config(tmpdir / f"{h}.toml", rails[h])
        r = rr(args.binary, h, tmpdir / f"state-{h}", "apply", "--no-announce", str(cfg))
        if r.returncode != 0:
            raise SystemExit(f"apply on {h} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    peers = tmpdir / "fleet-peers.txt"
    peers.write_text("".join(c.split("/")[0] + "\n" for h in hosts for rail in rails[h] for c in rail))
    peer_args = ["--peers", str(peers)]
    if args.same_rail:
        # Every host's --self document (which NIC has which address), all
        # passed to every host, and --same-rail.
        peer_args = ["--same-rail"]
        for h in hosts:
            r = rr(args.binary, h, tmpdir / f"state-{h}", "--json", "probe", "--self", str(tmpdir / f"{h}.toml"))
            if r.returncode != 0:
                raise SystemExit(f"probe --self on {h} exited {r.returncode}:\n{r.stderr}")
            (tmpdir / f"self-{h}.json").write_text(r.stdout)
            peer_args += ["--peers", str(tmpdir / f"self-{h}.json")]
    time.sleep(1.0)  # links settled
    pairs_of = "rail-matched pairs (--same-rail)" if args.same_rail else "every pair"
    print(f"probe: a fleet of {n} hosts x {rails_n} rails on one bridge, every host probing the others at once, {pairs_of}")
    for round_ in range(args.rounds):
        before = {h: neighbours(h) for h in hosts}
        start = time.perf_counter()
        procs = [
            subprocess.Popen(
                [str(args.binary), "--netns", h, "--json", "probe", str(tmpdir / f"{h}.toml"), *peer_args],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=dict(os.environ, ROCE_ROUTE_STATE_DIR=str(tmpdir / f"state-{h}")),
            )
            for h in hosts
        ]
        outs = [p.communicate() for p in procs]
        wall = (time.perf_counter() - start) * 1e3
        right = unverified = bad = frames = 0
        codes: dict[int, int] = {}
        reasons: dict[str, int] = {}
        for p, (out, err) in zip(procs, outs):
            codes[p.returncode] = codes.get(p.returncode, 0) + 1
            try:
                doc = json.loads(out)
            except json.JSONDecodeError:
                raise SystemExit(f"probe exited {p.returncode} without JSON:\n{err}")
            frames += doc.get("frames_sent", 0)
            for pr in doc.get("probes", []):
                if pr["problems"]:
                    bad += 1
                elif pr["not_verified"]:
                    unverified += 1
                    key = pr["not_verified"][0][:60]
                    reasons[key] = reasons.get(key, 0) + 1
                else:
                    right += 1
        added = sum(len(neighbours(h) - before[h]) for h in hosts)
        # A probed host learns each prober's source from its ARP request
        # (or solicitation) on the rail that has the address, as for any
        # traffic: that many entries are the others', not the probe's own.
        per_prober = rails_n if args.same_rail else rails_n * rails_n
        learnt = 0 if round_ else n * (n - 1) * per_prober * (2 if args.ipv6 else 1)
        total = right + unverified + bad
        print(
            f"round {round_ + 1}: wall {wall:7.1f} ms; {total} pairs: {right} right, {unverified} not verified, "
            f"{bad} with problems; {frames} frames; exit codes {dict(sorted(codes.items()))}; "
            f"neighbour entries added {added} (learnt from the others' requests: {learnt}; the probes' own: "
            f"{added - learnt})"
        )
        for why, count in sorted(reasons.items(), key=lambda kv: -kv[1])[:3]:
            print(f"    not verified ({count}): {why}...")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--ipv6", action="store_true")
    ap.add_argument("--fleet", type=int, default=0, help="N hosts probing each other at once")
    ap.add_argument("--rails", type=int, default=RAILS, help="rails per host of the fleet")
    ap.add_argument("--same-rail", action="store_true", help="the fleet probes rail-matched pairs (--same-rail)")
    ap.add_argument("--binary", type=Path, default=REPO / "target" / "release" / "roce-route")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (it makes network namespaces)")
    if args.fleet:
        tag = f"rrfleet-{os.getpid()}"
        namespaces: list[str] = []
        with tempfile.TemporaryDirectory(prefix="roce-route-bench-") as tmp:
            try:
                fleet(args, Path(tmp), tag, namespaces)
            finally:
                for ns in namespaces:
                    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        return 0
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
