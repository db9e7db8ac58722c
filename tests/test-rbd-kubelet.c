/* test-rbd-kubelet.c - rbd volumes through the CSI node service, driven the way kubelet drives
 * it by tests/kubelet/lifecycle.py (see tests/test-kubelet-driver.c for what the driver
 * does): an image with ext4 (stage attaches, formats and mounts it; two pods bind the stage
 * mount; a kubelet restart reissues stage and publish and nothing is remounted) and an image
 * as a raw block volume (kubelet's bind and loop-device lock on the published device), each
 * from NodeGetInfo to NodeUnstageVolume, with the key in the stage secrets.  The attachment is
 * whatever the node has (rbd-fuse on the build host).  Run by tests/rbd/run.sh against its
 * cluster; root, private mount namespace; the agent is stopped, kubelet's lock loop devices
 * detached and anything the plugin left is cleaned up even on failure, and nothing may be
 * left behind after a passing lifecycle. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "csi-env.h"
#include "kubelet-driver.h"
/* The header's helpers this test does not need (rt_hold) are not an error here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "rbd/rbd-testlib.h"
#pragma GCC diagnostic pop
#include "testlib.h"

struct ctx {
	struct csi_env *e;
	char run_dir[600];
	char image[64];
};

static int image_seq;

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	c->e = csi_env_new("rbdk");
	snprintf(c->run_dir, sizeof(c->run_dir), "%s/rbd", c->e->f->state);
	snprintf(c->image, sizeof(c->image), "kubelet%d-%d", (int)getpid(), image_seq++);
	assert_int_equal(rt_create_image(c->image, 64), 0);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;

	kubelet_driver_detach_locks(c->e->kubelet);
	if (c->e->f->agent.pid > 0)
		fixture_stop(c->e->f, SIGTERM);
	/* What a failed lifecycle left: the plugin's attachment outlives the agent. */
	test_run((const char *const[]){ "sh", "-c",
					"awk -v d=\"$1\"/ 'index($2, d) == 1 {print $2}' "
					"/proc/self/mounts | sort -r | xargs -r -n1 umount -l",
					"sh", c->e->kubelet, NULL });
	test_run((const char *const[]){ "sh", "-c",
					"losetup -nl -O NAME,BACK-FILE | awk -v p=\"$1\"/ "
					"'index($2, p) == 1 {print $1}' | xargs -r -n1 losetup -d",
					"sh", c->run_dir, NULL });
	rt_fuse_kill(c->run_dir, SIGTERM);
	usleep(300 * 1000);
	rt_fuse_kill(c->run_dir, SIGKILL);
	assert_false(test_agent_log_contains(&c->e->f->agent, rt.key));
	csi_env_free(c->e);
	rbd_remove(rt.io, c->image);
	free(c);
	return 0;
}

static void run_lifecycle(struct ctx *c, const char *label, const char *mode_fields)
{
	char pv[2048];

	kubelet_driver_start_agent(c->e);
	snprintf(pv, sizeof(pv),
		 "{\"name\": \"pv-%s\", \"handle\": \"%s\", \"accessModes\": [\"ReadWriteOnce\"], "
		 "%s, \"volumeAttributes\": {\"type\": \"rbd\", \"monitors\": \"%s\", \"pool\": "
		 "\"%s\", \"image\": \"%s\"}, \"nodeStageSecret\": {\"userID\": \"admin\", "
		 "\"userKey\": \"%s\"}}",
		 label, c->image, mode_fields, rt.mon, rt.pool, c->image, rt.key);
	kubelet_driver_run(c->e, label, pv, NULL);
	fixture_stop(c->e->f, SIGTERM);
	rt_assert_nothing_left(c->run_dir);
	assert_true(rt_wait_no_watchers(c->image, 30000));
}

static void test_rbd_filesystem(void **state)
{
	run_lifecycle(*state, "rbd-fs", "\"fsType\": \"ext4\"");
}

static void test_rbd_raw_block(void **state)
{
	run_lifecycle(*state, "rbd-raw", "\"volumeMode\": \"Block\"");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rbd_filesystem, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rbd_raw_block, setup, teardown),
	};

	rt_init();
	test_enter_private_mountns();
	return cmocka_run_group_tests_name("rbd driven as kubelet drives it", tests, NULL, NULL);
}
