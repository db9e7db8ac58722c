#!/bin/bash
# test-device-ids.sh - device identity on real disk types, with and without udev (issue 16), in
# the test VM: qemu gives the guest virtio-blk disks with serials (two sharing one, one with
# spaces and odd characters), an NVMe controller, SCSI disks on virtio-scsi (one with a WWN, one
# with a serial only) and a SATA disk on AHCI with a WWN.  One of the virtio disks carries a real
# bluestore OSD (ceph-osd --mkfs on the host).
#
# Boot 1, disks in order A (the OSD disk is vdb):
#   - without udev (no /run/udev): `volagent devices --json`; `osd-check --record`; osd-check
#     with the list named by by-id names whose links do not exist (KEEP; SAFE_TO_REMOVE when the
#     list leaves the OSD's disk out); a by-id name two disks share is refused;
#   - then systemd-udevd with the guest's private /run/udev, `udevadm trigger` + `settle`:
#     `volagent devices --json` again and the /dev/disk/by-id links.
#   The host checks that every by-id name volagent computed without udev is a link udev made to
#   that disk, that every link udev made to a whole disk is one volagent computed, that the ids
#   are the same with and without udev, and the expected id of every device type.
# Boot 2, disks in order B (the OSD disk is now vda, and vdb is another disk): osd-check with
# the record of boot 1: KEEP when the list names the OSD's disk by its by-id name; NOT_SAFE when
# the list still says vdb, or names by id the disk now on vdb.
#
# Skips (77) without qemu-system-x86_64 or ceph-osd, except under CI=true (then a failure).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/testlib.sh"

t_need_qemu
t_need "ceph-osd is not installed (scripts/deps/devices-test.txt)" command -v ceph-osd
t_need "jq is not installed" command -v jq
agent=${VOLAGENT_BIN:-$t_repo/${BUILD:-build}/volagent}
case $agent in /*) ;; *) agent=$t_repo/$agent ;; esac
[ -x "$agent" ] || { t_fail "no agent binary at $agent (make first)"; t_done; }

work=$(mktemp -d "${TMPDIR:-/tmp}/vm-devids.XXXXXX")
trap 'rm -rf "$work"' EXIT
share=$work/share
mkdir -p "$share"

OSD_UUID=6b1f7c2e-4d3a-4e5b-9c8d-7e6f5a4b3c2d
OSD_FSID=0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a
ODD_SERIAL='Odd  Ser*1!é'

for f in osd other dup1 dup2 odd nvme scsiw scsis ata; do
	truncate -s 64M "$work/$f.img"
done
truncate -s 1G "$work/osd.img"
mkdir -p "$work/osd-data"
if ! ceph-osd --mkfs -i 7 --osd-data "$work/osd-data" --osd-uuid "$OSD_UUID" \
	--osd-objectstore bluestore --bluestore-block-path "$work/osd.img" --no-mon-config \
	--fsid "$OSD_FSID" --keyring /dev/null >"$work/mkfs.log" 2>&1; then
	sed 's/^/  ceph-osd: /' "$work/mkfs.log"
	t_fail "ceph-osd --mkfs made the bluestore OSD image"
	t_done
fi

# qemu arguments for one disk: q_disk ID DEVICE-OPTIONS (the image is $work/ID.img).
qargs=()
q_disk() {
	qargs+=(-q -drive -q "if=none,id=$1,file=$work/$1.img,format=raw" -q -device -q "$2,drive=$1")
}
q_common() {
	q_disk dup1 virtio-blk-pci,serial=DUPSER
	q_disk dup2 virtio-blk-pci,serial=DUPSER
	q_disk odd "virtio-blk-pci,serial=$ODD_SERIAL"
	q_disk nvme nvme,serial=NVMESER1
	qargs+=(-q -device -q virtio-scsi-pci,id=scsi0)
	q_disk scsiw scsi-hd,bus=scsi0.0,serial=SCSISER1,wwn=0x5000c500a1b2c3d4
	q_disk scsis scsi-hd,bus=scsi0.0,serial=SCSISER2
	qargs+=(-q -device -q ahci,id=ahci0)
	q_disk ata "ide-hd,bus=ahci0.0,serial=ATASER1,model=Volagent Test Disk,wwn=0x5000c500a1b2c3e5"
}

vm() { # vm BOOT-NAME GUEST-SCRIPT
	local t0=$EPOCHREALTIME rc=0
	(cd "$work" && VM_MODULES="virtio_blk nvme virtio_scsi sd_mod ahci" \
		"$t_repo/scripts/vm/run" -s "$share" -t "${VM_TIMEOUT:-600}" -e SHARE="$share" \
		-e AGENT="$agent" "${qargs[@]}" -- bash "$2") >"$work/$1.out" 2>"$work/$1.err" || rc=$?
	echo "$1: vm boot + guest script: $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1fs", b - a}'), exit $rc"
	sed "s/^/  $1 stdout: /" "$work/$1.out"
	sed "s/^/  $1 stderr: /" "$work/$1.err"
	return "$rc"
}

# boot N ID DEVICE-OPTIONS ID DEVICE-OPTIONS: boots the VM with these two disks first (their
# order is the scenario), then the common ones, to run $work/guestN.sh; checks that it ran.
boot() {
	local n=$1 rc=0
	qargs=()
	q_disk "$2" "$3"
	q_disk "$4" "$5"
	q_common
	vm "boot$n" "$work/guest$n.sh" || rc=$?
	t_check "boot $n: the VM ran the guest script" [ "$rc" = 0 ]
}

# ---- boot 1: order A, without and then with udev ----
cat >"$work/guest1.sh" <<'GUEST'
set -u
cd "$SHARE"
echo "run-udev-before=$([ -e /run/udev ] && echo yes || echo no)"
echo "by-id-links-before=$([ -e /dev/disk/by-id ] && echo yes || echo no)"
"$AGENT" devices --json >noudev.json
"$AGENT" devices >noudev.txt
"$AGENT" osd-check --record >record.json
"$AGENT" osd-check --saved record.json --devices /dev/disk/by-id/virtio-OSDSER1,virtio-VIRTSER1 --json >keep.json
echo "keep-rc=$?"
"$AGENT" osd-check --saved record.json --devices /dev/disk/by-id/virtio-VIRTSER1 --json >safe.json
echo "safe-rc=$?"
"$AGENT" osd-check --saved record.json --devices virtio-DUPSER >dup.out 2>dup.err
echo "dup-rc=$?"
"$AGENT" osd-check --saved record.json --devices /dev/disk/by-id/virtio-NOSUCH >nosuch.out 2>nosuch.err
echo "nosuch-rc=$?"
# A version 1 record with the wwn value earlier versions wrote (sysfs wwid) still matches.
sd=$(basename "$(dirname "$(dirname "$(grep -lx naa.5000c500a1b2c3d4 /sys/block/sd*/device/wwid)")")")
echo '{"volagent_osd_record": 1, "osds": [{"osd_id": 9, "device": "'"$sd"'", "id_kind": "wwn", "id_value": "naa.5000c500a1b2c3d4"}]}' >v1-wwn.json
"$AGENT" osd-check --saved v1-wwn.json --devices wwn-0x5000c500a1b2c3d4 --json >v1-wwn.out
echo "v1-wwn-rc=$?"

export SYSTEMD_IGNORE_CHROOT=1 # the guest runs this script in a chroot; udev's tools refuse it
udevd=/lib/systemd/systemd-udevd
[ -x "$udevd" ] || udevd=/usr/lib/systemd/systemd-udevd
"$udevd" --daemon
udevadm trigger --action=add --subsystem-match=block
udevadm settle -t 120
echo "settle-rc=$?"
"$AGENT" devices --json >udev.json
find /dev/disk/by-id -type l -printf '%f\t%l\n' | sort >links.txt
udevadm control --exit
exit 0
GUEST

boot 1 other virtio-blk-pci,serial=VIRTSER1 osd virtio-blk-pci,serial=OSDSER1
has() { grep -qxF -- "$1" "$work/$2"; }
t_check "boot 1: no udev database at first (no /run/udev, no /dev/disk/by-id)" \
	eval 'has run-udev-before=no boot1.out && has by-id-links-before=no boot1.out'
sed 's/^/  devices without udev: /' "$share/noudev.txt" 2>/dev/null || true

j() { jq -r "$@"; }
# The whole disks of a devices JSON: name, stable id, source, kind, duplicate, by-id names.
disks() { jq -c '.blockdevices[] | select(.type == "disk")' "$1"; }
id_of() { jq -r --arg n "$2" '.blockdevices[] | select(.name == $n) | ."stable-id"' "$1"; }
field() { jq -r --arg n "$2" --arg f "$3" '.blockdevices[] | select(.name == $n) | .[$f] | if type == "array" then join(",") else tostring end' "$1"; }

if [ -s "$share/noudev.json" ] && [ -s "$share/udev.json" ]; then
	t_check "without udev, volagent says there is no udev database" [ "$(j .udev "$share/noudev.json")" = false ]
	t_check "with udev, volagent reads udev's database" [ "$(j .udev "$share/udev.json")" = true ]
	# Expected ids per device type, without udev (computed from sysfs).
	expect() { # expect NAME STABLE-ID SOURCE BY-ID-NAMES
		local got
		got="$(id_of "$share/noudev.json" "$1") $(field "$share/noudev.json" "$1" id-source) $(field "$share/noudev.json" "$1" by-id)"
		if [ "$got" = "$2 $3 $4" ]; then t_pass "without udev: $1 is $2 (from $3)"; else
			t_fail "without udev: $1 is $2 (from $3), by-id $4" "got: $got"; fi
	}
	expect vda serial:virtio-VIRTSER1 sysfs virtio-VIRTSER1
	expect vdb serial:virtio-OSDSER1 sysfs virtio-OSDSER1
	expect vdc serial:virtio-DUPSER sysfs virtio-DUPSER
	expect vdd serial:virtio-DUPSER sysfs virtio-DUPSER
	expect vde serial:virtio-Odd_Ser_1_é sysfs virtio-Odd_Ser_1_é
	expect nvme0n1 serial:nvme-QEMU_NVMe_Ctrl_NVMESER1 sysfs \
		nvme-nvme.1b36-4e564d4553455231-51454d55204e564d65204374726c-00000001,nvme-QEMU_NVMe_Ctrl_NVMESER1,nvme-QEMU_NVMe_Ctrl_NVMESER1_1
	# SCSI and SATA disks are probed asynchronously: their sd names vary from boot to boot.
	expect_sd() { # expect_sd STABLE-ID BY-ID-NAMES
		local got
		got=$(jq -r --arg id "$1" '[.blockdevices[] | select(."stable-id" == $id) |
			"\(.name | test("^sd[a-z]$")) \(."id-source") \(."by-id" | join(","))"] | join(" / ")' "$share/noudev.json")
		if [ "$got" = "true sysfs $2" ]; then t_pass "without udev: an sd disk is $1 (from sysfs)"; else
			t_fail "without udev: an sd disk is $1 (from sysfs), by-id $2" "got: ${got:-no such disk}"; fi
	}
	expect_sd wwn:wwn-0x5000c500a1b2c3d4 scsi-35000c500a1b2c3d4,wwn-0x5000c500a1b2c3d4
	expect_sd serial:scsi-0QEMU_QEMU_HARDDISK_SCSISER2 scsi-0QEMU_QEMU_HARDDISK_SCSISER2
	expect_sd wwn:wwn-0x5000c500a1b2c3e5 ata-Volagent_Test_Disk_ATASER1,wwn-0x5000c500a1b2c3e5
	t_check "a serial two disks share is marked duplicate on both, with kind serial" eval \
		'[ "$(field "$share/noudev.json" vdc duplicate-id)/$(field "$share/noudev.json" vdd duplicate-id)/$(field "$share/noudev.json" vdc id-kind)" = true/true/serial ]'
	t_check "a disk with its own serial is not marked duplicate" [ "$(field "$share/noudev.json" vda duplicate-id)" = false ]
	t_check "the table says the shared serial is not trusted" grep -q "vdc .*duplicate id: serial shared, not trusted" "$share/noudev.txt"
	t_check "the bluestore OSD is found on vdb" [ "$(field "$share/noudev.json" vdb fstype)" = ceph_bluestore ]

	# Every whole disk: the same id with and without udev.
	same=1
	while read -r name; do
		a=$(id_of "$share/noudev.json" "$name")
		b=$(id_of "$share/udev.json" "$name")
		if [ "$a" != "$b" ]; then same=0; echo "  $name: $a without udev, $b with"; fi
	done < <(jq -r '.blockdevices[] | select(.type == "disk") | .name' "$share/noudev.json")
	t_check "every disk has the same stable id with and without udev" [ "$same" = 1 ]

	# by-id names: computed without udev == the links udev made, both ways.
	ok=1
	n_names=0
	while IFS=$'\t' read -r name ids; do
		for id in ${ids//,/ }; do
			n_names=$((n_names + 1))
			target=$(awk -F'\t' -v l="$id" '$1 == l {print $2}' "$share/links.txt")
			target=${target##*/}
			# A shared serial's link points at one of the disks that share it.
			if [ -z "$target" ] || ! jq -e --arg t "$target" --arg id "$id" \
				'.blockdevices[] | select(.name == $t) | ."by-id" | index($id)' "$share/noudev.json" >/dev/null; then
				ok=0
				echo "  $name: volagent's by-id name $id: udev's link ${target:-is missing}"
			fi
		done
	done < <(jq -r '.blockdevices[] | select(.type == "disk") | [.name, (."by-id" | join(","))] | @tsv' "$share/noudev.json")
	t_check "every by-id name volagent computes without udev is a link udev made to that disk ($n_names names)" \
		eval '[ "$ok" = 1 ] && [ "$n_names" -ge 12 ]'
	ok=1
	n_links=0
	while IFS=$'\t' read -r link target; do
		[[ $link =~ -part[0-9]+$ ]] && continue
		n_links=$((n_links + 1))
		if ! jq -e --arg t "${target##*/}" --arg id "$link" \
			'.blockdevices[] | select(.name == $t) | ."by-id" | index($id)' "$share/noudev.json" >/dev/null; then
			ok=0
			echo "  udev's link $link -> $target is not among volagent's by-id names of ${target##*/}"
		fi
	done <"$share/links.txt"
	t_check "every by-id link udev made to a whole disk is one volagent computed without udev ($n_links links)" \
		eval '[ "$ok" = 1 ] && [ "$n_links" -ge 12 ]'
	t_check "with udev, volagent lists udev's links too" eval \
		'jq -r ".blockdevices[] | select(.\"stable-id\" == \"wwn:wwn-0x5000c500a1b2c3d4\") | .links[]" "$share/udev.json" | grep -qx /dev/disk/by-id/wwn-0x5000c500a1b2c3d4'
	sed 's/^/  udev link: /' "$share/links.txt"
else
	t_fail "boot 1 wrote noudev.json and udev.json"
fi

if [ -s "$share/record.json" ]; then
	t_check "the record (version 2) keeps the hardware id beside the osd uuid" eval \
		'[ "$(jq -r ".volagent_osd_record, (.osds[0] | .device, .id_kind, .id_value, .hw_id_kind, .hw_id)" "$share/record.json" | paste -sd" ")" = "2 vdb bluestore $OSD_UUID serial virtio-OSDSER1" ]'
	t_check "scenario saved record, by-id names without links: KEEP" eval \
		'has keep-rc=0 boot1.out && [ "$(jq -r ".osds[0].status" "$share/keep.json")" = KEEP ]'
	t_check "scenario saved record, the list leaves the OSD's disk out (by-id): SAFE_TO_REMOVE" eval \
		'has safe-rc=0 boot1.out && [ "$(jq -r ".osds[0].status" "$share/safe.json")" = SAFE_TO_REMOVE ]'
	t_check "a by-id name two disks share is refused (exit 2, says so)" eval \
		'has dup-rc=2 boot1.out && grep -q "fits 2 devices (they share a serial)" "$share/dup.err"'
	t_check "a by-id name no disk has is refused (exit 2, names it)" eval \
		'has nosuch-rc=2 boot1.out && grep -q "virtio-NOSUCH.*no device of this node has that by-id name" "$share/nosuch.err"'
	t_check "a version 1 record with the old wwn value (naa.…) still finds its disk: KEEP" eval \
		'has v1-wwn-rc=0 boot1.out && [ "$(jq -r ".osds[0].status" "$share/v1-wwn.out")" = KEEP ]'
else
	t_fail "boot 1 wrote the OSD record"
fi

# ---- boot 2: order B, the OSD's disk is now vda and vdb holds VIRTSER1 ----
cat >"$work/guest2.sh" <<'GUEST'
set -u
cd "$SHARE"
"$AGENT" devices >boot2.txt
"$AGENT" osd-check --saved record.json --devices /dev/disk/by-id/virtio-OSDSER1,virtio-VIRTSER1 --json >renamed-keep.json
echo "renamed-keep-rc=$?"
"$AGENT" osd-check --saved record.json --devices vdb --json >renamed-byname.json 2>renamed-byname.err
echo "renamed-byname-rc=$?"
"$AGENT" osd-check --saved record.json --devices virtio-VIRTSER1 --json >renamed-other.json
echo "renamed-other-rc=$?"
exit 0
GUEST
boot 2 osd virtio-blk-pci,serial=OSDSER1 other virtio-blk-pci,serial=VIRTSER1
sed 's/^/  devices in boot 2: /' "$share/boot2.txt" 2>/dev/null || true
if [ -s "$share/renamed-keep.json" ]; then
	t_check "scenario rename: the OSD's disk moved from vdb to vda, the list names it by id: KEEP" eval \
		'has renamed-keep-rc=0 boot2.out && [ "$(jq -r ".osds[0] | .status, .saved_device, .now_on" "$share/renamed-keep.json" | paste -sd" ")" = "KEEP vdb vda" ]'
	t_check "scenario rename: the list still says vdb: NOT_SAFE, and the foreign disk is warned of" eval \
		'has renamed-byname-rc=1 boot2.out && [ "$(jq -r ".osds[0].status, .osds[0].foreign_disk_selected" "$share/renamed-byname.json" | paste -sd" ")" = "NOT_SAFE true" ]'
	t_check "scenario rename: the list names by id the disk now on vdb: NOT_SAFE" eval \
		'has renamed-other-rc=1 boot2.out && [ "$(jq -r ".osds[0].status" "$share/renamed-other.json")" = NOT_SAFE ]'
else
	t_fail "boot 2 wrote the osd-check results"
fi
t_done
