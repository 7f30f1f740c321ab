#!/usr/bin/env python3
"""Benchmark `roce-route watch`: how fast it heals, what it costs idle, in a
storm and over many events.

    sudo python3 bench/watch.py [--events 50] [--idle 60] [--binary PATH]
        [--rails 8] [--addrs 1] [--foreign-links K] [--foreign-routes R]
        [--quick] [-v|-vv] [--pods N]

In throwaway namespaces (a host and a peer namespace, deleted on exit, also
on failure or Ctrl-C; bench.py's Testbed, built here for any number of
rails): --rails N veth rails rail0.., each with --addrs M addresses per
family, their peers p0.. on a bridge in the peer namespace (198.51.100.1/24,
2001:db8:1::1/64). watch heals toward a config naming the N rails, gateway
198.51.100.1, addresses taken from the host (bench.py's write_config, for N
rails). Address plan, rail k (N <= 100, N x (M-1) <= 245):

    198.51.100.(10+k)/24, 2001:db8:1::(10+k)/64     the primaries
    198.51.100.(110+k)/24, 2001:db8:1::(110+k)/64   where an address change
                                                    moves them (and back)
    203.0.113.x/24, 2001:db8:2::j:k/64              the M-1 extras per family

(IPv6 digits are hex: 2001:db8:1::10 for rail 0.) In the host namespace
IPv6 addresses are kept on link down (keep_addr_on_down=1), so that every
event concerns both families: by default the kernel drops a rail's static
IPv6 addresses at its first flap, and its IPv6 side is never healed again.
No duplicate address detection (accept_dad=0), as in bench.py.

Scale options: --foreign-links K adds K veth pairs with CNI-like names
(cali + 11 hex digits, as Calico names a pod's host-side veth), up, their
peers up in the peer namespace, with no address but the kernel's IPv6
link-local: a Kubernetes node's pod veths, not rails. --foreign-routes R
adds R blackhole /32 routes to the main table with ip -batch, the first R
addresses of 10.0.0.0/8 (16.7 M: 198.18.0.0/15, which bench.py uses for its
100,000, holds 131,072 only; 10/8 is private, and a blackhole route in a
throwaway namespace sends nothing anywhere). The testbed built, the script
waits until the namespace has sent no notification for 1 s (the kernel's
deferred IPv6 work on a thousand links goes on for a while), then applies
and starts watch.

Then it measures:

  heal latency  --events of each kind (rail k = the event's number mod N);
                each comes 0.3 s after the previous heal, to a settled
                watch (back to back is the storm):
                  flap      rail k down, then up, in one ip -batch (the
                            kernel flushes the routes of its table, silently
                            for IPv4; the carrier comes back from its link
                            watch work)
                  purge     every owned rule (proto 234) of both families
                            deleted at once, as systemd-networkd does: one
                            small Python process in the host namespace dumps
                            the rules and sends each back as RTM_DELRULE, as
                            `ip rule flush` does (which takes two processes,
                            -4 and -6, with a few ms between them for a pass
                            to fall into). Three heals of the same entries
                            within 60 s, each after only rules or routes
                            went, are a fight with another agent to watch,
                            which then holds each heal 5 s and more: watch
                            is restarted (untimed, its start pass settled)
                            before every second purge
                  change    rail k's primary IPv4 and IPv6 addresses moved
                            (one ip -batch: del, add, del, add): stale rules
                            out, new rules, routes with the new source in
                  recreate  rail k's veth pair deleted and made again, as a
                            driver reload and a network manager do it; two
                            untimed steps, each followed by 0.3 s: the pair
                            deleted (the kernel flushes the table), the pair
                            made from the peer namespace with its peer on
                            the bridge and up (a new rail k appears, down
                            and unaddressed: not ready for watch); then the
                            timed event, its addresses and up in one ip
                            -batch (the carrier at once). watch heals a new
                            link (a new index) of a known name. (Made in two
                            processes, host side and then peer side, the
                            event has a gap of a few ms in which a pass can
                            start: its heal time is then bimodal.)
                median, p99 and max
  idle CPU      clock ticks watch used over --idle seconds of nothing
  storm         1000 flaps of random rails in 10 s: CPU time watch used and
                the time to converge after the storm (polled with `ip route
                get` per rail, a few ms a poll per rail)
  memory        VmRSS after 100 and after 10,000 flaps (ip -batch storms)

--quick measures the heal latency alone, and then, with watch stopped, the
kernel's part of a purge's heal: the same rule adds sent by one process,
all before their acks (READD), timed from their first notification to their
last, against watch's from its first change to healed. -v prints each heal as it is timed,
-vv with its notifications.

How a heal is timed: by the kernel's own notifications, not by polling. A
listener process in the host namespace (`ip netns exec HOST python3 -c ...`,
started before the apply, SCHED_FIFO so that a datagram is stamped when it
comes, not when a busy CPU gets to it) joins RTNLGRP_LINK,
RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR, RTNLGRP_IPV4_ROUTE,
RTNLGRP_IPV6_ROUTE, RTNLGRP_IPV4_RULE and RTNLGRP_IPV6_RULE, and stamps each
datagram with time.monotonic_ns() when its recv returns (CLOCK_MONOTONIC is
one clock for all network namespaces, so this script compares it with its
own); it parses
the messages with struct (nlmsghdr; ifinfomsg, ifaddrmsg, rtmsg,
fib_rule_hdr; IFLA_IFNAME, IFA_LOCAL, RTA_TABLE, RTA_DST, RTA_OIF,
RTA_PREFSRC, RTA_GATEWAY, FRA_SRC, FRA_TABLE, FRA_PROTOCOL). This script
replays them on a model of what the event concerns: the owned rules (proto
234) of its rails and, but for a purge, the routes of their tables, each
key's state its latest notification, from a dump (`ip -j`) taken before the
event. Routes the kernel removes without a notification count as gone at
the event's start: IPv4 routes on link down, and when a link's last IPv4
address goes (a route whose source address went is waited for with its new
source).

  healed  the receipt of the notification after which the model is what
          watch must make (a rule per address of the rails, both families;
          in each table, a route per subnet with its device and one of the
          rail's addresses in that subnet as its source, and the IPv4
          default via the gateway; no rule of an address that went), for
          good: the last such transition, after which it stays so for 0.3 s
  end     the receipt of the last notification the event caused before
          healed: one not sent on behalf of watch's netlink sockets (the
          sender's port, nlmsg_pid, against the ports of watch's sockets,
          found through /proc/PID/fd and /proc/PID/net/netlink), about the
          event's rails (their links, addresses, routes) or about the owned
          rules and routes in question: the kernel's own (port 0: the
          carrier, routes it adds or flushes) and those of the event's `ip`
          processes
  heal    healed - end, the primary figure

The report also gives, per kind, the median of healed minus the return of
the event's last `ip` process (time.monotonic_ns in this script: later than
the kernel's change by the process's exit, earlier than a carrier that the
kernel's link watch work reports after it; for a purge, the purge process's
own stamp after its last ack), and of watch's first change minus end (its
quiet period and its reading of the host; the rest of the heal is its
changes).

Some notifications come from kernel work queues that wait for the RTNL lock
(one lock for all namespaces): an IPv6 address's RTM_NEWADDR, a link-local
address, the carrier. On a busy machine they can come after watch healed
(from a dump that already showed what they say); they are not the end, and
the report counts such events. An event that falls silent 10 ms or more
between two of its own notifications (a slow step: with a million routes
the kernel walks them all, for some 20 ms, when a link goes down or an IPv4
address goes; a process that starts late) can let a pass start inside it,
which may heal right after its end: the report counts those too. A heal of
0.5 s or more prints watch's log lines of its event on stderr.

It fails loudly (BenchError) when: after the notifications said healed,
`ip route get` from the rail's IPv4 and IPv6 primaries (for a purge, the
last rail's) does not use the rail's table; the dump 0.3 s later differs
from what watch must make; watch changed an owned rule or route after the
heal, outside the event's rails, or between events; a port not watch's
added one; or the listener's socket overflowed (ENOBUFS).

With --pods N, only pod churn instead: N veths with CNI-like names (as a
Kubernetes node's CNI makes them), each created, addressed, brought up and
deleted (in ip -batch runs of 50), while watch -v runs; halfway, the last
rail flaps. Reports the passes watch made (its `pass` lines, the start's
left out), the CPU time it used, and the heal time of that flap (timed as
above).

Python standard library only; reuses bench.py.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import GATEWAY, PROTO, TABLE_BASE, BenchError, Testbed, ensure_binary, sh, stop_on_signal  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")
SETTLE = 0.3  # seconds between a heal and the next timed event
GATEWAY6 = "2001:db8:1::1"
MAX_RAILS = 100  # 198.51.100.10..109 primaries, .110..209 moved
EXTRA_V4 = (10, 254)  # 203.0.113.10..254: the extras, across all rails
FOREIGN_ROUTE_NET = ipaddress.ip_network("10.0.0.0/8")
GAP_NOTE_NS = 10_000_000  # a silence inside an event that the report notes
SLOW_NS = 500_000_000  # a heal this slow gets watch's log lines on stderr
KINDS = [
    ("flap", "link down and up (its table flushed by the kernel)"),
    ("purge", "every owned rule purged at once (both families)"),
    ("change", "primary IPv4 + IPv6 addresses replaced"),
    ("recreate", "rail deleted and re-created (new link, same name)"),
]


# ---------------------------------------------------------------------------
# The address plan and the testbed
# ---------------------------------------------------------------------------


class Plan:
    """Rails, their addresses (which move on an address change) and what
    watch must make of them."""

    def __init__(self, rails: int, addrs: int):
        self.n, self.m = rails, addrs
        self.moved = [False] * rails

    def primary(self, k: int, family: int, moved: bool | None = None) -> str:
        moved = self.moved[k] if moved is None else moved
        last = 10 + k + (100 if moved else 0)
        return f"198.51.100.{last}" if family == 4 else f"2001:db8:1::{last}"

    def extras(self, k: int) -> list[str]:
        """The M-1 extra addresses of rail k per family, with prefix length."""
        out = []
        for j in range(1, self.m):
            out.append(f"203.0.113.{EXTRA_V4[0] + k * (self.m - 1) + j - 1}/24")
            out.append(f"2001:db8:2::{j:x}:{k:x}/64")
        return out

    def addresses(self, k: int) -> list[str]:
        """Every address of rail k, with prefix length, in the order they are
        added (the primaries first)."""
        return [f"{self.primary(k, 4)}/24", f"{self.primary(k, 6)}/64", *self.extras(k)]

    def expected(self, k: int) -> dict:
        """What watch makes for rail k: a rule per address (proto 234, both
        families) and, in table 100+k, a route per subnet (device rail k,
        source one of its addresses in that subnet) and the IPv4 default via
        the gateway. Keys as described above `matches`."""
        table, dev = TABLE_BASE + k, f"rail{k}"
        want: dict = {}
        nets: dict = {}
        for text in self.addresses(k):
            iface = ipaddress.ip_interface(text)
            fam = iface.version
            want[("U", fam, table, f"{iface.ip}/{iface.max_prefixlen}")] = True
            nets.setdefault((fam, str(iface.network)), set()).add(str(iface.ip))
        for (fam, net), ips in nets.items():
            want[("R", fam, table, net)] = (dev, frozenset(ips), None)
        want[("R", 4, table, "0.0.0.0/0")] = (dev, None, GATEWAY)
        return want


def rail_lines(plan: Plan, k: int, peer_ns: str) -> list[str]:
    """ip -batch lines (host namespace) that make rail k: a veth pair whose
    peer p<k> goes to the peer namespace, its addresses, up."""
    lines = [f"link add rail{k} type veth peer name p{k} netns {peer_ns}"]
    for a in plan.addresses(k):
        lines.append(f"addr add {a} dev rail{k}" + (" nodad" if ":" in a else ""))
    lines.append(f"link set rail{k} up")
    return lines


def foreign_name(i: int) -> str:
    """cali + 11 hex digits, as Calico names a pod's host-side veth
    (multiplying by an odd number is a bijection mod 2^44: unique)."""
    return f"cali{(i * 0x9E3779B1) % (1 << 44):011x}"


class WatchBed(Testbed):
    """bench.py's Testbed with plan.n rails (Testbed builds bench.RAILS)
    carrying plan.m addresses per family, optional foreign links and routes;
    the namespaces are deleted in __exit__ (Testbed's), also on failure."""

    def __init__(self, workdir: Path, plan: Plan, foreign_links: int = 0, foreign_routes: int = 0):
        super().__init__("watch", workdir)
        self.plan = plan
        self.n_foreign_links = foreign_links
        self.n_foreign_routes = foreign_routes

    def batch(self, ns: str, lines: list[str], name: str) -> None:
        path = self.workdir / f"{name}.batch"
        path.write_text("\n".join(lines) + "\n")
        sh("ip", "-n", ns, "-batch", str(path))

    def _build(self) -> None:
        for ns in (self.host, self.peer):
            sh("ip", "netns", "add", ns)
            self.created.append(ns)
        h, p = ("ip", "-n", self.host), ("ip", "-n", self.peer)
        # No duplicate address detection (as bench.py); IPv6 addresses kept
        # on link down (see the docstring).
        for ns in (self.host, self.peer):
            keys = [f"net.ipv6.conf.{c}.accept_dad=0" for c in ("all", "default")]
            if ns == self.host:
                keys += [f"net.ipv6.conf.{c}.keep_addr_on_down=1" for c in ("all", "default")]
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", *keys)
        sh(*p, "link", "add", "br0", "type", "bridge")
        sh(*p, "addr", "add", f"{GATEWAY}/24", "dev", "br0")
        sh(*p, "addr", "add", f"{GATEWAY6}/64", "dev", "br0", "nodad")
        sh(*p, "link", "set", "br0", "up")
        sh(*h, "link", "set", "lo", "up")
        lines = [line for k in range(self.plan.n) for line in rail_lines(self.plan, k, self.peer)]
        self.batch(self.host, lines, "rails")
        self.batch(self.peer, [f"link set p{k} master br0 up" for k in range(self.plan.n)], "peers")
        if self.n_foreign_links:
            host_lines, peer_lines = [], []
            for i in range(self.n_foreign_links):
                name = foreign_name(i)
                host_lines += [f"link add {name} type veth peer name f{i} netns {self.peer}", f"link set {name} up"]
                peer_lines.append(f"link set f{i} up")
            self.batch(self.host, host_lines, "foreign-links")
            self.batch(self.peer, peer_lines, "foreign-peers")
        if self.n_foreign_routes:
            self._add_many_foreign_routes()

    def _add_many_foreign_routes(self) -> None:
        first, n = int(FOREIGN_ROUTE_NET.network_address), self.n_foreign_routes
        path = self.workdir / "foreign-routes.batch"
        with path.open("w") as f:
            for i in range(n):
                f.write(f"route add blackhole {ipaddress.IPv4Address(first + i)}/32\n")
        sh("ip", "-n", self.host, "-batch", str(path))
        path.unlink()
        got = sh("sh", "-c", f"ip -n {self.host} -4 route show table main type blackhole | wc -l").stdout
        if int(got) != n:
            raise BenchError(f"{self.host}: expected {n} blackhole routes, found {got.strip()}")


def write_rails_config(path: Path, rails: int) -> None:
    """bench.py's write_config for any number of rails."""
    parts = ["# bench/watch.py: every rail, IPv4 gateway; addresses taken from the host.\n"]
    for k in range(rails):
        parts.append(f'[[interface]]\nname = "rail{k}"\ngateway = "{GATEWAY}"\n')
    path.write_text("\n".join(parts))


# ---------------------------------------------------------------------------
# The listener: rtnetlink notifications, stamped in the host namespace
# ---------------------------------------------------------------------------

# Runs as `ip netns exec HOST python3 -u -c LISTENER`. One line per message:
#   L t port N|D ifindex name flags                  (RTM_NEWLINK/DELLINK)
#   A t port N|D family ifindex addr/len             (RTM_NEWADDR/DELADDR)
#   R t port N|D family table dst/len oif src gw proto type   (ROUTE)
#   U t port N|D family table src/len proto priority           (RULE)
#   O t                                              (ENOBUFS: lost some)
# t: time.monotonic_ns() when recv returned; port: nlmsg_pid (0 = the kernel).
LISTENER = r"""
import errno, os, socket, struct, sys, threading, time
# RTNLGRP_LINK, IPV4_IFADDR, IPV4_ROUTE, IPV4_RULE, IPV6_IFADDR, IPV6_ROUTE, IPV6_RULE
GROUPS = (1, 5, 7, 8, 9, 11, 19)
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
s.bind((0, sum(1 << (g - 1) for g in GROUPS)))
# Real-time priority: on a busy machine (2 CPUs, watch, `ip`, the kernel
# walking a million routes) a datagram is stamped when it comes, not when
# the scheduler gets to this process. It only ever blocks in recv.
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    rt = "rt"
except OSError:
    rt = "not-rt"
# Gone with the parent: its end of stdin closes.
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()

def attrs(b, off, end):
    a = {}
    while off + 4 <= end:
        ln, ty = struct.unpack_from("=HH", b, off)
        if ln < 4:
            break
        a[ty & 0x3FFF] = bytes(b[off + 4:off + ln])
        off += (ln + 3) & ~3
    return a

def ip(fam, v):
    return socket.inet_ntop(socket.AF_INET if fam == 2 else socket.AF_INET6, v)

def u32(a, k, d=0):
    return struct.unpack("=I", a[k])[0] if k in a else d

out = sys.stdout
print("ready", rt, flush=True)
buf = bytearray(1 << 21)
while True:
    try:
        n = s.recv_into(buf)
    except OSError as e:
        if e.errno == errno.ENOBUFS:
            print("O", time.monotonic_ns(), flush=True)
            continue
        raise
    t = time.monotonic_ns()
    off, lines = 0, []
    while off + 16 <= n:
        ln, ty, _, _, port = struct.unpack_from("=IHHII", buf, off)
        if ln < 16:
            break
        b, end = off + 16, min(n, off + ln)
        nd = "N" if ty % 2 == 0 else "D"
        if ty in (16, 17):
            _, _, idx, flags, _ = struct.unpack_from("=BxHiII", buf, b)
            name = attrs(buf, b + 16, end).get(3, b"?").rstrip(b"\0").decode()
            lines.append(f"L {t} {port} {nd} {idx} {name} {flags}")
        elif ty in (20, 21):
            fam, plen, _, _, idx = struct.unpack_from("=BBBBI", buf, b)
            a = attrs(buf, b + 8, end)
            v = a.get(2) or a.get(1)
            lines.append(f"A {t} {port} {nd} {fam} {idx} {ip(fam, v) if v else '-'}/{plen}")
        elif ty in (24, 25):
            fam, dl, _, _, table, proto, _, rtype, _ = struct.unpack_from("=BBBBBBBBI", buf, b)
            a = attrs(buf, b + 12, end)
            table = u32(a, 15, table)
            dst = ip(fam, a[1]) if 1 in a else ("0.0.0.0" if fam == 2 else "::")
            src = ip(fam, a[7]) if 7 in a else "-"
            gw = ip(fam, a[5]) if 5 in a else "-"
            lines.append(f"R {t} {port} {nd} {fam} {table} {dst}/{dl} {u32(a, 4)} {src} {gw} {proto} {rtype}")
        elif ty in (32, 33):
            fam, _, sl, _, table, _, _, _, _ = struct.unpack_from("=BBBBBBBBI", buf, b)
            a = attrs(buf, b + 12, end)
            table = u32(a, 15, table)
            src = ip(fam, a[2]) if 2 in a else "all"
            proto = a[21][0] if 21 in a else 0
            lines.append(f"U {t} {port} {nd} {fam} {table} {src}/{sl} {proto} {u32(a, 6)}")
        off += (ln + 3) & ~3
    if lines:
        out.write("\n".join(lines) + "\n")
        out.flush()
"""


def wait_quiet(listener: Listener, seconds: float = 1.0, limit: float = 300.0) -> None:
    """Waits until the namespace has sent no notification for `seconds`:
    after the testbed's build, the kernel's deferred work on its links
    (IPv6 link-local addresses) goes on for a while; an apply meanwhile
    may see its dumps interrupted, and watch reads it all."""
    index = len(listener.notes)
    start = last = time.monotonic()
    while time.monotonic() - last < seconds:
        if time.monotonic() - start > limit:
            raise BenchError(f"the namespace did not fall quiet within {limit:.0f} s")
        notes = listener.since(index, 0.1)
        if notes:
            index += len(notes)
            last = time.monotonic()


class Watch:
    """The watch process; its log (stderr) drained into .log, so that it
    never blocks on a full pipe."""

    def __init__(self, rr: list[str], verbose: bool):
        self.cmd = [*rr, *(["-v"] if verbose else []), "watch"]
        self.log: list[str] = []
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        line = self.proc.stderr.readline()
        if "watching" not in line:
            self.stop()
            raise BenchError(f"watch did not start: {line}")
        self.log.append(line)
        stderr = self.proc.stderr
        threading.Thread(target=lambda: [self.log.append(x) for x in stderr], daemon=True).start()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


# Runs as `ip netns exec HOST python3 -c PURGE 234`: every rule of that
# protocol, both families, deleted at once, as systemd-networkd does it (one
# process; `ip rule flush` takes two, -4 and -6, and a pass may fall between
# them). Like `ip rule flush`: each rule dumped (RTM_GETRULE) is sent back
# as an RTM_DELRULE; all are sent before the acks are read.
# With `PURGE 234 readd` (READD, watch stopped: the kernel's own cost of a
# purge's heal), 0.3 s later every rule is added back by the same process,
# all requests before the acks: the least time any healer could take.
PURGE = r"""
import socket, struct, sys
proto = int(sys.argv[1])
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind((0, 0))

def messages():
    while True:
        data = s.recv(1 << 20)
        off = 0
        while off + 16 <= len(data):
            ln, ty, fl, seq, _ = struct.unpack_from("=IHHII", data, off)
            yield ty, seq, data[off:off + ln]
            off += (ln + 3) & ~3

def attrs(b, off):
    a = {}
    while off + 4 <= len(b):
        ln, ty = struct.unpack_from("=HH", b, off)
        if ln < 4:
            break
        a[ty & 0x3FFF] = b[off + 4:off + ln]
        off += (ln + 3) & ~3
    return a

doomed = []
for seq, fam in ((1, socket.AF_INET), (2, socket.AF_INET6)):
    # RTM_GETRULE, NLM_F_REQUEST | NLM_F_DUMP; a fib_rule_hdr of the family
    s.send(struct.pack("=IHHII", 28, 34, 0x301, seq, 0) + struct.pack("=BBBBBBBBI", fam, 0, 0, 0, 0, 0, 0, 0, 0))
    for ty, _, msg in messages():
        if ty == 3:  # NLMSG_DONE
            break
        if ty == 2:  # NLMSG_ERROR
            sys.exit(f"dump failed: {struct.unpack_from('=i', msg, 16)[0]}")
        if attrs(msg, 28).get(21, b"\0")[0] == proto:  # FRA_PROTOCOL
            doomed.append(msg)
def send_all(kind, flags, msgs):
    # Every message sent as `kind` with `flags` before the acks are read.
    for i, msg in enumerate(msgs):
        s.send(struct.pack("=IHHII", len(msg), kind, flags, 100 + i, 0) + msg[16:])
    acks = 0
    for ty, seq, msg in messages() if msgs else ():
        if ty == 2:
            err = struct.unpack_from("=i", msg, 16)[0]
            if err:
                sys.exit(f"request {seq - 100} of type {kind} failed: {err}")
            acks += 1
            if acks == len(msgs):
                break

send_all(33, 0x5, doomed)  # RTM_DELRULE, NLM_F_REQUEST | NLM_F_ACK
import time
if sys.argv[2:] == ["readd"]:
    # READD: 0.3 s later, every rule added back the same way.
    time.sleep(0.3)
    send_all(32, 0x605, doomed)  # RTM_NEWRULE, NLM_F_REQUEST | NLM_F_ACK | NLM_F_EXCL | NLM_F_CREATE
print(len(doomed), time.monotonic_ns())
"""



class Note:
    """One notification, as the listener wrote it."""

    __slots__ = ("kind", "t", "port", "new", "f")

    def __init__(self, line: str):
        f = line.split()
        self.kind, self.t = f[0], int(f[1])
        self.port = int(f[2]) if len(f) > 2 else 0
        self.new = len(f) > 3 and f[3] == "N"
        self.f = f[4:]

    def __str__(self) -> str:
        return f"{self.kind} port {self.port} {'new' if self.new else 'del'} {' '.join(self.f)}"


class Listener:
    """The listener process and what it has heard, in order."""

    def __init__(self, ns: str):
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-u", "-c", LISTENER],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        first = self.proc.stdout.readline().split()
        if first[:1] != ["ready"]:
            self.stop()
            raise BenchError("the notification listener did not start")
        self.realtime = first[1:] == ["rt"]
        self.notes: list[Note] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            note = Note(line)
            with self.cond:
                self.notes.append(note)
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def since(self, index: int, wait_s: float) -> list[Note]:
        """The notifications from index on, waiting up to wait_s for one."""
        with self.cond:
            if len(self.notes) <= index and wait_s > 0:
                self.cond.wait(wait_s)
            return self.notes[index:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def watch_ports(pid: int) -> set[int]:
    """The netlink port ids (nlmsg_pid of what they make the kernel send) of
    watch's NETLINK_ROUTE sockets: its socket inodes matched in
    /proc/PID/net/netlink (watch runs inside the namespace, so that file is
    the namespace's)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    ports = set()
    for line in Path(f"/proc/{pid}/net/netlink").read_text().splitlines()[1:]:
        f = line.split()
        if len(f) >= 10 and f[1] == "0" and int(f[9]) in inodes:
            ports.add(int(f[2]))
    if not ports:
        raise BenchError(f"no rtnetlink socket of watch (pid {pid}) found")
    return ports


# ---------------------------------------------------------------------------
# The model: the owned rules and the routes of the rails' tables
# ---------------------------------------------------------------------------
#
# Keys: ("U", family 4|6, table, "src/len") -> True (a rule, proto 234)
#       ("R", family, table, "dst/len") -> (device, source or None, gateway or None)
# What watch must make: the same keys -> True, or (device, allowed sources
# (a frozenset, or None for none), gateway or None).


def matches(want, have) -> bool:
    if want is None or have is None:
        return want is have
    if want is True:
        return have is True
    dev, srcs, gw = want
    return have[0] == dev and (have[1] is None if srcs is None else have[1] in srcs) and have[2] == gw


def fam_of(af: str) -> int:
    return 4 if af == "2" else 6


def dump(tb: Testbed, tables: list[int]) -> dict:
    """The owned rules (all) and the routes of the given tables, as keys."""
    h = ("ip", "-n", tb.host)
    state: dict = {}
    for fam in (4, 6):
        for r in json.loads(sh(*h, "-j", f"-{fam}", "rule", "show").stdout or "[]"):
            if r.get("protocol") == str(PROTO) or r.get("protocol") == PROTO:
                full = 32 if fam == 4 else 128
                state[("U", fam, int(r["table"]), f"{r['src']}/{r.get('srclen', full)}")] = True
        for table in tables:
            for r in json.loads(sh(*h, "-j", f"-{fam}", "route", "show", "table", str(table)).stdout or "[]"):
                dst = r["dst"]
                if dst == "default":
                    dst = "0.0.0.0/0" if fam == 4 else "::/0"
                elif "/" not in dst:
                    dst += "/32" if fam == 4 else "/128"
                state[("R", fam, table, dst)] = (r.get("dev"), r.get("prefsrc"), r.get("gateway"))
    return state


def differences(want: dict, have: dict) -> list[str]:
    out = []
    for key in sorted(set(want) | set(have), key=str):
        if not matches(want.get(key), have.get(key)):
            out.append(f"  {key}: want {want.get(key)}, have {have.get(key)}")
    return out


class Sample:
    def __init__(self, kind: str, rail: int, heal_ns: int, from_ip_ns: int, first_ns: int, late: int, gap_ns: int):
        self.kind, self.rail = kind, rail
        self.heal_ns, self.from_ip_ns, self.first_ns = heal_ns, from_ip_ns, first_ns
        # Notifications the event caused after the heal (not its end).
        self.late = late
        # The longest time between two of the event's notifications.
        self.gap_ns = gap_ns


class Heals:
    """Times events by the notifications (see the docstring)."""

    def __init__(self, tb: WatchBed, watch: Watch, listener: Listener):
        self.tb, self.plan, self.watch = tb, tb.plan, watch
        self.listener, self.log = listener, watch.log
        self.ports = watch_ports(watch.pid)
        self.purges = 0
        self.verbose = 0
        wait_quiet(listener)
        self.index = len(listener.notes)  # what the last event's window read
        # Interface names by index, kept up to date from RTM_NEWLINK.
        self.names: dict[int, str] = {}
        for link in json.loads(sh("ip", "-n", tb.host, "-j", "link", "show").stdout):
            self.names[link["ifindex"]] = link["ifname"]
        self.h = ("ip", "-n", tb.host)
        self.all_tables = [TABLE_BASE + k for k in range(self.plan.n)]
        self.observed = self.check(self.all_tables)
        self.samples: dict[str, list[Sample]] = {kind: [] for kind, _ in KINDS}

    # --- the events ---------------------------------------------------------

    def flap(self, k: int) -> Sample:
        """Down, then up, in one ip process (the carrier comes back from
        the kernel's link watch work)."""
        table = TABLE_BASE + k
        batch = self.tb.workdir / "flap.batch"
        batch.write_text(f"link set rail{k} down\nlink set rail{k} up\n")
        return self.event("flap", k, [table], True, [(*self.h, "-batch", str(batch))],
                          renew=self.routes_of(table))

    def purge(self) -> Sample:
        k = self.plan.n - 1
        # The same entries healed 3 times within 60 s, each time after only
        # rules or routes went (what an agent does), are a fight to watch:
        # it then holds each heal 5 s and more. A fresh watch (untimed, its
        # start pass settled) before every second purge.
        if self.purges and self.purges % 2 == 0:
            self.between()
            self.watch.restart()
            time.sleep(SETTLE)
        self.purges += 1
        return self.event("purge", k, self.all_tables, False, [
            ("ip", "netns", "exec", self.tb.host, sys.executable, "-c", PURGE, str(PROTO)),
        ], rails=[])

    def change(self, k: int) -> Sample:
        table, now = TABLE_BASE + k, self.plan.moved[k]
        lines = []
        for fam, plen in ((4, 24), (6, 64)):
            lines.append(f"addr del {self.plan.primary(k, fam, now)}/{plen} dev rail{k}")
            lines.append(f"addr add {self.plan.primary(k, fam, not now)}/{plen} dev rail{k}" + (" nodad" if fam == 6 else ""))
        batch = self.tb.workdir / "change.batch"
        batch.write_text("\n".join(lines) + "\n")
        # The last IPv4 address of a link deleted: the kernel flushes every
        # IPv4 route through it, silently (with extras, only the routes whose
        # source was that address, whose new source the model waits for).
        renew = {key for key in self.routes_of(table) if key[1] == 4} if self.plan.m == 1 else set()
        self.plan.moved[k] = not now
        return self.event("change", k, [table], True, [(*self.h, "-batch", str(batch))], renew=renew)

    def recreate(self, k: int) -> Sample:
        """Rail k's veth pair deleted, then made again, as a driver reload
        and a network manager do it, in three steps, each of the first two
        untimed and followed by SETTLE: the pair deleted (the kernel
        flushes the table); the pair made from the peer namespace, the peer
        on the bridge and up (a new rail k appears, down, unaddressed: not
        ready for watch); then, the timed event, its addresses and up in
        one ip process (the carrier follows at once)."""
        table = TABLE_BASE + k
        self.between()
        sh(*self.h, "link", "del", f"rail{k}")
        time.sleep(SETTLE)
        sh("ip", "-n", self.tb.peer, "link", "add", f"p{k}", "type", "veth", "peer", "name", f"rail{k}",
           "netns", self.tb.host)
        sh("ip", "-n", self.tb.peer, "link", "set", f"p{k}", "master", "br0", "up")
        time.sleep(SETTLE)
        # What came meanwhile is not timed; the new link's index is learnt.
        for note in self.listener.since(self.index, 0):
            self.apply(note, {})
        self.index = len(self.listener.notes)
        self.observed = self.check([table], validate=False)
        batch = self.tb.workdir / "recreate.batch"
        batch.write_text("\n".join(rail_lines(self.plan, k, self.tb.peer)[1:]) + "\n")
        return self.event("recreate", k, [table], True, [(*self.h, "-batch", str(batch))])

    def routes_of(self, table: int) -> set:
        return {key for key in self.observed if key[0] == "R" and key[2] == table}

    # --- timing one -----------------------------------------------------------

    def event(self, kind: str, k: int, tables: list[int], routes: bool, cmds: list[tuple],
              renew: set = frozenset(), timeout: float = 10.0, rails: list[int] | None = None) -> Sample:
        """Runs cmds one after the other; returns the heal, timed by the
        notifications (the model over the rules of `tables` and, if
        `routes`, their routes; `renew` are routes the kernel removes
        silently; `rails`, default [k], the rails whose links, addresses
        and routes are the event's)."""
        rails = [k] if rails is None else rails
        scope = set(tables)
        in_scope = lambda key: key[2] in scope and (routes or key[0] == "U")  # noqa: E731
        want: dict = {}
        for t in tables:
            want.update({key: v for key, v in self.plan.expected(t - TABLE_BASE).items() if in_scope(key)})
        have = {key: v for key, v in self.observed.items() if in_scope(key) and key not in renew}
        bad = {key for key in set(want) | set(have) if not matches(want.get(key), have.get(key))}
        # Nothing owned may have changed since the last event's window
        # closed; watch's sockets read again (one it opened since?).
        self.between()
        self.ports = watch_ports(self.watch.pid)
        log_start = len(self.log)
        t0 = time.monotonic_ns()
        for cmd in cmds:
            out = sh(*cmd).stdout
        t_ip = time.monotonic_ns()
        if kind == "purge":
            # The purge process's own stamp after its last ack: Python's
            # exit takes a few ms more.
            count, t_ip = map(int, out.split())
            if count != len([key for key in self.observed if key[0] == "U"]):
                raise BenchError(f"the purge deleted {count} rules, not every owned one")
        healed_at: int | None = None
        # Healed is a transition: the model must have been wrong first (a
        # purge breaks nothing that the kernel does not announce).
        broken = bool(bad)
        routed_checked = False
        # (notification, sent by watch, about the event: its rails' links,
        # addresses and routes, or the owned rules and routes it concerns)
        seen: list[tuple[Note, bool, bool]] = []
        devs = {f"rail{r}" for r in rails}
        deadline = t0 + int(timeout * 1e9)
        index = self.index
        while True:
            now = time.monotonic_ns()
            if healed_at is not None and now >= healed_at + int(SETTLE * 1e9):
                break
            if healed_at is None and now > deadline:
                what = "not healed" if broken else "nothing it concerns changed"
                raise BenchError(self.explain(f"{kind} of rail{k}: {what} within {timeout:.0f} s", seen, bad))
            notes = self.listener.since(index, 0.005)
            index += len(notes)
            for note in notes:
                if note.kind == "O":
                    raise BenchError("the listener's socket overflowed (ENOBUFS): notifications lost")
                if note.t < t0:
                    continue
                by_watch = self.sender_is_watch(note)
                changed = self.apply(note, have)
                about = self.device(note) in devs or any(in_scope(key) for key in changed)
                seen.append((note, by_watch, about))
                for key in changed:
                    if in_scope(key):
                        if matches(want.get(key), have.get(key)):
                            bad.discard(key)
                        else:
                            bad.add(key)
                if note.kind == "L":
                    # A rail's device changed: its routes' devices read again.
                    for key in [x for x in set(want) | set(have) if x[0] == "R"]:
                        (bad.discard if matches(want.get(key), have.get(key)) else bad.add)(key)
                if bad:
                    broken, healed_at = True, None
                elif broken and healed_at is None:
                    healed_at = note.t
            if healed_at is not None and not routed_checked:
                # Cross-check, as soon as the notifications say healed.
                routed_checked = True
                for r in [self.plan.n - 1] if kind == "purge" else [k]:
                    for fam in (4, 6):
                        if not routed(self.tb, self.plan, r, fam):
                            raise BenchError(self.explain(
                                f"{kind} of rail{k}: the notifications said healed, but `ip route get` "
                                f"from rail{r}'s IPv{fam} address does not use table {TABLE_BASE + r}", seen, bad))
        self.index = index
        # The event's end: the last notification it caused before the heal.
        # Some come from kernel work queues that wait for the RTNL lock (an
        # IPv6 address's RTM_NEWADDR, the link-local address, the carrier):
        # on a busy machine (the lock is one for all namespaces) they may
        # come after watch healed from a dump that already showed what they
        # say; they are counted, not the end.
        caused = [n.t for n, by_watch, about in seen if about and not by_watch and n.t <= healed_at]
        late_event = [n for n, by_watch, about in seen if about and not by_watch and n.t > healed_at]
        owned = [n for n, by_watch, _ in seen if by_watch and n.kind in "RU" and self.owned(n)]
        late_watch = [n for n in owned if n.t > healed_at]
        outside = [n for n in owned if not in_scope(self.key(n))]
        problems = []
        if late_watch:
            problems.append("watch changed owned state after the heal: " + "; ".join(map(str, late_watch[:5])))
        if outside:
            problems.append("watch changed owned state outside the event's rails: " + "; ".join(map(str, outside[:5])))
        if not caused:
            problems.append("no notification of the event itself")
        first_change = min((n.t for n in owned if n.t >= max(caused or [t0])), default=healed_at)
        # The host, as a dump says it is 0.3 s after the heal.
        self.observed = self.check(tables)
        if problems:
            raise BenchError(self.explain(f"{kind} of rail{k}: " + "\n".join(problems), seen, set()))
        end = max(caused)
        # The longest silence inside the event (a slow step: the kernel
        # walking a million routes when an IPv4 address goes, a process
        # started late): a pass that it let start may heal right at the end.
        gap = max((b - a for a, b in zip(caused, caused[1:])), default=0)
        sample = Sample(kind, k, healed_at - end, healed_at - t_ip, first_change - end, len(late_event), gap)
        self.samples[kind].append(sample)
        if self.verbose:
            late = f"; {len(late_event)} of the event's notifications after the heal" if late_event else ""
            print(f"{kind} rail{k}: heal {sample.heal_ns / 1e6:.1f} ms, from `ip` {sample.from_ip_ns / 1e6:.1f} ms, "
                  f"to watch's first change {sample.first_ns / 1e6:.1f} ms; the event's longest silence "
                  f"{gap / 1e6:.1f} ms{late}", file=sys.stderr)
            if self.verbose > 1:
                print(self.explain("", seen, set()), file=sys.stderr)
        if sample.heal_ns >= SLOW_NS:
            # Not what a heal takes: watch's own words for it.
            print(f"watch.py: {kind} of rail{k} healed in {sample.heal_ns / 1e6:.0f} ms; watch said meanwhile:\n"
                  + "".join("  " + line for line in self.log[log_start:]), file=sys.stderr)
        return sample

    def device(self, note: Note) -> str | None:
        """The interface a link, address or route notification is about."""
        if note.kind == "L":
            return note.f[1]
        if note.kind == "A":
            return self.names.get(int(note.f[1]))
        if note.kind == "R" and note.f[3] != "0":
            return self.names.get(int(note.f[3]))
        return None

    def between(self) -> None:
        """Fails if an owned rule or route changed after the last event's
        window (0.3 s after its heal) closed."""
        notes = self.listener.since(self.index, 0)
        self.index += len(notes)
        changed = [n for n in notes if n.kind in "RU" and self.owned(n)]
        if changed:
            raise BenchError("owned rules or routes changed between events (after the 0.3 s that "
                             "followed the last heal): " + "; ".join(map(str, changed[:5])))
        if any(n.kind == "O" for n in notes):
            raise BenchError("the listener's socket overflowed (ENOBUFS): notifications lost")

    def sender_is_watch(self, note: Note) -> bool:
        if note.port == 0 or note.port in self.ports:
            return note.port != 0
        if note.kind in "RU" and note.new and self.owned(note):
            # An owned route or rule added by a port not known as watch's:
            # a socket watch opened since?
            self.ports = watch_ports(self.watch.pid)
            if note.port not in self.ports:
                raise BenchError(f"an owned route or rule was added by netlink port {note.port}, "
                                 f"not by watch (its ports: {sorted(self.ports)}): {note}")
            return True
        return False

    def owned(self, note: Note) -> bool:
        if note.kind == "U":
            return int(note.f[3]) == PROTO
        return int(note.f[6]) == PROTO or TABLE_BASE <= int(note.f[1]) < TABLE_BASE + self.plan.n

    def key(self, note: Note) -> tuple:
        fam, table = fam_of(note.f[0]), int(note.f[1])
        return ("U" if note.kind == "U" else "R", fam, table, note.f[2])

    def apply(self, note: Note, have: dict) -> list:
        """Replays one notification on the model; the keys it changed."""
        if note.kind == "L":
            idx, name = int(note.f[0]), note.f[1]
            if note.new:
                self.names[idx] = name
            else:
                self.names.pop(idx, None)
            return []
        if note.kind not in "RU" or not self.owned(note):
            return []
        key = self.key(note)
        if not note.new:
            have.pop(key, None)
        elif note.kind == "U":
            have[key] = True
        else:
            oif, src, gw = int(note.f[3]), note.f[4], note.f[5]
            have[key] = (self.names.get(oif, f"if{oif}"), None if src == "-" else src, None if gw == "-" else gw)
        return [key]

    def check(self, tables: list[int], validate: bool = True) -> dict:
        """A dump of the owned rules and the given tables; must be what watch
        must make (if validate). Returns what is known of the host: the dump,
        and the routes of the other tables as known before."""
        want: dict = {}
        for k in range(self.plan.n):
            want.update({key: v for key, v in self.plan.expected(k).items()
                         if key[0] == "U" or key[2] in tables})
        have = dump(self.tb, tables)
        diff = differences(want, have) if validate else []
        if diff:
            raise BenchError("the host is not what watch must make of it:\n" + "\n".join(diff[:20]))
        observed = {key: v for key, v in getattr(self, "observed", {}).items() if key[0] == "R" and key[2] not in tables}
        observed.update(have)
        return observed

    def explain(self, what: str, seen: list, bad: set) -> str:
        lines = [what]
        if bad:
            lines.append("not as watch must make it: " + ", ".join(map(str, sorted(bad, key=str)[:10])))
        if seen:
            t0 = seen[0][0].t
            lines.append("notifications (ms from the first; W = sent by watch, E = the event's):")
            lines += [f"  {(n.t - t0) / 1e6:8.2f} {'W' if w else 'E' if about else ' '} {n}"
                      for n, w, about in seen[-40:]]
        lines.append("watch's log:")
        lines += ["  " + line.rstrip() for line in self.log[-10:]]
        return "\n".join(lines)


def routed(tb: Testbed, plan: Plan, k: int, fam: int = 4) -> bool:
    """`ip route get` from rail k's primary address of that family uses its
    table."""
    gw = GATEWAY if fam == 4 else GATEWAY6
    out = sh("ip", "-n", tb.host, f"-{fam}", "route", "get", gw, "from", plan.primary(k, fam), check=False).stdout
    return f"dev rail{k} " in out and f"table {TABLE_BASE + k}" in out


# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------


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
    ap.add_argument("--rails", type=int, default=8, help=f"rails (default 8, at most {MAX_RAILS})")
    ap.add_argument("--addrs", type=int, default=1, help="addresses per rail and family (default 1)")
    ap.add_argument("--foreign-links", type=int, default=0, metavar="K",
                    help="K veth pairs with CNI-like names (cali...) that are not rails")
    ap.add_argument("--foreign-routes", type=int, default=0, metavar="R",
                    help="R blackhole /32 routes (from 10.0.0.0/8) in the main table")
    ap.add_argument("--quick", action="store_true", help="the heal latency only (no idle, storm, memory)")
    ap.add_argument("-v", "--verbose", action="count", default=0,
                    help="each heal on stderr as it is timed (-vv: with its notifications)")
    args = ap.parse_args()
    if not 1 <= args.rails <= MAX_RAILS:
        ap.error(f"--rails must be 1..{MAX_RAILS}")
    if args.addrs < 1 or args.rails * (args.addrs - 1) > EXTRA_V4[1] - EXTRA_V4[0] + 1:
        ap.error(f"--addrs must be at least 1, and rails x (addrs - 1) at most {EXTRA_V4[1] - EXTRA_V4[0] + 1}")
    if not 0 <= args.foreign_routes <= FOREIGN_ROUTE_NET.num_addresses:
        ap.error(f"--foreign-routes must be 0..{FOREIGN_ROUTE_NET.num_addresses}")
    if args.foreign_links < 0 or args.events < 1:
        ap.error("--foreign-links must be at least 0, --events at least 1")
    if os.geteuid() != 0:
        print("watch.py: must run as root", file=sys.stderr)
        return 2
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, stop_on_signal)
    binary = ensure_binary(args.binary.resolve())
    plan = Plan(args.rails, args.addrs)
    with tempfile.TemporaryDirectory(prefix="rrwatch-") as tmp:
        work = Path(tmp)
        config = work / "rails.toml"
        write_rails_config(config, plan.n)
        state = work / "state"
        if args.foreign_routes or args.foreign_links:
            print(f"building the testbed ({args.foreign_links} foreign links, {args.foreign_routes} "
                  "foreign routes)...", file=sys.stderr)
        with WatchBed(work, plan, args.foreign_links, args.foreign_routes) as tb:
            rr = [str(binary), "--netns", tb.host, "--state-dir", str(state)]
            watch = listener = None
            try:
                listener = Listener(tb.host)
                wait_quiet(listener)
                sh(*rr, "apply", "--no-announce", str(config))
                watch = Watch(rr, verbose=bool(args.pods))
                time.sleep(SETTLE)  # watch's first pass and its echo behind it
                heals = Heals(tb, watch, listener)
                heals.verbose = args.verbose
                try:
                    if args.pods:
                        pods(tb, heals, watch, args.pods, work)
                        return 0
                    results = measure(tb, heals, watch, args, listener)
                except BenchError:
                    print("".join(watch.log[-15:]), file=sys.stderr)
                    raise
            finally:
                # Both hold the namespace: gone before Testbed deletes it.
                if listener:
                    listener.stop()
                if watch:
                    watch.stop()
    report(results, heals, args)
    return 0


def purge_floor(tb: WatchBed, watch: Watch, listener: Listener, rounds: int) -> list[float]:
    """The kernel's part of a purge's heal, with watch stopped: the spans
    (ms) from the first to the last notification of the same rule adds sent
    by one process ahead of their acks (READD)."""
    watch.stop()
    spans = []
    for _ in range(rounds):
        index = len(listener.notes)
        readd = sh("ip", "netns", "exec", tb.host, sys.executable, "-c", PURGE, str(PROTO), "readd")
        n = int(readd.stdout.split()[0])
        time.sleep(0.3)
        adds = [x.t for x in listener.since(index, 0) if x.kind == "U" and x.new and int(x.f[3]) == PROTO]
        if not n or len(adds) != n:
            raise BenchError(f"the re-add of {n} rules gave {len(adds)} notifications")
        spans.append((max(adds) - min(adds)) / 1e6)
    return spans


def measure(tb: WatchBed, heals: Heals, watch: Watch, args, listener: Listener) -> dict:
    plan = tb.plan
    h = ("ip", "-n", tb.host)
    res: dict = {}
    # Each event comes to a settled watch: SETTLE after the previous heal
    # (Heals.event returns then), whose own notifications (the echo pass)
    # are behind it. Events back to back are the storm's measurement below.
    for i in range(args.events):
        heals.flap(i % plan.n)
    for _ in range(args.events):
        heals.purge()
    for i in range(args.events):
        heals.change(i % plan.n)
    for i in range(args.events):
        heals.recreate(i % plan.n)
    heals.check(heals.all_tables)
    if args.quick:
        res["floor"] = purge_floor(tb, watch, listener, args.events)
        return res
    # The listener's parsing would share the CPUs with watch from here on.
    listener.stop()
    pid = watch.pid
    rails = range(plan.n)
    all_routed = lambda: all(routed(tb, plan, k) for k in rails)  # noqa: E731
    time.sleep(1)
    before = cpu_ticks(pid)
    time.sleep(args.idle)
    res["idle_ticks"] = cpu_ticks(pid) - before
    # 1000 flaps of random rails in 10 s.
    rng = random.Random(7)
    before = cpu_ticks(pid)
    start = time.perf_counter()
    for i in range(1000):
        k = rng.randrange(plan.n)
        sh(*h, "link", "set", f"rail{k}", "down")
        sh(*h, "link", "set", f"rail{k}", "up")
        behind = start + (i + 1) * 0.01 - time.perf_counter()
        if behind > 0:
            time.sleep(behind)
    res["storm_seconds"] = time.perf_counter() - start
    res["storm_converge"] = wait(all_routed, timeout=30)
    time.sleep(1)
    res["storm_cpu_s"] = (cpu_ticks(pid) - before) / TICKS

    # Memory after 100 and after 10,000 flaps, each a storm in one ip -batch.
    def batch_flaps(n: int) -> None:
        path = Path(tempfile.mkstemp(prefix="rrwatch-flaps-")[1])
        path.write_text("".join(f"link set rail{j % plan.n} down\nlink set rail{j % plan.n} up\n" for j in range(n)))
        sh(*h, "-batch", str(path))
        path.unlink()
        wait(all_routed, timeout=60)
        time.sleep(1)

    batch_flaps(100)
    res["rss_100"] = status_kib(pid, "VmRSS")
    for _ in range(10):
        batch_flaps(990)
    res["rss_10000"] = status_kib(pid, "VmRSS")
    res["hwm"] = status_kib(pid, "VmHWM")
    return res


def pods(tb: WatchBed, heals: Heals, watch: Watch, n: int, work: Path) -> None:
    """N pod veths come and go; the last rail flaps halfway."""
    h = ("ip", "-n", tb.host)
    pid, log = watch.pid, watch.log
    time.sleep(1)
    passes = lambda: sum(1 for line in log if " pass " in f" {line}" and "at start" not in line)  # noqa: E731
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
            heal = heals.flap(tb.plan.n - 1)
    churn = time.perf_counter() - t0
    time.sleep(1)
    made = passes() - start_passes
    cpu = (cpu_ticks(pid) - start_ticks) / TICKS
    print(f"kernel {os.uname().release}, {os.cpu_count()} CPUs, {tb.plan.n} rails")
    print(f"pods: {n} veths created and deleted in {churn:.1f} s; watch made {made} passes "
          f"(1 is the rail's flap), used {cpu:.2f} s of CPU; the flap halfway healed in "
          f"{heal.heal_ns / 1e6:.1f} ms (from its last notification; {heal.from_ip_ns / 1e6:.1f} ms "
          f"from `ip` returning)")


def report(r: dict, heals: Heals, args) -> None:
    print(f"kernel {os.uname().release}, {os.cpu_count()} CPUs; {args.rails} rails, {args.addrs} "
          f"address(es) per rail and family, {args.foreign_links} foreign links, "
          f"{args.foreign_routes:,} foreign routes; {args.events} events of each kind")
    rt = "SCHED_FIFO" if heals.listener.realtime else "normal priority: SCHED_FIFO refused"
    print(f"heal: from the event's last notification to the one that completed the heal, both "
          f"stamped on receipt by a listener in the host namespace (CLOCK_MONOTONIC, {rt}); from `ip`: "
          "from the return of the event's last `ip` process instead (a purge: its process's stamp "
          "after its last ack); first change: from the event's last notification to watch's first "
          "change (its quiet period and its reading)\n")
    print("| event | median ms | p99 ms | max ms | median from `ip` ms | median to first change ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, what in KINDS:
        s = heals.samples[kind]
        v = [x.heal_ns / 1e6 for x in s]
        ip_ = [x.from_ip_ns / 1e6 for x in s]
        first = [x.first_ns / 1e6 for x in s]
        print(f"| {what} | {statistics.median(v):.1f} | {pct(v, 99):.1f} | {max(v):.1f} | "
              f"{statistics.median(ip_):.1f} | {statistics.median(first):.1f} |")
    notes = []
    late = [x for kind, _ in KINDS for x in heals.samples[kind] if x.late]
    if late:
        kinds = ", ".join(sorted({x.kind for x in late}))
        notes.append(f"{len(late)} event(s) ({kinds}) had notifications of their own after the heal (the "
                     "kernel's deferred work: an IPv6 address, the carrier); each is timed from its last "
                     "notification before the heal")
    gaps = [x for kind, _ in KINDS for x in heals.samples[kind] if x.gap_ns >= GAP_NOTE_NS]
    if gaps:
        kinds = ", ".join(sorted({x.kind for x in gaps}))
        notes.append(f"{len(gaps)} event(s) ({kinds}) fell silent for {GAP_NOTE_NS // 1_000_000} ms or more "
                     f"between two of their own notifications (longest {max(x.gap_ns for x in gaps) / 1e6:.0f} "
                     "ms): a pass that an earlier part started may end right after the event, and the "
                     "heal is short")
    if notes:
        print("\n" + "\n".join(f"- {n}" for n in notes))
    if r.get("floor"):
        purge = [(x.heal_ns - x.first_ns) / 1e6 for x in heals.samples["purge"]]
        print(f"\npurge, its rule adds alone: watch, from its first change to healed: median "
              f"{statistics.median(purge):.1f} ms; the same adds from one process, all sent before "
              f"the acks (watch stopped), first to last notification: median "
              f"{statistics.median(r['floor']):.1f} ms, max {max(r['floor']):.1f} ms")
    if args.quick:
        return
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
    except KeyboardInterrupt:
        print("\nwatch.py: interrupted; namespaces deleted", file=sys.stderr)
        sys.exit(130)
