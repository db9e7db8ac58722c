/* devinv.c - enumerates block devices through libudev and probes them with libblkid, then
 * gives each a stable id (see devinv.h for the kinds and their order).
 *
 * Facts come from sysfs first and from udev's database only where sysfs has nothing, so that a
 * device's stable id is the same whether or not a udev daemon runs on the node.  A disk's
 * hardware identity is the /dev/disk/by-id name udev gives it, computed from sysfs the way
 * udev's rules compute it (devid.c), so the id is the same with and without udev and is the
 * name a user writes.  Library code: nothing here logs above debug. */
#include <blkid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <libudev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "devid.h"
#include "devinv.h"
#include "file-util.h"
#include "log.h"
#include "macro.h"

#define SYSFS_ATTR_MAX 4096
#define RAM_MAJOR 1

static const char *const id_kind_names[_DEVINV_ID_MAX] = {
	[DEVINV_ID_NONE] = "none",	     [DEVINV_ID_WWN] = "wwn",
	[DEVINV_ID_SERIAL] = "serial",	     [DEVINV_ID_DM_UUID] = "dm-uuid",
	[DEVINV_ID_PARTUUID] = "partuuid",   [DEVINV_ID_PTUUID] = "ptuuid",
	[DEVINV_ID_BLUESTORE] = "bluestore", [DEVINV_ID_FS_UUID] = "fs-uuid",
};

/* Each device's identities by kind, kept beside the public fields so lookups are cheap. */
struct device_priv {
	struct devinv_device pub;
	char *identity[_DEVINV_ID_MAX];
	const char *source[_DEVINV_ID_MAX];
	struct devid hw;       /* by-id names; for a partition, its disk's with "-part<n>" */
	const char *hw_source; /* "sysfs" or "udev" */
	char *legacy_wwn;      /* the wwn identity as versions before by-id names wrote it */
};

static struct device_priv *priv(const struct devinv_device *d)
{
	return (struct device_priv *)d;
}

const char *devinv_id_kind_to_string(enum devinv_id_kind kind)
{
	if ((unsigned)kind >= _DEVINV_ID_MAX)
		return "none";
	return id_kind_names[kind];
}

int devinv_id_kind_from_string(const char *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(id_kind_names); i++)
		if (streq(s, id_kind_names[i]))
			return (int)i;
	return -EINVAL;
}

static char **strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
	return NULL;
}

/* Appends s (taking it) to the NULL-terminated vector *v. */
static int strv_consume(char ***v, char *s)
{
	size_t n = 0;
	char **nv;

	if (!s)
		return -ENOMEM;
	while (*v && (*v)[n])
		n++;
	nv = realloc(*v, (n + 2) * sizeof(char *));
	if (!nv) {
		free(s);
		return -ENOMEM;
	}
	nv[n] = s;
	nv[n + 1] = NULL;
	*v = nv;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

static void strv_sort(char **v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	if (n > 1)
		qsort(v, n, sizeof(char *), cmp_str);
}

/* A sysfs attribute below syspath ("size", "device/model") with trailing whitespace cut, or
 * NULL when it is absent, unreadable or empty. */
static char *sysfs_read(const char *syspath, const char *attr)
{
	char buf[SYSFS_ATTR_MAX];
	ssize_t n = file_read_at(syspath, attr, buf, sizeof(buf) - 1);

	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	if (n == 0 || memchr(buf, '\0', (size_t)n))
		return NULL;
	return strdup(buf);
}

static bool sysfs_bool(const char *syspath, const char *attr)
{
	_cleanup_free_ char *v = sysfs_read(syspath, attr);

	return v && streq(v, "1");
}

static bool sysfs_exists(const char *syspath, const char *attr)
{
	_cleanup_free_ char *path = strdup_printf("%s/%s", syspath, attr);

	return path && access(path, F_OK) == 0;
}

/* A udev property as a fresh string, or NULL. */
static char *udev_prop(struct udev_device *dev, const char *key)
{
	const char *v = udev_device_get_property_value(dev, key);

	return v && *v ? strdup(v) : NULL;
}

static char *first_of(char *a, char *b)
{
	if (a) {
		free(b);
		return a;
	}
	return b;
}

static struct devinv_device *device_free(struct devinv_device *d)
{
	struct device_priv *p = priv(d);

	if (!d)
		return NULL;
	free(d->name);
	free(d->path);
	free(d->syspath);
	free(d->parent);
	free(d->model);
	free(d->serial);
	free(d->wwn);
	free(d->dm_name);
	free(d->dm_uuid);
	free(d->back_file);
	strv_free(d->links);
	free(d->fstype);
	free(d->uuid);
	free(d->label);
	free(d->partuuid);
	free(d->pttype);
	free(d->ptuuid);
	free(d->probe_error);
	strv_free(d->holders);
	strv_free(d->mountpoints);
	free(d->stable_id);
	for (size_t i = 0; i < _DEVINV_ID_MAX; i++)
		free(p->identity[i]);
	devid_done(&p->hw);
	free(p->legacy_wwn);
	free(p);
	return NULL;
}

struct devinv *devinv_free(struct devinv *inv)
{
	if (!inv)
		return NULL;
	for (size_t i = 0; i < inv->n_devices; i++)
		device_free(inv->devices[i]);
	free(inv->devices);
	free(inv);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct devinv *, devinv_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct udev_enumerate *, udev_enumerate_unref);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct udev_device *, udev_device_unref);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct udev *, udev_unref);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct libmnt_table *, mnt_unref_table);

static const char *dm_type(const char *dm_uuid)
{
	if (!dm_uuid)
		return "dm";
	if (startswith(dm_uuid, "LVM-"))
		return "lvm";
	if (startswith(dm_uuid, "CRYPT-"))
		return "crypt";
	if (startswith(dm_uuid, "mpath-"))
		return "mpath";
	if (startswith(dm_uuid, "part"))
		return "part";
	return "dm";
}

static const char *device_type(const struct devinv_device *d)
{
	_cleanup_free_ char *scsi_type = NULL;

	if (d->parent)
		return "part";
	if (d->dm_name || d->dm_uuid)
		return dm_type(d->dm_uuid);
	if (startswith(d->name, "loop"))
		return "loop";
	if (startswith(d->name, "md"))
		return "md";
	scsi_type = sysfs_read(d->syspath, "device/type");
	if (scsi_type && streq(scsi_type, "5"))
		return "rom";
	return "disk";
}

/* Holders are the devices stacked on this one (dm, md), as sysfs lists them. */
static int read_holders(struct devinv_device *d)
{
	_cleanup_free_ char *path = strdup_printf("%s/holders", d->syspath);
	DIR *dir;
	struct dirent *de;
	int r = 0;

	if (!path)
		return -ENOMEM;
	dir = opendir(path);
	if (!dir)
		return 0;
	while ((de = readdir(dir)) && r == 0)
		if (de->d_name[0] != '.')
			r = strv_consume(&d->holders, strdup(de->d_name));
	closedir(dir);
	strv_sort(d->holders);
	return r;
}

static int read_links(struct devinv_device *d, struct udev_device *dev)
{
	struct udev_list_entry *e;
	int r;

	udev_list_entry_foreach(e, udev_device_get_devlinks_list_entry(dev))
	{
		const char *link = udev_list_entry_get_name(e);

		if (!startswith(link, "/dev/disk/by-"))
			continue;
		r = strv_consume(&d->links, strdup(link));
		if (r < 0)
			return r;
	}
	strv_sort(d->links);
	return 0;
}

static int read_mountpoints(struct devinv_device *d, struct libmnt_table *tb)
{
	struct libmnt_iter *it;
	struct libmnt_fs *fs;
	int r = 0;

	if (!tb)
		return 0;
	it = mnt_new_iter(MNT_ITER_FORWARD);
	if (!it)
		return -ENOMEM;
	while (r == 0 && mnt_table_next_fs(tb, it, &fs) == 0)
		if (mnt_fs_get_devno(fs) == d->devnum && mnt_fs_get_target(fs))
			r = strv_consume(&d->mountpoints, strdup(mnt_fs_get_target(fs)));
	mnt_free_iter(it);
	return r;
}

static char *probe_value(blkid_probe pr, const char *name)
{
	const char *v = NULL;

	if (blkid_probe_lookup_value(pr, name, &v, NULL) != 0 || !v || !*v)
		return NULL;
	return strdup(v);
}

/* libblkid's view of the device: TYPE, UUID, LABEL, PARTUUID, PTTYPE, PTUUID. */
static void probe_device(struct devinv_device *d)
{
	blkid_probe pr;
	int r;

	pr = blkid_new_probe_from_filename(d->path);
	if (!pr) {
		d->probe_error =
			strdup_printf("cannot open %s: %s", d->path, strerror(errno ? errno : EIO));
		return;
	}
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_LABEL | BLKID_SUBLKS_UUID |
						      BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, BLKID_PARTS_ENTRY_DETAILS);
	r = blkid_do_safeprobe(pr);
	if (r == -2)
		d->probe_error = strdup("more than one signature: libblkid will not guess which");
	else if (r < 0)
		d->probe_error = strdup_printf("probe failed: %s", strerror(errno ? errno : EIO));
	else if (r == 0) {
		d->fstype = probe_value(pr, "TYPE");
		d->uuid = probe_value(pr, "UUID");
		d->label = probe_value(pr, "LABEL");
		d->partuuid = probe_value(pr, "PART_ENTRY_UUID");
		d->pttype = probe_value(pr, "PTTYPE");
		d->ptuuid = probe_value(pr, "PTUUID");
	}
	blkid_free_probe(pr);

	if (d->fstype && streq(d->fstype, "ceph_bluestore")) {
		r = bluestore_label_read(d->path, &d->bluestore);
		if (r == 0)
			d->has_bluestore = true;
		else if (!d->probe_error)
			d->probe_error =
				strdup_printf("bluestore label unreadable: %s", strerror(-r));
	}
}

/* A short suffix for a BlueFS label ("bluefs db" -> "db"), NULL for the main device. */
static const char *bluestore_role(const struct bluestore_label *l)
{
	if (!l->description[0] || streq(l->description, "main"))
		return NULL;
	if (startswith(l->description, "bluefs "))
		return l->description + strlen("bluefs ");
	return l->description;
}

bool devinv_device_is_osd(const struct devinv_device *d)
{
	return d->has_bluestore && !bluestore_role(&d->bluestore);
}

static int set_identities(struct devinv_device *d)
{
	struct device_priv *p = priv(d);
	bool whole_disk = streq(d->type, "disk") || streq(d->type, "rom");

	if (whole_disk && p->hw.wwn_name) {
		p->identity[DEVINV_ID_WWN] = strdup(p->hw.wwn_name);
		p->source[DEVINV_ID_WWN] = p->hw_source;
	}
	if (whole_disk && p->hw.serial_name) {
		p->identity[DEVINV_ID_SERIAL] = strdup(p->hw.serial_name);
		p->source[DEVINV_ID_SERIAL] = p->hw_source;
	}
	if (whole_disk && d->wwn)
		p->legacy_wwn = d->serial ? strdup_printf("%s_%s", d->wwn, d->serial)
					  : strdup(d->wwn);
	p->source[DEVINV_ID_DM_UUID] = "sysfs";
	p->source[DEVINV_ID_PARTUUID] = p->source[DEVINV_ID_PTUUID] = "blkid";
	p->source[DEVINV_ID_FS_UUID] = "blkid";
	p->source[DEVINV_ID_BLUESTORE] = "bluestore label";
	if (d->dm_uuid)
		p->identity[DEVINV_ID_DM_UUID] = strdup(d->dm_uuid);
	if (d->partuuid)
		p->identity[DEVINV_ID_PARTUUID] = strdup(d->partuuid);
	if (d->ptuuid)
		p->identity[DEVINV_ID_PTUUID] = strdup(d->ptuuid);
	if (d->has_bluestore) {
		const char *role = bluestore_role(&d->bluestore);
		p->identity[DEVINV_ID_BLUESTORE] =
			role ? strdup_printf("%s/%s", d->bluestore.osd_uuid, role)
			     : strdup(d->bluestore.osd_uuid);
	} else if (d->uuid) {
		p->identity[DEVINV_ID_FS_UUID] = strdup(d->uuid);
	}

	d->id_kind = DEVINV_ID_NONE;
	for (int k = DEVINV_ID_NONE + 1; k < _DEVINV_ID_MAX; k++)
		if (p->identity[k]) {
			d->id_kind = k;
			d->id_source = p->source[k];
			d->stable_id = strdup_printf("%s:%s", id_kind_names[k], p->identity[k]);
			return d->stable_id ? 0 : -ENOMEM;
		}
	return 0;
}

const char *devinv_device_identity(const struct devinv_device *d, enum devinv_id_kind kind)
{
	if (!d || kind <= DEVINV_ID_NONE || kind >= _DEVINV_ID_MAX)
		return NULL;
	return priv(d)->identity[kind];
}

bool devinv_device_has_identity(const struct devinv_device *d, enum devinv_id_kind kind,
				const char *value)
{
	const char *v = devinv_device_identity(d, kind);

	if (v && strcasecmp(v, value) == 0)
		return true;
	return d && kind == DEVINV_ID_WWN && priv(d)->legacy_wwn &&
	       strcasecmp(priv(d)->legacy_wwn, value) == 0;
}

const char *devinv_device_hw_identity(const struct devinv_device *d, enum devinv_id_kind *ret_kind)
{
	const char *v = devinv_device_identity(d, DEVINV_ID_WWN);

	*ret_kind = DEVINV_ID_WWN;
	if (!v) {
		v = devinv_device_identity(d, DEVINV_ID_SERIAL);
		*ret_kind = v ? DEVINV_ID_SERIAL : DEVINV_ID_NONE;
	}
	return v;
}

/* A by-id link that names a whole disk by its hardware, not a partition or a stacked device. */
static bool udev_hw_link(const char *name)
{
	const char *part = strstr(name, "-part");

	if (startswith(name, "dm-") || startswith(name, "lvm-") || startswith(name, "md-"))
		return false;
	return !part || !part[5] || strspn(part + 5, "0123456789") != strlen(part + 5);
}

/* When sysfs gives no hardware identity (USB, a bus devid.c does not know), udev's by-id links,
 * if there is a udev database. */
static int hw_from_udev(struct device_priv *p)
{
	struct devinv_device *d = &p->pub;
	int r;

	for (size_t i = 0; d->links && d->links[i]; i++) {
		const char *name = d->links[i];

		if (!startswith(name, "/dev/disk/by-id/"))
			continue;
		name += strlen("/dev/disk/by-id/");
		if (!udev_hw_link(name))
			continue;
		if (startswith(name, "wwn-") && !p->hw.wwn_name) {
			p->hw.wwn_name = strdup(name);
			if (!p->hw.wwn_name)
				return -ENOMEM;
		} else if (!startswith(name, "wwn-") && !p->hw.serial_name) {
			p->hw.serial_name = strdup(name);
			if (!p->hw.serial_name)
				return -ENOMEM;
		}
		r = strv_consume(&p->hw.names, strdup(name));
		if (r < 0)
			return r;
	}
	if (p->hw.names)
		p->hw_source = "udev";
	return 0;
}

/* Builds one device from its udev record; returns 1 when the device is to be left out. */
static int device_new(struct udev_device *dev, unsigned flags, struct libmnt_table *mounts,
		      struct devinv_device **ret)
{
	struct device_priv *p;
	struct devinv_device *d;
	_cleanup_free_ char *size = NULL;
	const char *node = udev_device_get_devnode(dev);
	const char *sysname = udev_device_get_sysname(dev);
	const char *syspath = udev_device_get_syspath(dev);
	dev_t devnum = udev_device_get_devnum(dev);
	struct udev_device *disk;
	int r;

	if (!node || !sysname || !syspath)
		return 1;
	if (major(devnum) == RAM_MAJOR && !(flags & DEVINV_SCAN_ALL))
		return 1;
	size = sysfs_read(syspath, "size");
	if ((!size || streq(size, "0")) && !(flags & DEVINV_SCAN_ALL))
		return 1;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	d = &p->pub;
	d->name = strdup(sysname);
	d->path = strdup(node);
	d->syspath = strdup(syspath);
	if (!d->name || !d->path || !d->syspath) {
		device_free(d);
		return -ENOMEM;
	}
	d->devnum = devnum;
	d->size = size ? strtoull(size, NULL, 10) * 512 : 0;
	d->udev_initialized = udev_device_get_is_initialized(dev) > 0;

	disk = NULL;
	if (sysfs_exists(syspath, "partition")) {
		disk = udev_device_get_parent_with_subsystem_devtype(dev, "block", "disk");
		if (disk && udev_device_get_sysname(disk))
			d->parent = strdup(udev_device_get_sysname(disk));
	}
	d->dm_name = sysfs_read(syspath, "dm/name");
	d->dm_uuid = sysfs_read(syspath, "dm/uuid");
	d->back_file = sysfs_read(syspath, "loop/backing_file");
	d->type = device_type(d);
	{
		/* Removable and rotational are properties of the disk a partition is on. */
		const char *whole = disk ? udev_device_get_syspath(disk) : syspath;
		d->ro = sysfs_bool(syspath, "ro");
		d->removable = sysfs_bool(whole, "removable");
		d->rota = sysfs_bool(whole, "queue/rotational");
	}
	if (!d->parent) {
		d->model =
			first_of(sysfs_read(syspath, "device/model"), udev_prop(dev, "ID_MODEL"));
		d->serial = first_of(sysfs_read(syspath, "serial"),
				     first_of(sysfs_read(syspath, "device/serial"),
					      udev_prop(dev, "ID_SERIAL_SHORT")));
		d->wwn = first_of(sysfs_read(syspath, "wwid"),
				  first_of(sysfs_read(syspath, "device/wwid"),
					   first_of(udev_prop(dev, "ID_WWN_WITH_EXTENSION"),
						    udev_prop(dev, "ID_WWN"))));
	}
	r = read_links(d, dev);
	if (r == 0 && !d->parent && (streq(d->type, "disk") || streq(d->type, "rom"))) {
		r = devid_from_sysfs(dev, &p->hw);
		if (r == 0 && p->hw.names)
			p->hw_source = "sysfs";
		else if (r == 0)
			r = hw_from_udev(p);
		d->by_id = p->hw.names;
	}
	if (r == 0)
		r = read_holders(d);
	if (r == 0)
		r = read_mountpoints(d, mounts);
	if (r < 0) {
		device_free(d);
		return r;
	}
	probe_device(d);
	r = set_identities(d);
	if (r < 0) {
		device_free(d);
		return r;
	}
	*ret = d;
	return 0;
}

/* Disks in name order ("sda" < "sdb" < "sdaa", "loop2" < "loop10"), each followed by its
 * partitions in number order. */
static int cmp_device(const void *a, const void *b)
{
	const struct devinv_device *x = *(struct devinv_device *const *)a;
	const struct devinv_device *y = *(struct devinv_device *const *)b;
	int r = strverscmp(x->parent ?: x->name, y->parent ?: y->name);

	if (r != 0)
		return r;
	if (!x->parent != !y->parent)
		return x->parent ? 1 : -1;
	return strverscmp(x->name, y->name);
}

/* A partition's by-id names are its disk's with "-part<n>", as udev makes them. */
static int partition_by_ids(struct devinv *inv)
{
	for (size_t i = 0; i < inv->n_devices; i++) {
		struct devinv_device *d = inv->devices[i];
		const struct devinv_device *disk = d->parent ? devinv_find(inv, d->parent) : NULL;
		_cleanup_free_ char *num = NULL;
		int r;

		if (!disk || !disk->by_id)
			continue;
		num = sysfs_read(d->syspath, "partition");
		if (!num)
			continue;
		for (size_t k = 0; disk->by_id[k]; k++) {
			r = strv_consume(&priv(d)->hw.names,
					 strdup_printf("%s-part%s", disk->by_id[k], num));
			if (r < 0)
				return r;
		}
		d->by_id = priv(d)->hw.names;
	}
	return 0;
}

static void mark_duplicates(struct devinv *inv)
{
	for (size_t i = 0; i < inv->n_devices; i++)
		for (size_t j = i + 1; j < inv->n_devices; j++) {
			struct devinv_device *a = inv->devices[i], *b = inv->devices[j];
			if (a->stable_id && b->stable_id && streq(a->stable_id, b->stable_id))
				a->duplicate_id = b->duplicate_id = true;
		}
}

int devinv_scan(struct udev *udev_in, unsigned flags, struct devinv **ret, struct error_info *err)
{
	_cleanup_(udev_unrefp) struct udev *own_udev = NULL;
	_cleanup_(udev_enumerate_unrefp) struct udev_enumerate *en = NULL;
	_cleanup_(mnt_unref_tablep) struct libmnt_table *mounts = NULL;
	_cleanup_(devinv_freep) struct devinv *inv = NULL;
	struct udev *udev = udev_in;
	struct udev_list_entry *e;
	size_t cap = 0;
	int r;

	if (!udev) {
		udev = own_udev = udev_new();
		if (!udev)
			return err_set(err, -ENOMEM, "cannot create a libudev context");
	}
	en = udev_enumerate_new(udev);
	if (!en)
		return err_set(err, -ENOMEM, "cannot create a libudev enumerator");
	r = udev_enumerate_add_match_subsystem(en, "block");
	if (r >= 0)
		r = udev_enumerate_scan_devices(en);
	if (r < 0)
		return err_set(err, r, "cannot enumerate block devices: %s", strerror(-r));
	/* Without the mount table the inventory is still right, only mount points are absent. */
	mounts = mnt_new_table_from_file("/proc/self/mountinfo");

	inv = calloc(1, sizeof(*inv));
	if (!inv)
		return -ENOMEM;
	udev_list_entry_foreach(e, udev_enumerate_get_list_entry(en))
	{
		_cleanup_(udev_device_unrefp) struct udev_device *dev = NULL;
		struct devinv_device *d = NULL;

		dev = udev_device_new_from_syspath(udev, udev_list_entry_get_name(e));
		if (!dev)
			continue; /* gone since the scan */
		r = device_new(dev, flags, mounts, &d);
		if (r < 0)
			return err_set(err, r, "%s: %s", udev_list_entry_get_name(e), strerror(-r));
		if (r > 0)
			continue;
		if (inv->n_devices == cap) {
			struct devinv_device **nv;
			cap = cap ? cap * 2 : 32;
			nv = realloc(inv->devices, cap * sizeof(*nv));
			if (!nv) {
				device_free(d);
				return -ENOMEM;
			}
			inv->devices = nv;
		}
		inv->devices[inv->n_devices++] = d;
		if (d->udev_initialized)
			inv->udev_db = true;
		log_debug("devinv", "device probed", "name", d->name, "stable_id",
			  d->stable_id ?: "none", "probe_error", d->probe_error ?: "");
	}
	if (inv->n_devices > 1)
		qsort(inv->devices, inv->n_devices, sizeof(*inv->devices), cmp_device);
	r = partition_by_ids(inv);
	if (r < 0)
		return err_set(err, r, "out of memory");
	mark_duplicates(inv);
	*ret = TAKE_PTR(inv);
	return 0;
}

void devinv_filter(struct devinv *inv, bool (*keep)(const struct devinv_device *d, void *arg),
		   void *arg)
{
	_cleanup_free_ bool *verdict = calloc(inv->n_devices ? inv->n_devices : 1, sizeof(bool));
	size_t kept = 0;

	if (!verdict)
		return; /* out of memory: keeping too much is the safe side */
	/* Decide for all first: keep() may look at devices that are about to go. */
	for (size_t i = 0; i < inv->n_devices; i++)
		verdict[i] = keep(inv->devices[i], arg);
	for (size_t i = 0; i < inv->n_devices; i++) {
		if (verdict[i])
			inv->devices[kept++] = inv->devices[i];
		else
			device_free(inv->devices[i]);
	}
	inv->n_devices = kept;
}

const struct devinv_device *devinv_find(const struct devinv *inv, const char *name)
{
	const struct devinv_device *found;
	const char *bare = name;

	if (startswith(name, "/dev/mapper/")) {
		for (size_t i = 0; i < inv->n_devices; i++)
			if (streq_ptr(inv->devices[i]->dm_name, name + strlen("/dev/mapper/")))
				return inv->devices[i];
		return NULL;
	}
	if (startswith(name, "/dev/"))
		bare = name + strlen("/dev/");
	for (size_t i = 0; i < inv->n_devices; i++)
		if (streq(inv->devices[i]->name, bare) || streq(inv->devices[i]->path, name))
			return inv->devices[i];
	return devinv_find_by_id(inv, name, &found) == 1 ? found : NULL;
}

size_t devinv_find_by_id(const struct devinv *inv, const char *name,
			 const struct devinv_device **ret)
{
	const char *id = startswith(name, "/dev/disk/by-id/") ? name + strlen("/dev/disk/by-id/")
							      : name;
	size_t n = 0;

	*ret = NULL;
	for (size_t i = 0; i < inv->n_devices; i++) {
		char **v = inv->devices[i]->by_id;

		for (size_t k = 0; v && v[k]; k++)
			if (streq(v[k], id)) {
				if (!n++)
					*ret = inv->devices[i];
				break;
			}
	}
	return n;
}

char *devinv_identity_phrase(const struct devinv_device *d, enum devinv_id_kind kind,
			     const char *value)
{
	switch (kind) {
	case DEVINV_ID_WWN:
		return strdup_printf("wwn %s", value);
	case DEVINV_ID_SERIAL:
		return strdup_printf("serial %s", value);
	case DEVINV_ID_DM_UUID:
		return strdup_printf("dm uuid %s", value);
	case DEVINV_ID_PARTUUID:
		return strdup_printf("partuuid %s", value);
	case DEVINV_ID_PTUUID:
		if (d && d->pttype)
			return strdup_printf("%s ptuuid %s", d->pttype, value);
		return strdup_printf("ptuuid %s", value);
	case DEVINV_ID_BLUESTORE:
		if (d && d->has_bluestore && d->bluestore.osd_id >= 0)
			return strdup_printf("bluestore osd uuid %s (osd.%d)", value,
					     d->bluestore.osd_id);
		return strdup_printf("bluestore osd uuid %s", value);
	case DEVINV_ID_FS_UUID:
		if (d && d->fstype)
			return strdup_printf("%s uuid %s", d->fstype, value);
		return strdup_printf("uuid %s", value);
	default:
		return strdup("no identity");
	}
}
