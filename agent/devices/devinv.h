/* devinv.h - the node's block devices, each with a stable identity.
 *
 * A scan enumerates the "block" subsystem through libudev (which reads sysfs, and udev's
 * database under /run/udev when a udev daemon keeps one), probes each device with libblkid
 * (superblocks and partitions, safe probe) and reads a bluestore label where blkid found one.
 *
 * Every device gets a stable id "<kind>:<value>" from the strongest identity it has, never
 * from its kernel name.  The kinds, strongest first:
 *
 *   wwn        whole disks only: the WWN, with "_<serial>" appended when a serial is known
 *   dm-uuid    device-mapper devices: the DM uuid (LVM-..., CRYPT-..., mpath-...)
 *   partuuid   partitions: the partition table's entry uuid
 *   ptuuid     disks with a partition table: the table's uuid (GPT) or disk id (DOS)
 *   bluestore  a Ceph bluestore label: the OSD uuid ("/db" or "/wal" for BlueFS devices)
 *   fs-uuid    a filesystem or other superblock with a UUID
 *
 * A device with none of them (a blank disk) has no stable id and kind "none".  The kind stays
 * in the id, so that ids of different kinds never collide, and two devices that do end up with
 * the same id (cloned disks, serials that are not unique) are both marked duplicate. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "bluestore-label.h"
#include "error.h"

struct udev;

enum devinv_id_kind {
	DEVINV_ID_NONE,
	DEVINV_ID_WWN,
	DEVINV_ID_DM_UUID,
	DEVINV_ID_PARTUUID,
	DEVINV_ID_PTUUID,
	DEVINV_ID_BLUESTORE,
	DEVINV_ID_FS_UUID,
	_DEVINV_ID_MAX,
};

struct devinv_device {
	char *name;		/* kernel name: sda, sda1, loop3, dm-0 */
	char *path;		/* device node, /dev/<name> */
	char *syspath;
	char *parent;		/* for a partition, the kernel name of its disk */
	dev_t devnum;
	uint64_t size;		/* bytes */
	const char *type;	/* disk, part, loop, lvm, crypt, mpath, dm, md, rom */
	bool ro, removable, rota;
	bool udev_initialized;	/* udev's database has this device */
	/* NULL when neither sysfs nor udev knows them. */
	char *model, *serial, *wwn;
	char *dm_name, *dm_uuid;
	char *back_file;	/* loop devices */
	char **links;		/* /dev/disk/by-* links, from udev; NULL-terminated */
	/* From libblkid; NULL when absent. */
	char *fstype, *uuid, *label, *partuuid, *pttype, *ptuuid;
	bool has_bluestore;
	struct bluestore_label bluestore;
	char *probe_error;	/* why libblkid could not tell, or NULL */
	char **holders;		/* kernel names, NULL-terminated */
	char **mountpoints;	/* NULL-terminated */
	enum devinv_id_kind id_kind;
	char *stable_id;	/* "<kind>:<value>", NULL for kind none */
	bool duplicate_id;	/* another device has the same stable id */
};

struct devinv {
	struct devinv_device **devices;	/* sorted by name, partitions after their disk */
	size_t n_devices;
	bool udev_db;			/* udev's database was there and used */
};

enum {
	/* Also list devices of size 0 (unbound loop devices) and RAM disks. */
	DEVINV_SCAN_ALL = 1 << 0,
};

/* Enumerates and probes every block device.  udev may be NULL (a context is made for the
 * scan).  A device that cannot be probed is kept, with probe_error set.
 * Returns: 0 on success, negative errno when enumeration itself fails (err says why). */
int devinv_scan(struct udev *udev, unsigned flags, struct devinv **ret, struct error_info *err);
struct devinv *devinv_free(struct devinv *inv);

/* Keeps only the devices for which keep returns true; frees the others. */
void devinv_filter(struct devinv *inv, bool (*keep)(const struct devinv_device *d, void *arg),
		   void *arg);

/* The device named name ("sda"), or with that node ("/dev/sda"), or that device-mapper name
 * ("/dev/mapper/vg-lv"); NULL when there is none. */
const struct devinv_device *devinv_find(const struct devinv *inv, const char *name);

/* The device's identity of one kind (the value without the "<kind>:" prefix), or NULL. */
const char *devinv_device_identity(const struct devinv_device *d, enum devinv_id_kind kind);

/* Whether this device is the main device of a bluestore OSD. */
bool devinv_device_is_osd(const struct devinv_device *d);

const char *devinv_id_kind_to_string(enum devinv_id_kind kind);
/* Returns the kind, or -EINVAL for an unknown name. */
int devinv_id_kind_from_string(const char *s);

/* A phrase naming an identity for people: "bluestore osd uuid 1111-...", "ext4 uuid ...".
 * d may be NULL (then the phrase uses only kind and value).  Caller frees. */
char *devinv_identity_phrase(const struct devinv_device *d, enum devinv_id_kind kind,
			     const char *value);

/* The inventory in the shape of `lsblk --json`: {"udev": bool, "blockdevices": [...]}, with
 * partitions under "children" of their disk.  Returns a new reference, NULL on ENOMEM. */
json_t *devinv_to_json(const struct devinv *inv);
/* One device (and its partitions) as in devinv_to_json. */
json_t *devinv_device_to_json(const struct devinv *inv, const struct devinv_device *d);

/* A table for people, one line per device, partitions drawn under their disk, and a note when
 * there was no udev database. */
void devinv_print_table(const struct devinv *inv, FILE *f);
