/* path-util.c - see path-util.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"
#include "path-util.h"

bool path_is_safe_component(const char *s)
{
	size_t n = 0;

	if (!s || !*s || streq(s, ".") || streq(s, ".."))
		return false;
	for (; s[n]; n++) {
		char c = s[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return n <= 253;
}

int path_validate_absolute(const char *path, const char *field, struct error_info *err)
{
	const char *p;

	if (!path || !*path)
		return err_set(err, -EINVAL, "%s: must not be empty", field);
	if (path[0] != '/')
		return err_set(err, -EINVAL, "%s: must be an absolute path, got \"%s\"", field,
			       path);
	if (strlen(path) >= PATH_MAX)
		return err_set(err, -ENAMETOOLONG, "%s: longer than %d bytes", field, PATH_MAX);
	for (p = path; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return err_set(err, -EINVAL, "%s: contains a control character", field);
	if (streq(path, "/"))
		return 0;
	for (p = path + 1;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);

		if (len == 0)
			return err_set(err, -EINVAL,
				       "%s: \"%s\" has an empty component or a trailing '/'", field,
				       path);
		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
			return err_set(err, -EINVAL, "%s: \"%s\" must not contain \".\" or \"..\"",
				       field, path);
		if (!slash)
			return 0;
		p = slash + 1;
	}
}

bool path_is_under(const char *path, const char *root)
{
	size_t n = strlen(root);

	if (streq(root, "/"))
		return path[0] == '/';
	return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Whether rel has a "." or ".." component (refused by the walk below). */
static bool has_dot_component(const char *rel)
{
	for (const char *c = rel; *c;) {
		size_t n = strcspn(c, "/");

		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return true;
		c += n;
		c += strspn(c, "/");
	}
	return false;
}

int path_open_no_symlinks(int dir_fd, const char *path, int flags, bool beneath)
{
	struct open_how how = {
		.flags = (uint64_t)(O_PATH | O_CLOEXEC | flags),
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   (beneath ? RESOLVE_BENEATH : 0),
	};
	int fd = (int)syscall(SYS_openat2, dir_fd, path, &how, sizeof(how));

	return fd < 0 ? -errno : fd;
}

/* The whole of rel in one openat2(2) below dir_fd, refusing every symlink: what the walk below
 * does in one syscall instead of two per component.  Returns the fd, or -errno (-ENOSYS on
 * kernels before 5.6) for the caller to walk instead, which also names what failed. */
static int open_dir_beneath(int dir_fd, const char *rel)
{
	return path_open_no_symlinks(dir_fd, rel, O_DIRECTORY | O_NOFOLLOW, true);
}

/* open_dir_beneath() of an absolute path, refusing every symlink. */
static int open_dir_absolute(const char *path)
{
	return path_open_no_symlinks(AT_FDCWD, path, O_DIRECTORY | O_NOFOLLOW, false);
}

/* The walk of path_open_dir_below_at(), one component at a time.  With create, the levels
 * after the first open_first ones are made first and opened after (a dir made just now is new;
 * EEXIST falls back to the open), instead of an open that fails first: for when rel is known
 * not to exist in full (an openat2 of all of it said ENOENT) and the first level is where a
 * root keeps its tree ("pods"), there already.  SIZE_MAX: every level is opened first. */
static int walk_below(int root_fd, const char *root, const char *rel, bool create, mode_t mode,
		      size_t open_first, int *ret_fd, struct error_info *err)
{
	size_t level = 0;
	_cleanup_close_ int owned = -1; /* the walk's current dir, once it is not root_fd */
	_cleanup_free_ char *copy = NULL;
	char *saveptr = NULL;
	int fd = root_fd;
	bool made = false; /* the last component was made by this call */
	/* For messages: root and rel joined without a doubled '/'. */
	const char *sep = endswith(root, "/") ? "" : "/";

	copy = strdup(rel);
	if (!copy)
		return -ENOMEM;
	for (char *c = strtok_r(copy, "/", &saveptr); c; c = strtok_r(NULL, "/", &saveptr)) {
		bool make_first = made || (create && level++ >= open_first);
		int next = -1;

		if (streq(c, ".") || streq(c, ".."))
			return err_set(err, -EINVAL, "%s%s%s: \"..\" is not allowed", root, sep,
				       rel);
		/* Below a dir made just now nothing is there yet: no open that fails first. */
		if (!make_first)
			next = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (make_first || (next < 0 && errno == ENOENT && create)) {
			made = mkdirat(fd, c, mode) == 0;
			if (!made && errno != EEXIST)
				return err_set(err, -errno, "mkdir %s in %s%s%s: %s", c, root, sep,
					       rel, strerror(errno));
			next = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (next < 0) {
			int e = errno;
			struct stat st;

			if ((e == ENOTDIR || e == ELOOP) &&
			    fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
				return err_set(
					err, -ELOOP,
					"%s%s%s: component \"%s\" is a symlink, refusing to follow it",
					root, sep, rel, c);
			return err_set(err, -e, "%s%s%s: component \"%s\": %s", root, sep, rel, c,
				       strerror(e));
		}
		if (owned >= 0)
			close(owned);
		fd = owned = next;
	}
	if (owned < 0) {
		/* rel named root itself: a descriptor of its own, as the caller closes it. */
		owned = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (owned < 0)
			return err_set(err, -errno, "open %s: %s", root, strerror(errno));
	}
	*ret_fd = TAKE_FD(owned);
	return 0;
}

int path_open_dir_below_at(int root_fd, const char *root, const char *rel, bool create, mode_t mode,
			   int *ret_fd, struct error_info *err)
{
	size_t open_first = SIZE_MAX;

	/* The usual case, all of it there and no symlink in it, in one syscall. */
	if (rel[strspn(rel, "/")] && !has_dot_component(rel)) {
		int next = open_dir_beneath(root_fd, rel);

		if (next >= 0) {
			*ret_fd = next;
			return 0;
		}
		if (next == -ENOENT)
			open_first = 1;
	}
	return walk_below(root_fd, root, rel, create, mode, open_first, ret_fd, err);
}

int path_open_dir_below(const char *root, const char *rel, bool create, mode_t mode, int *ret_fd,
			struct error_info *err)
{
	_cleanup_close_ int fd = -1;
	bool missing = false;
	char abs[PATH_MAX];
	const char *sep = endswith(root, "/") ? "" : "/";

	/* root and rel as one absolute path in one openat2, with no root to open first: with no
	 * symlink anywhere in it (RESOLVE_NO_SYMLINKS) and no "." or "..", what it opens is below
	 * root, as RESOLVE_BENEATH from root's descriptor would make sure.  A symlink in root
	 * itself (which is trusted) fails it (-ELOOP): root is then opened and rel walked from
	 * it.  -ENOENT: rel is not all there (were root missing, so would its open be), and the
	 * walk makes or names what is missing without trying all of rel again. */
	if (rel[strspn(rel, "/")] && !has_dot_component(rel) &&
	    snprintf(abs, sizeof(abs), "%s%s%s", root, sep, rel) < (int)sizeof(abs)) {
		int next = open_dir_absolute(abs);

		if (next >= 0) {
			*ret_fd = next;
			return 0;
		}
		missing = next == -ENOENT;
	}
	/* Missing: the first level of rel the same way (it is usually there), and the walk of
	 * the rest from it, making each level before opening it.  abs is cut after that level;
	 * messages still name all of root and rel. */
	if (missing) {
		size_t skip = strspn(rel, "/"), first = strcspn(rel + skip, "/");
		const char *rest = rel + skip + first;

		if (rest[strspn(rest, "/")]) {
			abs[strlen(root) + strlen(sep) + skip + first] = '\0';
			fd = open_dir_absolute(abs);
			if (fd >= 0)
				return walk_below(fd, abs, rest + strspn(rest, "/"), create, mode,
						  0, ret_fd, err);
		}
	}
	fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return err_set(err, -errno, "open %s: %s", root, strerror(errno));
	if (missing)
		return walk_below(fd, root, rel, create, mode, 1, ret_fd, err);
	return path_open_dir_below_at(fd, root, rel, create, mode, ret_fd, err);
}

int path_rmdir_up_to(const char *path, const char *stop)
{
	_cleanup_free_ char *p = strdup(path);

	if (!p)
		return -ENOMEM;
	while (path_is_under(p, stop) && !streq(p, stop)) {
		char *slash;

		if (rmdir(p) < 0) {
			if (errno == ENOTEMPTY || errno == EEXIST || errno == EBUSY ||
			    errno == ENOENT)
				return 0;
			return -errno;
		}
		slash = strrchr(p, '/');
		if (!slash || slash == p)
			break;
		*slash = '\0';
	}
	return 0;
}

char *path_escape_component(const char *s)
{
	size_t n = strlen(s);
	char *out = malloc(n * 3 + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '/' || c == '%' || (i == 0 && c == '.') || c < 0x20) {
			sprintf(o, "%%%02X", c);
			o += 3;
		} else {
			*o++ = (char)c;
		}
	}
	*o = '\0';
	return out;
}

char *path_unescape_component(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned v;
		if (*s != '%') {
			*o++ = *s;
			continue;
		}
		if (!s[1] || !s[2] || sscanf(s + 1, "%2x", &v) != 1 || v == 0) {
			free(out);
			return NULL;
		}
		*o++ = (char)v;
		s += 2;
	}
	*o = '\0';
	return out;
}

const char *path_fd_path(int fd, char *buf)
{
	snprintf(buf, FD_PATH_MAX, "/proc/self/fd/%d", fd);
	return buf;
}

int path_mkdir_p(const char *path, mode_t mode)
{
	_cleanup_free_ char *p = strdup(path);

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char saved = *s;
			*s = '\0';
			if (mkdir(p, mode) < 0 && errno != EEXIST)
				return -errno;
			*s = saved;
			if (!saved)
				break;
		}
	}
	return 0;
}
