/* local-ephemeral.c - see local-ephemeral.h.  A directory is named by the hash of the target
 * it is published at, not by the volume: a tear-down (which is told the target only) and an
 * adoption after a restart reach the same directory, and two publishes never share one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Opens the base (O_PATH, never through a symlink) into *ret_fd, *ret_base its path (in buf).
 * Returns 0, 1 when there is none (no base set, or it does not exist: *ret_fd stays -1), or
 * -errno with err set. */
static int open_base(char *buf, const char **ret_base, int *ret_fd, struct error_info *err)
{
	const char *bd = base(buf);
	int r;

	*ret_base = bd;
	if (!bd)
		return 1;
	/* Most nodes have no ephemeral volume, and every unpublish asks: a base that is not
	 * there costs one openat2 (ENOENT under RESOLVE_NO_SYMLINKS: a level is missing, and
	 * none before it is a symlink), not the walk that would name the missing level. */
	r = path_open_no_symlinks(AT_FDCWD, bd, O_DIRECTORY | O_NOFOLLOW, false);
	if (r >= 0) {
		*ret_fd = r;
		return 0;
	}
	if (r == -ENOENT)
		return 1;
	r = path_open_dir_below("/", bd + 1, false, 0, ret_fd, err);
	if (r == -ENOENT) {
		err_clear(err);
		return 1;
	}
	return r < 0 ? err_prefix(err, "ephemeral base %s", bd) : 0;
}

/* Removes name below the base and all it holds.  A size's limit is lifted first, so that its
 * project ID is free again once the files are gone (best effort: the removal is what matters
 * here).  base_fd is O_PATH: unlinkat and openat take it as a directory. */
static int remove_dir(int base_fd, const char *name, struct error_info *err)
{
	_cleanup_close_ int dir_fd =
		openat(base_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (dir_fd >= 0) {
		struct error_info ignored = { 0 };

		(void)quota_prj_clear_size(dir_fd, name, &ignored);
	}
	return rm_tree_at(base_fd, name, err);
}

int local_ephemeral_remove(const char *target, struct error_info *err)
{
	char b[PATH_MAX], name[32];
	const char *bd;
	_cleanup_close_ int base_fd = -1;
	int r = open_base(b, &bd, &base_fd, err);

	if (r != 0)
		return r < 0 ? r : 0;
	dir_name(target, name);
	r = remove_dir(base_fd, name, err);
	return r < 0 ? err_prefix(err, "removing ephemeral volume of %s", target) : 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Whether name (is_dir_name) is the dir of one of the targets whose hashes are in sorted
 * (n of them, in order). */
static bool is_in_use(const char *name, const uint64_t *sorted, size_t n)
{
	uint64_t h = strtoull(name + 2, NULL, 16);

	return bsearch(&h, sorted, n, sizeof(h), cmp_u64) != NULL;
}

int local_ephemeral_remove_orphans(const char *const *targets, size_t n, unsigned *ret_removed,
				   struct error_info *err)
{
	char b[PATH_MAX];
	const char *bd;
	_cleanup_close_ int base_fd = -1;
	struct dirent *de;
	DIR *dir;
	int base_id = -1, first = 0, r;

	_cleanup_free_ uint64_t *hashes = NULL;

	*ret_removed = 0;
	r = open_base(b, &bd, &base_fd, err);
	if (r != 0)
		return r < 0 ? r : 0;
	/* The targets' dir names as sorted hashes: one look-up per directory of the base. */
	hashes = calloc(n ? n : 1, sizeof(*hashes));
	if (!hashes)
		return err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		hashes[i] = hash64(targets[i]);
	qsort(hashes, n, sizeof(*hashes), cmp_u64);
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
		int id = -1;

		if (!is_dir_name(de->d_name) || is_in_use(de->d_name, hashes, n))
			continue;
		/* A directory of its own on the base's mount: a symlink or a mount point planted
		 * in the base is left alone. */
		if (fstatat(base_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || mnt_util_mount_id_at(base_fd, de->d_name, &id) < 0 ||
		    id != base_id)
			continue;
		r = remove_dir(base_fd, de->d_name, &e);
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
