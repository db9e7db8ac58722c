/* blkdev.h - what is on a block device (libblkid safe probe) and formatting a blank one.
 *
 * The format-once rule lives here: a device is formatted only when libblkid finds no
 * signature of any kind on it, neither a filesystem nor a partition table nor anything else. */
#pragma once

#include <stdbool.h>

#include "error.h"

/* mkfs runs through lib/process.h with this deadline (then SIGTERM, SIGKILL): generous,
 * since mkfs.ext4 discards the whole device first and a large thin device can take minutes. */
#define BLKDEV_MKFS_TIMEOUT_MS (10 * 60 * 1000)

struct blkdev_probe {
	bool blank;	 /* no signature at all */
	char type[32];	 /* superblock TYPE: "ext4", "xfs", "ceph_bluestore", ... */
	char usage[32];	 /* USAGE: "filesystem", "raid", "crypto", "other" */
	char pttype[32]; /* partition table: "gpt", "dos" */
	char uuid[64];
};

/* Probes dev (superblocks and partition tables, safe probe).  An ambiguous result (several
 * signatures) is -EUCLEAN with a message, never "blank". */
int blkdev_probe(const char *dev, struct blkdev_probe *ret, struct error_info *err);

/* Whether fstype is one the agent will create with mkfs. */
bool blkdev_can_format(const char *fstype);

/* Decides how to mount dev: formats it when blank (and !read_only), then stores the
 * filesystem type to mount with in ret_type (>= 32 bytes).  Refuses devices holding a
 * partition table or a non-filesystem signature, and a filesystem other than fstype when
 * fstype is given. */
int blkdev_prepare_for_mount(const char *dev, const char *fstype, bool read_only, char *ret_type,
			     struct error_info *err);
