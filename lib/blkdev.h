/* blkdev.h - what is on a block device (libblkid safe probe) and formatting a blank one.
 *
 * The format-once rule lives here: a device is formatted only when libblkid finds no
 * signature of any kind on it, neither a filesystem nor a partition table nor anything else. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"

/* mkfs runs through lib/process.h with this deadline (then SIGTERM, SIGKILL): generous,
 * since mkfs.ext4 discards the whole device first and a large thin device can take minutes. */
#define BLKDEV_MKFS_TIMEOUT_MS (10 * 60 * 1000)

#define BLKDEV_UUID_MAX 64

struct blkdev_probe {
	bool blank;	 /* no signature at all */
	char type[32];	 /* superblock TYPE: "ext4", "xfs", "ceph_bluestore", ... */
	char usage[32];	 /* USAGE: "filesystem", "raid", "crypto", "other" */
	char pttype[32]; /* partition table: "gpt", "dos" */
	char uuid[BLKDEV_UUID_MAX];
};

/* Claims dev for the agent: opens it O_EXCL, which the kernel refuses (EBUSY) while the
 * device is mounted anywhere (any mount namespace), held by device-mapper or md (holders), has
 * a partition in use, or is open O_EXCL by another process.  On EBUSY the error says which of
 * these it is (the mount table of the agent's namespace through libmount, and sysfs holders).
 * The caller holds the fd through its probe and closes it just before mkfs, which claims the
 * device itself, as mount(2) does after it: no other exclusive holder can get in between
 * without the next step failing.  Returns the fd, or a negative errno with err set. */
int blkdev_claim(const char *dev, struct error_info *err);

/* Probes dev (superblocks and partition tables, safe probe).  An ambiguous result (several
 * signatures) is -EUCLEAN with a message, never "blank". */
int blkdev_probe(const char *dev, struct blkdev_probe *ret, struct error_info *err);

/* The last look at a device libblkid found blank, before anything formats it: the device must
 * read back (its first and last MiB: a read error must not pass for "nothing found"), and
 * carry no backup superblock of an ext2/3/4 filesystem whose primary superblock is gone
 * (block group 1's copy, for 1, 2 and 4 KiB blocks: a zeroed start of a disk that still holds
 * a filesystem).  0 when it may be formatted; -EIO or -EUCLEAN with a message naming the
 * device and what was found. */
int blkdev_check_blank(const char *dev, struct error_info *err);

/* Serializes, within the agent, the steps from the claim of a device to the end of its
 * format, per device number rdev (st_rdev: two paths of one device are one): two volumes
 * naming the same device cannot both find it blank and both format it.  The second waits
 * for the first's mkfs (or luksFormat), then probes and finds the filesystem.  Take it before
 * blkdev_claim(): a claim held while waiting would make the first's mkfs fail to open the
 * device. */
void blkdev_lock_format(dev_t rdev);
void blkdev_unlock_format(dev_t rdev);

/* Whether fstype is one the agent will create with mkfs. */
bool blkdev_can_format(const char *fstype);

/* Decides how to mount dev: formats it when blank (and !read_only, and blkdev_check_blank
 * agrees), then stores the filesystem type to mount with in ret_type (>= 32 bytes).  Refuses
 * devices holding a partition table or a non-filesystem signature, and a filesystem other
 * than fstype when fstype is given, and without fstype a filesystem the agent cannot create
 * (only the types it formats are mounted: not a squashfs or vfat found on a device).
 * *claim_fd (blkdev_claim, or -1) is closed just before mkfs runs, and set to -1 then.  The
 * caller holds blkdev_lock_format() across its claim and this call.
 *
 * recorded_uuid (may be NULL): the UUID of the filesystem the caller's own record says this
 * volume carries (it formatted or mounted it before).  Then a device that probes blank is
 * never formatted (-EUCLEAN: the record says it was; a wiped start, a read that returned
 * zeros, or another device under the recorded name), and a filesystem with another UUID is
 * not mounted (-ESTALE: the name now names something else).  ret_uuid (BLKDEV_UUID_MAX
 * bytes, may be NULL) gets the UUID of the filesystem to mount: the one found, or the one
 * mkfs just made ("" when the type has none). */
int blkdev_prepare_for_mount(const char *dev, const char *fstype, bool read_only,
			     const char *recorded_uuid, char *ret_type, char *ret_uuid,
			     int *claim_fd, struct error_info *err);
