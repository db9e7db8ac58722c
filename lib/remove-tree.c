/* remove-tree.c - see remove-tree.h.  The walk holds one descriptor per level (directories are
 * at most MAX_DEPTH deep) and tells mounts apart by statx's mount ID and the device. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "macro.h"
#include "remove-tree.h"

#define MAX_DEPTH 256

struct where {
	uint64_t mnt_id;
	dev_t dev;
};

static int where_of(int fd, struct where *ret)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0)
		return -errno;
	ret->mnt_id = stx.stx_mnt_id;
	ret->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	return 0;
}

/* Empties the directory dfd (opened by the caller); first -errno kept in *first. */
static void empty_dir(int dfd, const struct where *top, int depth, const char *name, int *first,
		      struct error_info *err)
{
	_cleanup_close_ int list_fd = dup(dfd);
	DIR *d = list_fd >= 0 ? fdopendir(list_fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (!*first)
			*first = err_set(err, -errno, "%s: %s", name, strerror(errno));
		return;
	}
	list_fd = -1; /* the DIR owns it */
	while ((e = readdir(d))) {
		struct where w;
		struct stat st;
		int child;

		if (streq(e->d_name, ".") || streq(e->d_name, ".."))
			continue;
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		if (!S_ISDIR(st.st_mode)) {
			if (unlinkat(dfd, e->d_name, 0) < 0 && errno != ENOENT && !*first)
				*first = err_set(err, -errno, "%s/%s: %s", name, e->d_name,
						 strerror(errno));
			continue;
		}
		child = openat(dfd, e->d_name,
			       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
		if (child < 0) {
			if (errno != ENOENT && !*first)
				*first = err_set(err, -errno, "%s/%s: %s", name, e->d_name,
						 strerror(errno));
			continue;
		}
		if (where_of(child, &w) < 0 || w.mnt_id != top->mnt_id || w.dev != top->dev) {
			if (!*first)
				*first = err_set(err, -EBUSY,
						 "%s/%s is another mount; left it in place", name,
						 e->d_name);
			close(child);
			continue;
		}
		if (depth + 1 >= MAX_DEPTH) {
			if (!*first)
				*first = err_set(err, -ELOOP, "%s/%s: deeper than %d levels", name,
						 e->d_name, MAX_DEPTH);
			close(child);
			continue;
		}
		empty_dir(child, top, depth + 1, name, first, err);
		close(child);
		if (unlinkat(dfd, e->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT && !*first)
			*first =
				err_set(err, -errno, "%s/%s: %s", name, e->d_name, strerror(errno));
	}
	closedir(d);
}

int rm_tree_at(int parent_fd, const char *name, struct error_info *err)
{
	_cleanup_close_ int fd =
		openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	struct where top;
	int first = 0, r;

	if (fd < 0)
		return errno == ENOENT ? 0 : err_set(err, -errno, "%s: %s", name, strerror(errno));
	r = where_of(fd, &top);
	if (r < 0)
		return err_set(err, r, "%s: %s", name, strerror(-r));
	empty_dir(fd, &top, 0, name, &first, err);
	if (first)
		return first;
	if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return err_set(err, -errno, "%s: %s", name, strerror(errno));
	return 0;
}
