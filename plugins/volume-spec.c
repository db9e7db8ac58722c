/* volume-spec.c - see volume-spec.h.  A spec is kept in few allocations, as there is one per
 * volume: the type lives in the spec's own allocation, each attribute's key and value share
 * one, and a spec without mount options points at one static empty list. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "secret-mem.h"
#include "volume-spec.h"

/* The mount options of every spec that has none (never written to). */
static char *no_mount_options[1];

struct volume_spec *volume_spec_new(const char *type)
{
	size_t n = strlen(type) + 1;
	struct volume_spec *s = calloc(1, sizeof(*s) + n);

	if (!s)
		return NULL;
	s->refs = 1;
	s->type = memcpy((char *)(s + 1), type, n);
	s->mount_options = no_mount_options;
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
	for (size_t i = 0; i < s->n_attrs; i++)
		free(s->attrs[i].key); /* the value is in the same allocation */
	free(s->attrs);
	for (size_t i = 0; i < s->n_secrets; i++)
		secret_mem_free(s->secrets[i].key); /* wiped first */
	free(s->secrets);
	if (s->mount_options != no_mount_options) {
		for (char **o = s->mount_options; o && *o; o++)
			free(*o);
		free(s->mount_options);
	}
	free(s);
	return NULL;
}

/* Adds or replaces key in the list *attrs of *n entries.  An entry's key and value are one
 * allocation ("key\0value\0", freed through the key: free, or secret_mem_free when secret:
 * pages of their own, out of core dumps). */
static int attrs_set(struct volume_attr **attrs, size_t *n, const char *key, const char *value,
		     bool secret)
{
	size_t nk = strlen(key) + 1, nv = strlen(value) + 1;
	struct volume_attr *a;
	char *kv = secret ? secret_mem_alloc(nk + nv) : malloc(nk + nv);

	if (!kv)
		return -ENOMEM;
	memcpy(kv, key, nk);
	memcpy(kv + nk, value, nv);
	for (size_t i = 0; i < *n; i++)
		if (streq((*attrs)[i].key, key)) {
			explicit_bzero((*attrs)[i].value, strlen((*attrs)[i].value));
			if (secret)
				secret_mem_free((*attrs)[i].key);
			else
				free((*attrs)[i].key);
			(*attrs)[i].key = kv;
			(*attrs)[i].value = kv + nk;
			return 0;
		}
	a = realloc(*attrs, (*n + 1) * sizeof(*a));
	if (!a) {
		if (secret)
			secret_mem_free(kv);
		else
			free(kv);
		return -ENOMEM;
	}
	*attrs = a;
	a[*n].key = kv;
	a[*n].value = kv + nk;
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
	return attrs_set(&s->attrs, &s->n_attrs, key, value, false);
}

const char *volume_spec_get(const struct volume_spec *s, const char *key)
{
	return attrs_get(s->attrs, s->n_attrs, key);
}

int volume_spec_set_secret(struct volume_spec *s, const char *key, const char *value)
{
	return attrs_set(&s->secrets, &s->n_secrets, key, value, true);
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
	o = realloc(s->mount_options != no_mount_options ? s->mount_options : NULL,
		    (n + 2) * sizeof(char *));
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
