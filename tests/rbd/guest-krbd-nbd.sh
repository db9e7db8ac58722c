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
#   nbd:  --rbd-attach-methods nbd on the same image; /dev/nbdN (mapped through netlink with
#         a reattach timeout); the krbd data is there (no second mkfs); kill -9 of rbd-nbd ->
#         a new rbd-nbd is attached to the same device: no remount, a write issued while the
#         device had no daemon completes; then the agent and its rbd-nbd are SIGKILLed
#         together (as a container restart kills every process in it) while a writer keeps
#         writing and syncing on the mounted filesystem: a new agent reattaches a new
#         rbd-nbd, the writer never sees an error, the mount ID stays; pod removed ->
#         `rbd-nbd list-mapped` empty, no rbd-nbd left, no watcher.
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

	# kill -9 of rbd-nbd while mounted: the kernel holds the device's I/O (reattach timeout),
	# the health check attaches a new rbd-nbd to the same device, nothing is remounted.
	stamp "nbd: kill -9 of rbd-nbd"
	write_sync "$d/before-kill" synced-before-kill
	mid=$(mi "$d" | cut -d' ' -f1)
	t=$(now_ms)
	kill -KILL "$pid1"
	# Issued while no daemon serves the device: it waits, then completes.
	(write_sync "$d/during-kill" written-while-dead) &
	writer=$!
	if wait_for 30 grep -qF "rbd-nbd reattached to the device it served" "$LOG"; then
		pass "nbd reattach: a new rbd-nbd serves $src ($(secs_since "$t") after the kill)"
	else
		fail "nbd reattach: a new rbd-nbd serves $src"
	fi
	check "nbd reattach: the write issued while the device had no daemon completed" wait "$writer"
	pid2=$(timeout 30 rbd-nbd list-mapped --format json | /usr/bin/python3 -c 'import json,sys; print(" ".join(str(e["id"]) for e in json.load(sys.stdin) if e["device"] == sys.argv[1]))' "$src")
	check "nbd reattach: rbd-nbd list-mapped names the new process ($pid2) for $src" \
		sh -c "[ -n '$pid2' ] && [ '$pid2' != '$pid1' ] && [ \"\$(cat /proc/$pid2/comm 2>/dev/null)\" = rbd-nbd ]"
	same_mount() { [ "$(mi "$d" | cut -d' ' -f1)" = "$mid" ] && ! grep -qF 'volume is broken, healing it' "$LOG"; }
	check "nbd reattach: nothing was remounted (same mount ID $mid, no heal)" same_mount
	check "nbd reattach: data synced before the kill is intact" test "$(cat "$d/before-kill" 2>&1)" = synced-before-kill
	check "nbd reattach: the write made while it was dead is there" test "$(cat "$d/during-kill" 2>&1)" = written-while-dead
	check "nbd reattach: the record names the new pid" sh -c "grep -qx 'pid=$pid2' $RUN/*.rec"

	# The agent and its rbd-nbd SIGKILLed together, as a container restart does (the kernel
	# kills every process of the container's PID namespace), while a writer keeps writing
	# and syncing on the mounted filesystem; a new agent starts.
	stamp "nbd: SIGKILL of the agent and rbd-nbd, then a new agent"
	(for i in $(seq 1 40); do echo "line $i" >>"$d/steady" && sync -f "$d/steady" || exit 1; sleep 0.25; done) &
	writer=$!
	sleep 1
	t=$(now_ms)
	kill -KILL "$agent_pid" $(sed -n 's/^pid=//p' "$RUN"/*.rec)
	wait "$agent_pid" 2>/dev/null
	agent_pid=
	reattached0=$(log_count "rbd-nbd reattached to the device it served")
	sleep 2 # the agent is down a while, as between two containers
	start_agent nbd
	if wait_for 60 sh -c "[ \"\$(grep -cF 'rbd-nbd reattached to the device it served' '$LOG')\" -gt $reattached0 ]"; then
		pass "restart: the new agent reattached a new rbd-nbd ($(secs_since "$t") after the kill)"
	else
		fail "restart: the new agent reattached a new rbd-nbd"
	fi
	check "restart: the writer never saw an error (40 writes + syncs across the restart)" wait "$writer"
	check "restart: every line is there" test "$(wc -l <"$d/steady")" = 40
	check "restart: the same mount (ID $mid), nothing remounted or healed" same_mount
	check "restart: the pod writes and reads again" write_sync "$d/after-restart" still-here
	check "restart: older data too" test "$(cat "$d/from-nbd" 2>&1)" = nbd-data
	check "restart: no I/O error or ext4 error in the kernel log" \
		sh -c "! dmesg | grep -E 'I/O error.*nbd|nbd.*I/O error|EXT4-fs error'"
	check "restart: one rbd-nbd process, one mapping" \
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
# block_pod_up UID READONLY WHAT: writes the pod and waits for its file ($d); once there,
# passes WHAT (with the time it took) and sets $src to the mapped device.  Fails (returns 1)
# when the file did not come.
block_pod_up() {
	local t
	t=$(now_ms)
	write_block_pod "$1" "$2"
	d=$(pod_dev "$1")
	wait_for 75 mounted "$d" || return 1
	pass "$3 ($(secs_since "$t"))"
	src=$(rbd_dev)
}
stamp "krbd raw block"
start_agent krbd
if block_pod_up b1 false "krbd block: pod b1's file holds the mapped device"; then
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
if block_pod_up b2 true "krbd block read-only: pod b2's file holds the device"; then
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

# --- an encrypted image (LUKS2 on /dev/rbdN, docs/encryption.md) -------------------------
# Formatted once and opened as a dm-crypt mapping at stage, ext4 on the mapping; a plaintext
# canary written through the pod is not in the image; a SIGKILLed agent's successor adopts
# the mapping and the mount; the pod's removal closes the mapping before the image is
# unmapped; the pod again reopens the same data; a wrong passphrase opens nothing; Block mode
# hands the pod the mapping.  (Expand is CSI only: exercised with local in test-crypt.)
stamp "krbd encrypted"
ENC=vmenc
PASSFILE=$W/enc.pass
(umask 077 && echo "vm-enc-passphrase" >"$PASSFILE" && echo "vm-wrong-passphrase" >"$W/wrong.pass")
check "modprobe dm_crypt and its crypto" modprobe -a dm_mod dm_crypt xts ecb af_alg algif_skcipher
check "rbd create $CEPH_POOL/$ENC (64 MiB)" timeout 60 rbd create -s 64M "$CEPH_POOL/$ENC"
write_enc_pod() { # UID PASSFILE [Block]
	local rbd="\"monitors\": [\"$MON\"], \"pool\": \"$CEPH_POOL\", \"image\": \"$ENC\", \"user\": \"admin\", \"secretFile\": \"$KEYFILE\""
	local mode=", \"fsType\": \"ext4\"}"
	[ "${3:-}" = Block ] && mode="}, \"volumeMode\": \"Block\""
	echo "{\"pod\": {\"uid\": \"$1\"}, \"volumes\": [{\"name\": \"data\", \"rbd\": {$rbd$mode, \"encryption\": {\"passphraseFile\": \"$2\"}}]}" \
		>"$PODS/.$1.tmp" && mv "$PODS/.$1.tmp" "$PODS/$1.json"
}
dm_name_of() { cat "/sys/dev/block/$1/dm/name" 2>/dev/null; } # MAJ:MIN
dm_count() { ls -d /sys/block/dm-* 2>/dev/null | wc -l; }
enc_closed() { ! ls /dev/mapper/volagent-* >/dev/null 2>&1 && [ "$(dm_count)" = 0 ] && [ -z "$(ls /sys/bus/rbd/devices)" ]; }
write_enc_pod e1 "$PASSFILE"
start_agent krbd
t=$(now_ms)
d=$(pod_dir e1)
if wait_for 120 mounted "$d"; then
	pass "krbd encrypted: pod e1 mounted ($(secs_since "$t"))"
	check "krbd encrypted: the image carries a LUKS header" \
		sh -c "timeout 60 rbd export '$CEPH_POOL/$ENC' - 2>/dev/null | head -c 6 | grep -q LUKS"
	mdev=$(mountpoint -d "$d")
	mname=$(dm_name_of "$mdev")
	check "krbd encrypted: the pod's filesystem is on a volagent-* dm-crypt mapping ($mname)" \
		sh -c "case '$mname' in volagent-*) true ;; *) false ;; esac"
	for i in $(seq 64); do echo "plaintextCanary-rbd-5e0c"; done >"$d/canary"
	sync -f "$d/canary"
	check "krbd encrypted: the canary written through the pod is not in the image" \
		sh -c "! timeout 60 rbd export '$CEPH_POOL/$ENC' - 2>/dev/null | grep -qa plaintextCanary"

	# SIGKILL, restart: the mapping and the mount are adopted, neither opened again.
	mid=$(mi "$d" | cut -d' ' -f1)
	mounts0=$(grep -F 'msg="volume mounted"' "$LOG" | grep -cF "target=$d ")
	done0=$(log_count "startup reconstruction complete")
	kill -KILL "$agent_pid"
	wait "$agent_pid" 2>/dev/null
	agent_pid=
	t=$(now_ms)
	start_agent krbd
	if wait_for 60 sh -c "[ \"\$(grep -cF 'startup reconstruction complete' '$LOG')\" -gt $done0 ]"; then
		pass "krbd encrypted restart: the new agent reconstructed its state ($(secs_since "$t"))"
	else
		fail "krbd encrypted restart: the new agent reconstructed its state"
	fi
	sleep 2 # a resync pass; anything it would redo would show below
	same_enc_mount() { [ "$(mi "$d" | cut -d' ' -f1)" = "$mid" ] && [ "$(mountpoint -d "$d")" = "$mdev" ] && [ "$(dm_name_of "$mdev")" = "$mname" ]; }
	check "krbd encrypted restart: the same mount (ID $mid) on the same mapping $mname ($mdev)" same_enc_mount
	check "krbd encrypted restart: no second open (one dm mapping, one rbd device, no new mount)" \
		sh -c "[ \"\$(ls -d /sys/block/dm-* | wc -l)\" = 1 ] && [ \"\$(ls /sys/bus/rbd/devices | wc -l)\" = 1 ] && [ \"\$(grep -F 'msg=\"volume mounted\"' '$LOG' | grep -cF 'target=$d ')\" = '$mounts0' ]"
	check "krbd encrypted restart: the pod reads its canary" grep -q plaintextCanary "$d/canary"
fi
rm -f "$PODS/e1.json"
check "krbd encrypted: pod removed -> mapping closed and image unmapped" wait_for 60 enc_closed

# The same spec again: the image is opened with the passphrase, the data is there.
t=$(now_ms)
write_enc_pod e1 "$PASSFILE"
if wait_for 120 mounted "$d"; then
	pass "krbd encrypted again: pod e1 mounted ($(secs_since "$t"))"
	check "krbd encrypted again: the canary written before reads back" grep -q plaintextCanary-rbd-5e0c "$d/canary"
	check "krbd encrypted again: on a volagent-* mapping" \
		sh -c "case \"\$(cat /sys/dev/block/\$(mountpoint -d '$d')/dm/name)\" in volagent-*) true ;; *) false ;; esac"
fi
rm -f "$PODS/e1.json"
check "krbd encrypted again: pod removed -> mapping closed and image unmapped" wait_for 60 enc_closed

# A wrong passphrase: refused with an error naming the volume, nothing opened or left mapped.
write_enc_pod e2 "$W/wrong.pass"
wrong_logged() { grep -F 'wrong passphrase for the LUKS device' "$LOG" | grep -qF "$ENC"; }
check "krbd encrypted wrong passphrase: refused, the error names the volume" wait_for 60 wrong_logged
grep -F 'wrong passphrase for the LUKS device' "$LOG" | tail -n 1 | cut -c1-300
check "krbd encrypted wrong passphrase: nothing mounted" unmounted "$(pod_dir e2)"
check "krbd encrypted wrong passphrase: no mapping opened, the image unmapped" wait_for 30 enc_closed
rm -f "$PODS/e2.json"

# Block mode: the pod's file is the mapping, never /dev/rbdN.
t=$(now_ms)
write_enc_pod e3 "$PASSFILE" Block
d=$(pod_dev e3)
if wait_for 120 mounted "$d"; then
	pass "krbd encrypted block: pod e3's file holds a device ($(secs_since "$t"))"
	bdev=$(stat -Lc '%t %T' "$d" | { read -r a b && echo "$((16#$a)):$((16#$b))"; })
	check "krbd encrypted block: the file is the volagent-* mapping ($bdev: $(dm_name_of "$bdev")), not /dev/rbdN" \
		sh -c "[ -b '$d' ] && case '$(dm_name_of "$bdev")' in volagent-*) true ;; *) false ;; esac"
	check "krbd encrypted block: the mapping reads the filesystem (ext4 magic at 1080)" \
		sh -c "dd if='$d' bs=2 skip=540 count=1 status=none | od -An -tx1 | grep -q '53 ef'"
fi
rm -f "$PODS/e3.json"
check "krbd encrypted block: pod removed -> mapping closed and image unmapped" wait_for 60 enc_closed
check "krbd encrypted: nothing mounted under the root dir" count_is "$ROOT" 0
check "krbd encrypted: the passphrases are not in the agent log" \
	sh -c "! grep -q -e vm-enc-passphrase -e vm-wrong-passphrase '$LOG'"
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
