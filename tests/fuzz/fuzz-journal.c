/* fuzz-journal.c - libFuzzer target for the journal reader: the bytes as
 * <state-dir>/journal.json (in a private dir under /dev/shm), loaded by journal_load() as a
 * starting agent does, then its CSI section through rec_requests_import_csi(), the same import the
 * reconciler runs at startup (on a reconciler that holds only its desired and actual state:
 * no thread, no mount table, nothing mounted).
 *
 * What a corrupt journal must do (journal.h): be detected (-EBADMSG with a message), be moved
 * aside to journal.json.corrupt, and leave no half-read device entries.  What a good one must
 * do: survive a save and a load again unchanged in its device entries, so the journal an
 * agent writes after reading it is readable. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hashmap.h"
#include "journal.h"
#include "reconciler-internal.h"

#define FUZZ_CHECK(cond)                  \
	do {                              \
		if (!(cond))              \
			__builtin_trap(); \
	} while (0)

static char dir[64];
static char path[128], aside[160], prev[160];
static struct journal *journal;

static void cleanup_dir(void)
{
	unlink(path);
	unlink(aside);
	unlink(prev);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct error_info err = { 0 };
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	snprintf(dir, sizeof(dir), "%s/fuzz-journal.XXXXXX", base);
	if (!mkdtemp(dir) || journal_open(dir, &journal, &err) < 0)
		abort();
	snprintf(path, sizeof(path), "%s/journal.json", dir);
	snprintf(aside, sizeof(aside), "%s.corrupt", path);
	snprintf(prev, sizeof(prev), "%s.prev", path);
	atexit(cleanup_dir);
	return 0;
}

static void write_input(const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	close(fd);
}

/* The CSI import of a reconciler that was never started. */
static void import_csi(json_t *csi)
{
	struct reconciler r = { 0 };
	struct error_info err = { 0 };
	int k;

	r.dsw = dsw_new("/fuzz/root");
	r.asw = asw_new("/fuzz/root");
	r.csi.kubelet_root = (char *)"/var/lib/kubelet";
	FUZZ_CHECK(r.dsw && r.asw);
	k = rec_requests_import_csi(&r, csi, &err);
	if (k < 0)
		FUZZ_CHECK(k == -ENOMEM || err.msg[0]);
	rec_requests_record_fini(&r);
	dsw_free(r.dsw);
	asw_free(r.asw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct error_info err = { 0 };
	struct actual_state *a = asw_new("/fuzz/root"), *b;
	json_t *csi = NULL, *csi2 = NULL;
	bool same_boot;
	int r;

	FUZZ_CHECK(a);
	unlink(aside);
	unlink(prev); /* the input alone: the last input's save left its copy */
	write_input(data, size);
	r = journal_load(journal, a, &same_boot, &csi, &err);
	if (r < 0) {
		/* Detected, reported, moved aside, nothing half-read. */
		FUZZ_CHECK(r == -EBADMSG || r == -ENOMEM);
		FUZZ_CHECK(csi == NULL);
		if (r == -EBADMSG) {
			FUZZ_CHECK(err.msg[0] && strstr(err.msg, "moved aside"));
			FUZZ_CHECK(access(path, F_OK) < 0 && access(aside, F_OK) == 0);
			FUZZ_CHECK(hashmap_size(asw_devices(a)) == 0);
		}
		asw_free(a);
		return 0;
	}
	FUZZ_CHECK(r == 0);
	if (csi)
		import_csi(csi);

	/* What was read is written back readable, with the same device entries. */
	FUZZ_CHECK(journal_save(journal, a, csi, &err) == 0);
	b = asw_new("/fuzz/root");
	FUZZ_CHECK(b);
	r = journal_load(journal, b, &same_boot, &csi2, &err);
	FUZZ_CHECK(r == 0);
	FUZZ_CHECK(same_boot);
	FUZZ_CHECK(hashmap_size(asw_devices(a)) == hashmap_size(asw_devices(b)));
	FUZZ_CHECK(json_equal(csi, csi2) || (!csi && !csi2));
	json_decref(csi);
	json_decref(csi2);
	asw_free(a);
	asw_free(b);
	return 0;
}
