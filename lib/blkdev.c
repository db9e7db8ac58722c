/* blkdev.c - see blkdev.h. */
#include <blkid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <limits.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "blkdev.h"
#include "macro.h"
#include "path-util.h"
#include "process.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(blkid_probe, blkid_free_probe)

static void copy_value(blkid_probe pr, const char *name, char *buf, size_t size)
{
	const char *v = NULL;

	if (blkid_probe_lookup_value(pr, name, &v, NULL) == 0 && v)
		snprintf(buf, size, "%s", v);
}

/* The first holder of the device at sysfs dir sys (its holders/ dir) into buf. */
static bool first_holder(const char *sys, char *buf, size_t size)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	bool found = false;

	snprintf(path, sizeof(path), "%s/holders", sys);
	d = opendir(path);
	while (d && !found && (de = readdir(d)))
		if (de->d_name[0] != '.') {
			snprintf(buf, size, "%s", de->d_name);
			found = true;
		}
	if (d)
		closedir(d);
	return found;
}

/* Whether devno is rdev or one of its partitions (sysfs: the partition's dir is below the
 * whole disk's). */
static bool is_or_part_of(dev_t devno, dev_t rdev)
{
	char p[64], whole[64], real_p[PATH_MAX], real_whole[PATH_MAX];

	if (devno == rdev)
		return true;
	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u", major(devno), minor(devno));
	snprintf(whole, sizeof(whole), "/sys/dev/block/%u:%u", major(rdev), minor(rdev));
	if (!realpath(p, real_p) || !realpath(whole, real_whole))
		return false;
	return path_is_under(real_p, real_whole) && !streq(real_p, real_whole);
}

/* Why dev (rdev) is busy, into buf: mounted (where), its holders, a partition's holders,
 * or another process's exclusive open. */
static void busy_reason(const char *dev, dev_t rdev, char *buf, size_t size)
{
	struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	char sys[64], holder[256];
	struct dirent *de;
	DIR *d;

	while (tb && it && mnt_table_next_fs(tb, it, &fs) == 0)
		if (mnt_fs_get_devno(fs) && is_or_part_of(mnt_fs_get_devno(fs), rdev) &&
		    mnt_fs_get_srcpath(fs) && mnt_fs_get_target(fs)) {
			snprintf(buf, size, "%s is mounted at %s", mnt_fs_get_srcpath(fs),
				 mnt_fs_get_target(fs));
			goto out;
		}
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(rdev), minor(rdev));
	if (first_holder(sys, holder, sizeof(holder))) {
		snprintf(buf, size, "%s has holders (%s: device-mapper, md or similar)", dev,
			 holder);
		goto out;
	}
	d = opendir(sys);
	while (d && (de = readdir(d))) {
		char part[PATH_MAX], flag[PATH_MAX + 16];

		snprintf(part, sizeof(part), "%s/%s", sys, de->d_name);
		snprintf(flag, sizeof(flag), "%s/partition", part);
		if (de->d_name[0] == '.' || access(flag, F_OK) < 0)
			continue;
		if (first_holder(part, holder, sizeof(holder))) {
			snprintf(buf, size, "its partition %s has holders (%s)", de->d_name,
				 holder);
			closedir(d);
			goto out;
		}
	}
	if (d)
		closedir(d);
	snprintf(buf, size,
		 "%s is in use: mounted in another mount namespace, a partition in use, or open "
		 "exclusively by another process",
		 dev);
out:
	mnt_free_iter(it);
	mnt_unref_table(tb);
}

int blkdev_claim(const char *dev, struct error_info *err)
{
	int fd = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	char why[PATH_MAX + 128];

	if (fd >= 0)
		return fd;
	if (errno != EBUSY)
		return err_set(err, -errno, "device %s: %s", dev, strerror(errno));
	if (stat(dev, &st) < 0)
		return err_set(err, -EBUSY, "device %s is in use", dev);
	busy_reason(dev, st.st_rdev, why, sizeof(why));
	return err_set(err, -EBUSY, "device %s cannot be claimed: %s; refusing to use it", dev,
		       why);
}

int blkdev_probe(const char *dev, struct blkdev_probe *ret, struct error_info *err)
{
	_cleanup_(blkid_free_probep) blkid_probe pr = NULL;
	struct blkdev_probe p = { 0 };
	int rc;

	pr = blkid_new_probe_from_filename(dev);
	if (!pr)
		return err_set(err, errno ? -errno : -EIO, "probe %s: %s", dev,
			       strerror(errno ? errno : EIO));
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE |
						      BLKID_SUBLKS_UUID);
	blkid_probe_enable_partitions(pr, 1);
	blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
	rc = blkid_do_safeprobe(pr);
	if (rc == -2)
		return err_set(err, -EUCLEAN,
			       "%s carries several conflicting signatures; refusing to touch it",
			       dev);
	if (rc < 0)
		return err_set(err, -EIO, "probe %s: libblkid could not read it", dev);
	p.blank = rc == 1;
	if (!p.blank) {
		copy_value(pr, "TYPE", p.type, sizeof(p.type));
		copy_value(pr, "USAGE", p.usage, sizeof(p.usage));
		copy_value(pr, "PTTYPE", p.pttype, sizeof(p.pttype));
		copy_value(pr, "UUID", p.uuid, sizeof(p.uuid));
	}
	*ret = p;
	return 0;
}

bool blkdev_can_format(const char *fstype)
{
	return streq(fstype, "ext4") || streq(fstype, "xfs") || streq(fstype, "ext3") ||
	       streq(fstype, "ext2") || streq(fstype, "btrfs");
}

/* How much of each end of a device must read back before it is formatted. */
#define CHECK_READ_BYTES (1024 * 1024)
#define EXT_SUPER_MAGIC 0xEF53

/* pread of exactly len bytes at off; -EIO for a short read inside the device. */
static int read_exactly(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

/* The block holding block group 1's superblock copy of an ext2/3/4 filesystem with block size
 * bs: the group's first block (blocks per group = 8 * bs; with 1 KiB blocks the groups start
 * at block 1).  What `e2fsck -b` takes. */
static unsigned ext_backup_block(unsigned bs)
{
	return 8 * bs + (bs == 1024 ? 1 : 0);
}

/* Whether that superblock copy, for block size bs, lies in the device of size size and names
 * its own block size and group number. */
static int ext_backup_at(int fd, unsigned long long size, unsigned bs, bool *found)
{
	unsigned char sb[1024];
	unsigned long long off = (unsigned long long)ext_backup_block(bs) * bs;
	uint16_t magic, group;
	uint32_t log_bs;
	int r;

	*found = false;
	if (off + sizeof(sb) > size)
		return 0;
	r = read_exactly(fd, sb, sizeof(sb), (off_t)off);
	if (r < 0)
		return r;
	magic = (uint16_t)(sb[56] | sb[57] << 8);
	log_bs = (uint32_t)sb[24] | (uint32_t)sb[25] << 8 | (uint32_t)sb[26] << 16 |
		 (uint32_t)sb[27] << 24;
	group = (uint16_t)(sb[90] | sb[91] << 8);
	*found = magic == EXT_SUPER_MAGIC && log_bs <= 6 && (1024u << log_bs) == bs && group == 1;
	return 0;
}

int blkdev_check_blank(const char *dev, struct error_info *err)
{
	_cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	_cleanup_free_ char *buf = NULL;
	unsigned long long size = 0;
	static const unsigned sizes[] = { 1024, 2048, 4096 };
	size_t len;
	int r;

	if (fd < 0)
		return err_set(err, -errno, "device %s: %s", dev, strerror(errno));
	if (ioctl(fd, BLKGETSIZE64, &size) < 0)
		return err_set(err, -errno, "device %s: its size: %s", dev, strerror(errno));
	len = size < CHECK_READ_BYTES ? (size_t)size : CHECK_READ_BYTES;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	r = read_exactly(fd, buf, len, 0);
	if (r == 0)
		r = read_exactly(fd, buf, len, (off_t)(size - len));
	if (r < 0)
		return err_set(err, -EIO,
			       "%s probes blank but does not read back (%s); refusing to format "
			       "a device that may hold data libblkid could not read",
			       dev, strerror(-r));
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		bool found;
		r = ext_backup_at(fd, size, sizes[i], &found);
		if (r < 0)
			return err_set(err, -EIO, "%s: reading its block group 1: %s", dev,
				       strerror(-r));
		if (found)
			return err_set(err, -EUCLEAN,
				       "%s probes blank, but a backup superblock of an ext2/3/4 "
				       "filesystem (%u-byte blocks) is in its block group 1: its "
				       "primary superblock was lost or zeroed; refusing to format "
				       "over it (recover it with e2fsck -b %u -B %u, or wipe the "
				       "device to reuse it)",
				       dev, sizes[i], ext_backup_block(sizes[i]), sizes[i]);
	}
	return 0;
}

/* The devices between a claim and the end of their format (blkdev_lock_format). */
static pthread_mutex_t format_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t format_done = PTHREAD_COND_INITIALIZER;
#define FORMAT_SLOTS 64
static dev_t formatting[FORMAT_SLOTS];
static size_t n_formatting;

static bool formatting_has(dev_t rdev)
{
	for (size_t i = 0; i < n_formatting; i++)
		if (formatting[i] == rdev)
			return true;
	return false;
}

void blkdev_lock_format(dev_t rdev)
{
	pthread_mutex_lock(&format_lock);
	while (formatting_has(rdev) || n_formatting == FORMAT_SLOTS)
		pthread_cond_wait(&format_done, &format_lock);
	formatting[n_formatting++] = rdev;
	pthread_mutex_unlock(&format_lock);
}

void blkdev_unlock_format(dev_t rdev)
{
	pthread_mutex_lock(&format_lock);
	for (size_t i = 0; i < n_formatting; i++)
		if (formatting[i] == rdev) {
			formatting[i] = formatting[--n_formatting];
			break;
		}
	pthread_cond_broadcast(&format_done);
	pthread_mutex_unlock(&format_lock);
}

static int run_mkfs(const char *dev, const char *fstype, struct error_info *err)
{
	char prog[32], out[1024];
	const char *argv[6];
	size_t n = 0;
	int rc;

	snprintf(prog, sizeof(prog), "mkfs.%s", fstype);
	argv[n++] = prog;
	if (startswith(fstype, "ext")) {
		argv[n++] = "-q";
		argv[n++] = "-F"; /* no prompt; blankness was checked just before */
	} else if (streq(fstype, "xfs")) {
		argv[n++] = "-q";
	}
	argv[n++] = dev;
	argv[n] = NULL;
	rc = process_run(argv, &(struct process_options){ .timeout_ms = BLKDEV_MKFS_TIMEOUT_MS },
			 out, sizeof(out));
	if (rc == -ENOENT)
		return err_set(err, -ENOENT, "%s not found: install the package that provides it",
			       prog);
	if (rc == -ETIMEDOUT)
		return err_set(err, -ETIMEDOUT,
			       "%s %s did not finish within %ds and was stopped; the device may "
			       "hold a partial filesystem now",
			       prog, dev, BLKDEV_MKFS_TIMEOUT_MS / 1000);
	if (rc < 0)
		return err_set(err, rc, "%s %s: %s", prog, dev, strerror(-rc));
	if (rc != 0) {
		out[strcspn(out, "\n")] = '\0'; /* the first line says why; the rest is usage */
		return err_set(err, -EIO, "%s %s failed (exit %d): %s", prog, dev, rc, out);
	}
	return 0;
}

/* The UUID of the filesystem mkfs just made on dev ("" if it cannot be read back). */
static void uuid_after_mkfs(const char *dev, char *ret_uuid)
{
	struct blkdev_probe p;
	struct error_info ignored = { 0 };

	if (blkdev_probe(dev, &p, &ignored) == 0 && !p.blank)
		snprintf(ret_uuid, BLKDEV_UUID_MAX, "%s", p.uuid);
}

int blkdev_prepare_for_mount(const char *dev, const char *fstype, bool read_only,
			     const char *recorded_uuid, char *ret_type, char *ret_uuid,
			     int *claim_fd, struct error_info *err)
{
	struct blkdev_probe p;
	int rc = blkdev_probe(dev, &p, err);

	if (ret_uuid)
		ret_uuid[0] = '\0';
	if (rc < 0)
		return rc;
	if (recorded_uuid && *recorded_uuid && p.blank)
		return err_set(err, -EUCLEAN,
			       "%s probes blank, but this volume's record says it carries a "
			       "filesystem with UUID %s (made or mounted by this agent): refusing "
			       "to format it again; its start may have been wiped or the name may "
			       "now name another device (check with wipefs and the disk's "
			       "by-id link, recover with fsck from a backup superblock)",
			       dev, recorded_uuid);
	if (p.blank) {
		const char *t = fstype ? fstype : "ext4";
		if (read_only)
			return err_set(
				err, -EROFS,
				"%s has no filesystem and the volume is read-only; refusing to "
				"format it",
				dev);
		if (!blkdev_can_format(t))
			return err_set(err, -EINVAL,
				       "fsType %s: cannot create it (ext4, xfs, btrfs)", t);
		rc = blkdev_check_blank(dev, err);
		if (rc < 0)
			return rc;
		/* mkfs claims the device itself (O_EXCL): ours is handed on to it. */
		if (*claim_fd >= 0)
			close(*claim_fd);
		*claim_fd = -1;
		rc = run_mkfs(dev, t, err);
		if (rc < 0)
			return rc;
		snprintf(ret_type, 32, "%s", t);
		if (ret_uuid)
			uuid_after_mkfs(dev, ret_uuid);
		return 0;
	}
	if (p.pttype[0])
		return err_set(err, -EMEDIUMTYPE,
			       "%s carries a %s partition table; refusing to format or mount it "
			       "(name a partition instead)",
			       dev, p.pttype);
	if (!streq(p.usage, "filesystem"))
		return err_set(
			err, -EMEDIUMTYPE,
			"%s carries a %s signature (%s), not a filesystem; refusing to format "
			"or mount it",
			dev, p.type, p.usage[0] ? p.usage : "unknown use");
	if (fstype && !streq(fstype, p.type))
		return err_set(err, -EMEDIUMTYPE,
			       "%s holds a %s filesystem but fsType is %s; refusing to mount or "
			       "reformat it",
			       dev, p.type, fstype);
	if (!fstype && !blkdev_can_format(p.type))
		return err_set(err, -EMEDIUMTYPE,
			       "%s holds a %s filesystem, not one the agent creates (ext4, xfs, "
			       "btrfs); name it as fsType to mount it",
			       dev, p.type);
	if (recorded_uuid && *recorded_uuid && !streq(p.uuid, recorded_uuid))
		return err_set(err, -ESTALE,
			       "%s holds a %s filesystem with UUID %s, not the %s this volume's "
			       "record names: the device name may now name another disk; refusing "
			       "to mount it",
			       dev, p.type, p.uuid[0] ? p.uuid : "(none)", recorded_uuid);
	snprintf(ret_type, 32, "%s", p.type);
	if (ret_uuid)
		snprintf(ret_uuid, BLKDEV_UUID_MAX, "%s", p.uuid);
	return 0;
}
