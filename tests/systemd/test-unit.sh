#!/bin/bash
# test-unit.sh - the bare-host unit under a real systemd: volagent.service as `make install`
# installs it, run by systemd 252 as PID 1 of a podman container whose root is an overlay of
# this machine's own root (so the agent just built, Ceph and rbd-fuse are all there, and
# nothing the container writes reaches the host).  A pod spec with a directory volume and an
# rbd volume (rbd-fuse, against a throwaway Ceph cluster on 127.0.0.1) is mounted, then:
#   - `systemctl start` returns after READY, the unit is active, STATUS= shows counts;
#   - the hardening is in effect on the agent and on rbd-fuse (no new privileges, seccomp,
#     the capability bounding set, its own UTS namespace) while the agent stays in the host's
#     mount namespace; the secret dir /run/volagent is a 0700 tmpfs dir; the unit is ordered
#     before remote-fs-pre.target;
#   - `systemctl restart`: same mount IDs, same rbd-fuse PID, data written before readable;
#   - a frozen agent (SIGSTOP, WatchdogSec=5s drop-in) is killed by the watchdog, restarted
#     and adopts everything without remounting; rbd-fuse survives;
#   - `systemctl stop` leaves mounts and helper; `journalctl -u volagent VOLUME=...` works;
#   - a bad config file and a second instance fail the start with the reason in STATUS=;
#   - removing the pod spec unmounts, detaches and stops rbd-fuse (its scope goes away).
# Everything is removed on every exit path: container, podman state, mounts, loop devices,
# the Ceph cluster.  Closes with "N passed, N failed".
#
# Skips (77) when not root or podman, runc, Ceph or rbd-fuse are missing, unless CI=true.
# TEST_TIME_SCALE multiplies every wait.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-build}
case "$build" in /*) ;; *) build="$here/$build" ;; esac
scale=${TEST_TIME_SCALE:-1}
passed=0 failed=0

. "$here/tests/vm/testlib.sh"

[ "$(id -u)" = 0 ] || t_skip "systemd unit test: needs root"
for tool in podman runc ceph-mon ceph-osd rbd rbd-fuse capsh; do
	command -v "$tool" >/dev/null || t_skip "systemd unit test: $tool not installed (scripts/install-deps test)"
done
[ -x /lib/systemd/systemd ] || t_skip "systemd unit test: no /lib/systemd/systemd to boot in the container"
[ -x "$build/volagent" ] || { echo "no $build/volagent (run make)"; echo "0 passed, 1 failed"; exit 1; }

T=$(mktemp -d /tmp/vsd.XXXXXX)
name=volagent-sd-$$
img=vsd$$ # the rbd image
P=(podman --root "$T/podman/root" --runroot "$T/podman/run" --tmpdir "$T/podman/tmp"
	--events-backend file --cgroup-manager cgroupfs --runtime runc)
loops=()
container_up=false cluster_up=false

say() { echo "systemd unit test: $*"; }
ok() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAILED: $*"; }
check() { # DESC CMD...: one assertion
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else fail "$desc"; fi
}
secs() { awk -v s="$1" -v k="$scale" 'BEGIN {printf "%d", s * k + 0.999}'; }
wait_for() { # SECONDS CMD...: poll CMD every 0.2 s
	local end=$((SECONDS + $(secs "$1")))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.2
	done
}
in_c() { "${P[@]}" exec "$name" "$@"; }
in_ci() { "${P[@]}" exec -i "$name" "$@"; } # with stdin

cleanup() {
	local rc=$? l
	trap - EXIT INT TERM HUP
	if $container_up; then
		# What the agent left mounted, as it would on a host: take it down in the container's
		# namespace so the loop device and rbd-fuse go with it.
		in_c sh -c 'systemctl stop volagent; for m in $(findmnt -rn -o TARGET | grep "^/var/lib/volagent/" | sort -r); do umount -l "$m"; done' >/dev/null 2>&1
		"${P[@]}" rm -f -t 5 "$name" >/dev/null 2>&1 || say "podman rm $name failed"
	fi
	for l in "${loops[@]}"; do
		# Only a loop device this test saw, and only while it still backs this test's image.
		if grep -qsF "%2F$img.fuse/$img" "/sys/block/${l#/dev/}/loop/backing_file"; then
			losetup -d "$l" 2>/dev/null || say "cannot detach $l"
		fi
	done
	$cluster_up && { "$here/scripts/ceph-cluster" down "$ceph_dir" >/dev/null 2>&1 ||
		say "stopping the Ceph cluster in $ceph_dir failed"; }
	# podman's overlay of / must be gone before anything under $T is removed.
	for m in $(findmnt -rn -o TARGET | grep "^$T/" | sort -r); do umount "$m" 2>/dev/null || umount -l "$m"; done
	if findmnt -rn -o TARGET | grep -q "^$T/"; then
		say "mounts left under $T; not removing it"
	else
		rm -rf --one-file-system "$T"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit
}
abort() { fail "$*"; finish; }

t0=$SECONDS
# --- the installed files, as `make install` lays them out, in a test-owned DESTDIR -------
make -s -C "$here" install BUILD="$build" DESTDIR="$T/dest" PREFIX=/usr/local >"$T/install.log" 2>&1 ||
	{ cat "$T/install.log"; abort "make install DESTDIR=$T/dest"; }
check "make install put the unit with its ExecStart" \
	grep -qx 'ExecStart=/usr/local/bin/volagent run' "$T/dest/usr/local/lib/systemd/system/volagent.service"

# --- Ceph, with one image -------------------------------------------------------------------
# A monitor that does not come up once (seen once in many CI runs: its log is shown) gets one
# more go in a fresh dir before the test gives up.
ceph_dir=$T/ceph
if ! env_lines=$("$here/scripts/ceph-cluster" up "$ceph_dir" 2>"$T/ceph-up.err"); then
	cat "$T/ceph-up.err"
	tail -n 20 "$ceph_dir"/log/mon.a.log "$ceph_dir"/log/*.out 2>/dev/null
	say "the Ceph cluster did not come up; one more go"
	ceph_dir=$T/ceph2
	if ! env_lines=$("$here/scripts/ceph-cluster" up "$ceph_dir" 2>"$T/ceph-up.err"); then
		cat "$T/ceph-up.err"
		abort "the Ceph cluster did not come up"
	fi
fi
cluster_up=true
eval "$env_lines"
export CEPH_CONF
mon=$(echo "$CEPH_MON_HOST" | sed -n 's/.*v1:\([^],]*\).*/\1/p')

rbd create --size 256M "$CEPH_POOL/$img" || abort "rbd create $CEPH_POOL/$img"
say "cluster up in $((SECONDS - t0))s ($mon)"

# --- systemd in a container -----------------------------------------------------------------
mkdir -p "$T/podman"
"${P[@]}" run -d --name "$name" --systemd=always --privileged --network host \
	--ulimit nofile=20000:20000 --ulimit nproc=32768:32768 \
	--tmpfs /tmp:rw,notmpcopyup --tmpfs /run:rw,notmpcopyup -v "$T:$T" \
	--rootfs /:O /lib/systemd/systemd >"$T/podman-run.log" 2>&1 ||
	{ cat "$T/podman-run.log"; abort "podman run (systemd as PID 1)"; }
container_up=true
booted() { in_c systemctl is-system-running 2>/dev/null | grep -Eqx 'running|degraded'; }
wait_for 60 booted || abort "systemd in the container did not finish booting"
say "systemd booted in $((SECONDS - t0))s"

in_c sh -c "cp -a '$T/dest/.' / && mkdir -p /srv/vsd && systemctl daemon-reload" ||
	abort "installing into the container"
in_ci sh -c 'cat >/etc/volagent/volagent.json' <<EOF || abort "writing the config"
{"rbd-attach-methods": "fuse", "rbd-timeout": "60s", "device-inventory": false,
 "health-interval": "2s", "backoff-max": "5s"}
EOF

prop() { in_c systemctl show -p "$1" --value volagent; }
main_pid() { prop MainPID; }

# --- start: returns after READY -------------------------------------------------------------
in_c systemctl start volagent || { in_c systemctl status volagent; abort "systemctl start volagent"; }
check "start returned with the unit active (Type=notify: after READY=1)" \
	test "$(prop ActiveState)" = active
check "STATUS= carries the counts" grep -q 'desired=0 mounted=0' <<<"$(prop StatusText)"

# --- the hardening, as the kernel sees it --------------------------------------------------
# status_field PID FIELD: a field of /proc/PID/status in the container.
status_field() { in_c awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status"; }
# caps PID: the names in the process's capability bounding set, one a line, sorted.
caps() { capsh --decode="0x$(status_field "$1" CapBnd)" | sed 's/.*=//' | tr ',' '\n' | sort; }
# The bounding set the unit names, as far as the container's own (PID 1's) allows: a sandbox
# may lack some (this build host has no CAP_SYS_RESOURCE at all).
unit_caps() {
	comm -12 <(prop CapabilityBoundingSet | tr ' ' '\n' | tr 'A-Z' 'a-z' | sort) <(caps 1)
}
hardened() { # WHO PID
	local pid=$2 have want
	check "$1: NoNewPrivs is set" test "$(status_field "$pid" NoNewPrivs)" = 1
	check "$1: a seccomp filter is installed (SystemCallArchitectures, Restrict*)" \
		test "$(status_field "$pid" Seccomp)" = 2
	have=$(caps "$pid" | tr '\n' ' ')
	want=$(unit_caps | tr '\n' ' ')
	say "$1: capability bounding set: $have"
	check "$1: the capability bounding set is the unit's, no more" \
		test -n "$have" -a "$have" = "$want" -a "$(caps 1 | wc -l)" -gt "$(caps "$pid" | wc -l)"
	check "$1: in the host's mount namespace (mounts propagate)" \
		test "$(in_c readlink "/proc/$pid/ns/mnt")" = "$(in_c readlink /proc/1/ns/mnt)"
	check "$1: in a UTS namespace of its own (ProtectHostname)" \
		test "$(in_c readlink "/proc/$pid/ns/uts")" != "$(in_c readlink /proc/1/ns/uts)"
}
hardened "agent" "$(main_pid)"
check "the secret dir /run/volagent is a 0700 dir on a tmpfs" \
	test "$(in_c stat -c '%a %F' /run/volagent) $(in_c stat -f -c %T /run/volagent)" = "700 directory tmpfs"
no_secret_warning() { ! in_c journalctl -u volagent -o cat --no-pager | grep -q 'secret dir is not a tmpfs'; }
check "no warning about the secret dir" no_secret_warning
check "ordered before remote-fs-pre.target (stopped after remote filesystems)" \
	grep -qw remote-fs-pre.target <<<"$(prop Before) $(prop Wants)"

pods=/etc/volagent/pods.d
base=/var/lib/volagent/pods/sdpod/volumes
dirmnt=$base/kubernetes.io~local/dir
rbdmnt=$base/kubernetes.io~rbd/disk
in_ci sh -c "cat >$pods/sdpod.json" <<EOF
{"pod": {"uid": "sdpod"}, "volumes": [
  {"name": "dir", "local": {"path": "/srv/vsd"}},
  {"name": "disk", "rbd": {"monitors": ["$mon"], "pool": "$CEPH_POOL", "image": "$img",
   "keyring": "$CEPH_KEYRING", "fsType": "ext4"}}]}
EOF
both_mounted() { in_c mountpoint -q "$dirmnt" && in_c mountpoint -q "$rbdmnt"; }
if ! wait_for 90 both_mounted; then
	in_c journalctl -u volagent --no-pager | tail -20
	abort "the pod's dir and rbd volumes were not mounted"
fi
ok "a pod spec with a directory and an rbd (rbd-fuse) volume: both mounted"
status_has() { prop StatusText | grep -q "$1"; }
check "STATUS= shows mounted=2" wait_for 10 status_has "desired=2 mounted=2"

in_c sh -c "echo dir-data >$dirmnt/f && echo rbd-data >$rbdmnt/f && sync" || abort "writing data"
mounts() { in_c findmnt -rn -o ID,TARGET | awk '$2 ~ /^\/var\/lib\/volagent\// {print}' | sort; }
ids0=$(mounts)
helper=$(in_c pgrep -x rbd-fuse)
echo "$ids0" | sed 's/^/  mount: /'
say "rbd-fuse pid $helper"
[[ $helper =~ ^[0-9]+$ ]] || abort "one rbd-fuse process (found: '$helper')"
in_c findmnt -rn -o SOURCE | grep -o '^/dev/loop[0-9]*' | sort -u >"$T/loops"
mapfile -t loops <"$T/loops"
say "loop devices: ${loops[*]}"
in_own_scope() {
	local cg
	cg=$(in_c cat "/proc/$helper/cgroup") || return 1
	grep -q "system-volagent.slice/volagent-rbd-fuse-$helper.scope" <<<"$cg" &&
		! grep -q 'volagent.service' <<<"$cg"
}
check "rbd-fuse runs in a scope of its own, not in volagent.service" in_own_scope
hardened "rbd-fuse (inherited)" "$helper"

data_ok() {
	[ "$(in_c cat "$dirmnt/f")" = dir-data ] && [ "$(in_c cat "$rbdmnt/f")" = rbd-data ]
}
same_as_before() { # WHAT
	local ids
	ids=$(mounts)
	check "$1: every mount kept its mount ID" test "$ids" = "$ids0"
	[ "$ids" = "$ids0" ] || diff <(echo "$ids0") <(echo "$ids") | sed 's/^/  /'
	check "$1: rbd-fuse is the same process ($helper)" test "$(in_c pgrep -x rbd-fuse)" = "$helper"
	check "$1: data written before is readable" data_ok
}

# --- restart --------------------------------------------------------------------------------
pid0=$(main_pid)
in_c systemctl restart volagent || abort "systemctl restart volagent"
check "restart: a new agent is active" test "$(prop ActiveState)" = active -a "$(main_pid)" != "$pid0"
same_as_before "restart"
adopted() { in_c journalctl -u volagent _PID="$(main_pid)" -o cat --no-pager | grep -q 'adopted existing mount'; }
check "restart: the new agent adopted the mounts (journal)" adopted

# --- a frozen agent: the watchdog kills and restarts it -----------------------------------------
in_ci sh -c 'mkdir -p /etc/systemd/system/volagent.service.d && cat >/etc/systemd/system/volagent.service.d/watchdog.conf' <<EOF
[Service]
WatchdogSec=5s
LimitCORE=0
EOF
in_c systemctl daemon-reload
in_c systemctl restart volagent || abort "restart with WatchdogSec=5s"
pid1=$(main_pid)
restarts0=$(prop NRestarts)
in_c kill -STOP "$pid1"
say "agent $pid1 stopped (SIGSTOP); waiting for the watchdog"
restarted() { [ "$(prop NRestarts)" -gt "$restarts0" ] && [ "$(prop ActiveState)" = active ]; }
if wait_for 60 restarted; then
	ok "watchdog: the frozen agent was killed and restarted (pid $pid1 -> $(main_pid))"
else
	fail "watchdog: the frozen agent was not restarted within $(secs 60)s"
	in_c kill -CONT "$pid1" 2>/dev/null
fi
watchdog_logged() { in_c journalctl -u volagent -o cat --no-pager | grep -qi 'watchdog timeout'; }
check "watchdog: systemd logged the watchdog timeout" watchdog_logged
check "watchdog: the new agent adopted the mounts (journal)" adopted
same_as_before "watchdog restart"
in_c rm -f /etc/systemd/system/volagent.service.d/watchdog.conf
in_c systemctl daemon-reload

# --- stop -------------------------------------------------------------------------------------
in_c systemctl stop volagent
check "stop: the unit is inactive" test "$(prop ActiveState)" = inactive
same_as_before "stop"
vol_lines=$(in_c journalctl -u volagent VOLUME="rbd:$CEPH_POOL/$img" -o cat --no-pager)
echo "$vol_lines" | tail -3 | sed 's/^/  journal: /'
check "journalctl -u volagent VOLUME=rbd:$CEPH_POOL/$img finds the volume's lines" \
	grep -q 'volume mounted' <<<"$vol_lines"
only_rbd() { ! grep -q 'local:/srv/vsd' <<<"$vol_lines"; }
check "... and only that volume's" only_rbd
check "journal entries carry POD= and PLUGIN= fields" test -n \
	"$(in_c journalctl -u volagent POD=sdpod PLUGIN=local -o cat --no-pager)"

# --- failed starts: the reason in systemctl status ------------------------------------------
in_c sh -c 'cp /etc/volagent/volagent.json /etc/volagent/good.json &&
	echo "{\"workers\": \"many\"}" >/etc/volagent/volagent.json'
in_c systemctl start volagent >/dev/null 2>&1
st=$(in_c systemctl status volagent --no-pager 2>&1)
echo "$st" | grep 'Status:' | sed 's/^/  /'
check "bad config: the start fails" test "$(prop ActiveState)" = failed
check "bad config: systemctl status shows the reason naming the key" \
	grep -q 'Status: "cannot start: .*workers' <<<"$st"
check "bad config: no restart loop (exit 2 prevents it)" test "$(prop NRestarts)" = 0
in_c sh -c 'mv /etc/volagent/good.json /etc/volagent/volagent.json && systemctl reset-failed volagent'

lock=/var/lib/volagent/state/volagent.lock
in_c sh -c "exec 9>>$lock; flock 9; echo \$\$ >$T/locker.pid; exec sleep 600" &
locker_exec=$!
wait_for 10 test -s "$T/locker.pid" || abort "taking the instance lock"
locker=$(cat "$T/locker.pid")
in_c systemctl start volagent >/dev/null 2>&1
second_reason() { in_c systemctl status volagent --no-pager 2>&1 | grep -q 'Status: "cannot start: another volagent'; }
check "second instance: the start fails" test "$(prop ActiveState)" != active
check "second instance: systemctl status shows why" wait_for 5 second_reason
in_c systemctl status volagent --no-pager 2>&1 | grep 'Status:' | sed 's/^/  /'
err_logged() { in_c journalctl -u volagent -p err -o cat --no-pager | grep -q 'cannot start.*another volagent'; }
check "second instance: the error is in the journal at priority err" err_logged
in_c kill "$locker"
wait "$locker_exec" 2>/dev/null
in_c sh -c 'systemctl reset-failed volagent; systemctl stop volagent' >/dev/null 2>&1
in_c systemctl start volagent || abort "start after the failed starts"
same_as_before "start after stop"

# --- the pod goes: everything the agent made goes with it -----------------------------------
in_c rm "$pods/sdpod.json"
nothing_mounted() { [ -z "$(mounts)" ] && ! in_c pgrep -x rbd-fuse; }
check "pod spec removed: mounts gone and rbd-fuse stopped" wait_for 60 nothing_mounted
no_scope() { [ -z "$(in_c systemctl list-units --no-legend --all 'volagent-rbd-*')" ]; }
check "pod spec removed: the helper's scope is gone" wait_for 10 no_scope
for l in "${loops[@]}"; do
	check "loop device $l detached" sh -c "! grep -qsF '%2F$img.fuse/$img' /sys/block/${l#/dev/}/loop/backing_file"
done
in_c systemctl stop volagent

# --- nothing left behind ----------------------------------------------------------------------
"${P[@]}" rm -f -t 5 "$name" >/dev/null 2>&1
container_up=false
check "the container is gone" test -z "$("${P[@]}" ps -aq 2>/dev/null)"
"$here/scripts/ceph-cluster" down "$ceph_dir" >/dev/null 2>&1
cluster_up=false
check "the Ceph cluster is down" test ! -e "$ceph_dir"
say "$((SECONDS - t0))s in all"
finish
