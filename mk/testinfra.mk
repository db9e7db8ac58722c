# testinfra.mk - the test infrastructure of the nfs and rbd plugins: a VM with Debian's kernel
# (scripts/vm/), a throwaway NFS server (scripts/nfs-server) and Ceph cluster
# (scripts/ceph-cluster), and the tests that prove each works.  See docs/test-infra.md.
#
# Cheapest first: one VM boot (~6 s), one VM boot with an NFS server (~8 s), a Ceph cluster
# (~15 s).  Each skips (77) when its packages are missing, unless CI=true.
CHECK_SCRIPTS += tests/vm/test-vm-harness.sh tests/vm/test-nfs-mount.sh tests/ceph/test-ceph-cluster.sh

.PHONY: vm-image
# Build (or refresh) the guest kernel + initramfs in build/vm; `make check` does it on demand.
vm-image:
	scripts/vm/mkimage
