/* mount-options.c - see mount-options.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

int mount_options_split(const char *s, char ***ret)
{
	char **v = calloc(1, sizeof(*v));
	const char *p = s;

	if (!v)
		return -ENOMEM;
	while (*s) {
		const char *end = strchrnul(p, ',');
		_cleanup_free_ char *item = strndup(p, (size_t)(end - p));
		int r;

		if (!item) {
			mount_options_free(v);
			return -ENOMEM;
		}
		for (const char *c = item; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f) {
				mount_options_free(v);
				return -EINVAL;
			}
		if (!*item) {
			mount_options_free(v);
			return -EINVAL;
		}
		r = mount_options_append(&v, item);
		if (r < 0) {
			mount_options_free(v);
			return r;
		}
		if (!*end)
			break;
		p = end + 1;
		if (!*p) { /* a trailing ',' */
			mount_options_free(v);
			return -EINVAL;
		}
	}
	*ret = v;
	return 0;
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
