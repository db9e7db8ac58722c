/* volume-spec.h - one volume's source as the agent understands it, whatever it came from (a
 * pod spec file or a CSI volume_context): the plugin type and its fields as strings.
 *
 * Keeping the fields as a flat string map lets pod spec files ({"nfs": {"server": ...}}) and
 * CSI volume_context ({"type": "nfs", "server": ...}) feed the same plugin validation.  A spec
 * is immutable once built and reference-counted, because operations on worker threads hold it
 * while the desired state may drop it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct volume_attr {
	char *key;
	char *value;
};

struct volume_spec {
	unsigned refs;
	char *type;			/* the plugin: "local", "nfs", "rbd" */
	struct volume_attr *attrs;	/* the source's fields, e.g. path=/mnt/disks/ssd1 */
	size_t n_attrs;
	char **mount_options;		/* NULL-terminated; never NULL after volume_spec_new */
	bool read_only;
	/* Credentials that came with the request (CSI `secrets`), e.g. a CephX key.  Never
	 * logged, never written to a file by the core, wiped when the spec is freed; not part of
	 * volume_spec_equal (a rotated secret is the same volume). */
	struct volume_attr *secrets;
	size_t n_secrets;
};

struct volume_spec *volume_spec_new(const char *type);
struct volume_spec *volume_spec_ref(struct volume_spec *s);
/* Drops one reference; frees on the last.  Accepts NULL; returns NULL. */
struct volume_spec *volume_spec_unref(struct volume_spec *s);
/* Adds or replaces key.  Returns 0 or -ENOMEM. */
int volume_spec_set(struct volume_spec *s, const char *key, const char *value);
/* The value of key, or NULL. */
const char *volume_spec_get(const struct volume_spec *s, const char *key);
int volume_spec_add_mount_option(struct volume_spec *s, const char *opt);
/* Adds or replaces a secret.  Returns 0 or -ENOMEM. */
int volume_spec_set_secret(struct volume_spec *s, const char *key, const char *value);
/* The secret key, or NULL. */
const char *volume_spec_get_secret(const struct volume_spec *s, const char *key);
/* Whether two specs describe the same source the same way (type, fields, options, ro). */
bool volume_spec_equal(const struct volume_spec *a, const struct volume_spec *b);

static inline void volume_spec_unrefp(struct volume_spec **s)
{
	volume_spec_unref(*s);
}
#define _cleanup_volume_spec_ __attribute__((cleanup(volume_spec_unrefp)))
