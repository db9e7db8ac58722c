/* pod-spec.h - a pod spec file: which volumes one pod wants, shaped like a Kubernetes pod's
 * volumes so operators recognise it:
 *
 *   { "pod": { "uid": "0c1d...", "name": "web-0", "namespace": "default" },
 *     "volumes": [ { "name": "data", "local": { "path": "/mnt/disks/ssd1" } },
 *                  { "name": "logs", "local": { "path": "/srv/logs" }, "readOnly": true } ] }
 *
 * The volume source key names the plugin ("local", "nfs", "rbd"); its fields become the
 * volume_spec's attributes and are checked by that plugin.  Parsing is strict: an unknown key,
 * a wrong type or a bad value rejects the whole file with a message naming the field. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "macro.h"
#include "plugin.h"
#include "volume-spec.h"

struct pod_volume {
	char *name;	/* the volume's name in the pod (a DNS label) */
	bool read_only; /* the pod-level readOnly */
	struct volume_spec *spec;
	const struct volume_plugin *plugin;
	char *volume_name; /* the plugin's node-wide name for the source */
	/* plugin_uses_device() of spec, when uses_device_known: found by whoever parsed the
	 * file (a start-up scan does it on its parsing threads), else by the desired state. */
	bool uses_device_known;
	bool uses_device;
};

struct pod_spec {
	char *uid;
	char *name;
	char *namespace;
	char *origin; /* the file it came from */
	struct pod_volume *volumes;
	size_t n_volumes;
};

/* Files larger than this are refused unread. */
#define POD_SPEC_MAX_BYTES (1024 * 1024)

/* Parses and validates one spec file.  err gets "<field>: <reason>" (or the JSON syntax error
 * with its line) and the file is rejected whole. */
int pod_spec_parse_file(const char *path, struct pod_spec **ret, struct error_info *err);
/* The same for the file name in the directory dir_fd (AT_FDCWD: name is a path), recording
 * origin as the spec's origin.  The file is opened once (no stat of the path first, no
 * stdio); a FIFO or other non-regular file is refused without blocking.  Safe to call from
 * several threads at once. */
int pod_spec_parse_at(int dir_fd, const char *name, const char *origin, struct pod_spec **ret,
		      struct error_info *err);
/* The same for an open file (read from its current offset; fd stays the caller's). */
int pod_spec_parse_fd(int fd, const char *origin, struct pod_spec **ret, struct error_info *err);
/* The same for a string; origin is recorded as the spec's origin. */
int pod_spec_parse_string(const char *json, const char *origin, struct pod_spec **ret,
			  struct error_info *err);
struct pod_spec *pod_spec_free(struct pod_spec *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pod_spec *, pod_spec_free)
/* Whether name is a valid volume name: a DNS-1123 label (lowercase alphanumerics and '-',
 * starting and ending alphanumeric, at most 63). */
bool pod_volume_name_is_valid(const char *name);
