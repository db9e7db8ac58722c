/* bluestore-label.h - the OSD identity in a Ceph bluestore device label.
 *
 * libblkid recognises a bluestore device (TYPE=ceph_bluestore) but reports no UUID for it.
 * The label at offset 0 of the device names the OSD: the text "bluestore block device\n",
 * the OSD uuid as 36 characters and "\n", then a Ceph-encoded bluestore_bdev_label_t (struct
 * version, compat version, length, then osd_uuid, size, btime, description and a string map
 * that holds "whoami" and "ceph_fsid").  Only the first BLUESTORE_LABEL_SIZE bytes are read. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BLUESTORE_LABEL_SIZE 4096
#define BLUESTORE_UUID_LEN 36

struct bluestore_label {
	char osd_uuid[BLUESTORE_UUID_LEN + 1];
	/* From the encoded part; empty or -1 when the label does not carry them. */
	char ceph_fsid[BLUESTORE_UUID_LEN + 1];
	int osd_id;	      /* meta "whoami" */
	char description[32]; /* "main", "bluefs db", "bluefs wal" */
	uint64_t size;	      /* bytes the OSD was made for, 0 when unknown */
};

/* Parses a label from the first len bytes of a device.  The text part (magic and uuid) is
 * required; the encoded part is read field by field with bounds checks and whatever it does
 * not hold is left unset.
 * Returns: 0 on success, -EINVAL when buf does not start with a bluestore label or the uuid
 * is not a well-formed uuid. */
int bluestore_label_parse(const void *buf, size_t len, struct bluestore_label *ret);

/* Reads and parses the label of the device or file at path.
 * Returns: 0 on success, -EINVAL when there is no bluestore label, other negative errno when
 * the device cannot be read. */
int bluestore_label_read(const char *path, struct bluestore_label *ret);

/* Whether s is a uuid in its 36-character text form (hex digits and dashes at 8, 13, 18, 23). */
bool bluestore_uuid_valid(const char *s, size_t len);
