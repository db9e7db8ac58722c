# devices-vm.mk - device identity on real disk types (virtio-blk, NVMe, SCSI on virtio-scsi,
# SATA on AHCI), with and without udev, and osd-check with by-id names, in the test VM:
# tests/vm/test-device-ids.sh boots scripts/vm/run twice (the second time with the disks in
# another order, so that they are renamed).  About 2-3 min here.  Needs qemu
# (scripts/deps/vm-test.txt), ceph-osd and udev (devices-test.txt) and jq; skips (77) without
# them, except under CI=true.  See docs/devices.md.
CHECK_SCRIPTS += tests/vm/test-device-ids.sh

.PHONY: check-devices-vm
# Only this test (the agent is built first).
check-devices-vm: $(BUILD)/volagent
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/vm/test-device-ids.sh" \
		tests/run-tests.sh
