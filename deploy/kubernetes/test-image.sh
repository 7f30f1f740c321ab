#!/usr/bin/env bash
# The container image, built and run as the DaemonSet runs it (CI runs this
# after the static build):
#
#   sudo deploy/kubernetes/test-image.sh
#
# Builds deploy/kubernetes/Containerfile with podman (FROM scratch: nothing
# is pulled, so it builds offline) from the static binary, then, against a
# private network namespace standing for the node (the pod's hostNetwork,
# here `--network ns:`), with the config mounted read-only at
# /etc/roce-route (the ConfigMap) and a state directory at /run/roce-route,
# privileged, it runs the manifests' own command lines (from check.py):
# the init container's apply, then watch, which must heal a flapped rail;
# then stops watch. The image, the containers, the namespaces and the temp
# dir are removed on exit, also on failure; the host's own network
# namespace is never touched.
#
# On a host with cgroups in hybrid mode (cgroup v1 with a v2 hierarchy at
# /sys/fs/cgroup/unified), crun refuses to start a container ("cgroups in
# hybrid mode not supported"): the script then runs itself in a private
# mount namespace without that mount, and podman with --cgroups=disabled.
#
# One PASS/FAIL line per check, then "N passed, M failed"; exit 1 on any failure.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$REPO/target/static/x86_64-unknown-linux-gnu/release/roce-route"

if [[ $(id -u) != 0 ]]; then
    echo "test-image.sh: run as root (it creates network namespaces and privileged containers)" >&2
    exit 1
fi
command -v podman >/dev/null || { echo "test-image.sh: podman is not installed: apt-get install podman" >&2; exit 1; }
[[ -x $BIN ]] || {
    echo "test-image.sh: no static binary at $BIN: build it first (README, \"Install\")" >&2
    exit 1
}
if [[ -z ${RR_IMAGE_UNSHARED:-} ]] && mountpoint -q /sys/fs/cgroup/unified 2>/dev/null; then
    export RR_IMAGE_UNSHARED=1
    exec unshare -m --propagation private bash -c 'umount /sys/fs/cgroup/unified && exec "$0" "$@"' "$0" "$@"
fi

TAG="localhost/roce-route-test:$$"
HOST="rrimg-$$-host"
PEER="rrimg-$$-peer"
WATCH="rrimg-$$-watch"
WORK="$(mktemp -d /tmp/roce-route-image.XXXXXX)"
PASSED=0
FAILED=0
PODMAN=(podman run --ulimit nofile=1024:1024 --ulimit nproc=1000:1000 --cgroups=disabled)

cleanup() {
    podman rm -f -t 0 "$WATCH" >/dev/null 2>&1 || true
    podman rmi -f "$TAG" >/dev/null 2>&1 || true
    ip netns del "$HOST" 2>/dev/null || true
    ip netns del "$PEER" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

check() {
    local what=$1
    shift
    if "$@"; then
        echo "PASS: $what"
        PASSED=$((PASSED + 1))
    else
        echo "FAIL: $what"
        FAILED=$((FAILED + 1))
    fi
}
# poll SECONDS COMMAND...: true once COMMAND is, within SECONDS.
poll() {
    local until=$((SECONDS + $1))
    shift
    while ((SECONDS < until)); do
        if "$@" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    "$@"
}

# The node: rail0, rail1 in 198.51.100.0/24, their veth peers up in PEER.
ip netns add "$HOST"
ip netns add "$PEER"
for k in 0 1; do
    ip -n "$HOST" link add "rail$k" type veth peer name "port$k" netns "$PEER"
    ip -n "$HOST" addr add "198.51.100.1$k/24" dev "rail$k"
    ip -n "$HOST" link set "rail$k" up
    ip -n "$PEER" link set "port$k" up
done
mkdir -p "$WORK/etc" "$WORK/state"
cat >"$WORK/etc/rails.toml" <<'TOML'
[[interface]]
name = "rail0"
addresses = ["198.51.100.10/24"]

[[interface]]
name = "rail1"
addresses = ["198.51.100.11/24"]
TOML
rail1_routed() { ip -n "$HOST" route get 198.51.100.1 from 198.51.100.11 | grep -q "table 101"; }

# The manifests' command lines: {"apply": [...], "watch": [...]}.
commands="$(python3 "$REPO/deploy/kubernetes/check.py")"
argv() { python3 -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])[sys.argv[2]]))' "$commands" "$1"; }
mapfile -t apply_cmd < <(argv apply)
mapfile -t watch_cmd < <(argv watch)

check "the image builds offline from the static binary" \
    podman build -q -f "$REPO/deploy/kubernetes/Containerfile" -t "$TAG" "$REPO"
check "the image holds the binary alone (one layer, no shell)" bash -c '
    [[ $(podman image inspect --format "{{len .RootFS.Layers}}" "$1") == 1 ]] &&
    ! podman run --rm --cgroups=disabled --entrypoint /bin/sh "$1" -c true >/dev/null 2>&1' _ "$TAG"

pod=("${PODMAN[@]}" --privileged --network "ns:/run/netns/$HOST"
    -v "$WORK/etc:/etc/roce-route:ro" -v "$WORK/state:/run/roce-route")
check "the init container's apply succeeds" \
    "${pod[@]}" --rm --entrypoint "${apply_cmd[0]}" "$TAG" "${apply_cmd[@]:1}"
check "after the init container, traffic from rail1 uses its own table" rail1_routed

"${pod[@]}" -d --name "$WATCH" --entrypoint "${watch_cmd[0]}" "$TAG" "${watch_cmd[@]:1}" >/dev/null
check "watch starts watching" poll 15 bash -c 'podman logs "$1" 2>&1 | grep -q watching' _ "$WATCH"
ip -n "$HOST" link set rail1 down
ip -n "$HOST" link set rail1 up
check "watch heals the flapped rail" poll 15 rail1_routed
check "watch stops on podman stop (SIGTERM), exit 0" bash -c '
    podman stop -t 10 "$1" >/dev/null && [[ $(podman inspect --format "{{.State.ExitCode}}" "$1") == 0 ]]' _ "$WATCH"
if ((FAILED > 0)); then
    echo "--- watch's log:"
    podman logs "$WATCH" 2>&1 | tail -20 || true
fi

# probe --rdma in both images. The node here has no RDMA device, so every
# pair's RDMA part is not verified; why tells which image loaded rdma-core:
# the static one cannot ("the static build"), the RDMA image
# (Containerfile.rdma: the dynamic binary with rdma-core's user space) can
# ("no RDMA port", not "cannot load").
rdma_verdicts() { # rdma_verdicts WORDS IMAGE: probe --rdma's pairs all not verified, saying WORDS
    local out
    out=$("${pod[@]}" --rm "$2" --json probe --rdma --timeout 0.2 --peer 198.51.100.1 /etc/roce-route/)
    python3 -c '
import json, sys
d = json.loads(sys.argv[1])
ok = d["probes"] and all(p["rdma_probe"]["result"] == "not_verified" and sys.argv[2] in json.dumps(p["rdma_probe"]) for p in d["probes"])
ok = ok and "cannot load" not in json.dumps(d) if sys.argv[2] != "static build" else ok
sys.exit(0 if ok else 1)' "$out" "$1" || { echo "$out" >&2; return 1; }
}
check "the static image: probe --rdma says the static build cannot load rdma-core" rdma_verdicts "static build" "$TAG"
RBIN="${ROCE_ROUTE_RDMA_BIN:-$REPO/target/release/roce-route}"
RTAG="localhost/roce-route-rdma-test:$$"
if [[ -x $RBIN ]]; then
    check "the RDMA image's root is assembled from the dynamic binary and rdma-core" \
        "$REPO/deploy/kubernetes/rdma-rootfs.sh" "$WORK/rdma-rootfs" "$RBIN"
    check "the RDMA image builds offline" \
        podman build -q -f "$REPO/deploy/kubernetes/Containerfile.rdma" -t "$RTAG" "$WORK/rdma-rootfs" >/dev/null
    check "the RDMA image: probe --rdma loads rdma-core (not verified only for the missing RDMA port)" \
        rdma_verdicts "no RDMA port" "$RTAG"
    podman rmi -f "$RTAG" >/dev/null 2>&1 || true
else
    check "a dynamic binary at $RBIN for the RDMA image (cargo build --release)" false
fi

echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
