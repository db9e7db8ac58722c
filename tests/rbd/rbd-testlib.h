/* rbd-testlib.h - what the rbd tests share: the cluster tests/rbd/run.sh started (CEPH_* in
 * the environment), images, the watchers of an image as the cluster sees them, another client
 * holding an image open, and counting what an attach leaves on the node (rbd-fuse processes,
 * loop devices, FUSE mounts) so a test can say "nothing left behind".  Header-only: each rbd
 * test binary includes it once, after <cmocka.h>. */
#pragma once

#include <dirent.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

struct rt_cluster {
	char mon[64]; /* "127.0.0.1:<v1 port>", the form a Kubernetes spec uses */
	const char *conf, *keyring, *key, *pool;
	rados_t rados;
	rados_ioctx_t io;
};

static struct rt_cluster rt;

/* Reads the cluster from the environment and connects as admin; exit 77 when run alone. */
static void rt_init(void)
{
	const char *host = getenv("CEPH_MON_HOST"), *v1;

	rt.conf = getenv("CEPH_CONF");
	rt.keyring = getenv("CEPH_KEYRING");
	rt.key = getenv("CEPH_ADMIN_KEY");
	rt.pool = getenv("CEPH_POOL") ? getenv("CEPH_POOL") : "rbd";
	if (!host || !rt.conf || !rt.keyring || !rt.key) {
		fprintf(stderr, "skipped: no cluster (run through tests/rbd/run.sh)\n");
		exit(77);
	}
	v1 = strstr(host, "v1:");
	snprintf(rt.mon, sizeof(rt.mon), "%.*s", (int)strcspn(v1 ? v1 + 3 : host, ",]"),
		 v1 ? v1 + 3 : host);
	if (rados_create2(&rt.rados, "ceph", "client.admin", 0) < 0 ||
	    rados_conf_set(rt.rados, "mon_host", host) < 0 ||
	    rados_conf_set(rt.rados, "key", rt.key) < 0 ||
	    rados_conf_set(rt.rados, "client_mount_timeout", "20") < 0 ||
	    rados_conf_set(rt.rados, "log_to_stderr", "false") < 0 ||
	    rados_conf_set(rt.rados, "err_to_stderr", "false") < 0 || rados_connect(rt.rados) < 0 ||
	    rados_ioctx_create(rt.rados, rt.pool, &rt.io) < 0) {
		fprintf(stderr, "cannot connect to the test cluster at %s\n", host);
		exit(1);
	}
}

static int rt_create_image(const char *name, int size_mib)
{
	int order = 0;

	return rbd_create(rt.io, name, (uint64_t)size_mib << 20, &order);
}

/* How many clients watch the image (-errno when it cannot be opened). */
static int rt_watchers(const char *image)
{
	rbd_image_watcher_t w[16];
	size_t n = 16;
	rbd_image_t img;
	int r = rbd_open_read_only(rt.io, image, &img, NULL);

	if (r < 0)
		return r;
	r = rbd_watchers_list(img, w, &n);
	if (r == 0)
		rbd_watchers_list_cleanup(w, n);
	rbd_close(img);
	return r < 0 ? r : (int)n;
}

static bool rt_no_watchers_pred(void *arg)
{
	return rt_watchers(arg) == 0;
}

/* Waits until nobody watches image. */
static bool rt_wait_no_watchers(const char *image, int timeout_ms)
{
	return test_wait_until(rt_no_watchers_pred, (void *)image, timeout_ms);
}

/* Opens image read-write as the test's own client: a watcher "on another node". */
static rbd_image_t rt_hold(const char *image)
{
	rbd_image_t img = NULL;

	if (rbd_open(rt.io, image, &img, NULL) < 0)
		return NULL;
	return img;
}

/* The PIDs of rbd-fuse processes with an argument under dir (count returned). */
static int rt_fuse_pids(const char *dir, int *pids, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d))) {
		char path[300], buf[4096];
		FILE *f;
		size_t len;
		int pid = atoi(de->d_name);

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
		f = fopen(path, "re");
		if (!f)
			continue;
		len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = '\0';
		if (strcmp(buf, "rbd-fuse"))
			continue;
		for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
			if (!strncmp(buf + i, dir, strlen(dir))) {
				if (n < max)
					pids[n] = pid;
				n++;
				break;
			}
	}
	if (d)
		closedir(d);
	return n;
}

/* Sends sig to every rbd-fuse process with an argument under dir (a failed test's leftovers). */
static void rt_fuse_kill(const char *dir, int sig)
{
	int pids[8], n = rt_fuse_pids(dir, pids, 8);

	for (int i = 0; i < n && i < 8; i++)
		kill(pids[i], sig);
}

/* Loop devices whose backing file lies under dir. */
static int rt_loops_under(const char *dir)
{
	DIR *d = opendir("/sys/block");
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d))) {
		char path[300], back[4096];
		FILE *f;

		if (strncmp(de->d_name, "loop", 4))
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(back, sizeof(back), f) && !strncmp(back, dir, strlen(dir)))
			n++;
		fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

/* Whether anything is left under run_dir: FUSE mounts, loops, rbd-fuse, key files, records. */
static bool rt_nothing_left(const char *run_dir, char *why, size_t len)
{
	int pids[4];
	DIR *d;
	struct dirent *de;

	if (test_count_mounts_under(run_dir) > 0)
		return snprintf(why, len, "a mount under %s", run_dir), false;
	if (rt_loops_under(run_dir) > 0)
		return snprintf(why, len, "a loop device over a file under %s", run_dir), false;
	if (rt_fuse_pids(run_dir, pids, 4) > 0)
		return snprintf(why, len, "rbd-fuse pid %d", pids[0]), false;
	d = opendir(run_dir);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' || !strcmp(de->d_name, "released") ||
		    strstr(de->d_name, ".log"))
			continue;
		snprintf(why, len, "%s/%s", run_dir, de->d_name);
		closedir(d);
		return false;
	}
	if (d)
		closedir(d);
	return true;
}

/* Fails the test, saying what, unless rt_nothing_left(run_dir). */
static void rt_assert_nothing_left(const char *run_dir)
{
	char why[700] = "";
	bool ok = rt_nothing_left(run_dir, why, sizeof(why));

	if (!ok)
		print_error("left behind: %s\n", why);
	assert_true(ok);
}
