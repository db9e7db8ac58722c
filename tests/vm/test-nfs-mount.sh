#!/bin/bash
# test-nfs-mount.sh - the NFS test path end to end: scripts/nfs-server starts ganesha on the
# host's loopback, one VM boot mounts its export over NFSv4.1 from 10.0.2.2 with the kernel
# client, reads a file the host wrote, writes a small file and an 8 MiB blob, and unmounts;
# the host then reads the bytes back.  The server is stopped on every exit path.
# Skips (77) without qemu, ganesha, mount.nfs or root, except under CI=true (a failure).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/testlib.sh"

t_needs qemu nfs_server

cleanup() { t_nfs_server_stop "$srv"; }
t_workdir nfs-mount cleanup
srv=$work/nfs
share=$work/share
mkdir -p "$share"

t0=$EPOCHREALTIME
env_lines=$("$t_repo/scripts/nfs-server" start "$srv" /export) || { t_fail "the NFS server starts"; t_done; }
eval "$env_lines"
echo "nfs server: port $NFS_PORT, pid $NFS_PID, export $NFS_EXPORT ($(t_elapsed "$t0" 2))"
t_pass "the NFS server starts and listens on 127.0.0.1:$NFS_PORT"
echo "written-by-host" >"$srv/export/from-host.txt"

cat >"$share/guest.sh" <<'GUEST'
# In the guest: mount the host's export, read, write, unmount.
set -e
mkdir -p /mnt/nfs
t0=$(date +%s%N)
mount -t nfs -o "vers=4.1,port=$NFS_PORT,proto=tcp,soft,timeo=50,retrans=2" "10.0.2.2:$NFS_EXPORT" /mnt/nfs
echo "mount-ms=$((($(date +%s%N) - t0) / 1000000))"
awk '$2 == "/mnt/nfs" {print "mounted=" $3 " " $1}' /proc/mounts
echo "host-file=$(cat /mnt/nfs/from-host.txt)"
echo "written-by-guest" >/mnt/nfs/from-guest.txt
dd if=/dev/urandom of=/mnt/nfs/blob bs=1M count=8 status=none
sync
echo "blob-sum=$(sha256sum /mnt/nfs/blob | cut -d' ' -f1)"
umount /mnt/nfs
awk '$2 == "/mnt/nfs" {found = 1} END {print found ? "still-mounted" : "unmounted"}' /proc/mounts
GUEST

t_vm_run "nfs test" -s "$share" -t 300 -e NFS_PORT="$NFS_PORT" -e NFS_EXPORT="$NFS_EXPORT" \
	-- sh "$share/guest.sh"
sed 's/^/  guest stdout: /' "$work/out"
sed 's/^/  guest stderr: /' "$work/err"

has() { grep -qxF -- "$1" "$work/out"; }
t_check "the guest script succeeds" [ "$vm_rc" = 0 ]
t_check "the guest mounts 10.0.2.2:$NFS_EXPORT as nfs4" has "mounted=nfs4 10.0.2.2:$NFS_EXPORT"
t_check "the guest reads the file the host wrote" has "host-file=written-by-host"
t_check "the host reads the file the guest wrote" grep -qx written-by-guest "$srv/export/from-guest.txt"
if [ -f "$srv/export/blob" ]; then
	t_check "the 8 MiB blob has the same checksum on both sides" \
		has "blob-sum=$(sha256sum "$srv/export/blob" | cut -d' ' -f1)"
else
	t_fail "the 8 MiB blob reached the server"
fi
t_check "the guest unmounts" has unmounted
if [ "$vm_rc" != 0 ]; then
	echo "--- last lines of the ganesha log:"
	tail -n 5 "$srv/.server/ganesha.log" 2>/dev/null | cut -c1-200
fi

pid=$NFS_PID
"$t_repo/scripts/nfs-server" stop "$srv"
t_check "the NFS server stops" test ! -e "/proc/$pid/exe"
t_done
