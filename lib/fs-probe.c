/* fs-probe.c - see fs-probe.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "fs-probe.h"
#include "process.h"

/* In the child: the probe itself; its result travels back through the runner. */
static int probe_main(void *arg, void *result, struct error_info *err)
{
	const char *path = arg;
	struct fs_probe_result *r = result;
	struct statx stx;
	struct statfs sf;

	memset(r, 0, sizeof(*r));
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_INO, &stx) < 0) {
		r->error = -errno;
		return 0;
	}
	r->mount_root = (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
			(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
	r->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	if (statfs(path, &sf) < 0) {
		r->error = -errno;
		return 0;
	}
	uint64_t bs = sf.f_frsize ? (uint64_t)sf.f_frsize : (uint64_t)sf.f_bsize;
	r->bytes_total = sf.f_blocks * bs;
	r->bytes_available = sf.f_bavail * bs;
	r->bytes_used = (sf.f_blocks - sf.f_bfree) * bs;
	r->inodes_total = sf.f_files;
	r->inodes_available = sf.f_ffree;
	r->inodes_used = sf.f_files - sf.f_ffree;
	r->fs_type = (long)sf.f_type;
	return 0;
}

int fs_probe(const char *path, int timeout_ms, struct fs_probe_result *ret)
{
	struct fs_probe_result res;
	int r;

	/* SIGKILL at once at the deadline: a statfs waiting on a dead server only answers that. */
	r = process_run_fn(probe_main, (void *)path, &res, sizeof(res),
			   &(struct process_options){ .timeout_ms = timeout_ms > 0 ? timeout_ms : 1,
						      .kill_at_once = true },
			   NULL, NULL, 0);
	if (r < 0)
		return r;
	*ret = res;
	return 0;
}
