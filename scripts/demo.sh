#!/usr/bin/env bash
# roce-route demo: a throwaway host with 4 rails on one subnet, before and
# after `roce-route apply`.
#
#   sudo scripts/demo.sh
#
# Builds target/release/roce-route if needed (ROCE_ROUTE_BIN names another
# binary). It needs nothing but bash, iproute2 and the build: the peer
# learns the rails' MACs from TCP connection attempts made by bash itself
# (/dev/tcp), not from ping. Everything happens in two
# private network namespaces, deleted on exit (also on error or Ctrl-C):
#
#   host namespace: rail0..rail3 = 198.51.100.10..13/24 (veths)
#   peer namespace: the other ends, on bridge br0 = 198.51.100.1/24
#                   (the gateway, and the "remote side" doing ARP)
#
# Nothing outside those namespaces is touched: roce-route's state directory
# (undo journals, record) is a temporary one, not /run/roce-route.
set -euo pipefail

RAILS=4
GW=198.51.100.1
HOST="rrdemo-$$-host"
PEER="rrdemo-$$-peer"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROCE_ROUTE_BIN:-$REPO/target/release/roce-route}"
WORK=""

cleanup() {
    ip netns del "$HOST" 2>/dev/null || true
    ip netns del "$PEER" 2>/dev/null || true
    if [[ -n $WORK ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

die() { echo "demo.sh: $*" >&2; exit 1; }
if [[ -t 1 ]]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD="" PLAIN=""; fi
heading() { printf '\n%s== %s ==%s\n' "$BOLD" "$*" "$PLAIN"; }
# Shows a command (with the namespace names shortened), then runs it.
run() {
    local shown="" arg
    for arg in "$@"; do
        if [[ $arg =~ [^A-Za-z0-9_./:=@%+,-] ]]; then arg="'$arg'"; fi
        shown+="${shown:+ }$arg"
    done
    shown="${shown//$HOST/\$HOST}"
    shown="${shown//$PEER/\$PEER}"
    shown="${shown//$REPO\//}"
    shown="${shown//$WORK\//}"
    printf '$ %s\n' "$shown"
    "$@"
}

addr_of() { echo "198.51.100.$((10 + $1))"; }
mac_of() { ip -n "$HOST" -br link show "rail$1" | awk '{print $3}'; }

build() {
    local cargo
    if [[ -n ${ROCE_ROUTE_BIN:-} ]]; then
        [[ -x $BIN ]] || die "ROCE_ROUTE_BIN=$BIN is not an executable"
        return
    fi
    if [[ -n ${SUDO_USER:-} && $SUDO_USER != root ]]; then
        # Build as the user who ran sudo, so that target/ stays theirs.
        local home
        home="$(getent passwd "$SUDO_USER" | cut -d: -f6)"
        cargo="$(command -v cargo || echo "$home/.cargo/bin/cargo")"
        if [[ -x $cargo ]]; then
            (cd "$REPO" && sudo -u "$SUDO_USER" -H "$cargo" build --release -q)
            return
        fi
    else
        cargo="$(command -v cargo || true)"
        if [[ -n $cargo ]]; then
            (cd "$REPO" && "$cargo" build --release -q)
            return
        fi
    fi
    [[ -x $BIN ]] || die "cargo not found and $BIN does not exist: build it with cargo build --release"
}

setup() {
    ip netns add "$HOST"
    ip netns add "$PEER"
    ip -n "$PEER" link add br0 type bridge
    ip -n "$PEER" addr add "$GW/24" dev br0
    ip -n "$PEER" link set br0 up
    ip -n "$HOST" link set lo up
    for ((k = 0; k < RAILS; k++)); do
        ip -n "$HOST" link add "rail$k" type veth peer name "p$k" netns "$PEER"
        ip -n "$HOST" link set "rail$k" address "02:00:00:00:00:0$k"
        ip -n "$HOST" addr add "$(addr_of "$k")/24" dev "rail$k"
        ip -n "$HOST" link set "rail$k" up
        ip -n "$PEER" link set "p$k" master br0 up
    done
    WORK="$(mktemp -d /tmp/rrdemo.XXXXXX)"
    # roce-route's journals and record go here rather than /run/roce-route.
    export ROCE_ROUTE_STATE_DIR="$WORK/state"
    {
        echo "# One [[interface]] per rail; the addresses are read from the host."
        for ((k = 0; k < RAILS; k++)); do
            printf '\n[[interface]]\nname = "rail%d"\ngateway = "%s"\n' "$k" "$GW"
        done
    } >"$WORK/demo.toml"
}

# Which rail does traffic from each rail's own address leave by?
check_routes() {
    local k out dev verdict
    for ((k = 0; k < RAILS; k++)); do
        out="$(ip -n "$HOST" route get "$GW" from "$(addr_of "$k")" | head -1)"
        dev="$(sed -n 's/.* dev \([^ ]*\).*/\1/p' <<<"$out")"
        if [[ $dev == "rail$k" ]]; then verdict="ok"; else verdict="WRONG: should be rail$k"; fi
        printf '$ ip -n $HOST route get %s from %s\n    %s   <- %s\n' "$GW" "$(addr_of "$k")" "$out" "$verdict"
    done
}

# The peer reaches for every rail address (a TCP connection attempt by
# bash: to send it, the peer resolves the address with ARP; the rail answers
# with a reset), then we read which MAC it learned.
check_arp() {
    local k learned owner verdict j
    ip -n "$PEER" neigh flush all
    ip -n "$HOST" neigh flush all
    for ((k = 0; k < RAILS; k++)); do
        ip netns exec "$PEER" timeout 2 bash -c "exec 3<>/dev/tcp/$(addr_of "$k")/9" 2>/dev/null || true
        ip -n "$PEER" neigh show "$(addr_of "$k")" | grep -q lladdr ||
            die "the peer cannot reach $(addr_of "$k")"
    done
    run ip -n "$PEER" neigh show dev br0
    echo
    printf '%-6s %-15s %-18s %-18s %s\n' rail address "its MAC" "peer learned" ""
    for ((k = 0; k < RAILS; k++)); do
        learned="$(ip -n "$PEER" neigh show "$(addr_of "$k")" | awk '{for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1)}')"
        owner="?"
        for ((j = 0; j < RAILS; j++)); do
            [[ $learned == "$(mac_of "$j")" ]] && owner="rail$j"
        done
        if [[ $owner == "rail$k" ]]; then
            verdict="ok"
        else
            verdict="WRONG: that is $owner's MAC"
        fi
        printf '%-6s %-15s %-18s %-18s %s\n' "rail$k" "$(addr_of "$k")" "$(mac_of "$k")" "${learned:-none}" "$verdict"
    done
}

main() {
    [[ $EUID -eq 0 ]] || die "needs root to create network namespaces: sudo $0"
    command -v ip >/dev/null || die "needs 'ip' (Debian/Ubuntu: apt-get install iproute2)"
    build
    setup

    heading "SETUP: host namespace with $RAILS rails on 198.51.100.0/24, peer (gateway $GW) on a bridge"
    run ip -n "$HOST" -br addr show
    echo
    run cat "$WORK/demo.toml"

    heading "BEFORE: which rail does each source address leave by?"
    check_routes
    heading "BEFORE: the peer's ARP view (it reaches for each rail address)"
    echo "(with the kernel defaults every rail answers ARP for every address, so the"
    echo " peer keeps one rail's MAC for several addresses)"
    check_arp

    heading "roce-route apply --dry-run: what would change (nothing is changed)"
    run "$BIN" --netns "$HOST" apply --dry-run "$WORK/demo.toml"

    heading "roce-route apply"
    run "$BIN" --netns "$HOST" apply "$WORK/demo.toml"

    heading "AFTER: which rail does each source address leave by?"
    check_routes
    heading "AFTER: the peer's ARP view"
    check_arp

    heading "AFTER: policy rules and per-rail tables"
    run ip -n "$HOST" rule
    for ((k = 0; k < RAILS; k++)); do
        run ip -n "$HOST" route show table $((100 + k))
    done
    for ((k = 0; k < RAILS; k++)); do
        for key in arp_ignore arp_announce; do
            printf 'net.ipv4.conf.rail%d.%s = %s\n' "$k" "$key" \
                "$(ip netns exec "$HOST" cat "/proc/sys/net/ipv4/conf/rail$k/$key")"
        done
    done

    heading "apply again: already in sync, nothing changes"
    run "$BIN" --netns "$HOST" apply "$WORK/demo.toml"

    heading "done: namespaces $HOST and $PEER are deleted on exit"
}

main "$@"
