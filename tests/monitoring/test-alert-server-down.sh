#!/bin/bash
# test-alert-server-down.sh - the storage-server alert on a real fault: a real Prometheus
# (prom-lib.sh) scrapes a real agent whose rbd volume comes from a throwaway Ceph cluster
# (scripts/ceph-cluster) with deploy/monitoring/volagent.rules.yml loaded (each `for:` cut to
# 5s).  The cluster's monitor is SIGSTOPped, as an operator's frozen server would be: the
# kernel still accepts its connections and nothing answers.  The next attach hangs, the agent
# marks the cluster down after --rbd-hung-after, and VolagentStorageServerDown goes pending,
# then firing in Prometheus's own API; SIGCONTed, a probe answers, the alert resolves and the
# held volume mounts.  The NFS variant (a frozen nfs-ganesha under a hung kernel mount) needs
# the kernel's NFS client, which this host lacks; the rbd one goes through rbd-fuse.
#
# Runs in its own mount namespace (re-executed under unshare): the agent's and rbd-fuse's
# mounts live there, and `ceph-cluster down` removes whatever is left of them.  The monitor is
# continued and every process this test started is stopped by PID on any exit.  Root; skips
# (77) without prometheus, the Ceph packages or the built agent, unless CI=true.
# Closing line: "N passed, N failed".
set -u
if [ -z "${VOLAGENT_ALERT_NS:-}" ]; then
	VOLAGENT_ALERT_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/vm/testlib.sh"
t_agent_bin
[ "$(id -u)" = 0 ] || t_skip "test-alert-server-down: needs root (the agent mounts)"
t_private_utab
command -v prometheus >/dev/null || t_skip "test-alert-server-down: prometheus not installed"
for tool in ceph-mon ceph-osd rbd rbd-fuse; do
	command -v "$tool" >/dev/null || t_skip "test-alert-server-down: $tool not installed (scripts/install-deps test)"
done
scale=${TEST_TIME_SCALE:-1}

T=$(mktemp -d /tmp/valert.XXXXXX)
agent_pid= prom_pid= mon_pid= cluster=$T/ceph
# The agent is asked to release its volumes first (its pods gone), so that it ends its rbd-fuse
# helpers itself; `ceph-cluster down` removes what is left in this namespace.
cleanup() {
	[ -z "$mon_pid" ] || kill -CONT "$mon_pid" 2>/dev/null
	if [ -n "$agent_pid" ]; then
		rm -f "$T"/pods/*.json
		wait_for 30 no_mounts_left || echo "test-alert-server-down: volumes still mounted at exit" >&2
		kill "$agent_pid" 2>/dev/null
		wait "$agent_pid" 2>/dev/null
	fi
	[ -z "$prom_pid" ] || { kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; }
	[ ! -d "$cluster" ] || "$top/scripts/ceph-cluster" down "$cluster" >/dev/null 2>&1 ||
		echo "test-alert-server-down: stopping the Ceph cluster failed" >&2
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$top/tests/monitoring/prom-lib.sh"

target_of() { echo "$T/root/pods/$1/volumes/kubernetes.io~rbd/data"; }
mounted() { mountpoint -q "$(target_of "$1")"; }
not() { ! "$@"; }
no_mounts_left() { ! grep -q " $T/root/" /proc/self/mounts; }
# server_down VALUE: the agent's metrics show the cluster's server_down gauge at VALUE.
server_down() {
	curl -sf "http://127.0.0.1:$agent_port/metrics" |
		grep -q "^volagent_storage_server_down{server=\"rbd cluster [^\"]*\"} $1\$"
}
write_pod() { # UID IMAGE
	cat >"$T/pods/$1.json.tmp" <<JSON
{ "pod": { "uid": "$1" },
  "volumes": [ { "name": "data", "rbd": { "monitors": ["$mon_addr"], "pool": "$CEPH_POOL",
    "image": "$2", "user": "admin", "secretFile": "$T/admin.key", "fsType": "ext4" } } ] }
JSON
	mv "$T/pods/$1.json.tmp" "$T/pods/$1.json"
}

t0=$SECONDS
if ! env_lines=$("$top/scripts/ceph-cluster" up "$cluster" 2>"$T/ceph-up.err"); then
	cat "$T/ceph-up.err"
	t_fail "the Ceph cluster comes up"
	t_done
fi
eval "$env_lines"
export CEPH_CONF CEPH_KEYRING
echo "Ceph cluster up in $((SECONDS - t0))s ($CEPH_MON_HOST)"
# The monitor's v1 address (host:port): a spec's monitors entry is one address, no list.
mon_addr=$(sed -n 's/.*v1:\([^],]*\).*/\1/p' <<<"$CEPH_MON_HOST")
mon_of_cluster=$(awk '$2 == "ceph-mon" { print $1 }' "$CEPH_DIR/run/started")
printf '%s\n' "$CEPH_ADMIN_KEY" >"$T/admin.key"
rbd create --size 64M "$CEPH_POOL/held" && rbd create --size 64M "$CEPH_POOL/frozen" ||
	{ t_fail "rbd images created"; t_done; }

agent_port=$(free_port)
mkdir -p "$T/pods" "$T/root" "$T/state" "$T/secret"
"$agent" run --root-dir "$T/root" --state-dir "$T/state" --secret-dir "$T/secret" \
	--pods-dir "$T/pods" --insecure-pods-dir --device-inventory=false \
	--rbd-attach-methods fuse --rbd-timeout 4s --rbd-hung-after 1s --backoff-max 2s \
	--metrics-address "127.0.0.1:$agent_port" >"$T/agent.log" 2>&1 &
agent_pid=$!
prom_start "127.0.0.1:$agent_port"

write_pod p1 held
t_check "a volume of the cluster mounts" wait_for 90 mounted p1
t_check "the agent shows the cluster up" wait_for 30 server_down 0
t_check "VolagentStorageServerDown is not raised while the cluster answers" \
	wait_for 30 alert_state VolagentStorageServerDown none

kill -STOP "$mon_of_cluster" && mon_pid=$mon_of_cluster
write_pod p2 frozen
t_check "the monitor frozen: the agent shows the cluster down" wait_for 60 server_down 1
t_check "VolagentStorageServerDown pending" wait_for 30 alert_state VolagentStorageServerDown pending
t_check "VolagentStorageServerDown firing" wait_for 60 alert_state VolagentStorageServerDown firing
t_check "the volume of the frozen cluster is not mounted meanwhile" not mounted p2

kill -CONT "$mon_of_cluster" && mon_pid=
t_check "the monitor thawed: the agent shows the cluster up" wait_for 60 server_down 0
t_check "VolagentStorageServerDown resolved" wait_for 60 alert_state VolagentStorageServerDown none
t_check "the held volume mounts after the thaw" wait_for 90 mounted p2
t_check "the first volume stayed mounted throughout" mounted p1

rm -f "$T"/pods/*.json
t_check "the pods gone, nothing is left mounted" wait_for 60 no_mounts_left
if [ "$t_failed" != 0 ]; then
	tail -n 30 "$T/agent.log" "$T/prom.log"
fi
t_done
