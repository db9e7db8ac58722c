/* test-grpc-load.c - gRPC core is mapped only when CSI runs (agent/csi/grpc-core.c dlopen()s
 * it): this test binary links no gRPC, so its own maps hold none until gcore_new(); a
 * `volagent run` without CSI never maps libgrpc, one with CSI does and answers Probe through
 * `volagent probe` (which loads it too); loading it turns abseil's mutex deadlock detection
 * off; libcryptsetup is not mapped either until an encrypted volume needs it (lib/luks.c;
 * tests/test-crypt.c sees an agent load it); and the binary's .note.dlopen lists the sonames
 * the image derivation needs.  Root for
 * the agent parts (private mount namespace). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "check-util.h"
#include "grpc-core.h"
#include "macro.h"
#include "testlib.h"

/* The server and its socket's dir, freed by teardown also when an assertion fails. */
struct server {
	char *dir;
	struct gcore *g;
};

static int server_setup(void **state)
{
	struct server *s = calloc(1, sizeof(*s));

	if (!s)
		return -1;
	s->dir = test_mkdtemp("grpc-load");
	*state = s;
	return 0;
}

static int server_teardown(void **state)
{
	struct server *s = *state;

	gcore_free(s->g);
	test_rm_rf(s->dir);
	free(s->dir);
	free(s);
	return 0;
}

/* In this process: nothing before the first gcore_new(), libgrpc after it. */
static void test_loaded_by_gcore_new(void **state)
{
	struct server *s = *state;
	struct error_info err = { 0 };
	char sock[600];

	snprintf(sock, sizeof(sock), "%s/s.sock", s->dir);
	assert_false(test_maps_have(getpid(), "libgrpc"));
	assert_false(gcore_deadlock_detection_off());
	s->g = gcore_new(&(struct gcore_config){ .socket_path = sock,
						 .mode = 0600,
						 .gid = (gid_t)-1 },
			 &err);
	assert_non_null(s->g);
	assert_true(test_maps_have(getpid(), "libgrpc"));
	/* Debian's abseil keeps deadlock detection on (no NDEBUG); the loader turns it off by a
	 * name that is version-specific: a new pairing must be taught the new name. */
	assert_true(gcore_deadlock_detection_off());
	assert_int_equal(gcore_start(s->g, &err), 0);
}

/* The fixture is made and freed (its agent stopped) by setup and teardown, also when an
 * assertion fails. */
static int fixture_setup(void **state)
{
	*state = geteuid() == 0 ? fixture_new("grpcload") : NULL;
	return 0;
}

static int fixture_teardown(void **state)
{
	if (*state)
		fixture_free(*state);
	return 0;
}

static void test_daemon_maps_grpc_only_with_csi(void **state)
{
	struct agent_fixture *f = *state;
	char endpoint[600], kubelet[600], *out = NULL;

	if (!f) {
		print_message("skipped: needs root\n");
		skip();
	}
	snprintf(kubelet, sizeof(kubelet), "%s/kubelet", f->dir);
	snprintf(endpoint, sizeof(endpoint), "unix://%s/csi.sock", fixture_short_dir(f));

	assert_int_equal(fixture_start(f, (const char *const[]){ "--device-inventory", "false",
								 NULL }),
			 0);
	assert_true(fixture_wait_log(f, "startup reconstruction complete", 10000));
	assert_false(test_maps_have(f->agent.pid, "libgrpc"));
	assert_false(test_maps_have(f->agent.pid, "libgpr"));
	assert_false(test_maps_have(f->agent.pid, "librbd"));
	assert_false(test_maps_have(f->agent.pid, "librados"));
	/* Nor libcryptsetup: no encrypted volume here (lib/luks.c loads it at its first call). */
	assert_false(test_maps_have(f->agent.pid, "libcryptsetup"));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);

	assert_int_equal(fixture_start(f, (const char *const[]){ "--csi-endpoint", endpoint,
								 "--kubelet-root-dir", kubelet,
								 "--csi-registration", "false",
								 "--device-inventory", "false",
								 NULL }),
			 0);
	assert_true(fixture_wait_log(f, "CSI server listening", 10000));
	assert_true(test_maps_have(f->agent.pid, "libgrpc"));
	assert_false(test_maps_have(f->agent.pid, "libcryptsetup"));
	assert_int_equal(
		test_volagent((const char *[]){ "probe", "--csi-endpoint", endpoint, NULL }, &out),
		0);
	assert_string_equal(out, "ready\n");
	free(out);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* The dlopen()ed sonames are in the binary's .note.dlopen, where scripts/build-image finds
 * them: the image derivation lists their packages. */
static void test_image_derivation_finds_dlopened(void **state)
{
	char cmd[1200], *out = NULL;
	const char *argv[] = { "sh", "-c", cmd, NULL };

	snprintf(cmd, sizeof(cmd),
		 "command -v dpkg-query >/dev/null || { echo skip; exit 0; }; "
		 "scripts/build-image --list-packages --no-tools %s",
		 test_volagent_bin());
	assert_int_equal(test_run_capture(argv, &out), 0);
	print_message("%s", out);
	if (!startswith(out, "skip")) {
		assert_non_null(strstr(out, "libgrpc"));
		assert_non_null(strstr(out, "librbd1\n"));
		assert_non_null(strstr(out, "librados2\n"));
		assert_non_null(strstr(out, "libcryptsetup12\n"));
	}
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_loaded_by_gcore_new, server_setup,
						server_teardown),
		cmocka_unit_test_setup_teardown(test_daemon_maps_grpc_only_with_csi, fixture_setup,
						fixture_teardown),
		cmocka_unit_test(test_image_derivation_finds_dlopened),
	};

	if (geteuid() == 0)
		test_enter_private_mountns();
	return cmocka_run_group_tests_name("grpc load", tests, NULL, NULL);
}
