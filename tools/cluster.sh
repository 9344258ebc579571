#!/usr/bin/env bash
#===- cluster.sh - An emulated multi-node cluster on this machine ---------===#
#
# Each node is a network namespace (strata-nI) whose NIC is one end of a veth
# pair; the other end (strata-vI) is a port of a private bridge (strata-br)
# that also holds an address in the root namespace, so mpirun's daemons reach
# back to it. A token bucket (tc tbf) on both ends of each veth caps the
# node's bandwidth each way. Open MPI starts the ranks through this script as
# its launch agent (in place of ssh): the agent enters the node's namespace,
# so bytes between nodes travel over TCP on the shaped links and bytes within
# a node through shared memory. See docs/distributed.md#an-emulated-cluster.
#
#   tools/cluster.sh up -N 2 [--inter-node-bandwidth 1gbit]
#   tools/cluster.sh down
#   tools/cluster.sh run -N 2 -n 4 [--inter-node-bandwidth R] [--grace S]
#                        [--keep] [--mpirun-arg ARG]... -- strata-run ART ...
#   tools/cluster.sh bandwidth [-N 2 --inter-node-bandwidth R]
#   tools/cluster.sh link NODE up|down
#   tools/cluster.sh kill NODE
#   tools/cluster.sh hosts | counters | status
#   tools/cluster.sh check      (exits 77 with the reason when it cannot)
#
# `run` brings the cluster up (cleaning any left by a crash), runs the job
# under mpirun with n/N ranks per node, prints each node's veth byte counters
# and tears everything down on exit, whatever happened. mpirun runs with
# --enable-recovery: a node that dies does not end the job at once, so the
# survivors' collectives time out naming what they waited for. Once a rank
# has ended mpirun gets --grace seconds (default 10; more than strata-run's
# --timeout + 2) to end the job, 2 s once every rank has ended; after that
# this script ends it: it kills every process in the nodes' namespaces and
# mpirun. Only names with the strata- prefix and
# addresses on STRATA_CLUSTER_SUBNET (default 10.213.77, a /24) are used.
#
# Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN); without it every command but
# `down` says so in one line and exits 77 (ctest's skip code).
#===-----------------------------------------------------------------------===#
set -u -o pipefail

PREFIX=strata
SUBNET=${STRATA_CLUSTER_SUBNET:-10.213.77}
BRIDGE=$PREFIX-br
BRIDGE_IP=$SUBNET.254
LOCK=/run/lock/strata-cluster.lock
STATE=/run/strata-cluster
SELF=$(readlink -f "$0")

die() { echo "cluster.sh: error: $*" >&2; exit "${2:-1}"; }
note() { echo "cluster.sh: $*" >&2; }

ns_of() { echo "$PREFIX-n$1"; }
ip_of() { echo "$SUBNET.$(($1 + 1))"; }
veth_of() { echo "$PREFIX-v$1"; }

# The nodes that exist now, by index.
nodes() {
  ip netns list 2>/dev/null | sed -n "s/^$PREFIX-n\([0-9][0-9]*\)\b.*/\1/p" |
    sort -n
}

require_privileges() {
  local probe=$PREFIX-probe-$$ out
  if ! out=$(ip netns add "$probe" 2>&1); then
    echo "cluster.sh: cannot emulate a cluster here: creating a network namespace needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN): ${out%%$'\n'*}" >&2
    exit 77
  fi
  ip netns delete "$probe"
  command -v tc >/dev/null ||
    { echo "cluster.sh: cannot emulate a cluster here: tc (iproute2) is not installed" >&2; exit 77; }
}

# One emulated cluster at a time on this machine: up, down, bandwidth and run
# hold this lock until they exit (a crashed holder's goes with its process).
lock() {
  mkdir -p "${LOCK%/*}"
  exec 9>"$LOCK"
  flock 9
}

# Parses a tc rate (500mbit, 1gbit, 100kbit, unlimited) into bits/s.
rate_bits() {
  local r=${1,,} n unit
  [[ $r =~ ^([0-9]+)(bit|kbit|mbit|gbit)$ ]] ||
    die "--inter-node-bandwidth '$1' is not a rate like 100mbit or 1gbit (or unlimited)"
  n=${BASH_REMATCH[1]}; unit=${BASH_REMATCH[2]}
  case $unit in
  bit) echo "$n" ;; kbit) echo $((n * 1000)) ;;
  mbit) echo $((n * 1000000)) ;; gbit) echo $((n * 1000000000)) ;;
  esac
}

# Kills every process running in the namespaces of the nodes given by index
# (all of them were started there by this script); prints how many.
kill_processes() {
  local i pid killed=0
  for i; do
    for pid in $(ip netns pids "$(ns_of "$i")" 2>/dev/null); do
      kill -KILL "$pid" 2>/dev/null && killed=$((killed + 1))
    done
  done
  echo "$killed"
}

# Removes every namespace, link and process of an emulated cluster: the
# processes running in the nodes' namespaces first (a daemon left there would
# keep the namespace's network alive).
down() {
  local i
  # shellcheck disable=SC2046 # one argument per node
  kill_processes $(nodes) >/dev/null
  for i in $(nodes); do
    ip netns delete "$(ns_of "$i")" 2>/dev/null
  done
  # Deleting a namespace deletes its veth end and so the peer; a link left
  # by a crash between its creation and its move into a namespace goes here.
  for i in $(ip -o link show 2>/dev/null |
             sed -n "s/^[0-9]*: \($PREFIX-v[0-9]*\)[@:].*/\1/p"); do
    ip link delete "$i" 2>/dev/null
  done
  ip link delete "$BRIDGE" 2>/dev/null
  rm -rf "$STATE"
  return 0
}

up() {
  local n=$1 bandwidth=$2 i ns veth burst bits
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 200)) ||
    die "-N '$n' is not a node count between 1 and 200"
  require_privileges
  down
  # The subnet must be ours alone.
  if ip -4 -o addr show | grep -q " inet $SUBNET\."; then
    die "the subnet $SUBNET.0/24 is already in use here (ip -4 addr); set STRATA_CLUSTER_SUBNET to a free /24, e.g. 10.214.77"
  fi
  if [[ $bandwidth != unlimited ]]; then
    bits=$(rate_bits "$bandwidth") || exit 1
    # A bucket of 10 ms of traffic (at least 64 KiB: a few TCP segments
    # beyond one kernel tick at any rate).
    burst=$((bits / 8 / 100))
    ((burst < 65536)) && burst=65536
  fi
  mkdir -p "$STATE"
  echo "$n $bandwidth" >"$STATE/cluster"
  ip link add "$BRIDGE" type bridge || die "cannot create the bridge $BRIDGE"
  ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for ((i = 0; i < n; i++)); do
    ns=$(ns_of "$i"); veth=$(veth_of "$i")
    ip netns add "$ns" || die "cannot create the namespace $ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns" ||
      die "cannot create the veth pair $veth"
    ip link set "$veth" master "$BRIDGE"
    ip link set "$veth" up
    ip -n "$ns" addr add "$(ip_of "$i")/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    if [[ $bandwidth != unlimited ]]; then
      # Into the node (the bridge's egress) and out of it (the node's).
      tc qdisc add dev "$veth" root tbf rate "$bandwidth" burst "$burst" \
        latency 100ms || die "tc cannot shape $veth to $bandwidth"
      tc -n "$ns" qdisc add dev eth0 root tbf rate "$bandwidth" \
        burst "$burst" latency 100ms || die "tc cannot shape $ns to $bandwidth"
    fi
  done
  note "$n node(s) up on $SUBNET.0/24 ($(hosts_line)), inter-node bandwidth $bandwidth"
}

hosts_line() {
  local i out=
  for i in $(nodes); do out+="${out:+, }$(ns_of "$i")=$(ip_of "$i")"; done
  echo "$out"
}

# The launch agent: Open MPI calls it as it would call ssh, `agent HOST
# COMMAND...`, HOST one of the nodes' addresses. The command runs in the
# node's namespace with the node's name as its host name (a UTS namespace of
# its own), so MPI_Get_processor_name and Open MPI's messages name the node.
agent() {
  local host=$1 i
  shift
  while [[ $host == -* ]]; do host=$1; shift; done
  [[ $host == "$SUBNET".* ]] || die "launch agent: '$host' is not a node of the emulated cluster ($SUBNET.0/24)"
  i=$((${host##*.} - 1))
  ip netns list | grep -q "^$(ns_of "$i")\b" ||
    die "launch agent: no node $i ($(ns_of "$i")) is up for '$host'"
  exec ip netns exec "$(ns_of "$i")" unshare --uts sh -c \
    'hostname "$0" && eval "$1"' "$(ns_of "$i")" "$*"
}

# Bytes through each node's NIC, as its veth counts them.
counters() {
  local i rx tx dir
  for i in $(nodes); do
    dir=/sys/class/net/$(veth_of "$i")/statistics
    [[ -d $dir ]] || continue
    # The bridge's end: what it transmits the node received.
    rx=$(<"$dir/tx_bytes"); tx=$(<"$dir/rx_bytes")
    note "node $i ($(ns_of "$i"), $(ip_of "$i")): sent $tx bytes, received $rx bytes"
  done
}

# Measures the bandwidth from node 1 to node 0 over TCP: 3 s of sending
# after a 1 s warm-up, the bytes node 0 received per second.
bandwidth() {
  local server
  (($(nodes | wc -l) >= 2)) || die "bandwidth needs 2 nodes up (tools/cluster.sh up -N 2)"
  server=$(mktemp)
  ip netns exec "$(ns_of 0)" python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5201)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); c.recv(1)
t0 = time.monotonic(); start = end = None; total = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    end = time.monotonic()
    if start is None:
        if end - t0 < 1.0: continue
        start = end
        continue
    total += len(b)
print(total * 8 / (end - start) / 1e6 if start and end > start else 0.0)
' >"$server" &
  local pid=$!
  for _ in $(seq 50); do grep -q ready "$server" && break; sleep 0.1; done
  ip netns exec "$(ns_of 1)" python3 -c '
import socket, sys, time
c = socket.create_connection((sys.argv[1], 5201)); buf = b"\0" * (1 << 16)
end = time.monotonic() + 4.0
while time.monotonic() < end: c.sendall(buf)
c.close()
' "$(ip_of 0)"
  wait "$pid"
  local mbit
  mbit=$(tail -1 "$server"); rm -f "$server"
  printf 'cluster.sh: measured node 1 -> node 0 over TCP: %.1f Mbit/s (shaped to %s)\n' \
    "$mbit" "$(cut -d' ' -f2 "$STATE/cluster")"
}

link() {
  local i=$1 state=$2 veth
  [[ $state == up || $state == down ]] || die "link: '$state' is not up or down"
  veth=$(veth_of "$i")
  ip link show "$veth" >/dev/null 2>&1 || die "link: no node $i ($veth) is up"
  ip link set "$veth" "$state" && note "node $i ($(ns_of "$i")): link $state"
}

# Kills every process of a node, its Open MPI daemon included: the node dies.
kill_node() {
  local i=$1
  ip netns list | grep -q "^$(ns_of "$i")\b" || die "kill: no node $i is up"
  note "node $i ($(ns_of "$i")): killed $(kill_processes "$i") process(es)"
}

# "RANKS DAEMONS": the processes in the nodes' namespaces that are ranks,
# and Open MPI's daemons (the shells that start them count as neither).
census() {
  local i pid ranks=0 daemons=0 comm
  for i in $(nodes); do
    for pid in $(ip netns pids "$(ns_of "$i")" 2>/dev/null); do
      comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
      case $comm in
      orted) daemons=$((daemons + 1)) ;;
      sh | bash | unshare) ;;
      *) ranks=$((ranks + 1)) ;;
      esac
    done
  done
  echo "$ranks $daemons"
}

run() {
  local n=2 np='' bandwidth=unlimited grace=10 keep=0 extra=()
  while (($#)); do
    case $1 in
    -N) n=$2; shift 2 ;;
    -n) np=$2; shift 2 ;;
    --mpirun-arg) extra+=("$2"); shift 2 ;;
    --inter-node-bandwidth) bandwidth=$2; shift 2 ;;
    --grace) grace=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    *) die "run: unknown option '$1' (run -N NODES -n RANKS [--inter-node-bandwidth R] [--grace S] [--keep] [--mpirun-arg ARG]... -- COMMAND...)" ;;
    esac
  done
  (($#)) || die "run: no command after --"
  [[ $np =~ ^[0-9]+$ ]] && ((np >= 1)) || die "run: -n '$np' is not a rank count"
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1)) || die "run: -N '$n' is not a node count"
  ((np % n == 0)) || die "run: $np ranks do not split evenly over $n nodes"
  [[ $grace =~ ^[0-9]+$ ]] || die "run: --grace '$grace' is not a whole number of seconds"
  local k=$((np / n)) hosts='' i
  require_privileges
  lock
  ((keep)) || trap 'down' EXIT
  trap 'exit 130' INT TERM
  up "$n" "$bandwidth" || exit 1
  for ((i = 0; i < n; i++)); do hosts+="${hosts:+,}$(ip_of "$i"):$k"; done
  # Open MPI's messages name a node by its address; the node's name joins it.
  local names=()
  for ((i = 0; i < n; i++)); do
    names+=(-e "s/\\b${SUBNET//./\\.}\\.$((i + 1))\\b/& ($(ns_of "$i"))/g")
  done
  # The ranks get PATH, LD_LIBRARY_PATH and every STRATA_* variable.
  local forward=(-x PATH) var
  for var in $(compgen -e | grep -E '^(LD_LIBRARY_PATH|STRATA_.*)$'); do
    forward+=(-x "$var")
  done
  # Between nodes TCP on the cluster's subnet only; within a node shared
  # memory (vader). --enable-recovery: a node that dies does not end the
  # job at once, so the survivors' collectives time out and name what they
  # waited for and on which node (the grace below ends the job after). The launcher's environment gives each rank its node
  # (OMPI_COMM_WORLD_LOCAL_RANK / _LOCAL_SIZE), which strata-run checks
  # against the artifact's --gpus-per-node. --bind-to none: each node's
  # daemon binds its local rank i to core i, and the nodes are one host's
  # namespaces, so rank 0 of every node landed on core 0 (two nodes of one
  # rank: both ranks on one core, the other idle; gpt_tiny's 2-hop step
  # 76.7 ms bound, 58.4 ms not).
  mpirun --allow-run-as-root --oversubscribe -np "$np" --host "$hosts" \
    --map-by slot --bind-to none --mca plm_rsh_agent "$SELF agent" \
    --mca plm_rsh_no_tree_spawn 1 --enable-recovery \
    --mca btl self,vader,tcp --mca btl_tcp_if_include "$SUBNET.0/24" \
    --mca oob_tcp_if_include "$SUBNET.0/24" \
    "${forward[@]}" "${extra[@]}" --wdir "$PWD" "$@" 2> >(sed -u "${names[@]}" >&2) &
  local launcher=$! rc seen=0 since='' idle=0 ranks daemons why=''
  # Wait for mpirun. Once a rank has ended, it has --grace seconds to end
  # the job (it cannot reach a daemon behind a link that is down, and with
  # --enable-recovery it may not try); once daemons are left with no rank
  # for 2 s (every rank ended), or 30 s if no rank was ever seen (they all
  # ended between two looks, or never started), nothing can still report.
  # Then the job is ended here.
  while kill -0 "$launcher" 2>/dev/null; do
    sleep 0.2
    read -r ranks daemons < <(census)
    ((ranks > seen)) && seen=$ranks
    [[ -z $since ]] && ((ranks < seen)) && since=$SECONDS
    if ((daemons > 0 && ranks == 0)); then idle=$((idle + 1)); else idle=0; fi
    if [[ -n $since ]] && ((SECONDS - since > grace)); then
      why="within $grace s of a rank ending"
    elif ((seen > 0 && idle > 10)); then
      why="2 s after its last rank ended"
    elif ((idle > 150)); then
      why="in 30 s with its daemons up and no rank running"
    fi
    if [[ -n $why ]]; then
      note "the job did not end $why; ending it (mpirun $launcher and every process on the nodes)"
      # shellcheck disable=SC2046 # one argument per node
      kill_processes $(nodes) >/dev/null
      kill -KILL "$launcher" 2>/dev/null
      break
    fi
  done
  wait "$launcher" 2>/dev/null
  rc=$?
  counters
  return "$rc"
}

# The whole command is one function, read before it runs: editing this file
# during a run cannot change what the run executes.
main() {
  local cmd=${1:-} n bandwidth i
  [[ $SUBNET =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] ||
    die "STRATA_CLUSTER_SUBNET '$SUBNET' is not the first three numbers of a /24, like 10.213.77"
  (($#)) && shift
  case $cmd in
  up)
    n=2 bandwidth=unlimited
    while (($#)); do
      case $1 in
      -N) n=$2; shift 2 ;;
      --inter-node-bandwidth) bandwidth=$2; shift 2 ;;
      *) die "up: unknown option '$1' (up -N NODES [--inter-node-bandwidth R])" ;;
      esac
    done
    require_privileges
    lock
    up "$n" "$bandwidth" ;;
  down) lock; down ;;
  check) require_privileges; note "this machine can emulate a cluster" ;;
  run) run "$@" ;;
  agent) agent "$@" ;;
  bandwidth)
    if (($#)); then
      require_privileges
      lock
      trap down EXIT
      n=2 bandwidth=unlimited
      while (($#)); do
        case $1 in
        -N) n=$2; shift 2 ;;
        --inter-node-bandwidth) bandwidth=$2; shift 2 ;;
        *) die "bandwidth: unknown option '$1'" ;;
        esac
      done
      up "$n" "$bandwidth" || exit 1
    fi
    bandwidth ;;
  link) (($# == 2)) || die "usage: link NODE up|down"; link "$1" "$2" ;;
  kill) (($# == 1)) || die "usage: kill NODE"; kill_node "$1" ;;
  hosts) for i in $(nodes); do echo "$(ip_of "$i") $(ns_of "$i")"; done ;;
  counters) counters ;;
  status)
    if [[ -f $STATE/cluster ]]; then
      note "$(nodes | wc -l) node(s) up ($(hosts_line)), bandwidth $(cut -d' ' -f2 "$STATE/cluster")"
    else
      note "no emulated cluster is up"
    fi ;;
  *) die "usage: cluster.sh up|down|check|run|bandwidth|link|kill|hosts|counters|status (see the header of $SELF)" ;;
  esac
}

main "$@"
exit $?
