/* fuzz-osd-record.c - libFuzzer target for saved OSD records, both formats (the project's
 * {"volagent_osd_record": 1, "osds": [...]} and `ceph-volume raw list --format json`): the
 * bytes of a --saved file through osd_record_parse(), and each entry of an accepted record
 * through osd_check_entry() against this node's devices (scanned once, read-only) and a device
 * list, as `volagent osd-check` does.
 *
 * The record decides whether a disk may be wiped, so an accepted one must be exactly what the
 * parser documents: ids in range and unique, a device name that is a kernel name or a /dev
 * path, an identity of a known kind. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "osd-check.h"

#define FUZZ_CHECK(cond)                  \
	do {                              \
		if (!(cond))              \
			__builtin_trap(); \
	} while (0)

static struct devinv *inv;
static struct osd_selection *sel;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct error_info err = { 0 };

	if (devinv_scan(NULL, 0, &inv, &err) < 0)
		inv = NULL; /* no devices to check against; the parser is fuzzed all the same */
	if (osd_selection_new_list("sda,sdb,vda,nvme0n1p2", &sel, &err) < 0)
		abort();
	return 0;
}

static void check_entry(const struct osd_record_entry *e)
{
	struct osd_check_result res;
	json_t *j;

	FUZZ_CHECK(e->osd_id >= 0 && e->osd_id <= 1000000);
	FUZZ_CHECK(e->device && *e->device && e->value && *e->value && e->where);
	FUZZ_CHECK(!strchr(e->device, '/') || strncmp(e->device, "/dev/", 5) == 0);
	FUZZ_CHECK(!strstr(e->device, "/../"));
	FUZZ_CHECK(e->kind > DEVINV_ID_NONE && e->kind < _DEVINV_ID_MAX);
	if (!inv)
		return;
	FUZZ_CHECK(osd_check_entry(inv, sel, e, &res) == 0);
	FUZZ_CHECK(res.verdict >= OSD_KEEP && res.verdict <= OSD_MISSING);
	FUZZ_CHECK(res.message != NULL);
	/* A device the identity is on nowhere can be nothing but MISSING. */
	FUZZ_CHECK((res.n_found == 0) == (res.verdict == OSD_MISSING));
	j = osd_check_result_to_json(&res);
	FUZZ_CHECK(j != NULL);
	json_decref(j);
	osd_check_result_done(&res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct error_info err = { 0 };
	struct osd_record *rec = NULL;
	char *text = malloc(size + 1);
	int r;

	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	r = osd_record_parse(text, "fuzz.json", &rec, &err);
	if (r < 0) {
		FUZZ_CHECK(r == -EINVAL || r == -ENOMEM);
		FUZZ_CHECK(rec == NULL && err.msg[0]);
	} else {
		FUZZ_CHECK(rec && rec->format);
		for (size_t i = 0; i < rec->n_entries; i++) {
			check_entry(&rec->entries[i]);
			for (size_t k = 0; k < i; k++)
				FUZZ_CHECK(rec->entries[k].osd_id != rec->entries[i].osd_id);
		}
	}
	osd_record_free(rec);
	free(text);
	return 0;
}
