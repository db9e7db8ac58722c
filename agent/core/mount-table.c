/* mount-table.c - see mount-table.h. */
#include <errno.h>
#include <libmount.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "macro.h"
#include "mount-table.h"

struct mount_table {
	struct hashmap *by_target;
	uint64_t generation;
};

static void info_free(struct mount_info *i)
{
	free(i->target);
	free(i->fstype);
	free(i->source);
	free(i->root);
	free(i);
}

static void clear_index(struct hashmap *h)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (hashmap_iterate(h, &it, &v, NULL)) {
		struct mount_info *i = v;
		hashmap_remove(h, i->target);
		info_free(i);
	}
}

struct mount_table *mount_table_new(void)
{
	struct mount_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->by_target = hashmap_new();
	if (!t->by_target) {
		free(t);
		return NULL;
	}
	return t;
}

struct mount_table *mount_table_free(struct mount_table *t)
{
	if (!t)
		return NULL;
	clear_index(t->by_target);
	hashmap_free(t->by_target);
	free(t);
	return NULL;
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

int mount_table_refresh(struct mount_table *t, const char *path, struct error_info *err)
{
	struct libmnt_table *tb = mnt_new_table();
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct hashmap *idx = hashmap_new();
	struct libmnt_fs *fs;
	int r = 0;

	if (!tb || !it || !idx) {
		r = -ENOMEM;
		goto out;
	}
	r = mnt_table_parse_file(tb, path ? path : "/proc/self/mountinfo");
	if (r != 0) {
		r = err_set(err, r < 0 ? r : -EIO, "reading the mount table %s: %s",
			    path ? path : "/proc/self/mountinfo", strerror(r < 0 ? -r : EIO));
		goto out;
	}
	/* mountinfo lists mounts in mount order: a later mount on the same target covers an
	 * earlier one, so the last entry for a target is the visible one. */
	while (mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *target = mnt_fs_get_target(fs);
		struct mount_info *i, *old;
		unsigned long flags = 0;

		if (!target)
			continue;
		i = calloc(1, sizeof(*i));
		if (!i) {
			r = -ENOMEM;
			goto out;
		}
		i->target = strdup(target);
		i->fstype = dup_or_empty(mnt_fs_get_fstype(fs));
		i->source = dup_or_empty(mnt_fs_get_source(fs));
		i->root = dup_or_empty(mnt_fs_get_root(fs));
		i->id = mnt_fs_get_id(fs);
		i->devno = mnt_fs_get_devno(fs);
		if (mnt_optstr_get_flags(mnt_fs_get_vfs_options(fs), &flags,
					 mnt_get_builtin_optmap(MNT_LINUX_MAP)) == 0)
			i->read_only = flags & MS_RDONLY;
		i->stacked = 1;
		if (!i->target || !i->fstype || !i->source || !i->root) {
			info_free(i);
			r = -ENOMEM;
			goto out;
		}
		old = hashmap_remove(idx, i->target);
		if (old) {
			i->stacked = old->stacked + 1;
			info_free(old);
		}
		if (hashmap_put(idx, i->target, i) < 0) {
			info_free(i);
			r = -ENOMEM;
			goto out;
		}
	}
	clear_index(t->by_target);
	hashmap_free(t->by_target);
	t->by_target = idx;
	idx = NULL;
	t->generation++;
out:
	if (idx) {
		clear_index(idx);
		hashmap_free(idx);
	}
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return r;
}

const struct mount_info *mount_table_get(const struct mount_table *t, const char *target)
{
	return hashmap_get(t->by_target, target);
}

const struct hashmap *mount_table_entries(const struct mount_table *t)
{
	return t->by_target;
}

uint64_t mount_table_generation(const struct mount_table *t)
{
	return t->generation;
}

size_t mount_table_size(const struct mount_table *t)
{
	return hashmap_size(t->by_target);
}

struct mount_monitor {
	struct libmnt_monitor *mn;
	int fd;
};

struct mount_monitor *mount_monitor_new(struct error_info *err)
{
	struct mount_monitor *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return NULL;
	m->mn = mnt_new_monitor();
	if (!m->mn) {
		free(m);
		err_set(err, -ENOMEM, "mount monitor: out of memory");
		return NULL;
	}
	r = mnt_monitor_enable_kernel(m->mn, 1);
	if (r == 0)
		r = m->fd = mnt_monitor_get_fd(m->mn);
	if (r < 0) {
		err_set(err, r, "mount monitor: %s", strerror(-r));
		return mount_monitor_free(m);
	}
	return m;
}

struct mount_monitor *mount_monitor_free(struct mount_monitor *m)
{
	if (!m)
		return NULL;
	mnt_unref_monitor(m->mn);
	free(m);
	return NULL;
}

int mount_monitor_get_fd(const struct mount_monitor *m)
{
	return m->fd;
}

int mount_monitor_drain(struct mount_monitor *m)
{
	int changed = 0, r;

	while ((r = mnt_monitor_next_change(m->mn, NULL, NULL)) == 0)
		changed = 1;
	return r < 0 ? r : changed;
}
