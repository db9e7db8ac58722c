/* nfs-mountinfo.c - see nfs-mountinfo.h. */
#include <errno.h>
#include <libmount.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "nfs-mountinfo.h"
#include "path-util.h"

/* Looks up the topmost mount at path.  Returns 1 (found, ret filled), 0, or -errno. */
int nfs_mountinfo_lookup(const char *path, struct nfs_mount_entry *ret)
{
	struct libmnt_table *tb = mnt_new_table();
	struct libmnt_fs *fs;
	int r = 0;

	if (!tb)
		return -ENOMEM;
	if (mnt_table_parse_file(tb, "/proc/self/mountinfo") < 0) {
		mnt_unref_table(tb);
		return -EIO;
	}
	fs = mnt_table_find_target(tb, path, MNT_ITER_BACKWARD);
	if (fs) {
		const char *vfs = mnt_fs_get_vfs_options(fs);
		if (ret) {
			snprintf(ret->source, sizeof(ret->source), "%s",
				 mnt_fs_get_source(fs) ?: "");
			snprintf(ret->fstype, sizeof(ret->fstype), "%s",
				 mnt_fs_get_fstype(fs) ?: "");
			snprintf(ret->root, sizeof(ret->root), "%s", mnt_fs_get_root(fs) ?: "/");
			ret->devno = mnt_fs_get_devno(fs);
			ret->ro = vfs && mnt_optstr_get_option(vfs, "ro", NULL, NULL) == 0;
		}
		r = 1;
	}
	mnt_unref_table(tb);
	return r;
}

/* path with its parent resolved (the parent is a local directory; the last component may
 * be an NFS mount and is not touched), as mountinfo shows it. */
int nfs_canonical_path(const char *path, char *ret, size_t size)
{
	_cleanup_free_ char *parent = strdup(path);
	char real[PATH_MAX];
	char *slash;

	if (!parent)
		return -ENOMEM;
	slash = strrchr(parent, '/');
	if (!slash || !slash[1])
		return -EINVAL;
	*slash = '\0';
	if (!realpath(*parent ? parent : "/", real))
		return -errno;
	if (snprintf(ret, size, "%s/%s", streq(real, "/") ? "" : real, slash + 1) >= (int)size)
		return -ENAMETOOLONG;
	return 0;
}

/* The canonical path of name in dir_fd. */
int nfs_canonical_target(const struct mount_target *t, char *ret, size_t size)
{
	char fdp[FD_PATH_MAX], real[PATH_MAX];
	ssize_t n = readlink(path_fd_path(t->parent_fd, fdp), real, sizeof(real) - 1);

	if (n < 0)
		return -errno;
	real[n] = '\0';
	if (snprintf(ret, size, "%s/%s", streq(real, "/") ? "" : real, t->name) >= (int)size)
		return -ENAMETOOLONG;
	return 0;
}

bool nfs_is_nfs_type(const char *fstype)
{
	return streq(fstype, "nfs") || streq(fstype, "nfs4");
}
