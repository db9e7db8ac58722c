/* file-util.c - see file-util.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file-util.h"
#include "macro.h"

int fd_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int file_write_atomic(const char *dir, const char *name, const char *data, mode_t mode,
		      struct error_info *err)
{
	_cleanup_close_ int dfd = -1, fd = -1;
	char tmp[256];
	int r;

	if (snprintf(tmp, sizeof(tmp), ".%s.tmp", name) >= (int)sizeof(tmp))
		return err_set(err, -ENAMETOOLONG, "%s: name too long", name);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return err_set(err, -errno, "%s: %s", dir, strerror(errno));
	if (unlinkat(dfd, tmp, 0) < 0 && errno != ENOENT)
		return err_set(err, -errno, "%s/%s: %s", dir, tmp, strerror(errno));
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return err_set(err, -errno, "%s/%s: %s", dir, tmp, strerror(errno));
	r = fd_write_all(fd, data, strlen(data));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(dfd, tmp, 0);
		return err_set(err, r, "%s/%s: %s", dir, name, strerror(-r));
	}
	if (fsync(dfd) < 0)
		return err_set(err, -errno, "%s: fsync: %s", dir, strerror(errno));
	return 0;
}

int file_fsync_parent(const char *path)
{
	_cleanup_free_ char *dir = strdup(path);
	_cleanup_close_ int dfd = -1;
	char *slash;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		strcpy(dir, ".");
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	return fsync(dfd) < 0 ? -errno : 0;
}

ssize_t file_read_at(const char *dir, const char *name, void *buf, size_t size)
{
	_cleanup_free_ char *path = strdup_printf("%s/%s", dir, name);
	_cleanup_close_ int fd = -1;
	ssize_t n;

	if (!path)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, size);
	return n < 0 ? -errno : n;
}
