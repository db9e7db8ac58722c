/* volume-spec-format.c - the one rendering of a volume spec, as JSON (status, journal) or as a
 * line of text (logs, messages), with sensitive mount options masked and secrets left out.
 *
 * Writers that each rendered a spec on their own drifted apart (the journal masked a password
 * that `volagent status --json` printed in clear); everything that shows a spec goes through
 * here instead.  See volume-spec.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "mount-options.h"
#include "volume-spec.h"

#define OPTIONS_ATTR "mountOptions"

static const char *sensitive_names(const struct volume_spec *s)
{
	return volume_spec_get(s, VOLUME_SPEC_SENSITIVE_KEY);
}

/* The options of a "mountOptions" attribute ("vers=4.1,password=x") as a vector, or NULL
 * when there is none or it does not split. */
static char **attr_options(const struct volume_spec *s)
{
	const char *v = volume_spec_get(s, OPTIONS_ATTR);
	char **opts = NULL;

	if (!v || mount_options_split(v, &opts) < 0)
		return NULL;
	return opts;
}

static bool any_sensitive(char *const *v, const char *extra)
{
	for (size_t i = 0; v && v[i]; i++)
		if (mount_option_is_sensitive(v[i], extra))
			return true;
	return false;
}

bool volume_spec_has_sensitive_option(const struct volume_spec *s)
{
	const char *value = volume_spec_get(s, OPTIONS_ATTR);
	char **opts;
	bool r;

	if (any_sensitive(s->mount_options, sensitive_names(s)))
		return true;
	if (!value)
		return false;
	opts = attr_options(s);
	/* An attribute that does not split cannot be checked: count it as sensitive. */
	r = !opts || any_sensitive(opts, sensitive_names(s));
	mount_options_free(opts);
	return r;
}

/* The value of attribute a as it may be shown: a "mountOptions" attribute with its
 * sensitive options masked (one that does not split, whole), any other as it is. */
static char *attr_value(const struct volume_spec *s, const struct volume_attr *a)
{
	char **opts;
	char *m;

	if (!streq(a->key, OPTIONS_ATTR))
		return strdup(a->value);
	opts = attr_options(s);
	if (!opts)
		return strdup("****");
	m = mount_options_mask(opts, sensitive_names(s));
	mount_options_free(opts);
	return m;
}

/* s's attributes into the JSON object o, shown as attr_value does; a "mountOptions"
 * attribute left out when skip_options (shown with the options instead). */
static json_t *attrs_json(const struct volume_spec *s, json_t *o, bool skip_options)
{
	for (size_t i = 0; o && i < s->n_attrs; i++) {
		_cleanup_free_ char *v = NULL;

		if (skip_options && streq(s->attrs[i].key, OPTIONS_ATTR))
			continue;
		v = attr_value(s, &s->attrs[i]);
		if (!v || json_object_set_new(o, s->attrs[i].key, json_string(v)) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* Appends opt to *v as it may be shown: "name=****" (or "****") when sensitive. */
static int append_shown(char ***v, const char *opt, const char *extra)
{
	char *const one[] = { (char *)opt, NULL };
	_cleanup_free_ char *m = mount_options_mask(one, extra);

	return m ? mount_options_append(v, m) : -ENOMEM;
}

/* The options as they may be shown: the spec's, then those of a "mountOptions" attribute
 * (the order the plugins apply them in), sensitive ones masked; one that does not split is
 * shown as "****".  Returns a new vector or NULL on ENOMEM. */
static char **shown_options(const struct volume_spec *s)
{
	const char *extra = sensitive_names(s);
	char **v = calloc(1, sizeof(*v)), **aopts = NULL;
	int r = v ? 0 : -ENOMEM;

	for (char **m = s->mount_options; r == 0 && *m; m++)
		r = append_shown(&v, *m, extra);
	if (r == 0 && volume_spec_get(s, OPTIONS_ATTR)) {
		aopts = attr_options(s);
		if (!aopts)
			r = mount_options_append(&v, "****");
		for (char **m = aopts; r == 0 && m && *m; m++)
			r = append_shown(&v, *m, extra);
		mount_options_free(aopts);
	}
	if (r < 0)
		return mount_options_free(v);
	return v;
}

static json_t *status_json(const struct volume_spec *s)
{
	json_t *o = attrs_json(s, json_object(), true), *opts = json_array();
	char **shown = shown_options(s);

	if (!o || !opts || !shown)
		goto out_free;
	for (char **m = shown; *m; m++)
		if (json_array_append_new(opts, json_string(*m)) < 0)
			goto out_free;
	mount_options_free(shown);
	shown = NULL;
	if (json_object_set_new(o, "mountOptions", opts) < 0) {
		opts = NULL;
		goto out_free;
	}
	if (s->read_only)
		json_object_set_new(o, "readOnly", json_true());
	if (s->block)
		json_object_set_new(o, "volumeMode", json_string("Block"));
	return o;
out_free:
	mount_options_free(shown);
	json_decref(opts);
	json_decref(o);
	return NULL;
}

static json_t *journal_json(const struct volume_spec *s)
{
	json_t *o = json_object(), *attrs = attrs_json(s, json_object(), false);
	json_t *opts = json_array();
	const char *value = volume_spec_get(s, OPTIONS_ATTR);
	char **aopts;

	if (!o || !attrs || !opts)
		goto out_free;
	/* A sensitive option is never written: the entry says so, and is not restored (kubelet
	 * calls again with the real one). */
	for (char **m = s->mount_options; *m; m++)
		if (json_array_append_new(
			    opts, json_string(mount_option_is_sensitive(*m, sensitive_names(s))
						      ? VOLUME_SPEC_MASKED_OPTION
						      : *m)) < 0)
			goto out_free;
	if (value) {
		/* Its value was masked above: the entry cannot be restored either. */
		aopts = attr_options(s);
		if ((!aopts || any_sensitive(aopts, sensitive_names(s))) &&
		    json_array_append_new(opts, json_string(VOLUME_SPEC_MASKED_OPTION)) < 0) {
			mount_options_free(aopts);
			goto out_free;
		}
		mount_options_free(aopts);
	}
	json_object_set_new(o, "type", json_string(s->type));
	json_object_set_new(o, "attrs", attrs);
	json_object_set_new(o, "mount_options", opts);
	json_object_set_new(o, "read_only", json_boolean(s->read_only));
	if (s->block)
		json_object_set_new(o, "block", json_true());
	return o;
out_free:
	json_decref(opts);
	json_decref(attrs);
	json_decref(o);
	return NULL;
}

json_t *volume_spec_to_json(const struct volume_spec *s, enum volume_spec_json_form form)
{
	if (!s)
		return json_null();
	/* Secrets are never rendered, in any form. */
	return form == VOLUME_SPEC_JSON_JOURNAL ? journal_json(s) : status_json(s);
}

char *volume_spec_format(const struct volume_spec *s)
{
	_cleanup_free_ char *opts = NULL;
	char **shown;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	bool ok = true;

	if (!s)
		return strdup("(none)");
	shown = shown_options(s);
	opts = shown ? mount_options_join(shown) : NULL;
	mount_options_free(shown);
	if (!opts)
		return NULL;
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	fputs(s->type, f);
	for (size_t i = 0; i < s->n_attrs; i++) {
		_cleanup_free_ char *v = NULL;

		if (streq(s->attrs[i].key, OPTIONS_ATTR))
			continue; /* shown with the options */
		v = attr_value(s, &s->attrs[i]);
		ok = ok && v;
		fprintf(f, " %s=%s", s->attrs[i].key, v ? v : "");
	}
	if (*opts)
		fprintf(f, " mountOptions=%s", opts);
	if (s->read_only)
		fputs(" ro", f);
	if (s->block)
		fputs(" volumeMode=Block", f);
	if (fclose(f) != 0 || !ok) {
		free(buf);
		return NULL;
	}
	return buf;
}

void volume_spec_mask_text(const struct volume_spec *s, char *text, size_t size)
{
	char **aopts;

	if (!s)
		return;
	mount_options_mask_text(text, size, s->mount_options, sensitive_names(s));
	aopts = attr_options(s);
	mount_options_mask_text(text, size, aopts, sensitive_names(s));
	mount_options_free(aopts);
}
