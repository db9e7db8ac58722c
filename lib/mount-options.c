/* mount-options.c - see mount-options.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libmount.h>

#include "macro.h"
#include "mount-options.h"

#define MASK "****"

static const char *const sensitive_names[] = {
	"password", "pass", "passwd", "secret", "credentials", "cred", "key", "keytab", "token",
};

char **mount_options_free(char **v)
{
	if (!v)
		return NULL;
	for (char **o = v; *o; o++)
		free(*o);
	free(v);
	return NULL;
}

size_t mount_options_count(char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

int mount_options_append(char ***v, const char *opt)
{
	size_t n = mount_options_count(*v);
	char **nv = realloc(*v, (n + 2) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[n] = strdup(opt);
	nv[n + 1] = NULL;
	if (!nv[n])
		return -ENOMEM;
	return 0;
}

static bool option_has_name(const char *opt, const char *name);

/* Whether s holds a control character. */
static bool has_control_chars(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

int mount_options_split(const char *s, char ***ret)
{
	_cleanup_free_ char *copy = strdup(s);
	char **v = calloc(1, sizeof(*v));
	char *p = copy, *name, *value;
	size_t len = strlen(s), expect = 0, namesz, valuesz;
	int r;

	if (!v || !copy) {
		free(v);
		return -ENOMEM;
	}
	if (has_control_chars(s)) {
		mount_options_free(v);
		return -EINVAL;
	}
	/* libmount's parser keeps a quoted value whole (context="a:b:c0,c1"); it skips empty
	 * items and drops an item with an unclosed quote, so each item must start where the
	 * previous one's ',' ends and the last one must end the string. */
	while (len && (r = mnt_optstr_next_option(&p, &name, &namesz, &value, &valuesz)) == 0) {
		size_t off = (size_t)(name - copy);
		size_t n = value ? (size_t)(value + valuesz - name) : namesz;
		_cleanup_free_ char *item = strndup(name, n);

		if (off != expect || !n) {
			mount_options_free(v);
			return -EINVAL;
		}
		if (!item || mount_options_append(&v, item) < 0) {
			mount_options_free(v);
			return -ENOMEM;
		}
		expect = off + n + 1;
	}
	if (len && expect != len + 1) {
		mount_options_free(v);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

bool mount_option_is_single(const char *opt)
{
	char **v = NULL;
	bool one = mount_options_split(opt, &v) == 0 && mount_options_count(v) == 1;

	mount_options_free(v);
	return one;
}

bool mount_option_is_selinux(const char *opt)
{
	return option_has_name(opt, "context") || option_has_name(opt, "fscontext") ||
	       option_has_name(opt, "defcontext") || option_has_name(opt, "rootcontext");
}

char *mount_options_selinux(char *const *v)
{
	size_t n = mount_options_count(v), k = 0;
	_cleanup_free_ char **labels = calloc(n + 1, sizeof(*labels));

	if (!labels)
		return NULL;
	/* A vector of borrowed strings: mount_options_join only reads it. */
	for (size_t i = 0; i < n; i++)
		if (mount_option_is_selinux(v[i]))
			labels[k++] = v[i];
	return mount_options_join(labels);
}

char **mount_options_own_mount(char *const *v, bool read_only)
{
	size_t n = mount_options_count(v), k = 0;
	char **own = calloc(n + 4, sizeof(*own));
	bool suid = false, dev = false;

	if (!own)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		own[k++] = v[i];
		/* asked for, or already there */
		suid = suid || streq(v[i], "suid") || streq(v[i], "nosuid");
		dev = dev || streq(v[i], "dev") || streq(v[i], "nodev");
	}
	if (read_only)
		own[k++] = (char *)"ro";
	if (!suid)
		own[k++] = (char *)"nosuid";
	if (!dev)
		own[k++] = (char *)"nodev";
	return own;
}

char *mount_options_join(char *const *v)
{
	size_t len = 1;
	char *s;

	for (size_t i = 0; v && v[i]; i++)
		len += strlen(v[i]) + 1;
	s = calloc(1, len);
	if (!s)
		return NULL;
	for (size_t i = 0; v && v[i]; i++) {
		if (i)
			strcat(s, ",");
		strcat(s, v[i]);
	}
	return s;
}

/* Whether opt's name (up to '=' or the end) is name. */
static bool option_has_name(const char *opt, const char *name)
{
	size_t n = strlen(name);

	return strncmp(opt, name, n) == 0 && (opt[n] == '=' || opt[n] == '\0');
}

const char *mount_options_get(char *const *v, const char *key)
{
	const char *found = NULL;

	for (size_t i = 0; v && v[i]; i++)
		if (option_has_name(v[i], key))
			found = v[i][strlen(key)] == '=' ? v[i] + strlen(key) + 1 : "";
	return found;
}

/* Whether the name of opt is in the comma-separated list (case-insensitive). */
static bool name_in_list(const char *opt, size_t name_len, const char *list)
{
	const char *p = list;

	while (p && *p) {
		const char *end = strchrnul(p, ',');
		size_t n = (size_t)(end - p);

		while (n && p[n - 1] == ' ')
			n--;
		while (n && *p == ' ') {
			p++;
			n--;
		}
		if (n == name_len && strncasecmp(opt, p, n) == 0)
			return true;
		p = *end ? end + 1 : end;
	}
	return false;
}

bool mount_option_is_sensitive(const char *opt, const char *extra)
{
	size_t name_len = strcspn(opt, "=");

	for (size_t i = 0; i < ARRAY_SIZE(sensitive_names); i++)
		if (strlen(sensitive_names[i]) == name_len &&
		    strncasecmp(opt, sensitive_names[i], name_len) == 0)
			return true;
	if (name_len == 3 && strncasecmp(opt, "sec", 3) == 0 && opt[3] == '=' &&
	    strncasecmp(opt + 4, "krb5", 4) == 0)
		return true;
	return extra && name_in_list(opt, name_len, extra);
}

char *mount_options_mask(char *const *v, const char *extra)
{
	size_t len = 1;
	char *s;

	for (size_t i = 0; v && v[i]; i++)
		len += strlen(v[i]) + sizeof(MASK) + 1;
	s = calloc(1, len);
	if (!s)
		return NULL;
	for (size_t i = 0; v && v[i]; i++) {
		const char *eq = strchr(v[i], '=');

		if (i)
			strcat(s, ",");
		if (!mount_option_is_sensitive(v[i], extra)) {
			strcat(s, v[i]);
		} else if (eq) {
			strncat(s, v[i], (size_t)(eq - v[i]) + 1);
			strcat(s, MASK);
		} else {
			strcat(s, MASK);
		}
	}
	return s;
}

/* Replaces each occurrence of needle in text with MASK, within size bytes. */
static void replace_all(char *text, size_t size, const char *needle)
{
	size_t n = strlen(needle), m = strlen(MASK);
	char *p = text;

	if (!n)
		return;
	while ((p = strstr(p, needle))) {
		size_t tail = strlen(p + n);
		size_t room = size - (size_t)(p - text); /* bytes from p to the buffer's end */

		if (m + tail + 1 > room)
			tail = room > m + 1 ? room - m - 1 : 0;
		if (m + 1 > room) {
			*p = '\0';
			return;
		}
		memmove(p + m, p + n, tail);
		p[m + tail] = '\0';
		memcpy(p, MASK, m);
		p += m;
	}
}

void mount_options_mask_text(char *text, size_t size, char *const *v, const char *extra)
{
	if (!text || !size)
		return;
	for (size_t i = 0; v && v[i]; i++) {
		const char *eq;

		if (!mount_option_is_sensitive(v[i], extra))
			continue;
		eq = strchr(v[i], '=');
		/* A value that is the mask itself needs no work (and would loop forever). */
		if (streq(eq ? eq + 1 : v[i], MASK))
			continue;
		replace_all(text, size, eq ? eq + 1 : v[i]);
	}
}
