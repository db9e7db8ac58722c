/* osd-check.h - may this OSD be removed now?  Answered from a saved record of where each OSD
 * was deployed (name and identity), the user's device list or filter, and the node's devices
 * as they are now.
 *
 * Deciding by name alone destroys a healthy OSD when device names change across a reboot: the
 * filter still says sda, the OSD's disk is now sdb, and sdb is "no longer selected".  So the
 * check first finds where the saved identity is now, and only then asks the selection:
 *
 *   identity found       where                     selected?  verdict
 *   on the saved name    (unchanged)               yes        KEEP
 *   on the saved name    (unchanged)               no         SAFE_TO_REMOVE (user changed it)
 *   on another name      (renamed)                 yes        KEEP
 *   on another name      (renamed)                 no         NOT_SAFE
 *   on two or more       (cloned or duplicate id)  -          NOT_SAFE
 *   nowhere                                        -          MISSING
 *
 * Nothing here removes or writes anything. */
#pragma once

#include <jansson.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>

#include "devinv.h"
#include "error.h"

struct osd_selection;

/* ---- the saved record ---- */

struct osd_record_entry {
	int osd_id;
	char *device; /* name at deploy time as saved: "sda" or "/dev/sda" */
	enum devinv_id_kind kind;
	char *value;		     /* the identity of that kind */
	enum devinv_id_kind hw_kind; /* the disk's hardware id (wwn or serial), version 2 */
	char *hw_value;		     /* its by-id name, or NULL when the record has none */
	char *where;		     /* how messages name the entry: "osds[2]", "\"<osd uuid>\"" */
};

struct osd_record {
	struct osd_record_entry *entries;
	size_t n_entries;
	const char *format; /* "volagent" or "ceph-volume" */
};

/* Parses a record in either format (see docs/devices.md): the project's own
 *   {"volagent_osd_record": 2, "osds": [{"osd_id", "device", "id_kind", "id_value",
 *                                         "hw_id_kind", "hw_id"}, ...]}
 * (version 1, without the optional hw_id_kind and hw_id, is read too)
 * or what `ceph-volume raw list --format json` prints
 *   {"<osd uuid>": {"osd_id", "osd_uuid", "device", "type": "bluestore", ...}, ...}.
 * origin names the input in messages.  A malformed record is rejected as a whole, with err
 * naming the entry and the field.
 * Returns: 0 on success, -EINVAL on a malformed record. */
int osd_record_parse(const char *text, const char *origin, struct osd_record **ret,
		     struct error_info *err);
/* Reads and parses a file; -errno when it cannot be read. */
int osd_record_load(const char *path, struct osd_record **ret, struct error_info *err);
struct osd_record *osd_record_free(struct osd_record *rec);

/* A record in the project's format (version 2) of the bluestore OSDs on the devices sel
 * selects (all OSDs when sel is NULL), each saved with its name, kind "bluestore" and, when the
 * disk has one, its hardware id (by-id name) beside the osd uuid.  New reference. */
json_t *osd_record_from_devinv(const struct devinv *inv, const struct osd_selection *sel);

/* ---- the user's selection: a device list or a filter ---- */

struct osd_selection {
	char **names;	/* --devices: kernel names; NULL-terminated */
	char **entries; /* --devices as the user wrote them; NULL-terminated */
	bool is_filter;
	regex_t filter; /* --device-filter, POSIX extended, unanchored like Rook's */
	char *text;	/* as the user gave it */
};

/* A comma-separated list: "sda,sdb", "/dev/sdc", "/dev/disk/by-id/..." (links are resolved
 * to the kernel name they point at now; by-id names again by osd_selection_resolve).
 * Returns: 0, -EINVAL on an empty list or entry. */
int osd_selection_new_list(const char *list, struct osd_selection **ret, struct error_info *err);
/* Resolves the list's by-id names ("/dev/disk/by-id/virtio-SER1", or "virtio-SER1" where no
 * device has that kernel name) through the inventory, so they work without the links (no
 * udev).  A no-op for a filter.
 * Returns: 0, -ENOENT when a by-id name fits no device, -ENOTUNIQ when it fits several (a
 * shared serial), -ENOMEM; err names the entry. */
int osd_selection_resolve(struct osd_selection *sel, const struct devinv *inv,
			  struct error_info *err);
/* Returns: 0, -EINVAL when regex does not compile (err says why). */
int osd_selection_new_filter(const char *regex, struct osd_selection **ret, struct error_info *err);
struct osd_selection *osd_selection_free(struct osd_selection *sel);
/* Whether the selection picks the device called name (a kernel name, or "/dev/<name>"). */
bool osd_selection_selects(const struct osd_selection *sel, const char *name);
/* "the device list" or "the device filter", for messages. */
const char *osd_selection_what(const struct osd_selection *sel);

/* ---- the check ---- */

enum osd_verdict {
	OSD_KEEP,
	OSD_SAFE_TO_REMOVE,
	OSD_NOT_SAFE,
	OSD_MISSING,
};

struct osd_check_result {
	const struct osd_record_entry *entry;
	enum osd_verdict verdict;
	const struct devinv_device *now;       /* where the identity is now, NULL if nowhere */
	size_t n_found;			       /* devices with the identity */
	const struct devinv_device *saved_now; /* what the saved name holds now, or NULL */
	const struct devinv_device *hw_now;    /* the disk with the saved hardware id, or NULL */
	bool saved_holds_other; /* saved name holds a device without the saved identity */
	bool selected;		/* the selection picks `now` (or the saved name when missing) */
	bool foreign;		/* the selection picks the saved name, which holds another device */
	char *message;		/* "osd.3: NOT_SAFE: saved on sda with ..." */
	char *warning;		/* the foreign-disk warning, or NULL */
};

/* Checks one OSD against the devices now.
 * Returns: 0, -ENOMEM. */
int osd_check_entry(const struct devinv *inv, const struct osd_selection *sel,
		    const struct osd_record_entry *entry, struct osd_check_result *ret);
void osd_check_result_done(struct osd_check_result *res);

const char *osd_verdict_to_string(enum osd_verdict v);
/* The result as a JSON object.  New reference. */
json_t *osd_check_result_to_json(const struct osd_check_result *res);
