/* mount-table.c - see mount-table.h. */
#include <errno.h>
#include <inttypes.h>
#include <libmount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "macro.h"
#include "mount-notify.h"
#include "mount-table.h"

struct mount_table {
	struct hashmap *by_id;	   /* key -> mount_info, every indexed mount */
	struct hashmap *by_target; /* target -> the top mount_info of its stack */
	char **trees;
	size_t n_trees;
	char **lean; /* see mount_table_set_lean */
	size_t n_lean;
	bool listmount;
	uint64_t *ids; /* listmount: every ID of the last full read, sorted */
	size_t n_ids;
	/* listmount: the IDs events indexed since the last full read (the only indexed mounts
	 * the ID diff of two reads cannot see go) */
	uint64_t *event_ids;
	size_t n_event_ids, cap_event_ids;
	uint64_t generation;
};

static void info_free(struct mount_info *i)
{
	free(i);
}

static void info_free_void(void *p)
{
	info_free(p);
}

struct mount_table *mount_table_new(const char *const *trees, size_t n)
{
	struct mount_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->by_id = hashmap_new();
	t->by_target = hashmap_new();
	t->trees = calloc(n + 1, sizeof(*t->trees));
	if (!t->by_id || !t->by_target || !t->trees)
		return mount_table_free(t);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(trees[i]);

		t->trees[i] = strdup(trees[i]);
		if (!t->trees[i])
			return mount_table_free(t);
		t->n_trees++;
		while (len > 1 && t->trees[i][len - 1] == '/')
			t->trees[i][--len] = '\0';
	}
	return t;
}

struct mount_table *mount_table_free(struct mount_table *t)
{
	if (!t)
		return NULL;
	hashmap_free(t->by_target);
	hashmap_free_values(t->by_id, info_free_void);
	for (size_t i = 0; t->trees && i < t->n_trees; i++)
		free(t->trees[i]);
	free(t->trees);
	for (size_t i = 0; i < t->n_lean; i++)
		free(t->lean[i]);
	free(t->lean);
	free(t->ids);
	free(t->event_ids);
	free(t);
	return NULL;
}

void mount_table_use_listmount(struct mount_table *t, bool on)
{
	t->listmount = on;
}

int mount_table_set_lean(struct mount_table *t, const char *const *prefixes, size_t n)
{
	char **lean = calloc(n + 1, sizeof(*lean));

	if (!lean)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		lean[i] = strdup(prefixes[i]);
		if (!lean[i]) {
			for (size_t k = 0; k < i; k++)
				free(lean[k]);
			free(lean);
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < t->n_lean; i++)
		free(t->lean[i]);
	free(t->lean);
	t->lean = lean;
	t->n_lean = n;
	return 0;
}

static bool path_is_below(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool is_lean(const struct mount_table *t, const char *path)
{
	for (size_t i = 0; i < t->n_lean; i++)
		if (path_is_below(path, t->lean[i]))
			return true;
	return false;
}

bool mount_table_covers(const struct mount_table *t, const char *path)
{
	if (t->n_trees == 0)
		return true;
	for (size_t i = 0; i < t->n_trees; i++) {
		const char *tree = t->trees[i];
		size_t n = strlen(tree);

		if (streq(tree, "/"))
			return true;
		if (strncmp(path, tree, n) == 0 && (path[n] == '\0' || path[n] == '/'))
			return true;
	}
	return false;
}

static void report(const struct mount_table *t, const char *target, uint32_t hash,
		   mount_table_changed_fn changed, void *userdata)
{
	if (changed)
		changed(t, target, hash, userdata);
}

/* The top of a stack: the mount no other mount of the stack is mounted on (mount order when
 * the IDs say nothing: the highest ID). */
static struct mount_info *stack_top(struct mount_info *head)
{
	struct mount_info *top = NULL;

	for (struct mount_info *i = head; i; i = i->next_on_target) {
		bool covered = false;

		for (struct mount_info *j = head; j && !covered; j = j->next_on_target)
			covered = j != i && j->parent_id == i->mnt_id;
		if (!covered && (!top || i->mnt_id > top->mnt_id))
			top = i;
	}
	return top ? top : head;
}

/* Makes the top of the stack i is on its head (the one by_target holds), with the count. */
static int stack_settle(struct mount_table *t, struct mount_info *head)
{
	struct mount_info *top = stack_top(head), **pp;
	unsigned n = 0;

	if (top != head) {
		for (pp = &head->next_on_target; *pp != top; pp = &(*pp)->next_on_target)
			;
		*pp = top->next_on_target;
		top->next_on_target = head;
	}
	for (struct mount_info *i = top; i; i = i->next_on_target)
		n++;
	top->stacked = n;
	hashmap_remove_hashed(t->by_target, top->target, top->target_hash);
	return hashmap_put_hashed(t->by_target, top->target, top->target_hash, top);
}

/* Indexes i (owned by the table from here on, also on failure). */
static int index_add(struct mount_table *t, struct mount_info *i)
{
	struct mount_info *head;
	int r;

	r = hashmap_put(t->by_id, i->key, i);
	if (r < 0) {
		info_free(i);
		return r;
	}
	head = hashmap_get_hashed(t->by_target, i->target, i->target_hash);
	i->next_on_target = head;
	if (head)
		hashmap_remove_hashed(t->by_target, head->target, head->target_hash);
	return stack_settle(t, i);
}

/* Takes i out of the index and frees it. */
static void index_remove(struct mount_table *t, struct mount_info *i)
{
	struct mount_info *head = hashmap_get_hashed(t->by_target, i->target, i->target_hash), **pp;

	hashmap_remove(t->by_id, i->key);
	for (pp = &head; *pp && *pp != i; pp = &(*pp)->next_on_target)
		;
	if (*pp)
		*pp = i->next_on_target;
	hashmap_remove_hashed(t->by_target, i->target, i->target_hash);
	if (head)
		(void)stack_settle(t, head);
	info_free(i);
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* Copies s (NULL: "") to *pp, returning where the next string goes; an empty string is not
 * copied. */
static char *put_string(char *p, const char **ret, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0) {
		*ret = "";
		return p;
	}
	memcpy(p, s, n + 1);
	*ret = p;
	return p + n + 1;
}

static struct mount_info *info_new(uint64_t mnt_id, uint64_t parent_id, int id, const char *target,
				   const char *fstype, const char *source, const char *root,
				   dev_t devno, bool read_only)
{
	char key[24];
	size_t klen = (size_t)snprintf(key, sizeof(key), "%" PRIu64, mnt_id);
	size_t size = sizeof(struct mount_info) + strlen(target) + 1 + klen + 1 +
		      strlen(or_empty(fstype)) + 1 + strlen(or_empty(source)) + 1 +
		      strlen(or_empty(root)) + 1;
	struct mount_info *i = malloc(size);
	char *p;

	if (!i)
		return NULL;
	*i = (struct mount_info){
		.mnt_id = mnt_id,
		.parent_id = parent_id,
		.devno = devno,
		.id = id,
		.target_hash = hashmap_hash(target),
		.stacked = 1,
		.read_only = read_only,
	};
	p = (char *)(i + 1);
	p = put_string(p, &i->target, target);
	p = put_string(p, &i->key, key);
	p = put_string(p, &i->fstype, fstype);
	p = put_string(p, &i->source, source);
	(void)put_string(p, &i->root, root);
	return i;
}

/* --- events and listmount --- */

/* Notes that an event indexed the mount id (for the next full read). */
static int note_event_id(struct mount_table *t, uint64_t id)
{
	if (t->n_event_ids == t->cap_event_ids) {
		size_t cap = t->cap_event_ids ? t->cap_event_ids * 2 : 64;
		uint64_t *n = realloc(t->event_ids, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->event_ids = n;
		t->cap_event_ids = cap;
	}
	t->event_ids[t->n_event_ids++] = id;
	return 0;
}

static bool ids_contain(const uint64_t *ids, size_t n, uint64_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && ids[lo] == id;
}

/* statmount of one new mount; indexed when it lies in the trees. */
static int add_by_id(struct mount_table *t, uint64_t id, bool from_event,
		     mount_table_changed_fn changed, void *userdata)
{
	struct mount_stat *st = NULL;
	struct mount_info *i;
	char key[24];
	int r;

	snprintf(key, sizeof(key), "%" PRIu64, id);
	if (hashmap_get(t->by_id, key))
		return 0; /* already indexed from its event */
	/* The mount point first: the rest only for a mount in the trees that is not lean. */
	r = mount_stat_by_id_want(id, MOUNT_STAT_TARGET, &st);
	if (r == 0 && st->target && mount_table_covers(t, st->target) && !is_lean(t, st->target)) {
		st = mount_stat_free(st);
		r = mount_stat_by_id_want(id, MOUNT_STAT_TARGET | MOUNT_STAT_DETAILS, &st);
	}
	if (r == -ENOENT)
		return 1; /* gone again: its detach follows, with nothing to say where it was */
	if (r < 0)
		return r;
	if (!st->target || !mount_table_covers(t, st->target)) {
		mount_stat_free(st);
		return 0;
	}
	i = info_new(st->id, st->parent_id, (int)st->id_old, st->target, st->fstype, st->source,
		     st->root, st->dev, mount_stat_is_read_only(st));
	mount_stat_free(st);
	if (!i)
		return -ENOMEM;
	r = index_add(t, i);
	if (r < 0)
		return r;
	report(t, i->target, i->target_hash, changed, userdata);
	return from_event && t->listmount ? note_event_id(t, id) : 0;
}

static void remove_by_id(struct mount_table *t, uint64_t id, mount_table_changed_fn changed,
			 void *userdata)
{
	struct mount_info *i;
	char key[24];
	uint32_t hash;
	char *target;

	snprintf(key, sizeof(key), "%" PRIu64, id);
	i = hashmap_get(t->by_id, key);
	if (!i)
		return;
	hash = i->target_hash;
	target = strdup(i->target); /* i goes: report from a copy */
	index_remove(t, i);
	if (target)
		report(t, target, hash, changed, userdata);
	free(target);
}

struct diff_ctx {
	struct mount_table *t;
	mount_table_changed_fn changed;
	void *userdata;
	bool unread; /* a mount went before it could be read */
};

static int diff_cb(uint64_t id, bool added, void *userdata)
{
	struct diff_ctx *c = userdata;

	if (added) {
		int r = add_by_id(c->t, id, false, c->changed, c->userdata);
		return r < 0 ? r : 0;
	}
	remove_by_id(c->t, id, c->changed, c->userdata);
	return 0;
}

static int refresh_listmount(struct mount_table *t, mount_table_changed_fn changed, void *userdata,
			     struct error_info *err)
{
	struct diff_ctx c = { t, changed, userdata, false };
	uint64_t *ids = NULL;
	size_t n = 0;
	int r;

	r = mount_list(MOUNT_LIST_ROOT, &ids, &n);
	if (r < 0)
		return err_set(err, r, "listing the mounts (listmount): %s", strerror(-r));
	/* What is reported is reported at the generation of this read, as with events. */
	t->generation++;
	/* Mounts that came and went by events since the last read: the by_id index says which
	 * of the new IDs are known; the old list may still name mounts an event removed. */
	r = mount_ids_diff(t->ids, t->n_ids, ids, n, diff_cb, &c);
	if (r < 0) {
		free(ids);
		return err_set(err, r, "reading the mounts (statmount): %s", strerror(-r));
	}
	/* Indexed mounts the list does not show: the diff saw every mount of the last read go,
	 * so only those events indexed since (and whose detach was lost) are left.  Dropped. */
	for (size_t k = 0; k < t->n_event_ids; k++)
		if (!ids_contain(ids, n, t->event_ids[k]))
			remove_by_id(t, t->event_ids[k], changed, userdata);
	t->n_event_ids = 0;
	if (t->cap_event_ids > 1024) { /* a burst of events: not kept until the next one */
		free(t->event_ids);
		t->event_ids = NULL;
		t->cap_event_ids = 0;
	}
	free(t->ids);
	t->ids = ids;
	t->n_ids = n;
	return 0;
}

static int apply_event(const struct mount_event *ev, void *userdata)
{
	struct diff_ctx *c = userdata;
	int r;

	if (ev->mask & MOUNT_EVENT_OVERFLOW)
		return 0;
	if (ev->mask & MOUNT_EVENT_DETACH)
		remove_by_id(c->t, ev->id, c->changed, c->userdata);
	if (ev->mask & MOUNT_EVENT_ATTACH) {
		r = add_by_id(c->t, ev->id, true, c->changed, c->userdata);
		if (r == 1 || (r < 0 && r != -ENOMEM))
			c->unread = true; /* a full read has another go */
		return r == -ENOMEM ? r : 0;
	}
	return 0;
}

/* --- libmount (the fallback) --- */

static int refresh_mountinfo(struct mount_table *t, const char *path,
			     mount_table_changed_fn changed, void *userdata, struct error_info *err)
{
	struct libmnt_table *tb = mnt_new_table();
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	uint64_t seen = t->generation + 1;
	struct hashmap_iter hit = HASHMAP_ITER_INIT;
	struct libmnt_fs *fs;
	void *v;
	int r = 0;

	if (!tb || !it) {
		r = err_set(err, -ENOMEM, "reading the mount table: out of memory");
		goto out;
	}
	r = mnt_table_parse_file(tb, path ? path : "/proc/self/mountinfo");
	if (r != 0) {
		r = err_set(err, r < 0 ? r : -EIO, "reading the mount table %s: %s",
			    path ? path : "/proc/self/mountinfo", strerror(r < 0 ? -r : EIO));
		goto out;
	}
	/* What is reported is reported at the generation of this read, as with events. */
	t->generation = seen;
	while (mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *target = mnt_fs_get_target(fs);
		int id = mnt_fs_get_id(fs);
		unsigned long flags = 0;
		struct mount_info *i;
		char key[24];
		bool ro;

		if (!target || !mount_table_covers(t, target))
			continue;
		if (mnt_optstr_get_flags(mnt_fs_get_vfs_options(fs), &flags,
					 mnt_get_builtin_optmap(MNT_LINUX_MAP)) == 0)
			ro = flags & MS_RDONLY;
		else
			ro = false;
		snprintf(key, sizeof(key), "%d", id);
		i = hashmap_get(t->by_id, key);
		if (i && streq(i->target, target) && i->devno == mnt_fs_get_devno(fs) &&
		    streq(i->root, or_empty(mnt_fs_get_root(fs))) &&
		    streq(i->source, or_empty(mnt_fs_get_source(fs)))) {
			i->seen = seen;
			if (i->read_only != ro) {
				i->read_only = ro;
				report(t, i->target, i->target_hash, changed, userdata);
			}
			continue;
		}
		if (i) /* an ID reused for another mount since the last read */
			remove_by_id(t, (uint64_t)id, changed, userdata);
		i = info_new((uint64_t)id, (uint64_t)mnt_fs_get_parent_id(fs), id, target,
			     mnt_fs_get_fstype(fs), mnt_fs_get_source(fs), mnt_fs_get_root(fs),
			     mnt_fs_get_devno(fs), ro);
		if (!i) {
			r = err_set(err, -ENOMEM, "reading the mount table: out of memory");
			goto out;
		}
		i->seen = seen;
		r = index_add(t, i);
		if (r < 0) {
			err_set(err, r, "reading the mount table: %s", strerror(-r));
			goto out;
		}
		report(t, i->target, i->target_hash, changed, userdata);
	}
	while (hashmap_iterate(t->by_id, &hit, &v, NULL)) {
		struct mount_info *i = v;

		if (i->seen != seen)
			remove_by_id(t, i->mnt_id, changed, userdata);
	}
out:
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return r;
}

int mount_table_refresh(struct mount_table *t, const char *path, mount_table_changed_fn changed,
			void *userdata, struct error_info *err)
{
	if (t->listmount && !path)
		return refresh_listmount(t, changed, userdata, err);
	return refresh_mountinfo(t, path, changed, userdata, err);
}

const struct mount_info *mount_table_get(const struct mount_table *t, const char *target)
{
	return hashmap_get(t->by_target, target);
}

const struct mount_info *mount_table_get_hashed(const struct mount_table *t, const char *target,
						uint32_t hash)
{
	return hashmap_get_hashed(t->by_target, target, hash);
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

/* --- the monitor --- */

struct mount_monitor {
	struct libmnt_monitor *mn;   /* fallback */
	struct mount_notify *notify; /* events */
	int fd;
};

struct mount_monitor *mount_monitor_new(bool try_events, char *reason, size_t reason_size,
					struct error_info *err)
{
	struct mount_monitor *m = calloc(1, sizeof(*m));
	int r;

	if (!m) {
		err_set(err, -ENOMEM, "mount monitor: out of memory");
		return NULL;
	}
	if (!try_events)
		snprintf(reason, reason_size, "mount events turned off (mount-events=off)");
	else if (mount_notify_probe(reason, reason_size)) {
		r = mount_notify_new(-1, &m->notify);
		if (r == 0) {
			m->fd = mount_notify_get_fd(m->notify);
			return m;
		}
		snprintf(reason, reason_size, "fanotify mount events: %s", strerror(-r));
	}
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
	mount_notify_free(m->notify);
	free(m);
	return NULL;
}

bool mount_monitor_has_events(const struct mount_monitor *m)
{
	return m->notify != NULL;
}

int mount_monitor_get_fd(const struct mount_monitor *m)
{
	return m->fd;
}

struct dispatch_ctx {
	struct diff_ctx diff;
	bool overflow;
};

static int dispatch_cb(const struct mount_event *ev, void *userdata)
{
	struct dispatch_ctx *c = userdata;

	if (ev->mask & MOUNT_EVENT_OVERFLOW)
		c->overflow = true;
	return apply_event(ev, &c->diff);
}

int mount_monitor_dispatch(struct mount_monitor *m, struct mount_table *t,
			   mount_table_changed_fn changed, void *userdata)
{
	struct dispatch_ctx c = { { t, changed, userdata, false }, false };
	int changed_any = 0, r;

	if (!m->notify) {
		while ((r = mnt_monitor_next_change(m->mn, NULL, NULL)) == 0)
			changed_any = MOUNT_MONITOR_READ;
		return r < 0 ? r : changed_any;
	}
	t->generation++;
	/* One call: it reads until the queue is empty. */
	r = mount_notify_read_events(m->notify, dispatch_cb, &c);
	if (r < 0)
		return r;
	if (c.overflow)
		return MOUNT_MONITOR_READ;
	return c.diff.unread ? MOUNT_MONITOR_UNREAD : 0;
}
