/* test-path-util.c - path validation, escaping, and the no-symlink directory walk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "path-util.h"
#include "testlib.h"

static void test_validate_absolute(void **state)
{
	struct error_info e = { 0 };
	char longpath[PATH_MAX + 2];

	assert_int_equal(path_validate_absolute("/", "f", &e), 0);
	assert_int_equal(path_validate_absolute("/mnt/disks/ssd1", "f", &e), 0);
	assert_int_equal(path_validate_absolute("/a/.hidden/b..c", "f", &e), 0);
	assert_int_equal(path_validate_absolute("", "f", &e), -EINVAL);
	assert_string_equal(e.msg, "f: must not be empty");
	assert_int_equal(path_validate_absolute("rel/x", "f", &e), -EINVAL);
	assert_int_equal(path_validate_absolute("/a/../b", "f", &e), -EINVAL);
	assert_int_equal(path_validate_absolute("/a/./b", "f", &e), -EINVAL);
	assert_int_equal(path_validate_absolute("/a/..", "f", &e), -EINVAL);
	assert_int_equal(path_validate_absolute("/a//b", "f", &e), -EINVAL);
	assert_int_equal(path_validate_absolute("/a/b/", "f", &e), -EINVAL);
	assert_int_equal(path_validate_absolute("/a\nb", "f", &e), -EINVAL);
	assert_string_equal(e.msg, "f: contains a control character");
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(path_validate_absolute(longpath, "f", &e), -ENAMETOOLONG);
}

static void test_safe_component(void **state)
{
	assert_true(path_is_safe_component("0c1d-7a52_x.y"));
	assert_false(path_is_safe_component(""));
	assert_false(path_is_safe_component("."));
	assert_false(path_is_safe_component(".."));
	assert_false(path_is_safe_component("a/b"));
	assert_false(path_is_safe_component("a b"));
	assert_false(path_is_safe_component(NULL));
}

static void test_is_under(void **state)
{
	assert_true(path_is_under("/var/lib/kubelet/pods/x", "/var/lib/kubelet"));
	assert_true(path_is_under("/var/lib/kubelet", "/var/lib/kubelet"));
	assert_false(path_is_under("/var/lib/kubelet2/x", "/var/lib/kubelet"));
	assert_false(path_is_under("/var/lib", "/var/lib/kubelet"));
	assert_true(path_is_under("/x", "/"));
}

static void test_escape_roundtrip(void **state)
{
	const char *in[] = { "local:/dev/loop3", "a%b", ".hidden/x", "plain" };
	const char *out[] = { "local:%2Fdev%2Floop3", "a%25b", "%2Ehidden%2Fx", "plain" };

	for (size_t i = 0; i < 4; i++) {
		char *e = path_escape_component(in[i]), *u;
		assert_string_equal(e, out[i]);
		assert_null(strchr(e, '/'));
		u = path_unescape_component(e);
		assert_string_equal(u, in[i]);
		free(e);
		free(u);
	}
	assert_null(path_unescape_component("bad%2"));
	assert_null(path_unescape_component("bad%00"));
}

static void test_open_dir_below_refuses_symlinks(void **state)
{
	char *root = test_mkdtemp("pathutil"), path[600];
	struct error_info e = { 0 };
	struct stat st;
	int fd = -1;

	/* Creates missing directories. */
	assert_int_equal(path_open_dir_below(root, "pods/u1/volumes", true, 0750, &fd, &e), 0);
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/pods/u1/volumes", root);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0750);

	/* A symlink anywhere in the walk is refused, not followed. */
	snprintf(path, sizeof(path), "%s/pods/evil", root);
	assert_int_equal(symlink("/etc", path), 0);
	assert_int_equal(path_open_dir_below(root, "pods/evil/x", true, 0750, &fd, &e), -ELOOP);
	assert_non_null(strstr(e.msg, "is a symlink"));
	snprintf(path, sizeof(path), "/etc/x");
	assert_int_not_equal(access(path, F_OK), 0); /* nothing was created through the link */
	assert_int_equal(path_open_dir_below(root, "pods/../etc", false, 0, &fd, &e), -EINVAL);
	assert_int_equal(path_open_dir_below(root, "pods/missing", false, 0, &fd, &e), -ENOENT);

	/* rmdir_up_to removes empty dirs only, and stops at the root given. */
	snprintf(path, sizeof(path), "%s/pods/u1/volumes/kubernetes.io~local/v", root);
	assert_int_equal(path_mkdir_p(path, 0750), 0);
	snprintf(path, sizeof(path), "%s/pods/u1/keep", root);
	assert_int_equal(test_write_file(path, "x"), 0);
	snprintf(path, sizeof(path), "%s/pods/u1/volumes/kubernetes.io~local/v", root);
	{
		char stop[600];
		snprintf(stop, sizeof(stop), "%s/pods", root);
		assert_int_equal(path_rmdir_up_to(path, stop), 0);
	}
	snprintf(path, sizeof(path), "%s/pods/u1/volumes", root);
	assert_int_not_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/pods/u1/keep", root);
	assert_int_equal(access(path, F_OK), 0);
	test_rm_rf(root);
	free(root);
}

/* The walk from a root descriptor the caller keeps: the descriptor stays open and usable,
 * and a symlink is refused as from a path. */
static void test_open_dir_below_at_keeps_root(void **state)
{
	char *root = test_mkdtemp("pathutil"), path[600];
	struct error_info e = { 0 };
	struct stat st;
	int root_fd, fd = -1;

	root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(root_fd >= 0);
	assert_int_equal(path_open_dir_below_at(root_fd, root, "pods/u1/volumes", true, 0750, &fd,
						&e),
			 0);
	assert_true(fd >= 0 && fd != root_fd);
	close(fd);
	/* Again, now all there (the one-syscall case), from the same descriptor. */
	assert_int_equal(path_open_dir_below_at(root_fd, root, "pods/u1", false, 0, &fd, &e), 0);
	close(fd);
	/* The root itself: a descriptor of its own, which the caller closes. */
	assert_int_equal(path_open_dir_below_at(root_fd, root, "", false, 0, &fd, &e), 0);
	assert_true(fd >= 0 && fd != root_fd);
	close(fd);
	snprintf(path, sizeof(path), "%s/pods/evil", root);
	assert_int_equal(symlink("/etc", path), 0);
	assert_int_equal(path_open_dir_below_at(root_fd, root, "pods/evil/x", true, 0750, &fd, &e),
			 -ELOOP);
	assert_non_null(strstr(e.msg, "is a symlink"));
	assert_int_equal(fstat(root_fd, &st), 0); /* still open */
	assert_true(S_ISDIR(st.st_mode));
	close(root_fd);
	test_rm_rf(root);
	free(root);
}

/* Below "/" (a bind source) the absolute path is opened in one go, refusing every symlink in
 * it as the walk does. */
static void test_open_dir_below_slash(void **state)
{
	char *root = test_mkdtemp("pathutil"), path[600];
	struct error_info e = { 0 };
	int fd = -1;

	snprintf(path, sizeof(path), "%s/src", root);
	assert_int_equal(mkdir(path, 0750), 0);
	assert_int_equal(path_open_dir_below("/", path + 1, false, 0, &fd, &e), 0);
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/link", root);
	assert_int_equal(symlink("src", path), 0);
	assert_int_equal(path_open_dir_below("/", path + 1, false, 0, &fd, &e), -ELOOP);
	assert_non_null(strstr(e.msg, "is a symlink"));
	snprintf(path, sizeof(path), "%s/link/x", root);
	assert_int_equal(path_open_dir_below("/", path + 1, false, 0, &fd, &e), -ELOOP);
	snprintf(path, sizeof(path), "%s/missing", root);
	assert_int_equal(path_open_dir_below("/", path + 1, false, 0, &fd, &e), -ENOENT);
	test_rm_rf(root);
	free(root);
}

/* The absolute path is tried first (no root to open): a root reached through a symlink (it is
 * trusted) still works, by the walk from its descriptor; levels that exist below a missing
 * end are opened after a mkdir that finds them (EEXIST), and keep their mode; a symlink below
 * the root is still refused. */
static void test_open_dir_below_root_via_symlink(void **state)
{
	char *base = test_mkdtemp("pathutil"), root[600], link[600], path[700];
	struct error_info e = { 0 };
	struct stat st;
	int fd = -1;

	snprintf(root, sizeof(root), "%s/real", base);
	snprintf(link, sizeof(link), "%s/link", base);
	assert_int_equal(mkdir(root, 0755), 0);
	assert_int_equal(symlink("real", link), 0);
	/* Through the symlinked root, made from nothing, then all there. */
	assert_int_equal(path_open_dir_below(link, "pods/u1/volumes/a", true, 0750, &fd, &e), 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/pods/u1/volumes/a", root);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(path_open_dir_below(link, "pods/u1/volumes/a", false, 0, &fd, &e), 0);
	close(fd);
	/* Only the last level missing: the ones above are found, not made again. */
	snprintf(path, sizeof(path), "%s/pods/u1/volumes", root);
	assert_int_equal(chmod(path, 0700), 0);
	assert_int_equal(path_open_dir_below(root, "pods/u1/volumes/b", true, 0750, &fd, &e), 0);
	close(fd);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	snprintf(path, sizeof(path), "%s/pods/u1/volumes/b", root);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0750);
	/* A trailing '/' on the root. */
	snprintf(path, sizeof(path), "%s/", root);
	assert_int_equal(path_open_dir_below(path, "pods/u2/volumes", true, 0750, &fd, &e), 0);
	close(fd);
	/* A symlink below the root, with a missing rest, through the symlinked root. */
	snprintf(path, sizeof(path), "%s/pods/evil", root);
	assert_int_equal(symlink(base, path), 0);
	assert_int_equal(path_open_dir_below(link, "pods/evil/made", true, 0750, &fd, &e), -ELOOP);
	assert_non_null(strstr(e.msg, "is a symlink"));
	snprintf(path, sizeof(path), "%s/made", base);
	assert_int_not_equal(access(path, F_OK), 0); /* nothing was made through the link */
	/* A file where a level should be. */
	snprintf(path, sizeof(path), "%s/pods/file", root);
	assert_int_equal(test_write_file(path, "x"), 0);
	assert_int_equal(path_open_dir_below(root, "pods/file/x", true, 0750, &fd, &e), -ENOTDIR);
	test_rm_rf(base);
	free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_validate_absolute),
		cmocka_unit_test(test_safe_component),
		cmocka_unit_test(test_is_under),
		cmocka_unit_test(test_open_dir_below_at_keeps_root),
		cmocka_unit_test(test_open_dir_below_slash),
		cmocka_unit_test(test_open_dir_below_root_via_symlink),
		cmocka_unit_test(test_escape_roundtrip),
		cmocka_unit_test(test_open_dir_below_refuses_symlinks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
