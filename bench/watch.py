#!/usr/bin/env python3
"""Benchmark `roce-route watch`: how fast it heals, what it costs idle, in a
storm and over many events.

    sudo python3 bench/watch.py [--events 50] [--idle 60] [--binary PATH]

In throwaway namespaces (bench.py's testbed: 8 rails, IPv4 + IPv6, a
gateway; deleted on exit): apply, start watch, then measure, from outside,
with route lookups per source address (`ip route get GW from ADDR` uses the
rail's table again):

  heal latency  from the end of an event to the host healed, --events of
                each kind: a rail's link up after down (the kernel flushed
                its routes), every owned rule purged at once (as
                systemd-networkd does), a rail's address replaced (the
                addresses are discovered); median and p99; each event
                0.3 s after the previous heal (back to back is the storm)
  idle CPU      clock ticks watch used over --idle seconds of nothing
  storm         1000 flaps of random rails in 10 s: CPU time watch used and
                the time to converge after the storm
  memory        VmRSS after 100 and after 10,000 flaps (ip -batch storms)

With --pods N, only pod churn instead: N veths with CNI-like names (as a
Kubernetes node's CNI makes them), each created, addressed, brought up and
deleted (in ip -batch runs of 50), while watch -v runs; halfway, a rail
flaps. Reports the passes watch made (its `pass` lines, the start's left
out), the CPU time it used, and the heal time of that flap.

Python standard library only; reuses bench.py.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import GATEWAY, RAILS, BenchError, Testbed, ensure_binary, sh, write_config  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")
SETTLE = 0.3  # seconds between a heal and the next timed event


def addr(k: int, moved: bool = False) -> str:
    return f"198.51.100.{10 + k + (100 if moved else 0)}"


def routed(tb: Testbed, k: int, moved: bool = False) -> bool:
    out = sh("ip", "-n", tb.host, "route", "get", GATEWAY, "from", addr(k, moved), check=False).stdout
    return f"dev rail{k} " in out and f"table {100 + k}" in out


def owned_v4_rules(tb: Testbed) -> int:
    """IPv4 only: the flaps before flushed the rails' static IPv6 addresses,
    whose rules watch then leaves alone (not ready) until they are back."""
    return sh("ip", "-n", tb.host, "-4", "rule", "show").stdout.count("proto 234")


def wait(cond, timeout: float = 10.0, what: str = "the host") -> float:
    """Seconds until cond() holds (polling as fast as `ip` runs)."""
    start = time.perf_counter()
    while not cond():
        if time.perf_counter() - start > timeout:
            raise BenchError(f"{what} not healed within {timeout:.0f} s")
    return time.perf_counter() - start


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise BenchError(f"no {key} in /proc/{pid}/status")


def pct(values: list[float], p: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=50, help="events of each kind (default 50)")
    ap.add_argument("--idle", type=int, default=60, help="seconds of idle measured (default 60)")
    ap.add_argument("--binary", type=Path, default=REPO / "target/release/roce-route")
    ap.add_argument("--pods", type=int, default=0, help="measure only the churn of N pod veths")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("watch.py: must run as root", file=sys.stderr)
        return 2
    binary = ensure_binary(args.binary.resolve())
    with tempfile.TemporaryDirectory(prefix="rrwatch-") as tmp:
        work = Path(tmp)
        config = work / "rails.toml"
        write_config(config)
        state = work / "state"
        with Testbed("watch", work) as tb:
            rr = [str(binary), "--netns", tb.host, "--state-dir", str(state)]
            sh(*rr, "apply", "--no-announce", str(config))
            verbose = ["-v"] if args.pods else []
            watch = subprocess.Popen(
                [*rr, *verbose, "watch"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
            )
            try:
                line = watch.stderr.readline()
                if "watching" not in line:
                    raise BenchError(f"watch did not start: {line}")
                # Drain its log so that it never blocks on a full pipe.
                import threading

                log: list[str] = []
                threading.Thread(target=lambda: [log.append(x) for x in watch.stderr], daemon=True).start()
                try:
                    if args.pods:
                        pods(tb, watch.pid, args.pods, log, work)
                        return 0
                    results = measure(tb, watch.pid, args)
                except BenchError:
                    print("".join(log[-15:]), file=sys.stderr)
                    raise
            finally:
                watch.terminate()
                watch.wait(timeout=10)
    report(results, args)
    return 0


def measure(tb: Testbed, pid: int, args) -> dict:
    h = ("ip", "-n", tb.host)
    res: dict = {"flap": [], "purge": [], "replace": []}
    # Each event comes to a settled watch: SETTLE after the previous heal,
    # whose own notifications (the echo pass) are then behind it. Events
    # back to back are the storm's measurement below.
    for i in range(args.events):
        k = i % RAILS
        time.sleep(SETTLE)
        sh(*h, "link", "set", f"rail{k}", "down")
        sh(*h, "link", "set", f"rail{k}", "up")
        res["flap"].append(wait(lambda: routed(tb, k), what=f"rail{k} after a flap"))
    for _ in range(args.events):
        time.sleep(SETTLE)
        sh(*h, "-4", "rule", "flush", "protocol", "234")
        sh(*h, "-6", "rule", "flush", "protocol", "234")
        res["purge"].append(
            wait(lambda: owned_v4_rules(tb) == RAILS and routed(tb, RAILS - 1), what="the purged rules")
        )
    for i in range(args.events):
        k = i % RAILS
        moved = (i // RAILS) % 2 == 0
        time.sleep(SETTLE)
        sh(*h, "addr", "del", f"{addr(k, not moved)}/24", "dev", f"rail{k}")
        sh(*h, "addr", "add", f"{addr(k, moved)}/24", "dev", f"rail{k}")
        res["replace"].append(wait(lambda: routed(tb, k, moved), what=f"rail{k} after an address change"))
    # Back to the original addresses, healed.
    for k in range(RAILS):
        if not routed(tb, k):
            sh(*h, "addr", "flush", "dev", f"rail{k}", "scope", "global", "to", "198.51.100.0/24")
            sh(*h, "addr", "add", f"{addr(k)}/24", "dev", f"rail{k}")
    wait(lambda: all(routed(tb, k) for k in range(RAILS)))
    time.sleep(1)
    before = cpu_ticks(pid)
    time.sleep(args.idle)
    res["idle_ticks"] = cpu_ticks(pid) - before
    # 1000 flaps of random rails in 10 s.
    rng = random.Random(7)
    before = cpu_ticks(pid)
    start = time.perf_counter()
    for i in range(1000):
        k = rng.randrange(RAILS)
        sh(*h, "link", "set", f"rail{k}", "down")
        sh(*h, "link", "set", f"rail{k}", "up")
        behind = start + (i + 1) * 0.01 - time.perf_counter()
        if behind > 0:
            time.sleep(behind)
    res["storm_seconds"] = time.perf_counter() - start
    res["storm_converge"] = wait(lambda: all(routed(tb, k) for k in range(RAILS)), timeout=30)
    time.sleep(1)
    res["storm_cpu_s"] = (cpu_ticks(pid) - before) / TICKS
    # Memory after 100 and after 10,000 flaps, each a storm in one ip -batch.
    def batch_flaps(n: int) -> None:
        path = Path(tempfile.mkstemp(prefix="rrwatch-flaps-")[1])
        path.write_text("".join(f"link set rail{j % RAILS} down\nlink set rail{j % RAILS} up\n" for j in range(n)))
        sh(*h, "-batch", str(path))
        path.unlink()
        wait(lambda: all(routed(tb, k) for k in range(RAILS)), timeout=60)
        time.sleep(1)

    batch_flaps(100)
    res["rss_100"] = status_kib(pid, "VmRSS")
    for _ in range(10):
        batch_flaps(990)
    res["rss_10000"] = status_kib(pid, "VmRSS")
    res["hwm"] = status_kib(pid, "VmHWM")
    return res


def pods(tb: Testbed, pid: int, n: int, log: list[str], work: Path) -> None:
    """N pod veths come and go; a rail flaps halfway."""
    h = ("ip", "-n", tb.host)
    time.sleep(1)
    passes = lambda: sum(1 for line in log if " pass " in f" {line}" and "at start" not in line)
    start_passes, start_ticks = passes(), cpu_ticks(pid)
    t0 = time.perf_counter()
    heal = None
    for first in range(0, n, 50):
        lines = []
        for i in range(first, min(n, first + 50)):
            pod = f"veth{i:08x}"
            lines += [
                f"link add {pod} type veth peer name eth{i}",
                f"addr add 10.244.{i // 250}.{1 + i % 250}/32 dev {pod}",
                f"link set {pod} up",
                f"link set eth{i} up",
                f"link del {pod}",
            ]
        batch = work / "pods.batch"
        batch.write_text("\n".join(lines) + "\n")
        sh(*h, "-batch", str(batch))
        if heal is None and first + 50 >= n // 2:
            k = RAILS - 1
            sh(*h, "link", "set", f"rail{k}", "down")
            sh(*h, "link", "set", f"rail{k}", "up")
            heal = wait(lambda: routed(tb, k), what=f"rail{k} after a flap amid pod churn")
    churn = time.perf_counter() - t0
    time.sleep(1)
    made = passes() - start_passes
    cpu = (cpu_ticks(pid) - start_ticks) / TICKS
    print(f"kernel {os.uname().release}, {os.cpu_count()} CPUs, {RAILS} rails")
    print(f"pods: {n} veths created and deleted in {churn:.1f} s; watch made {made} passes "
          f"(1 is the rail's flap), used {cpu:.2f} s of CPU; the flap halfway healed in {heal * 1000:.1f} ms")


def report(r: dict, args) -> None:
    print(f"kernel {os.uname().release}, {os.cpu_count()} CPUs, {RAILS} rails, {args.events} events of each kind\n")
    print("| event | median ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|")
    for kind, what in [("flap", "link up after down"), ("purge", "every owned rule purged"), ("replace", "address replaced")]:
        v = [x * 1000 for x in r[kind]]
        print(f"| {what} | {statistics.median(v):.1f} | {pct(v, 99):.1f} | {max(v):.1f} |")
    print()
    print(f"idle: {r['idle_ticks']} clock ticks ({TICKS}/s) of CPU over {args.idle} s")
    print(f"storm: 1000 flaps in {r['storm_seconds']:.1f} s; watch used {r['storm_cpu_s']:.2f} s of CPU; "
          f"converged {r['storm_converge'] * 1000:.0f} ms after the storm")
    grew = (r["rss_10000"] / r["rss_100"] - 1) * 100
    print(f"memory: VmRSS {r['rss_100']} KiB after 100 flaps, {r['rss_10000']} KiB after 10,000 "
          f"({grew:+.1f}%); VmHWM {r['hwm']} KiB")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"watch.py: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
