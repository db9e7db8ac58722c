/* test-rbd-helper-dump.c - a crash of `volagent rbd-helper` (the one process that holds the
 * Ceph key in memory) leaves no core dump with the key in it: the helper makes itself
 * non-dumpable.  The crash is forced (VOLAGENT_RBD_HELPER_FAULT=abort, after the request with
 * the key was read): a crash inside librados cannot be produced on demand, and the switch
 * exists only in the test build (build/volagent-test); the production agent neither has nor
 * honours it (test_production_has_no_fault_switch).  Needs no cluster; the core dump case is
 * skipped when the kernel's core_pattern does not write a plain file in the cwd (a pipe to
 * systemd-coredump, a path elsewhere), which the test leaves as it is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check-util.h"
#include "testlib.h"

#define KEY "AQBvolagentDumpCanaryKey0123456789abcdef=="

/* Runs `BIN rbd-helper check` in dir with the forced abort asked for and a request with KEY
 * on stdin; returns its wait status. */
static int run_helper_with_fault(const char *bin_path, const char *dir)
{
	char *bin = realpath(bin_path, NULL), req[600]; /* the child changes its cwd */
	int status;
	pid_t pid;

	assert_non_null(bin);
	snprintf(req, sizeof(req), "%s/request.json", dir);
	assert_int_equal(test_write_file(req, "{\"monitors\": \"192.0.2.1:6789\", \"user\": "
					      "\"admin\", \"key\": \"" KEY "\", "
					      "\"timeout_ms\": 1000}"),
			 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
		int in = open(req, O_RDONLY | O_CLOEXEC);

		if (in < 0 || dup2(in, 0) < 0 || chdir(dir) < 0 ||
		    setrlimit(RLIMIT_CORE, &unlimited) < 0 ||
		    setenv("VOLAGENT_RBD_HELPER_FAULT", "abort", 1) < 0)
			_exit(120);
		execl(bin, "volagent", "rbd-helper", "check", (char *)NULL);
		_exit(121);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	free(bin);
	return status;
}

static void test_crash_leaves_no_key(void **state)
{
	char *dir = test_mkdtemp("rbd-dump");
	int status, files;

	if (!test_core_pattern_is_plain())
		skip(); /* core_pattern is not a plain file name */
	status = run_helper_with_fault(test_volagent_test_bin(), dir);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	assert_int_equal(test_core_files_count(dir, KEY, &files), 0);
	assert_int_equal(files, 0); /* non-dumpable: no core at all */
	test_rm_rf(dir);
	free(dir);
}

/* The production agent has no forced failure: the switch's name is nowhere in its binary,
 * and with the switch set `rbd-helper` runs as always (here: no monitor answers at the
 * documentation address, exit 1 with a JSON error, or 3 without the Ceph libraries). */
static void test_production_has_no_fault_switch(void **state)
{
	char *dir = test_mkdtemp("rbd-nofault"), *bin;
	int fd = open(test_volagent_bin(), O_RDONLY | O_CLOEXEC), status;
	struct stat st;
	size_t got = 0;
	ssize_t n = 1;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	bin = malloc(st.st_size);
	assert_non_null(bin);
	while (got < (size_t)st.st_size && (n = read(fd, bin + got, st.st_size - got)) > 0)
		got += n;
	close(fd);
	assert_int_equal(got, st.st_size);
	assert_null(memmem(bin, got, "VOLAGENT_RBD_HELPER_FAULT", 25));
	free(bin);
	status = run_helper_with_fault(test_volagent_bin(), dir);
	print_message("production rbd-helper with the switch set: %s %d\n",
		      WIFSIGNALED(status) ? "signal" : "exit",
		      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	assert_true(WIFEXITED(status));
	assert_true(WEXITSTATUS(status) == 1 || WEXITSTATUS(status) == 3);
	test_rm_rf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crash_leaves_no_key),
		cmocka_unit_test(test_production_has_no_fault_switch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
