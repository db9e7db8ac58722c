/* test-rbd-crypt.c - an encrypted rbd volume on this host (rbd-fuse and a loop device; the
 * kernel has no rbd and no device-mapper) up to the open: the blank image is formatted LUKS2
 * through its attached device (the image's first bytes read back through librbd carry the
 * LUKS2 magic), the open fails with the error naming the missing kernel support, and the
 * attachment is released (no watcher, no rbd-fuse, no loop device left); a volume on that
 * image without encryption is refused, not handed out as ciphertext.  The passphrase never
 * reaches the log.  Run by tests/rbd/run.sh; root, private mount namespace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "luks.h"
/* A header of static helpers; this test uses a few of them. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "rbd/rbd-testlib.h"
#include "testlib.h"

#define WAIT_MS 60000
#define CANARY_PASS "canaryRbdPass-91d3"

struct ctx {
	struct agent_fixture *f;
	char run_dir[600], keyfile[600], passfile[600], image[64];
};

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	c->f = fixture_new("rbdcrypt");
	snprintf(c->run_dir, sizeof(c->run_dir), "%s/rbd", c->f->state);
	snprintf(c->keyfile, sizeof(c->keyfile), "%s/admin.key", c->f->dir);
	snprintf(c->passfile, sizeof(c->passfile), "%s/pass", c->f->dir);
	test_write_file(c->keyfile, rt.key);
	chmod(c->keyfile, 0600);
	test_write_file(c->passfile, CANARY_PASS);
	chmod(c->passfile, 0600);
	snprintf(c->image, sizeof(c->image), "crypt%d", (int)getpid());
	assert_int_equal(rt_create_image(c->image, 64), 0);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;

	if (c->f->agent.pid > 0)
		fixture_stop(c->f, SIGTERM);
	rt_fuse_kill(c->run_dir, SIGKILL);
	assert_false(test_agent_log_contains(&c->f->agent, CANARY_PASS));
	assert_false(test_agent_log_contains(&c->f->agent, rt.key));
	fixture_free(c->f);
	free(c);
	return 0;
}

static void write_pod(struct ctx *c, const char *uid, bool encrypted)
{
	char spec[2048], name[128], enc[700] = "";

	if (encrypted)
		snprintf(enc, sizeof(enc), ", \"encryption\": {\"passphraseFile\": \"%s\"}",
			 c->passfile);
	snprintf(spec, sizeof(spec),
		 "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": \"data\", \"rbd\": "
		 "{\"monitors\": [\"%s\"], \"pool\": \"%s\", \"image\": \"%s\", "
		 "\"user\": \"admin\", \"secretFile\": \"%s\"}%s}]}",
		 uid, rt.mon, rt.pool, c->image, c->keyfile, enc);
	snprintf(name, sizeof(name), "%s.json", uid);
	assert_int_equal(fixture_write_pod(c->f, name, spec), 0);
}

/* Whether the image begins with the LUKS magic, read through librbd. */
static bool image_is_luks(const char *image)
{
	rbd_image_t img;
	char head[6] = { 0 };
	bool luks;

	assert_int_equal(rbd_open(rt.io, image, &img, NULL), 0);
	luks = rbd_read(img, 0, sizeof(head), head) == sizeof(head) &&
	       memcmp(head, "LUKS\xba\xbe", 6) == 0;
	rbd_close(img);
	return luks;
}

static void test_encrypted_image_up_to_the_open(void **state)
{
	struct ctx *c = *state;
	const char *extra[] = { "--rbd-timeout", "20s",		"--rbd-attach-methods",
				"fuse",		 "--log-level", "debug",
				"--backoff-max", "2s",		NULL };
	char msg[300];
	long off;

	if (luks_dm_available())
		skip(); /* written for a kernel without device-mapper */
	write_pod(c, "pod-e", true);
	assert_int_equal(fixture_start(c->f, extra), 0);
	snprintf(msg, sizeof(msg), "volume rbd:%s/%s: cannot open the LUKS device", rt.pool,
		 c->image);
	assert_true(fixture_wait_log(c->f, msg, WAIT_MS));
	assert_true(fixture_wait_log(c->f, "this kernel has no device-mapper", WAIT_MS));
	assert_true(image_is_luks(c->image));
	/* The failed stage released the attachment. */
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	assert_int_equal(fixture_remove_pod(c->f, "pod-e.json"), 0);

	/* The same image without encryption: refused, never handed out. */
	off = fixture_log_size(c->f);
	write_pod(c, "pod-p", false);
	assert_true(fixture_wait_log_after(c->f, off,
					   "carries a LUKS header but the volume does not ask for "
					   "encryption; refusing to hand out ciphertext",
					   WAIT_MS));
	assert_int_equal(fixture_remove_pod(c->f, "pod-p.json"), 0);
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	assert_int_equal(fixture_stop(c->f, SIGTERM), 0);
	usleep(300 * 1000);
	rt_assert_nothing_left(c->run_dir);
	assert_true(image_is_luks(c->image));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_encrypted_image_up_to_the_open, setup,
						teardown),
	};

	rt_init();
	test_enter_private_mountns();
	return cmocka_run_group_tests_name("encrypted rbd volumes on this host", tests, NULL, NULL);
}
