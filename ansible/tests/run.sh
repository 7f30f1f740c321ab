#!/usr/bin/env bash
# The Ansible module's CI test, against a private test bed:
#
#   sudo ansible/tests/run.sh
#
# Installs ansible-core from PyPI into a venv (target/ansible-venv, or
# $ANSIBLE_VENV), builds the release binary (cargo build --release --locked,
# or takes $ROCE_ROUTE_BIN), creates two private network namespaces (a host
# with rails rail0..rail2 = 198.51.100.10..12/24, veths bridged in a peer
# namespace, as tests/common does) and runs ansible/tests/module.yml with
# connection: local against them, with netns: and state_dir: (a temp dir).
# Then a second host namespace (rails 198.51.100.20..22 on the same bridge)
# and an inventory of two local hosts for ansible/probe.yml (the fleet probe
# and its report); RR_KEEP_REPORTS=DIR keeps a copy of each report there.
# The modules run from every layout ansible/README.md names: ANSIBLE_LIBRARY
# with ANSIBLE_MODULE_UTILS (module.yml), the role, the collection
# roce_route.fleet, and library/ with module_utils/ beside probe.yml.
# Every namespace and the temp dir are deleted on exit, also on failure.
# The host's own network namespace is never touched.
#
# One PASS/FAIL line per check, then "N passed, M failed"; exit 1 on any failure.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RAILS=3
GW=198.51.100.1
HOST="rrans-$$-host"
PEER="rrans-$$-peer"
HOSTB="rrans-$$-hostb"
VENV="${ANSIBLE_VENV:-$REPO/target/ansible-venv}"
WORK=""
PASSED=0
FAILED=0

cleanup() {
    ip netns del "$HOST" 2>/dev/null || true
    ip netns del "$PEER" 2>/dev/null || true
    ip netns del "$HOSTB" 2>/dev/null || true
    if [[ -n $WORK ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

die() { echo "ansible/tests/run.sh: $*" >&2; exit 1; }
pass() { echo "PASS: $*"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
# check NAME COMMAND...: PASS when COMMAND succeeds.
check() {
    local name=$1
    shift
    if "$@"; then pass "$name"; else fail "$name"; fi
}
# playbook LOG ARGS...: ansible-playbook ARGS, its output in LOG (shown when it fails).
playbook() {
    local log=$1
    shift
    "$VENV/bin/ansible-playbook" "$@" >"$log" 2>&1 || { echo "ansible-playbook exited $?:" >&2; cat "$log" >&2; return 1; }
}
# own COMMAND...: COMMAND without ANSIBLE_LIBRARY and ANSIBLE_MODULE_UTILS, the
# collection installed in $WORK/collections: the modules and their module_utils
# come only from beside the playbook, from the role or from the collection.
own() (
    unset ANSIBLE_LIBRARY ANSIBLE_MODULE_UTILS
    export ANSIBLE_COLLECTIONS_PATH="$WORK/collections"
    "$@"
)

[[ $EUID -eq 0 ]] || die "needs root to create network namespaces"
command -v ip >/dev/null || die "needs ip (iproute2)"

# --- tools --------------------------------------------------------------
if [[ ! -x $VENV/bin/ansible-playbook ]]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check ansible-core
fi
PY="$VENV/bin/python"
"$VENV/bin/ansible" --version >"$VENV/version.txt"
head -1 "$VENV/version.txt"
if [[ -n ${ROCE_ROUTE_BIN:-} ]]; then
    BIN=$ROCE_ROUTE_BIN
else
    (cd "$REPO" && cargo build --release --locked --quiet)
    BIN="$REPO/target/release/roce-route"
fi
[[ -x $BIN ]] || die "$BIN is not an executable"

WORK="$(mktemp -d /tmp/rrans.XXXXXX)"
export ANSIBLE_LOCAL_TEMP="$WORK/ansible-tmp"
export ANSIBLE_REMOTE_TEMP="$WORK/ansible-tmp"
# The short names roce_route and roce_route_probe for tests/module.yml and the
# plays in $WORK; the role, the collection and probe.yml (its own library/ and
# module_utils/ beside it) run with neither variable (own).
export ANSIBLE_LIBRARY="$REPO/ansible/library"
export ANSIBLE_MODULE_UTILS="$REPO/ansible/module_utils"
export ANSIBLE_NOCOLOR=1
export ANSIBLE_RETRY_FILES_ENABLED=0

# --- test bed -----------------------------------------------------------
# add_host NS BASE VETH: a new namespace NS with rails rail0..2 =
# 198.51.100.BASE+k/24, veths whose other ends VETH0..2 are bridged in $PEER.
add_host() {
    local ns=$1 base=$2 veth=$3 k
    ip netns add "$ns"
    # No duplicate address detection: the IPv6 link-local addresses are final
    # at once, so the dumps compared below do not move by themselves.
    ip netns exec "$ns" sh -c 'echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad'
    ip -n "$ns" link set lo up
    for ((k = 0; k < RAILS; k++)); do
        ip -n "$ns" link add "rail$k" type veth peer name "$veth$k" netns "$PEER"
        ip -n "$ns" addr add "198.51.100.$((base + k))/24" dev "rail$k"
        ip -n "$ns" link set "rail$k" up
        ip -n "$PEER" link set "$veth$k" master br0 up
    done
    for _ in $(seq 50); do
        [[ -z $(ip -n "$ns" -6 addr show tentative) ]] && break
        sleep 0.1
    done
    sleep 0.5
}
ip netns add "$PEER"
ip -n "$PEER" link add br0 type bridge
ip -n "$PEER" addr add "$GW/24" dev br0
ip -n "$PEER" link set br0 up
add_host "$HOST" 10 p

# The inventory: this machine, local connection, the venv's python, and the
# rails as host variables (what site.yml's template reads).
{
    echo "all:"
    echo "  children:"
    echo "    testbed:"
    echo "      hosts:"
    echo "        localhost:"
    echo "          ansible_connection: local"
    echo "          ansible_python_interpreter: $PY"
    echo "          roce_route_rails:"
    for ((k = 0; k < RAILS; k++)); do
        echo "            - name: rail$k"
        echo "              addresses: [\"198.51.100.$((10 + k))/24\"]"
        if ((k == 0)); then echo "              gateway: $GW"; fi
    done
} >"$WORK/inventory.yml"

# ns_dump NS: everything that roce-route may change in NS, in full.
ns_dump() {
    local f k key
    for f in -4 -6; do
        ip -n "$1" "$f" rule
        ip -n "$1" "$f" route show table all
    done
    for ((k = 0; k < RAILS; k++)); do
        for key in arp_ignore arp_announce; do
            echo "rail$k $key $(ip netns exec "$1" cat "/proc/sys/net/ipv4/conf/rail$k/$key")"
        done
    done
}
dump() { ns_dump "$HOST"; }
owned() { dump | grep -c 'proto 234' || true; }

RUN=0
# play [ansible-playbook options...]: runs module.yml; the task's registered
# result lands in $RESULT, the output in $LOG.
play() {
    RUN=$((RUN + 1))
    RESULT="$WORK/result-$RUN.json"
    LOG="$WORK/play-$RUN.log"
    rm -f "$RESULT"
    playbook "$LOG" -i "$WORK/inventory.yml" "$REPO/ansible/tests/module.yml" \
        -e "rr_binary=$BIN rr_netns=$HOST rr_state_dir=$WORK/state" \
        -e "rr_config=$WORK/rails.toml rr_result=$RESULT" "$@" || return 1
    [[ -f $RESULT ]] || { echo "module.yml wrote no $RESULT:" >&2; cat "$LOG" >&2; return 1; }
}
# r EXPR: EXPR (Python, over the registered result `r`) is true.
r() {
    "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
        "$RESULT" "$1" || { echo "  not true: $1 in:" >&2; cat "$RESULT" >&2; return 1; }
}
same() {
    if [[ $1 == "$2" ]]; then return 0; fi
    diff <(echo "$1") <(echo "$2") >&2
    return 1
}

# --- checks -------------------------------------------------------------
cd "$REPO"
check "ansible-doc accepts the module's documentation" \
    bash -c '"$1/bin/ansible-doc" -M ansible/library roce_route >"$2/doc.txt" && grep -q "state_dir" "$2/doc.txt" && grep -q "EXAMPLES" "$2/doc.txt"' _ "$VENV" "$WORK"
check "ansible-doc --json: DOCUMENTATION, EXAMPLES and RETURN parse" \
    bash -c '"$1/bin/ansible-doc" -M ansible/library --json roce_route | "$1/bin/python" -c "
import json, sys
d = json.load(sys.stdin)[\"roce_route\"]
assert d[\"doc\"][\"options\"][\"state\"][\"choices\"] == [\"present\", \"absent\"], d
assert \"roce_route:\" in d[\"examples\"]
assert \"changed\" in d[\"return\"] and \"commands\" in d[\"return\"]
"' _ "$VENV"
check "site.yml passes ansible-playbook --syntax-check" \
    own playbook "$WORK/syntax.log" --syntax-check -i "$WORK/inventory.yml" ansible/site.yml
check "ansible/ installs as the collection roce_route.fleet" own bash -c '
    "$1/bin/ansible-galaxy" collection install ansible/ -p "$2/collections" >"$2/galaxy.log" 2>&1 ||
        { cat "$2/galaxy.log" >&2; exit 1; }
    "$1/bin/ansible-doc" roce_route.fleet.roce_route >"$2/doc-collection.txt" &&
    grep -q state_dir "$2/doc-collection.txt"' _ "$VENV" "$WORK"

before="$(dump)"
play --check --diff &&
    check "check mode on a fresh host: reports changed" r 'r["changed"] is True and not r.get("failed")' &&
    check "check mode: the diff holds the commands" \
        r '"ip -n '"$HOST"' -4 rule add priority 1000 from 198.51.100.11 lookup" in r["diff"]["prepared"] and len(r["commands"]) > 0' \
    || fail "check mode run"
check "check mode changed nothing (full dumps of rules, routes, sysctls equal)" same "$before" "$(dump)"

play && check "first apply reports changed" r 'r["changed"] is True and not r.get("failed") and r["exit_code"] == 0' \
    || fail "first apply ran"
check "first apply made the routes and rules (proto 234)" test "$(owned)" -gt 0
check "first apply: traffic from rail2 leaves by rail2" \
    bash -c 'ip -n "$1" route get 198.51.100.1 from 198.51.100.12 | grep -q "dev rail2"' _ "$HOST"

play && check "second apply: not changed" r 'r["changed"] is False and not r.get("failed") and r["commands"] == []' \
    || fail "second apply ran"

# A rail the host does not have: the tool applies the rest and exits 5;
# the module succeeds and passes each not_ready entry on as a warning.
rails_plus_missing='{"roce_route_rails": [{"name": "rail0", "addresses": ["198.51.100.10/24"], "gateway": "198.51.100.1"}, {"name": "rail1", "addresses": ["198.51.100.11/24"]}, {"name": "rail2", "addresses": ["198.51.100.12/24"]}, {"name": "rail9", "addresses": ["198.51.100.19/24"]}]}'
play -e "$rails_plus_missing" &&
    check "not-ready rail (exit 5): success, not_ready returned" \
        r 'not r.get("failed") and r["exit_code"] == 5 and r["not_ready"][0]["interface"] == "rail9"' &&
    check "not-ready rail: an Ansible warning names it" grep -q 'WARNING.*not ready, left alone: .*rail9' "$LOG" \
    || fail "not-ready run"
play -e "$rails_plus_missing" -e rr_strict=true &&
    check "not-ready rail with strict: fails with exit 1 and the tool's message" \
        r 'r.get("failed") is True and r["rc"] == 1 and "rail9" in r["msg"] and r["msg"] == r["result"]["error"]["message"]' \
    || fail "strict run"

# install: the draft enters the boot set once applied; a failing one never.
mkdir -p "$WORK/boot" "$WORK/boot-bad"
play -e "rr_install=$WORK/boot" &&
    check "install: the applied config is in the boot set" cmp -s "$WORK/rails.toml" "$WORK/boot/rails.toml" \
    || fail "install run"
printf '[[interface]]\nname = "rail0"\nfrobnicate = 1\n' >"$WORK/boot-bad/rails.toml"
play -e "rr_render=false rr_config=$WORK/boot-bad/rails.toml rr_install=$WORK/boot" &&
    check "install: a failing config stays out of the boot set" \
        bash -c '"$1" -c "import json, sys; sys.exit(not json.load(open(sys.argv[1])).get(\"failed\"))" "$3" &&
            cmp -s "$2/rails.toml" "$2/boot/rails.toml"' _ "$PY" "$WORK" "$RESULT" \
    || fail "install of a bad config"

after_apply="$(dump)"
play --check --diff -e rr_state=absent &&
    check "check mode, state absent: reports changed, the diff has the deletions" \
        r 'r["changed"] is True and "rule del" in r["diff"]["prepared"]' \
    || fail "check mode absent run"
check "check mode, state absent: changed nothing (full dumps equal)" same "$after_apply" "$(dump)"

play -e rr_state=absent && check "state absent: changed" r 'r["changed"] is True and not r.get("failed")' \
    || fail "absent run"
check "state absent: no proto 234 entry left" test "$(owned)" -eq 0
check "state absent: the sysctls are back" \
    bash -c '[[ "$1" == *"rail0 arp_ignore 0"* && "$1" == *"rail0 arp_announce 0"* ]]' _ "$(dump)"
play -e rr_state=absent && check "state absent again: not changed" r 'r["changed"] is False and not r.get("failed")' \
    || fail "second absent run"

# A bad config: the task fails with the tool's own message and exit code.
printf '[[interface]]\nname = "rail0"\nfrobnicate = 1\n' >"$WORK/bad.toml"
expected="$("$BIN" --json --netns "$HOST" --state-dir "$WORK/state" apply "$WORK/bad.toml" 2>/dev/null |
    "$PY" -c 'import json, sys; print(json.load(sys.stdin)["error"]["message"])' || true)"
play -e "rr_render=false rr_config=$WORK/bad.toml" &&
    check "bad config: the task fails with the tool's message and exit 2" \
        r 'r.get("failed") is True and r["rc"] == 2 and "frobnicate" in r["msg"]' &&
    check "bad config: the message is exactly the tool's error.message" \
        bash -c '[[ -n $2 ]] && "$1" -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))[\"msg\"] != sys.argv[2])" "$3" "$2"' \
        _ "$PY" "$expected" "$RESULT" &&
    check "bad config: ansible-playbook shows the failure" grep -q 'FAILED!.*frobnicate' "$LOG" \
    || fail "bad config run"
check "bad config changed nothing" test "$(owned)" -eq 0

# ansible/ as a role: its library/ and module_utils/ give the play the module.
cat >"$WORK/role.yml" <<EOF
- hosts: testbed
  gather_facts: false
  roles:
    - role: $REPO/ansible
  tasks:
    - roce_route:
        config: $WORK/rails.toml
        netns: $HOST
        state_dir: $WORK/state
        binary: $BIN
      check_mode: true
      register: rr
    - assert:
        that: [rr.changed]
EOF
check "ansible/ as a role path provides roce_route" \
    own playbook "$WORK/role.log" -i "$WORK/inventory.yml" "$WORK/role.yml"

# ansible/ as the collection: its modules by their full names, from a play
# with nothing beside it, so their module_utils can only come from the
# collection's plugins/module_utils/.
cat >"$WORK/collection.yml" <<EOF
- hosts: testbed
  gather_facts: false
  tasks:
    - roce_route.fleet.roce_route:
        config: $WORK/rails.toml
        netns: $HOST
        state_dir: $WORK/state
        binary: $BIN
      check_mode: true
      diff: true
      register: rr
    - roce_route.fleet.roce_route_probe:
        self_only: true
        config: [$WORK/rails.toml]
        netns: $HOST
        binary: $BIN
      register: desc
    - assert:
        that:
          - rr.changed and rr.exit_code == 0 and "rule add" in rr.diff.prepared
          - desc['self'].rails | map(attribute='name') | list == ['rail0', 'rail1', 'rail2']
EOF
check "the collection's roce_route (check mode) and roce_route_probe (self_only) run" \
    own playbook "$WORK/collection.log" -i "$WORK/inventory.yml" "$WORK/collection.yml"

# --- the fleet probe (probe.yml) ------------------------------------------
# Two "hosts" of the group rdma, both connection: local: A is the host
# namespace above (rail0..2 = 198.51.100.10..12), B a second one with its
# own rails (198.51.100.20..22) on the same bridge. Each is applied with
# the binary (arp_ignore=1, arp_announce=2, source rules), then probe.yml
# gathers both --self documents, has each probe the other, and writes the
# report on the "controller" (this machine).
add_host "$HOSTB" 20 q
# fleet_toml BASE: the config of rails rail0..2 = 198.51.100.BASE+k.
fleet_toml() {
    local k
    for ((k = 0; k < RAILS; k++)); do
        printf '[[interface]]\nname = "rail%d"\naddresses = ["198.51.100.%d/24"]\n' "$k" "$(($1 + k))"
        if ((k == 0)); then printf 'gateway = "%s"\n' "$GW"; fi
        echo
    done
}
fleet_toml 10 >"$WORK/fleet-a.toml"
fleet_toml 20 >"$WORK/fleet-b.toml"
{
    echo "all:"
    echo "  children:"
    echo "    rdma:"
    echo "      vars:"
    echo "        ansible_connection: local"
    echo "        ansible_python_interpreter: $PY"
    echo "        ansible_become: false"
    echo "        roce_route_binary: $BIN"
    echo "      hosts:"
    echo "        host-a:"
    echo "          roce_route_netns: $HOST"
    echo "          roce_route_state_dir: $WORK/state-a"
    echo "          roce_route_config: $WORK/fleet-a.toml"
    echo "        host-b:"
    echo "          roce_route_netns: $HOSTB"
    echo "          roce_route_state_dir: $WORK/state-b"
    echo "          roce_route_config: $WORK/fleet-b.toml"
} >"$WORK/fleet.yml"
# probe.yml, then each host's registered results as JSON for the checks.
cat >"$WORK/fleet-play.yml" <<EOF
- import_playbook: $REPO/ansible/probe.yml
- hosts: rdma
  gather_facts: false
  tasks:
    - ansible.builtin.copy:
        content: "{{ {'self': roce_route_self, 'matrix': roce_route_matrix} | to_nice_json }}"
        dest: "$WORK/fleet-{{ inventory_hostname }}.json"
        mode: "0600"
      check_mode: false
      diff: false
EOF
fleet_dump() { ns_dump "$HOST"; ns_dump "$HOSTB"; }
REPORT="$WORK/fleet-probe.md"
# fleet [ansible-playbook options...]: runs probe.yml over host-a and host-b,
# with the library/ and module_utils/ beside it.
fleet() {
    RUN=$((RUN + 1))
    LOG="$WORK/play-$RUN.log"
    rm -f "$REPORT" "$WORK"/fleet-host-?.json
    own playbook "$LOG" -i "$WORK/fleet.yml" "$WORK/fleet-play.yml" -e "roce_route_probe_report=$REPORT" "$@" || return 1
    keep_report
}
# fr HOST EXPR: EXPR (Python, over host HOST's results `s` and `m`) is true.
fr() {
    "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); s, m = d["self"], d["matrix"]; sys.exit(0 if eval(sys.argv[2]) else 1)' \
        "$WORK/fleet-$1.json" "$2" || { echo "  not true: $2 in:" >&2; cat "$WORK/fleet-$1.json" >&2; return 1; }
}
keep_report() { if [[ -n ${RR_KEEP_REPORTS:-} ]]; then cp "$REPORT" "$RR_KEEP_REPORTS/fleet-probe-$RUN.md"; fi; }
report_has() { grep -q -- "$1" "$REPORT" || { echo "  not in the report: $1" >&2; cat "$REPORT" >&2; return 1; }; }
report_lacks() { ! grep -q -- "$1" "$REPORT" || { echo "  in the report: $1" >&2; cat "$REPORT" >&2; return 1; }; }

check "ansible-doc accepts roce_route_probe's documentation" \
    bash -c '"$1/bin/ansible-doc" -M ansible/library --json roce_route_probe | "$1/bin/python" -c "
import json, sys
d = json.load(sys.stdin)[\"roce_route_probe\"]
assert {\"self_only\", \"peers\", \"config\", \"timeout\", \"netns\", \"binary\"} <= set(d[\"doc\"][\"options\"]), d
assert \"roce_route_probe:\" in d[\"examples\"]
assert {\"probes\", \"problems_found\", \"ok\", \"error\", \"self\"} <= set(d[\"return\"])
"' _ "$VENV"
check "the collection has roce_route.fleet.roce_route_probe" own bash -c '
    "$1/bin/ansible-doc" roce_route.fleet.roce_route_probe >"$2/doc-probe.txt" &&
    grep -q self_only "$2/doc-probe.txt"' _ "$VENV" "$WORK"
check "probe.yml passes ansible-playbook --syntax-check" \
    own playbook "$WORK/syntax-probe.log" --syntax-check -i "$WORK/fleet.yml" ansible/probe.yml

"$BIN" --netns "$HOST" --state-dir "$WORK/state-a" apply "$WORK/fleet-a.toml" >/dev/null &&
    "$BIN" --netns "$HOSTB" --state-dir "$WORK/state-b" apply "$WORK/fleet-b.toml" >/dev/null ||
    fail "apply host-a and host-b for the fleet probe"

before="$(fleet_dump)"
fleet --check &&
    check "fleet, check mode: the report is written and says no faults" report_has "Result: no faults" &&
    check "fleet, check mode: the module ran, not changed" \
        fr host-a 'm["changed"] is False and m["problems_found"] is False and len(m["probes"]) == 3 and "--same-rail" in m["cmd"]' \
    || fail "fleet probe in check mode"
check "fleet, check mode changed nothing on either host (full dumps equal)" same "$before" "$(fleet_dump)"

fleet &&
    check "fleet, both applied: host-a's --self has its 3 rails" \
        fr host-a '[r["name"] for r in s["self"]["rails"]] == ["rail0", "rail1", "rail2"] and s["self"]["rails"][2]["addresses"] == ["198.51.100.12/24"] and s["changed"] is False' &&
    check "fleet, both applied: every host probed the other's 3 rails, each from its rail of the same name (--same-rail), problems_found false" \
        bash -c 'fr() { "$1" -c "import json,sys; m=json.load(open(sys.argv[1]))[\"matrix\"]; sys.exit(0 if m[\"problems_found\"] is False and m[\"ok\"] and len(m[\"probes\"]) == 3 and all(p[\"peer_rail\"] == p[\"rail\"] for p in m[\"probes\"]) and not any(p[\"problems\"] for p in m[\"probes\"]) else 1)" "$2"; }
                 fr "$1" "$2/fleet-host-a.json" && fr "$1" "$2/fleet-host-b.json"' _ "$PY" "$WORK" &&
    check "fleet, both applied: host-a probed host-b's addresses, naming its rails" \
        fr host-a 'sorted({(p["peer"], p["peer_rail"]) for p in m["probes"]}) == [("198.51.100.20", "rail0"), ("198.51.100.21", "rail1"), ("198.51.100.22", "rail2")]' &&
    check "fleet, both applied: the report says no faults and lists hosts x rails" \
        bash -c 'report_has() { grep -q -- "$2" "$1"; }; report_has "$1" "Result: no faults" && report_has "$1" "| host-a | rail0 | 198.51.100.10/24 |" &&
                 report_has "$1" "| host-b | rail2 | 198.51.100.22/24 |" && ! grep -q -- "->" "$1"' _ "$REPORT" \
    || { fail "fleet probe, both applied"; [[ -f $REPORT ]] && cat "$REPORT" >&2; }

# A fault on host-b: arp_ignore back to 0 on its rails (every rail answers
# ARP for every address of the host).
for ((k = 0; k < RAILS; k++)); do
    ip netns exec "$HOSTB" sysctl -q -w "net.ipv4.conf.rail$k.arp_ignore=0"
done
fleet &&
    check "fleet, arp_ignore=0 on host-b: host-a's module returns problems_found true (not a failure)" \
        fr host-a 'm["problems_found"] is True and not m.get("failed") and m["ok"] is False and m["exit_code"] == 1 and any("arp_flux" in p["problems"] for p in m["probes"])' &&
    check "fleet, arp_ignore=0 on host-b: the report names host-b, and only host-b, as the host to fix" report_has "Hosts to fix: host-b\." &&
    check "fleet, arp_ignore=0 on host-b: a fault host-b's own probe sees (a reply on another of its NICs) is its own to fix" \
        bash -c '! grep -A3 -E -- "^- host-b " "$1" | grep -q -- "fix: on the peer" || { cat "$1" >&2; exit 1; }' _ "$REPORT" &&
    check "fleet, arp_ignore=0 on host-b: a fault line names host-b and arp_flux" \
        bash -c 'grep -E -q -- "^- host-a rail[0-2] \(198\.51\.100\.1[0-2]\) -> host-b rail[0-2] \(198\.51\.100\.2[0-2]\): .*arp_flux" "$1" || { cat "$1" >&2; exit 1; }' _ "$REPORT" &&
    check "fleet, arp_ignore=0 on host-b: the fault's detail and fix are in the report" \
        report_has "fix: on the peer, run \`roce-route apply\`" \
    || fail "fleet probe with a fault on host-b"

check "fleet, arp_ignore=0 on host-b, roce_route_probe_fail=true: the play fails host-a" own bash -c '
    ! "$1/bin/ansible-playbook" -i "$2/fleet.yml" ansible/probe.yml -e "roce_route_probe_report=$2/fail.md roce_route_probe_fail=true" >"$2/fail.log" 2>&1 &&
    grep -q "host-a *: .*failed=1" "$2/fail.log" && grep -q "host-b *: .*failed=0" "$2/fail.log" || { cat "$2/fail.log" >&2; exit 1; }' _ "$VENV" "$WORK"
for ((k = 0; k < RAILS; k++)); do
    ip netns exec "$HOSTB" sysctl -q -w "net.ipv4.conf.rail$k.arp_ignore=1"
done

# RDMA mode (roce_route_probe_rdma=true): these hosts have no RDMA (veth
# rails), so each responder fails in the background and every pair's RDMA
# part is not verified ("no RDMA port"): what this proves is the plumbing,
# --rdma passed to every probe and the report's RDMA column; the RDMA layer
# itself is proven on soft-RoCE (tests/rdma-vm/scenarios/probe-rdma).
fleet -e roce_route_probe_rdma=true -e roce_route_probe_idle=2 &&
    check "fleet, RDMA mode: each host probed with --rdma; every pair's RDMA part not verified, no problem" \
        fr host-a '"--rdma" in m["cmd"] and m["not_verified_found"] is True and not m["problems_found"] and len(m["probes"]) == 3 and all(p["rdma_probe"]["result"] == "not_verified" and "no RDMA port" in p["rdma_probe"]["detail"] for p in m["probes"])' &&
    check "fleet, RDMA mode: the report gives each rail's RDMA layer" report_has "| 0 of 1 ok, 1 not verified |" &&
    check "fleet, RDMA mode: the report says the pairs are not verified" report_has "could not be verified" \
    || fail "fleet probe in RDMA mode"
# The responder (listen: true) where the kernel has no RDMA CM: the task
# fails with the tool's reason, it does not wait for idle.
cat >"$WORK/listen.yml" <<EOF
- hosts: host-b
  gather_facts: false
  tasks:
    - roce_route_probe:
        listen: true
        idle: 30
        config: [$WORK/fleet-b.toml]
        netns: $HOSTB
        binary: $BIN
      register: listen
      ignore_errors: true
    - ansible.builtin.copy:
        content: "{{ listen | to_nice_json }}"
        dest: "$WORK/listen.json"
        mode: "0600"
EOF
RESULT="$WORK/listen.json"
check "the responder (listen: true) without RDMA: runs" playbook "$WORK/listen.log" -i "$WORK/fleet.yml" "$WORK/listen.yml" &&
    check "the responder without RDMA: the task failed with the tool's reason, --listen passed" \
        r 'r["failed"] and "--listen" in r["cmd"] and ("RDMA CM" in r["msg"] or "listen" in r["msg"])' \
    || fail "the responder through the module"

# Peers as bare addresses (strings), mixed with nothing else: probed alike.
cat >"$WORK/probe-addr.yml" <<EOF
- hosts: host-a
  gather_facts: false
  tasks:
    - roce_route_probe:
        peers: [198.51.100.20, 198.51.100.22]
        config: [$WORK/fleet-a.toml]
        netns: $HOST
        timeout: 1
        binary: $BIN
      register: addr
    - ansible.builtin.copy:
        content: "{{ addr | to_nice_json }}"
        dest: "$WORK/probe-addr.json"
        mode: "0600"
EOF
RESULT="$WORK/probe-addr.json"
check "probe with bare addresses as peers: runs" playbook "$WORK/probe-addr.log" -i "$WORK/fleet.yml" "$WORK/probe-addr.yml" &&
    check "probe with bare addresses as peers: 6 pairs, all right, --timeout passed" \
        r 'r["problems_found"] is False and len(r["probes"]) == 6 and {p["peer"] for p in r["probes"]} == {"198.51.100.20", "198.51.100.22"} and "--timeout" in r["cmd"]' \
    || fail "bare addresses as peers"

# Bad input is a module failure with the tool's message: a peer document
# with an address that is none.
cat >"$WORK/probe-bad.yml" <<EOF
- hosts: host-a
  gather_facts: false
  tasks:
    - roce_route_probe:
        peers: [{rails: [{name: rail0, addresses: [x/24]}]}]
        config: [$WORK/fleet-a.toml]
        netns: $HOST
        binary: $BIN
      register: bad
      ignore_errors: true
    - ansible.builtin.copy:
        content: "{{ bad | to_nice_json }}"
        dest: "$WORK/probe-bad.json"
        mode: "0600"
EOF
RESULT="$WORK/probe-bad.json"
check "probe with a bad peer document: the play runs (ignore_errors)" playbook "$WORK/probe-bad.log" -i "$WORK/fleet.yml" "$WORK/probe-bad.yml" &&
    check "probe with a bad peer document: the task fails with exit 2 and the tool's message" r 'r.get("failed") is True and r["rc"] == 2 and "is not an IP address" in r["msg"] and r["error"] == r["msg"] and r["changed"] is False' \
    || fail "bad peer document"

echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
