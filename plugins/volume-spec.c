/* volume-spec.c - see volume-spec.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "volume-spec.h"

struct volume_spec *volume_spec_new(const char *type)
{
	struct volume_spec *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->refs = 1;
	s->type = strdup(type);
	s->mount_options = calloc(1, sizeof(char *));
	if (!s->type || !s->mount_options)
		return volume_spec_unref(s);
	return s;
}

struct volume_spec *volume_spec_ref(struct volume_spec *s)
{
	if (s)
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	return s;
}

struct volume_spec *volume_spec_unref(struct volume_spec *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return NULL;
	for (size_t i = 0; i < s->n_attrs; i++) {
		free(s->attrs[i].key);
		free(s->attrs[i].value);
	}
	free(s->attrs);
	for (size_t i = 0; i < s->n_secrets; i++) {
		explicit_bzero(s->secrets[i].value, strlen(s->secrets[i].value));
		free(s->secrets[i].key);
		free(s->secrets[i].value);
	}
	free(s->secrets);
	for (char **o = s->mount_options; o && *o; o++)
		free(*o);
	free(s->mount_options);
	free(s->type);
	free(s);
	return NULL;
}

/* Adds or replaces key in the list *attrs of *n entries. */
static int attrs_set(struct volume_attr **attrs, size_t *n, const char *key, const char *value)
{
	struct volume_attr *a;
	char *v = strdup(value);

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < *n; i++)
		if (streq((*attrs)[i].key, key)) {
			explicit_bzero((*attrs)[i].value, strlen((*attrs)[i].value));
			free((*attrs)[i].value);
			(*attrs)[i].value = v;
			return 0;
		}
	a = realloc(*attrs, (*n + 1) * sizeof(*a));
	if (!a) {
		free(v);
		return -ENOMEM;
	}
	*attrs = a;
	a[*n].key = strdup(key);
	a[*n].value = v;
	if (!a[*n].key) {
		free(v);
		return -ENOMEM;
	}
	(*n)++;
	return 0;
}

static const char *attrs_get(const struct volume_attr *attrs, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (streq(attrs[i].key, key))
			return attrs[i].value;
	return NULL;
}

int volume_spec_set(struct volume_spec *s, const char *key, const char *value)
{
	return attrs_set(&s->attrs, &s->n_attrs, key, value);
}

const char *volume_spec_get(const struct volume_spec *s, const char *key)
{
	return attrs_get(s->attrs, s->n_attrs, key);
}

int volume_spec_set_secret(struct volume_spec *s, const char *key, const char *value)
{
	return attrs_set(&s->secrets, &s->n_secrets, key, value);
}

const char *volume_spec_get_secret(const struct volume_spec *s, const char *key)
{
	return attrs_get(s->secrets, s->n_secrets, key);
}

int volume_spec_add_mount_option(struct volume_spec *s, const char *opt)
{
	size_t n = 0;
	char **o;

	while (s->mount_options[n])
		n++;
	o = realloc(s->mount_options, (n + 2) * sizeof(char *));
	if (!o)
		return -ENOMEM;
	s->mount_options = o;
	o[n] = strdup(opt);
	o[n + 1] = NULL;
	return o[n] ? 0 : -ENOMEM;
}

bool volume_spec_equal(const struct volume_spec *a, const struct volume_spec *b)
{
	size_t i;

	if (!streq(a->type, b->type) || a->read_only != b->read_only || a->block != b->block ||
	    a->n_attrs != b->n_attrs)
		return false;
	for (i = 0; i < a->n_attrs; i++)
		if (!streq_ptr(volume_spec_get(b, a->attrs[i].key), a->attrs[i].value))
			return false;
	for (i = 0; a->mount_options[i] || b->mount_options[i]; i++)
		if (!a->mount_options[i] || !b->mount_options[i] ||
		    !streq(a->mount_options[i], b->mount_options[i]))
			return false;
	return true;
}
