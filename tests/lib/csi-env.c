/* csi-env.c - a `volagent run --csi` under test, its socket, the Python CSI client and
 * kubelet's paths, shared by the CSI tests (see csi-env.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "csi-env.h"
#include "macro.h"
#include "testlib.h"

void csi_env_init(struct csi_env *e, struct agent_fixture *f)
{
	e->f = f;
	snprintf(e->kubelet, sizeof(e->kubelet), "%s/kubelet", fixture_short_dir(f));
	snprintf(e->sock, sizeof(e->sock), "%s/plugins/csi.volagent.io/csi.sock", e->kubelet);
	snprintf(e->stubs, sizeof(e->stubs), "%s/stubs", f->dir);
	mkdir(e->kubelet, 0750);
}

struct csi_env *csi_env_new(const char *name)
{
	struct csi_env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	csi_env_init(e, fixture_new(name));
	return e;
}

void csi_env_free(struct csi_env *e)
{
	fixture_free(e->f);
	free(e);
}

int csi_env_teardown(void **state)
{
	csi_env_free(*state);
	return 0;
}

bool csi_socket_exists(void *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

void csi_env_start(struct csi_env *e)
{
	csi_env_start_with(e, NULL);
}

void csi_env_start_with(struct csi_env *e, const char *const extra[])
{
	const char *args[32] = { "--csi", "--kubelet-root-dir", e->kubelet, "--device-inventory",
				 "false" };
	long off = fixture_log_size(e->f);
	size_t n = 5;

	for (size_t i = 0; extra && extra[i]; i++) {
		assert_true(n + 1 < ARRAY_SIZE(args));
		args[n++] = extra[i];
	}
	assert_int_equal(fixture_start(e->f, args), 0);
	assert_true(test_wait_until(csi_socket_exists, e->sock, 10000));
	assert_true(fixture_wait_log_after(e->f, off, "startup reconstruction complete", 10000));
}

char *csi_env_call(struct csi_env *e, const char *calls)
{
	char *out = test_csi_client(e->sock, e->stubs, e->f->dir, calls);

	assert_non_null(out);
	if (getenv("VERBOSE"))
		fprintf(stderr, "%s", out);
	return out;
}

void csi_env_call_ok(struct csi_env *e, const char *calls, int n)
{
	char *out = csi_env_call(e, calls);

	for (int i = 0; i < n; i++)
		assert_line(out, i, "OK {}");
	free(out);
}

void csi_assert_parent_missing(const char *out, int n, const char *parent)
{
	assert_line(out, n, "NOT_FOUND");
	assert_line(out, n, "target_path");
	assert_line(out, n, parent);
}

void csi_env_stop_clean(struct csi_env *e)
{
	assert_int_equal(test_count_mounts_under(e->kubelet), 0);
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
}

const char *csi_line(const char *out, int n)
{
	static char buf[4096];
	const char *p = out;

	for (int i = 0; i < n && p; i++) {
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (!p)
		return "";
	snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(p, "\n"), p);
	return buf;
}

const char *csi_env_target(struct csi_env *e, const char *uid, const char *pv, char *buf)
{
	char parent[700];

	snprintf(parent, sizeof(parent), "%s/pods/%s/volumes/kubernetes.io~csi/%s", e->kubelet, uid,
		 pv);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", parent, NULL }), 0);
	snprintf(buf, 700, "%s/mount", parent);
	return buf;
}

void csi_write_kubelet_record(const char *dir, const char *driver, const char *handle)
{
	char file[800], text[600];

	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", dir, NULL }), 0);
	snprintf(file, sizeof(file), "%s/vol_data.json", dir);
	snprintf(text, sizeof(text),
		 "{\"driverName\": \"%s\", \"volumeHandle\": \"%s\", \"specVolumeID\": \"pv\", "
		 "\"nodeName\": \"node\", \"volumeLifecycleMode\": \"Persistent\"}\n",
		 driver, handle);
	assert_int_equal(test_write_file(file, text), 0);
}

const char *csi_env_staging(struct csi_env *e, const char *vol, char *buf)
{
	snprintf(buf, 700, "%s/plugins/kubernetes.io/csi/csi.volagent.io/%s/globalmount",
		 e->kubelet, vol);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", buf, NULL }), 0);
	return buf;
}

bool csi_env_have_client(void)
{
	return access("/usr/bin/python3", X_OK) == 0 &&
	       test_run((const char *const[]){ "/usr/bin/python3", "-c", "import grpc, grpc_tools",
					       NULL }) == 0;
}
