/* test-agent-status.c - what operators get from a running agent: `volagent status` (human and
 * JSON) over the admin socket, refused to a non-root user unless the socket's group allows
 * it, and the Prometheus metrics (unix socket by default, or a loopback TCP port), read with
 * curl, a real HTTP client. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "fixture-case.h"
#include "testlib.h"

FIXTURE_SETUP_TEARDOWN("status")

static void write_pods(struct agent_fixture *f)
{
	char src[600];

	snprintf(src, sizeof(src), "%s/src", f->dir);
	mkdir(src, 0755);
	assert_int_equal(
		fixture_write_podf(f, "s.json",
				   "{\"pod\": {\"uid\": \"pod-s\"}, \"volumes\": ["
				   "{\"name\": \"good\", \"local\": {\"path\": \"%s\"}},"
				   "{\"name\": \"bad\", \"local\": {\"path\": \"%s/missing\"}}]}",
				   src, f->dir),
		0);
}

/* Runs `volagent status ARGS` as uid/gid (0: as root); returns the exit code. */
static int status_as(uid_t uid, gid_t gid, const char *const args[], char **ret_out, char **ret_err)
{
	char out_path[] = "/tmp/va-status-out-XXXXXX", err_path[] = "/tmp/va-status-err-XXXXXX";
	int out = mkstemp(out_path), err = mkstemp(err_path), status;
	pid_t pid = fork();

	if (pid == 0) {
		const char *argv[16] = { test_volagent_bin(), "status" };
		size_t n = 2;
		dup2(out, 1);
		dup2(err, 2);
		if (uid && (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0))
			_exit(126);
		for (; *args && n < 15; args++)
			argv[n++] = *args;
		argv[n] = NULL;
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	close(out);
	close(err);
	*ret_out = test_read_file(out_path);
	*ret_err = test_read_file(err_path);
	unlink(out_path);
	unlink(err_path);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_status_shows_volumes_errors_and_journal(void **state)
{
	struct agent_fixture *f = *state;
	char sock[700], *out, *err;
	json_error_t jerr;
	json_t *root, *vols, *v, *pod;
	size_t i, k;
	bool saw_good = false, saw_bad = false;

	write_pods(f);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_count(f, "failing", 1, 10000));
	assert_true(fixture_wait_count(f, "mounted", 1, 10000));
	snprintf(sock, sizeof(sock), "%s/admin.sock", f->state);

	assert_int_equal(status_as(0, 0, (const char *[]){ "--socket", sock, NULL }, &out, &err),
			 0);
	assert_non_null(strstr(out, "volagent " VOLAGENT_VERSION));
	assert_non_null(strstr(out, "2 desired, 1 mounted, 1 failing"));
	assert_non_null(strstr(out, "healthy"));
	assert_non_null(strstr(out, "No such file or directory"));
	free(out);
	free(err);

	assert_int_equal(status_as(0, 0, (const char *[]){ "--json", "--socket", sock, NULL }, &out,
				   &err),
			 0);
	root = json_loads(out, 0, &jerr);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(root, "version")), VOLAGENT_VERSION);
	assert_true(json_is_true(json_object_get(root, "ready")));
	assert_true(json_is_true(json_object_get(json_object_get(root, "journal"), "healthy")));
	vols = json_object_get(root, "volumes");
	json_array_foreach(vols, i, v)
	{
		json_array_foreach(json_object_get(v, "pods"), k, pod)
		{
			const char *name = json_string_value(json_object_get(pod, "name"));
			const char *st = json_string_value(json_object_get(pod, "state"));
			json_t *bo = json_object_get(pod, "backoff");
			if (!strcmp(name, "good")) {
				saw_good = true;
				assert_string_equal(st, "mounted");
				assert_true(json_is_null(bo));
			} else {
				saw_bad = true;
				assert_string_equal(st, "not mounted");
				assert_true(json_integer_value(json_object_get(bo, "failures")) >=
					    1);
				assert_non_null(
					strstr(json_string_value(json_object_get(bo, "last_error")),
					       "missing"));
				assert_non_null(
					json_string_value(json_object_get(bo, "last_error_at")));
			}
		}
	}
	assert_true(saw_good && saw_bad);
	json_decref(root);
	free(out);
	free(err);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_non_root_refused_unless_group_allows(void **state)
{
	struct agent_fixture *f = *state;
	char sock[700], *out, *err;
	const char *dir = fixture_short_dir(f);

	/* A socket in a dir "nobody" may traverse, so that the socket's own mode (0600) or
	 * group (0660) is what decides, not the dirs above it. */
	assert_int_equal(chmod(dir, 0755), 0);
	snprintf(sock, sizeof(sock), "%s/admin.sock", dir);
	assert_int_equal(fixture_start(f, (const char *const[]){ "--admin-socket", sock, NULL }),
			 0);
	assert_true(fixture_wait_ready(f, sock, 10000));
	assert_int_equal(status_as(65534, 65534, (const char *[]){ "--socket", sock, NULL }, &out,
				   &err),
			 1);
	assert_non_null(strstr(err, "permission denied"));
	free(out);
	free(err);
	/* Root still may. */
	assert_int_equal(status_as(0, 0, (const char *[]){ "--socket", sock, NULL }, &out, &err),
			 0);
	free(out);
	free(err);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);

	/* With --admin-socket-group the group's members may ask. */
	assert_int_equal(fixture_start(f, (const char *const[]){ "--admin-socket", sock,
								 "--admin-socket-group", "65534",
								 NULL }),
			 0);
	assert_true(fixture_wait_ready(f, sock, 10000));
	assert_int_equal(status_as(65534, 65534, (const char *[]){ "--socket", sock, NULL }, &out,
				   &err),
			 0);
	assert_non_null(strstr(out, "ready"));
	free(out);
	free(err);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_metrics_unix_and_loopback(void **state)
{
	struct agent_fixture *f = *state;
	char sock[700], addr[64], url[96], *out = NULL;

	write_pods(f);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_count(f, "failing", 1, 10000));
	assert_true(fixture_wait_count(f, "mounted", 1, 10000));
	snprintf(sock, sizeof(sock), "%s/metrics.sock", f->state);
	assert_int_equal(test_run_capture((const char *const[]){ "curl", "-sf", "--unix-socket",
								 sock, "http://agent/metrics",
								 NULL },
					  &out),
			 0);
	assert_non_null(strstr(out, "# TYPE volagent_operations_started_total counter"));
	assert_non_null(strstr(out, "volagent_operations_succeeded_total{plugin=\"local\","
				    "operation=\"set_up\"} 1"));
	assert_non_null(strstr(out, "volagent_operations_failed_total{plugin=\"local\","
				    "operation=\"set_up\"}"));
	assert_non_null(strstr(out, "volagent_operation_duration_seconds_bucket{plugin=\"local\","
				    "operation=\"set_up\",le=\"+Inf\"}"));
	assert_non_null(strstr(out, "volagent_volumes_desired 2"));
	assert_non_null(strstr(out, "volagent_volumes_mounted 1"));
	assert_non_null(strstr(out, "volagent_volumes_in_backoff 1"));
	assert_non_null(strstr(out, "volagent_reconcile_passes_total"));
	free(out);
	out = NULL;
	/* Anything but /metrics is 404. */
	assert_int_not_equal(test_run((const char *const[]){ "curl", "-sf", "--unix-socket", sock,
							     "http://agent/other", NULL }),
			     0);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);

	/* A loopback port instead; a non-loopback address is refused at start. */
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", 20000 + (getpid() % 20000));
	assert_int_equal(fixture_start(f, (const char *const[]){ "--metrics-address", addr, NULL }),
			 0);
	snprintf(url, sizeof(url), "http://%s/metrics", addr);
	for (int i = 0; i < 100; i++) { /* until the restarted agent listens */
		free(out);
		out = NULL;
		if (test_run_capture((const char *const[]){ "curl", "-sf", url, NULL }, &out) == 0)
			break;
		usleep(50 * 1000);
	}
	assert_non_null(strstr(out, "volagent_reconcile_passes_total"));
	free(out);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	{
		int status;
		assert_int_equal(fixture_start(f, (const char *const[]){ "--metrics-address",
									 "0.0.0.0:9100", NULL }),
				 0);
		assert_int_equal(waitpid(f->agent.pid, &status, 0), f->agent.pid);
		f->agent.pid = 0;
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
		assert_true(fixture_wait_log(f, "is not unix:/path or a loopback host:port", 1000));
	}

	/* "off": no endpoint at all, the agent runs as usual. */
	{
		long off = fixture_log_size(f);

		unlink(sock);
		assert_int_equal(fixture_start(f, (const char *const[]){ "--metrics-address", "off",
									 NULL }),
				 0);
		assert_true(fixture_wait_ready(f, NULL, 10000));
		assert_int_equal(access(sock, F_OK), -1);
		assert_false(fixture_wait_log_after(f, off, "msg=\"metrics served\"", 10));
		assert_int_equal(fixture_stop(f, SIGTERM), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		FIXTURE_CASE(test_status_shows_volumes_errors_and_journal),
		FIXTURE_CASE(test_non_root_refused_unless_group_allows),
		FIXTURE_CASE(test_metrics_unix_and_loopback),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
