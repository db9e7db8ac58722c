/* bluestore-label.c - reads the OSD uuid, OSD id and cluster fsid from a bluestore device
 * label, because libblkid stops at recognising the type.  See bluestore-label.h for the
 * layout.  Everything here treats the device's bytes as untrusted: each length is checked
 * against what is left of the buffer before it is used. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bluestore-label.h"
#include "macro.h"

#define LABEL_MAGIC "bluestore block device\n"
#define META_MAX_ENTRIES 256

/* A read cursor over the encoded part; every getter fails once the cursor would pass end. */
struct cursor {
	const unsigned char *p, *end;
};

static bool cur_skip(struct cursor *c, size_t n)
{
	if ((size_t)(c->end - c->p) < n)
		return false;
	c->p += n;
	return true;
}

static bool cur_u8(struct cursor *c, uint8_t *ret)
{
	if (c->p >= c->end)
		return false;
	*ret = *c->p++;
	return true;
}

/* Ceph encodes integers little-endian whatever the host. */
static bool cur_le(struct cursor *c, size_t width, uint64_t *ret)
{
	uint64_t v = 0;

	if ((size_t)(c->end - c->p) < width)
		return false;
	for (size_t i = 0; i < width; i++)
		v |= (uint64_t)c->p[i] << (8 * i);
	c->p += width;
	*ret = v;
	return true;
}

/* A Ceph string: u32 length, then the bytes, not terminated. */
static bool cur_string(struct cursor *c, const char **ret_s, size_t *ret_len)
{
	uint64_t n;

	if (!cur_le(c, 4, &n) || (uint64_t)(c->end - c->p) < n)
		return false;
	*ret_s = (const char *)c->p;
	*ret_len = (size_t)n;
	c->p += n;
	return true;
}

bool bluestore_uuid_valid(const char *s, size_t len)
{
	if (len != BLUESTORE_UUID_LEN)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!isxdigit((unsigned char)s[i])) {
			return false;
		}
	}
	return true;
}

static bool parse_osd_id(const char *s, size_t len, int *ret)
{
	long v = 0;

	if (len == 0 || len > 9)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*ret = (int)v;
	return true;
}

/* The encoded part: fills what it can and stops quietly at the first field that does not fit. */
static void parse_encoded(struct cursor c, struct bluestore_label *l)
{
	uint8_t struct_v, compat;
	uint64_t payload_len, size, count;
	const char *s;
	size_t n;

	if (!cur_u8(&c, &struct_v) || !cur_u8(&c, &compat) || !cur_le(&c, 4, &payload_len))
		return;
	if (struct_v < 1 || payload_len > (uint64_t)(c.end - c.p))
		return;
	c.end = c.p + payload_len;
	/* osd_uuid in binary (the text form above is authoritative), then size and btime. */
	if (!cur_skip(&c, 16) || !cur_le(&c, 8, &size) || !cur_skip(&c, 8))
		return;
	l->size = size;
	if (!cur_string(&c, &s, &n))
		return;
	if (n < sizeof(l->description) && !memchr(s, '\0', n)) {
		memcpy(l->description, s, n);
		l->description[n] = '\0';
	}
	if (struct_v < 2 || !cur_le(&c, 4, &count) || count > META_MAX_ENTRIES)
		return;
	for (uint64_t i = 0; i < count; i++) {
		const char *k, *v;
		size_t kn, vn;

		if (!cur_string(&c, &k, &kn) || !cur_string(&c, &v, &vn))
			return;
		if (kn == 6 && memcmp(k, "whoami", 6) == 0)
			(void)parse_osd_id(v, vn, &l->osd_id);
		else if (kn == 9 && memcmp(k, "ceph_fsid", 9) == 0 && bluestore_uuid_valid(v, vn)) {
			memcpy(l->ceph_fsid, v, vn);
			l->ceph_fsid[vn] = '\0';
		}
	}
}

int bluestore_label_parse(const void *buf, size_t len, struct bluestore_label *ret)
{
	const size_t magic_len = sizeof(LABEL_MAGIC) - 1;
	const char *p = buf;
	struct bluestore_label l = { .osd_id = -1 };

	if (len < magic_len + BLUESTORE_UUID_LEN + 1 || memcmp(p, LABEL_MAGIC, magic_len) != 0)
		return -EINVAL;
	p += magic_len;
	if (!bluestore_uuid_valid(p, BLUESTORE_UUID_LEN) || p[BLUESTORE_UUID_LEN] != '\n')
		return -EINVAL;
	memcpy(l.osd_uuid, p, BLUESTORE_UUID_LEN);
	p += BLUESTORE_UUID_LEN + 1;
	parse_encoded((struct cursor){ (const unsigned char *)p, (const unsigned char *)buf + len },
		      &l);
	*ret = l;
	return 0;
}

int bluestore_label_read(const char *path, struct bluestore_label *ret)
{
	_cleanup_close_ int fd = -1;
	unsigned char buf[BLUESTORE_LABEL_SIZE];
	size_t got = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	while (got < sizeof(buf)) {
		ssize_t n = pread(fd, buf + got, sizeof(buf) - got, (off_t)got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return bluestore_label_parse(buf, got, ret);
}
