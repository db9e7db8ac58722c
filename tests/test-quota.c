/* test-quota.c - sizes of local directory volumes (project quotas, lib/quota.h): the strict
 * quantity parser, the refusal on a filesystem without project quotas, and, where the kernel
 * has quota support, the limit itself on real loop-backed XFS (mounted prjquota) and ext4
 * (mkfs -O project,quota, mounted prjquota) through a real `volagent run` and its pod spec
 * files.
 *
 * This build host's kernel has neither XFS quota nor a quota format for ext4, so here the
 * enforcing cases skip (each says why) and only the refusal runs; tests/vm/test-quota.sh runs
 * this binary in the test VM (Debian 6.1: XFS quota built in, quota_v2 as a module) with
 * VOLAGENT_TEST_QUOTA=1, where a filesystem that cannot be mounted with prjquota fails the test
 * instead of skipping it.  Root, each case in a private mount namespace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/capability.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "csi-calls.h"
#include "csi-env.h"
#include "fixture-case.h"
#include "error.h"
#include "macro.h"
#include "quantity.h"
#include "quota.h"
#include "testlib.h"

#define MiB (1024ULL * 1024)

/* --- the quantity parser --- */

static void test_quantity(void **state)
{
	static const struct {
		const char *in;
		int r;
		uint64_t bytes;
	} cases[] = {
		{ "512Mi", 0, 512 * MiB },
		{ "10Gi", 0, 10 * 1024 * MiB },
		{ "1G", 0, 1000000000ULL },
		{ "1048576", 0, 1048576 },
		{ "1k", 0, 1000 },
		{ "1.5Ki", 0, 1536 },
		{ "0.5", 0, 1 }, /* rounded up to a whole byte */
		{ "8Ei", -ERANGE, 0 },
		{ "9223372036854775808", -ERANGE, 0 },
		{ "", -EINVAL, 0 },
		{ "0", -EINVAL, 0 },
		{ "-1Gi", -EINVAL, 0 },
		{ "+1Gi", -EINVAL, 0 },
		{ " 1Gi", -EINVAL, 0 },
		{ "1Gi ", -EINVAL, 0 },
		{ "1e9", -EINVAL, 0 },
		{ "500m", -EINVAL, 0 },
		{ "1GiB", -EINVAL, 0 },
		{ "1gi", -EINVAL, 0 },
		{ "1.", -EINVAL, 0 },
		{ ".5Gi", -EINVAL, 0 },
		{ "Gi", -EINVAL, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct error_info err = { 0 };
		uint64_t bytes = 0;
		int r = quantity_parse_bytes(cases[i].in, "size", &bytes, &err);

		if (r != cases[i].r || (r == 0 && bytes != cases[i].bytes))
			fail_msg("\"%s\": got %d (%llu), want %d (%llu): %s", cases[i].in, r,
				 (unsigned long long)bytes, cases[i].r,
				 (unsigned long long)cases[i].bytes, err_msg(&err));
		if (r < 0)
			assert_non_null(strstr(err_msg(&err), "size: "));
	}
}

/* --- filesystems --- */

enum fs_kind {
	XFS,
	EXT4,
};

struct fs_env {
	struct agent_fixture *f;
	char mnt[600];
};

static int setup(void **state)
{
	struct fs_env *e;

	e = calloc(1, sizeof(*e));
	e->f = fixture_new("quota");
	snprintf(e->mnt, sizeof(e->mnt), "%s/fs", e->f->dir);
	mkdir(e->mnt, 0755);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct fs_env *e = *state;

	fixture_free(e->f); /* stops the agent, unmounts, detaches the loop device */
	free(e);
	return 0;
}

/* Makes a loop-backed filesystem of kind at e->mnt, with project quotas when quota.  Returns
 * 0, or the mount's -errno (the kernel lacks what quota needs). */
static int make_fs(struct fs_env *e, enum fs_kind kind, bool quota)
{
	const char *dev = fixture_add_loop(e->f, 300 * MiB);
	int r;

	assert_non_null(dev);
	if (kind == XFS)
		r = test_mkfs("xfs", dev);
	else if (quota)
		r = test_run((const char *const[]){ "mkfs.ext4", "-q", "-F", "-O", "project,quota",
						    dev, NULL });
	else
		r = test_mkfs("ext4", dev);
	assert_int_equal(r, 0);
	if (mount(dev, e->mnt, kind == XFS ? "xfs" : "ext4", 0, quota ? "prjquota" : "") < 0)
		return -errno;
	return 0;
}

/* Mounts a quota filesystem, or skips (fails when VOLAGENT_TEST_QUOTA=1 says the kernel has
 * what it needs). */
static void make_quota_fs(struct fs_env *e, enum fs_kind kind)
{
	int r = make_fs(e, kind, true);

	if (r == 0)
		return;
	if (getenv("VOLAGENT_TEST_QUOTA") && streq(getenv("VOLAGENT_TEST_QUOTA"), "1"))
		fail_msg("mounting %s with prjquota: %s", kind == XFS ? "xfs" : "ext4",
			 strerror(-r));
	fprintf(stderr,
		"# this kernel cannot mount %s with prjquota (%s): skipped here, run "
		"in the VM by tests/vm/test-quota.sh\n",
		kind == XFS ? "xfs" : "ext4", strerror(-r));
	skip();
}

static const char *make_dir(struct fs_env *e, const char *name, char *buf)
{
	snprintf(buf, 700, "%s/%s", e->mnt, name);
	assert_int_equal(mkdir(buf, 0755), 0);
	return buf;
}

static void write_sized_pod(struct fs_env *e, const char *uid, const char *path, const char *size)
{
	char name[128], sz[64] = "";

	if (size)
		snprintf(sz, sizeof(sz), ", \"size\": \"%s\"", size);
	snprintf(name, sizeof(name), "%s.json", uid);
	assert_int_equal(fixture_write_podf(e->f, name,
					    "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": "
					    "\"data\", \"local\": {\"path\": \"%s\"%s}}]}",
					    uid, path, sz),
			 0);
}

/* Writes up to bytes into dir/name as a pod would: without CAP_SYS_RESOURCE,
 * which ext4's quota code lets past any hard limit (XFS enforces a project's limit for root
 * too).  Returns 0 when all was written (and synced), else the -errno the write or fsync
 * failed with. */
static int fill(const char *dir, const char *name, uint64_t bytes)
{
	static char chunk[64 * 1024];
	char path[800];
	int status;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd, r = 0;

		struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct d[2];

		if (syscall(SYS_capget, &h, d) < 0)
			_exit(250);
		d[CAP_TO_INDEX(CAP_SYS_RESOURCE)].effective &= ~CAP_TO_MASK(CAP_SYS_RESOURCE);
		d[CAP_TO_INDEX(CAP_SYS_RESOURCE)].permitted &= ~CAP_TO_MASK(CAP_SYS_RESOURCE);
		if (syscall(SYS_capset, &h, d) < 0)
			_exit(250);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			_exit(errno);
		memset(chunk, 'x', sizeof(chunk));
		for (uint64_t done = 0; done < bytes && r == 0; done += sizeof(chunk))
			if (write(fd, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
				r = errno;
		if (r == 0 && fsync(fd) < 0)
			r = errno;
		_exit(r);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_not_equal(WEXITSTATUS(status), 250);
	return -WEXITSTATUS(status);
}

static uint32_t project_of(const char *path)
{
	struct fsxattr fa = { 0 };
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ioctl(fd, FS_IOC_FSGETXATTR, &fa), 0);
	close(fd);
	return fa.fsx_projid;
}

/* Waits until the pod volume at target is mounted; prints the agent's status when not. */
static void wait_mounted(struct fs_env *e, const char *target)
{
	json_t *st;
	char *dump;

	if (fixture_wait_pod_state(e->f, target, "mounted", -1, 10000))
		return;
	st = fixture_status(e->f);
	dump = st ? json_dumps(status_pod_volume(st, target), JSON_INDENT(1)) : NULL;
	fprintf(stderr, "# %s is not mounted: %s\n", target, dump ? dump : "(no status)");
	free(dump);
	json_decref(st);
	fail();
}

static bool project_cleared(void *path)
{
	return project_of(path) == 0;
}

static bool dir_is_empty(void *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return false;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n == 0;
}

static bool project_set(void *path)
{
	return project_of(path) != 0;
}

/* A size on a filesystem that does not enforce project quotas: the pod's volume is refused
 * with the filesystem named and what to enable, and nothing is mounted. */
static void refused(struct fs_env *e, enum fs_kind kind, const char *hint)
{
	char dir[700], target[512];

	assert_int_equal(make_fs(e, kind, false), 0);
	make_dir(e, "vol", dir);
	assert_int_equal(fixture_start(e->f, NULL), 0);
	write_sized_pod(e, "pod-r", dir, "1Mi");
	fixture_pod_dir(e->f, "pod-r", "data", target);
	assert_true(fixture_wait_pod_error(e->f, target, "does not enforce project quotas", 10000));
	assert_true(fixture_wait_pod_error(e->f, target, hint, 1000));
	assert_false(test_is_mountpoint(target));
	assert_int_equal(test_count_mounts_under(e->f->root), 0);
}

static void test_refused_xfs(void **state)
{
	refused(*state, XFS, "the xfs filesystem holding");
}

static void test_refused_ext4(void **state)
{
	refused(*state, EXT4, "mkfs.ext4 -O project,quota");
}

/* Two sized volumes on one filesystem and one without a size: the small one is full at its
 * size (EDQUOT) while its neighbour keeps writing; each has its own project ID, kept across a
 * restart with the journal lost; stats report the limit; a size removed is lifted. */
static void enforced(struct fs_env *e, enum fs_kind kind)
{
	char a[700], b[700], ta[512], tb[512];
	struct quota_usage q;
	uint32_t ida, idb;
	int timeout = 10000;
	int full = kind == XFS ? -ENOSPC : -EDQUOT;

	make_quota_fs(e, kind);
	make_dir(e, "a", a);
	make_dir(e, "b", b);
	assert_int_equal(fixture_start(e->f, NULL), 0);
	write_sized_pod(e, "pod-a", a, "2Mi");
	write_sized_pod(e, "pod-b", b, "64Mi");
	fixture_pod_dir(e->f, "pod-a", "data", ta);
	fixture_pod_dir(e->f, "pod-b", "data", tb);
	wait_mounted(e, ta);
	wait_mounted(e, tb);

	ida = project_of(a);
	idb = project_of(b);
	assert_true(ida >= QUOTA_PRJ_ID_MIN && ida <= QUOTA_PRJ_ID_MAX);
	assert_true(idb >= QUOTA_PRJ_ID_MIN && idb <= QUOTA_PRJ_ID_MAX);
	assert_int_not_equal(ida, idb);

	/* Past the size the write fails in the pod's view (XFS says ENOSPC for a project over its
	 * limit, ext4 EDQUOT); the neighbour still writes 8 MiB. */
	assert_int_equal(fill(ta, "big", 4 * MiB), full);
	assert_int_equal(fill(tb, "big", 8 * MiB), 0);

	/* What NodeGetVolumeStats and status report: the limit and the project's usage. */
	assert_int_equal(quota_prj_dir_usage_at(ta, &q), 1);
	assert_int_equal(q.project_id, ida);
	assert_int_equal(q.bytes_limit, 2 * MiB);
	assert_true(q.bytes_used > 1 * MiB && q.bytes_used <= 2 * MiB);
	assert_true(q.inodes_used >= 2); /* the directory and the file */
	assert_int_equal(quota_prj_dir_usage_at(tb, &q), 1);
	assert_int_equal(q.bytes_limit, 64 * MiB);
	assert_true(q.bytes_used >= 8 * MiB);
	{
		/* status --json: the same figures per pod volume. */
		json_t *st = fixture_status(e->f);
		json_t *size = json_object_get(status_pod_volume(st, tb), "size");

		assert_non_null(size);
		assert_int_equal(json_integer_value(json_object_get(size, "project_id")), idb);
		assert_true(json_integer_value(json_object_get(size, "limit_bytes")) ==
			    (json_int_t)(64 * MiB));
		assert_true(json_integer_value(json_object_get(size, "used_bytes")) >=
			    (json_int_t)(8 * MiB));
		assert_true(json_integer_value(json_object_get(size, "used_inodes")) >= 2);
		json_decref(st);
	}

	/* A restart that lost its journal: the IDs live on the directories and stay. */
	fixture_stop(e->f, SIGKILL); /* returns the status of the killed agent */
	{
		char journal[600];

		snprintf(journal, sizeof(journal), "%s/journal.json", e->f->state);
		unlink(journal);
	}
	assert_int_equal(fixture_start(e->f, NULL), 0);
	assert_true(fixture_wait_ready(e->f, NULL, timeout));
	wait_mounted(e, ta);
	assert_int_equal(project_of(a), ida);
	assert_int_equal(project_of(b), idb);
	assert_int_equal(fill(ta, "big2", 4 * MiB), full);

	/* A third volume whose hashed ID is taken gets the next free one: b's path as the key of
	 * a new directory (the collision the hash may give) must not yield b's ID. */
	{
		char c[700];
		uint32_t idc = 0;
		struct error_info err = { 0 };
		int fd;

		make_dir(e, "c", c);
		fd = open(c, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(quota_prj_set_size(fd, c, b, MiB, &idc, &err), 0);
		close(fd);
		assert_int_not_equal(idc, idb);
		assert_int_not_equal(idc, ida);
	}

	/* The cost of setting a size (what a set-up adds): 50 fresh directories, each given an
	 * ID (probe included) and a limit, then the same again (the idempotent repeat every
	 * later set-up makes).  Printed, not checked. */
	{
		struct timespec t0, t1, t2;
		int fds[50];

		for (int i = 0; i < 50; i++) {
			char d[700], n[32];

			snprintf(n, sizeof(n), "cost%d", i);
			make_dir(e, n, d);
			fds[i] = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			assert_true(fds[i] >= 0);
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < 50; i++)
			assert_int_equal(quota_prj_set_size(fds[i], "cost", "cost", MiB, NULL,
							    NULL),
					 0);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		for (int i = 0; i < 50; i++)
			assert_int_equal(quota_prj_set_size(fds[i], "cost", "cost", MiB, NULL,
							    NULL),
					 0);
		clock_gettime(CLOCK_MONOTONIC, &t2);
		for (int i = 0; i < 50; i++)
			close(fds[i]);
		fprintf(stderr,
			"# %s: setting a size: %.0f us first (ID probe, FS_IOC_FSSETXATTR, "
			"Q_XSETQLIM), %.0f us again (idempotent), mean of 50\n",
			kind == XFS ? "xfs" : "ext4",
			((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 50e3,
			((t2.tv_sec - t1.tv_sec) * 1e9 + (t2.tv_nsec - t1.tv_nsec)) / 50e3);
	}

	/* The pod goes and comes back without the size: the new set-up lifts the limit and the
	 * volume writes on. */
	assert_int_equal(fixture_remove_pod(e->f, "pod-a.json"), 0);
	assert_true(fixture_wait_unmounted(ta, timeout));
	write_sized_pod(e, "pod-a", a, NULL);
	assert_true(test_wait_until(project_cleared, a, timeout));
	assert_int_equal(quota_prj_dir_usage_at(ta, &q), 0);
	wait_mounted(e, ta);
	assert_int_equal(fill(ta, "after", 4 * MiB), 0);

	/* And given again while mounted: a restart's adoption sets it (a new ID: the old one's
	 * files still count, so it is in use). */
	write_sized_pod(e, "pod-a", a, "1Mi");
	fixture_stop(e->f, SIGTERM);
	assert_int_equal(fixture_start(e->f, NULL), 0);
	assert_true(test_wait_until(project_set, a, timeout));
	assert_int_not_equal(project_of(a), ida);
	assert_int_not_equal(project_of(a), idb);
	assert_int_equal(fill(ta, "again", 2 * MiB), full);
}

static void test_enforced_xfs(void **state)
{
	enforced(*state, XFS);
}

static void test_enforced_ext4(void **state)
{
	enforced(*state, EXT4);
}

/* An ephemeral volume with a size, its directory on a quota filesystem (--local-ephemeral-dir):
 * the size holds, and the directory goes with the pod. */
static void test_ephemeral_size_xfs(void **state)
{
	struct fs_env *e = *state;
	char eph[700], target[512];

	make_quota_fs(e, XFS);
	snprintf(eph, sizeof(eph), "%s/eph", e->mnt);
	assert_int_equal(fixture_start(e->f,
				       (const char *const[]){ "--local-ephemeral-dir", eph, NULL }),
			 0);
	assert_int_equal(fixture_write_pod(e->f, "eph.json",
					   "{\"pod\": {\"uid\": \"pod-eph\"}, \"volumes\": "
					   "[{\"name\": \"scratch\", \"local\": {\"ephemeral\": "
					   "true, \"size\": \"2Mi\"}}]}"),
			 0);
	fixture_pod_dir(e->f, "pod-eph", "scratch", target);
	wait_mounted(e, target);
	assert_int_equal(fill(target, "big", 4 * MiB), -ENOSPC);
	assert_int_equal(fixture_remove_pod(e->f, "eph.json"), 0);
	assert_true(fixture_wait_unmounted(target, 10000));
	assert_true(test_wait_until(dir_is_empty, eph, 10000));
}

/* The project_id the journal (<state>/journal.json) records for the CSI target (0: none);
 * with set_to, writes set_to there instead. */
static uint32_t journal_project_id(struct fs_env *e, const char *target, uint32_t set_to)
{
	char path[700];
	json_t *root, *vol, *t;
	size_t i, k;
	uint32_t id = 0;

	snprintf(path, sizeof(path), "%s/journal.json", e->f->state);
	root = json_load_file(path, 0, NULL);
	if (!root)
		return 0;
	json_array_foreach(json_object_get(root, "csi"), i, vol)
	{
		json_array_foreach(json_object_get(vol, "targets"), k, t)
		{
			const char *p = json_string_value(json_object_get(t, "target"));

			if (!p || strcmp(p, target) != 0)
				continue;
			id = (uint32_t)json_integer_value(json_object_get(t, "project_id"));
			if (set_to)
				json_object_set_new(t, "project_id", json_integer(set_to));
		}
	}
	if (set_to)
		assert_int_equal(json_dump_file(root, path, 0), 0);
	json_decref(root);
	return id;
}

struct journal_wait {
	struct fs_env *e;
	const char *target;
	uint32_t id;
};

static bool journal_has_id(void *arg)
{
	struct journal_wait *w = arg;

	return journal_project_id(w->e, w->target, 0) == w->id;
}

/* The size through CSI, with the real gRPC client: `size` in volume_context is enforced at
 * publish and NodeGetVolumeStats reports the limit as total and the project's usage as used. */
static void test_csi_stats_xfs(void **state)
{
	struct fs_env *e = *state;
	struct csi_env csi;
	char dir[700], stg[700], target[700], calls[4096], ctx[1024];
	const char *cap = "\"volume_capability\": {\"mount\": {}, \"access_mode\": {\"mode\": "
			  "\"SINGLE_NODE_WRITER\"}}";
	const char *line;
	char *out;

	if (!csi_env_have_client()) {
		fprintf(stderr, "# python3-grpcio or python3-grpc-tools missing: skipped\n");
		skip();
	}
	make_quota_fs(e, XFS);
	make_dir(e, "csi", dir);
	csi_env_init(&csi, e->f);
	csi_env_start(&csi);
	csi_env_staging(&csi, "sized", stg);
	csi_env_target(&csi, "pod-s", "sized", target);
	snprintf(ctx, sizeof(ctx),
		 "\"volume_context\": {\"type\": \"local\", \"path\": \"%s\", \"size\": "
		 "\"4Mi\"}",
		 dir);
	snprintf(calls, sizeof(calls),
		 "Node/NodeStageVolume {\"volume_id\": \"sized\", \"staging_target_path\": "
		 "\"%s\", %s, %s}\n"
		 "Node/NodePublishVolume {\"volume_id\": \"sized\", \"staging_target_path\": "
		 "\"%s\", \"target_path\": \"%s\", %s, %s}\n",
		 stg, cap, ctx, stg, target, cap, ctx);
	out = csi_env_call(&csi, calls);
	assert_line(out, 0, "OK {}");
	assert_line(out, 1, "OK {}");
	free(out);
	assert_int_equal(fill(target, "one", MiB), 0);
	assert_int_equal(fill(target, "two", 4 * MiB), -ENOSPC);
	snprintf(calls, sizeof(calls),
		 "Node/NodeGetVolumeStats {\"volume_id\": \"sized\", \"volume_path\": \"%s\"}\n",
		 target);
	out = csi_env_call(&csi, calls);
	line = csi_line(out, 0);
	fprintf(stderr, "# stats: %s\n", line);
	assert_non_null(strstr(line, "\"total\": \"4194304\""));
	assert_non_null(strstr(line, "\"used\": \"4194304\"")); /* full: one 1 MiB + 3 MiB */
	assert_non_null(strstr(line, "\"used\": \"3\""));	/* inodes: the dir, two files */
	free(out);

	/* The journal records the target's project ID, and a restarted agent checks it against
	 * the directory's: a journal that says another ID is corrected, and the log says so. */
	{
		struct journal_wait w = { e, target, project_of(dir) };

		assert_true(w.id >= QUOTA_PRJ_ID_MIN);
		assert_true(test_wait_until(journal_has_id, &w, 10000));
		fixture_stop(e->f, SIGKILL);
		assert_int_equal(journal_project_id(e, target, w.id + 1), w.id);
		csi_env_start(&csi);
		assert_true(fixture_wait_log(e->f,
					     "the directory's project ID is not the journal's",
					     10000));
		assert_true(test_wait_until(journal_has_id, &w, 10000));
		assert_int_equal(project_of(dir), w.id);
	}
}

/* Whether the directory path has a project limit of 8 MiB (a test_wait_until predicate). */
static bool limit_is_8mib(void *path)
{
	struct quota_usage q;

	return quota_prj_dir_usage_at(path, &q) == 1 && q.bytes_limit == 8 * MiB;
}

/* The Controller service (--controller) on XFS mounted prjquota: CreateVolume with a size
 * (enforced, the default) gives the new directory its limit at once and answers the size in the
 * volume_context; staged and published with that context, a write past the size fails;
 * ControllerExpandVolume records 8 MiB and NodeExpandVolume raises the quota, and the write
 * goes through; an agent SIGKILLed and restarted keeps 8 MiB (the record on the directory wins
 * over the older size in the volume_context); DeleteVolume after unpublish removes it all. */
static void test_controller_xfs(void **state)
{
	struct fs_env *e = *state;
	struct csi_env csi;
	const char *const flags[] = { "--controller", "--local-path-prefix", e->mnt, NULL };
	char calls[8192] = "", id[200], dir[900], stg[700], target[700];
	_cleanup_free_ char *ctx = NULL;
	json_t *o, *v;
	char *out;

	if (!csi_env_have_client()) {
		fprintf(stderr, "# python3-grpcio or python3-grpc-tools missing: skipped\n");
		skip();
	}
	make_quota_fs(e, XFS);
	csi_env_init(&csi, e->f);
	csi_env_start_with(&csi, flags);
	csi_calls_add(calls, sizeof(calls),
		      "Controller/CreateVolume {\"name\": \"pvc-q\", \"capacity_range\": "
		      "{\"required_bytes\": 4194304}, \"volume_capabilities\": [" CSI_CAP_MOUNT
		      "], \"parameters\": {\"basePath\": \"%s\"}}\n",
		      e->mnt);
	out = csi_env_call(&csi, calls);
	assert_true(strncmp(csi_line(out, 0), "OK ", 3) == 0);
	o = json_loads(csi_line(out, 0) + 3, 0, NULL);
	free(out);
	assert_non_null(o);
	v = json_object_get(o, "volume");
	snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(v, "volume_id")));
	assert_string_equal(json_string_value(
				    json_object_get(json_object_get(v, "volume_context"), "size")),
			    "4194304");
	ctx = json_dumps(json_object_get(v, "volume_context"), JSON_COMPACT);
	json_decref(o);
	snprintf(dir, sizeof(dir), "%s/%s", e->mnt, id);
	assert_true(project_of(dir) >= QUOTA_PRJ_ID_MIN);

	csi_env_staging(&csi, id, stg);
	csi_env_target(&csi, "pod-c", "pv-c", target);
	calls[0] = '\0';
	csi_calls_stage(calls, sizeof(calls), id, stg, CSI_CAP_MOUNT, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), id, stg, target, CSI_CAP_MOUNT, ctx, NULL);
	csi_env_call_ok(&csi, calls, 2);
	assert_int_equal(fill(target, "one", MiB), 0);
	assert_int_equal(fill(target, "two", 4 * MiB), -ENOSPC);

	calls[0] = '\0';
	csi_calls_add(
		calls, sizeof(calls),
		"Controller/ControllerExpandVolume {\"volume_id\": \"%s\", \"capacity_range\": "
		"{\"required_bytes\": 8388608}}\n"
		"Node/NodeExpandVolume {\"volume_id\": \"%s\", \"volume_path\": \"%s\", "
		"\"capacity_range\": {\"required_bytes\": 8388608}}\n",
		id, id, target);
	CSI_CALL_WANT(&csi, calls, { 0, "\"node_expansion_required\": true" },
		      { 1, "OK {\"capacity_bytes\": \"8388608\"}" });
	assert_true(limit_is_8mib(dir));
	assert_int_equal(fill(target, "two", 4 * MiB), 0);

	assert_int_equal(fixture_stop(e->f, SIGKILL), 128 + SIGKILL);
	csi_env_start_with(&csi, flags);
	assert_true(fixture_wait_log(e->f, "adopted existing mount", 10000));
	assert_true(limit_is_8mib(dir));

	calls[0] = '\0';
	csi_calls_unpublish(calls, sizeof(calls), id, target);
	csi_calls_unstage(calls, sizeof(calls), id, stg);
	csi_calls_add(calls, sizeof(calls), "Controller/DeleteVolume {\"volume_id\": \"%s\"}\n",
		      id);
	csi_env_call_ok(&csi, calls, 3);
	assert_int_equal(access(dir, F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantity),       FIXTURE_CASE(test_refused_xfs),
		FIXTURE_CASE(test_refused_ext4),       FIXTURE_CASE(test_enforced_xfs),
		FIXTURE_CASE(test_enforced_ext4),      FIXTURE_CASE(test_csi_stats_xfs),
		FIXTURE_CASE(test_ephemeral_size_xfs), FIXTURE_CASE(test_controller_xfs),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
