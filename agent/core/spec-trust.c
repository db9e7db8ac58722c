/* spec-trust.c - see spec-trust.h.  Paths are resolved with realpath() and every component is
 * checked with lstat(); the file itself is opened with O_NOFOLLOW and checked with fstat() on
 * what was opened, so a file swapped after the check is not read unchecked. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "spec-trust.h"

/* Whether st, a directory, lets nobody but root change what it holds.  above: it stands
 * above the directory being checked, where a root-owned sticky one is allowed. */
static int check_one_dir(const char *path, const struct stat *st, bool above,
			 struct error_info *err)
{
	if (!S_ISDIR(st->st_mode))
		return err_set(err, -EPERM, "%s is not a directory", path);
	if (st->st_uid != 0)
		return err_set(err, -EPERM, "%s is owned by uid %u, not root", path,
			       (unsigned)st->st_uid);
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(above && (st->st_mode & S_ISVTX)))
		return err_set(err, -EPERM, "%s is writable by group or others (mode %04o)", path,
			       (unsigned)(st->st_mode & 07777));
	return 0;
}

/* Checks the resolved absolute path real (a directory) and each directory above it. */
static int check_chain(char *real, struct error_info *err)
{
	size_t len = strlen(real);
	bool above = false;
	struct stat st;

	for (;;) {
		if (lstat(real, &st) < 0)
			return err_set(err, -errno, "%s: %s", real, strerror(errno));
		if (check_one_dir(real, &st, above, err) < 0)
			return -EPERM;
		if (len <= 1)
			return 0;
		/* Up one level, in place. */
		while (len > 1 && real[len - 1] != '/')
			len--;
		if (len > 1)
			len--;
		real[len] = '\0';
		above = true;
	}
}

int spec_trust_check_dir(const char *dir, struct error_info *err)
{
	char real[PATH_MAX];

	if (!realpath(dir, real))
		return err_set(err, -errno, "%s: %s", dir, strerror(errno));
	return check_chain(real, err);
}

/* The opened file itself: a regular file of root's that only root may write. */
static int check_file(int fd, const char *what, struct error_info *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return err_set(err, -errno, "%s: %s", what, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return err_set(err, -EPERM, "%s: not a regular file", what);
	if (st.st_uid != 0)
		return err_set(err, -EPERM, "%s: owned by uid %u, not root", what,
			       (unsigned)st.st_uid);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return err_set(err, -EPERM, "%s: writable by group or others (mode %04o)", what,
			       (unsigned)(st.st_mode & 07777));
	return 0;
}

/* name is a symlink in dir: followed only when root owns it, and to a trusted file. */
static int open_symlink(int dir_fd, const char *dir, const char *name, struct error_info *err)
{
	char path[PATH_MAX], real[PATH_MAX], what[PATH_MAX + 32], *slash;
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return err_set(err, -errno, "file: %s", strerror(errno));
	if (!S_ISLNK(st.st_mode))
		return err_set(err, -EPERM, "file: changed while it was checked");
	if (st.st_uid != 0)
		return err_set(err, -EPERM, "file: a symlink owned by uid %u, not root",
			       (unsigned)st.st_uid);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!realpath(path, real))
		return err_set(err, -errno, "symlink target: %s", strerror(errno));
	snprintf(what, sizeof(what), "symlink target %s", real);
	fd = open(real, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return err_set(err, errno == ELOOP ? -EPERM : -errno, "%s: %s", what,
			       strerror(errno));
	r = check_file(fd, what, err);
	if (r < 0)
		return r;
	slash = strrchr(real, '/');
	if (slash == real)
		slash[1] = '\0';
	else
		*slash = '\0';
	r = check_chain(real, err);
	if (r < 0)
		return err_prefix(err, "symlink target");
	return TAKE_FD(fd);
}

int spec_trust_open(int dir_fd, const char *dir, const char *name, struct error_info *err)
{
	_cleanup_close_ int fd =
		openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
	int r;

	if (fd < 0 && errno == ELOOP)
		return open_symlink(dir_fd, dir, name, err);
	if (fd < 0)
		return err_set(err, -errno, "%s", strerror(errno));
	r = check_file(fd, "file", err);
	if (r < 0)
		return r;
	return TAKE_FD(fd);
}
