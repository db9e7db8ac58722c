#!/bin/bash
# guest-krbd-nbd.sh - the rbd plugin's krbd and nbd attach methods for real, run inside the
# test VM by tests/rbd/test-rbd-vm.sh (in a private mount namespace of its own).
#
# The guest has the rbd and nbd modules; the host's Ceph binaries run in it.  A cluster on
# the host would advertise 127.0.0.1, which the guest cannot reach, so a throwaway cluster is
# started here, inside the guest (scripts/ceph-cluster; 127.0.0.1 is the guest's own
# loopback).  Bluestore needs O_DIRECT, which the guest's tmpfs/overlay root lacks, so the
# cluster dir lives on an ext4 filesystem on a loop device over a sparse file in tmpfs.
#
# Then the agent under test ($VOLAGENT_BIN) runs from pod spec files:
#   krbd: --rbd-attach-methods krbd; the pod dir is ext4 from /dev/rbdN; write, read back;
#         pod removed -> unmounted, unmapped (no /dev/rbd*, `rbd showmapped` empty), no watcher.
#   nbd:  --rbd-attach-methods nbd on the same image; /dev/nbdN; the krbd data is there (no
#         second mkfs); kill -9 of rbd-nbd -> healed (new rbd-nbd, data synced before the kill
#         intact, writable again); pod removed -> `rbd-nbd list-mapped` empty, no rbd-nbd
#         left, no watcher.
#   krbd, volumeMode Block: /dev/rbdN bound onto the pod's file, dd oflag=direct through it
#         read back from the device, a read-only pod maps read-only and writes are refused.
# Prints PASS:/FAIL: lines, timings, and "N passed, N failed".  Everything it makes lives in
# the guest's tmpfs and vanishes with the VM; it still tears it down itself.
set -uo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/../vm/guestlib.sh"
secs_since() { awk -v a="$1" -v b="$(now_ms)" 'BEGIN {printf "%.1fs", (b - a) / 1000}'; }
T0=$(now_ms)
stamp() { echo "  [$(secs_since "$T0")] $*"; }
log_count() { grep -cF -- "$1" "$LOG"; }

REPO=${REPO:?}
W=/run/rbd-vm
CL=$W/cfs/c # the cluster dir: a short path (admin sockets), on the ext4 below
ROOT=$W/root
PODS=$W/pods
LOG=$W/agent.log
RUN=$W/state/rbd
IMG=vmimg
agent_pid=
cluster_up=0

start_agent() { # METHODS
	"$VOLAGENT_BIN" run --root-dir "$ROOT" --state-dir "$W/state" --pods-dir "$PODS" \
		--config "$W/config.json" --health-interval 1s --backoff-max 2s --resync-interval 5s \
		--device-inventory false --rbd-attach-methods "$1" --rbd-timeout 30s \
		--log-level debug --admin-socket off --metrics-address off >>"$LOG" 2>&1 &
	agent_pid=$!
}

cleanup() {
	local m d
	stop_agent
	# Whatever a failed step left: pod and node-wide mounts, then mappings, then the cluster.
	umount_below "$ROOT"
	for d in /dev/rbd[0-9]*; do
		[ -b "$d" ] && timeout 30 rbd unmap -o noudev,force "$d" 2>/dev/null
	done
	for d in $(rbd-nbd list-mapped 2>/dev/null | awk 'NR > 1 {print $NF}'); do
		timeout 30 rbd-nbd unmap "$d" 2>/dev/null
	done
	if [ "$cluster_up" = 1 ]; then
		"$REPO/scripts/ceph-cluster" down "$CL" >/dev/null 2>&1 || echo "stopping the cluster failed" >&2
	fi
	umount "$W/cfs" 2>/dev/null
	show_log_if_failed 80
}
trap cleanup EXIT

# --- the cluster, inside the guest ------------------------------------------------------
mkdir -p "$W/cfs" "$PODS"
echo '{}' >"$W/config.json"
: >"$LOG"
t=$(now_ms)
check "modprobe rbd nbd" modprobe -a rbd nbd
check "the kernel has the rbd bus and /dev/nbd0" test -d /sys/bus/rbd -a -b /dev/nbd0
truncate -s 2G "$W/cfs.img" && mkfs.ext4 -q -E nodiscard "$W/cfs.img" &&
	mount -o loop "$W/cfs.img" "$W/cfs"
check "an ext4 for the cluster (bluestore needs O_DIRECT; tmpfs has none)" mountpoint -q "$W/cfs"
t=$(now_ms)
if env_lines=$(CEPH_CLUSTER_OSD_SIZE=$((1024 * 1024 * 1024)) "$REPO/scripts/ceph-cluster" up "$CL" 2>"$W/up.err"); then
	cluster_up=1
	eval "$env_lines"
	export CEPH_CONF
	pass "a Ceph cluster runs inside the guest ($(secs_since "$t"): $(tr '\n' ' ' <"$CL/log/up-timing.txt"))"
else
	fail "a Ceph cluster runs inside the guest" "$(tail -n 3 "$W/up.err" | tr '\n' ' ')"
	echo "$passed passed, $failed failed"
	exit 1
fi
# The spec names the v1 port, as a Kubernetes spec does (msgr2 is tried first, then v1).
MON=127.0.0.1:$(echo "$CEPH_MON_HOST" | sed 's/.*v1:127.0.0.1:\([0-9]*\).*/\1/')
KEYFILE=$W/admin.key
(umask 077 && echo "$CEPH_ADMIN_KEY" >"$KEYFILE")
t=$(now_ms)
if timeout 60 rbd create -s 64M "$CEPH_POOL/$IMG"; then
	pass "rbd create $CEPH_POOL/$IMG (64 MiB) ($(secs_since "$t"))"
else
	fail "rbd create $CEPH_POOL/$IMG (64 MiB)"
fi

watchers() { timeout 30 rbd status "$CEPH_POOL/$IMG" 2>/dev/null | grep -c 'watcher='; }
no_watcher() { [ "$(watchers)" = 0 ]; }
no_rbd_dev() { ! ls /dev/rbd[0-9]* >/dev/null 2>&1 && [ -z "$(ls /sys/bus/rbd/devices)" ]; }
showmapped_empty() { [ -z "$(timeout 30 rbd showmapped 2>/dev/null)" ]; }
nbd_list_empty() { [ "$(timeout 30 rbd-nbd list-mapped 2>/dev/null | awk 'NR > 1' | wc -l)" = 0 ]; }
no_rbd_nbd_proc() { ! pgrep -x rbd-nbd >/dev/null; }
no_record() { [ -z "$(ls "$RUN" 2>/dev/null | grep -v -e '^released$' -e '\.log$')" ]; }
nbd_pid_of() { cat "/sys/block/${1#/dev/}/pid" 2>/dev/null; }

write_pod() { # UID
	echo "{\"pod\": {\"uid\": \"$1\"}, \"volumes\": [{\"name\": \"data\", \"rbd\": {\"monitors\": [\"$MON\"], \"pool\": \"$CEPH_POOL\", \"image\": \"$IMG\", \"user\": \"admin\", \"secretFile\": \"$KEYFILE\", \"fsType\": \"ext4\"}}]}" \
		>"$PODS/.$1.tmp" && mv "$PODS/.$1.tmp" "$PODS/$1.json"
}
pod_dir() { echo "$ROOT/pods/$1/volumes/kubernetes.io~rbd/data"; }
write_sync() { # FILE CONTENT: write and push it to the cluster
	echo "$2" >"$1" && sync -f "$1"
}

# start_phase METHOD UID [NOTE]: starts the agent with attach method METHOD and writes pod UID;
# sets $d to its pod dir and passes once the volume is mounted there.
start_phase() {
	local t
	stamp "$1"
	start_agent "$1"
	t=$(now_ms)
	write_pod "$2"
	d=$(pod_dir "$2")
	if wait_for 75 mounted "$d"; then
		pass "$1: pod $2's rbd volume is mounted ($(secs_since "$t")${3:+, $3})"
	else
		fail "$1: pod $2's rbd volume is mounted" "the rest of the $1 phase is skipped"
	fi
}

# --- krbd -------------------------------------------------------------------------------
blob_sum=none
start_phase krbd k1 "includes mkfs.ext4"
if mounted "$d"; then
	src=$(mi_source "$d")
	check "krbd: the pod dir is ext4 from /dev/rbdN ($(mi_type "$d") $src)" \
		sh -c "[ '$(mi_type "$d")' = ext4 ] && echo '$src' | grep -qx '/dev/rbd[0-9]*'"
	check "krbd: the kernel maps $CEPH_POOL/$IMG at $src (sysfs)" \
		sh -c "[ \"\$(cat /sys/bus/rbd/devices/${src#/dev/rbd}/name 2>/dev/null)\" = '$IMG' ]"
	check "krbd: rbd showmapped lists it" sh -c "timeout 30 rbd showmapped | grep -q ' $IMG .*$src'"
	check "krbd: the image has one watcher (the kernel client)" test "$(watchers)" = 1
	check "krbd: the pod writes" write_sync "$d/from-krbd" krbd-data
	dd if=/dev/urandom of="$d/blob" bs=64k count=16 status=none && sync -f "$d/blob"
	blob_sum=$(sha256sum "$d/blob" | cut -d' ' -f1)
	check "krbd: the pod reads it back" test "$(cat "$d/from-krbd" 2>&1)" = krbd-data
	check "krbd: the record names method krbd and $src" \
		sh -c "grep -qx 'method=krbd' $RUN/*.rec && grep -q '$src' $RUN/*.rec"
fi
t=$(now_ms)
rm -f "$PODS/k1.json"
if wait_for 30 sh -c "[ -z \"\$(ls /sys/bus/rbd/devices)\" ]"; then
	pass "krbd: pod removed -> the image is unmapped ($(secs_since "$t"))"
else
	fail "krbd: pod removed -> the image is unmapped"
fi
check "krbd: nothing mounted under the root dir" count_is "$ROOT" 0
check "krbd: no /dev/rbd* left" no_rbd_dev
check "krbd: rbd showmapped is empty" showmapped_empty
check "krbd: the watcher is gone" wait_for 15 no_watcher
check "krbd: no record left in the run dir" no_record
stop_agent

# --- nbd --------------------------------------------------------------------------------
start_phase nbd n1
if mounted "$d"; then
	src=$(mi_source "$d")
	check "nbd: the pod dir is ext4 from /dev/nbdN ($(mi_type "$d") $src)" \
		sh -c "[ '$(mi_type "$d")' = ext4 ] && echo '$src' | grep -qx '/dev/nbd[0-9]*'"
	pid1=$(nbd_pid_of "$src")
	check "nbd: rbd-nbd (pid $pid1) serves $src" sh -c "[ -n '$pid1' ] && [ \"\$(cat /proc/$pid1/comm 2>/dev/null)\" = rbd-nbd ]"
	check "nbd: rbd-nbd list-mapped lists it" sh -c "timeout 30 rbd-nbd list-mapped | grep -q ' $IMG .*$src'"
	check "nbd: the data krbd wrote is there (no second mkfs)" test "$(cat "$d/from-krbd" 2>&1)" = krbd-data
	check "nbd: the 1 MiB blob has the same checksum" test "$(sha256sum "$d/blob" | cut -d' ' -f1)" = "$blob_sum"
	check "nbd: the pod writes" write_sync "$d/from-nbd" nbd-data
	check "nbd: the record names method nbd and pid $pid1" \
		sh -c "grep -qx 'method=nbd' $RUN/*.rec && grep -qx 'pid=$pid1' $RUN/*.rec"

	# kill -9 of rbd-nbd while mounted: the health check finds it, the core heals the volume.
	stamp "nbd: kill -9 of rbd-nbd"
	write_sync "$d/before-kill" synced-before-kill
	t=$(now_ms)
	kill -KILL "$pid1"
	if wait_for 30 grep -qF "volume is broken, healing it" "$LOG"; then
		pass "nbd heal: the dead rbd-nbd is found ($(secs_since "$t"))"
	else
		fail "nbd heal: the dead rbd-nbd is found"
	fi
	if wait_for 75 mounted_times "$d" 2; then
		pass "nbd heal: the pod dir is mounted again ($(secs_since "$t") after the kill)"
	else
		fail "nbd heal: the pod dir is mounted again"
	fi
	src2=$(mi_source "$d")
	pid2=$(nbd_pid_of "$src2")
	check "nbd heal: a new rbd-nbd (pid $pid2) serves $src2" \
		sh -c "[ -n '$pid2' ] && [ '$pid2' != '$pid1' ] && [ \"\$(cat /proc/$pid2/comm 2>/dev/null)\" = rbd-nbd ]"
	check "nbd heal: data synced before the kill is intact" test "$(cat "$d/before-kill" 2>&1)" = synced-before-kill
	check "nbd heal: older data too" test "$(cat "$d/from-nbd" 2>&1)" = nbd-data
	check "nbd heal: the pod writes again" write_sync "$d/after-heal" healed
	check "nbd heal: one rbd-nbd process, one mapping" \
		sh -c "[ \"\$(pgrep -xc rbd-nbd)\" = 1 ] && [ \"\$(timeout 30 rbd-nbd list-mapped | awk 'NR > 1' | wc -l)\" = 1 ]"
fi

t=$(now_ms)
rm -f "$PODS/n1.json"
if wait_for 30 count_is "$ROOT" 0 && wait_for 30 no_rbd_nbd_proc; then
	pass "nbd: pod removed -> unmounted, rbd-nbd gone ($(secs_since "$t"))"
else
	fail "nbd: pod removed -> unmounted, rbd-nbd gone"
fi
check "nbd: rbd-nbd list-mapped is empty" nbd_list_empty
check "nbd: no nbd device is connected" sh -c "! ls /sys/block/nbd*/pid >/dev/null 2>&1"
check "nbd: the watcher is gone" wait_for 15 no_watcher
check "nbd: no record left in the run dir" no_record
check "no sanitizer error in the agent log" sh -c "! grep -q -e 'AddressSanitizer' -e 'runtime error' '$LOG'"
stop_agent

# --- krbd, raw block (volumeMode Block) -------------------------------------------------
# The image's /dev/rbdN is bound onto the pod's file (never formatted or mounted); bytes
# written through it with O_DIRECT are read back from the device; a read-only pod maps the
# image read-only and the kernel refuses writes through its file.
write_block_pod() { # UID READONLY
	echo "{\"pod\": {\"uid\": \"$1\"}, \"volumes\": [{\"name\": \"data\", \"rbd\": {\"monitors\": [\"$MON\"], \"pool\": \"$CEPH_POOL\", \"image\": \"$IMG\", \"user\": \"admin\", \"secretFile\": \"$KEYFILE\"}, \"volumeMode\": \"Block\", \"readOnly\": $2}]}" \
		>"$PODS/.$1.tmp" && mv "$PODS/.$1.tmp" "$PODS/$1.json"
}
pod_dev() { echo "$ROOT/pods/$1/volumeDevices/kubernetes.io~rbd/data"; }
rbd_dev() { ls -d /sys/bus/rbd/devices/* 2>/dev/null | head -n1 | sed 's|.*/|/dev/rbd|'; }
stamp "krbd raw block"
start_agent krbd
t=$(now_ms)
write_block_pod b1 false
d=$(pod_dev b1)
if wait_for 75 mounted "$d"; then
	pass "krbd block: pod b1's file holds the mapped device ($(secs_since "$t"))"
	src=$(rbd_dev)
	check "krbd block: the file is the block device $src" \
		sh -c "[ -b '$d' ] && [ \"\$(stat -Lc %t:%T '$d')\" = \"\$(stat -Lc %t:%T '$src')\" ]"
	check "krbd block: the device is mapped read-write" test "$(cat /sys/block/${src#/dev/}/ro)" = 0
	check "krbd block: the ext4 on it is handed out raw and logged" \
		wait_for 10 grep -qF "raw block volume handed out with data on it" "$LOG"
	head -c 65536 /dev/urandom >"$W/pattern"
	check "krbd block: dd oflag=direct through the pod's file" \
		dd if="$W/pattern" of="$d" bs=64k seek=16 count=1 oflag=direct conv=notrunc,fsync status=none
	check "krbd block: the bytes are on the device (read with O_DIRECT)" \
		sh -c "dd if='$src' bs=64k skip=16 count=1 iflag=direct status=none | cmp -s - '$W/pattern'"
fi
rm -f "$PODS/b1.json"
check "krbd block: pod removed -> the file is gone and the image unmapped" \
	wait_for 30 sh -c "[ ! -e '$d' ] && [ -z \"\$(ls /sys/bus/rbd/devices)\" ]"
check "krbd block: nothing mounted under the root dir" count_is "$ROOT" 0
t=$(now_ms)
write_block_pod b2 true
d=$(pod_dev b2)
if wait_for 75 mounted "$d"; then
	pass "krbd block read-only: pod b2's file holds the device ($(secs_since "$t"))"
	src=$(rbd_dev)
	check "krbd block read-only: the image is mapped read-only" test "$(cat /sys/block/${src#/dev/}/ro)" = 1
	check "krbd block read-only: the bind is read-only" sh -c "grep -F ' $d ' /proc/self/mountinfo | grep -q ' ro[, ]'"
	check "krbd block read-only: a write through the pod's file is refused" \
		sh -c "! dd if='$W/pattern' of='$d' bs=64k count=1 oflag=direct conv=notrunc status=none 2>/dev/null"
	check "krbd block read-only: the earlier bytes are readable through it" \
		sh -c "dd if='$d' bs=64k skip=16 count=1 iflag=direct status=none | cmp -s - '$W/pattern'"
fi
rm -f "$PODS/b2.json"
check "krbd block read-only: pod removed -> unmapped" \
	wait_for 30 sh -c "[ ! -e '$d' ] && [ -z \"\$(ls /sys/bus/rbd/devices)\" ]"
check "krbd block: the watcher is gone" wait_for 15 no_watcher
check "krbd block: no record left in the run dir" no_record
check "krbd block: no sanitizer error in the agent log" sh -c "! grep -q -e 'AddressSanitizer' -e 'runtime error' '$LOG'"
stop_agent

# --- teardown ---------------------------------------------------------------------------
t=$(now_ms)
"$REPO/scripts/ceph-cluster" down "$CL" >/dev/null 2>&1
rc=$?
cluster_up=0
check "the cluster stops ($(secs_since "$t"))" test "$rc" = 0 -a ! -e "$CL"
stamp "done"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
