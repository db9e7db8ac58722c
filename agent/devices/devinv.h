/* devinv.h - the node's block devices, each with a stable identity.
 *
 * A scan enumerates the "block" subsystem through libudev (which reads sysfs, and udev's
 * database under /run/udev when a udev daemon keeps one), probes each device with libblkid
 * (superblocks and partitions, safe probe) and reads a bluestore label where blkid found one.
 *
 * Every device gets a stable id "<kind>:<value>" from the strongest identity it has, never
 * from its kernel name.  The kinds, strongest first:
 *
 *   wwn        whole disks only: the by-id name of a world-wide name ("wwn-0x5000c500...",
 *              "nvme-eui.0011..."), as udev names it (devid.h), from sysfs or else udev
 *   serial     whole disks only: the by-id name of a serial number ("virtio-SER1",
 *              "nvme-Model_SER1", "scsi-0QEMU_QEMU_HARDDISK_SER1", "ata-Model_SER1"); serials
 *              of cloned virtual disks are not unique, so a shared one is marked duplicate
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
	DEVINV_ID_SERIAL,
	DEVINV_ID_DM_UUID,
	DEVINV_ID_PARTUUID,
	DEVINV_ID_PTUUID,
	DEVINV_ID_BLUESTORE,
	DEVINV_ID_FS_UUID,
	_DEVINV_ID_MAX,
};

struct devinv_device {
	char *name; /* kernel name: sda, sda1, loop3, dm-0 */
	char *path; /* device node, /dev/<name> */
	char *syspath;
	char *parent; /* for a partition, the kernel name of its disk */
	dev_t devnum;
	uint64_t size;	  /* bytes */
	const char *type; /* disk, part, loop, lvm, crypt, mpath, dm, md, rom */
	bool ro, removable, rota;
	bool udev_initialized; /* udev's database has this device */
	/* NULL when neither sysfs nor udev knows them. */
	char *model, *serial, *wwn;
	char *dm_name, *dm_uuid;
	char *back_file; /* loop devices */
	char **links;	 /* /dev/disk/by-* links, from udev; NULL-terminated */
	/* From libblkid; NULL when absent. */
	char *fstype, *uuid, *label, *partuuid, *pttype, *ptuuid;
	bool has_bluestore;
	struct bluestore_label bluestore;
	char *probe_error;  /* why libblkid could not tell, or NULL */
	char **holders;	    /* kernel names, NULL-terminated */
	char **mountpoints; /* NULL-terminated */
	enum devinv_id_kind id_kind;
	char *stable_id;       /* "<kind>:<value>", NULL for kind none */
	const char *id_source; /* where the stable id came from: "sysfs", "udev", "blkid",
				 * "bluestore label"; NULL for kind none */
	char **by_id;	       /* the /dev/disk/by-id names udev gives (or would give) this
				 * device, computed from sysfs, strongest first; NULL-terminated */
	bool duplicate_id;     /* another device has the same stable id */
};

struct devinv {
	struct devinv_device **devices; /* sorted by name, partitions after their disk */
	size_t n_devices;
	bool udev_db; /* udev's database was there and used */
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
 * ("/dev/mapper/vg-lv"), or that by-id name ("/dev/disk/by-id/virtio-SER1" or "virtio-SER1",
 * resolved through the inventory, so the link need not exist); NULL when there is none or
 * when a by-id name fits more than one device. */
const struct devinv_device *devinv_find(const struct devinv *inv, const char *name);
/* The devices whose by-id names include name ("/dev/disk/by-id/X" or "X"): the first in
 * *ret, and how many there are (more than one: a duplicate serial).  Returns the count. */
size_t devinv_find_by_id(const struct devinv *inv, const char *name,
			 const struct devinv_device **ret);

/* The device's identity of one kind (the value without the "<kind>:" prefix), or NULL. */
const char *devinv_device_identity(const struct devinv_device *d, enum devinv_id_kind kind);
/* Whether the device has this identity.  Also true for the wwn value earlier versions wrote
 * ("naa.5000c500..._<serial>": sysfs wwid and serial), so that saved records stay valid. */
bool devinv_device_has_identity(const struct devinv_device *d, enum devinv_id_kind kind,
				const char *value);
/* The hardware identity of a whole disk (kind wwn, else serial), or NULL; *ret_kind is set. */
const char *devinv_device_hw_identity(const struct devinv_device *d, enum devinv_id_kind *ret_kind);

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
