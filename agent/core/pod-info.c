/* pod-info.c - the pod a CSI publish is for (pod-info.h). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "pod-info.h"

/* A Kubernetes name is at most 253 bytes (a DNS subdomain); a uid is 36. */
#define POD_INFO_MAX 253

static const struct {
	const char *key;  /* in volume_context */
	const char *json; /* in the journal and status */
	size_t offset;
} fields[] = {
	{ POD_INFO_KEY_NAME, "name", offsetof(struct pod_info, name) },
	{ POD_INFO_KEY_NAMESPACE, "namespace", offsetof(struct pod_info, namespace) },
	{ POD_INFO_KEY_UID, "uid", offsetof(struct pod_info, uid) },
	{ POD_INFO_KEY_SERVICE_ACCOUNT, "service_account",
	  offsetof(struct pod_info, service_account) },
};

static char **field_of(struct pod_info *p, size_t i)
{
	return (char **)((char *)p + fields[i].offset);
}

static const char *field_get(const struct pod_info *p, size_t i)
{
	return *(char *const *)((const char *)p + fields[i].offset);
}

/* Shown in logs and status as it is: bounded, no control characters. */
static int check_value(const char *field, const char *value, struct error_info *err)
{
	if (strlen(value) > POD_INFO_MAX)
		return err_set(err, -EINVAL, "%s: longer than %d bytes", field, POD_INFO_MAX);
	for (const unsigned char *c = (const unsigned char *)value; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			return err_set(err, -EINVAL, "%s: holds a control character", field);
	return 0;
}

static int put(struct pod_info *p, size_t i, const char *value)
{
	char *copy = strdup(value);

	if (!copy)
		return -ENOMEM;
	free(*field_of(p, i));
	*field_of(p, i) = copy;
	return 0;
}

int pod_info_set(struct pod_info *p, const char *key, const char *value, struct error_info *err)
{
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		if (!streq(key, fields[i].key))
			continue;
		if (check_value(key, value, err) < 0)
			return -EINVAL;
		return put(p, i, value) < 0 ? -ENOMEM : 1;
	}
	return 0;
}

bool pod_info_empty(const struct pod_info *p)
{
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		if (field_get(p, i))
			return false;
	return true;
}

void pod_info_clear(struct pod_info *p)
{
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		free(*field_of(p, i));
		*field_of(p, i) = NULL;
	}
}

int pod_info_copy(struct pod_info *dst, const struct pod_info *src)
{
	for (size_t i = 0; src && i < ARRAY_SIZE(fields); i++)
		if (field_get(src, i) && put(dst, i, field_get(src, i)) < 0) {
			pod_info_clear(dst);
			return -ENOMEM;
		}
	return 0;
}

bool pod_info_equal(const struct pod_info *a, const struct pod_info *b)
{
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		if (!streq_ptr(field_get(a, i), field_get(b, i)))
			return false;
	return true;
}

json_t *pod_info_to_json(const struct pod_info *p)
{
	json_t *o;

	if (!p || pod_info_empty(p) || !(o = json_object()))
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		if (field_get(p, i))
			json_object_set_new(o, fields[i].json, json_string(field_get(p, i)));
	return o;
}

int pod_info_from_json(struct pod_info *p, json_t *o, const char *field, struct error_info *err)
{
	if (!o)
		return 0;
	if (!json_is_object(o))
		return err_set(err, -EBADMSG, "%s: not an object", field);
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
		json_t *v = json_object_get(o, fields[i].json);
		char name[128];

		if (!v)
			continue;
		snprintf(name, sizeof(name), "%s.%s", field, fields[i].json);
		if (!json_is_string(v))
			return err_set(err, -EBADMSG, "%s: not a string", name);
		if (check_value(name, json_string_value(v), err) < 0)
			return -EBADMSG;
		if (put(p, i, json_string_value(v)) < 0)
			return -ENOMEM;
	}
	return 0;
}

const char *pod_info_ref(const struct pod_info *p, char *buf, size_t size)
{
	if (!p || !p->name)
		return NULL;
	snprintf(buf, size, "%s/%s", p->namespace ? p->namespace : "", p->name);
	return buf;
}
