#!/bin/bash
# test-image.sh - the DaemonSet made real: the image of `make image` runs under podman (runc)
# with the mounts, environment, arguments and probes of the DaemonSet that `kubectl kustomize
# deploy/base` renders (what `kubectl apply -k deploy/base` installs), and this script plays
# kubelet on the host side over the CSI socket (tests/csi/csi_client.py).
#
# It waits for the readiness probe as `kubectl rollout status` would, scrapes the metrics port
# on the host network, sees the secret dir on a tmpfs, and stops the container with the pod's
# terminationGracePeriodSeconds.
#
# It checks that the image holds what each plugin runs, stages and publishes a local directory
# and a local block volume (a loop device), sees the mounts and bytes on the host, stops and
# kills the container and has a fresh one adopt the mounts (same mount IDs), and unpublishes
# and unstages from the new one.  Closing line: "N passed, N failed".
#
# Everything runs in a private mount namespace; podman's store and state live in a temporary
# directory (--root, --runroot, --tmpdir, file events), so nothing is left behind: containers,
# the image and the loop device are removed on every exit path.  Skips (77) only when podman
# cannot run here, never under CI=true.  Needs: podman, runc, python3-yaml, python3-grpcio,
# kubectl (kubernetes-client; $KUBECTL picks another), curl.
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-build}
case "$build" in /*) ;; *) build=$top/$build ;; esac
image_tar=${VOLAGENT_IMAGE:-$build/volagent-image.tar}
scale=${TEST_TIME_SCALE:-1}

skip() {
	if [ "${CI:-}" = true ]; then
		echo "test-image: cannot run under CI: $*"
		echo "0 passed, 1 failed"
		exit 1
	fi
	echo "test-image: skipped: $*"
	exit 77
}

if [ "${1:-}" != --inner ]; then
	[ "$(id -u)" = 0 ] || skip "needs root"
	for c in podman runc unshare losetup findmnt curl "${KUBECTL:-kubectl}" /usr/bin/python3; do
		command -v "$c" >/dev/null || skip "$c is not installed (scripts/install-deps test)"
	done
	/usr/bin/python3 -c 'import yaml, grpc' 2>/dev/null || skip "python3-yaml or python3-grpcio missing"
	[ -f "$image_tar" ] || {
		if [ "${CI:-}" = true ]; then
			echo "test-image: $image_tar is missing (make image)"
			echo "0 passed, 1 failed"
			exit 1
		fi
		skip "$image_tar is missing: run make image"
	}
	# Short: kubelet's sockets under it must fit a unix socket path (108 bytes).
	T=$(mktemp -d /tmp/vimg.XXXXXX)
	dev=
	outer_cleanup() {
		[ -n "$dev" ] && losetup -d "$dev" 2>/dev/null
		rm -rf "$T"
	}
	trap outer_cleanup EXIT
	# Can podman run containers here at all (a sandbox may forbid it)?  Its state stays in $T.
	mkdir -p "$T/probe/tmp"
	if ! out=$(unshare -m --propagation private podman --root "$T/probe/root" \
		--runroot "$T/probe/run" --tmpdir "$T/probe/tmp" --storage-driver vfs \
		--events-backend file --cgroup-manager cgroupfs --runtime runc info 2>&1); then
		outer_cleanup
		trap - EXIT
		skip "podman cannot run here: $(echo "$out" | tail -1)"
	fi
	rm -rf "$T/probe"
	"${KUBECTL:-kubectl}" kustomize "$top/deploy/base" >"$T/rendered.yaml" 2>"$T/kustomize.err" || {
		echo "test-image: kubectl kustomize deploy/base failed: $(cat "$T/kustomize.err")"
		echo "0 passed, 1 failed"
		exit 1
	}
	truncate -s 64M "$T/disk.img"
	dev=$(losetup --find --show "$T/disk.img") || {
		echo "test-image: losetup failed"
		echo "0 passed, 1 failed"
		exit 1
	}
	# In the background, so that a TERM (the runner's timeout) reaches this shell at once; it
	# hands it on to the inner one, which removes its containers before the loop goes.
	unshare -m --propagation private bash "$0" --inner "$T" "$dev" &
	inner=$!
	trap 'kill -TERM $inner 2>/dev/null; wait $inner; exit 1' TERM INT HUP
	wait $inner
	exit $?
fi

# --- inside the private mount namespace -------------------------------------------------
T=$2 dev=$3
H=$T/host     # the test's "host": the manifest's host directories live under it
P=$T/podman   # podman's store and state
mkdir -p "$H" "$P/root" "$P/run" "$P/tmp" "$T/stubs"
passed=0 failed=0
containers=()

pod() {
	podman --root "$P/root" --runroot "$P/run" --tmpdir "$P/tmp" --storage-driver vfs \
		--events-backend file --cgroup-manager cgroupfs --runtime runc "$@"
}

ok() { echo "ok - $*"; passed=$((passed + 1)); }
not_ok() { echo "not ok - $*"; failed=$((failed + 1)); }
check() { # $1 description, rest: command that must succeed
	local what=$1
	shift
	if "$@"; then ok "$what"; else not_ok "$what"; fi
}

finish() {
	local c
	for c in "${containers[@]}"; do
		if [ "$failed" != 0 ]; then
			echo "--- log of container $c"
			pod logs "$c" 2>&1 | tail -30
		fi
		pod rm --force --time 5 "$c" >/dev/null 2>&1
	done
	pod rmi --all --force >/dev/null 2>&1
	# Only this namespace sees these; unmount so the loop device can be detached outside.
	umount -R "$H" 2>/dev/null
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
}
trap 'finish; exit $?' EXIT
trap 'not_ok "interrupted by a signal"; exit 1' TERM INT HUP

fatal() {
	not_ok "$*"
	exit 1
}

# Waits until the command succeeds, up to $1 seconds (times TEST_TIME_SCALE).
wait_for() {
	local limit=$(($1 * scale * 10)) i=0
	shift
	while ! "$@" 2>/dev/null; do
		i=$((i + 1))
		[ $i -ge $limit ] && return 1
		sleep 0.1
	done
}

# The manifest's host directories live under $H; making $H a shared mount is what lets the
# container's Bidirectional (rshared) mounts propagate back to this namespace, the "host".
mount --bind "$H" "$H" && mount --make-rshared "$H" || fatal "cannot make $H a shared mount"
# A free port for the metrics (the manifest's own may be taken on a shared machine).
mport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
json=$(/usr/bin/python3 "$top/tests/container/daemonset-run.py" --manifest "$T/rendered.yaml" \
	--host-root "$H" --node-name test-node --metrics-port "$mport") ||
	fatal "cannot read the DaemonSet kubectl kustomize deploy/base rendered"
jq() { /usr/bin/python3 -c "import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print('\n'.join(v) if isinstance(v, list) else v)" "$1" <<<"$json"; }
mapfile -t run_args < <(jq run_args)
mapfile -t command < <(jq command)
mapfile -t probe < <(jq probe)
mapfile -t readiness < <(jq readiness)
stop_timeout=$(jq stop_timeout)
image=$(jq image)
kubelet=$(jq kubelet_dir)
sock=$(jq csi_socket)
regsock=$(jq registration_socket)

# --- the image ---------------------------------------------------------------------------
check "deploy/Containerfile installs the package list make image derives" \
	grep -q 'scripts/build-image --list-packages' "$top/deploy/Containerfile"
pod load --quiet -i "$image_tar" >/dev/null || fatal "podman load -i $image_tar"
check "the archive loads as the manifest's image $image" pod image exists "$image"
ep=$(pod image inspect --format '{{json .Config.Entrypoint}} {{json .Config.Cmd}}' "$image")
check "entrypoint volagent, default command run --csi ($ep)" \
	test "$ep" = '["/usr/bin/volagent"] ["run","--csi"]'

oneshot() { # runs a command in a throwaway container of the image
	pod run --rm --pull never --network host --ulimit nofile=20000:20000 \
		--ulimit nproc=32768:32768 "$@"
}
out=$(oneshot "$image" --version 2>&1)
rc=$?
check "volagent starts inside (every library present): $out" \
	eval '[ "$rc" = 0 ] && grep -q "^volagent [0-9]" <<<"$out"'
tools='mkfs.ext4 mkfs.xfs mount.nfs umount.nfs rbd rbd-nbd rbd-fuse'
out=$(oneshot --entrypoint /bin/sh "$image" -c "for t in $tools; do command -v \$t || echo missing \$t; done; rbd --version && rbd-nbd --version" 2>&1)
check "each plugin's tools are there and run: $(echo $out | tr '\n' ' ')" \
	eval '! grep -q -e missing -e "error while loading" <<<"$out" && grep -q "ceph version" <<<"$out"'
# The libraries the daemon dlopen()s are there too (.note.dlopen -> the package list): the rbd
# helper loads librados/librbd and fails only at connecting (exit 1, not 3: no library).
out=$(echo '{"monitors":"127.0.0.1:9","user":"admin","keyfile":"/nonexistent","timeout_ms":500}' |
	oneshot -i "$image" rbd-helper check 2>&1)
rc=$?
check "volagent rbd-helper loads the Ceph libraries (exit $rc): $out" \
	eval '[ "$rc" = 1 ] && grep -q "\"ok\":false" <<<"$out"'
out=$(oneshot --entrypoint /bin/sh "$image" -c \
	'find /usr/share/man /usr/share/info /usr/share/doc /usr/share/locale -type f ! -name copyright 2>/dev/null | head -3')
check "no docs, man pages or locales in the image: $out" test -z "$out"
check "merged /usr" test "$(oneshot --entrypoint /bin/sh "$image" -c 'readlink /bin /sbin /lib' | tr '\n' ' ')" = "usr/bin usr/sbin usr/lib "

# --- the DaemonSet's container -------------------------------------------------------------
n=0
start_agent() { # starts a fresh container as kubelet would and waits until it serves
	n=$((n + 1))
	local name=volagent-test-$n
	pod run --detach --pull never --name "$name" --ulimit nofile=20000:20000 \
		--ulimit nproc=32768:32768 "${run_args[@]}" "$image" "${command[@]}" >/dev/null ||
		fatal "podman run $name"
	containers+=("$name")
	ctr=$name
	wait_for 30 test -S "$sock" || fatal "$name: no CSI socket at $sock"
	wait_for 30 pod exec "$ctr" "${readiness[@]}" >/dev/null 2>&1 ||
		fatal "$name: the readiness command ${readiness[*]} never answered ready"
}

csi() { # one call a line on stdin, one answer a line out
	cat >"$T/calls.txt"
	/usr/bin/python3 "$top/tests/csi/csi_client.py" --socket "$sock" --stub-dir "$T/stubs" \
		--timeout 30 --input "$T/calls.txt"
}

mount_id() { findmnt -n -o ID --mountpoint "$1" 2>/dev/null | head -1 | grep . || echo -; }
mount_count() { findmnt -n -o TARGET --mountpoint "$1" 2>/dev/null | wc -l; }
rm -f "$sock"
start_agent
check "registration socket in plugins_registry" test -S "$regsock"
out=$(echo 'Registration/GetInfo {}' | /usr/bin/python3 "$top/tests/csi/csi_client.py" \
	--socket "$regsock" --stub-dir "$T/stubs")
check "kubelet's registration: $out" grep -q '"name": "csi.volagent.io"' <<<"$out"
out=$(pod exec "$ctr" "${probe[@]}" 2>&1)
check "podman exec ... ${probe[*]} answers ready: $out" test $? = 0
out=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$mport/metrics")
check "metrics on the host network at the port named metrics ($mport)" \
	eval 'grep -q "^volagent_reconcile_passes_total " <<<"$out" && test "${out##* }" = 200'
check "the metrics port serves nothing but /metrics" \
	test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mport/status")" = 404
out=$(pod exec "$ctr" stat -f -c %T /run/volagent 2>&1)
check "the secret dir is on a tmpfs (the memory emptyDir): $out" test "$out" = tmpfs
check "the agent did not warn about the secret dir" \
	eval '! pod logs "$ctr" 2>&1 | grep -q "secret dir is not a tmpfs"'

# Kubelet's paths: staging dirs and publish targets (their parents made as kubelet does).
src=$H/mnt/disks/dir-src
mkdir -p "$src"
echo "from-the-host" >"$src/hello"
csi_dir=$kubelet/plugins/kubernetes.io/csi/csi.volagent.io
stg_dir=$csi_dir/vol-dir/globalmount stg_blk=$csi_dir/vol-blk/globalmount
tgt_dir=$kubelet/pods/pod-a/volumes/kubernetes.io~csi/pv-dir/mount
tgt_blk=$kubelet/pods/pod-a/volumes/kubernetes.io~csi/pv-blk/mount
mkdir -p "$stg_dir" "$stg_blk" "$(dirname "$tgt_dir")" "$(dirname "$tgt_blk")"
cap='{"mount": {}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}}'
cap_ext4='{"mount": {"fs_type": "ext4"}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}}'
publish_calls() {
	cat <<EOF
Node/NodeStageVolume {"volume_id": "vol-dir", "staging_target_path": "$stg_dir", "volume_capability": $cap, "volume_context": {"type": "local", "path": "$src"}}
Node/NodePublishVolume {"volume_id": "vol-dir", "staging_target_path": "$stg_dir", "target_path": "$tgt_dir", "volume_capability": $cap, "volume_context": {"type": "local", "path": "$src"}}
Node/NodeStageVolume {"volume_id": "vol-blk", "staging_target_path": "$stg_blk", "volume_capability": $cap_ext4, "volume_context": {"type": "local", "path": "$dev"}}
Node/NodePublishVolume {"volume_id": "vol-blk", "staging_target_path": "$stg_blk", "target_path": "$tgt_blk", "volume_capability": $cap_ext4, "volume_context": {"type": "local", "path": "$dev"}}
EOF
}
out=$(publish_calls | csi)
check "stage + publish of a directory and a block volume: $(echo $out)" \
	test "$(grep -c '^OK {}$' <<<"$out")" = 4
check "the host sees the directory volume published" mountpoint -q "$tgt_dir"
check "the host sees the block volume staged on $dev" \
	test "$(findmnt -n -o SOURCE --mountpoint "$stg_blk")" = "$dev"
check "the host sees the block volume published" mountpoint -q "$tgt_blk"
check "bytes the host put in the directory show through the publish target" \
	grep -qx from-the-host "$tgt_dir/hello"
pod exec "$ctr" /bin/sh -c "echo from-the-pod >'$tgt_dir/written' && echo block-bytes >'$tgt_blk/data' && sync"
check "bytes written in the container reach the host's directory" grep -qx from-the-pod "$src/written"
check "bytes written in the container reach the host's block volume" grep -qx block-bytes "$tgt_blk/data"
ids="$(mount_id "$stg_dir") $(mount_id "$tgt_dir") $(mount_id "$stg_blk") $(mount_id "$tgt_blk")"

adopt() { # $1: how the previous container went away
	check "$1: mounts stay on the host" eval 'mountpoint -q "$tgt_dir" && mountpoint -q "$tgt_blk" && mountpoint -q "$stg_blk"'
	rm -f "$sock"
	start_agent
	out=$(publish_calls | csi)
	check "$1: a fresh container accepts the repeated stage + publish: $(echo $out)" \
		test "$(grep -c '^OK {}$' <<<"$out")" = 4
	local now="$(mount_id "$stg_dir") $(mount_id "$tgt_dir") $(mount_id "$stg_blk") $(mount_id "$tgt_blk")"
	check "$1: mount IDs unchanged ($ids -> $now)" test "$now" = "$ids"
	check "$1: one mount at each path" test "$(mount_count "$tgt_dir")$(mount_count "$tgt_blk")$(mount_count "$stg_blk")" = 111
	check "$1: the bytes are still there" grep -qx block-bytes "$tgt_blk/data"
}

pod stop --time "$stop_timeout" "$ctr" >/dev/null
adopt "podman stop"
pod kill --signal KILL "$ctr" >/dev/null
wait_for 10 test "$(pod inspect --format '{{.State.Running}}' "$ctr")" = false
adopt "podman kill -s KILL"

out=$(csi <<EOF
Node/NodeUnpublishVolume {"volume_id": "vol-dir", "target_path": "$tgt_dir"}
Node/NodeUnstageVolume {"volume_id": "vol-dir", "staging_target_path": "$stg_dir"}
Node/NodeUnpublishVolume {"volume_id": "vol-blk", "target_path": "$tgt_blk"}
Node/NodeUnstageVolume {"volume_id": "vol-blk", "staging_target_path": "$stg_blk"}
EOF
)
check "unpublish + unstage from the new container: $(echo $out)" test "$(grep -c '^OK {}$' <<<"$out")" = 4
check "no mount left under the kubelet dir on the host" \
	test -z "$(findmnt -n -o TARGET --list | grep "^$kubelet/")"
check "the directory's data stays in its source" grep -qx from-the-pod "$src/written"
out=$(pod exec "$ctr" "${probe[@]}" 2>&1)
check "the liveness command still answers ready: $out" test $? = 0
pod stop --time "$stop_timeout" "$ctr" >/dev/null
check "the agent stops cleanly on SIGTERM (exit code 0)" \
	test "$(pod inspect --format '{{.State.ExitCode}}' "$ctr")" = 0
