/* fs-probe.c - see fs-probe.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "fs-probe.h"

struct probe {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char *path;
	struct fs_probe_result result;
	bool done;
	unsigned refs;		/* the caller and the thread */
};

static pthread_mutex_t stuck_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned running;

static void probe_unref(struct probe *p)
{
	bool last;

	pthread_mutex_lock(&p->lock);
	last = --p->refs == 0;
	pthread_mutex_unlock(&p->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p->path);
	free(p);
}

static void *probe_main(void *arg)
{
	struct probe *p = arg;
	struct fs_probe_result r = { 0 };
	struct statx stx;
	struct statfs sf;

	if (statx(AT_FDCWD, p->path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_INO, &stx) < 0) {
		r.error = -errno;
	} else {
		r.mount_root = (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
			       (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
		r.dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
		if (statfs(p->path, &sf) < 0) {
			r.error = -errno;
		} else {
			uint64_t bs = sf.f_frsize ? (uint64_t)sf.f_frsize : (uint64_t)sf.f_bsize;
			r.bytes_total = sf.f_blocks * bs;
			r.bytes_available = sf.f_bavail * bs;
			r.bytes_used = (sf.f_blocks - sf.f_bfree) * bs;
			r.inodes_total = sf.f_files;
			r.inodes_available = sf.f_ffree;
			r.inodes_used = sf.f_files - sf.f_ffree;
			r.fs_type = (long)sf.f_type;
		}
	}
	pthread_mutex_lock(&p->lock);
	p->result = r;
	p->done = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_lock(&stuck_lock);
	running--;
	pthread_mutex_unlock(&stuck_lock);
	probe_unref(p);
	return NULL;
}

int fs_probe(const char *path, int timeout_ms, struct fs_probe_result *ret)
{
	struct probe *p;
	pthread_condattr_t ca;
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all, old;
	struct timespec until;
	bool done;
	int r;

	pthread_mutex_lock(&stuck_lock);
	if (running >= FS_PROBE_MAX_STUCK) {
		pthread_mutex_unlock(&stuck_lock);
		return -EAGAIN;
	}
	running++;
	pthread_mutex_unlock(&stuck_lock);

	p = calloc(1, sizeof(*p));
	if (!p || !(p->path = strdup(path))) {
		free(p);
		pthread_mutex_lock(&stuck_lock);
		running--;
		pthread_mutex_unlock(&stuck_lock);
		return -ENOMEM;
	}
	p->refs = 2;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = pthread_create(&t, &attr, probe_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (r != 0) {
		pthread_mutex_lock(&stuck_lock);
		running--;
		pthread_mutex_unlock(&stuck_lock);
		p->refs = 1;
		probe_unref(p);
		return -r;
	}
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&p->lock);
	while (!p->done && pthread_cond_timedwait(&p->cond, &p->lock, &until) == 0)
		;
	done = p->done;
	if (done)
		*ret = p->result;
	pthread_mutex_unlock(&p->lock);
	probe_unref(p);
	return done ? 0 : -ETIMEDOUT;
}
