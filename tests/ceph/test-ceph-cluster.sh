#!/bin/bash
# test-ceph-cluster.sh - the RBD test path on this host: scripts/ceph-cluster brings up a
# throwaway cluster; an image made with `rbd create` is exposed as a file by rbd-fuse and
# attached to a loop device; ext4 is made, mounted, written, remounted and read back; then
# everything is undone in order (unmount, detach, unmount FUSE) and the cluster torn down.
# Every mount happens in a private mount namespace (unshare), and the traps undo the loop
# device, the mounts, rbd-fuse and the cluster on every exit path.
# Skips (77) without the ceph packages, rbd-fuse or root, except under CI=true (a failure).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../vm/testlib.sh"

# Runs inside `unshare -m --propagation private`: the FUSE, loop and ext4 part.  Prints
# "PASS: ..." / "FAIL: ..." lines for the outer part to count.
inner() {
	# Globals, not locals: undo() runs from the EXIT trap, after inner() has returned.
	fuse=$work/fuse mnt=$work/mnt img=$1 dev='' fpid=''
	local i
	mkdir -p "$fuse" "$mnt"
	undo() {
		mountpoint -q "$mnt" && umount "$mnt"
		[ -z "$dev" ] || losetup -d "$dev" || true
		mountpoint -q "$fuse" && umount "$fuse"
		if [ -n "$fpid" ] && kill -0 "$fpid" 2>/dev/null; then
			kill -TERM "$fpid" 2>/dev/null || true
			wait "$fpid" 2>/dev/null || true
		fi
	}
	trap undo EXIT
	ok() { echo "PASS: $1"; }
	bad() { echo "FAIL: $1"; exit 1; }

	rbd-fuse -c "$CEPH_CONF" -p "$CEPH_POOL" -r "$img" "$fuse" -f >"$work/rbd-fuse.log" 2>&1 &
	fpid=$!
	# rbd-fuse mounts in the background: the image file appears a moment later.
	for i in $(seq 100); do [ -f "$fuse/$img" ] && break; sleep 0.1; done
	[ -f "$fuse/$img" ] && ok "rbd-fuse exposes the image as a file" || bad "rbd-fuse exposes the image as a file"
	dev=$(losetup -f --show "$fuse/$img") || bad "losetup attaches the image file"
	ok "losetup attaches the image file as $dev"
	mkfs.ext4 -q -F "$dev" && ok "mkfs.ext4 on the loop device" || bad "mkfs.ext4 on the loop device"
	mount -t ext4 "$dev" "$mnt" && ok "the ext4 filesystem mounts" || bad "the ext4 filesystem mounts"
	head -c 4194304 /dev/urandom >"$mnt/blob"
	sha256sum <"$mnt/blob" | cut -d' ' -f1 >"$work/blob.sum"
	umount "$mnt"
	# Drop the loop device's cache too, so the read below really comes from RADOS.
	losetup -d "$dev"
	dev=$(losetup -f --show "$fuse/$img") || bad "losetup attaches the image file again"
	mount -t ext4 -o ro "$dev" "$mnt" || bad "the ext4 filesystem mounts again"
	[ "$(sha256sum <"$mnt/blob" | cut -d' ' -f1)" = "$(cat "$work/blob.sum")" ] &&
		ok "data written before a detach reads back the same" || bad "data written before a detach reads back the same"
	umount "$mnt" && ok "unmount" || bad "unmount"
	losetup -d "$dev" && dev= && ok "losetup -d" || bad "losetup -d"
	umount "$fuse" && ok "the FUSE mount unmounts" || bad "the FUSE mount unmounts"
	for i in $(seq 50); do kill -0 "$fpid" 2>/dev/null || break; sleep 0.1; done
	wait "$fpid" 2>/dev/null || true
	kill -0 "$fpid" 2>/dev/null && bad "rbd-fuse exits once unmounted"
	fpid=
	ok "rbd-fuse exits once unmounted"
}

if [ "${1:-}" = --inner ]; then
	work=$2
	inner "$3"
	exit 0
fi

for tool in ceph-mon ceph-osd ceph rbd rbd-fuse; do
	t_need "$tool is not installed (apt-get install ceph-mon ceph-osd ceph-common rbd-fuse)" command -v "$tool"
done
t_need "uuidgen is not installed (apt-get install uuid-runtime)" command -v uuidgen
t_need "the cluster, loop devices and mounts need root" test "$(id -u)" = 0
t_need "no /dev/fuse" test -c /dev/fuse
t_need "no loop device support" test -e /dev/loop-control

work=$(mktemp -d "${TMPDIR:-/tmp}/ceph.XXXXXX")
cluster=$work/c
cleanup() {
	if [ -f "$cluster/ceph.conf" ]; then
		"$t_repo/scripts/ceph-cluster" down "$cluster" || echo "warning: ceph-cluster down failed" >&2
	fi
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=$EPOCHREALTIME
if ! env_lines=$("$t_repo/scripts/ceph-cluster" up "$cluster"); then
	t_fail "the cluster comes up"
	tail -n 20 "$cluster"/log/*.out 2>/dev/null
	t_done
fi
eval "$env_lines"
export CEPH_CONF CEPH_POOL
t_pass "the cluster comes up ($(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1fs", b - a}'))"
listens_on_loopback_only() {
	local pid n=0
	for pid in $(awk '{print $1}' "$cluster/run/started"); do
		ss -Hltnp | grep -F "pid=$pid," >"$work/listen" || return 1
		grep -qv ' 127\.0\.0\.1:' "$work/listen" && return 1
		n=$((n + 1))
	done
	[ "$n" = 2 ]
}
t_check "the monitor and the OSD listen on 127.0.0.1 only" listens_on_loopback_only

img=test-img
t_check "rbd create makes a 256 MiB image" rbd create --size 256M "$CEPH_POOL/$img"
t_check "rbd info sees it" sh -c "rbd info '$CEPH_POOL/$img' | grep -q 'size 256 MiB'"

t1=$EPOCHREALTIME
unshare -m --propagation private bash "$0" --inner "$work" "$img" >"$work/inner.out" 2>&1 || true
sed -n '/^\(PASS\|FAIL\):/!s/^/  /p' "$work/inner.out"
while read -r line; do
	case $line in
	PASS:*) t_pass "${line#PASS: }" ;;
	FAIL:*) t_fail "${line#FAIL: }" ;;
	esac
done <"$work/inner.out"
grep -q '^PASS: rbd-fuse exits once unmounted' "$work/inner.out" ||
	{ t_fail "the FUSE/loop/ext4 part ran to its end"; tail -n 5 "$work/rbd-fuse.log" 2>/dev/null; }
echo "fuse + loop + ext4 part: $(awk -v a="$t1" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1fs", b - a}')"
t_check "rbd rm removes the image" rbd rm --no-progress "$CEPH_POOL/$img"

pids=$(awk '{print $1}' "$cluster/run/started")
t2=$EPOCHREALTIME
t_check "ceph-cluster down succeeds" "$t_repo/scripts/ceph-cluster" down "$cluster"
echo "teardown: $(awk -v a="$t2" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1fs", b - a}')"
gone=1
for p in $pids; do
	st=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1) || continue
	[ "$st" = Z ] || gone=0
done
t_check "the daemons are gone" [ "$gone" = 1 ]
t_check "the cluster dir is removed" test ! -e "$cluster"
t_done
