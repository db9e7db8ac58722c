/* test-agent-restart.c - restarts and crashes: a restarted agent adopts correct mounts without
 * remounting them (the mount ID is unchanged), unmounts what no spec wants any more, survives a
 * corrupt journal, and converges after SIGKILL in the middle of mounting many volumes with no
 * leaked mount, no lost volume and no lost data.  Root, private mount namespace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "fixture-case.h"
#include "plugin.h"
#include "testlib.h"

#define WAIT_MS 20000

FIXTURE_SETUP_TEARDOWN("restart")

static void write_dir_pod(struct agent_fixture *f, const char *uid, const char *src)
{
	assert_int_equal(fixture_write_local_pod(f, uid, "v", src), 0);
}

static void write_block_pod(struct agent_fixture *f, const char *uid, const char *dev)
{
	assert_int_equal(fixture_write_local_pod(f, uid, "disk", dev), 0);
}

static const char *make_dir(struct agent_fixture *f, const char *name, char *buf)
{
	snprintf(buf, 512, "%s/%s", f->dir, name);
	mkdir(buf, 0755);
	return buf;
}

/* Every mount ID below root, as "target id\n" lines in mount order. */
static char *mount_ids(const struct agent_fixture *f)
{
	const char *argv[] = { "findmnt", "-rn", "-o", "TARGET,ID", "--task", "self", NULL };
	char *out = NULL, *res = calloc(1, 1 << 20), *line, *save = NULL;
	char argv_task[32];

	snprintf(argv_task, sizeof(argv_task), "%d", (int)getpid());
	argv[5] = argv_task;
	assert_int_equal(test_run_capture(argv, &out), 0);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, f->root, strlen(f->root)) == 0) {
			strcat(res, line);
			strcat(res, "\n");
		}
	free(out);
	return res;
}

/* Fails the test unless the mounts below root are those of before (mount_ids()), with the same
 * IDs: nothing was remounted.  Frees before. */
static void assert_same_mounts(const struct agent_fixture *f, char *before)
{
	char *after = mount_ids(f);

	assert_string_equal(before, after);
	free(before);
	free(after);
}

/* A first run: the agent started (with extra args), until n mounts are below root, and
 * stopped (SIGTERM), which leaves them. */
static void run_until_mounted(struct agent_fixture *f, const char *const extra[], int n)
{
	assert_int_equal(fixture_start(f, extra), 0);
	assert_true(fixture_wait_mount_count(f, n, WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* Fails the test unless the volume name of pod uid is mounted at its pod volume dir. */
static void assert_pod_volume_mounted(const struct agent_fixture *f, const char *uid,
				      const char *name)
{
	char d[512];

	assert_true(test_is_mountpoint(fixture_pod_dir(f, uid, name, d)));
}

/* What a restarted agent must have found, read from its status. */
struct expect {
	long long mounted, devices;
};

static bool ready_with(json_t *st, const void *arg)
{
	const struct expect *e = arg;

	return json_is_true(json_object_get(st, "ready")) &&
	       status_count(st, "mounted") == e->mounted &&
	       status_count(st, "devices") == e->devices;
}

static bool journal_note_says(json_t *st, const void *text)
{
	const char *note =
		json_string_value(json_object_get(json_object_get(st, "journal"), "startup"));

	return note && strstr(note, text);
}

static void test_restart_adopts_without_remount(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 64 << 20);
	char src[512], *before;

	make_dir(f, "src", src);
	write_dir_pod(f, "p1", src);
	write_dir_pod(f, "p2", src);
	write_block_pod(f, "b1", dev);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_mount_count(f, 4, WAIT_MS)); /* 2 binds, global + bind */
	before = mount_ids(f);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
	assert_int_equal(test_count_mounts_under(f->root), 4); /* stopping unmounts nothing */

	{
		assert_int_equal(fixture_start(f, NULL), 0);
		assert_true(fixture_wait_status(f, NULL, ready_with, &(struct expect){ 3, 1 },
						WAIT_MS));
	}
	/* One summary line for the adoption, none per mount (those are at debug level). */
	assert_int_equal(fixture_log_count(f, "adopted existing mount"), 1);
	assert_true(fixture_log_find(f, "msg=\"adopted existing mounts\"", "count=3") >= 0);
	assert_int_equal(fixture_log_count(f, "msg=\"volume mounted\""), 3); /* first run only */
	assert_int_equal(fixture_log_count(f, "msg=\"device mounted\""), 1); /* first run only */
	usleep(200 * 1000);
	assert_same_mounts(f, before);
	assert_pod_volume_mounted(f, "b1", "disk");
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* Start-up reads every spec file and logs one summary line (files, volumes, refused), not a
 * line per file; a refused file still gets its own error line naming the file, the field and
 * the reason, and a restart with it changes nothing that is mounted. */
static void test_startup_logs_one_summary_line(void **state)
{
	struct agent_fixture *f = *state;
	char src[512], *before;
	long off;

	make_dir(f, "src", src);
	for (int i = 0; i < 70; i++) { /* enough for the scan's helper thread */
		char uid[32];
		snprintf(uid, sizeof(uid), "p%02d", i);
		write_dir_pod(f, uid, src);
	}
	assert_int_equal(fixture_write_pod(f, "bad.json",
					   "{\"pod\": {\"uid\": \"bad\"}, \"volumes\": "
					   "[{\"name\": \"v\", \"local\": {\"path\": 7}}]}"),
			 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_mount_count(f, 70, WAIT_MS));
	assert_true(fixture_wait_ready(f, NULL, WAIT_MS));
	assert_true(fixture_log_find(f, "msg=\"loaded pod spec files\"",
				     "files=71 volumes=70 refused=1") >= 0);
	assert_int_equal(fixture_log_count(f, "msg=\"pod spec loaded\""), 0);
	assert_int_equal(fixture_log_count(f, "msg=\"rejected pod spec file\""), 1);
	assert_true(fixture_log_find(f, "bad.json", "field=volumes[0].local.path") >= 0);
	before = mount_ids(f);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);

	off = fixture_log_size(f);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_log_after(f, off, "startup reconstruction complete", WAIT_MS));
	assert_int_equal(fixture_log_count(f, "msg=\"loaded pod spec files\""), 2);
	assert_int_equal(fixture_log_count(f, "files=71 volumes=70 refused=1"), 2);
	assert_true(fixture_log_find(f, "msg=\"adopted existing mounts\"", "count=70") >= 0);
	assert_int_equal(fixture_log_count(f, "msg=\"volume mounted\""), 70); /* first run */
	assert_int_equal(fixture_log_count(f, "msg=\"rejected pod spec file\""), 2);
	assert_same_mounts(f, before);
	assert_pod_volume_mounted(f, "p69", "v");
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_pods_deleted_while_down_are_unmounted(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 64 << 20);
	char src[512], podsdir[600];

	make_dir(f, "src", src);
	write_dir_pod(f, "gone", src);
	write_dir_pod(f, "stays", src);
	write_block_pod(f, "gone-blk", dev);
	run_until_mounted(f, NULL, 4);

	assert_int_equal(fixture_remove_pod(f, "gone.json"), 0);
	assert_int_equal(fixture_remove_pod(f, "gone-blk.json"), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_mount_count(f, 1, WAIT_MS));
	assert_pod_volume_mounted(f, "stays", "v");
	assert_true(fixture_wait_count(f, "devices", 0, WAIT_MS));
	/* Only the remaining pod's dir is left. */
	snprintf(podsdir, sizeof(podsdir), "%s/pods/gone", f->root);
	assert_int_not_equal(access(podsdir, F_OK), 0);
	snprintf(podsdir, sizeof(podsdir), "%s/pods/gone-blk", f->root);
	assert_int_not_equal(access(podsdir, F_OK), 0);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static int mkdir_p(const char *path)
{
	char buf[600];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, 0750) < 0 && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	return mkdir(buf, 0750) < 0 && errno != EEXIST ? -errno : 0;
}

static bool path_gone(void *arg)
{
	return access(arg, F_OK) != 0;
}

/* Empty pod volume dirs left behind while the agent was down (a pod no spec wants, and an
 * old volume of a pod that stays) are removed after a restart, now once the agent is ready;
 * the mounted volume and its dir stay. */
static void test_stale_pod_dirs_removed_after_restart(void **state)
{
	struct agent_fixture *f = *state;
	char src[512], stale_pod[600], stale_vol[600];

	make_dir(f, "src", src);
	write_dir_pod(f, "stays", src);
	run_until_mounted(f, NULL, 1);

	snprintf(stale_pod, sizeof(stale_pod), "%s/pods/nobody/volumes/kubernetes.io~local/x",
		 f->root);
	snprintf(stale_vol, sizeof(stale_vol), "%s/pods/stays/volumes/kubernetes.io~local/old",
		 f->root);
	assert_int_equal(mkdir_p(stale_pod), 0);
	assert_int_equal(mkdir(stale_vol, 0750), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_ready(f, NULL, WAIT_MS));
	snprintf(stale_pod, sizeof(stale_pod), "%s/pods/nobody", f->root);
	assert_true(test_wait_until(path_gone, stale_pod, WAIT_MS));
	assert_true(test_wait_until(path_gone, stale_vol, WAIT_MS));
	assert_pod_volume_mounted(f, "stays", "v");
	assert_int_equal(test_count_mounts_under(f->root), 1);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* Writes text over <state>/<name>. */
static void write_state_file(struct agent_fixture *f, const char *name, const char *text)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s", f->state, name);
	assert_int_equal(test_write_file(path, text), 0);
}

/* A torn journal: the copy its last save replaced (journal.json.prev) is read in its place,
 * with a warning; both torn: the mount table alone, as before there was a copy.  Either way
 * nothing is remounted and the device is known again. */
static void test_corrupt_journal_is_survived(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 64 << 20);
	char path[600], *before;

	write_block_pod(f, "b", dev);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_mount_count(f, 2, WAIT_MS));
	before = mount_ids(f);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);

	snprintf(path, sizeof(path), "%s/journal.json.prev", f->state);
	assert_int_equal(access(path, F_OK), 0); /* every save keeps the one it replaced */
	write_state_file(f, "journal.json", "{\"version\": 1, \"devices\": [tru");
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_status(f, NULL, ready_with, &(struct expect){ 1, 1 }, WAIT_MS));
	assert_true(
		fixture_wait_status(f, NULL, journal_note_says, "read its previous copy", WAIT_MS));
	assert_int_equal(fixture_log_count(f, "read the copy its last save replaced"), 1);
	assert_same_mounts(f, before);
	before = mount_ids(f);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);

	write_state_file(f, "journal.json", "{\"version\": 1, \"devices\": [tru");
	write_state_file(f, "journal.json.prev", "{\"version\": 1");
	assert_int_equal(fixture_start(f, NULL), 0);
	/* The device mount the journal lost is adopted from the mount table. */
	assert_true(fixture_wait_status(f, NULL, ready_with, &(struct expect){ 1, 1 }, WAIT_MS));
	assert_true(fixture_wait_status(f, NULL, journal_note_says, "previous copy is unreadable",
					WAIT_MS));
	usleep(200 * 1000);
	assert_same_mounts(f, before);
	snprintf(path, sizeof(path), "%s/journal.json.corrupt", f->state);
	assert_int_equal(access(path, F_OK), 0); /* kept for a human to look at */
	/* The device is known again: removing the pod releases it. */
	assert_int_equal(fixture_remove_pod(f, "b.json"), 0);
	assert_true(fixture_wait_mount_count(f, 0, WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void fill_random(char *buf, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (char)('a' + (seed >> 16) % 26);
	}
	buf[n - 1] = '\0';
}

static void test_sigkill_while_mounting_many(void **state)
{
	enum {
		ROUNDS = 5,
		PER_ROUND = 80,
		DATA = 1 << 20
	};
	struct agent_fixture *f = *state;
	const char *dev1 = fixture_add_loop(f, 64 << 20), *dev2 = fixture_add_loop(f, 64 << 20);
	char *data1 = malloc(DATA), *data2 = malloc(DATA), *back;
	char src[4][512], d1[512], d2[512], path[600];
	int pods = 0, kills = 0;

	for (int i = 0; i < 4; i++) {
		char name[16];
		snprintf(name, sizeof(name), "src%d", i);
		make_dir(f, name, src[i]);
	}
	/* Data first, synced to the devices. */
	write_block_pod(f, "blk1", dev1);
	write_block_pod(f, "blk2", dev2);
	assert_int_equal(fixture_start(f, NULL), 0);
	fixture_pod_dir(f, "blk1", "disk", d1);
	fixture_pod_dir(f, "blk2", "disk", d2);
	assert_true(fixture_wait_mounted(d1, WAIT_MS));
	assert_true(fixture_wait_mounted(d2, WAIT_MS));
	fill_random(data1, DATA, 1);
	fill_random(data2, DATA, 2);
	snprintf(path, sizeof(path), "%s/data", d1);
	assert_int_equal(test_write_file(path, data1), 0);
	snprintf(path, sizeof(path), "%s/data", d2);
	assert_int_equal(test_write_file(path, data2), 0);

	/* Rounds of: a burst of new pods, SIGKILL somewhere in it, restart. */
	srand(42);
	for (int round = 0; round < ROUNDS; round++) {
		int kill_at = rand() % PER_ROUND;
		for (int i = 0; i < PER_ROUND; i++) {
			char uid[32];
			snprintf(uid, sizeof(uid), "r%d-p%d", round, i);
			write_dir_pod(f, uid, src[i % 4]);
			pods++;
			if (i == kill_at && f->agent.pid > 0) {
				assert_int_equal(fixture_stop(f, SIGKILL), 128 + SIGKILL);
				kills++;
			}
		}
		if (f->agent.pid <= 0)
			assert_int_equal(fixture_start(f, NULL), 0);
		/* The next kill hits whatever the restarted agent is doing. */
		usleep((useconds_t)(rand() % 20000));
		if (round % 2 == 0) {
			assert_int_equal(fixture_stop(f, SIGKILL), 128 + SIGKILL);
			kills++;
			assert_int_equal(fixture_start(f, NULL), 0);
		}
	}
	/* Converged: every desired volume mounted once, nothing else. */
	assert_true(fixture_wait_mount_count(f, pods + 4, 60000));
	assert_true(fixture_wait_ready(f, NULL, WAIT_MS));
	snprintf(path, sizeof(path), "%s/data", d1);
	back = test_read_file(path);
	assert_non_null(back);
	assert_true(strcmp(back, data1) == 0);
	free(back);
	snprintf(path, sizeof(path), "%s/data", d2);
	back = test_read_file(path);
	assert_non_null(back);
	assert_true(strcmp(back, data2) == 0);
	free(back);

	/* The journal is readable and names both devices. */
	{
		json_error_t jerr;
		json_t *j;
		snprintf(path, sizeof(path), "%s/journal.json", f->state);
		j = json_load_file(path, 0, &jerr);
		assert_non_null(j);
		assert_int_equal(json_array_size(json_object_get(j, "devices")), 2);
		json_decref(j);
	}
	/* Deleting every spec leaves no mount and no pod dir behind. */
	{
		const char *argv[] = { "sh", "-c", NULL, NULL };
		char cmd[700];
		snprintf(cmd, sizeof(cmd), "rm -f %s/*.json", f->pods);
		argv[2] = cmd;
		assert_int_equal(test_run(argv), 0);
	}
	assert_true(fixture_wait_mount_count(f, 0, 60000));
	snprintf(path, sizeof(path), "%s/pods", f->root);
	{
		const char *argv[] = { "find", path, "-mindepth", "1", NULL };
		char *out = NULL;
		for (int i = 0; i < 200; i++) {
			free(out);
			out = NULL;
			assert_int_equal(test_run_capture(argv, &out), 0);
			if (!out[0])
				break;
			usleep(50 * 1000);
		}
		assert_string_equal(out, "");
		free(out);
	}
	print_message("survived %d SIGKILLs with %d pods\n", kills, pods);
	free(data1);
	free(data2);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* Whether path shows the same directory as src (the root of a bind of it). */
static bool same_dir(const char *path, const char *src)
{
	struct stat a, b;

	return stat(path, &a) == 0 && stat(src, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* Ready, every pod volume mounted and nothing failing or in flight (for a stacked target the
 * one under the top is adopted, or it too is unmounted and set up again: which depends on
 * whether the top's unmount event or its failed tear-down reaches the reconciler first). */
static bool settled(json_t *st, const void *arg)
{
	const struct agent_fixture *f = arg;

	return json_is_true(json_object_get(st, "ready")) && status_count(st, "mounted") == 4 &&
	       status_count(st, "failing") == 0 && status_count(st, "in_flight") == 0 &&
	       test_count_mounts_under(f->root) == 4;
}

/* A restart adopts only a mount that is exactly the volume: a bind of another directory and a
 * bind whose read-only state differs from the spec's are replaced, and a bind stacked on
 * another at the target (each made while the agent was down) is unmounted until one is left;
 * the good one keeps its mount ID throughout. */
static void refuses_what_is_not_the_volume(struct agent_fixture *f, const char *const extra[])
{
	char src[512], other[512], keep[512], swapped[512], ro[512], stacked[512];
	int keep_id;

	make_dir(f, "src", src);
	make_dir(f, "other", other);
	write_dir_pod(f, "keep", src);
	write_dir_pod(f, "swapped", src);
	write_dir_pod(f, "ro", src);
	write_dir_pod(f, "stacked", src);
	run_until_mounted(f, extra, 4);
	fixture_pod_dir(f, "keep", "v", keep);
	fixture_pod_dir(f, "swapped", "v", swapped);
	fixture_pod_dir(f, "ro", "v", ro);
	fixture_pod_dir(f, "stacked", "v", stacked);
	keep_id = test_mount_id(keep);
	assert_true(keep_id >= 0);

	/* While it is down: another directory, a read-only remount, a second bind on top. */
	assert_int_equal(umount2(swapped, 0), 0);
	assert_int_equal(mount(other, swapped, NULL, MS_BIND, NULL), 0);
	assert_int_equal(mount(NULL, ro, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL), 0);
	assert_true(test_mount_is_ro(ro));
	assert_int_equal(mount(src, stacked, NULL, MS_BIND, NULL), 0);
	assert_int_equal(test_count_mounts_under(f->root), 5);

	assert_int_equal(fixture_start(f, extra), 0);
	assert_true(fixture_wait_ready(f, NULL, WAIT_MS));
	assert_true(fixture_wait_status(f, NULL, settled, f, WAIT_MS));
	assert_int_equal(fixture_log_count(f, "mount holds something else, replacing it"), 3);
	assert_true(fixture_log_count(f, "msg=\"volume mounted\"") >= 6); /* 4, then 2 or 3 */
	assert_int_equal(test_mount_id(keep), keep_id);			  /* not remounted */
	assert_true(same_dir(swapped, src));
	assert_false(test_mount_is_ro(ro));
	assert_true(same_dir(stacked, src));
	assert_int_equal(test_count_mounts_under(f->root), 4);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* On both mount-table sources: the read-only flag and the stacking come from statmount on the
 * event path, from libmount's reading of mountinfo on the fallback. */
static void test_restart_refuses_what_is_not_the_volume(void **state)
{
	refuses_what_is_not_the_volume(*state, NULL);
}

static void test_restart_refuses_what_is_not_the_volume_fallback(void **state)
{
	refuses_what_is_not_the_volume(*state,
				       (const char *const[]){ "--mount-events", "off", NULL });
}

/* The local plugin's check_set_up against what the table showed (struct mount_seen): the
 * table's facts are used for the mount they describe, and looked up again for any other. */
static void test_check_set_up_uses_what_the_table_saw(void **state)
{
	struct agent_fixture *f = *state;
	const struct volume_plugin *p = plugin_find_by_name("local");
	struct volume_spec *spec = volume_spec_new("local");
	struct volume_mounter *m;
	struct error_info err = { 0 };
	char src[512], other[512], target[512];
	struct mount_seen seen;
	struct stat st;
	int id;

	assert_non_null(p);
	assert_non_null(spec);
	make_dir(f, "src", src);
	make_dir(f, "other", other);
	make_dir(f, "target", target);
	assert_int_equal(volume_spec_set(spec, "path", src), 0);
	m = plugin_new_mounter(p, spec, "uid", false, NULL);
	assert_non_null(m);

	/* Nothing mounted: 0, whatever the table said. */
	seen = (struct mount_seen){ .mount_id = 12345 };
	assert_int_equal(plugin_check_set_up(m, target, &seen, &err), 0);

	assert_int_equal(mount(src, target, NULL, MS_BIND, NULL), 0);
	id = test_mount_id(target);
	assert_true(id > 0);
	assert_int_equal(stat(src, &st), 0);
	seen = (struct mount_seen){ .mount_id = id, .sb_dev = st.st_dev };
	assert_int_equal(plugin_check_set_up(m, target, &seen, &err), 1);
	assert_true(seen.confirmed);
	/* The table said read-only, or stacked, for this very mount: refused. */
	seen = (struct mount_seen){ .mount_id = id, .sb_dev = st.st_dev, .read_only = true };
	assert_int_equal(plugin_check_set_up(m, target, &seen, &err), 0);
	seen = (struct mount_seen){ .mount_id = id, .sb_dev = st.st_dev, .stacked = true };
	assert_int_equal(plugin_check_set_up(m, target, &seen, &err), 0);
	/* A table behind the target (another mount ID): what is there is looked at. */
	seen = (struct mount_seen){ .mount_id = id + 1000, .read_only = true };
	assert_int_equal(plugin_check_set_up(m, target, &seen, &err), 1);
	assert_false(seen.confirmed);
	seen = (struct mount_seen){ 0 };
	assert_int_equal(plugin_check_set_up(m, target, &seen, &err), 1);
	assert_false(seen.confirmed);

	/* A bind of another directory, told right by the table: 0. */
	assert_int_equal(umount2(target, 0), 0);
	assert_int_equal(mount(other, target, NULL, MS_BIND, NULL), 0);
	id = test_mount_id(target);
	seen = (struct mount_seen){ .mount_id = id, .sb_dev = st.st_dev };
	assert_int_equal(plugin_check_set_up(m, target, &seen, &err), 0);
	assert_int_equal(umount2(target, 0), 0);

	plugin_free_mounter(m);
	volume_spec_unref(spec);
}

/* The CSI server starts while the reconciler's first pass runs: one that cannot start (its
 * socket's directory cannot be made) still makes the agent exit 1 with the reason, and a
 * start after it adopts what the first one mounted. */
static void test_csi_that_cannot_start_stops_the_agent(void **state)
{
	struct agent_fixture *f = *state;
	char src[512], kubelet[512];
	const char *bad[] = { "--csi",
			      "--csi-endpoint",
			      "unix:///proc/volagent-none/csi.sock",
			      "--kubelet-root-dir",
			      kubelet,
			      NULL };

	make_dir(f, "src", src);
	make_dir(f, "kubelet", kubelet);
	write_dir_pod(f, "p1", src);
	assert_int_equal(fixture_start(f, bad), 0);
	assert_true(fixture_wait_log(f, "cannot start", WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGTERM), 1);
	assert_true(fixture_log_find(f, "cannot start", "/proc/volagent-none") >= 0);

	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_status(f, NULL, ready_with, &(struct expect){ 1, 0 }, WAIT_MS));
	assert_int_equal(test_count_mounts_under(f->root), 1);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		FIXTURE_CASE(test_restart_adopts_without_remount),
		FIXTURE_CASE(test_startup_logs_one_summary_line),
		FIXTURE_CASE(test_pods_deleted_while_down_are_unmounted),
		FIXTURE_CASE(test_stale_pod_dirs_removed_after_restart),
		FIXTURE_CASE(test_corrupt_journal_is_survived),
		FIXTURE_CASE(test_sigkill_while_mounting_many),
		FIXTURE_CASE(test_restart_refuses_what_is_not_the_volume),
		FIXTURE_CASE(test_restart_refuses_what_is_not_the_volume_fallback),
		FIXTURE_CASE(test_check_set_up_uses_what_the_table_saw),
		FIXTURE_CASE(test_csi_that_cannot_start_stops_the_agent),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
