#!/usr/bin/env python3
"""Benchmark what reading RDMA costs `check`, and how long `discover` and
`nccl-env` take, on a host the size of a GPU server.

    sudo python3 bench/rdma.py [--rounds 30] [--binary PATH]

The host is a sysfs copy written by tests/fixtures/rdma/make.py with 8 RoCE
ports whose GID tables have 256 slots (mlx5's RoCE table size), each port's
netdev dual-stack, and the same 8 netdevs as veths with those addresses in a
throwaway namespace (deleted on exit). The config is what `discover` prints.

Measured, interleaved, `--rounds` times each, wall time of the process:
  check/rdma    check --sysfs-root <the copy>: routing + GID table
  check/plain   check --sysfs-root <a copy without class/infiniband>
  discover      discover --sysfs-root <the copy>
  nccl-env      nccl-env --sysfs-root <the copy> CONFIG
Reported: median and p90 of each, and check/rdma over check/plain as a ratio
of medians (what the RDMA reading adds to a check).

Python standard library only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "fixtures" / "rdma"))
import make  # noqa: E402

NDR = "400 Gb/sec (4X NDR)"


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def timed(*cmd: str) -> int:
    start = time.perf_counter_ns()
    r = subprocess.run(cmd, capture_output=True, text=True)
    took = time.perf_counter_ns() - start
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--binary", type=Path, default=REPO / "target" / "release" / "roce-route")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (it makes a network namespace)")
    if not args.binary.exists():
        sh("cargo", "build", "--release", "--locked")
    ns = f"rr-bench-rdma-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="roce-route-bench-rdma-") as tmp:
        tmp = Path(tmp)
        make.HERE = str(tmp)
        make.GID_SLOTS = 256
        devices = [
            make.RoceDev(f"mlx5_{i}", make.Eth(f"ens{i + 1}f0np0", make.mac(9, i),
                         [f"198.51.100.{20 + i}/24", f"2001:db8:100::{20 + i}/64"]), NDR)
            for i in range(8)
        ]
        make.make_case("big", make.Case(comment="bench: 8 RoCE ports, 256 GID slots", devices=devices))
        big = tmp / "big" / "sysfs"
        plain = tmp / "plain"
        (plain / "class" / "net").mkdir(parents=True)
        sh("ip", "netns", "add", ns)
        try:
            for k, d in enumerate(devices):
                n = d.netdev
                sh("ip", "-n", ns, "link", "add", n.name, "type", "veth", "peer", "name", f"x{k}")
                for a in n.addrs:
                    sh("ip", "-n", ns, "addr", "add", a, "dev", n.name, "nodad")
                sh("ip", "-n", ns, "link", "set", f"x{k}", "up")
                sh("ip", "-n", ns, "link", "set", n.name, "up")
            rr = [str(args.binary), "--netns", ns, "--state-dir", str(tmp / "state")]
            config = tmp / "discovered.toml"
            config.write_text(sh(*rr, "discover", "--sysfs-root", str(big)).stdout)
            sh(*rr, "apply", str(config))
            cases = {
                "check/rdma": [*rr, "check", "--sysfs-root", str(big), str(config)],
                "check/plain": [*rr, "check", "--sysfs-root", str(plain), str(config)],
                "discover": [*rr, "discover", "--sysfs-root", str(big)],
                "nccl-env": [*rr, "nccl-env", "--sysfs-root", str(big), str(config)],
            }
            samples: dict[str, list[int]] = {k: [] for k in cases}
            for _ in range(args.rounds):
                for name, cmd in cases.items():
                    samples[name].append(timed(*cmd))
        finally:
            sh("ip", "netns", "del", ns, check=False)
    print(f"roce-route RDMA benchmark: 8 RoCE ports x 256 GID slots, dual-stack, {args.rounds} rounds")
    for name, s in samples.items():
        s.sort()
        p90 = s[min(len(s) - 1, int(len(s) * 0.9))]
        print(f"  {name:12} median {statistics.median(s) / 1e6:7.2f} ms   p90 {p90 / 1e6:7.2f} ms")
    ratio = statistics.median(samples["check/rdma"]) / statistics.median(samples["check/plain"])
    print(f"  check/rdma over check/plain: {ratio:.2f} (ratio of medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
