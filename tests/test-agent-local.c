/* test-agent-local.c - the agent driven by pod spec files, with the local plugin, on real
 * directories, loop devices, ext4 and xfs.  Runs as root in a private mount namespace; each
 * test has its own agent, dirs and loop devices, torn down by the fixture even on failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "file-check.h"
#include "fixture-case.h"
#include "testlib.h"

#define WAIT_MS 10000

FIXTURE_SETUP_TEARDOWN("local")

/* For a test that stops the agent (SIGSTOP): it is continued first, so that the fixture's
 * SIGTERM ends it even when an assertion failed while it was stopped. */
static int teardown_continued(void **state)
{
	struct agent_fixture *f = *state;

	if (f && f->agent.pid > 0)
		kill(f->agent.pid, SIGCONT);
	return teardown(state);
}

static int write_in(const char *dir, const char *name, const char *content)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return test_write_file(path, content);
}

/* Writes pods/<file>: pod uid with the local volumes a and b, of paths apath and bpath. */
static void write_local_pod2(struct agent_fixture *f, const char *file, const char *uid,
			     const char *a, const char *apath, const char *b, const char *bpath)
{
	assert_int_equal(fixture_write_podf(f, file,
					    "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": ["
					    "{\"name\": \"%s\", \"local\": {\"path\": \"%s\"}},"
					    "{\"name\": \"%s\", \"local\": {\"path\": \"%s\"}}]}",
					    uid, a, apath, b, bpath),
			 0);
}

static bool path_is_gone(void *path)
{
	return access(path, F_OK) < 0 && errno == ENOENT;
}

static void test_add_and_remove_directory_volumes(void **state)
{
	struct agent_fixture *f = *state;
	const char *data = fixture_make_source(f, "data", "data-content");
	const char *logs = fixture_make_source(f, "logs", "log-content");
	char dd[512], ld[512], poddir[600];

	assert_int_equal(
		fixture_write_podf(
			f, "a.json",
			"{\"pod\": {\"uid\": \"pod-a\", \"name\": \"web-0\", \"namespace\": \"default\"},"
			" \"volumes\": [{\"name\": \"data\", \"local\": {\"path\": \"%s\"}},"
			" {\"name\": \"logs\", \"local\": {\"path\": \"%s\"}, \"readOnly\": true}]}",
			data, logs),
		0);
	assert_int_equal(fixture_start(f, NULL), 0);
	fixture_pod_dir(f, "pod-a", "data", dd);
	fixture_pod_dir(f, "pod-a", "logs", ld);
	assert_true(fixture_wait_mounted(dd, WAIT_MS));
	assert_true(fixture_wait_mounted(ld, WAIT_MS));

	assert_file_text(dd, "hello", "data-content");
	/* The pod writes through its volume and the source sees it. */
	assert_int_equal(write_in(dd, "from-pod", "x"), 0);
	assert_file_text(data, "from-pod", "x");
	/* Read-only is in the mount table and enforced. */
	assert_false(test_mount_is_ro(dd));
	assert_true(test_mount_is_ro(ld));
	assert_int_equal(write_in(ld, "nope", "x"), -EROFS);

	assert_int_equal(fixture_remove_pod(f, "a.json"), 0);
	assert_true(fixture_wait_unmounted(dd, WAIT_MS));
	assert_true(fixture_wait_unmounted(ld, WAIT_MS));
	assert_true(fixture_wait_mount_count(f, 0, WAIT_MS));
	/* The pod's dirs are gone (rmdir only), the sources are untouched. */
	snprintf(poddir, sizeof(poddir), "%s/pods/pod-a", f->root);
	assert_true(test_wait_until(path_is_gone, poddir, WAIT_MS));
	assert_file_text(data, "hello", "data-content");
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* Stages pod spec file name in dir with one local volume vol of path src. */
static void stage_pod(const char *dir, const char *name, const char *uid, const char *vol,
		      const char *src)
{
	char path[700], json[1024];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(json, sizeof(json),
		 "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": \"%s\", "
		 "\"local\": {\"path\": \"%s\"}}]}",
		 uid, vol, src);
	assert_int_equal(test_write_file(path, json), 0);
}

/* How many lines of the agent's log contain both a and b. */
static int log_lines_with(const struct agent_fixture *f, const char *a, const char *b)
{
	char *log = test_read_file(f->agent.log_path), *line, *save = NULL;
	int n = 0;

	assert_non_null(log);
	for (line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		n += strstr(line, a) && strstr(line, b);
	free(log);
	return n;
}

static void move_in(struct agent_fixture *f, const char *stage, const char *name)
{
	char a[700], b[700];

	snprintf(a, sizeof(a), "%s/%s", stage, name);
	snprintf(b, sizeof(b), "%s/%s", f->pods, name);
	assert_int_equal(rename(a, b), 0);
}

/* The pods dir's events are read in batches (one read of some tens of files per loop turn):
 * a burst queued at once, many batches long, is all applied, and the events of one name keep
 * their order across batches (created then deleted ends deleted; the last rename wins). */
#define BURST 300
static void test_burst_larger_than_a_batch(void **state)
{
	struct agent_fixture *f = *state;
	const char *data = fixture_make_source(f, "data", "data-content");
	char stage[600], name[64], uid[64], dir[512];

	snprintf(stage, sizeof(stage), "%s/stage", f->dir);
	assert_int_equal(mkdir(stage, 0755), 0);
	for (int i = 0; i < BURST; i++) {
		snprintf(name, sizeof(name), "burst-%03d.json", i);
		snprintf(uid, sizeof(uid), "burst-%03d", i);
		stage_pod(stage, name, uid, "v", data);
	}
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_log(f, "loaded pod spec files", WAIT_MS));
	/* Stopped, the agent reads nothing meanwhile: every event below is queued at once. */
	assert_int_equal(kill(f->agent.pid, SIGSTOP), 0);
	stage_pod(stage, "early.json", "early", "first", data);
	move_in(f, stage, "early.json");
	for (int i = 0; i < BURST; i++) {
		snprintf(name, sizeof(name), "burst-%03d.json", i);
		move_in(f, stage, name);
	}
	/* Created then deleted, at the end of the burst. */
	stage_pod(stage, "gone.json", "gone", "v", data);
	move_in(f, stage, "gone.json");
	assert_int_equal(fixture_remove_pod(f, "gone.json"), 0);
	/* Renamed over, batches after its first version. */
	stage_pod(stage, "early.json", "early", "second", data);
	move_in(f, stage, "early.json");
	assert_int_equal(kill(f->agent.pid, SIGCONT), 0);

	assert_true(fixture_wait_mount_count(f, BURST + 1, WAIT_MS));
	for (int i = 0; i < BURST; i += 37) {
		snprintf(uid, sizeof(uid), "burst-%03d", i);
		assert_true(test_is_mountpoint(fixture_pod_dir(f, uid, "v", dir)));
	}
	assert_true(test_is_mountpoint(fixture_pod_dir(f, "early", "second", dir)));
	assert_false(test_is_mountpoint(fixture_pod_dir(f, "early", "first", dir)));
	assert_false(test_is_mountpoint(fixture_pod_dir(f, "gone", "v", dir)));

	/* And a burst of removals. */
	assert_int_equal(kill(f->agent.pid, SIGSTOP), 0);
	for (int i = 0; i < BURST; i++) {
		snprintf(name, sizeof(name), "burst-%03d.json", i);
		assert_int_equal(fixture_remove_pod(f, name), 0);
	}
	assert_int_equal(kill(f->agent.pid, SIGCONT), 0);
	assert_true(fixture_wait_mount_count(f, 1, WAIT_MS));
	assert_true(test_is_mountpoint(fixture_pod_dir(f, "early", "second", dir)));
	/* Stopped at once: the reconciler's buffered lines are all written on the way out. */
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	assert_int_equal(log_lines_with(f, "msg=\"volume mounted\"", " pod=burst-"), BURST);
	assert_int_equal(log_lines_with(f, "msg=\"volume unmounted\"", " pod=burst-"), BURST);
	assert_int_equal(log_lines_with(f, "msg=\"pod spec removed\"", " pod=burst-"), BURST);
}

static void test_edit_applies_the_difference(void **state)
{
	struct agent_fixture *f = *state;
	const char *a = fixture_make_source(f, "a", "A"), *b = fixture_make_source(f, "b", "B");
	const char *c = fixture_make_source(f, "c", "C");
	char spec[2048], da[512], db[512], dc[512];
	int id_b;

	write_local_pod2(f, "p.json", "p", "a", a, "b", b);
	assert_int_equal(fixture_start(f, NULL), 0);
	fixture_pod_dir(f, "p", "a", da);
	fixture_pod_dir(f, "p", "b", db);
	fixture_pod_dir(f, "p", "c", dc);
	assert_true(fixture_wait_mounted(da, WAIT_MS));
	assert_true(fixture_wait_mounted(db, WAIT_MS));
	id_b = test_mount_id(db);

	/* Drop a, keep b, add c (written in place: the agent reads it on close). */
	snprintf(spec, sizeof(spec),
		 "{\"pod\": {\"uid\": \"p\"}, \"volumes\": ["
		 "{\"name\": \"b\", \"local\": {\"path\": \"%s\"}},"
		 "{\"name\": \"c\", \"local\": {\"path\": \"%s\"}}]}",
		 b, c);
	{
		char path[600];
		snprintf(path, sizeof(path), "%s/p.json", f->pods);
		assert_int_equal(test_write_file(path, spec), 0);
	}
	assert_true(fixture_wait_mounted(dc, WAIT_MS));
	assert_true(fixture_wait_unmounted(da, WAIT_MS));
	assert_int_equal(test_mount_id(db), id_b); /* untouched: not remounted */
	assert_true(fixture_wait_mount_count(f, 2, WAIT_MS));

	/* Switching b to read-only replaces its mount with a read-only one. */
	assert_int_equal(
		fixture_write_podf(
			f, "p.json",
			"{\"pod\": {\"uid\": \"p\"}, \"volumes\": ["
			"{\"name\": \"b\", \"local\": {\"path\": \"%s\"}, \"readOnly\": true},"
			"{\"name\": \"c\", \"local\": {\"path\": \"%s\"}}]}",
			b, c),
		0);
	assert_true(fixture_wait_pod_state(f, db, "mounted", 1, WAIT_MS));
	assert_true(test_mount_is_ro(db));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_block_device_formatted_once_and_shared(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 64 << 20);
	char d1[512], d2[512], uuid1[64], uuid2[64], global[1024];

	assert_non_null(dev);
	test_blkid_value(dev, "UUID", uuid1, sizeof(uuid1));
	assert_string_equal(uuid1, ""); /* blank */
	assert_int_equal(fixture_write_local_pod(f, "one", "disk", dev), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	fixture_pod_dir(f, "one", "disk", d1);
	assert_true(fixture_wait_mounted(d1, WAIT_MS));
	test_blkid_value(dev, "UUID", uuid1, sizeof(uuid1));
	assert_string_not_equal(uuid1, ""); /* formatted, ext4 by default */
	assert_int_equal(write_in(d1, "payload", "written-by-one"), 0);

	/* A second pod on the same device: one node-wide mount, no reformat. */
	assert_int_equal(fixture_write_local_pod(f, "two", "disk", dev), 0);
	fixture_pod_dir(f, "two", "disk", d2);
	assert_true(fixture_wait_mounted(d2, WAIT_MS));
	assert_file_text(d2, "payload", "written-by-one");
	test_blkid_value(dev, "UUID", uuid2, sizeof(uuid2));
	assert_string_equal(uuid1, uuid2);
	{
		json_t *st = fixture_status(f), *d;
		assert_non_null(st);
		assert_int_equal(status_count(st, "devices"), 1);
		d = status_device(st, dev);
		assert_non_null(d);
		assert_true(json_is_true(json_object_get(d, "mounted")));
		json_decref(st);
	}
	assert_true(fixture_wait_mount_count(f, 3, WAIT_MS)); /* global + two binds */

	/* The last pod going releases the device. */
	snprintf(global, sizeof(global), "%s/plugins/kubernetes.io/local/mounts", f->root);
	assert_int_equal(test_count_mounts_under(global), 1);
	assert_int_equal(fixture_remove_pod(f, "one.json"), 0);
	assert_true(fixture_wait_unmounted(d1, WAIT_MS));
	assert_int_equal(test_count_mounts_under(global), 1);
	assert_int_equal(fixture_remove_pod(f, "two.json"), 0);
	assert_true(fixture_wait_mount_count(f, 0, WAIT_MS));
	assert_true(fixture_wait_count(f, "devices", 0, WAIT_MS));
	test_blkid_value(dev, "UUID", uuid2, sizeof(uuid2));
	assert_string_equal(uuid1, uuid2);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_xfs_and_existing_filesystems(void **state)
{
	struct agent_fixture *f = *state;
	const char *blank = fixture_add_loop(f, 512LL << 20); /* xfs needs 300 MB */
	const char *ext4 = fixture_add_loop(f, 64 << 20);
	const char *gpt = fixture_add_loop(f, 64 << 20);
	const char *ro_blank = fixture_add_loop(f, 64 << 20);
	char d[512], uuid_before[64], uuid_after[64];
	const char *sfdisk_argv[] = { "sh", "-c", NULL, NULL };
	char cmd[256];

	assert_non_null(ro_blank);
	assert_int_equal(test_mkfs("ext4", ext4), 0);
	test_blkid_value(ext4, "UUID", uuid_before, sizeof(uuid_before));
	snprintf(cmd, sizeof(cmd), "echo 'label: gpt' | sfdisk -q %s", gpt);
	sfdisk_argv[2] = cmd;
	assert_int_equal(test_run(sfdisk_argv), 0);

	assert_int_equal(
		fixture_write_podf(
			f, "x.json",
			"{\"pod\": {\"uid\": \"x\"}, \"volumes\": ["
			"{\"name\": \"fresh\", \"local\": {\"path\": \"%s\", \"fsType\": \"xfs\"}},"
			"{\"name\": \"wrongtype\", \"local\": {\"path\": \"%s\", \"fsType\": \"xfs\"}},"
			"{\"name\": \"table\", \"local\": {\"path\": \"%s\"}},"
			"{\"name\": \"roblank\", \"local\": {\"path\": \"%s\"}, \"readOnly\": true}]}",
			blank, ext4, gpt, ro_blank),
		0);
	assert_int_equal(fixture_start(f, NULL), 0);
	fixture_pod_dir(f, "x", "fresh", d);
	assert_true(fixture_wait_mounted(d, 30000));
	assert_true(fixture_wait_log(f, "holds a ext4 filesystem but fsType is xfs", WAIT_MS));
	assert_true(fixture_wait_log(f, "carries a gpt partition table", WAIT_MS));
	assert_true(fixture_wait_log(f, "has no filesystem and the volume is read-only", WAIT_MS));
	/* Only the blank device was formatted, as xfs; the others are untouched. */
	{
		char *out = NULL;
		const char *argv[] = { "findmnt", "-n", "-o", "FSTYPE", d, NULL };
		assert_int_equal(test_run_capture(argv, &out), 0);
		assert_string_equal(out, "xfs\n");
		free(out);
	}
	test_blkid_value(ext4, "UUID", uuid_after, sizeof(uuid_after));
	assert_string_equal(uuid_before, uuid_after);
	test_blkid_value(ro_blank, "UUID", uuid_after, sizeof(uuid_after));
	assert_string_equal(uuid_after, "");
	assert_int_equal(test_count_mounts_under(f->root), 2); /* fresh: global + bind */
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_existing_filesystem_keeps_data(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 64 << 20);
	char d[512], mnt[600];
	const char *argv[] = { "sh", "-c", NULL, NULL };
	char cmd[1024];

	assert_int_equal(test_mkfs("ext4", dev), 0);
	snprintf(mnt, sizeof(mnt), "%s/premount", f->dir);
	mkdir(mnt, 0755);
	snprintf(cmd, sizeof(cmd), "mount %s %s && echo old-data > %s/keep && umount %s", dev, mnt,
		 mnt, mnt);
	argv[2] = cmd;
	assert_int_equal(test_run(argv), 0);
	assert_int_equal(
		fixture_write_podf(f, "k.json",
				   "{\"pod\": {\"uid\": \"k\"}, \"volumes\": [{\"name\": \"disk\", "
				   "\"local\": {\"path\": \"%s\", \"fsType\": \"ext4\"}}]}",
				   dev),
		0);
	assert_int_equal(fixture_start(f, NULL), 0);
	fixture_pod_dir(f, "k", "disk", d);
	assert_true(fixture_wait_mounted(d, WAIT_MS));
	assert_file_text(d, "keep", "old-data\n");
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_move_between_pods_unmounts_first(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 64 << 20);
	const char *dir = fixture_make_source(f, "shared", "S");
	char da[512], db[512], ba[512], bb[512], global[1024];
	long unmounted_a, mounted_b, dev_unmounted_a, dev_mounted_b;

	write_local_pod2(f, "app.json", "pod-a", "dir", dir, "blk", dev);
	assert_int_equal(fixture_start(f, NULL), 0);
	fixture_pod_dir(f, "pod-a", "dir", da);
	fixture_pod_dir(f, "pod-a", "blk", ba);
	fixture_pod_dir(f, "pod-b", "dir", db);
	fixture_pod_dir(f, "pod-b", "blk", bb);
	assert_true(fixture_wait_mounted(da, WAIT_MS));
	assert_true(fixture_wait_mounted(ba, WAIT_MS));
	assert_int_equal(write_in(ba, "state", "from-a"), 0);
	snprintf(global, sizeof(global), "%s/plugins/kubernetes.io/local/mounts", f->root);
	assert_int_equal(test_count_mounts_under(global), 1);

	/* One edit moves both volumes from pod-a to pod-b. */
	write_local_pod2(f, "app.json", "pod-b", "dir", dir, "blk", dev);
	assert_true(fixture_wait_mounted(db, WAIT_MS));
	assert_true(fixture_wait_mounted(bb, WAIT_MS));
	assert_false(test_is_mountpoint(da));
	assert_false(test_is_mountpoint(ba));

	/* The log is written by the one reconciler thread in the order it learned of each
	 * result, and a mount into pod-b is only started after pod-a's unmount finished. */
	unmounted_a = fixture_log_find(f, "msg=\"volume unmounted\"",
				       "pod-a/volumes/kubernetes.io~local/dir");
	mounted_b = fixture_log_find(f, "msg=\"volume mounted\"",
				     "pod-b/volumes/kubernetes.io~local/dir");
	dev_unmounted_a = fixture_log_find(f, "msg=\"volume unmounted\"",
					   "pod-a/volumes/kubernetes.io~local/blk");
	dev_mounted_b = fixture_log_find(f, "msg=\"volume mounted\"",
					 "pod-b/volumes/kubernetes.io~local/blk");
	assert_true(unmounted_a >= 0 && mounted_b >= 0 && dev_unmounted_a >= 0 &&
		    dev_mounted_b >= 0);
	assert_true(unmounted_a < mounted_b);
	assert_true(dev_unmounted_a < dev_mounted_b);
	/* The device stayed mounted node-wide (still wanted), and its data moved with it. */
	assert_int_equal(fixture_log_count(f, "msg=\"device mounted\""), 1);
	assert_int_equal(fixture_log_count(f, "msg=\"device unmounted\""), 0);
	assert_int_equal(test_count_mounts_under(global), 1);
	assert_file_text(bb, "state", "from-a");
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_malformed_files_change_nothing(void **state)
{
	struct agent_fixture *f = *state;
	const char *src = fixture_make_source(f, "src", "v");
	char d[512], path[600];
	int id;

	assert_int_equal(fixture_write_local_pod(f, "good", "v", src), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	fixture_pod_dir(f, "good", "v", d);
	assert_true(fixture_wait_mounted(d, WAIT_MS));
	id = test_mount_id(d);

	/* A broken new file is rejected, naming the file, the field and the reason. */
	assert_int_equal(fixture_write_pod(f, "broken.json",
					   "{\"pod\": {\"uid\": \"b\"}, \"volumes\": ["
					   "{\"name\": \"v\", \"local\": {\"path\": \"rel\"}}]}"),
			 0);
	assert_true(fixture_wait_log(f, "field=volumes[0].local.path", WAIT_MS));
	assert_true(fixture_log_find(f, "rejected pod spec file", "broken.json") >= 0);
	/* A file claiming a uid another file has is rejected too. */
	assert_int_equal(fixture_write_pod(f, "thief.json",
					   "{\"pod\": {\"uid\": \"good\"}, \"volumes\": []}"),
			 0);
	assert_true(fixture_wait_log(f, "pod.uid", WAIT_MS));
	assert_true(fixture_log_find(f, "is already declared by good.json", "thief.json") >= 0);
	/* Garbage over the good pod's own file keeps what it declared before. */
	assert_int_equal(fixture_write_pod(f, "good.json", "{\"pod\": "), 0);
	assert_true(fixture_wait_log(f, "previous=kept", WAIT_MS));
	/* Editor leftovers are never read. */
	snprintf(path, sizeof(path), "%s/.good.json.swp", f->pods);
	test_write_file(path, "{");
	snprintf(path, sizeof(path), "%s/good.json~", f->pods);
	test_write_file(path, "{");
	snprintf(path, sizeof(path), "%s/4913", f->pods);
	test_write_file(path, "{");

	/* Give the agent time to act wrongly, then check that nothing changed. */
	usleep(300 * 1000);
	assert_int_equal(test_mount_id(d), id);
	assert_int_equal(test_count_mounts_under(f->root), 1);
	assert_int_equal(fixture_log_count(f, "rejected pod spec file"), 3);
	assert_int_equal(kill(f->agent.pid, 0), 0); /* still running */

	/* Fixing the file is picked up. */
	assert_int_equal(fixture_write_pod(f, "good.json",
					   "{\"pod\": {\"uid\": \"good\"}, "
					   "\"volumes\": []}"),
			 0);
	assert_true(fixture_wait_unmounted(d, WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_symlinks_are_refused(void **state)
{
	struct agent_fixture *f = *state;
	const char *real = fixture_make_source(f, "real", "r");
	char spec[2048], link[600], d[512], parent[600], escape[600];

	/* A source path through a symlink. */
	snprintf(link, sizeof(link), "%s/link", f->dir);
	assert_int_equal(symlink(real, link), 0);
	/* A symlink planted where the pod volume dir goes, pointing outside the root. */
	snprintf(parent, sizeof(parent), "%s/pods/trap/volumes/kubernetes.io~local", f->root);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", parent, NULL }), 0);
	snprintf(escape, sizeof(escape), "%s/escape", f->dir);
	mkdir(escape, 0755);
	snprintf(d, sizeof(d), "%s/planted", parent);
	assert_int_equal(symlink(escape, d), 0);

	snprintf(spec, sizeof(spec),
		 "{\"pod\": {\"uid\": \"trap\"}, \"volumes\": ["
		 "{\"name\": \"vialink\", \"local\": {\"path\": \"%s/sub\"}},"
		 "{\"name\": \"planted\", \"local\": {\"path\": \"%s\"}}]}",
		 link, real);
	mkdir(real, 0755);
	{
		char sub[600];
		snprintf(sub, sizeof(sub), "%s/sub", real);
		mkdir(sub, 0755);
	}
	assert_int_equal(fixture_write_pod(f, "trap.json", spec), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_pod_error(f, fixture_pod_dir(f, "trap", "vialink", d),
					   "component \"link\" is a symlink", WAIT_MS));
	assert_true(fixture_wait_pod_error(f, fixture_pod_dir(f, "trap", "planted", d),
					   "a symlink is never followed", WAIT_MS));
	assert_int_equal(test_count_mounts_under(f->root), 0);
	assert_int_equal(test_count_mounts_under(escape), 0);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* A block device node outside /dev, named as a filesystem volume's path: a device is named
 * under /dev (the spec load does not stat other paths), so it is refused at set-up, saying
 * why, and neither formatted nor mounted. */
static void test_device_node_outside_dev_is_refused(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 32 << 20);
	char node[600], d[512], uuid[64];
	struct stat st;

	assert_non_null(dev);
	assert_int_equal(stat(dev, &st), 0);
	snprintf(node, sizeof(node), "%s/disk", f->dir);
	assert_int_equal(mknod(node, S_IFBLK | 0600, st.st_rdev), 0);
	assert_int_equal(fixture_write_local_pod(f, "one", "disk", node), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_pod_error(f, fixture_pod_dir(f, "one", "disk", d),
					   "is a block device outside /dev", WAIT_MS));
	assert_int_equal(test_count_mounts_under(f->root), 0);
	test_blkid_value(dev, "UUID", uuid, sizeof(uuid));
	assert_string_equal(uuid, ""); /* not formatted */
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* The root the workers mount below is opened by its path on every walk, never kept: a root
 * removed and made again, or one that something was mounted on while the agent runs (a disk
 * mounted on /var/lib/kubelet after the agent started), is the one the next volume goes into,
 * where the pods see it.  One worker, so the thread that walked the old root walks next. */
static void root_replaced(struct agent_fixture *f, bool by_mount)
{
	const char *data = fixture_make_source(f, "data", "data-content");
	char d[512];

	assert_int_equal(fixture_write_podf(f, "a.json",
					    "{\"pod\": {\"uid\": \"pod-a\"}, \"volumes\": "
					    "[{\"name\": \"data\", \"local\": {\"path\": \"%s\"}}]}",
					    data),
			 0);
	assert_int_equal(fixture_start(f, (const char *const[]){ "--workers", "1", NULL }), 0);
	assert_true(fixture_wait_mounted(fixture_pod_dir(f, "pod-a", "data", d), WAIT_MS));
	assert_int_equal(fixture_remove_pod(f, "a.json"), 0);
	assert_true(fixture_wait_mount_count(f, 0, WAIT_MS));
	assert_true(test_wait_until(path_is_gone, d, WAIT_MS));

	if (by_mount) {
		assert_int_equal(mount("tmpfs", f->root, "tmpfs", 0, "mode=0750"), 0);
	} else {
		test_rm_rf(f->root);
		/* A pass may have made it again already (it makes a missing root). */
		assert_true(mkdir(f->root, 0750) == 0 || errno == EEXIST);
	}
	assert_int_equal(fixture_write_podf(f, "b.json",
					    "{\"pod\": {\"uid\": \"pod-b\"}, \"volumes\": "
					    "[{\"name\": \"data\", \"local\": {\"path\": \"%s\"}}]}",
					    data),
			 0);
	assert_true(fixture_wait_mounted(fixture_pod_dir(f, "pod-b", "data", d), WAIT_MS));
	assert_file_text(
		d, "hello",
		"data-content"); /* NULL when the bind went into the old root, out of sight */
	assert_int_equal(fixture_remove_pod(f, "b.json"), 0);
	assert_true(fixture_wait_mount_count(f, by_mount ? 1 : 0, WAIT_MS)); /* the tmpfs stays */
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	if (by_mount)
		assert_int_equal(umount2(f->root, 0), 0);
}

static void test_root_made_again(void **state)
{
	root_replaced(*state, false);
}

static void test_root_mounted_over(void **state)
{
	root_replaced(*state, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		FIXTURE_CASE(test_add_and_remove_directory_volumes),
		cmocka_unit_test_setup_teardown(test_burst_larger_than_a_batch, setup,
						teardown_continued),
		FIXTURE_CASE(test_edit_applies_the_difference),
		FIXTURE_CASE(test_block_device_formatted_once_and_shared),
		FIXTURE_CASE(test_xfs_and_existing_filesystems),
		FIXTURE_CASE(test_existing_filesystem_keeps_data),
		FIXTURE_CASE(test_move_between_pods_unmounts_first),
		FIXTURE_CASE(test_malformed_files_change_nothing),
		FIXTURE_CASE(test_symlinks_are_refused),
		FIXTURE_CASE(test_device_node_outside_dev_is_refused),
		FIXTURE_CASE(test_root_made_again),
		FIXTURE_CASE(test_root_mounted_over),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
