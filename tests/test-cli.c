/* test-cli.c - the volagent binary's command line: version, help, and exit code 2 with a clear
 * message for unknown commands and flags, bad values and unusable dirs; exit 1 for a second
 * instance on the same state dir, which must not disturb the first. */
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
#include "testlib.h"

static void expect(const char *const args[], int code, const char *text)
{
	char *out = NULL, *err = NULL;
	int r = test_volagent2(args, &out, &err);

	if (r != code || (text && !strstr(out, text) && !strstr(err, text)))
		fail_msg(
			"volagent %s: exit %d (want %d), stdout \"%s\", stderr \"%s\" (want \"%s\")",
			args[0], r, code, out, err, text ? text : "");
	free(out);
	free(err);
}

static void test_version_and_help(void **state)
{
	expect((const char *[]){ "version", NULL }, 0, "volagent " VOLAGENT_VERSION);
	expect((const char *[]){ "--version", NULL }, 0, "volagent " VOLAGENT_VERSION);
	expect((const char *[]){ "--help", NULL }, 0, "Commands:");
	expect((const char *[]){ "run", "--help", NULL }, 0, "--pods-dir");
	expect((const char *[]){ NULL }, 2, "Usage");
	expect((const char *[]){ "frobnicate", NULL }, 2, "unknown command 'frobnicate'");
}

static void test_bad_flags_exit_2(void **state)
{
	expect((const char *[]){ "run", "--root", "/x", NULL }, 2, "'--root'");
	expect((const char *[]){ "run", "--workers", "-3", NULL }, 2, "--workers: \"-3\"");
	expect((const char *[]){ "run", "--log-level", "chatty", NULL }, 2, "--log-level");
	expect((const char *[]){ "run", "--state-dir", "state", NULL }, 2,
	       "--state-dir: must be an absolute path");
	expect((const char *[]){ "run", "--config", "/nonexistent.json", NULL }, 2,
	       "/nonexistent.json");
}

FIXTURE_SETUP_TEARDOWN("cli")

static void test_unusable_dirs_exit_2(void **state)
{
	struct agent_fixture *f = *state;
	char file[600];

	snprintf(file, sizeof(file), "%s/not-a-dir", f->dir);
	test_write_file(file, "x");
	expect((const char *[]){ "run", "--config", f->config, "--root-dir", f->root, "--state-dir",
				 f->state, "--pods-dir", file, NULL },
	       2, "--pods-dir");
	expect((const char *[]){ "run", "--config", f->config, "--root-dir", file, "--state-dir",
				 f->state, "--pods-dir", f->pods, NULL },
	       2, "not a directory");
}

static void test_second_instance_refused(void **state)
{
	struct agent_fixture *f = *state;

	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_log(f, "startup reconstruction complete", 10000));
	expect((const char *[]){ "run", "--config", f->config, "--root-dir", f->root, "--state-dir",
				 f->state, "--pods-dir", f->pods, NULL },
	       1, "another volagent");
	/* The first one is still there and still works. */
	assert_int_equal(kill(f->agent.pid, 0), 0);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* Refused while parsing the flags.  The dirs are /dev/null so that an agent which let it
 * pass would stop at once on them (exit 2 with another message) instead of running. */
static void test_csi_false_with_endpoint_exits_2(void **state)
{
	expect((const char *[]){ "run", "--root-dir", "/dev/null", "--state-dir", "/dev/null",
				 "--pods-dir", "/dev/null", "--csi=false", "--csi-endpoint",
				 "unix:///x/csi.sock", NULL },
	       2, "csi: false, but --csi-endpoint unix:///x/csi.sock sets the CSI endpoint");
}

/* `volagent status` finds the agent as `run` places its socket: --state-dir, the config file,
 * or --socket; the same flag names as `run`. */
static void test_status_finds_the_agent(void **state)
{
	struct agent_fixture *f = *state;
	char sock[600], conf[600], json[1024];

	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_log(f, "startup reconstruction complete", 10000));
	snprintf(sock, sizeof(sock), "%s/admin.sock", f->state);
	expect((const char *[]){ "status", "--state-dir", f->state, NULL }, 0, "pod volumes:");
	expect((const char *[]){ "status", "--socket", sock, NULL }, 0, "pod volumes:");
	snprintf(conf, sizeof(conf), "%s/status.json", f->dir);
	snprintf(json, sizeof(json), "{\"state-dir\": \"%s\"}", f->state);
	assert_int_equal(test_write_file(conf, json), 0);
	expect((const char *[]){ "status", "--json", "--config", conf, NULL }, 0, "\"journal\"");
	expect((const char *[]){ "status", "--state-dir", f->dir, NULL }, 1, "no agent answers");
	expect((const char *[]){ "status", "--state-dir", f->state, "--socket", sock, NULL }, 2,
	       "give one of them");
	expect((const char *[]){ "status", "--state-dir", "relative", NULL }, 2,
	       "--state-dir: must be an absolute path");
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_and_help),
		cmocka_unit_test(test_bad_flags_exit_2),
		cmocka_unit_test_setup_teardown(test_unusable_dirs_exit_2, setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_instance_refused, setup, teardown),
		cmocka_unit_test(test_csi_false_with_endpoint_exits_2),
		cmocka_unit_test_setup_teardown(test_status_finds_the_agent, setup, teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
