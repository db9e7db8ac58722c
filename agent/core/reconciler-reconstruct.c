/* reconciler-reconstruct.c - rebuilding the actual state after a restart: the journal, the
 * mount table (device mounts the journal lost are adopted), the pod spec files, and empty pod
 * volume dirs left behind.  Pod mounts found in the table are checked by the first pass. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "block-map.h"
#include "kubelet-record.h"
#include "log.h"
#include "macro.h"
#include "mount-util.h"
#include "path-util.h"
#include "reconciler-internal.h"

/* The escaped volume name of a raw block volume's held device,
 * "volumeDevices/<escaped name>/dev" after the plugin's dir (rest starts at the '/'), as a
 * new string; NULL for any other path. */
static char *held_device_name(const char *rest)
{
	const char *name = rest + strlen("/volumeDevices/"), *end;

	if (!startswith(rest, "/volumeDevices/") || !(end = strchr(name, '/')) ||
	    !streq(end + 1, BLOCK_MAP_HELD_NAME))
		return NULL;
	return strndup(name, (size_t)(end - name));
}

/* The device node a held device's bind shows: a bind of a node of devtmpfs has the node's
 * path below /dev as its root. */
static char *held_device_path(const struct mount_info *mi)
{
	if (mi->root && streq_ptr(mi->fstype, "devtmpfs") && mi->root[0] == '/')
		return strdup_printf("/dev%s", mi->root);
	return mi->source ? strdup(mi->source) : NULL;
}

/* Device mounts under <root>/plugins/kubernetes.io/<plugin>/mounts/ (and raw block volumes'
 * held devices under .../volumeDevices/<name>/dev) that the journal does not describe (it was
 * lost or corrupt): recorded from the table so they are not leaked. */
static void adopt_untracked_device_mounts(struct reconciler *r)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (hashmap_iterate(mount_table_entries(r->table), &it, &v, NULL)) {
		const struct mount_info *mi = v;
		const char *rest = mi->target + strlen(r->plugins_prefix), *slash;
		_cleanup_free_ char *plugin = NULL, *name = NULL, *held = NULL;
		const struct volume_plugin *p;
		struct volume_spec *spec = NULL;
		struct error_info ignored = { 0 };
		struct asw_device *d;

		if (!startswith(mi->target, r->plugins_prefix) || !(slash = strchr(rest, '/')))
			continue;
		held = held_device_name(slash);
		if (!held &&
		    (!startswith(slash, "/mounts/") || strchr(slash + strlen("/mounts/"), '/')))
			continue;
		plugin = strndup(rest, (size_t)(slash - rest));
		name = path_unescape_component(held ? held : slash + strlen("/mounts/"));
		if (!plugin || !name || asw_get_device(r->asw, name))
			continue;
		p = plugin_find_by_name(plugin);
		(void)plugin_construct_spec(p, name, mi->target, &spec, &ignored);
		if (spec && held)
			spec->block = true;
		d = asw_add_device(r->asw, name, plugin, spec, mi->target);
		volume_spec_unref(spec);
		if (!d)
			continue;
		d->mounted = true;
		d->attached = true;
		d->mount_id = mi->id;
		d->att.device_path = held ? held_device_path(mi) : strdup(mi->source);
		journal_mark_dirty(r->journal);
		log_warning("found a device mount the journal did not record, adopting it",
			    "volume", name, "device", mi->source, "target", mi->target);
	}
}

/* Whether the journal's device entry d is what the agent would have made: its mount path
 * derived from the volume's name and the root dir (<root>/plugins/kubernetes.io/<plugin>/
 * mounts/<name>, or the held file of a raw block volume), or for a CSI volume the staging
 * path its own record holds (this boot's CSI entry, or one of an earlier boot) in kubelet's
 * plugins/ or pods/ dir; and an attachment the plugin says it would have made.  -EBADMSG
 * with the reason otherwise. */
static int check_device_entry(struct reconciler *r, const struct asw_device *d,
			      struct error_info *err)
{
	const struct volume_plugin *p = plugin_find_by_name(d->plugin_name);
	_cleanup_free_ char *dir = NULL, *held = NULL;

	if (startswith(d->volume_name, "csi:")) {
		const struct dsw_volume *v = dsw_get_volume(r->dsw, d->volume_name);
		const char *id = d->volume_name + strlen("csi:");

		if (!r->csi.kubelet_root ||
		    !kubelet_path_in_csi_dirs(r->csi.kubelet_root, d->mount_path))
			return err_set(
				err, -EBADMSG,
				"mount_path: %s is not in the kubelet's pods/ or plugins/ dir",
				d->mount_path);
		/* A record alone names nothing to act on (it can only refuse a format). */
		if (!asw_device_is_record_only(d) &&
		    !(v && v->device_mount_path && streq(v->device_mount_path, d->mount_path)) &&
		    !rec_requests_journal_record(r, id, d->mount_path))
			return err_set(err, -EBADMSG,
				       "mount_path: %s is not the staging path the journal's CSI "
				       "entry of the volume holds",
				       d->mount_path);
	} else {
		dir = dsw_device_mount_dir(r->root_dir, d->plugin_name, d->volume_name);
		held = dsw_device_held_path(r->root_dir, d->plugin_name, d->volume_name);
		if (!dir || !held)
			return -ENOMEM;
		if (!streq(d->mount_path, dir) && !streq(d->mount_path, held))
			return err_set(err, -EBADMSG, "mount_path: %s is not %s", d->mount_path,
				       dir);
	}
	return plugin_check_attachment(p, d->volume_name, &d->att, err);
}

/* Refuses the journal's device entries that are not what the agent would have made (a
 * corrupt or hand-edited journal, or a bug that wrote a wrong path): each is logged and
 * forgotten, so that nothing it names is unmounted, detached or removed.  An entry whose
 * attachment is of the right shape but names what is no longer this volume's (-ESTALE: a
 * device unmapped, or its name reused while the agent was down) keeps the entry and loses
 * the attachment, as after a reboot: the volume is attached afresh, never through the name. */
static void refuse_foreign_device_entries(struct reconciler *r)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	void *v;

	while (hashmap_iterate(asw_devices(r->asw), &it, &v, NULL)) {
		struct asw_device *d = v;
		struct error_info why = { 0 };
		int k = check_device_entry(r, d, &why);

		if (k == 0)
			continue;
		if (k == -ESTALE) {
			log_warning("journal: a device's attachment names something else now, "
				    "attaching afresh",
				    "volume", d->volume_name, "plugin", d->plugin_name, "device",
				    d->att.device_path, "reason", err_msg(&why));
			d->attached = false;
			device_attachment_clear(&d->att);
			journal_mark_dirty(r->journal);
			continue;
		}
		log_error("journal: device entry refused, leaving what it names alone", "volume",
			  d->volume_name, "plugin", d->plugin_name, "mount_path", d->mount_path,
			  "error", k == -EBADMSG ? err_msg(&why) : strerror(-k));
		asw_remove_device(r->asw, d->volume_name);
		journal_mark_dirty(r->journal);
	}
}

/* Opens name in the directory dir_fd as a directory, never through a symlink (O_NOFOLLOW):
 * a pod dir or plugin dir planted as a link out of the root is skipped.  NULL otherwise. */
static DIR *open_subdir(int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d)
		close(fd);
	return d;
}

/* Removes the empty volume dirs of one plugin dir of a pod (names, opened; its path dir):
 * those no spec wants and nothing mounts.  Returns how many it removed. */
static unsigned remove_stale_names(struct reconciler *r, DIR *names, const char *dir)
{
	unsigned removed = 0;
	struct dirent *n;
	int here = -1;

	(void)mnt_util_mount_id_at(dirfd(names), ".", &here);
	while ((n = readdir(names))) {
		char target[PATH_MAX];
		struct stat st;
		int id = -1;

		if (!path_is_safe_component(n->d_name))
			continue;
		if (snprintf(target, sizeof(target), "%s/%s", dir, n->d_name) >=
		    (int)sizeof(target))
			continue;
		if (dsw_get_pod_volume(r->dsw, target) || mount_table_get(r->table, target))
			continue;
		/* A directory of its own (not a link), on the same mount as its parent. */
		if (fstatat(dirfd(names), n->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) ||
		    mnt_util_mount_id_at(dirfd(names), n->d_name, &id) < 0 || id != here)
			continue;
		if (unlinkat(dirfd(names), n->d_name, AT_REMOVEDIR) == 0) {
			removed++;
			log_debug("reconcile", "removed empty pod volume dir", "dir", target);
		}
	}
	return removed;
}

/* Removes empty pod volume dirs that nothing mounts and no spec wants (left by a crash
 * between mkdir and mount, or by pods deleted while the agent was down), and the empty
 * parents of those it removed.  The walk goes by directory fds opened with O_NOFOLLOW and
 * removes with unlinkat, so a pod dir that is a symlink (planted, or swapped in meanwhile)
 * never leads it out of the root.  Called once, by the pass that makes the agent ready,
 * after READY: it reads every pod's dirs (a third of a restart's time at 10,000 volumes) and
 * nothing waits for it.  A dir the desired state wants or the table shows mounted is kept,
 * so the first pass's operations in flight are safe. */
void rec_remove_stale_pod_dirs(struct reconciler *r)
{
	int root_fd = open(r->pods_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *pods = root_fd >= 0 ? fdopendir(root_fd) : NULL;
	struct dirent *p;

	if (!pods) {
		if (root_fd >= 0)
			close(root_fd);
		return;
	}
	while ((p = readdir(pods))) {
		DIR *pod, *plugins;
		struct dirent *pl;
		unsigned removed = 0;

		if (!path_is_safe_component(p->d_name) ||
		    !(pod = open_subdir(dirfd(pods), p->d_name)))
			continue;
		plugins = open_subdir(dirfd(pod), "volumes");
		while (plugins && (pl = readdir(plugins))) {
			char dir[PATH_MAX];
			DIR *names;
			unsigned n;

			if (!startswith(pl->d_name, "kubernetes.io~") ||
			    snprintf(dir, sizeof(dir), "%s/%s/volumes/%s", r->pods_root, p->d_name,
				     pl->d_name) >= (int)sizeof(dir) ||
			    !(names = open_subdir(dirfd(plugins), pl->d_name)))
				continue;
			n = remove_stale_names(r, names, dir);
			closedir(names);
			if (n > 0)
				(void)unlinkat(dirfd(plugins), pl->d_name, AT_REMOVEDIR);
			removed += n;
		}
		if (plugins)
			closedir(plugins);
		if (removed > 0 && unlinkat(dirfd(pod), "volumes", AT_REMOVEDIR) == 0)
			(void)unlinkat(dirfd(pods), p->d_name, AT_REMOVEDIR);
		closedir(pod);
	}
	closedir(pods);
}

/* The targets listed for the orphan sweep: borrowed keys, and the ones it made itself. */
struct target_list {
	const char **targets;
	size_t n, size;
	char **owned;
	size_t n_owned;
};

static bool target_list_grow(struct target_list *l)
{
	size_t want;
	const char **t;

	if (l->n < l->size)
		return true;
	want = l->size ? l->size * 2 : 64;
	t = reallocarray(l->targets, want, sizeof(*t));
	if (!t)
		return false;
	l->targets = t;
	l->size = want;
	return true;
}

/* Appends the keys of h (strings; after the first \x1f where key_sep). */
static bool add_keys(struct target_list *l, const struct hashmap *h, bool key_sep)
{
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	const char *key;

	while (h && hashmap_iterate(h, &it, NULL, &key)) {
		const char *sep = key_sep ? strchr(key, '\x1f') : NULL;

		if (!target_list_grow(l))
			return false;
		l->targets[l->n++] = sep ? sep + 1 : key;
	}
	return true;
}

/* kubelet_recorded_targets' callback: appends a copy of target. */
static int add_recorded(const char *target, void *userdata)
{
	struct target_list *l = userdata;
	char **o, *copy;

	o = reallocarray(l->owned, l->n_owned + 1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	l->owned = o;
	copy = strdup(target);
	if (!copy || !target_list_grow(l)) {
		free(copy);
		return -ENOMEM;
	}
	l->owned[l->n_owned++] = copy;
	l->targets[l->n++] = copy;
	return 0;
}

static void target_list_clear(struct target_list *l)
{
	for (size_t i = 0; i < l->n_owned; i++)
		free(l->owned[i]);
	free(l->owned);
	free(l->targets);
}

/* Every target the agent knows: desired (spec files, CSI), mounted (the state, the table),
 * worked on, or recorded by an earlier boot's journal and waiting for kubelet; and every CSI
 * target kubelet's own record (vol_data.json) still names this driver for, so that a publish
 * answered OK whose journal record was lost (a crash before the save, a full state disk)
 * keeps its data until kubelet publishes it again or unpublishes it.  A plugin's orphan is
 * what belongs to none of them: the agent was down, or died in a tear-down, when its target
 * went.  Without memory for the list, or when kubelet's records cannot be read, nothing is
 * removed. */
void rec_remove_orphans(struct reconciler *r)
{
	struct target_list l = { 0 };
	const struct volume_plugin *p;
	int k = 0;

	if (!add_keys(&l, dsw_pod_volumes(r->dsw), false) ||
	    !add_keys(&l, asw_pod_mounts(r->asw), false) ||
	    !add_keys(&l, mount_table_entries(r->table), false) ||
	    !add_keys(&l, r->ops.inflight_pod, false) || !add_keys(&l, r->csi.recorded, true))
		goto out;
	if (r->csi.kubelet_root && r->csi.driver_name)
		k = kubelet_recorded_targets(r->csi.kubelet_root, r->csi.driver_name, add_recorded,
					     &l);
	if (k < 0) {
		log_warning("cannot read kubelet's volume records, removing no orphan", "dir",
			    r->csi.kubelet_root, "error", strerror(-k));
		goto out;
	}
	for (size_t i = 0; (p = plugin_registry_get(i)); i++) {
		struct error_info err = { 0 };
		unsigned removed = 0;

		if (plugin_remove_orphans(p, l.targets, l.n, &removed, &err) < 0)
			log_warning("could not remove what a gone target left", "plugin", p->name,
				    "error", err_msg(&err));
		if (removed)
			log_info("removed what gone targets left", "plugin", p->name, "count",
				 LOG_INT(removed));
	}
out:
	target_list_clear(&l);
}

/* Microseconds since *t, and *t moved to now: the phases of a restart, timed at debug level. */
static long lap_us(struct timespec *t)
{
	struct timespec now;
	long us;

	clock_gettime(CLOCK_MONOTONIC, &now);
	us = (now.tv_sec - t->tv_sec) * 1000000 + (now.tv_nsec - t->tv_nsec) / 1000;
	*t = now;
	return us;
}

/* A journal not read as it was (torn: moved aside): said once in the log and in status, and
 * saved anew from what the agent goes on with. */
static void journal_startup_problem(struct reconciler *r, bool read_previous,
				    struct error_info *err)
{
	if (read_previous)
		log_warning("journal unreadable; read the copy its last save replaced", "error",
			    err_msg(err));
	else
		log_error("journal is corrupt; continuing from the mount table alone", "error",
			  err_msg(err));
	snprintf(r->journal_health.note, sizeof(r->journal_health.note), "%s: %s",
		 read_previous ? "unreadable at startup, read its previous copy"
			       : "corrupt at startup, moved aside",
		 err_msg(err));
	err_clear(err);
	journal_mark_dirty(r->journal);
}

int rec_reconstruct(struct reconciler *r, struct error_info *err)
{
	long journal_us, table_us, specs_us = 0;
	struct hashmap_iter it = HASHMAP_ITER_INIT;
	struct timespec t;
	bool same_boot = false;
	json_t *csi = NULL;
	int k;
	void *v;

	clock_gettime(CLOCK_MONOTONIC, &t);
	k = journal_load(r->journal, r->asw, &same_boot, &csi, err);
	if (k == -EBADMSG || k == JOURNAL_LOADED_PREVIOUS)
		journal_startup_problem(r, k == JOURNAL_LOADED_PREVIOUS, err);
	else if (k < 0)
		return k;
	/* CSI entries are kubelet's: after a reboot it calls again for what it still wants, so
	 * only entries of this boot are restored (a deleted pod is not resurrected). */
	if (csi && same_boot && r->csi.kubelet_root) {
		k = rec_requests_import_csi(r, csi, err);
		if (k < 0) {
			log_error(
				"journal: CSI entries unreadable, waiting for kubelet to call again",
				"error", err_msg(err));
			err_clear(err);
		}
	} else if (csi && !same_boot) {
		log_info("journal is from an earlier boot: CSI entries wait for kubelet");
		rec_requests_note_earlier_boot(r, csi);
	}
	json_decref(csi);
	refuse_foreign_device_entries(r);
	/* Written once at start even if nothing changes: proves the state dir works, and
	 * records this boot's id. */
	journal_mark_dirty(r->journal);
	/* After a reboot nothing an attach made survives. */
	while (!same_boot && hashmap_iterate(asw_devices(r->asw), &it, &v, NULL)) {
		struct asw_device *d = v;
		d->attached = false;
		device_attachment_clear(&d->att);
		journal_mark_dirty(r->journal);
	}
	journal_us = lap_us(&t);
	/* The spec files are parsed on a helper thread while this one reads the mount table:
	 * the two are independent.  They reach the desired state only in
	 * spec_source_scan_finish(), after the table, as before. */
	if (r->specs) {
		k = spec_source_scan_begin(r->specs);
		if (k < 0)
			return err_set(err, k, "reading pods dir %s: %s", r->pods_dir,
				       strerror(-k));
	}
	/* Not logged here: the caller of reconciler_start logs err once. */
	k = rec_refresh_table(r, err);
	if (k < 0)
		return k; /* reconciler_free() waits for the helper */
	adopt_untracked_device_mounts(r);
	table_us = lap_us(&t);
	if (r->specs) {
		k = spec_source_scan_finish(r->specs);
		if (k < 0)
			return err_set(err, k, "reading pods dir %s: %s", r->pods_dir,
				       strerror(-k));
		specs_us = lap_us(&t);
	}
	/* specs_us is what parsing took beyond the table read, plus applying the results. */
	log_debug("reconcile", "reconstruction timed", "journal_us", LOG_INT(journal_us),
		  "table_us", LOG_INT(table_us), "specs_us", LOG_INT(specs_us));
	log_info("reconstructed actual state", "pod_mounts",
		 LOG_INT(hashmap_size(asw_pod_mounts(r->asw))), "devices",
		 LOG_INT(hashmap_size(asw_devices(r->asw))), "desired_pod_volumes",
		 LOG_INT(hashmap_size(dsw_pod_volumes(r->dsw))), "journal_same_boot",
		 same_boot ? "true" : "false");
	return 0;
}
