# The testbed every scenario shares (sourced; runs as root inside the VM).
#
# Two hosts as network namespaces, `ha` and `hb`, with 4 veth rails each
# (`rail0`..`rail3`), all plugged into one bridge `br0` in a third namespace
# `sw`: one flat L2 segment, as on a real rail-less RoCE fabric.
#   TB_MODE=flat (default)  all rails in 198.51.100.0/24: A .10-.13, B .20-.23
#   TB_MODE=subnet          rail i in its own /26 of 203.0.113.0/24:
#                           203.0.113.(64i+10) on A, 203.0.113.(64i+20) on B
#   TB_BRIDGES=rail         a bridge per rail (br0..br3): rail i of A and of B
#                           alone on one L2 segment, as on a rail-optimized
#                           fabric (default: one bridge br0 for all)
#   TB_MTU=9000             jumbo frames on every rail and bridge port
#   TB_V6=1                 also 2001:db8::1i (A) and 2001:db8::2i (B), /64,
#                           one /64 for all rails (the IPv6 same-subnet case)
# Each rail gets an rxe device made from inside its host's namespace: rxaI on
# A, rxbI on B (rxe names are global to the kernel).
#
# ARP on rails 1-3 of both hosts is delayed by 50 ms (prio qdisc, a netem
# band, a u32 filter on protocol arp), so the ARP race that the same-subnet
# setup loses is lost every time: the peer's rail0, which answers first,
# always wins. Without it, which NIC wins changes from run to run.
#
# rxe retries forever (retry_cnt 7 means infinite there): a client that fails
# hangs instead of reporting "completion with error 12". So every RDMA client
# here runs under a wall-clock limit, and failing means "no success before
# the limit".

set -uo pipefail
RR=${ROCE_ROUTE:?ROCE_ROUTE names the binary under test}
T_FAIL=${RDMA_T_FAIL:-6}  # s: limit of a client expected to fail
T_OK=${RDMA_T_OK:-30}     # s: limit of a client expected to work (TCG is slow)
TB_MODE=${TB_MODE:-flat}
TB_MTU=${TB_MTU:-1500}
TB_V6=${TB_V6:-0}
TB_BRIDGES=${TB_BRIDGES:-one}
W=$(mktemp -d /tmp/rdvm.XXXXXX)
PORT=18500
checks=0
fails=0
bg_pids=()

pass() { checks=$((checks + 1)); echo "  ok    [$(now)] $*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); echo "  FAIL  [$(now)] $*"; }
check() { # check DESCRIPTION COMMAND...: pass when COMMAND succeeds
  local d=$1; shift
  if "$@"; then pass "$d"; else fail "$d"; fi
}
check_not() { # check_not DESCRIPTION COMMAND...: pass when COMMAND fails
  local d=$1; shift
  if "$@"; then fail "$d"; else pass "$d"; fi
}
# Time since the scenario started, without forking (forks are slow under TCG).
uptime_cs() { local u; read -r u _ < /proc/uptime; u=${u/./}; echo $((10#$u)); }
read -r T0 _ < /proc/uptime; T0=${T0/./}; T0=$((10#$T0))
now() { local u; read -r u _ < /proc/uptime; u=${u/./}; u=$((10#$u - T0)); printf '%3d.%d' $((u / 100)) $((u % 100 / 10)); }
step() { echo "--- [$(now) s] $*"; }
finish() {
  echo "$checks checks, $fails failed"
  [ "$fails" = 0 ]
}

# Addresses and devices: A4[i]/B4[i] IPv4, A6[i]/B6[i] IPv6, rxaI/rxbI.
addr4() { # addr4 a|b RAIL
  local o; [ "$1" = a ] && o=10 || o=20
  if [ "$TB_MODE" = subnet ]; then echo "203.0.113.$((64 * $2 + o))"; else echo "198.51.100.$((o + $2))"; fi
}
plen4() { [ "$TB_MODE" = subnet ] && echo 26 || echo 24; }
addr6() { local o; [ "$1" = a ] && o=1 || o=2; echo "2001:db8::$o$2"; }
rxe() { echo "rx$1$2"; } # rxe a|b RAIL
A4=() B4=() A6=() B6=()
for _i in 0 1 2 3; do
  A4[_i]=$(addr4 a $_i) B4[_i]=$(addr4 b $_i) A6[_i]=$(addr6 a $_i) B6[_i]=$(addr6 b $_i)
done
mac() { ip -n "h$1" -br link show "rail$2" | awk '{print $3}'; }
in_a() { ip netns exec ha "$@"; }
in_b() { ip netns exec hb "$@"; }
in_h() { local h=$1; shift; ip netns exec "h$h" "$@"; }

tb_up() {
  local h i
  step "testbed: mode $TB_MODE, MTU $TB_MTU, IPv6 $TB_V6, bridges: $TB_BRIDGES"
  ip netns add sw && ip netns add ha && ip netns add hb || return 1
  for n in sw ha hb; do ip -n "$n" link set lo up; done
  local bridges=0
  [ "$TB_BRIDGES" = rail ] && bridges="0 1 2 3"
  for i in $bridges; do
    ip -n sw link add "br$i" type bridge
    ip -n sw link set "br$i" mtu "$TB_MTU" up
  done
  for h in a b; do
    for i in 0 1 2 3; do
      ip -n sw link add "$h$i" type veth peer name "rail$i" netns "h$h" || return 1
      ip -n sw link set "$h$i" mtu "$TB_MTU" master "$([ "$TB_BRIDGES" = rail ] && echo "br$i" || echo br0)" up
      ip -n "h$h" link set "rail$i" mtu "$TB_MTU" up
      ip -n "h$h" addr add "$(addr4 $h $i)/$(plen4)" dev "rail$i"
      if [ "$TB_V6" = 1 ]; then
        ip -n "h$h" addr add "$(addr6 $h $i)/64" dev "rail$i" nodad
      fi
      if [ "$i" != 0 ]; then
        tc -n "h$h" qdisc add dev "rail$i" root handle 1: prio bands 3 priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1
        tc -n "h$h" qdisc add dev "rail$i" parent 1:3 handle 30: netem delay 50ms
        tc -n "h$h" filter add dev "rail$i" parent 1: protocol arp prio 1 u32 match u32 0 0 flowid 1:3
      fi
      in_h $h rdma link add "$(rxe $h $i)" type rxe netdev "rail$i" || return 1
    done
  done
  # Wait until every port is ACTIVE with its IPv4 GID.
  local t
  for t in $(seq 50); do
    local ready=1
    for h in a b; do for i in 0 1 2 3; do
      grep -q ACTIVE "/sys/class/infiniband/$(rxe $h $i)/ports/1/state" 2>/dev/null || ready=0
      gid_index "$(rxe $h $i)" "$(addr4 $h $i)" > /dev/null || ready=0
    done; done
    [ "$ready" = 1 ] && break
    sleep 0.2
  done
  [ "$ready" = 1 ] || { echo "testbed: rxe ports not ready"; return 1; }
  echo "testbed up: A $(addr4 a 0)..$(addr4 a 3), B $(addr4 b 0)..$(addr4 b 3), rxe rxa0-3 / rxb0-3"
}

tb_down() {
  local p n
  for p in "${bg_pids[@]+"${bg_pids[@]}"}"; do kill -9 "$p" 2>/dev/null; done
  for h in a b; do for i in 0 1 2 3; do rdma link delete "$(rxe $h $i)" 2>/dev/null; done; done
  for n in ha hb sw; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns delete "$n" 2>/dev/null
  done
  rm -rf "$W"
}
trap tb_down EXIT

# The GID index of ADDR (IPv4) on DEV, looked up by value (indices move).
gid_index() {
  local dev=$1 a b c d want f m=
  IFS=. read -r a b c d <<< "$2"
  printf -v want '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d"
  for f in $(grep -lx "$want" /sys/class/infiniband/$dev/ports/1/gids/* 2>/dev/null); do
    f=${f##*/}
    if [ -z "$m" ] || [ "$f" -lt "$m" ]; then m=$f; fi
  done
  [ -n "$m" ] && echo "$m"
}

# Traffic counters of every rxe of the testbed, "sent rcvd" per device in
# the order rxa0..3 rxb0..3, read without forking.
counters() {
  local h i d x y out=
  for h in a b; do for i in 0 1 2 3; do
    d=/sys/class/infiniband/rx$h$i/ports/1/hw_counters
    read -r x < $d/sent_pkts; read -r y < $d/rcvd_pkts
    out+="$x $y "
  done; done
  echo "$out"
}
# only_pair BEFORE AFTER RAIL: the counters moved on rxaRAIL and rxbRAIL (both
# sent and received) and on no other device.
only_pair() {
  local -a b=($1) a=($2)
  local i=$3 k n ds dr bad=0 names=(rxa0 rxa1 rxa2 rxa3 rxb0 rxb1 rxb2 rxb3)
  for k in 0 1 2 3 4 5 6 7; do
    n=${names[k]}
    ds=$((a[2 * k] - b[2 * k])) dr=$((a[2 * k + 1] - b[2 * k + 1]))
    if [ $((k % 4)) = "$i" ]; then
      [ $ds -gt 0 ] && [ $dr -gt 0 ] || { bad=1; echo "    $n did not move: sent +$ds, rcvd +$dr"; }
    elif [ $ds != 0 ] || [ $dr != 0 ]; then
      bad=1; echo "    $n moved: sent +$ds, rcvd +$dr"
    fi
  done
  return $bad
}

# Client/server pairs: A's rail I is the client, B's rail I the server. The
# server is started in hb and waited for (its rdma_cm listener, or its TCP
# port for ib_write_bw); the client runs in ha under a limit. Each pair
# returns the client's exit status: 0 it worked, 124 it hung until the limit.
# Logs: $W/{server,client,last}-RAIL.log (last: what an unexpected result shows).
next_port() { PORT=$((PORT + 1)); }
declare -A SPID=() CPORT=()
# DIR=ab (default): A's rail is the client, B's the server; DIR=ba: B is the
# client (so B resolves A's addresses: what B's ARP table learns counts).
DIR=ab
ends() { # sets c s (host letters of client and server) from DIR
  if [ "$DIR" = ba ]; then c=b s=a; else c=a s=b; fi
}
ip_of() { # ip_of HOST RAIL [6]
  if [ "${3:-4}" = 6 ]; then [ "$1" = a ] && echo "${A6[$2]}" || echo "${B6[$2]}"
  else [ "$1" = a ] && echo "${A4[$2]}" || echo "${B4[$2]}"; fi
}
gid_of() { [ "$1" = a ] && echo "${GA[$2]}" || echo "${GB[$2]}"; }
server_cmd() { # server_cmd TOOL RAIL [6]
  local i=$2 c s; ends
  case $1 in
    rping) echo "rping -s -a $(ip_of $s $i "${3:-4}") -p ${CPORT[$i]} -C 3 -V" ;;
    ucmatose) echo "ucmatose -b $(ip_of $s $i) -p ${CPORT[$i]} -c 1 -C 4" ;;
    write_bw) echo "ib_write_bw -d rx$s$i -i 1 -x $(gid_of $s $i) -p ${CPORT[$i]} -n 20 -s 4096 -F" ;;
  esac
}
client_cmd() { # client_cmd TOOL RAIL [6]
  local i=$2 c s; ends
  case $1 in
    rping) echo "rping -c -a $(ip_of $s $i "${3:-4}") -I $(ip_of $c $i "${3:-4}") -p ${CPORT[$i]} -C 3 -V -v" ;;
    ucmatose) echo "ucmatose -s $(ip_of $s $i) -b $(ip_of $c $i) -p ${CPORT[$i]} -c 1 -C 4" ;;
    write_bw) echo "ib_write_bw -d rx$c$i -i 1 -x $(gid_of $c $i) -p ${CPORT[$i]} -n 20 -s 4096 -F $(ip_of $s $i)" ;;
  esac
}
# The GID indices ib_write_bw uses on each side (set by the scenario; by
# default looked up in sysfs by value).
GA=() GB=()
gids_from_sysfs() {
  local i
  for i in 0 1 2 3; do GA[i]=$(gid_index rxa$i "${A4[i]}"); GB[i]=$(gid_index rxb$i "${B4[i]}"); done
}
start_server() { # start_server TOOL RAIL LIMIT [6]
  local t=$1 i=$2 lim=$3 k c s
  ends
  next_port; CPORT[$i]=$PORT
  # shellcheck disable=SC2046
  in_h $s timeout "$((lim + 5))" $(server_cmd "$t" "$i" "${4:-4}") > "$W/server-$i.log" 2>&1 &
  SPID[$i]=$!
  bg_pids+=("${SPID[$i]}")
  for k in $(seq 100); do
    if [ "$t" = write_bw ]; then
      [ -n "$(ip netns exec h$s ss -Hltn "sport = :${CPORT[$i]}" 2>/dev/null)" ] && return 0
    else
      rdma res show cm_id 2>/dev/null | grep -q "state LISTEN.*:${CPORT[$i]} " && return 0
    fi
    kill -0 "${SPID[$i]}" 2>/dev/null || { echo "    server on rail$i exited early"; return 1; }
    sleep 0.1
  done
  echo "    server on rail$i is not listening after 10 s"; return 1
}
stop_server() { kill "${SPID[$1]}" 2>/dev/null; wait "${SPID[$1]}" 2>/dev/null; true; }
run_client() { # run_client TOOL RAIL LIMIT [6]
  local t=$1 i=$2 lim=$3 rc cmd c s
  ends
  cmd=$(client_cmd "$t" "$i" "${4:-4}")
  # shellcheck disable=SC2086
  in_h $c timeout -k 1 "$lim" $cmd > "$W/client-$i.log" 2>&1
  rc=$?
  # rping sometimes fails in its own teardown after all its pings went
  # through ("client DISCONNECT EVENT... rdma_get_cm_event: Bad file
  # descriptor", exit 255; seen 2026-12-04): the connection worked, and its
  # 3 pings, each verified (-V), are the evidence.
  if [ "$t" = rping ] && [ "$rc" != 0 ] && [ "$rc" != 124 ] &&
    [ "$(grep -c '^ping data' "$W/client-$i.log")" = 3 ] && grep -q 'DISCONNECT EVENT' "$W/client-$i.log"; then
    echo "(rping exited $rc in its teardown, after its 3 verified pings: counted as working)" >> "$W/client-$i.log"
    rc=0
  fi
  { echo "client (exit $rc): $cmd"; tail -n 6 "$W/client-$i.log"; echo "server: $(server_cmd "$t" "$i" "${4:-4}")"; tail -n 4 "$W/server-$i.log"; } > "$W/last-$i.log"
  return $rc
}
pair() { # pair TOOL RAIL LIMIT [6]
  local rc
  start_server "$@" || return 99
  run_client "$@"; rc=$?
  stop_server "$2"
  return $rc
}

show_last() { sed 's/^/    | /' "$W/last-$1.log"; }
# expect_ok DESCRIPTION TOOL RAIL [6]
expect_ok() {
  local d=$1; shift
  if pair "$1" "$2" "$T_OK" "${3:-4}"; then pass "$d"; else fail "$d"; show_last "$2"; fi
}
# The failure this testbed shows is a hang: the client is still waiting when
# the limit ends it (exit 124). Any other failure (a bad option, a missing
# device, a server that did not start) is not the one under test and fails
# the check.
verdict_fail() { # verdict_fail DESCRIPTION RAIL RC
  if [ "$3" = 124 ]; then pass "$1"
  elif [ "$3" = 0 ]; then fail "$1 (it worked)"; show_last "$2"
  else fail "$1 (exit $3, not the hang expected)"; show_last "$2"; fi
}
# fail_all TOOL "RAILS" [SUFFIX]: the TOOL's pairs on RAILS, all at once
# (they only wait), each expected to hang until T_FAIL.
fail_all() {
  local t=$1 rails=$2 suffix=${3:-} i rc
  declare -A cp=()
  for i in $rails; do start_server "$t" "$i" "$T_FAIL" || true; done
  for i in $rails; do run_client "$t" "$i" "$T_FAIL" & cp[$i]=$!; done
  for i in $rails; do
    wait "${cp[$i]}"; rc=$?
    stop_server "$i"
    if [ "$DIR" = ba ]; then
      verdict_fail "rail$i: $t from B's ${B4[i]} to A's ${A4[i]} hangs$suffix" "$i" "$rc"
    else
      verdict_fail "rail$i: $t from ${A4[i]} to ${B4[i]} hangs$suffix" "$i" "$rc"
    fi
  done
}
# rails_fail "RAILS" [SUFFIX]: rping, ucmatose and ib_write_bw all hang.
rails_fail() {
  local i
  fail_all rping "$1" "${2:-}"
  fail_all ucmatose "$1" "${2:-}"
  # ib_write_bw one rail at a time: its out-of-band TCP exchanges, run
  # together under TCG, time out on their own and spoil the verdict.
  for i in $1; do fail_all write_bw "$i" "${2:-}"; done
}
# rail_works RAIL: rping, ucmatose and ib_write_bw (GA/GB) work on RAIL, and
# the counters move on that rail's device pair only.
rail_works() {
  local i=$1 t c0 c1 what
  for t in rping ucmatose write_bw; do
    case $t in
      rping) what="rping -I ${A4[i]} -a ${B4[i]}" ;;
      ucmatose) what="ucmatose -b ${A4[i]} -s ${B4[i]}" ;;
      write_bw) what="ib_write_bw -d rxa$i -x ${GA[i]} (server -d rxb$i -x ${GB[i]})" ;;
    esac
    c0=$(counters)
    expect_ok "rail$i: $what" "$t" "$i"
    c1=$(counters)
    check "rail$i: $t's packets went through rxa$i/rxb$i and no other device" only_pair "$c0" "$c1" "$i"
  done
}

# ping -I from A's rail I to B's rail I.
ping_rail() { in_a ping -c 1 -W 3 -I "rail$1" "${B4[$1]}" > /dev/null 2>&1; }

# What A's neighbour table holds for B's rail addresses, and whose MAC it is.
declare -A MAC=()
read_macs() {
  local h n st m rest
  for h in a b; do
    while read -r n st m rest; do MAC[$h.${n%%@*}]=$m; done < <(ip -n h$h -br link)
  done
}
show_neigh() {
  local i j who ip dev m x
  [ -n "${MAC[b.rail0]:-}" ] || read_macs
  declare -A at=()
  while read -r ip x dev x m x; do at[$dev.$ip]=$m; done < <(ip -n ha -4 neigh show)
  for i in 0 1 2 3; do
    m=${at[rail$i.${B4[i]}]:-none} who=?
    for j in 0 1 2 3; do [ "$m" = "${MAC[b.rail$j]}" ] && who=rail$j; done
    echo "    A rail$i: ${B4[i]} is at $m (B's $who)"
  done
}
# neigh_right RAIL: A's entry for B's address of RAIL is B's RAIL MAC, and
# B's entry for A's is A's.
neigh_right() {
  [ -n "${MAC[b.rail0]:-}" ] || read_macs
  [ "$(ip -n ha neigh show dev "rail$1" to "${B4[$1]}" | awk '{print $3}')" = "${MAC[b.rail$1]}" ] &&
    [ "$(ip -n hb neigh show dev "rail$1" to "${A4[$1]}" | awk '{print $3}')" = "${MAC[a.rail$1]}" ]
}
flush_neigh() { ip -n ha neigh flush all; ip -n hb neigh flush all; }

# roce-route, as users run it: inside the host's namespace, with a config
# file and a state directory of that host.
cfg() { echo "$W/host-$1.toml"; }
write_cfg() { # write_cfg a|b [DEFAULTS-LINES] (addresses: found on the rails, or explicit with CFG_EXPLICIT=1)
  local h=$1 i f
  f=$(cfg $h)
  : > "$f"
  if [ -n "${2:-}" ]; then printf '[defaults]\n%s\n\n' "$2" >> "$f"; fi
  for i in 0 1 2 3; do
    printf '[[interface]]\nname = "rail%s"\n' "$i" >> "$f"
    if [ "${CFG_EXPLICIT:-0}" = 1 ]; then
      if [ "$TB_V6" = 1 ]; then
        printf 'addresses = ["%s/%s", "%s/64"]\n' "$(addr4 $h $i)" "$(plen4)" "$(addr6 $h $i)" >> "$f"
      else
        printf 'addresses = ["%s/%s"]\n' "$(addr4 $h $i)" "$(plen4)" >> "$f"
      fi
    fi
    echo >> "$f"
  done
}
rr() { # rr a|b SUBCOMMAND ARGS...: roce-route in that host, with its state dir
  local h=$1; shift
  in_h $h "$RR" "$@" --state-dir "$W/state-$h"
}
apply_host() { # apply_host a|b: apply its config, print the output
  local rc
  rr $1 apply "$(cfg $1)" 2>&1 | sed 's/^/    /'
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ]
}
# NCCL_IB_GID_INDEX as `roce-route nccl-env CONFIG` prints it in that host.
nccl_gid_index() {
  rr $1 nccl-env "$(cfg $1)" 2> "$W/nccl-env.err" | tee "$W/nccl-env-$1.out" |
    sed -n 's/^export NCCL_IB_GID_INDEX=\([0-9]*\)$/\1/p'
}


# A product bug this harness finds, kept visible: the check is expected to
# fail while the bug is there; when it passes, it fails and asks for the
# marker to be removed (so a fix cannot go unnoticed). None is open; the
# last one (netns-rdma: in shared RDMA netns mode every namespace sees every
# rxe device, and B's rail0 was mapped to A's rxa0 by its netdev's name) is
# fixed by asking RDMA netlink which ports have their netdev here.
known_bug() { # known_bug BUG DESCRIPTION COMMAND...
  local bug=$1 d=$2; shift 2
  if "$@"; then
    fail "$d: known bug '$bug' no longer shows; remove the known_bug marker in $(basename "$0")"
  else
    pass "$d: fails, known bug '$bug' (see lib.sh)"
  fi
}
# The GID indices from `roce-route nccl-env` of each host: GA/GB; each is
# checked against sysfs by value.
gids_from_nccl_env() {
  local ga gb i
  ga=$(nccl_gid_index a); gb=$(nccl_gid_index b)
  sed 's/^/    A| /' "$W/nccl-env-a.out"
  sed 's/^/    B| /' "$W/nccl-env-b.out"
  check "A: nccl-env prints NCCL_IB_GID_INDEX (${ga:-none})" test -n "$ga"
  check "B: nccl-env prints NCCL_IB_GID_INDEX (${gb:-none})" test -n "$gb"
  for i in 0 1 2 3; do
    GA[i]=$ga
    GB[i]=${gb:-$(gid_index rxb$i "${B4[i]}")}
    check "A: index $ga is ${A4[i]}'s GID on rxa$i" test "$(gid_index rxa$i "${A4[i]}")" = "$ga"
    check "B: index ${gb:-none} is ${B4[i]}'s GID on rxb$i" test "$(gid_index rxb$i "${B4[i]}")" = "$gb"
  done
  check "A: nccl-env's NCCL_IB_HCA is exactly A's devices" grep -qx "export NCCL_IB_HCA='=rxa0:1,rxa1:1,rxa2:1,rxa3:1'" "$W/nccl-env-a.out"
  check "B: nccl-env's NCCL_IB_HCA is exactly B's devices" grep -qx "export NCCL_IB_HCA='=rxb0:1,rxb1:1,rxb2:1,rxb3:1'" "$W/nccl-env-b.out"
}
# Shared RDMA netns mode: both hosts see rxa* and rxb*, on netdevs of the
# same names. Each host's discover, show and metrics name its own only.
own_devices_only() {
  local h o
  for h in a b; do
    o=$([ $h = a ] && echo b || echo a)
    rr $h discover > "$W/discover-$h.toml" 2> "$W/discover-$h.err"
    sed 's/^/    '"${h^^}"'| /' "$W/discover-$h.toml" | grep -E 'rx|name' || true
    check "${h^^}: discover takes rail0..rail3" test "$(grep -c '^name = "rail[0-3]"' "$W/discover-$h.toml")" = 4
    check "${h^^}: discover names its own devices rx${h}0..3" test "$(grep -oE "rx${h}[0-3] port 1" "$W/discover-$h.toml" | sort -u | wc -l)" = 4
    check "${h^^}: discover names none of rx${o}*" bash -c "! grep -q rx$o '$W/discover-$h.toml'"
    rr $h --json show > "$W/show-$h.json" 2>&1
    check "${h^^}: show names none of rx${o}*" bash -c "! grep -q '\"rx$o' '$W/show-$h.json'"
    check "${h^^}: show names rx${h}0" grep -q "\"rx${h}0\"" "$W/show-$h.json"
    rr $h check "$(cfg $h)" --format prometheus > "$W/prom-$h.txt" 2>&1
    check "${h^^}: the metrics name none of rx${o}*" bash -c "! grep -q 'rx$o' '$W/prom-$h.txt'"
  done
}
learn_wrong_macs() {
  local i
  for i in 0 1 2 3; do
    ping_rail $i
    in_b ping -c 1 -W 3 -I "rail$i" "${A4[i]}" > /dev/null 2>&1
  done
}
