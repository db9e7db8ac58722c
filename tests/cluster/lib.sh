# tests/cluster/lib.sh - what scripts/cluster-up, scripts/cluster-down and the cluster tests
# share: where a cluster lives, how to reach it, how to enter its namespaces.
#
# A test cluster is one directory (CLUSTER_DIR) and one process that holds a PID, a mount and a
# network namespace of its own (PID 1 there; its host PID in $CLUSTER_DIR/holder.pid).  Every
# daemon of the cluster (etcd, the API server, controller manager, scheduler, containerd,
# kubelet) and every container runs inside those namespaces: the node's address, the pod
# bridge, the iptables rules, /run, /proc and the pods' mounts exist only there, and ending the
# holder ends every process of the cluster.  Sourced, not run.

# The node's own address (an interface (a bridge with no port) inside the cluster's network namespace), the pods'
# bridge and the Service range: all private to that namespace, never routed anywhere.
CLUSTER_NODE_IP=10.250.0.1
CLUSTER_POD_CIDR=10.251.0.0/24
CLUSTER_SERVICE_CIDR=10.252.0.0/24
CLUSTER_NODE_NAME=volagent-node

# The longest unix socket path under a cluster dir is the agent's registration socket,
# DIR/kubelet/plugins_registry/csi.volagent.io-reg.sock: 50 bytes after DIR, and sun_path
# holds 107 (the agent refuses to start with a longer one, and says so).
CLUSTER_DIR_MAX=57

# Sets CLUSTER_DIR, and CLUSTER_CGROUP: the cgroup (under every v1 controller and the v2
# tree) that holds the node's pods, one per cluster dir, so two clusters on one machine never
# touch each other's pods.
cluster_use_dir() {
	export CLUSTER_DIR=$1
	CLUSTER_CGROUP=volagent-test-$(echo "$CLUSTER_DIR" | sha256sum | cut -c1-8)
}

# A new cluster dir for a test (cluster_use_dir): under $TMPDIR when that leaves room for the
# sockets, else under /tmp.  $1: a short name.
cluster_new_dir() {
	local base=${TMPDIR:-/tmp}
	[ $((${#base} + ${#1} + 8)) -le $CLUSTER_DIR_MAX ] || base=/tmp
	cluster_use_dir "$(mktemp -d "$base/$1.XXXXXX")"
}

cluster_die() {
	echo "cluster: $*" >&2
	exit 1
}

# The holder's PID, if it is alive; the namespaces of the cluster are its.
cluster_holder() {
	local pid
	pid=$(cat "$CLUSTER_DIR/holder.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
	echo "$pid"
}

# Runs a command inside the cluster's PID, mount and network namespaces.
cluster_exec() {
	local h
	h=$(cluster_holder) || cluster_die "no cluster running in $CLUSTER_DIR (scripts/cluster-up)"
	nsenter -t "$h" -p -m -n -- "$@"
}

# The pinned kubectl against the cluster, as its administrator.
cluster_kubectl() {
	cluster_exec "$(cat "$CLUSTER_DIR/bin-dir")/kubectl" --kubeconfig "$CLUSTER_DIR/pki/admin.kubeconfig" "$@"
}

# PIDs of every process of the cluster: those in its network namespace (the holder, the
# daemons, host-network pods) and those in its pods' cgroups (pods with a network namespace
# of their own).  Each was started by cluster-up or by a daemon it started: ours to end.
cluster_pids() {
	local h ns="" p
	h=$(cluster_holder) && ns=$(readlink "/proc/$h/ns/net")
	for p in /proc/[0-9]*; do
		if { [ -n "$ns" ] && [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$ns" ]; } ||
			grep -q ":/$CLUSTER_CGROUP/" "$p/cgroup" 2>/dev/null; then
			echo "${p#/proc/}"
		fi
	done
	return 0
}

# Waits until a command succeeds; $1 seconds (scaled by TEST_TIME_SCALE), $2 what it waits for.
cluster_wait() {
	local secs=$1 what=$2 deadline
	shift 2
	deadline=$(($(date +%s) + secs * ${TEST_TIME_SCALE:-1}))
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$deadline" ] || { echo "cluster: timed out waiting for $what" >&2; return 1; }
		sleep 0.5
	done
}

# Starts a daemon inside the cluster's namespaces: its host PID in DIR/NAME.pid, its command
# line in DIR/NAME.cmd (for cluster_restart), its output in DIR/logs/NAME.log (appended).
# nsenter forks to enter the PID namespace: the daemon is its child.
cluster_start() {
	local name=$1 h ns_pid
	shift
	h=$(cluster_holder) || cluster_die "no cluster namespace holder in $CLUSTER_DIR"
	printf '%s\0' "$@" >"$CLUSTER_DIR/$name.cmd"
	nsenter -t "$h" -p -m -n -- "$@" </dev/null >>"$CLUSTER_DIR/logs/$name.log" 2>&1 &
	ns_pid=$!
	daemon_started() {
		local c
		c=$(cat "/proc/$ns_pid/task/$ns_pid/children" 2>/dev/null) && [ -n "$c" ] &&
			echo "${c%% *}" >"$CLUSTER_DIR/$name.pid"
	}
	cluster_wait 10 "$name to start" daemon_started
}

# Kills a daemon of the cluster (SIGKILL: as a crash would) and starts it again with the same
# command line.
cluster_restart() {
	local name=$1 pid cmd
	pid=$(cat "$CLUSTER_DIR/$name.pid") || return 1
	kill -KILL "$pid" 2>/dev/null
	cluster_wait 10 "$name (PID $pid) to end" sh -c '! kill -0 "$1"' sh "$pid" || return 1
	mapfile -d '' cmd <"$CLUSTER_DIR/$name.cmd"
	cluster_start "$name" "${cmd[@]}"
}

cluster_use_dir "${CLUSTER_DIR:-/var/lib/volagent-cluster}"
