/* blkdev.c - see blkdev.h. */
#include <blkid.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "blkdev.h"
#include "macro.h"
#include "process.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(blkid_probe, blkid_free_probe)

static void copy_value(blkid_probe pr, const char *name, char *buf, size_t size)
{
	const char *v = NULL;

	if (blkid_probe_lookup_value(pr, name, &v, NULL) == 0 && v)
		snprintf(buf, size, "%s", v);
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

int blkdev_prepare_for_mount(const char *dev, const char *fstype, bool read_only, char *ret_type,
			     struct error_info *err)
{
	struct blkdev_probe p;
	int rc = blkdev_probe(dev, &p, err);

	if (rc < 0)
		return rc;
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
		rc = run_mkfs(dev, t, err);
		if (rc < 0)
			return rc;
		snprintf(ret_type, 32, "%s", t);
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
	snprintf(ret_type, 32, "%s", p.type);
	return 0;
}
