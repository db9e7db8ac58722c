#!/bin/bash
# guest-e2e.sh - the nfs plugin end to end, run inside the test VM by
# tests/vm/test-nfs-plugin.sh, in a private mount namespace of its own.  The agent under test
# ($VOLAGENT_BIN) runs from pod spec files against the ganesha server on the host
# (10.0.2.2:$NFS_PORT) with the guest's real kernel NFS client.
#
# The host side is asked to act on the server (freeze, thaw, make an export stale) through
# request files in $CTL; see host_do.  Prints PASS:/FAIL: lines and "N passed, N failed".
# The test never touches an NFS path while the server is frozen (it would hang with it);
# it reads /proc/self/mountinfo instead.
set -uo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../vm/guestlib.sh"
since() { echo $(($(now_ms) - $1)); }
# Fields after " - ": super options; and of the line's start: devno, mount id, vfs options.
mi_super() { mi "$1" | sed 's/.* - [^ ]* [^ ]* //'; }
mi_devno() { mi "$1" | awk '{print $3}'; }
mi_id() { mi "$1" | awk '{print $1}'; }
mi_vfs_has() { mi "$1" | awk '{print $6}' | tr , '\n' | grep -qx "$2"; } # PATH OPTION
mi_vfs_ro() { mi_vfs_has "$1" ro; }
nosuid_nodev() { mi_vfs_has "$1" nosuid && mi_vfs_has "$1" nodev; }
suid_dev() { ! mi_vfs_has "$1" nosuid && ! mi_vfs_has "$1" nodev; }
log_has() { grep -qF -- "$1" "$LOG"; }

seq_no=0
# host_do CMD...: asks the host to run a server action and waits for it (30 s at most).
host_do() {
	seq_no=$((seq_no + 1))
	echo "$*" >"$CTL/req.$seq_no.tmp"
	mv "$CTL/req.$seq_no.tmp" "$CTL/req.$seq_no"
	if ! wait_for 30 test -e "$CTL/ack.$seq_no"; then
		echo "host did not answer request '$*'" >&2
		return 1
	fi
	[ "$(cat "$CTL/ack.$seq_no")" = 0 ]
}

guest_workdir nfs-e2e
mkdir -p "$W/local"
echo local-content >"$W/local/hello"
KUBELET=$W/kubelet
SOCK=$KUBELET/plugins/csi.volagent.io/csi.sock
mkdir -p "$KUBELET"
SRV=10.0.2.2
OPTS="\"vers=4.1\", \"port=$NFS_PORT\", \"timeo=50\", \"retrans=2\""
agent_pid=

start_agent() { # MODE EXTRA...
	local mode=$1
	shift
	: >"$LOG"
	"$VOLAGENT_BIN" run --root-dir "$ROOT" --state-dir "$W/state" --pods-dir "$PODS" \
		--config "$W/config.json" --nfs-mode "$mode" --health-interval 1s --nfs-timeout 4s \
		--nfs-unmount-escalate 1s --nfs-connect-timeout 500ms --backoff-max 2s \
		--resync-interval 5s --device-inventory false --csi --kubelet-root-dir "$KUBELET" \
		"$@" >>"$LOG" 2>&1 &
	agent_pid=$!
}

cleanup() {
	stop_agent
	# Whatever the agent left (a failed test): lazily, so a dead server cannot hang us.
	umount_below "$W"
	show_log_if_failed 60
}
trap cleanup EXIT

# csi CALLS...: one CSI call per argument through tests/csi/csi_client.py; the answers, one
# line each, on stdout.
csi() {
	printf '%s\n' "$@" >"$W/calls.txt"
	timeout 120 /usr/bin/python3 "$REPO/tests/csi/csi_client.py" --socket "$SOCK" \
		--stub-dir "$W/stubs" --timeout 30 --input "$W/calls.txt" 2>&1
}

pod_dir() { echo "$ROOT/pods/$1/volumes/kubernetes.io~$2/$3"; }
write_pod() { # NAME JSON
	echo "$2" >"$PODS/.$1.tmp" && mv "$PODS/.$1.tmp" "$PODS/$1.json"
}
nfs_vol() { # NAME EXPORT [EXTRA SOURCE FIELDS] [EXTRA VOLUME FIELDS]
	echo "{\"name\": \"$1\", \"nfs\": {\"server\": \"$SRV\", \"path\": \"$2\"${3:+, $3}}, \"mountOptions\": [$OPTS]${4:+, $4}}"
}
# Writes through a path; prints the error text on failure.
try_write() { (echo "$2" >"$1") 2>&1; }

# --- shared mode: mount, write, read-only, options, one mount for two pods ----------------
# The node id is the Node's name, not the hostname, as a DaemonSet passes it.
start_agent shared --node-id node-a
t0=$(now_ms)
write_pod p1 "{\"pod\": {\"uid\": \"p1\"}, \"volumes\": [$(nfs_vol data /export), $(nfs_vol ro /export '"readOnly": true')]}"
d1=$(pod_dir p1 nfs data)
r1=$(pod_dir p1 nfs ro)
if wait_for 60 mounted "$d1" && wait_for 30 mounted "$r1"; then
	pass "shared: pod p1's NFS volumes are mounted ($(since "$t0") ms)"
else
	fail "shared: pod p1's NFS volumes are mounted"
fi
check "the pod dir holds nfs4 from $SRV:/export" test "$(mi_type "$d1") $(mi_source "$d1")" = "nfs4 $SRV:/export"
check "mountOptions reach the mount (timeo=50, port=$NFS_PORT in mountinfo)" \
	sh -c "echo '$(mi_super "$d1")' | tr , '\n' | grep -qx timeo=50 && echo '$(mi_super "$d1")' | tr , '\n' | grep -qx port=$NFS_PORT"
check "nothing but ro is added: no nfs option the spec did not give except the helper's" \
	sh -c "! echo '$(mi_super "$d1")' | tr , '\n' | grep -qx -e soft -e noac -e nolock"
check "nosuid and nodev on the NFS mount by default (the pod's bind has them)" \
	nosuid_nodev "$d1"
check "the pod writes through its volume" test -z "$(try_write "$d1/from-pod" "written-by-pod")"
dd if=/dev/urandom of="$d1/blob" bs=64k count=16 status=none && sync
echo "blob-sum=$(sha256sum "$d1/blob" | cut -d' ' -f1)" >"$CTL/blob-sum"
err=$(try_write "$r1/nope" x)
check "nfs.readOnly: a write fails with EROFS ($err)" sh -c "echo '$err' | grep -q 'Read-only file system'"
check "nfs.readOnly: the mount is read-only" mi_vfs_ro "$r1"
plugins=$ROOT/plugins/kubernetes.io/nfs/mounts
check "shared: two node-wide mounts (rw and ro differ)" test "$(count_under "$plugins")" = 2

write_pod p2 "{\"pod\": {\"uid\": \"p2\"}, \"volumes\": [$(nfs_vol data /export '' '"readOnly": true')]}"
d2=$(pod_dir p2 nfs data)
check "shared: pod p2 is mounted" wait_for 60 mounted "$d2"
check "shared: still two node-wide mounts for three pod volumes" test "$(count_under "$plugins")" = 2
check "shared: p1 and p2 use the same NFS mount (same device)" test "$(mi_devno "$d1")" = "$(mi_devno "$d2")"
err=$(try_write "$d2/nope" x)
check "pod-level readOnly: p2's bind is read-only ($err)" sh -c "echo '$err' | grep -q 'Read-only file system'"
check "p2 reads what p1 wrote" test "$(cat "$d2/from-pod" 2>&1)" = written-by-pod

rm -f "$PODS/p1.json"
check "p1 removed: its pod dirs are unmounted" wait_for 30 count_is "$ROOT/pods/p1" 0
check "p1 removed: the ro node-wide mount goes, the shared one stays for p2" \
	wait_for 30 count_is "$plugins" 1
check "p2 still reads its volume" test "$(cat "$d2/from-pod" 2>&1)" = written-by-pod
rm -f "$PODS/p2.json"
check "last pod removed: no NFS mount is left" wait_for 30 count_is "$ROOT" 0

# --- CSI: NodeStage/Publish/Unpublish/Unstage of an nfs volume ----------------------------
if wait_for 30 test -S "$SOCK"; then
	pass "the CSI socket is up"
else
	fail "the CSI socket is up"
fi
stg=$KUBELET/plugins/kubernetes.io/csi/csi.volagent.io/nfs1/globalmount
tgt=$KUBELET/pods/pc/volumes/kubernetes.io~csi/pv-nfs/mount
mkdir -p "$stg" "$(dirname "$tgt")"
cap='{"mount": {"mount_flags": ["vers=4.1", "timeo=50", "suid", "dev"]}, "access_mode": {"mode": "MULTI_NODE_MULTI_WRITER"}}'
ctx="{\"type\": \"nfs\", \"server\": \"$SRV\", \"share\": \"/export\", \"mountOptions\": \"port=$NFS_PORT,retrans=2\"}"
t0=$(now_ms)
out=$(csi "Node/NodeStageVolume {\"volume_id\": \"nfs1\", \"staging_target_path\": \"$stg\", \"volume_capability\": $cap, \"volume_context\": $ctx}" \
	"Node/NodePublishVolume {\"volume_id\": \"nfs1\", \"staging_target_path\": \"$stg\", \"target_path\": \"$tgt\", \"volume_capability\": $cap, \"volume_context\": $ctx}")
echo "$out" | sed 's/^/  csi: /'
check "CSI: NodeStageVolume and NodePublishVolume of nfs answer OK ($(since "$t0") ms)" \
	test "$(echo "$out" | grep -c '^OK {}')" = 2
check "CSI: the staging dir is the NFS mount (shared mode)" test "$(mi_type "$stg") $(mi_source "$stg")" = "nfs4 $SRV:/export"
check "CSI: capability mount flags and context mountOptions reach it" \
	sh -c "echo '$(mi_super "$stg")' | tr , '\n' | grep -qx timeo=50 && echo '$(mi_super "$stg")' | tr , '\n' | grep -qx port=$NFS_PORT"
check "CSI: mount flags suid and dev asked: the mount has neither nosuid nor nodev" \
	suid_dev "$stg"
check "CSI: the target is a bind of the staging mount" test "$(mi_devno "$tgt")" = "$(mi_devno "$stg")"
check "CSI: the pod writes through the target" test -z "$(try_write "$tgt/from-csi" csi-write)"
out=$(csi "Node/NodeUnpublishVolume {\"volume_id\": \"nfs1\", \"target_path\": \"$tgt\"}" \
	"Node/NodeUnstageVolume {\"volume_id\": \"nfs1\", \"staging_target_path\": \"$stg\"}")
echo "$out" | sed 's/^/  csi: /'
check "CSI: NodeUnpublishVolume and NodeUnstageVolume answer OK" test "$(echo "$out" | grep -c '^OK {}')" = 2
check "CSI: target and staging dir are unmounted" sh -c "! awk '\$5 == \"$tgt\" || \$5 == \"$stg\"' /proc/self/mountinfo | grep -q ."

# --- CSI as kubelet drives it: tests/kubelet/lifecycle.py from registration to unstage ------
pv="{\"name\": \"pv-knfs\", \"handle\": \"nfs-kubelet\", \"accessModes\": [\"ReadWriteMany\"], \"mountOptions\": [\"vers=4.1\", \"timeo=50\"], \"volumeAttributes\": {\"type\": \"nfs\", \"server\": \"$SRV\", \"share\": \"/export\", \"mountOptions\": \"port=$NFS_PORT,retrans=2\"}}"
t0=$(now_ms)
timeout 300 /usr/bin/python3 "$REPO/tests/kubelet/lifecycle.py" --root "$KUBELET" \
	--stub-dir "$W/stubs" --node-name node-a --node-label "kubernetes.io/hostname=$(hostname)" \
	--label nfs --pv "$pv" >"$W/kubelet.out" 2>&1
while IFS= read -r line; do
	case $line in
	"PASS: "*) pass "kubelet driver: ${line#PASS: }" ;;
	"FAIL: "*) fail "kubelet driver: ${line#FAIL: }" ;;
	*) echo "  kubelet driver: $line" ;;
	esac
done <"$W/kubelet.out"
echo "  kubelet driver: $(since "$t0") ms"

# --- a dead server: nothing hangs, other volumes converge, the volume heals ------------------
write_pod p3 "{\"pod\": {\"uid\": \"p3\"}, \"volumes\": [$(nfs_vol data /export)]}"
d3=$(pod_dir p3 nfs data)
check "p3 is mounted" wait_for 60 mounted "$d3"
if host_do freeze; then
	pass "the NFS server is frozen (SIGSTOP: it accepts connections, answers nothing)"
	t0=$(now_ms)
	check "a stuck health check is given up and the volume called broken" \
		wait_for 40 log_has "volume is broken, healing it"
	echo "  broken after $(since "$t0") ms"
	write_pod p4 "{\"pod\": {\"uid\": \"p4\"}, \"volumes\": [{\"name\": \"l\", \"local\": {\"path\": \"$W/local\"}}]}"
	t1=$(now_ms)
	l4=$(pod_dir p4 local l)
	if wait_for 15 mounted "$l4"; then
		pass "another volume converges while NFS is dead ($(since "$t1") ms)"
	else
		fail "another volume converges while NFS is dead"
	fi
	check "the local volume is readable" test "$(cat "$l4/hello" 2>&1)" = local-content
	t1=$(now_ms)
	out=$(csi "Identity/Probe {}" "Node/NodeGetInfo {}")
	check "the CSI server still answers while NFS is dead ($(since "$t1") ms)" \
		test "$(echo "$out" | grep -c '^OK')" = 2
	kill -HUP "$agent_pid"
	check "the agent still runs its loop (SIGHUP resync logged)" wait_for 10 log_has "forced resync"
	check "the stuck NFS mount is unmounted from the pod (escalated unmount)" wait_for 40 unmounted "$d3"
	check "the node-wide mount is gone too" wait_for 40 count_is "$plugins" 0
	check "remounting fails with a timeout, not a hang" wait_for 40 log_has "timed out after 4000ms"
	check "the agent process is alive" test ! "$(not_alive "$agent_pid" && echo dead)"
	host_do thaw || fail "the host thaws the server"
	t0=$(now_ms)
	if wait_for 60 mounted_times "$d3" 2; then
		pass "server back: the volume is healed ($(since "$t0") ms)"
	else
		fail "server back: the volume is healed"
	fi
		check "healed: the pod writes again" test -z "$(try_write "$d3/after-heal" healed)"
else
	fail "the NFS server is frozen"
fi
rm -f "$PODS/p3.json" "$PODS/p4.json"
check "p3 and p4 removed: nothing left mounted" wait_for 30 count_is "$ROOT" 0

# --- a stale file handle: the export is removed and made again on the server ---------------
write_pod p5 "{\"pod\": {\"uid\": \"p5\"}, \"volumes\": [$(nfs_vol s /stale)]}"
d5=$(pod_dir p5 nfs s)
check "p5 is mounted" wait_for 60 mounted "$d5"
check "p5 writes" test -z "$(try_write "$d5/before" before)"
if host_do stale stale; then
	t0=$(now_ms)
	check "the stale handle is detected" wait_for 40 log_has "stale file handle"
	if wait_for 60 mounted_times "$d5" 2; then
		pass "stale: the volume is mounted again ($(since "$t0") ms)"
	else
		fail "stale: the volume is mounted again"
	fi
	check "stale: the pod writes to the new export" test -z "$(try_write "$d5/after-stale" fresh)"
	check "stale: the old file is gone (a new export dir)" test ! -e "$d5/before"
else
	fail "the host makes /stale stale"
fi
rm -f "$PODS/p5.json"
check "p5 removed: nothing left mounted" wait_for 30 count_is "$ROOT" 0
stop_agent

# --- a server that is down: new mounts to it fail fast; other servers and plugins go on ------
# The first mount to the frozen server hangs (no timeo: the kernel waits its default 60 s per
# try, the agent 90 s), and after --nfs-hung-after the server is down: a second mount to it
# answers UNAVAILABLE at once, naming it; a mount to a second ganesha ($NFS_PORT2) and a local
# volume go through; the agent starts no more threads or children while it lasts.  Thawed,
# the held mount completes and new ones go through, without a restart.
agent_threads() { ls "/proc/$agent_pid/task" | wc -l; }
agent_children() { grep -l "^PPid:[[:space:]]*$agent_pid\$" /proc/[0-9]*/status 2>/dev/null | wc -l; }
server_is() { # PORT STATE
	"$VOLAGENT_BIN" status --state-dir "$W/state" --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
s = [x["state"] for x in d.get("storage_servers", []) if x["server"] == sys.argv[1]]
sys.exit(0 if s == [sys.argv[2]] else 1)' "nfs server $SRV:$1" "$2"
}
csi_within() { # SECONDS CALL...: the calls, one after another, each with that deadline
	local t=$1
	shift
	printf '%s\n' "$@" >"$W/calls.txt"
	timeout 60 /usr/bin/python3 "$REPO/tests/csi/csi_client.py" --socket "$SOCK" \
		--stub-dir "$W/stubs" --timeout "$t" --input "$W/calls.txt" 2>&1
}
if [ -n "${NFS_PORT2:-}" ]; then
	start_agent shared --nfs-timeout 90s --nfs-hung-after 1s
	check "down: the agent serves CSI" wait_for 30 test -S "$SOCK"
	wait_for 30 log_has "startup reconstruction complete"
	pid0=$agent_pid
	csi "Identity/Probe {}" >/dev/null # its threads started: the baseline is counted after
	th0=$(agent_threads)
	ch0=$(agent_children)
	slow="\"vers=4.1\", \"port=$NFS_PORT\""
	stg3=$KUBELET/plugins/kubernetes.io/csi/csi.volagent.io/nfs3/globalmount
	mkdir -p "$stg3"
	stage3="Node/NodeStageVolume {\"volume_id\": \"nfs3\", \"staging_target_path\": \"$stg3\", \"volume_capability\": {\"mount\": {\"mount_flags\": [\"vers=4.1\"]}, \"access_mode\": {\"mode\": \"MULTI_NODE_MULTI_WRITER\"}}, \"volume_context\": {\"type\": \"nfs\", \"server\": \"$SRV\", \"share\": \"/export\", \"mountOptions\": \"port=$NFS_PORT\"}}"
	if host_do freeze; then
		write_pod h1 "{\"pod\": {\"uid\": \"h1\"}, \"volumes\": [{\"name\": \"d\", \"nfs\": {\"server\": \"$SRV\", \"path\": \"/export\"}, \"mountOptions\": [$slow]}]}"
		h1=$(pod_dir h1 nfs d)
		check "down: the first mount hangs and the server is called down (status)" \
			wait_for 20 server_is "$NFS_PORT" down
		check "down: the first mount is still in flight, not mounted" unmounted "$h1"
		# Two calls from one client, each with a 1 s deadline.  The first may find the
		# server's probe due (1 s after it went down; python's start in this guest takes
		# longer) and run it, 0.5 s at most: answered UNAVAILABLE too, or ABORTED when the
		# guest is too slow for the rest (the same operation answers the second call then).
		# The second finds the next probe 2 s away: refused at once, whatever the first.
		out=$(csi_within 1 "$stage3" "$stage3")
		first=$(echo "$out" | sed -n 1p)
		out=$(echo "$out" | sed -n 2p)
		echo "  csi, first: $first" | cut -c1-400
		echo "  csi, second: $out" | cut -c1-400
		check "down: a mount to the same server that runs the probe answers within 1 s" \
			sh -c "echo '$first' | grep -Eq '^ERR (UNAVAILABLE|ABORTED)'"
		check "down: a second mount to the same server answers UNAVAILABLE within 1 s" \
			sh -c "echo '$out' | grep -q '^ERR UNAVAILABLE'"
		check "down: its message names the server and since when" \
			sh -c "echo '$out' | grep -q 'nfs server $SRV:$NFS_PORT is down since 20'"
		write_pod h2 "{\"pod\": {\"uid\": \"h2\"}, \"volumes\": [{\"name\": \"d\", \"nfs\": {\"server\": \"$SRV\", \"path\": \"/export\"}, \"mountOptions\": [\"vers=4.1\", \"port=$NFS_PORT2\"]}]}"
		write_pod h3 "{\"pod\": {\"uid\": \"h3\"}, \"volumes\": [{\"name\": \"l\", \"local\": {\"path\": \"$W/local\"}}]}"
		write_pod h4 "{\"pod\": {\"uid\": \"h4\"}, \"volumes\": [{\"name\": \"d\", \"nfs\": {\"server\": \"$SRV\", \"path\": \"/export\", \"readOnly\": true}, \"mountOptions\": [$slow]}]}"
		check "down: a mount to a second NFS server goes through" wait_for 30 mounted "$(pod_dir h2 nfs d)"
		check "down: a local volume goes through" wait_for 30 mounted "$(pod_dir h3 local l)"
		check "down: the second server is up in status" server_is "$NFS_PORT2" up
		# Several more attempts to the dead server (the reconciler retries h4, CSI retries).
		for i in 1 2 3; do csi_within 1 "$stage3" >/dev/null; sleep 1; done
		th1=$(agent_threads)
		ch1=$(agent_children)
		check "down: no pile-up: threads $th0 -> $th1, children $ch0 -> $ch1 (one hung mount)" \
			test "$th1" -le $((th0 + 2)) -a "$ch1" -le $((ch0 + 1))
		check "down: refusals are logged naming the server" log_has "nfs server $SRV:$NFS_PORT is down since"
		host_do thaw || fail "the host thaws the server"
		t0=$(now_ms)
		check "thawed: the held mount completes" wait_for 60 mounted "$h1"
		echo "  held mount completed $(since "$t0") ms after the thaw"
		check "thawed: a retried mount to it goes through" wait_for 60 mounted "$(pod_dir h4 nfs d)"
		ok=
		for i in $(seq 30); do
			out=$(csi_within 30 "$stage3")
			case $out in "OK {}"*) ok=1; break ;; esac
			sleep 1
		done
		check "thawed: CSI NodeStageVolume to it answers OK ($out)" test -n "$ok"
		check "thawed: the server is up in status" server_is "$NFS_PORT" up
		check "thawed: the same agent (no restart)" test "$agent_pid" = "$pid0" -a ! "$(not_alive "$pid0" && echo dead)"
		check "thawed: no child left behind" wait_for 20 sh -c "test \$(grep -l '^PPid:[[:space:]]*$pid0\$' /proc/[0-9]*/status 2>/dev/null | wc -l) -le $ch0"
		csi "Node/NodeUnstageVolume {\"volume_id\": \"nfs3\", \"staging_target_path\": \"$stg3\"}" >/dev/null
	else
		fail "the NFS server is frozen (for the down-server test)"
	fi
	rm -f "$PODS"/h[1-4].json
	check "down: everything unmounted at the end" wait_for 60 count_is "$ROOT" 0
	stop_agent
fi

# --- direct mode: each pod dir gets its own NFS mount --------------------------------------
start_agent direct
write_pod p6 "{\"pod\": {\"uid\": \"p6\"}, \"volumes\": [$(nfs_vol data /export)]}"
d6=$(pod_dir p6 nfs data)
check "direct: p6 is mounted" wait_for 60 mounted "$d6"
check "direct: the pod dir is an NFS mount itself" test "$(mi_type "$d6") $(mi_source "$d6")" = "nfs4 $SRV:/export"
check "direct: no node-wide mount" test "$(count_under "$plugins")" = 0
check "direct: the pod writes" test -z "$(try_write "$d6/direct" direct-write)"
rm -f "$PODS/p6.json"
check "direct: removed pod is unmounted" wait_for 30 unmounted "$d6"
check "no sanitizer error in the agent log" sh -c "! grep -q -e 'AddressSanitizer' -e 'runtime error' '$LOG'"
stop_agent

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
