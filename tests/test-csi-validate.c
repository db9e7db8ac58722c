/* test-csi-validate.c - golden tests of the CSI request checks (csi-validate.c), through
 * csi_request_check(), which is exactly what the server runs before a request is queued.
 *
 * Each tests/files/csi-requests/<name>.txt is a request in protobuf text format, after a
 * header of comment lines: "# method: NodePublishVolume" (required), "# stage: no" (the
 * driver has no STAGE_UNSTAGE_VOLUME; default yes), "# kubelet-root: /" (default
 * /var/lib/kubelet).  It is encoded with `protoc --encode` from proto/csi.proto, checked, and
 * the answer - "OK" or "<CODE>: <message>" - must equal tests/expected/csi-requests/<name>.
 * VOLAGENT_UPDATE_GOLDEN=1 rewrites the expected files (review the diff before committing).
 *
 * A second test checks the one errno -> code map (csi-status.c) that the server and the Node
 * backend share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "csi-server.h"
#include "csi-status.h"
#include "grpc-core.h"
#include "macro.h"
#include "testlib.h"

#define FILES "tests/files/csi-requests"
#define EXPECTED "tests/expected/csi-requests"

/* The value of header line "# key: value" in text, or NULL (static buffer). */
static const char *header(const char *text, const char *key)
{
	static char buf[256];
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "# %s: ", key);
	for (p = text; p && *p == '#'; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (startswith(p, pat)) {
			p += strlen(pat);
			snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(p, "\n"), p);
			return buf;
		}
	return NULL;
}

/* Encodes the text-format request in path as csi.v1.<method>Request; returns the bytes
 * (caller frees) and their length. */
static uint8_t *encode(const char *path, const char *method, size_t *ret_len)
{
	char type[128], out[] = "/tmp/csi-validate-XXXXXX";
	int in_fd = open(path, O_RDONLY | O_CLOEXEC), out_fd = mkstemp(out), status;
	uint8_t *buf = malloc(1 << 16);
	ssize_t n;
	pid_t pid;

	assert_true(in_fd >= 0 && out_fd >= 0 && buf);
	snprintf(type, sizeof(type), "--encode=csi.v1.%sRequest", method);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in_fd, 0);
		dup2(out_fd, 1);
		execlp("protoc", "protoc", type, "-Iproto", "-I/usr/include", "proto/csi.proto",
		       (char *)NULL);
		_exit(127);
	}
	close(in_fd);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("protoc --encode of %s failed (status %d)", path, status);
	n = pread(out_fd, buf, 1 << 16, 0);
	assert_true(n >= 0);
	close(out_fd);
	unlink(out);
	*ret_len = (size_t)n;
	return buf;
}

static void check_one(const char *name)
{
	char path[512], exp[512], method[128], actual[2048];
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ uint8_t *data = NULL;
	const char *m, *stage, *root;
	struct csi_check_config cfg = { 0 };
	struct csi_reply reply;
	size_t len;
	int r;

	snprintf(path, sizeof(path), "%s/%s", FILES, name);
	snprintf(exp, sizeof(exp), "%s/%.*s", EXPECTED, (int)(strlen(name) - strlen(".txt")), name);
	text = test_read_file(path);
	assert_non_null(text);
	m = header(text, "method");
	if (!m)
		fail_msg("%s: no \"# method: ...\" line", path);
	snprintf(method, sizeof(method), "%s", m);
	stage = header(text, "stage");
	cfg.has_stage = !stage || !streq(stage, "no");
	root = header(text, "kubelet-root");
	cfg.kubelet_root = root ? strdupa(root) : "/var/lib/kubelet";
	data = encode(path, method, &len);
	{
		char full[192];

		snprintf(full, sizeof(full), "/csi.v1.%s/%s",
			 startswith(method, "Node") ? "Node" : "Identity", method);
		r = csi_request_check(&cfg, full, data, len, &reply);
	}
	assert_true(r == 0 || r == -EINVAL);
	if (r == 0) {
		assert_int_equal(reply.code, CSI_OK);
		snprintf(actual, sizeof(actual), "OK\n");
	} else {
		assert_int_not_equal(reply.code, CSI_OK);
		snprintf(actual, sizeof(actual), "%s: %s\n", gcore_status_name((int)reply.code),
			 reply.message);
	}
	assert_true(test_golden_matches(exp, actual));
}

static void test_golden_requests(void **state)
{
	struct dirent **list;
	int n = scandir(FILES, &list, NULL, alphasort), count = 0;

	assert_true(n > 0);
	for (int i = 0; i < n; i++) {
		if (endswith(list[i]->d_name, ".txt")) {
			check_one(list[i]->d_name);
			count++;
		}
		free(list[i]);
	}
	free(list);
	assert_true(count >= 40);
}

/* Each expected file belongs to an input: none is left over from a renamed case. */
static void test_no_stray_expected(void **state)
{
	struct dirent **list;
	int n = scandir(EXPECTED, &list, NULL, alphasort);

	assert_true(n > 0);
	for (int i = 0; i < n; i++) {
		char in[512];

		if (list[i]->d_name[0] != '.') {
			snprintf(in, sizeof(in), "%s/%s.txt", FILES, list[i]->d_name);
			if (access(in, F_OK) != 0)
				fail_msg("%s/%s has no input %s", EXPECTED, list[i]->d_name, in);
		}
		free(list[i]);
	}
	free(list);
}

/* The one map (defect 5 of issue 11: csi-server.c sent EBUSY as ABORTED, csi-node.c as
 * FAILED_PRECONDITION).  ABORTED stays for "another call on this volume is in flight". */
static void test_errno_map(void **state)
{
	static const struct {
		int err;
		enum csi_code code;
	} cases[] = {
		{ 0, CSI_OK },
		{ -EINVAL, CSI_INVALID_ARGUMENT },
		{ -ENOENT, CSI_NOT_FOUND },
		{ -EEXIST, CSI_ALREADY_EXISTS },
		{ -EOPNOTSUPP, CSI_FAILED_PRECONDITION },
		{ -EBUSY, CSI_FAILED_PRECONDITION },
		{ -EMEDIUMTYPE, CSI_FAILED_PRECONDITION },
		{ -EROFS, CSI_FAILED_PRECONDITION },
		{ -ENOTBLK, CSI_FAILED_PRECONDITION },
		{ -ERANGE, CSI_OUT_OF_RANGE },
		{ -EFBIG, CSI_OUT_OF_RANGE },
		{ -EAGAIN, CSI_ABORTED },
		{ -ETIMEDOUT, CSI_DEADLINE_EXCEEDED },
		{ -ESHUTDOWN, CSI_UNAVAILABLE },
		{ -EHOSTUNREACH, CSI_UNAVAILABLE },
		{ -ECONNREFUSED, CSI_UNAVAILABLE },
		{ -ENOSPC, CSI_RESOURCE_EXHAUSTED },
		{ -ENOMEM, CSI_RESOURCE_EXHAUSTED },
		{ -EPERM, CSI_PERMISSION_DENIED },
		{ -EACCES, CSI_PERMISSION_DENIED },
		{ -ENOSYS, CSI_UNIMPLEMENTED },
		{ -EIO, CSI_INTERNAL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		if (csi_code_from_errno(cases[i].err) != cases[i].code)
			fail_msg("errno %d: code %d, expected %d", -cases[i].err,
				 csi_code_from_errno(cases[i].err), cases[i].code);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_requests),
		cmocka_unit_test(test_no_stray_expected),
		cmocka_unit_test(test_errno_map),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
