/* rbd-helper-fault.c - the test-only side of plugins/rbd/rbd-helper-fault.h: the switch
 * VOLAGENT_RBD_HELPER_FAULT=hang|abort[:FILE] makes `volagent rbd-helper` hang or abort after
 * it read its request (with :FILE only the run that creates FILE fails, once), and the daemon's
 * rbd-cluster.c hands the switch on to the helper it runs.  Linked into the test binaries and
 * $(BUILD)/volagent-test only (Makefile), so the production binary has none of it. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "rbd-helper-fault.h"

#define FAULT_ENV "VOLAGENT_RBD_HELPER_FAULT"

void rbd_helper_fault_apply(void)
{
	const char *f = getenv(FAULT_ENV), *once;

	if (!f)
		return;
	once = strchr(f, ':');
	if (once) {
		int fd = open(once + 1, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return; /* failed once already */
		close(fd);
	}
	if (startswith(f, "hang")) /* a Ceph call that never returns */
		for (;;)
			pause();
	if (startswith(f, "abort")) /* a crash inside the library */
		abort();
}

char *rbd_helper_fault_env(void)
{
	const char *f = getenv(FAULT_ENV);

	return f ? strdup_printf(FAULT_ENV "=%s", f) : NULL;
}
