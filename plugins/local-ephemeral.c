/* local-ephemeral.c - see local-ephemeral.h.  A directory is named by the hash of the target
 * it is published at, not by the volume: a tear-down (which is told the target only) and an
 * adoption after a restart reach the same directory, and two publishes never share one. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "local-ephemeral.h"
#include "macro.h"
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
