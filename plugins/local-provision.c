/* local-provision.c - volumes made and deleted by the CSI Controller service: ids, the record
 * on the directory, sizes and capacity.  See local-provision.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "local-path-policy.h"
#include "local-provision.h"
#include "macro.h"
#include "path-util.h"
#include "quota.h"
#include "remove-tree.h"

#define HASH_DIGITS 16
#define RECORD_MAX 4096
/* <basePath>/<id> */
#define VOL_PATH_MAX (PATH_MAX + LOCAL_PROV_ID_MAX + 2)

struct record {
	char name[LOCAL_PROV_ID_MAX * 2];
	uint64_t size;
	bool enforce;
};

static uint64_t fnv1a64(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static bool id_char_plain(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-';
}

/* base encoded as the tail of an id into ret (size bytes).  -EINVAL when it does not fit. */
static int base_encode(const char *base, char *ret, size_t size)
{
	size_t n = 0;

	for (const char *c = base; *c; c++) {
		if (n + 4 > size)
			return -EINVAL;
		if (*c == '/')
			ret[n++] = '.';
		else if (id_char_plain(*c))
			ret[n++] = *c;
		else
			n += (size_t)snprintf(ret + n, 4, "_%02x", (unsigned char)*c);
	}
	ret[n] = '\0';
	return 0;
}

/* The id of name below base into ret (LOCAL_PROV_ID_MAX + 1).  -EINVAL when it is too long. */
static int id_make(const char *name, const char *base, char *ret)
{
	int n = snprintf(ret, LOCAL_PROV_ID_MAX + 1, LOCAL_PROV_ID_PREFIX "%016" PRIx64,
			 fnv1a64(name));

	return base_encode(base, ret + n, LOCAL_PROV_ID_MAX + 1 - (size_t)n);
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

bool local_prov_id_parse(const char *id, char *ret_base)
{
	const size_t head = strlen(LOCAL_PROV_ID_PREFIX) + HASH_DIGITS;
	char base[PATH_MAX], again[LOCAL_PROV_ID_MAX + 1];
	struct error_info err = { 0 };
	size_t n = 0;

	if (strlen(id) > LOCAL_PROV_ID_MAX || strlen(id) <= head ||
	    !startswith(id, LOCAL_PROV_ID_PREFIX) || id[head] != '.')
		return false;
	for (size_t i = strlen(LOCAL_PROV_ID_PREFIX); i < head; i++)
		if (hex_digit(id[i]) < 0)
			return false;
	for (const char *c = id + head; *c; c++) {
		if (*c == '.')
			base[n++] = '/';
		else if (id_char_plain(*c))
			base[n++] = *c;
		else if (*c == '_' && hex_digit(c[1]) >= 0 && hex_digit(c[2]) >= 0) {
			base[n++] = (char)(hex_digit(c[1]) * 16 + hex_digit(c[2]));
			c += 2;
		} else
			return false;
	}
	base[n] = '\0';
	/* Only the one spelling local_prov_create makes, of a normalized path, is ours. */
	if (path_validate_absolute(base, "basePath", &err) < 0 ||
	    base_encode(base, again, sizeof(again)) < 0 || !streq(again, id + head))
		return false;
	if (ret_base)
		snprintf(ret_base, PATH_MAX, "%s", base);
	return true;
}

void local_prov_params_init(struct local_prov_params *params)
{
	*params = (struct local_prov_params){ .enforce = true };
}

int local_prov_param_set(struct local_prov_params *params, const char *key, const char *value,
			 struct error_info *err)
{
	if (strchr(key, '/'))
		return 0;
	if (streq(key, "basePath")) {
		if (strlen(value) >= sizeof(params->base_path))
			return err_set(err, -EINVAL, "basePath: too long");
		snprintf(params->base_path, sizeof(params->base_path), "%s", value);
		return 0;
	}
	if (streq(key, "enforceSize")) {
		if (!streq(value, "true") && !streq(value, "false"))
			return err_set(err, -EINVAL, "enforceSize: \"%s\" is not true or false",
				       value);
		params->enforce = streq(value, "true");
		return 0;
	}
	return err_set(err, -EINVAL,
		       "unknown key \"%s\" (the local plugin takes basePath and "
		       "enforceSize)",
		       key);
}

/* The lexical checks of a base path: -EINVAL with err naming basePath. */
static int check_base(const char *base, struct error_info *err)
{
	struct error_info why = { 0 };
	char id[LOCAL_PROV_ID_MAX + 1];

	if (!*base)
		return err_set(err, -EINVAL,
			       "basePath: required (a parameter of the StorageClass)");
	if (path_validate_absolute(base, "basePath", err) < 0)
		return -EINVAL;
	if (local_path_policy_check_below_prefix(base, &why) < 0) {
		const char *m = err_msg(&why);

		return err_set(err, -EINVAL, "basePath: %s",
			       startswith(m, "path: ") ? m + strlen("path: ") : m);
	}
	if (id_make("", base, id) < 0)
		return err_set(err, -EINVAL,
			       "basePath: %s is too long for a volume id of at most %d bytes", base,
			       LOCAL_PROV_ID_MAX);
	return 0;
}

/* Opens base (checked) as a directory for reading, no symlink on the way. */
static int open_base(const char *base, int *ret_fd, struct error_info *err)
{
	_cleanup_close_ int path_fd = -1;
	int r = path_open_dir_below("/", base + 1, false, 0, &path_fd, err);

	if (r < 0)
		return err_prefix(err, "basePath");
	*ret_fd = openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*ret_fd < 0)
		return err_set(err, -errno, "basePath: %s: %s", base, strerror(errno));
	return 0;
}

/* Reads the record of the directory fd: 1 and *ret, 0 when it has none (or a malformed one,
 * or one of a newer version that this agent cannot read: never taken for ours). */
static int record_read(int fd, struct record *ret)
{
	char buf[RECORD_MAX];
	ssize_t n;
	json_t *o;
	json_int_t version, size;
	const char *name;
	int enforce;
	int r = 0;

	n = fgetxattr(fd, LOCAL_PROV_XATTR, buf, sizeof(buf));
	if (n <= 0)
		return 0;
	o = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
	if (o &&
	    json_unpack(o, "{s:I, s:s, s:I, s:b}", "version", &version, "name", &name, "size",
			&size, "enforce", &enforce) == 0 &&
	    version >= 1 && version <= LOCAL_PROV_RECORD_VERSION && size >= 0 &&
	    strlen(name) < sizeof(ret->name)) {
		snprintf(ret->name, sizeof(ret->name), "%s", name);
		ret->size = (uint64_t)size;
		ret->enforce = enforce;
		r = 1;
	}
	json_decref(o);
	return r;
}

static int record_write(int fd, const struct record *rec, const char *path, struct error_info *err)
{
	json_t *o = json_pack("{s:i, s:s, s:I, s:b}", "version", LOCAL_PROV_RECORD_VERSION, "name",
			      rec->name, "size", (json_int_t)rec->size, "enforce", rec->enforce);
	_cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	int r = 0;

	json_decref(o);
	if (!text)
		return err_set(err, -ENOMEM, "out of memory");
	if (fsetxattr(fd, LOCAL_PROV_XATTR, text, strlen(text), 0) < 0)
		r = err_set(
			err, -errno,
			"%s: cannot record the volume in the extended attribute " LOCAL_PROV_XATTR
			": %s",
			path, strerror(errno));
	return r;
}

/* What the volume dir fd keeps of the free space: an enforced size its limit less its
 * project's usage, a recorded size all of it. */
static uint64_t reserved(int fd, const struct record *rec)
{
	struct quota_usage q;

	if (!rec->size)
		return 0;
	if (rec->enforce && quota_prj_dir_usage(fd, &q) == 1)
		return q.bytes_used >= q.bytes_limit ? 0 : q.bytes_limit - q.bytes_used;
	return rec->size;
}

/* local_prov_capacity() of the open base dir fd. */
static int capacity_at(int base_fd, const char *base, uint64_t *ret, struct error_info *err)
{
	char tail[LOCAL_PROV_ID_MAX + 1];
	struct statvfs sv;
	uint64_t sum = 0, free_bytes;
	struct dirent *de;
	DIR *d;
	int dfd;

	if (fstatvfs(base_fd, &sv) < 0)
		return err_set(err, -errno, "basePath: %s: statvfs: %s", base, strerror(errno));
	free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (base_encode(base, tail, sizeof(tail)) < 0)
		return err_set(err, -EINVAL, "basePath: %s is too long", base);
	dfd = fcntl(base_fd, F_DUPFD_CLOEXEC, 0);
	d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return err_set(err, -errno, "basePath: %s: %s", base, strerror(errno));
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		struct record rec;
		int fd;

		/* Only the volumes of this base: an id ending in its encoded path. */
		if (!startswith(name, LOCAL_PROV_ID_PREFIX) ||
		    strlen(name) != strlen(LOCAL_PROV_ID_PREFIX) + HASH_DIGITS + strlen(tail) ||
		    !local_prov_id_parse(name, NULL) ||
		    !streq(name + strlen(LOCAL_PROV_ID_PREFIX) + HASH_DIGITS, tail))
			continue;
		fd = openat(base_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (record_read(fd, &rec) == 1)
			sum += reserved(fd, &rec);
		close(fd);
	}
	closedir(d);
	*ret = free_bytes > sum ? free_bytes - sum : 0;
	return 0;
}

int local_prov_capacity(const char *base_path, uint64_t *ret_bytes, struct error_info *err)
{
	_cleanup_close_ int base_fd = -1;
	int r = check_base(base_path, err);

	if (r < 0)
		return r;
	r = open_base(base_path, &base_fd, err);
	if (r < 0)
		return r;
	return capacity_at(base_fd, base_path, ret_bytes, err);
}

/* The size a capacity range asks for: required, else limit, else 0.  -EINVAL (negative) or
 * -ERANGE (limit below required) with err set. */
static int range_size(int64_t required, int64_t limit, uint64_t *ret, struct error_info *err)
{
	if (required < 0 || limit < 0)
		return err_set(err, -EINVAL, "capacity_range: %s_bytes is negative",
			       required < 0 ? "required" : "limit");
	if (limit && required > limit)
		return err_set(err, -ERANGE,
			       "capacity_range: limit_bytes %" PRId64
			       " is below required_bytes %" PRId64,
			       limit, required);
	*ret = (uint64_t)(required ? required : limit);
	return 0;
}

/* Whether a volume of size fits the range asked for again. */
static bool range_fits(uint64_t size, int64_t required, int64_t limit)
{
	if (!required && !limit)
		return true;
	return size >= (uint64_t)required && (!limit || size <= (uint64_t)limit);
}

/* The size of volume dir fd (path), enforced as its record says: a project quota, after
 * checking that the filesystem enforces them.  A recorded size sets nothing. */
static int apply_size(int fd, const char *path, const struct record *rec, struct error_info *err)
{
	if (!rec->enforce || !rec->size)
		return 0;
	return quota_prj_set_size(fd, path, path, rec->size, NULL, err);
}

int local_prov_create(const char *name, const struct local_prov_params *params, int64_t required,
		      int64_t limit, struct local_prov_volume *ret, struct error_info *err)
{
	const char *base = params->base_path;
	_cleanup_close_ int base_fd = -1, path_fd = -1, fd = -1;
	struct record want = { .enforce = params->enforce }, have;
	char id[LOCAL_PROV_ID_MAX + 1], path[VOL_PATH_MAX];
	uint64_t avail;
	int r;

	r = range_size(required, limit, &want.size, err);
	if (r < 0)
		return r;
	r = check_base(base, err);
	if (r < 0)
		return r;
	if (strlen(name) >= sizeof(want.name))
		return err_set(err, -EINVAL, "name: longer than %zu bytes", sizeof(want.name) - 1);
	snprintf(want.name, sizeof(want.name), "%s", name);
	(void)id_make(name, base, id);
	snprintf(path, sizeof(path), "%s/%s", base, id);
	r = open_base(base, &base_fd, err);
	if (r < 0)
		return r;
	fd = openat(base_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && record_read(fd, &have) == 1) {
		/* Made before: the same name and a compatible size are this volume again. */
		if (!streq(have.name, name))
			return err_set(err, -EEXIST,
				       "name: volume %s of another name (\"%s\") has the id of "
				       "\"%s\" below %s",
				       id, have.name, name, base);
		if (!range_fits(have.size, required, limit) || have.enforce != want.enforce)
			return err_set(err, -EEXIST,
				       "name: volume \"%s\" exists with %" PRIu64
				       " bytes (%s), not as asked now",
				       name, have.size,
				       have.enforce ? "enforced" : "recorded only");
		want = have;
	} else {
		if (fd < 0 && errno != ENOENT)
			return err_set(err, -errno, "%s: %s", path, strerror(errno));
		/* Refused before anything is made: no room, or no quotas to enforce it with. */
		r = capacity_at(base_fd, base, &avail, err);
		if (r < 0)
			return r;
		if (want.size > avail)
			return err_set(err, -ENOSPC,
				       "capacity_range: %" PRIu64 " bytes asked, %" PRIu64
				       " left below basePath %s",
				       want.size, avail, base);
		if (want.enforce && want.size) {
			r = quota_prj_check_enforced(base_fd, base, err);
			if (r < 0)
				return err_prefix(err, "enforceSize");
		}
		if (fd < 0) {
			r = path_open_dir_below_at(base_fd, base, id, true, 0750, &path_fd, err);
			if (r < 0)
				return r;
			fd = openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0)
				return err_set(err, -errno, "%s: %s", path, strerror(errno));
		}
		r = record_write(fd, &want, path, err);
		if (r < 0)
			return r;
	}
	r = apply_size(fd, path, &want, err);
	if (r < 0)
		return r;
	*ret = (struct local_prov_volume){ .size = want.size, .enforce = want.enforce };
	snprintf(ret->id, sizeof(ret->id), "%s", id);
	snprintf(ret->base_path, sizeof(ret->base_path), "%s", base);
	return 0;
}

/* Opens the volume id: its base (checked) and its directory.  1 with both fds and the record;
 * 0 when the base or the directory is gone; -errno with err set. */
static int open_volume(const char *id, char *base, int *ret_base_fd, int *ret_fd,
		       struct record *ret_rec, struct error_info *err)
{
	struct error_info missing = { 0 };
	int r;

	if (!local_prov_id_parse(id, base))
		return err_set(err, -EINVAL, "volume_id: \"%s\" is no volume this driver made", id);
	r = check_base(base, err);
	if (r < 0)
		return err_prefix(err, "volume_id: %s", id);
	r = open_base(base, ret_base_fd, &missing);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return err_set(err, r, "%s", err_msg(&missing));
	*ret_fd = openat(*ret_base_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*ret_fd < 0 && errno == ENOENT)
		return 0;
	if (*ret_fd < 0)
		return err_set(err, -errno, "%s/%s: %s", base, id, strerror(errno));
	if (record_read(*ret_fd, ret_rec) != 1)
		return err_set(err, -EPERM,
			       "%s/%s has no record of this driver (" LOCAL_PROV_XATTR
			       "): not made by CreateVolume, left in place",
			       base, id);
	return 1;
}

int local_prov_lookup(const char *id, struct local_prov_volume *ret, struct error_info *err)
{
	_cleanup_close_ int base_fd = -1, fd = -1;
	char base[PATH_MAX];
	struct record rec;
	int r;

	if (!local_prov_id_parse(id, NULL))
		return 0;
	r = open_volume(id, base, &base_fd, &fd, &rec, err);
	if (r <= 0)
		return r;
	*ret = (struct local_prov_volume){ .size = rec.size, .enforce = rec.enforce };
	snprintf(ret->id, sizeof(ret->id), "%s", id);
	snprintf(ret->base_path, sizeof(ret->base_path), "%s", base);
	return 1;
}

int local_prov_delete(const char *id, struct error_info *err)
{
	_cleanup_close_ int base_fd = -1, fd = -1;
	struct error_info ignored = { 0 };
	char base[PATH_MAX], path[VOL_PATH_MAX];
	struct record rec;
	int r = open_volume(id, base, &base_fd, &fd, &rec, err);

	if (r <= 0)
		return r;
	snprintf(path, sizeof(path), "%s/%s", base, id);
	/* The limit first, so that the project ID goes back to the free ones with the files. */
	(void)quota_prj_clear_size(fd, path, &ignored);
	close(TAKE_FD(fd));
	return rm_tree_at(base_fd, id, err);
}

int local_prov_expand(const char *id, int64_t required, int64_t limit, uint64_t *ret_size,
		      struct error_info *err)
{
	_cleanup_close_ int base_fd = -1, fd = -1;
	char base[PATH_MAX], path[VOL_PATH_MAX];
	struct record rec;
	uint64_t size, avail;
	int r = open_volume(id, base, &base_fd, &fd, &rec, err);

	if (r == 0)
		return err_set(err, -ENOENT, "volume_id: volume %s does not exist", id);
	if (r < 0)
		return r;
	r = range_size(required, limit, &size, err);
	if (r < 0)
		return r;
	if (size <= rec.size) {
		*ret_size = rec.size;
		return 0;
	}
	r = capacity_at(base_fd, base, &avail, err);
	if (r < 0)
		return r;
	if (size - rec.size > avail)
		return err_set(err, -ENOSPC,
			       "capacity_range: %" PRIu64 " more bytes asked, %" PRIu64
			       " left below %s",
			       size - rec.size, avail, base);
	rec.size = size;
	snprintf(path, sizeof(path), "%s/%s", base, id);
	r = record_write(fd, &rec, path, err);
	if (r < 0)
		return r;
	*ret_size = size;
	return 0;
}

int local_prov_dir_enforced_size(int dir_fd, uint64_t *ret_bytes)
{
	_cleanup_close_ int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct record rec;

	if (fd < 0 || record_read(fd, &rec) != 1 || !rec.enforce || !rec.size)
		return 0;
	*ret_bytes = rec.size;
	return 1;
}
