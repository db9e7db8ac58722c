/* devid.c - names a disk's hardware identity as udev's persistent-storage rules do, from sysfs
 * alone (see devid.h for the names).  The escaping follows udev's own steps: a substituted sysfs
 * attribute loses trailing whitespace and has characters outside its input set replaced; a
 * SYMLINK= substitution also turns whitespace runs into one "_"; string_escape=replace turns
 * every remaining odd character, spaces included, into "_". */
#include <errno.h>
#include <fcntl.h>
#include <libudev.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devid.h"
#include "file-util.h"
#include "macro.h"

#define VPD_MAX 16384
#define VENDOR_LEN 8
#define MODEL_LEN 16
#define ATA_MODEL_LEN 40
#define ATA_SERIAL_LEN 20

/* SPC designator types and code sets (scsi_id's names in comments). */
enum {
	DESIG_VENDOR_SPECIFIC = 0,
	DESIG_T10_VENDOR = 1,
	DESIG_EUI64 = 2,
	DESIG_NAA = 3,
};
enum {
	CODE_BINARY = 1,
	CODE_ASCII = 2
};
#define NAA_ANY 0xff

/* scsi_id's order of preference among page 0x83 designators. */
static const struct {
	uint8_t type, naa, code;
} scsi_search[] = {
	{ DESIG_NAA, 6, CODE_BINARY },
	{ DESIG_NAA, 6, CODE_ASCII },
	{ DESIG_NAA, 5, CODE_BINARY },
	{ DESIG_NAA, 5, CODE_ASCII },
	{ DESIG_NAA, NAA_ANY, CODE_BINARY },
	{ DESIG_NAA, NAA_ANY, CODE_ASCII },
	{ DESIG_EUI64, NAA_ANY, CODE_BINARY },
	{ DESIG_EUI64, NAA_ANY, CODE_ASCII },
	{ DESIG_T10_VENDOR, NAA_ANY, CODE_BINARY },
	{ DESIG_T10_VENDOR, NAA_ANY, CODE_ASCII },
	{ DESIG_VENDOR_SPECIFIC, NAA_ANY, CODE_BINARY },
	{ DESIG_VENDOR_SPECIFIC, NAA_ANY, CODE_ASCII },
};

static const char hex[] = "0123456789abcdef";

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_plain(char c, const char *allow)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("#+-.:=@_", c)) || (c && allow && strchr(allow, c));
}

/* Length of the valid multi-byte UTF-8 character at s, or 0. */
static size_t utf8_len(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n;
	uint32_t ch;

	if (u[0] >= 0xc2 && u[0] <= 0xdf) {
		n = 2;
		ch = u[0] & 0x1f;
	} else if (u[0] >= 0xe0 && u[0] <= 0xef) {
		n = 3;
		ch = u[0] & 0x0f;
	} else if (u[0] >= 0xf0 && u[0] <= 0xf4) {
		n = 4;
		ch = u[0] & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((u[i] & 0xc0) != 0x80)
			return 0;
		ch = (ch << 6) | (u[i] & 0x3f);
	}
	if ((n == 3 && ch < 0x800) || (n == 4 && ch < 0x10000) || ch > 0x10ffff ||
	    (ch >= 0xd800 && ch <= 0xdfff) || (ch >= 0xfdd0 && ch <= 0xfdef) ||
	    (ch & 0xfffe) == 0xfffe)
		return 0;
	return n;
}

/* udev's replacement of unwanted characters, in place: plain characters, "\x" escapes and valid
 * UTF-8 stay; whitespace becomes a space when allow has one; anything else becomes "_". */
static void replace_chars(char *s, const char *allow)
{
	size_t i = 0, n;

	while (s[i]) {
		if (is_plain(s[i], allow)) {
			i++;
		} else if (s[i] == '\\' && s[i + 1] == 'x') {
			i += 2;
		} else if ((n = utf8_len(s + i)) > 1) {
			i += n;
		} else {
			s[i] = is_space(s[i]) && allow && strchr(allow, ' ') ? ' ' : '_';
			i++;
		}
	}
}

/* udev's whitespace replacement: leading and trailing whitespace cut, each run inside to "_". */
static char *replace_whitespace(const char *s, size_t len)
{
	char *out;
	size_t i = 0, j = 0;
	bool gap = false;

	len = strnlen(s, len);
	while (len > 0 && is_space(s[len - 1]))
		len--;
	while (i < len && is_space(s[i]))
		i++;
	out = malloc(len - i + 1);
	if (!out)
		return NULL;
	for (; i < len; i++) {
		if (is_space(s[i])) {
			gap = true;
			continue;
		}
		if (gap)
			out[j++] = '_';
		gap = false;
		out[j++] = s[i];
	}
	out[j] = '\0';
	return out;
}

/* A sysfs value as $attr{} substitutes it: trailing whitespace cut, odd characters replaced. */
static char *attr_subst(const char *value)
{
	char *v = strdup(value);
	size_t n;

	if (!v)
		return NULL;
	n = strlen(v);
	while (n > 0 && is_space(v[n - 1]))
		v[--n] = '\0';
	replace_chars(v, "/ $%?,");
	return v;
}

char *devid_escape_link(const char *value)
{
	_cleanup_free_ char *v = attr_subst(value);
	char *w;

	if (!v)
		return NULL;
	w = replace_whitespace(v, strlen(v));
	if (w)
		replace_chars(w, "/ ");
	return w;
}

char *devid_escape_replace(const char *value)
{
	char *v = attr_subst(value);

	if (v)
		replace_chars(v, NULL);
	return v;
}

char *devid_escape_whitespace(const char *value, size_t len)
{
	char *w = replace_whitespace(value, len);

	if (w)
		replace_chars(w, NULL);
	return w;
}

/* A fixed-width INQUIRY field, padded with spaces or cut to width. */
static void fixed_field(char *buf, const char *s, size_t width)
{
	size_t n = s ? strnlen(s, width) : 0;

	memset(buf, ' ', width);
	if (n)
		memcpy(buf, s, n);
	buf[width] = '\0';
}

/* The designator at d as scsi_id writes it: type digit, [vendor model], then the identifier
 * (ASCII as is, binary as lower-case hex).  NULL on ENOMEM. */
static char *designator_string(const uint8_t *d, const char *vendor_model)
{
	size_t len = d[3], j = 0;
	bool ascii = (d[0] & 0x0f) == CODE_ASCII;
	char *s = malloc(2 + strlen(vendor_model) + len * 2);

	if (!s)
		return NULL;
	s[j++] = hex[d[1] & 0x0f];
	memcpy(s + j, vendor_model, strlen(vendor_model));
	j += strlen(vendor_model);
	for (size_t i = 0; i < len; i++) {
		if (ascii) {
			s[j++] = (char)d[4 + i];
		} else {
			s[j++] = hex[d[4 + i] >> 4];
			s[j++] = hex[d[4 + i] & 0x0f];
		}
	}
	s[j] = '\0';
	return s;
}

/* The designators of page 0x83: calls fn for each complete one; stops when fn returns non-zero. */
static const uint8_t *pg83_find(const uint8_t *pg, size_t n,
				bool (*fn)(const uint8_t *d, const void *arg), const void *arg)
{
	size_t end, j;

	if (!pg || n < 4 || pg[1] != 0x83)
		return NULL;
	end = 4 + (((size_t)pg[2] << 8) | pg[3]);
	if (end > n)
		end = n;
	for (j = 4; j + 4 <= end && j + 4 + pg[j + 3] <= end; j += 4 + pg[j + 3])
		if (fn(pg + j, arg))
			return pg + j;
	return NULL;
}

static bool match_search(const uint8_t *d, const void *arg)
{
	const typeof(scsi_search[0]) *want = arg;

	if ((d[1] & 0x30) != 0) /* associated with a port or target, not the logical unit */
		return false;
	if ((d[1] & 0x0f) != want->type || (d[0] & 0x0f) != want->code)
		return false;
	if (want->naa != NAA_ANY && (d[3] < 1 || (d[4] >> 4) != want->naa))
		return false;
	return true;
}

static bool match_ata_t10(const uint8_t *d, const void *arg)
{
	(void)arg;
	return (d[1] & 0x30) == 0 && (d[1] & 0x0f) == DESIG_T10_VENDOR &&
	       d[3] >= VENDOR_LEN + ATA_MODEL_LEN + ATA_SERIAL_LEN &&
	       memcmp(d + 4, "ATA     ", VENDOR_LEN) == 0;
}

static bool match_naa5_binary(const uint8_t *d, const void *arg)
{
	(void)arg;
	return (d[1] & 0x30) == 0 && (d[1] & 0x0f) == DESIG_NAA && (d[0] & 0x0f) == CODE_BINARY &&
	       d[3] == 8 && (d[4] >> 4) == 5;
}

/* ata_id's view, from what libata's SCSI translation puts in page 0x83: the T10 vendor id
 * "ATA     " + model (40) + serial (20), and the WWN (IDENTIFY words 108-111) as NAA 5. */
static int ata_from_vpd(const uint8_t *pg83, size_t n83, char **ret_serial, char **ret_wwn)
{
	const uint8_t *t10 = pg83_find(pg83, n83, match_ata_t10, NULL);
	const uint8_t *naa = pg83_find(pg83, n83, match_naa5_binary, NULL);
	_cleanup_free_ char *model = NULL, *serial = NULL;
	char *id, *wwn = NULL;

	if (!t10)
		return -ENOENT;
	model = devid_escape_whitespace((const char *)t10 + 4 + VENDOR_LEN, ATA_MODEL_LEN);
	serial = devid_escape_whitespace((const char *)t10 + 4 + VENDOR_LEN + ATA_MODEL_LEN,
					 ATA_SERIAL_LEN);
	if (!model || !serial)
		return -ENOMEM;
	if (!*model)
		return -ENOENT;
	id = *serial ? strdup_printf("%s_%s", model, serial) : strdup(model);
	if (!id)
		return -ENOMEM;
	if (naa) {
		wwn = strdup_printf("0x%02x%02x%02x%02x%02x%02x%02x%02x", naa[4], naa[5], naa[6],
				    naa[7], naa[8], naa[9], naa[10], naa[11]);
		if (!wwn) {
			free(id);
			return -ENOMEM;
		}
	}
	*ret_serial = id;
	*ret_wwn = wwn;
	return 0;
}

int devid_scsi_from_vpd(const uint8_t *pg83, size_t n83, const uint8_t *pg80, size_t n80,
			const char *vendor, const char *model, const char **ret_bus,
			char **ret_serial, char **ret_wwn)
{
	char vendor_model[VENDOR_LEN + MODEL_LEN + 1], vend[VENDOR_LEN + 1];
	_cleanup_free_ char *raw = NULL;
	char *serial, *wwn = NULL;
	const uint8_t *d = NULL;
	int r;

	fixed_field(vend, vendor, VENDOR_LEN);
	fixed_field(vendor_model, vendor, VENDOR_LEN);
	fixed_field(vendor_model + VENDOR_LEN, model, MODEL_LEN);

	if (streq(vend, "ATA     ")) {
		r = ata_from_vpd(pg83, n83, ret_serial, ret_wwn);
		if (r == 0)
			*ret_bus = "ata";
		return r;
	}

	if (pg83 && n83 >= 7 && pg83[1] == 0x83 && pg83[6] != 0) {
		/* A SCSI-2 style page (old EMC Symmetrix): the bytes after the header are the id. */
		size_t len = pg83[3] < n83 - 4 ? pg83[3] : n83 - 4, j = 1;
		raw = malloc(2 + 2 * len);
		if (!raw)
			return -ENOMEM;
		raw[0] = hex[DESIG_NAA];
		for (size_t i = 0; i < len; i++) {
			raw[j++] = hex[pg83[4 + i] >> 4];
			raw[j++] = hex[pg83[4 + i] & 0x0f];
		}
		raw[j] = '\0';
	} else {
		for (size_t k = 0; !d && k < ARRAY_SIZE(scsi_search); k++)
			d = pg83_find(pg83, n83, match_search, &scsi_search[k]);
		if (d) {
			bool vs = (d[1] & 0x0f) == DESIG_VENDOR_SPECIFIC;
			raw = designator_string(d, vs ? vendor_model : "");
			if (!raw)
				return -ENOMEM;
			if ((d[1] & 0x0f) == DESIG_NAA) {
				/* ID_WWN is the first 16 hex digits, the rest the vendor extension. */
				wwn = strdup_printf("0x%.32s", raw + 1);
				if (!wwn)
					return -ENOMEM;
			}
		} else if (pg80 && n80 >= 4 && pg80[1] == 0x80) {
			size_t len = pg80[3] < n80 - 4 ? pg80[3] : n80 - 4;
			raw = malloc(2 + VENDOR_LEN + MODEL_LEN + len);
			if (!raw)
				return -ENOMEM;
			raw[0] = 'S';
			memcpy(raw + 1, vendor_model, VENDOR_LEN + MODEL_LEN);
			memcpy(raw + 1 + VENDOR_LEN + MODEL_LEN, pg80 + 4, len);
			raw[1 + VENDOR_LEN + MODEL_LEN + len] = '\0';
		}
	}
	if (!raw)
		return -ENOENT;
	serial = devid_escape_whitespace(raw, strlen(raw));
	if (!serial) {
		free(wwn);
		return -ENOMEM;
	}
	if (!*serial) {
		free(serial);
		free(wwn);
		return -ENOENT;
	}
	*ret_bus = "scsi";
	*ret_serial = serial;
	*ret_wwn = wwn;
	return 0;
}

/* ---- reading sysfs ---- */

/* A binary sysfs file (a VPD page); NULL when absent. */
static uint8_t *read_binary(const char *syspath, const char *attr, size_t *ret_len)
{
	uint8_t *buf = malloc(VPD_MAX);
	ssize_t n;

	if (!buf)
		return NULL;
	n = file_read_at(syspath, attr, buf, VPD_MAX);
	if (n <= 0) {
		free(buf);
		return NULL;
	}
	*ret_len = (size_t)n;
	return buf;
}

/* A text attribute with only its trailing newline cut (INQUIRY fields keep their padding). */
static char *read_text(const char *syspath, const char *attr)
{
	size_t n = 0;
	char *s = (char *)read_binary(syspath, attr, &n);

	if (!s)
		return NULL;
	if (n == VPD_MAX)
		n--;
	s[n] = '\0';
	if (memchr(s, '\0', n)) {
		free(s);
		return NULL;
	}
	if (n > 0 && s[n - 1] == '\n')
		s[n - 1] = '\0';
	return s;
}

/* Whether an attribute value passes a rule's ATTRS{x}=="?*": something besides whitespace. */
static bool nonblank(const char *s)
{
	for (; s && *s; s++)
		if (!is_space(*s))
			return true;
	return false;
}

/* ATTRS{attr}: the attribute of the device or its nearest parent that has it non-blank. */
static char *attrs_lookup(struct udev_device *dev, const char *attr)
{
	for (struct udev_device *p = dev; p; p = udev_device_get_parent(p)) {
		const char *sp = udev_device_get_syspath(p);
		char *v = sp ? read_text(sp, attr) : NULL;

		if (nonblank(v))
			return v;
		free(v);
	}
	return NULL;
}

static int names_add(struct devid *id, char *name)
{
	size_t n = 0;
	char **nv;

	if (!name)
		return -ENOMEM;
	while (id->names && id->names[n])
		n++;
	nv = realloc(id->names, (n + 2) * sizeof(char *));
	if (!nv) {
		free(name);
		return -ENOMEM;
	}
	nv[n] = name;
	nv[n + 1] = NULL;
	id->names = nv;
	return 0;
}

static int virtio_names(struct udev_device *dev, struct devid *id)
{
	_cleanup_free_ char *serial = attrs_lookup(dev, "serial");
	_cleanup_free_ char *esc = NULL;

	if (!serial)
		return 0;
	esc = devid_escape_link(serial);
	if (!esc)
		return -ENOMEM;
	id->serial_name = strdup_printf("virtio-%s", esc);
	return names_add(id, id->serial_name ? strdup(id->serial_name) : NULL);
}

static int nvme_names(struct udev_device *dev, struct devid *id)
{
	const char *sp = udev_device_get_syspath(dev);
	_cleanup_free_ char *wwid = sp ? read_text(sp, "wwid") : NULL;
	_cleanup_free_ char *serial = attrs_lookup(dev, "serial");
	_cleanup_free_ char *model = attrs_lookup(dev, "model");
	_cleanup_free_ char *nsid = attrs_lookup(dev, "nsid");
	int r;

	if (nonblank(wwid)) {
		_cleanup_free_ char *esc = devid_escape_link(wwid);
		char *name = esc ? strdup_printf("nvme-%s", esc) : NULL;

		r = names_add(id, name);
		if (r < 0)
			return r;
		/* eui. (EUI-64 or NGUID) and uuid. are world-wide; nvme. is made up by the kernel
		 * from vendor, serial, model and namespace. */
		if (startswith(wwid, "eui.") || startswith(wwid, "uuid.")) {
			id->wwn_name = strdup(name);
			if (!id->wwn_name)
				return -ENOMEM;
		}
	}
	if (model && serial) {
		_cleanup_free_ char *m = devid_escape_replace(model);
		_cleanup_free_ char *s = devid_escape_replace(serial);
		_cleanup_free_ char *ns = nsid ? devid_escape_replace(nsid) : NULL;

		if (!m || !s || (nsid && !ns))
			return -ENOMEM;
		id->serial_name = strdup_printf("nvme-%s_%s", m, s);
		r = names_add(id, id->serial_name ? strdup(id->serial_name) : NULL);
		if (r == 0 && ns)
			r = names_add(id, strdup_printf("nvme-%s_%s_%s", m, s, ns));
		if (r < 0)
			return r;
	}
	return 0;
}

static int scsi_names(struct udev_device *dev, struct devid *id)
{
	const char *sp = udev_device_get_syspath(dev);
	_cleanup_free_ char *dir = sp ? strdup_printf("%s/device", sp) : NULL;
	_cleanup_free_ char *vendor = NULL, *model = NULL, *serial = NULL, *wwn = NULL;
	_cleanup_free_ uint8_t *pg83 = NULL, *pg80 = NULL;
	size_t n83 = 0, n80 = 0;
	const char *bus = NULL;
	int r;

	if (!dir)
		return -ENOMEM;
	/* USB disks are named by usb_id from USB descriptors: left to udev. */
	if (strstr(sp, "/usb"))
		return 0;
	vendor = read_text(dir, "vendor");
	model = read_text(dir, "model");
	pg83 = read_binary(dir, "vpd_pg83", &n83);
	pg80 = read_binary(dir, "vpd_pg80", &n80);
	r = devid_scsi_from_vpd(pg83, n83, pg80, n80, vendor, model, &bus, &serial, &wwn);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (wwn) {
		id->wwn_name = strdup_printf("wwn-%s", wwn);
		if (!id->wwn_name)
			return -ENOMEM;
	}
	id->serial_name = strdup_printf("%s-%s", bus, serial);
	r = names_add(id, id->serial_name ? strdup(id->serial_name) : NULL);
	if (r == 0 && id->wwn_name)
		r = names_add(id, strdup(id->wwn_name));
	return r;
}

int devid_from_sysfs(struct udev_device *dev, struct devid *ret)
{
	const char *name = udev_device_get_sysname(dev);
	struct devid id = {};
	int r = 0;

	if (name && startswith(name, "vd"))
		r = virtio_names(dev, &id);
	else if (name && startswith(name, "nvme"))
		r = nvme_names(dev, &id);
	else if (name && (startswith(name, "sd") || startswith(name, "sr")))
		r = scsi_names(dev, &id);
	if (r < 0) {
		devid_done(&id);
		return r;
	}
	*ret = id;
	return 0;
}

void devid_done(struct devid *id)
{
	free(id->wwn_name);
	free(id->serial_name);
	for (size_t i = 0; id->names && id->names[i]; i++)
		free(id->names[i]);
	free(id->names);
	*id = (struct devid){};
}
