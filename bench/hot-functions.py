#!/usr/bin/env python3
"""The functions a short run of roce-route executes, listed for the linker
(layout/hot-functions.txt), and a check that a binary was linked with them
first.

Why: on a virtual machine a page fault is the price of a short process. A
no-op apply made 234 of them, 75 in the binary's .text: the few hundred
kilobytes a run executes lay spread over the 5.6 MB of code, so nearly every
64 KB the kernel maps at a fault held something a run needs. build.rs asks
the linker (lld's --symbol-ordering-file) to put the listed functions first,
together. See bench/README.md, "Issue 26, seventeenth session".

Write the list (root: the runs use a throwaway network namespace; valgrind):

    sudo python3 bench/hot-functions.py [--binary target/release/roce-route] \
        [--binary target/static/x86_64-unknown-linux-gnu/release/roce-route]

It runs the commands a host runs most, each once under callgrind, in the
bench.py testbed (8 rails): apply from scratch, a no-op apply, check, show,
apply --dry-run, --version and remove. The list is their union in the order
of how often a host runs them (the no-op first), each run's functions that
an earlier one did not execute sorted by name (a module's functions
together, and the same list from the same code). Symbol names carry a hash
of the toolchain, the dependencies and the build settings: after a change of
any of them, write the list again (the check below says so). The static build (README) names
its functions with other hashes: give both binaries, and the list holds both
builds' names, one after the other (the linker skips names it does not have).

Check a built binary (CI runs it on the release and the static build):

    python3 bench/hot-functions.py --check target/release/roce-route [--runs]

It fails when fewer than --min-found of the listed functions are in the
binary (the list is stale) or when the binary's code does not begin with the
listed functions in their order (the linker did not take the list). With
--runs (root, valgrind) it runs the commands again and fails when more than
--max-unlisted of the Rust functions they execute are not listed (the C
library's variants are the CPU's choice): a change that makes a short run
execute new functions, or renames some (a changed type renames the functions
it is part of; with several codegen units any edit renames its module's
promoted ones, `.llvm.N`: Cargo.toml keeps the crate in one), leaves them
among the cold ones, a page fault or two each (17 of 1,547 unlisted cost a
no-op 30 more faults, 0.1 ms), so the list is written again with the change.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIST = REPO / "layout" / "hot-functions.txt"
sys.path.insert(0, str(Path(__file__).resolve().parent))

# (name, arguments after the binary and its state directory and namespace),
# in the order a host runs them most: a provisioning run re-applies far more
# often than it changes anything. The runs happen in another order (RUNS_IN).
RUNS = [
    ("apply, no-op", ["apply", "--no-announce", "{config}"]),
    ("apply, from scratch", ["apply", "--no-announce", "{config}"]),
    ("check", ["check", "{config}"]),
    ("show", ["show"]),
    ("apply --dry-run", ["apply", "--dry-run", "{config}"]),
    ("--version", ["--version"]),
    ("remove", ["remove"]),
]
RUNS_IN = ["apply, from scratch", "apply, no-op", "check", "show", "apply --dry-run", "--version", "remove"]

FN_LINE = re.compile(r"^c?fn=\((\d+)\)(?: (.*))?$")


def text_symbols(binary: Path) -> list[tuple[int, str]]:
    """The binary's defined functions as (address, mangled name), by address
    (code symbols with a size: not the labels inside a function)."""
    out = subprocess.run(
        ["nm", "--defined-only", "--numeric-sort", "--print-size", str(binary)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    symbols = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            symbols.append((int(parts[0], 16), parts[3]))
    return symbols


def executed(callgrind_out: Path, defined: set[str]) -> list[str]:
    """The functions of the binary a callgrind run executed, in the order
    callgrind first names them (its output names a function at its first
    cost or call, with an id it uses from then on)."""
    names: dict[str, str] = {}
    seen: list[str] = []
    known: set[str] = set()
    for line in callgrind_out.read_text(errors="replace").splitlines():
        m = FN_LINE.match(line)
        if not m:
            continue
        if m.group(2):
            names[m.group(1)] = m.group(2)
        name = names.get(m.group(1))
        if name and name in defined and name not in known:
            known.add(name)
            seen.append(name)
    return seen


def rust_name(name: str) -> bool:
    """Whether a symbol is a Rust function's (legacy or v0 mangling)."""
    return name.startswith(("_ZN", "_R"))


def listed(path: Path) -> list[str]:
    """The names of a list, as lld reads it: one a line, '#' lines and blank lines skipped."""
    return [name for part in parts(path) for name in part]


def parts(path: Path) -> list[list[str]]:
    """The names of a list by the build they were recorded from (a line
    `# build: BINARY` begins each build's names not listed before it)."""
    out: list[list[str]] = [[]]
    for line in (line.strip() for line in path.read_text().splitlines()):
        if line.startswith("# build:"):
            out.append([])
        elif line and not line.startswith("#"):
            out[-1].append(line)
    return [part for part in out if part]


def check(binary: Path, path: Path, min_found: float, max_unlisted: int | None) -> int:
    names = listed(path)
    symbols = text_symbols(binary)
    # A local function may have copies of one name (one per codegen unit).
    where: dict[str, list[int]] = {}
    for address, name in symbols:
        where.setdefault(name, []).append(address)
    found = [n for n in names if n in where]
    # The build this binary is: the part of the list it has most of.
    part = max(parts(path), key=lambda p: sum(1 for n in p if n in where) / len(p), default=[])
    in_part = sum(1 for n in part if n in where)
    share = in_part / len(part) if part else 0.0
    print(
        f"hot-functions: {in_part} of the {len(part)} functions listed for this build are in {binary} "
        f"({share:.0%}; {len(found)} of all {len(names)} listed)"
    )
    if share < min_found:
        print(
            f"hot-functions: fewer than {min_found:.0%}: the list is stale (a new toolchain, dependency or "
            "build setting renames every symbol); write it again, from both builds (the module's doc): "
            "sudo python3 bench/hot-functions.py --binary RELEASE --binary STATIC",
            file=sys.stderr,
        )
        return 1
    # The linker places each listed function's section in the list's order,
    # before every other: the found ones must be the first code symbols,
    # at rising addresses. Other names at a listed function's address are
    # its aliases (identical instances of a generic share one body). Only
    # Rust's functions are compared: each has a section of its own, where
    # the C library's objects (the static build) hold several in one.
    rust = [n for n in found if rust_name(n)]
    addresses = [min(where[n]) for n in rust]
    out_of_order = sum(1 for a, b in zip(addresses, addresses[1:]) if b < a)
    at_listed = {a for n in found for a in where[n]}
    last = max(addresses, default=0)
    before = [n for a, n in symbols if a < last and a not in at_listed and rust_name(n)]
    print(
        f"hot-functions: the listed ones span {last - min(addresses, default=last):,} bytes; "
        f"{out_of_order} out of order, {len(before)} other functions among them"
    )
    if not rust or out_of_order or len(before) > len(rust) // 10:
        print(
            "hot-functions: the binary's code does not begin with the listed functions: was it linked "
            "without the list (build.rs: lld's --symbol-ordering-file)?",
            file=sys.stderr,
        )
        return 1
    if max_unlisted is None:
        return 0
    if not can_run():
        return 1
    runs = record(binary)
    if runs is None:
        return 1
    # Rust's functions only: the C library's (the static build) are chosen
    # by the CPU at run time (memcpy's AVX2 or SSE2 variant) and come in
    # objects of several functions each; valgrind hides AVX-512.
    executed_now = {f for functions in runs.values() for f in functions if rust_name(f)}
    unlisted = sorted(executed_now - set(names))
    print(
        f"hot-functions: {len(executed_now) - len(unlisted)} of the {len(executed_now)} functions the runs "
        f"executed are listed"
    )
    for name in unlisted[:10]:
        print(f"  not listed: {name}")
    if len(unlisted) > max_unlisted:
        print(
            f"hot-functions: more than {max_unlisted} not listed: the runs execute functions the list does not "
            "place first; write it again (the module's doc)",
            file=sys.stderr,
        )
        return 1
    return 0


def can_run() -> bool:
    """Whether the commands can be run here, said when not."""
    if os.geteuid() != 0:
        print("hot-functions: the runs need root (a throwaway network namespace)", file=sys.stderr)
        return False
    if not shutil.which("valgrind"):
        print("hot-functions: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return False
    return True


def built_by(binary: Path) -> str:
    """The compiler a binary says it was built by (its .comment section):
    the one that matters, not whichever rustc is on PATH (under sudo, often
    none)."""
    out = subprocess.run(["readelf", "-p", ".comment", str(binary)], capture_output=True, text=True).stdout
    m = re.search(r"rustc version [^\n]*?\)", out)
    return m.group(0) if m else "rustc unknown"


def write(binaries: list[Path], path: Path) -> int:
    if not can_run():
        return 1
    rustc = built_by(binaries[0])
    order: list[str] = []
    known: set[str] = set()
    for binary in binaries:
        print(f"hot-functions: {binary}", file=sys.stderr)
        runs = record(binary)
        if runs is None:
            return 1
        shown = binary.resolve().relative_to(REPO) if binary.resolve().is_relative_to(REPO) else binary
        order.append(f"# build: {shown}")
        for name, _ in RUNS:
            new = sorted(set(runs[name]) - known)
            known.update(new)
            order.extend(new)
    header = [
        "# The functions a short run of roce-route executes, for the linker to place first and",
        "# together (build.rs: lld's --symbol-ordering-file). Written by bench/hot-functions.py:",
        f"# {'; '.join(name for name, _ in RUNS)}; in that order ({len(known)} functions,",
        f"# {len(binaries)} build(s)); {rustc}. Names carry a hash of the toolchain, the",
        "# dependencies and the build settings: `python3 bench/hot-functions.py --check BINARY`",
        "# says when to write it again.",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(header + order) + "\n")
    print(f"hot-functions: {len(known)} functions written to {path}", file=sys.stderr)
    return 0


def record(binary: Path) -> dict[str, list[str]] | None:
    """Each run's executed functions of `binary`, by the run's name."""
    import bench  # bench/bench.py: its testbed and config

    defined = {name for _, name in text_symbols(binary)}
    with tempfile.TemporaryDirectory(prefix="hot-functions-") as tmp:
        work = Path(tmp)
        config = work / "config.toml"
        bench.write_config(config)
        state = work / "state"
        state.mkdir()
        runs: dict[str, list[str]] = {}
        with bench.Testbed("hot", work) as tb:
            for name in RUNS_IN:
                args = dict(RUNS)[name]
                if name == "apply, from scratch":
                    tb.reset()
                out = work / f"callgrind.{len(runs)}"
                cmd = [str(binary)]
                if name != "--version":
                    cmd += ["--state-dir", str(state), "--netns", tb.host]
                cmd += [a.format(config=config) for a in args]
                p = subprocess.run(
                    ["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}", *cmd],
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                if p.returncode != 0:
                    print(f"hot-functions: {' '.join(cmd)} failed under valgrind:\n{p.stderr}", file=sys.stderr)
                    return None
                runs[name] = executed(out, defined)
                print(f"  {name}: {len(runs[name])} functions", file=sys.stderr)
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--binary",
        type=Path,
        action="append",
        help="a build to list the functions of (repeat for more; default target/release/roce-route)",
    )
    ap.add_argument("--list", type=Path, default=LIST, help=f"the list (default {LIST.relative_to(REPO)})")
    ap.add_argument("--check", type=Path, metavar="BINARY", help="check BINARY against the list instead")
    ap.add_argument("--min-found", type=float, default=0.8, help="--check: least share found (default 0.8)")
    ap.add_argument("--runs", action="store_true", help="--check: also run the commands (root, valgrind)")
    ap.add_argument(
        "--max-unlisted", type=int, default=5, help="--runs: most executed functions not listed (default 5)"
    )
    args = ap.parse_args()
    if args.check:
        return check(args.check, args.list, args.min_found, args.max_unlisted if args.runs else None)
    binaries = args.binary or [REPO / "target" / "release" / "roce-route"]
    for binary in binaries:
        if not binary.exists():
            print(f"hot-functions: {binary} is missing: build it first (cargo build --release)", file=sys.stderr)
            return 1
    return write(binaries, args.list)


if __name__ == "__main__":
    sys.exit(main())
