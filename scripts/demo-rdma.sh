#!/usr/bin/env bash
# The RDMA demo: two hosts with 4 soft-RoCE rails each in one subnet, in a
# VM. Shows rping per rail before the fix (rail 0 works, rails 1-3 hang) and
# after `roce-route apply` on both hosts (every rail works). A few minutes
# under TCG (boot about 30 s, then about 2 minutes).
#
# What it needs, and why:
#   - root: it installs Debian packages (qemu-system-x86, rdma-core, perftest,
#     rdmacm-utils, busybox-static, ...) and the VM's hosts are network
#     namespaces created inside the VM;
#   - Debian (apt) with the Debian archive reachable: the VM runs the
#     trixie-backports kernel, whose rxe works between network namespaces
#     (bookworm's 6.1 rxe does not); it is fetched with a private apt
#     configuration and unpacked with dpkg -x, never installed;
#   - qemu-system-x86_64 with TCG (software emulation, works without KVM);
#   - the release binary: cargo build --release --locked.
# Nothing changes on this machine's own network: everything runs in the VM.
# Environment: as tests/rdma-vm/run (ROCE_ROUTE_BIN, RDMA_VM_DIR, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

need() { echo "demo-rdma: cannot run here: $*" >&2; exit 1; }
[ "$(uname -s)" = Linux ] || need "Linux only (qemu, 9p and network namespaces)"
[ "$(id -u)" = 0 ] || need "run it as root (it installs Debian packages and boots a VM)"
command -v apt-get > /dev/null && command -v dpkg > /dev/null ||
  need "a Debian system (apt-get, dpkg) is needed to fetch the packages and the VM's kernel"
bin=${ROCE_ROUTE_BIN:-target/release/roce-route}
[ -x "$bin" ] || need "$bin is missing: build it with cargo build --release --locked"

t0=$(date +%s)
set +e
RDMA_VM_QUIET=1 tests/rdma-vm/run demo
rc=$?
set -e
echo "demo-rdma: $(($(date +%s) - t0)) s"
case $rc in
  0) ;;
  77) echo "demo-rdma: this machine cannot boot the VM (see the reason above)" >&2 ;;
  *) echo "demo-rdma: the demo failed (exit $rc)" >&2 ;;
esac
exit $rc
