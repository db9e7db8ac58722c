# systemd-test.mk - the bare-host unit under a real systemd: tests/systemd/test-unit.sh boots
# systemd in a podman container (the host's root as an overlay) and runs volagent.service as
# `make install` lays it out, with a pod spec holding a directory and an rbd-fuse volume
# against a throwaway Ceph cluster: start, restart, watchdog kill, stop, failed starts, and
# the hardening (no new privileges, seccomp, capability bounding set, namespaces) as the
# kernel sees it on the agent and rbd-fuse.
# About 90 s.  Skips (77) without podman/runc/Ceph/capsh or root, unless CI=true.
CHECK_SCRIPTS += tests/systemd/test-unit.sh

.PHONY: check-systemd
check-systemd: $(BUILD)/volagent
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="tests/systemd/test-unit.sh" \
		tests/run-tests.sh
