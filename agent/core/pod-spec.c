/* pod-spec.c - parsing and validating pod spec files with jansson.  See pod-spec.h. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crypt-volume.h"
#include "macro.h"
#include "mount-options.h"
#include "path-util.h"
#include "pod-spec.h"

struct pod_spec *pod_spec_free(struct pod_spec *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n_volumes; i++) {
		free(p->volumes[i].name);
		free(p->volumes[i].volume_name);
		volume_spec_unref(p->volumes[i].spec);
	}
	free(p->volumes);
	free(p->uid);
	free(p->name);
	free(p->namespace);
	free(p->origin);
	free(p);
	return NULL;
}

bool pod_volume_name_is_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 63 || name[0] == '-' || name[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '-'))
			return false;
	return true;
}

static bool has_control_chars(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* Stores a JSON scalar (or an array of strings, joined with ',') as attribute key. */
static int set_attr(struct volume_spec *spec, const char *field, const char *key, json_t *v,
		    struct error_info *err)
{
	char buf[64];
	_cleanup_free_ char *joined = NULL;
	const char *s;

	if (json_is_string(v)) {
		s = json_string_value(v);
		if (has_control_chars(s))
			return err_set(err, -EINVAL, "%s.%s: contains a control character", field,
				       key);
	} else if (json_is_boolean(v)) {
		s = json_is_true(v) ? "true" : "false";
	} else if (json_is_integer(v)) {
		snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		s = buf;
	} else if (json_is_array(v)) {
		size_t i, len = 0;
		json_t *e;

		json_array_foreach(v, i, e)
		{
			if (!json_is_string(e) || strchr(json_string_value(e), ','))
				return err_set(err, -EINVAL,
					       "%s.%s[%zu]: must be a string without ','", field,
					       key, i);
			len += strlen(json_string_value(e)) + 1;
		}
		joined = calloc(1, len + 1);
		if (!joined)
			return -ENOMEM;
		json_array_foreach(v, i, e)
		{
			if (i)
				strcat(joined, ",");
			strcat(joined, json_string_value(e));
		}
		s = joined;
	} else {
		return err_set(err, -EINVAL, "%s.%s: must be a string, number, boolean or list",
			       field, key);
	}
	return volume_spec_set(spec, key, s) < 0 ? -ENOMEM : 0;
}

/* Turns the source object ({"path": ..., "fsType": ...}) into a volume_spec. */
static int parse_source(const char *type, json_t *src, const char *field, struct volume_spec **ret,
			struct error_info *err)
{
	_cleanup_volume_spec_ struct volume_spec *spec = NULL;
	const char *key;
	json_t *v;
	int r;

	if (!json_is_object(src))
		return err_set(err, -EINVAL, "%s: must be an object", field);
	spec = volume_spec_new(type);
	if (!spec)
		return -ENOMEM;
	json_object_foreach(src, key, v)
	{
		if (streq(key, "readOnly")) {
			if (!json_is_boolean(v))
				return err_set(err, -EINVAL, "%s.readOnly: must be true or false",
					       field);
			spec->read_only = json_is_true(v);
			continue;
		}
		if (json_is_object(v)) { /* one level of nesting, e.g. secretRef.name */
			const char *k2;
			json_t *v2;
			json_object_foreach(v, k2, v2)
			{
				char flat[256];
				snprintf(flat, sizeof(flat), "%s.%s", key, k2);
				r = set_attr(spec, field, flat, v2, err);
				if (r < 0)
					return r;
			}
			continue;
		}
		r = set_attr(spec, field, key, v, err);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(spec);
	return 0;
}

static int parse_mount_options(struct volume_spec *spec, json_t *opts, const char *field,
			       struct error_info *err)
{
	size_t i;
	json_t *o;

	if (!json_is_array(opts))
		return err_set(err, -EINVAL, "%s.mountOptions: must be a list of strings", field);
	json_array_foreach(opts, i, o)
	{
		const char *s = json_is_string(o) ? json_string_value(o) : NULL;
		if (!s || !*s || has_control_chars(s) || !mount_option_is_single(s))
			return err_set(
				err, -EINVAL,
				"%s.mountOptions[%zu]: must be one non-empty option (a ',' only "
				"inside a quoted value, as in context=\"...\")",
				field, i);
		if (volume_spec_add_mount_option(spec, s) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* "encryption": {"passphraseFile": "/etc/volagent/keys/<name>"}: the volume's block device is
 * a LUKS2 volume (plugins/crypt-volume.h), its passphrase in that file, which must be a
 * regular file owned by root with no group or other permission bits. */
static int parse_encryption(struct volume_spec *spec, json_t *enc, const char *field,
			    struct error_info *err)
{
	json_t *file = json_object_get(enc, "passphraseFile");
	const char *key;
	json_t *v;

	if (!json_is_object(enc))
		return err_set(err, -EINVAL, "%s.encryption: must be an object", field);
	json_object_foreach(enc, key, v)
	{
		if (!streq(key, "passphraseFile"))
			return err_set(err, -EINVAL,
				       "%s.encryption.%s: unknown field (encryption has "
				       "passphraseFile)",
				       field, key);
	}
	if (!json_is_string(file))
		return err_set(err, -EINVAL, "%s.encryption.passphraseFile: required, a path",
			       field);
	if (volume_spec_get(spec, CRYPT_VOLUME_ATTR) ||
	    volume_spec_get(spec, CRYPT_VOLUME_ATTR_FILE))
		return err_set(err, -EINVAL,
			       "%s.encryption: the source sets " CRYPT_VOLUME_ATTR
			       " itself; give encryption only",
			       field);
	if (crypt_volume_check_passphrase_file(json_string_value(file), err) < 0)
		return err_prefix(err, "%s.encryption.passphraseFile", field);
	if (volume_spec_set(spec, CRYPT_VOLUME_ATTR, "true") < 0 ||
	    volume_spec_set(spec, CRYPT_VOLUME_ATTR_FILE, json_string_value(file)) < 0)
		return -ENOMEM;
	return 0;
}

static int parse_volume(json_t *vol, size_t index, struct pod_volume *ret, struct error_info *err)
{
	_cleanup_volume_spec_ struct volume_spec *spec = NULL;
	json_t *name, *ro = NULL, *opts = NULL, *src = NULL, *mode = NULL, *enc = NULL;
	const char *key, *src_key = NULL;
	char field[64];
	json_t *v;
	int r;

	snprintf(field, sizeof(field), "volumes[%zu]", index);
	if (!json_is_object(vol))
		return err_set(err, -EINVAL, "%s: must be an object", field);
	json_object_foreach(vol, key, v)
	{
		if (streq(key, "name"))
			continue;
		if (streq(key, "readOnly")) {
			ro = v;
		} else if (streq(key, "mountOptions")) {
			opts = v;
		} else if (streq(key, "volumeMode")) {
			mode = v;
		} else if (streq(key, "encryption")) {
			enc = v;
		} else if (plugin_find_by_name(key)) {
			if (src)
				return err_set(err, -EINVAL,
					       "%s: has two volume sources, %s and %s; give one",
					       field, src_key, key);
			src = v;
			src_key = key;
		} else {
			return err_set(err, -EINVAL,
				       "%s.%s: unknown field (a volume has name, readOnly, "
				       "mountOptions, volumeMode, encryption and one source of: %s)",
				       field, key, plugin_names());
		}
	}
	name = json_object_get(vol, "name");
	if (!name)
		return err_set(err, -EINVAL, "%s.name: required", field);
	if (!json_is_string(name) || !pod_volume_name_is_valid(json_string_value(name)))
		return err_set(err, -EINVAL,
			       "%s.name: must be a DNS label (lowercase letters, digits and '-', at "
			       "most 63)",
			       field);
	if (!src)
		return err_set(err, -EINVAL, "%s: no volume source (give one of: %s)", field,
			       plugin_names());
	if (ro && !json_is_boolean(ro))
		return err_set(err, -EINVAL, "%s.readOnly: must be true or false", field);
	if (mode && (!json_is_string(mode) || (!streq(json_string_value(mode), "Block") &&
					       !streq(json_string_value(mode), "Filesystem"))))
		return err_set(err, -EINVAL, "%s.volumeMode: must be \"Block\" or \"Filesystem\"",
			       field);

	snprintf(field + strlen(field), sizeof(field) - strlen(field), ".%s", src_key);
	r = parse_source(src_key, src, field, &spec, err);
	if (r < 0)
		return r;
	field[strcspn(field, ".")] = '\0';
	if (opts && (r = parse_mount_options(spec, opts, field, err)) < 0)
		return r;
	if (enc && (r = parse_encryption(spec, enc, field, err)) < 0)
		return r;
	spec->block = mode && streq(json_string_value(mode), "Block");
	if (spec->block && spec->mount_options[0])
		return err_set(err, -EINVAL,
			       "%s.mountOptions: a volume with volumeMode Block is not mounted; "
			       "give no mountOptions",
			       field);
	r = plugin_find_for_spec(spec, &ret->plugin, err);
	if (r < 0)
		return err_prefix(err, "%s", field);
	if (spec->block && !plugin_has_block(ret->plugin))
		return err_set(err, -EINVAL,
			       "%s.volumeMode: %s volumes have no Block mode (only Filesystem)",
			       field, src_key);
	r = plugin_validate(ret->plugin, spec, err);
	if (r < 0) {
		/* The plugin names its own field ("path: ..."): make it "volumes[0].local.path". */
		char msg[sizeof(err->msg)];
		snprintf(msg, sizeof(msg), "%s", err_msg(err));
		return err_set(err, r, "%s.%s.%s", field, src_key, msg);
	}
	ret->volume_name = plugin_get_volume_name(ret->plugin, spec);
	ret->name = strdup(json_string_value(name));
	if (!ret->volume_name || !ret->name)
		return -ENOMEM;
	ret->read_only = ro && json_is_true(ro);
	ret->spec = TAKE_PTR(spec);
	return 0;
}

static int get_optional_string(json_t *obj, const char *key, const char *field, char **ret,
			       struct error_info *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_string(v) || has_control_chars(json_string_value(v)))
		return err_set(err, -EINVAL, "%s.%s: must be a string", field, key);
	*ret = strdup(json_string_value(v));
	return *ret ? 0 : -ENOMEM;
}

static int parse_pod_object(json_t *pod, struct pod_spec *p, struct error_info *err)
{
	const char *key;
	json_t *v;
	int r;

	if (!json_is_object(pod))
		return err_set(err, -EINVAL, "pod: must be an object");
	json_object_foreach(
		pod, key,
		v) if (!streq(key, "uid") && !streq(key, "name") &&
		       !streq(key,
			      "namespace")) return err_set(err, -EINVAL,
							   "pod.%s: unknown field (pod has uid, name, "
							   "namespace)",
							   key);
	v = json_object_get(pod, "uid");
	if (!v)
		return err_set(err, -EINVAL, "pod.uid: required");
	if (!json_is_string(v) || !path_is_safe_component(json_string_value(v)))
		return err_set(err, -EINVAL,
			       "pod.uid: must be a safe path component (letters, digits, '.', '_', "
			       "'-'; not \".\" or \"..\")");
	p->uid = strdup(json_string_value(v));
	if (!p->uid)
		return -ENOMEM;
	if ((r = get_optional_string(pod, "name", "pod", &p->name, err)) < 0 ||
	    (r = get_optional_string(pod, "namespace", "pod", &p->namespace, err)) < 0)
		return r;
	return 0;
}

static int parse_root(json_t *root, const char *origin, struct pod_spec **ret,
		      struct error_info *err)
{
	_cleanup_(pod_spec_freep) struct pod_spec *p = NULL;
	json_t *vols, *v;
	const char *key;
	size_t i;
	int r;

	if (!json_is_object(root))
		return err_set(err, -EINVAL, "top level: must be an object with pod and volumes");
	json_object_foreach(
		root, key,
		v) if (!streq(key, "pod") &&
		       !streq(key,
			      "volumes")) return err_set(err, -EINVAL,
							 "%s: unknown field (a spec file has pod and "
							 "volumes)",
							 key);
	p = calloc(1, sizeof(*p));
	if (!p || !(p->origin = strdup(origin)))
		return -ENOMEM;
	v = json_object_get(root, "pod");
	if (!v)
		return err_set(err, -EINVAL, "pod: required");
	r = parse_pod_object(v, p, err);
	if (r < 0)
		return r;
	vols = json_object_get(root, "volumes");
	if (!vols)
		return err_set(err, -EINVAL, "volumes: required (may be empty)");
	if (!json_is_array(vols))
		return err_set(err, -EINVAL, "volumes: must be a list");
	p->volumes = calloc(json_array_size(vols) + 1, sizeof(*p->volumes));
	if (!p->volumes)
		return -ENOMEM;
	json_array_foreach(vols, i, v)
	{
		r = parse_volume(v, i, &p->volumes[i], err);
		p->n_volumes = i + 1; /* so that pod_spec_free frees what was parsed */
		if (r < 0)
			return r;
		for (size_t j = 0; j < i; j++)
			if (streq(p->volumes[j].name, p->volumes[i].name))
				return err_set(err, -EINVAL,
					       "volumes[%zu].name: \"%s\" is already the name of "
					       "volumes[%zu]",
					       i, p->volumes[i].name, j);
	}
	*ret = TAKE_PTR(p);
	return 0;
}

int pod_spec_parse_string(const char *json, const char *origin, struct pod_spec **ret,
			  struct error_info *err)
{
	_cleanup_(json_decrefp) json_t *root = NULL;
	json_error_t jerr;

	root = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(err, -EINVAL, "line %d column %d: %s", jerr.line, jerr.column,
			       jerr.text);
	return parse_root(root, origin, ret, err);
}

/* Reads the open file fd (at most POD_SPEC_MAX_BYTES) and parses it: one fstat, one read for a
 * file of the usual size, no stdio.  A read that brought the size fstat gave is the file as it
 * was then: no second read to see the end (a file written since is read again on its inotify
 * event, as one written during the read is). */
static int parse_fd(int fd, const char *origin, struct pod_spec **ret, struct error_info *err)
{
	_cleanup_(json_decrefp) json_t *root = NULL;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap;
	json_error_t jerr;
	struct stat st;

	if (fstat(fd, &st) < 0)
		return err_set(err, -errno, "%s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return err_set(err, -EINVAL, "not a regular file");
	if (st.st_size > POD_SPEC_MAX_BYTES)
		return err_set(err, -EFBIG, "larger than %d bytes", POD_SPEC_MAX_BYTES);
	/* One byte more than the size, to see a file that grew meanwhile. */
	cap = (size_t)st.st_size + 1;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + len, cap - len);
		char *b;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_set(err, -errno, "%s", strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == (size_t)st.st_size && st.st_size > 0)
			break;
		if (len < cap)
			continue;
		/* It grew since the fstat: once more, up to one byte over the limit. */
		if (cap > POD_SPEC_MAX_BYTES)
			return err_set(err, -EFBIG, "larger than %d bytes", POD_SPEC_MAX_BYTES);
		cap = POD_SPEC_MAX_BYTES + 1;
		b = realloc(buf, cap);
		if (!b)
			return -ENOMEM;
		buf = b;
	}
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(err, -EINVAL, "line %d column %d: %s", jerr.line, jerr.column,
			       jerr.text);
	return parse_root(root, origin, ret, err);
}

int pod_spec_parse_at(int dir_fd, const char *name, const char *origin, struct pod_spec **ret,
		      struct error_info *err)
{
	/* O_NONBLOCK: a FIFO in the pods dir must not hang the agent; it is refused below. */
	_cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0)
		return err_set(err, -errno, "%s", strerror(errno));
	return parse_fd(fd, origin, ret, err);
}

int pod_spec_parse_fd(int fd, const char *origin, struct pod_spec **ret, struct error_info *err)
{
	return parse_fd(fd, origin, ret, err);
}

int pod_spec_parse_file(const char *path, struct pod_spec **ret, struct error_info *err)
{
	return pod_spec_parse_at(AT_FDCWD, path, path, ret, err);
}
