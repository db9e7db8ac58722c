/* rbd-helper-fault.c - the test-only side of plugins/rbd/rbd-helper-fault.h: the switch
 * VOLAGENT_RBD_HELPER_FAULT=KIND[@OP[#N]][:FILE] makes `volagent rbd-helper` hang or abort
 * (KIND hang or abort) after it read its request, and the daemon's rbd-cluster.c hands the
 * switch on to the helper it runs.  @OP: only runs for that operation (check, watchers,
 * blocklist).  :FILE alone: only the run that creates FILE fails, once.  #N (with :FILE): each
 * run for OP appends a byte to FILE, and only the run that makes it N bytes long fails (the
 * Nth, e.g. the poll for an attach's own client, after the watchers listed before the map).
 * Linked into the test binaries and $(BUILD)/volagent-test only (Makefile), so the production
 * binary has none of it. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "rbd-helper-fault.h"

#define FAULT_ENV "VOLAGENT_RBD_HELPER_FAULT"

/* Whether this run is the one FILE selects: the first to create it, or with n > 0 the nth to
 * append to it. */
static bool selected(const char *file, long n)
{
	struct stat st;
	int fd;

	if (n <= 0) {
		fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return false; /* failed once already */
		close(fd);
		return true;
	}
	fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	if (write(fd, "x", 1) != 1 || fstat(fd, &st) < 0) {
		close(fd);
		return false;
	}
	close(fd);
	return st.st_size == n;
}

void rbd_helper_fault_apply(const char *op)
{
	const char *f = getenv(FAULT_ENV), *file, *at, *hash;
	size_t kind_len;
	long n = 0;

	if (!f)
		return;
	file = strchr(f, ':');
	at = strchr(f, '@');
	if (at && file && at > file)
		at = NULL; /* an '@' in the file's name */
	kind_len = at ? (size_t)(at - f) : file ? (size_t)(file - f) : strlen(f);
	if (at) {
		size_t op_len = strcspn(at + 1, "#:");
		if (strlen(op) != op_len || strncmp(at + 1, op, op_len) != 0)
			return;
		hash = at + 1 + op_len;
		if (*hash == '#')
			n = strtol(hash + 1, NULL, 10);
	}
	if (file && !selected(file + 1, n))
		return;
	if (kind_len == 4 && startswith(f, "hang")) /* a Ceph call that never returns */
		for (;;)
			pause();
	if (kind_len == 5 && startswith(f, "abort")) /* a crash inside the library */
		abort();
}

char *rbd_helper_fault_env(void)
{
	const char *f = getenv(FAULT_ENV);

	return f ? strdup_printf(FAULT_ENV "=%s", f) : NULL;
}
