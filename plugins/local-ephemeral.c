/* local-ephemeral.c - see local-ephemeral.h.  A directory is named by the hash of the target
 * it is published at, not by the volume: a tear-down (which is told the target only) and an
 * adoption after a restart reach the same directory, and two publishes never share one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local-ephemeral.h"
#include "log.h"
#include "macro.h"
#include "mount-util.h"
#include "path-util.h"
#include "plugin-option.h"
#include "quota.h"
#include "remove-tree.h"

static char base_dir[PATH_MAX]; /* "" until set: <state-dir>/local-ephemeral */

int local_ephemeral_set_dir(const char *value, uint64_t ms, struct error_info *err)
{
	if (*value && path_validate_absolute(value, "value", err) < 0)
		return -EINVAL;
	snprintf(base_dir, sizeof(base_dir), "%s", value);
	return 0;
}

static const char *base(char *buf)
{
	const char *state = plugin_state_dir();

	if (base_dir[0])
		return base_dir;
	if (!state || snprintf(buf, PATH_MAX, "%s/local-ephemeral", state) >= PATH_MAX)
		return NULL;
	return buf;
}

static uint64_t hash64(const char *s)
{
	uint64_t h = 14695981039346656037ULL; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static void dir_name(const char *target, char name[32])
{
	snprintf(name, 32, "v-%016llx", (unsigned long long)hash64(target));
}

/* Whether name is one dir_name() makes: "v-" and 16 lowercase hex digits. */
static bool is_dir_name(const char *name)
{
	if (strlen(name) != 18 || !startswith(name, "v-"))
		return false;
	for (const char *c = name + 2; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

const char *local_ephemeral_path(const char *target, char *buf)
{
	char b[PATH_MAX], name[32];
	const char *bd = base(b);

	dir_name(target, name);
	if (!bd || snprintf(buf, PATH_MAX, "%s/%s", bd, name) >= PATH_MAX)
		return NULL;
	return buf;
}

int local_ephemeral_open(const char *target, int *ret_fd, struct error_info *err)
{
	char b[PATH_MAX], name[32];
	const char *bd = base(b);
	_cleanup_close_ int base_fd = -1;
	int r;

	if (!bd)
		return err_set(err, -EINVAL, "ephemeral: no base directory is set");
	dir_name(target, name);
	r = path_open_dir_below("/", bd + 1, true, 0700, &base_fd, err);
	if (r < 0)
		return err_prefix(err, "ephemeral base %s", bd);
	return path_open_dir_below_at(base_fd, bd, name, true, 0750, ret_fd, err);
}

int local_ephemeral_remove(const char *target, struct error_info *err)
{
	char b[PATH_MAX], name[32];
	const char *bd = base(b);
	_cleanup_close_ int base_fd = -1, dir_fd = -1;
	int r;

	if (!bd)
		return 0;
	dir_name(target, name);
	r = path_open_dir_below("/", bd + 1, false, 0, &base_fd, err);
	if (r == -ENOENT) {
		err_clear(err);
		return 0;
	}
	if (r < 0)
		return err_prefix(err, "ephemeral base %s", bd);
	/* A size's limit is lifted first, so that its project ID is free again once the files
	 * are gone (best effort: the removal is what matters here). */
	dir_fd = openat(base_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir_fd >= 0) {
		struct error_info ignored = { 0 };

		(void)quota_prj_clear_size(dir_fd, name, &ignored);
	}
	/* path_open_dir_below gives O_PATH: unlinkat and openat take it as a directory. */
	r = rm_tree_at(base_fd, name, err);
	return r < 0 ? err_prefix(err, "removing ephemeral volume of %s", target) : 0;
}

/* Whether name is the dir of one of the n targets. */
static bool is_in_use(const char *name, const char *const *targets, size_t n)
{
	char other[32];

	for (size_t i = 0; i < n; i++) {
		dir_name(targets[i], other);
		if (streq(name, other))
			return true;
	}
	return false;
}

int local_ephemeral_remove_orphans(const char *const *targets, size_t n, unsigned *ret_removed,
				   struct error_info *err)
{
	char b[PATH_MAX];
	const char *bd = base(b);
	_cleanup_close_ int base_fd = -1;
	struct dirent *de;
	DIR *dir;
	int base_id = -1, first = 0, r;

	*ret_removed = 0;
	if (!bd)
		return 0;
	r = path_open_dir_below("/", bd + 1, false, 0, &base_fd, err);
	if (r == -ENOENT) {
		err_clear(err);
		return 0;
	}
	if (r < 0)
		return err_prefix(err, "ephemeral base %s", bd);
	/* The listing needs a descriptor that can be read (base_fd is O_PATH). */
	r = openat(base_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r < 0)
		return err_set(err, -errno, "ephemeral base %s: %m", bd);
	dir = fdopendir(r);
	if (!dir) {
		close(r);
		return err_set(err, -ENOMEM, "ephemeral base %s: out of memory", bd);
	}
	if (mnt_util_mount_id_at(base_fd, ".", &base_id) < 0)
		base_id = -1;
	while ((de = readdir(dir))) {
		struct error_info e = { 0 };
		struct stat st;
		int id = -1, fd;

		if (!is_dir_name(de->d_name) || is_in_use(de->d_name, targets, n))
			continue;
		/* A directory of its own on the base's mount: a symlink or a mount point planted
		 * in the base is left alone. */
		if (fstatat(base_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || mnt_util_mount_id_at(base_fd, de->d_name, &id) < 0 ||
		    id != base_id)
			continue;
		fd = openat(base_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			(void)quota_prj_clear_size(fd, de->d_name, &e);
			close(fd);
			err_clear(&e);
		}
		r = rm_tree_at(base_fd, de->d_name, &e);
		if (r < 0) {
			if (!first) {
				first = r;
				*err = e;
				err_prefix(err, "removing orphaned ephemeral directory %s/%s", bd,
					   de->d_name);
			}
			continue;
		}
		(*ret_removed)++;
		log_info("removed an ephemeral volume's directory that no target uses any more",
			 "dir", de->d_name, "base", bd);
	}
	closedir(dir);
	return first;
}
