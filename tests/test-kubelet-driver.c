/* test-kubelet-driver.c - the agent's CSI node service driven the way kubelet drives it, by
 * tests/kubelet/lifecycle.py (a driver written from kubelet's source: registration through
 * plugins_registry, a connection per call, NodeGetCapabilities before what depends on it,
 * kubelet's paths and vol_data.json files, its raw block bind and loop-device lock, teardown
 * in its order, a restart that reissues stage and publish from what is on disk): a local
 * directory (and a missing one, whose final error leaves nothing), a local block device with
 * ext4, and a raw block volume, each on a real loop device.  The agent runs with a node id that
 * is not the hostname, as in a DaemonSet, and the Node carries kubelet's
 * kubernetes.io/hostname label, so a topology key kubelet owns fails the registration as it
 * would on such a node.  Root, private mount namespace; the fixture stops the agent and
 * detaches its loop devices, and the driver's lock loop devices are detached here, also on
 * failure.  nfs runs in the VM (tests/nfs/guest-e2e.sh), rbd in tests/test-rbd-kubelet.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-fixture.h"
#include "csi-env.h"
#include "kubelet-driver.h"
#include "testlib.h"

static int setup(void **state)
{
	*state = csi_env_new("kubelet");
	return 0;
}

static int teardown(void **state)
{
	struct csi_env *e = *state;

	kubelet_driver_detach_locks(e->kubelet);
	csi_env_free(e);
	return 0;
}

static void test_local_directory(void **state)
{
	struct csi_env *e = *state;
	const char *src = fixture_make_source(e->f, "src", "hello");
	char pv[1024], bad[1024];

	kubelet_driver_start_agent(e);
	snprintf(
		pv, sizeof(pv),
		"{\"name\": \"pv-dir\", \"handle\": \"vol-dir\", \"accessModes\": "
		"[\"ReadWriteOnce\"], \"volumeAttributes\": {\"type\": \"local\", \"path\": \"%s\"}}",
		src);
	snprintf(bad, sizeof(bad),
		 "{\"name\": \"pv-gone\", \"handle\": \"vol-gone\", \"volumeAttributes\": "
		 "{\"type\": \"local\", \"path\": \"%s/not-there\"}}",
		 e->f->dir);
	kubelet_driver_run(e, "dir", pv, bad);
}

/* One lifecycle of a local volume on a new loop device of size bytes; fields are the PV's
 * fields beside name, handle, accessModes and volumeAttributes. */
static void run_local_device(struct csi_env *e, const char *label, long long size,
			     const char *fields)
{
	const char *dev = fixture_add_loop(e->f, size);
	char pv[1024];

	assert_non_null(dev);
	kubelet_driver_start_agent(e);
	snprintf(pv, sizeof(pv),
		 "{\"name\": \"pv-%s\", \"handle\": \"vol-%s\", \"accessModes\": "
		 "[\"ReadWriteOnce\"], %s, \"volumeAttributes\": {\"type\": \"local\", "
		 "\"path\": \"%s\"}}",
		 label, label, fields, dev);
	kubelet_driver_run(e, label, pv, NULL);
}

static void test_local_block_filesystem(void **state)
{
	run_local_device(*state, "block-fs", 64 << 20,
			 "\"fsType\": \"ext4\", \"mountOptions\": [\"noatime\"]");
}

static void test_raw_block(void **state)
{
	run_local_device(*state, "raw-block", 32 << 20, "\"volumeMode\": \"Block\"");
}

/* With the CSIDriver's seLinuxMount, kubelet adds the pod's label as context="..." (quoted, a
 * comma inside) to the stage and publish mount options.  Here: the option stays whole up to
 * libmount (its debug log shows the option string it is given), `volagent status` shows it,
 * and a pod with another label is refused naming both.  This kernel runs without SELinux:
 * lifecycle.py says so and checks that the mount is made without the label (libmount drops
 * it); tests/vm/test-selinux.sh shows the label applied. */
static void test_selinux_label_local_block(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 64 << 20);
	const char *label = "system_u:object_r:container_file_t:s0:c12,c34";
	char pv[1024], status[1400], want[200];

	assert_non_null(dev);
	setenv("LIBMOUNT_DEBUG", "cxt", 1);
	kubelet_driver_start_agent(e);
	unsetenv("LIBMOUNT_DEBUG");
	snprintf(pv, sizeof(pv),
		 "{\"name\": \"pv-sel\", \"handle\": \"vol-sel\", \"accessModes\": "
		 "[\"ReadWriteOnce\"], \"fsType\": \"ext4\", \"volumeAttributes\": {\"type\": "
		 "\"local\", \"path\": \"%s\"}}",
		 dev);
	snprintf(status, sizeof(status), "[\"%s\", \"status\", \"--state-dir\", \"%s\"]",
		 test_volagent_bin(), e->f->state);
	kubelet_driver_run_args(e, "selinux", pv, NULL,
				(const char *const[]){ "--selinux-label", label, "--status-cmd",
						       status, NULL });
	/* What the stage mount handed to libmount: the label whole, quotes and comma. */
	snprintf(want, sizeof(want), "context=\"%s\"", label);
	if (fixture_log_find(e->f, "mount: fixing options", want) < 0)
		fail_msg("libmount's debug log has no option string with %s", want);
}

/* Pod spec files take the same label in mountOptions, whole; a second pod of the same
 * device with another label is refused naming both, and the first pod's mount stays. */
static void test_pod_spec_selinux_labels(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 64 << 20);
	const char *fmt = "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": \"d\", "
			  "\"local\": {\"path\": \"%s\", \"fsType\": \"ext4\"}, "
			  "\"mountOptions\": [\"noatime\", "
			  "\"context=\\\"system_u:object_r:container_file_t:s0:%s\\\"\"]}]}";
	char a[600], b[600];

	assert_non_null(dev);
	assert_int_equal(fixture_write_podf(e->f, "a.json", fmt, "pa", dev, "c12,c34"), 0);
	assert_int_equal(fixture_start(e->f, NULL), 0);
	fixture_pod_dir(e->f, "pa", "d", a);
	assert_true(fixture_wait_mounted(a, 30000));
	assert_int_equal(fixture_write_podf(e->f, "b.json", fmt, "pb", dev, "c5,c6"), 0);
	assert_true(fixture_wait_log(
		e->f,
		"is mounted for another pod with SELinux label "
		"context=\\\"system_u:object_r:container_file_t:s0:c12,c34\\\", not "
		"context=\\\"system_u:object_r:container_file_t:s0:c5,c6\\\"",
		30000));
	fixture_pod_dir(e->f, "pb", "d", b);
	assert_false(test_is_mountpoint(b));
	assert_true(test_is_mountpoint(a));
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_local_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_block_filesystem, setup, teardown),
		cmocka_unit_test_setup_teardown(test_raw_block, setup, teardown),
		cmocka_unit_test_setup_teardown(test_selinux_label_local_block, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pod_spec_selinux_labels, setup, teardown),
	};

	if (!test_have_root()) {
		fprintf(stderr, "skipped: needs root\n");
		return 77;
	}
	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
