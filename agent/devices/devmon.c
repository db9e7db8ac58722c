/* devmon.c - the daemon's device monitor: libudev events in, a fresh inventory, rename lines in
 * the log and an atomically replaced devices.json out.  See devmon.h. */
#include <errno.h>
#include <fcntl.h>
#include <libudev.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devmon.h"
#include "metrics.h"
#include "file-util.h"
#include "log.h"
#include "macro.h"

#define DEVICES_JSON "devices.json"
#define RECV_BUFFER_SIZE (4 * 1024 * 1024)
/* Names remembered for rename detection; beyond this, ids not present now are forgotten. */
#define SEEN_MAX 4096

struct seen {
	char *stable_id;
	char *name;
};

struct devmon {
	char *state_dir;
	struct udev *udev;
	struct udev_monitor *mon;
	const char *source;
	struct devinv *inv;
	char *json;	   /* what devices.json holds */
	struct seen *seen; /* the last name of every stable id seen since start */
	size_t n_seen;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(struct devmon *, devmon_free);

struct devmon *devmon_free(struct devmon *dm)
{
	if (!dm)
		return NULL;
	for (size_t i = 0; i < dm->n_seen; i++) {
		free(dm->seen[i].stable_id);
		free(dm->seen[i].name);
	}
	free(dm->seen);
	free(dm->json);
	devinv_free(dm->inv);
	udev_monitor_unref(dm->mon);
	udev_unref(dm->udev);
	free(dm->state_dir);
	free(dm);
	return NULL;
}

int devmon_get_fd(const struct devmon *dm)
{
	return udev_monitor_get_fd(dm->mon);
}

const struct devinv *devmon_get_inventory(const struct devmon *dm)
{
	return dm->inv;
}

const char *devmon_get_source(const struct devmon *dm)
{
	return dm->source;
}

static int publish(struct devmon *dm, struct error_info *err)
{
	json_auto_t *root = devinv_to_json(dm->inv);
	_cleanup_free_ char *text = NULL, *json = NULL;
	int r;

	if (!root)
		return err_set(err, -ENOMEM, "cannot format the inventory");
	json = json_dumps(root, JSON_INDENT(2));
	text = json ? strdup_printf("%s\n", json) : NULL;
	if (!text)
		return err_set(err, -ENOMEM, "cannot format the inventory");
	if (dm->json && streq(dm->json, text))
		return 0;
	r = file_write_atomic(dm->state_dir, DEVICES_JSON, text, 0644, err);
	if (r < 0)
		return r;
	free(dm->json);
	dm->json = TAKE_PTR(text);
	log_debug("devmon", "devices.json written", "dir", dm->state_dir, "devices",
		  LOG_INT(dm->inv->n_devices));
	return 0;
}

static struct seen *seen_find(struct devmon *dm, const char *stable_id)
{
	for (size_t i = 0; i < dm->n_seen; i++)
		if (streq(dm->seen[i].stable_id, stable_id))
			return &dm->seen[i];
	return NULL;
}

/* Forgets ids that are not on the node now, once the table is full. */
static void seen_trim(struct devmon *dm)
{
	size_t kept = 0;

	for (size_t i = 0; i < dm->n_seen; i++) {
		bool present = false;
		for (size_t k = 0; k < dm->inv->n_devices && !present; k++)
			present = streq_ptr(dm->inv->devices[k]->stable_id, dm->seen[i].stable_id);
		if (present) {
			dm->seen[kept++] = dm->seen[i];
		} else {
			free(dm->seen[i].stable_id);
			free(dm->seen[i].name);
		}
	}
	dm->n_seen = kept;
}

/* Logs each stable id whose kernel name changed since it was last seen. */
static int note_names(struct devmon *dm)
{
	for (size_t i = 0; i < dm->inv->n_devices; i++) {
		const struct devinv_device *d = dm->inv->devices[i];
		struct seen *s, *nv;
		char *name;

		/* A duplicate id names no one device: a "rename" between the two means nothing. */
		if (!d->stable_id || d->duplicate_id)
			continue;
		s = seen_find(dm, d->stable_id);
		if (s) {
			if (streq(s->name, d->name))
				continue;
			metrics_device_renamed();
			log_info("device renamed", "stable_id", d->stable_id, "old_name", s->name,
				 "new_name", d->name);
			name = strdup(d->name);
			if (!name)
				return -ENOMEM;
			free(s->name);
			s->name = name;
			continue;
		}
		if (dm->n_seen >= SEEN_MAX)
			seen_trim(dm);
		nv = realloc(dm->seen, (dm->n_seen + 1) * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		dm->seen = nv;
		nv[dm->n_seen].stable_id = strdup(d->stable_id);
		nv[dm->n_seen].name = strdup(d->name);
		dm->n_seen++;
		if (!nv[dm->n_seen - 1].stable_id || !nv[dm->n_seen - 1].name)
			return -ENOMEM;
	}
	return 0;
}

static int rescan(struct devmon *dm, struct error_info *err)
{
	struct devinv *inv = NULL;
	int r;

	r = devinv_scan(dm->udev, 0, &inv, err);
	if (r < 0)
		return r;
	devinv_free(dm->inv);
	dm->inv = inv;
	metrics_device_inventory_changed();
	r = note_names(dm);
	if (r < 0)
		return err_set(err, r, "out of memory");
	return publish(dm, err);
}

struct devmon *devmon_new(const char *state_dir, struct error_info *err)
{
	_cleanup_(devmon_freep) struct devmon *dm = calloc(1, sizeof(*dm));
	int r;

	if (!dm) {
		err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	dm->state_dir = strdup(state_dir);
	dm->udev = udev_new();
	if (!dm->state_dir || !dm->udev) {
		err_set(err, -ENOMEM, "cannot create a libudev context");
		return NULL;
	}
	if (mkdir(state_dir, 0755) < 0 && errno != EEXIST) {
		err_set(err, -errno, "%s: %s", state_dir, strerror(errno));
		return NULL;
	}
	/* udev's events carry what udev added; without a udev daemon there are none of them. */
	dm->source = access("/run/udev/control", F_OK) == 0 ? "udev" : "kernel";
	dm->mon = udev_monitor_new_from_netlink(dm->udev, dm->source);
	if (!dm->mon) {
		err_set(err, -errno ? -errno : -EIO, "cannot open a %s event monitor: %s",
			dm->source, strerror(errno ? errno : EIO));
		return NULL;
	}
	r = udev_monitor_filter_add_match_subsystem_devtype(dm->mon, "block", NULL);
	if (r >= 0)
		r = udev_monitor_enable_receiving(dm->mon);
	if (r < 0) {
		err_set(err, r, "cannot listen to %s events: %s", dm->source, strerror(-r));
		return NULL;
	}
	/* A burst (a node attaching many disks) must not overflow into lost events. */
	(void)udev_monitor_set_receive_buffer_size(dm->mon, RECV_BUFFER_SIZE);
	r = rescan(dm, err);
	if (r < 0)
		return NULL;
	log_debug("devmon", "watching block devices", "source", dm->source, "devices",
		  LOG_INT(dm->inv->n_devices));
	return TAKE_PTR(dm);
}

int devmon_dispatch(struct devmon *dm, struct error_info *err)
{
	struct udev_device *dev;
	unsigned n = 0;

	while ((dev = udev_monitor_receive_device(dm->mon))) {
		log_debug("devmon", "event", "action", udev_device_get_action(dev) ?: "", "name",
			  udev_device_get_sysname(dev) ?: "");
		udev_device_unref(dev);
		n++;
	}
	if (n == 0)
		return 0;
	return rescan(dm, err);
}
