#!/bin/bash
# test-nfs-plugin.sh - the nfs plugin end to end with a real server and the real kernel client:
# scripts/nfs-server starts ganesha on the host's loopback (exports /export and /stale), one
# VM boot runs tests/nfs/guest-e2e.sh, which drives the agent from pod spec files: shared and
# direct modes, writes, read-only, mount options, a frozen server (no hang, other volumes
# converge, healed when it is back) and a stale file handle (healed).  While the VM runs, this
# script serves the guest's requests to freeze, thaw or re-create an export (files in the
# shared dir).  Afterwards it checks on the host that the guest's bytes arrived.
# The server is stopped by its PID on every exit path, after being thawed.
# Skips (77) without qemu, ganesha, mount.nfs or root, except under CI=true (a failure).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/testlib.sh"

t_needs qemu nfs_server csi_client agent

coord_pid=
t_workdir nfs-plugin cleanup
srv=$work/nfs
srv2=$work/nfs2 # a second server: the first one frozen does not affect it
share=$work/share
ctl=$share/ctl
mkdir -p "$ctl"

server_pid() { sed -n 's/^NFS_PID=//p' "$srv/.server/env" 2>/dev/null || true; }
cleanup() {
	local pid
	[ -z "$coord_pid" ] || kill "$coord_pid" 2>/dev/null || true
	pid=$(server_pid)
	[ -z "$pid" ] || kill -CONT "$pid" 2>/dev/null || true
	t_nfs_server_stop "$srv"
	t_nfs_server_stop "$srv2"
}

# Serves the guest's requests: ctl/req.N holds "freeze", "thaw" or "stale NAME"; the answer
# (the action's exit code) goes to ctl/ack.N.
coordinator() {
	local n=1 req rc pid
	while :; do
		if [ -e "$ctl/req.$n" ]; then
			req=$(cat "$ctl/req.$n")
			rc=0
			pid=$(server_pid)
			case $req in
			freeze) kill -STOP "$pid" || rc=$? ;;
			thaw) kill -CONT "$pid" || rc=$? ;;
			"stale "*)
				name=/${req#stale }
				{ "$t_repo/scripts/nfs-server" remove "$srv" "$name" &&
					rm -rf "${srv:?}$name" && mkdir "$srv$name" &&
					"$t_repo/scripts/nfs-server" add "$srv" "$name"; } >/dev/null || rc=$?
				;;
			*) rc=2 ;;
			esac
			echo "host: request $n '$req' -> $rc" >&2
			echo "$rc" >"$ctl/ack.$n.tmp" && mv "$ctl/ack.$n.tmp" "$ctl/ack.$n"
			n=$((n + 1))
		fi
		sleep 0.1
	done
}

t0=$EPOCHREALTIME
env_lines=$("$t_repo/scripts/nfs-server" start "$srv" /export /stale) || { t_fail "the NFS server starts"; t_done; }
eval "$env_lines"
echo "nfs server: port $NFS_PORT, pid $NFS_PID ($(t_elapsed "$t0" 2))"
NFS_PORT2=$("$t_repo/scripts/nfs-server" start "$srv2" /export | sed -n 's/^NFS_PORT=\([0-9]*\).*/\1/p') ||
	{ t_fail "the second NFS server starts"; t_done; }
coordinator 2>"$work/coordinator.log" &
coord_pid=$!

t_vm_run "nfs plugin tests" -s "$share" -t "${NFS_E2E_TIMEOUT:-600}" -e NFS_PORT="$NFS_PORT" \
	-e NFS_PORT2="$NFS_PORT2" -e VOLAGENT_BIN="$agent" -e CTL="$ctl" -e KEEP_LOG="${KEEP_LOG:-}" -e REPO="$t_repo" \
	-- unshare -m --propagation private bash "$t_repo/tests/nfs/guest-e2e.sh"
kill "$coord_pid" 2>/dev/null || true
wait "$coord_pid" 2>/dev/null || true
coord_pid=
sed 's/^/  host: /' "$work/coordinator.log"

# The guest's own results count as ours.
t_vm_guest_done

t_check "the host sees the bytes the pod wrote" grep -qx written-by-pod "$srv/export/from-pod"
if [ -f "$srv/export/blob" ] && [ -f "$ctl/blob-sum" ]; then
	t_check "a 1 MiB blob has the same checksum on both sides" \
		grep -qx "blob-sum=$(sha256sum "$srv/export/blob" | cut -d' ' -f1)" "$ctl/blob-sum"
else
	t_fail "the blob reached the host"
fi
t_check "the host sees the write made after healing" grep -qx healed "$srv/export/after-heal"
t_check "the host sees the write made after the stale handle was healed" grep -qx fresh "$srv/stale/after-stale"
t_check "the host sees the write made through the CSI target" grep -qx csi-write "$srv/export/from-csi"
t_check "the host sees the direct-mode write" grep -qx direct-write "$srv/export/direct"
if [ "$vm_rc" != 0 ]; then
	echo "--- last lines of the ganesha log:"
	tail -n 5 "$srv/.server/ganesha.log" 2>/dev/null | cut -c1-200
fi

pid=$(server_pid)
kill -CONT "$pid" 2>/dev/null || true
"$t_repo/scripts/nfs-server" stop "$srv"
t_check "the NFS server stops" test ! -e "/proc/$pid/exe"
"$t_repo/scripts/nfs-server" stop "$srv2"
t_done
