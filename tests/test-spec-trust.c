/* test-spec-trust.c - who may declare a volume on a bare host: the agent reads a pod spec
 * file only when nobody but root could have written it or put it in the pods dir.  Real files
 * owned by another uid, group-writable, reached through a symlink to a user's file or through
 * a user's symlink, and a world-writable pods dir: each refused with its reason (log, once,
 * and `volagent status`), nothing of it mounted, while a root-owned file beside them mounts.
 * Runs as root in a private mount namespace; the fixture removes every mount and file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "testlib.h"

#define WAIT_MS 10000
#define USER_UID 1000

static int setup(void **state)
{
	*state = fixture_new("trust");
	return 0;
}

static int teardown(void **state)
{
	fixture_free(*state);
	return 0;
}

/* The spec of pod uid with one local volume "v" of src. */
static void local_spec(char *buf, size_t size, const char *uid, const char *src)
{
	snprintf(buf, size,
		 "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": \"v\", \"local\": "
		 "{\"path\": \"%s\"}}]}",
		 uid, src);
}

/* Writes path with owner uid and mode, then renames it to dst (the agent sees it whole). */
static void write_as(const char *path, const char *dst, const char *content, uid_t uid, mode_t mode)
{
	assert_int_equal(test_write_file(path, content), 0);
	assert_int_equal(chown(path, uid, uid), 0);
	assert_int_equal(chmod(path, mode), 0);
	if (dst)
		assert_int_equal(rename(path, dst), 0);
}

/* Writes pods/<uid>.json owned by owner, with mode. */
static void write_pod_as(struct agent_fixture *f, const char *uid, const char *src, uid_t owner,
			 mode_t mode)
{
	char spec[1024], tmp[700], dst[700];

	local_spec(spec, sizeof(spec), uid, src);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", f->pods, uid);
	snprintf(dst, sizeof(dst), "%s/%s.json", f->pods, uid);
	write_as(tmp, dst, spec, owner, mode);
}

/* The reason `volagent status` gives for refused file name, or NULL. */
static const char *status_refusal(json_t *st, const char *name)
{
	json_t *e;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(st, "spec_files"), "refused"), i,
			   e) if (strcmp(json_string_value(json_object_get(e, "file")), name) ==
				  0) return json_string_value(json_object_get(e, "reason"));
	return NULL;
}

static void assert_refused(json_t *st, const char *name, const char *reason)
{
	const char *got = status_refusal(st, name);

	if (!got || !strstr(got, reason))
		fail_msg("%s: refusal \"%s\", wanted \"%s\"", name, got ? got : "(none)", reason);
}

static void test_files_only_root_could_write(void **state)
{
	struct agent_fixture *f = *state;
	const char *src = fixture_make_source(f, "src", "s");
	char d[512], userdir[600], userfile[700], spec[1024], link[700], tmp[700];
	json_t *st;

	write_pod_as(f, "good", src, 0, 0644);
	write_pod_as(f, "other-user", src, USER_UID, 0644);
	write_pod_as(f, "group-writable", src, 0, 0664);
	/* A root-owned symlink to a file in a user's directory, owned by the user. */
	snprintf(userdir, sizeof(userdir), "%s/home-user", f->dir);
	assert_int_equal(mkdir(userdir, 0755), 0);
	assert_int_equal(chown(userdir, USER_UID, USER_UID), 0);
	snprintf(userfile, sizeof(userfile), "%s/spec.json", userdir);
	local_spec(spec, sizeof(spec), "via-link", src);
	write_as(userfile, NULL, spec, USER_UID, 0644);
	snprintf(link, sizeof(link), "%s/via-link.json", f->pods);
	assert_int_equal(symlink(userfile, link), 0);

	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_mounted(fixture_pod_dir(f, "good", "v", d), WAIT_MS));
	assert_true(fixture_wait_log_line(f, "other-user.json", "owned by uid 1000, not root",
					  WAIT_MS));
	assert_true(fixture_wait_log_line(f, "group-writable.json",
					  "writable by group or others (mode 0664)", WAIT_MS));
	assert_true(
		fixture_wait_log_line(f, "via-link.json", "owned by uid 1000, not root", WAIT_MS));

	/* A symlink the user owns, to a root-owned file, read through the events this time. */
	snprintf(tmp, sizeof(tmp), "%s/good.json", f->pods);
	snprintf(link, sizeof(link), "%s/.users-link.tmp", f->pods);
	assert_int_equal(symlink(tmp, link), 0);
	assert_int_equal(lchown(link, USER_UID, USER_UID), 0);
	snprintf(tmp, sizeof(tmp), "%s/users-link.json", f->pods);
	assert_int_equal(rename(link, tmp), 0);
	assert_true(fixture_wait_log_line(f, "users-link.json",
					  "a symlink owned by uid 1000, not root", WAIT_MS));
	/* The user's file written again (closed after writing): read again, refused again, but
	 * not logged again.  The events are handled in order, so once the file after it is
	 * logged, this one was read. */
	snprintf(tmp, sizeof(tmp), "%s/other-user.json", f->pods);
	{
		int fd = open(tmp, O_WRONLY | O_APPEND | O_CLOEXEC);
		assert_true(fd >= 0);
		close(fd);
	}
	/* And a user's file renamed in later. */
	write_pod_as(f, "late-user", src, USER_UID, 0600);
	assert_true(fixture_wait_log_line(f, "late-user.json", "owned by uid 1000", WAIT_MS));

	/* Nothing of them is mounted; each is in status with its reason. */
	assert_int_equal(test_count_mounts_under(f->root), 1);
	st = fixture_status(f);
	assert_non_null(st);
	assert_true(json_is_null(json_object_get(json_object_get(st, "spec_files"), "dir_unsafe")));
	assert_refused(st, "other-user.json", "file: owned by uid 1000, not root");
	assert_refused(st, "group-writable.json", "file: writable by group or others");
	assert_refused(st, "via-link.json", "symlink target");
	assert_refused(st, "users-link.json", "a symlink owned by uid 1000");
	assert_refused(st, "late-user.json", "owned by uid 1000");
	assert_null(status_refusal(st, "good.json"));
	json_decref(st);
	/* Logged once each, however often the agent reads them. */
	assert_int_equal(fixture_log_count(f, "other-user.json"), 1);
	assert_int_equal(fixture_log_count(f, "users-link.json"), 1);

	/* Made root's and private, the file is read. */
	write_pod_as(f, "other-user", src, 0, 0600);
	assert_true(fixture_wait_mounted(fixture_pod_dir(f, "other-user", "v", d), WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_world_writable_pods_dir(void **state)
{
	struct agent_fixture *f = *state;
	const char *src = fixture_make_source(f, "src", "s");
	char d[512];
	json_t *st;

	assert_int_equal(chmod(f->pods, 0777), 0);
	write_pod_as(f, "good", src, 0, 0644);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_log_line(f, "pods dir is not safe", "(mode 0777)", WAIT_MS));
	assert_true(fixture_wait_log_line(f, "good.json", "writable by group or others", WAIT_MS));
	assert_true(fixture_wait_count(f, "desired_pod_volumes", 0, WAIT_MS));
	st = fixture_status(f);
	assert_non_null(st);
	assert_true(
		json_is_string(json_object_get(json_object_get(st, "spec_files"), "dir_unsafe")));
	assert_refused(st, "good.json", "pods dir: ");
	json_decref(st);
	assert_int_equal(test_count_mounts_under(f->root), 0);

	/* Made safe, the next file written is read. */
	assert_int_equal(chmod(f->pods, 0755), 0);
	write_pod_as(f, "good", src, 0, 0644);
	assert_true(fixture_wait_mounted(fixture_pod_dir(f, "good", "v", d), WAIT_MS));
	assert_true(fixture_wait_log(f, "pods dir is safe again", WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* The test-only flag: the same files are read. */
static void test_insecure_flag(void **state)
{
	struct agent_fixture *f = *state;
	const char *src = fixture_make_source(f, "src", "s");
	char d[512];

	assert_int_equal(chmod(f->pods, 0777), 0);
	write_pod_as(f, "other-user", src, USER_UID, 0666);
	assert_int_equal(fixture_start(f, (const char *const[]){ "--insecure-pods-dir", NULL }), 0);
	assert_true(fixture_wait_mounted(fixture_pod_dir(f, "other-user", "v", d), WAIT_MS));
	assert_true(fixture_wait_log(f, "for tests only", WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_files_only_root_could_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_world_writable_pods_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_insecure_flag, setup, teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
