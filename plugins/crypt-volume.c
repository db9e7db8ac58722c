/* crypt-volume.c - see crypt-volume.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "blkdev.h"
#include "block-map.h"
#include "crypt-volume.h"
#include "log.h"
#include "luks.h"
#include "macro.h"

/* A passphrase for one call: in its own locked mapping, left out of core dumps, wiped and
 * unmapped by passphrase_drop. */
struct passphrase {
	char *buf;
	size_t len;
};

static void passphrase_drop(struct passphrase *p)
{
	if (!p->buf)
		return;
	explicit_bzero(p->buf, CRYPT_VOLUME_PASSPHRASE_MAX);
	(void)munlock(p->buf, CRYPT_VOLUME_PASSPHRASE_MAX);
	(void)munmap(p->buf, CRYPT_VOLUME_PASSPHRASE_MAX);
	p->buf = NULL;
	p->len = 0;
}
#define _cleanup_passphrase_ __attribute__((cleanup(passphrase_drop)))

static int passphrase_alloc(struct passphrase *p)
{
	void *m = mmap(NULL, CRYPT_VOLUME_PASSPHRASE_MAX, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return -ENOMEM;
	(void)madvise(m, CRYPT_VOLUME_PASSPHRASE_MAX, MADV_DONTDUMP);
	(void)mlock(m, CRYPT_VOLUME_PASSPHRASE_MAX); /* best effort: RLIMIT_MEMLOCK */
	p->buf = m;
	p->len = 0;
	return 0;
}

bool crypt_volume_requested(const struct volume_spec *spec)
{
	const char *v = spec ? volume_spec_get(spec, CRYPT_VOLUME_ATTR) : NULL;

	return v && streq(v, "true");
}

bool crypt_volume_is_attr(const char *key)
{
	return streq(key, CRYPT_VOLUME_ATTR) || streq(key, CRYPT_VOLUME_ATTR_FILE);
}

int crypt_volume_check_passphrase_file(const char *path, struct error_info *err)
{
	struct stat st;

	if (!path || path[0] != '/')
		return err_set(err, -EINVAL, "must be an absolute path");
	if (lstat(path, &st) < 0)
		return err_set(err, -errno, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return err_set(err, -EPERM, "%s is not a regular file (a symlink?)", path);
	if (st.st_uid != 0)
		return err_set(err, -EPERM, "%s is owned by uid %u, not by root", path,
			       (unsigned)st.st_uid);
	if (st.st_mode & 077)
		return err_set(err, -EPERM,
			       "%s has mode %04o: group and others may have no permission on a "
			       "passphrase file (chmod 0600 or 0400)",
			       path, (unsigned)(st.st_mode & 07777));
	return 0;
}

int crypt_volume_validate(const struct volume_spec *spec, struct error_info *err)
{
	const char *enc = volume_spec_get(spec, CRYPT_VOLUME_ATTR);
	const char *file = volume_spec_get(spec, CRYPT_VOLUME_ATTR_FILE);

	if (enc && !streq(enc, "true") && !streq(enc, "false"))
		return err_set(err, -EINVAL, CRYPT_VOLUME_ATTR ": must be \"true\" or \"false\"");
	if (file && !crypt_volume_requested(spec))
		return err_set(err, -EINVAL,
			       CRYPT_VOLUME_ATTR_FILE ": only for a volume with " CRYPT_VOLUME_ATTR
						      " \"true\"");
	if (file && crypt_volume_check_passphrase_file(file, err) < 0)
		return err_prefix(err, CRYPT_VOLUME_ATTR_FILE);
	return 0;
}

void crypt_volume_mapping_name(const char *volume_name, char *ret)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a, 64 bits */

	for (const unsigned char *c = (const unsigned char *)volume_name; *c; c++)
		h = (h ^ *c) * 0x100000001b3ULL;
	snprintf(ret, CRYPT_VOLUME_NAME_MAX, CRYPT_VOLUME_NAME_PREFIX "%016" PRIx64, h);
}

/* Reads the passphrase file (checked again: it may have changed since the spec was read). */
static int read_passphrase_file(const char *path, struct passphrase *p, struct error_info *err)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	ssize_t n;
	int r;

	r = crypt_volume_check_passphrase_file(path, err);
	if (r < 0)
		return err_prefix(err, CRYPT_VOLUME_ATTR_FILE);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return err_set(err, -errno, CRYPT_VOLUME_ATTR_FILE " %s: %s", path,
			       strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 077))
		return err_set(err, -EPERM, CRYPT_VOLUME_ATTR_FILE " %s changed while read", path);
	if (st.st_size >= CRYPT_VOLUME_PASSPHRASE_MAX)
		return err_set(err, -EINVAL, CRYPT_VOLUME_ATTR_FILE " %s: longer than %d bytes",
			       path, CRYPT_VOLUME_PASSPHRASE_MAX - 1);
	r = passphrase_alloc(p);
	if (r < 0)
		return r;
	while ((n = read(fd, p->buf + p->len, CRYPT_VOLUME_PASSPHRASE_MAX - 1 - p->len)) > 0)
		p->len += (size_t)n;
	if (n < 0)
		return err_set(err, -errno, CRYPT_VOLUME_ATTR_FILE " %s: %s", path,
			       strerror(errno));
	/* `echo secret > file` and the CSI secret "secret" are the same passphrase. */
	if (p->len && p->buf[p->len - 1] == '\n')
		p->len--;
	if (!p->len)
		return err_set(err, -EINVAL, CRYPT_VOLUME_ATTR_FILE " %s is empty", path);
	return 0;
}

static int get_passphrase(const struct volume_spec *spec, struct passphrase *p,
			  struct error_info *err)
{
	const char *file = volume_spec_get(spec, CRYPT_VOLUME_ATTR_FILE);
	const char *secret = volume_spec_get_secret(spec, CRYPT_VOLUME_SECRET);
	size_t len;
	int r;

	if (file)
		return read_passphrase_file(file, p, err);
	if (!secret || !*secret)
		return err_set(err, -EINVAL,
			       "no passphrase: give it in the secrets under " CRYPT_VOLUME_SECRET
			       " (CSI) or as encryption.passphraseFile (pod spec file)");
	len = strlen(secret);
	if (len >= CRYPT_VOLUME_PASSPHRASE_MAX)
		return err_set(err, -EINVAL,
			       "secrets." CRYPT_VOLUME_SECRET ": longer than %d bytes",
			       CRYPT_VOLUME_PASSPHRASE_MAX - 1);
	r = passphrase_alloc(p);
	if (r < 0)
		return r;
	memcpy(p->buf, secret, len);
	p->len = len;
	return 0;
}

static int record(struct device_attachment *att, const char *name, const char *mapping)
{
	char *path = strdup(mapping);

	if (!path || device_attachment_set_meta(att, CRYPT_VOLUME_META_NAME, name) < 0 ||
	    device_attachment_set_meta(att, CRYPT_VOLUME_META_BACKING, att->device_path) < 0) {
		free(path);
		return -ENOMEM;
	}
	free(att->device_path);
	att->device_path = path;
	return 0;
}

/* A volume that does not ask for encryption: its device may carry no LUKS header. */
static int refuse_ciphertext(const char *volume_name, const char *dev, struct error_info *err)
{
	struct blkdev_probe pr;
	struct error_info ignored = { 0 };

	/* A device that cannot be probed is left to the mount's own probe. */
	if (blkdev_probe(dev, &pr, &ignored) < 0 || !streq(pr.type, "crypto_LUKS"))
		return 0;
	return err_set(err, -EMEDIUMTYPE,
		       "volume %s: %s carries a LUKS header but the volume does not ask for "
		       "encryption; refusing to hand out ciphertext (set encrypted)",
		       volume_name, dev);
}

/* dev (device number rdev) holds a LUKS header, or is blank and gets one (one
 * probe-to-format at a time per device: blkdev_lock_format); anything else is refused.  The
 * passphrase is read into pass once the device is known to be LUKS or blank.  A header that
 * this agent's own format of this volume (its mapping name as the owner) left without a
 * keyslot, stopped by a crash in the key derivation, is formatted again: nothing was ever
 * written through it.  Any other keyless header stays as it is (luks_open says what it is). */
static int probe_and_format(const struct volume_spec *spec, const char *volume_name,
			    const char *name, const char *dev, dev_t rdev, bool read_only,
			    struct passphrase *pass, struct error_info *err)
{
	struct blkdev_probe pr;
	bool unfinished = false;
	int r;

	blkdev_lock_format(rdev);
	r = blkdev_probe(dev, &pr, err);
	if (r < 0)
		goto out_prefix;
	if (!pr.blank && !streq(pr.type, "crypto_LUKS")) {
		r = err_set(err, -EMEDIUMTYPE,
			    "volume %s asks for encryption but %s carries %s, not LUKS; "
			    "refusing to format over data",
			    volume_name, dev, pr.type[0] ? pr.type : pr.pttype);
		goto out;
	}
	if (!pr.blank) {
		r = luks_unfinished_format(dev, name, err);
		if (r < 0)
			goto out_prefix;
		unfinished = r == 1;
	}
	r = get_passphrase(spec, pass, err);
	if (r < 0 || (!pr.blank && !unfinished))
		goto out_prefix;
	if (read_only) {
		r = err_set(err, -EROFS,
			    "volume %s: %s is blank and the volume is read-only; an encrypted "
			    "volume is formatted only when writable",
			    volume_name, dev);
		goto out;
	}
	r = unfinished ? 0 : blkdev_check_blank(dev, err);
	if (r == 0)
		r = luks_format(dev, name, pass->buf, pass->len, err);
out_prefix:
	if (r < 0)
		err_prefix(err, "volume %s", volume_name);
out:
	blkdev_unlock_format(rdev);
	return r;
}

int crypt_volume_attach(const struct volume_spec *spec, const char *volume_name, bool read_only,
			struct device_attachment *att, struct error_info *err)
{
	_cleanup_passphrase_ struct passphrase pass = { 0 };
	char name[CRYPT_VOLUME_NAME_MAX], open_dev[LUKS_PATH_MAX], mapping[LUKS_PATH_MAX];
	const char *dev = att->device_path;
	struct stat st;
	dev_t backing;
	int r;

	if (!crypt_volume_requested(spec))
		return refuse_ciphertext(volume_name, dev, err);
	if (stat(dev, &st) < 0)
		return err_set(err, -errno, "volume %s: device %s: %s", volume_name, dev,
			       strerror(errno));
	crypt_volume_mapping_name(volume_name, name);
	/* Open already (a restart, a crash between open and mount): adopt it, no second open. */
	r = luks_lookup(name, &backing, open_dev);
	if (r < 0)
		return err_set(err, r, "volume %s: mapping %s: %s", volume_name, name,
			       strerror(-r));
	if (r > 0) {
		if (backing != st.st_rdev)
			return err_set(err, -EBUSY,
				       "volume %s: the mapping %s is open on %s, not on %s",
				       volume_name, name, open_dev, dev);
		snprintf(mapping, sizeof(mapping), LUKS_MAPPER_DIR "/%s", name);
		return record(att, name, mapping);
	}
	r = probe_and_format(spec, volume_name, name, dev, st.st_rdev, read_only, &pass, err);
	if (r < 0)
		return r;
	r = luks_open(dev, name, pass.buf, pass.len, read_only, mapping, err);
	if (r < 0)
		return err_prefix(err, "volume %s", volume_name);
	r = record(att, name, mapping);
	if (r < 0) {
		struct error_info ignored = { 0 };
		(void)luks_close(name, &ignored);
	}
	return r;
}

int crypt_volume_detach(const struct device_attachment *att, struct error_info *err)
{
	const char *name = device_attachment_get_meta(att, CRYPT_VOLUME_META_NAME);

	if (!name)
		return 0;
	return luks_close(name, err);
}

int crypt_volume_check_attachment(const char *volume_name, const struct device_attachment *att,
				  struct error_info *err)
{
	const char *name = device_attachment_get_meta(att, CRYPT_VOLUME_META_NAME);
	char want[CRYPT_VOLUME_NAME_MAX], path[LUKS_PATH_MAX];

	if (!name)
		return 0;
	crypt_volume_mapping_name(volume_name, want);
	snprintf(path, sizeof(path), LUKS_MAPPER_DIR "/%s", want);
	if (!streq(name, want) || !streq_ptr(att->device_path, path) ||
	    !device_attachment_get_meta(att, CRYPT_VOLUME_META_BACKING))
		return err_set(err, -EBADMSG,
			       "meta.crypt: %s is not this volume's mapping (%s) over its device",
			       name, want);
	return 0;
}

const char *crypt_volume_backing_device(const struct device_attachment *att)
{
	const char *dev = device_attachment_get_meta(att, CRYPT_VOLUME_META_BACKING);

	return dev ? dev : att->device_path;
}

/* The dm name of the block device at path (any path of it: /dev/mapper/<name>, /dev/dm-N, a
 * bind of it) into name (>= CRYPT_VOLUME_NAME_MAX), from sysfs; -ENODEV when it is no dm
 * device. */
static int dm_name_of(const char *path, char *name)
{
	char sys[96], buf[CRYPT_VOLUME_NAME_MAX];
	_cleanup_close_ int fd = -1;
	struct stat st;
	ssize_t n;

	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISBLK(st.st_mode))
		return -ENODEV;
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/dm/name", major(st.st_rdev),
		 minor(st.st_rdev));
	fd = open(sys, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ENODEV;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return -ENODEV;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(name, CRYPT_VOLUME_NAME_MAX, "%s", buf);
	return 0;
}

int crypt_volume_grow(const char *device_path, struct error_info *err)
{
	char name[CRYPT_VOLUME_NAME_MAX], backing_path[LUKS_PATH_MAX];
	uint64_t size;
	dev_t backing;
	int r;

	if (!device_path || dm_name_of(device_path, name) < 0 ||
	    !startswith(name, CRYPT_VOLUME_NAME_PREFIX)) {
		log_debug("crypt", "expand: no mapping of this layer", "device",
			  device_path ? device_path : "(none)");
		return 0;
	}
	r = luks_lookup(name, &backing, backing_path);
	if (r <= 0)
		return err_set(err, r < 0 ? r : -ENODEV, "mapping %s is not open", name);
	r = block_map_reread_size(backing_path, &size, err);
	if (r < 0)
		return r;
	log_debug("crypt", "expand: growing the mapping to its device", "mapping", name, "device",
		  backing_path);
	return luks_resize(name, err);
}
