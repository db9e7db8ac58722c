/* test-rbd-agent.c - rbd volumes through the whole agent (`volagent run` with pod spec files)
 * against a real cluster: attach + format + mount into a pod, write, move to another pod;
 * two pods share one attachment; the last pod gone leaves no attachment and no watcher; a
 * read-write attach of an image another client holds is refused, named, and retried until it
 * works; a restart adopts everything without remounting or re-attaching; kill -9 of rbd-fuse
 * is healed with the data intact; bad inputs are reported with nothing left behind; the key
 * never reaches the log; and the CSI path (NodeStage with the key in secrets, NodePublish,
 * NodeUnpublish, NodeUnstage).  In every test no byte of the key is ever written to a file
 * under the state dir or the root dir (a fanotify watcher reads each file there when it is
 * written and before anyone opens it, secret-watch.h); a key from secrets goes to the secret
 * dir (a tmpfs here, as /run/volagent is), mode 0600, and is gone once the helper read it.
 * Run by tests/rbd/run.sh; root, private mount namespace. */
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
#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "loop-device.h"
#include "check-util.h"
#include "fixture-case.h"
#include "macro.h"
#include "rbd/rbd-testlib.h"
#include "secret-watch.h"
#include "testlib.h"

#define WAIT_MS 60000

struct ctx {
	struct agent_fixture *f;
	char run_dir[600];
	char keyfile[600];
	char image[64];
	char kubelet[64];	      /* short: the CSI socket's path must fit in 107 bytes */
	struct secret_watch *disk;    /* the fixture's dir: state, root, the test's key file */
	struct secret_watch *secrets; /* the secret dir, a tmpfs */
	pid_t mon_stopped;	      /* the ceph-mon a test SIGSTOPped (teardown continues it) */
};

static int image_seq;

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	c->f = fixture_new("rbda");
	snprintf(c->run_dir, sizeof(c->run_dir), "%s/rbd", c->f->state);
	snprintf(c->keyfile, sizeof(c->keyfile), "%s/admin.key", c->f->dir);
	test_write_file(c->keyfile, rt.key);
	chmod(c->keyfile, 0600);
	snprintf(c->image, sizeof(c->image), "agent%d-%d", (int)getpid(), image_seq++);
	assert_int_equal(rt_create_image(c->image, 64), 0);
	/* The watcher first: it bind-mounts the fixture's dir onto itself, and the secret dir's
	 * tmpfs must be a mount on top of that, outside what it watches. */
	c->disk = secret_watch_start(c->f->dir, rt.key);
	assert_non_null(c->disk);
	assert_int_equal(mkdir(c->f->secrets, 0700), 0);
	assert_int_equal(mount("tmpfs", c->f->secrets, "tmpfs", 0, "mode=0700"), 0);
	c->secrets = secret_watch_start(c->f->secrets, rt.key);
	assert_non_null(c->secrets);
	*state = c;
	return 0;
}

/* No byte of the key was ever in a file under the state dir or the root dir, and the watcher
 * did see files there (the journal at least), so it was watching. */
static void assert_key_never_on_disk(struct ctx *c)
{
	char found[4096];
	unsigned n_state = 0;

	for (int i = 0; i < 2; i++) {
		const char *dir = i ? c->f->root : c->f->state;
		if (secret_watch_found(c->disk, dir, found, sizeof(found), i ? NULL : &n_state,
				       NULL))
			fail_msg("the key was written to %s", found);
	}
	assert_true(n_state > 0);
}

/* Whether dir holds no entry. */
static bool dir_is_empty(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool empty = true;

	assert_non_null(d);
	while ((de = readdir(d)))
		empty = empty && (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."));
	closedir(d);
	return empty;
}

static int teardown(void **state)
{
	struct ctx *c = *state;

	if (c->mon_stopped > 0)
		kill(c->mon_stopped, SIGCONT);
	if (c->f->agent.pid > 0)
		fixture_stop(c->f, SIGTERM);
	/* The agent leaves attachments to outlive it; a test cleans up what it made. */
	{
		char root[600];
		snprintf(root, sizeof(root), "%s/", c->f->root);
		for (int i = 0; i < 3; i++) {
			const char *argv[] = { "sh", "-c", NULL, NULL };
			char cmd[1400];
			snprintf(cmd, sizeof(cmd),
				 "awk -v d=%s 'index($2, d) == 1 {print $2}' /proc/self/mounts | "
				 "sort -r | xargs -r -n1 umount -l",
				 root);
			argv[2] = cmd;
			test_run(argv);
		}
	}
	{
		const char *argv[] = { "sh", "-c", NULL, NULL };
		char cmd[1400];
		snprintf(cmd, sizeof(cmd),
			 "losetup -nl -O NAME,BACK-FILE | awk -v p=%s/ 'index($2, p) == 1 "
			 "{print $1}' | xargs -r -n1 losetup -d",
			 c->f->dir); /* the agent's (run dir) and the test's own (other.img) */
		argv[2] = cmd;
		test_run(argv);
	}
	rt_fuse_kill(c->run_dir, SIGTERM);
	usleep(300 * 1000);
	rt_fuse_kill(c->run_dir, SIGKILL);
	if (c->kubelet[0]) {
		const char *argv[] = { "sh", "-c", NULL, NULL };
		char cmd[700];
		snprintf(cmd, sizeof(cmd),
			 "awk -v d=%s/ 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | "
			 "xargs -r -n1 umount -l",
			 c->kubelet);
		argv[2] = cmd;
		test_run(argv);
		test_rm_rf(c->kubelet);
	}
	/* The key must never reach the log, nor a file on the disk. */
	assert_false(test_agent_log_contains(&c->f->agent, rt.key));
	assert_key_never_on_disk(c);
	secret_watch_stop(c->secrets);
	secret_watch_stop(c->disk);
	fixture_free(c->f);
	free(c);
	return 0;
}

static void start(struct ctx *c, const char *methods)
{
	const char *extra[] = { "--health-interval",
				"1s",
				"--rbd-timeout",
				"20s",
				"--rbd-attach-methods",
				methods ? methods : "krbd,nbd,fuse",
				"--log-level",
				"debug",
				"--backoff-max",
				"2s",
				NULL };

	assert_int_equal(fixture_start(c->f, extra), 0);
}

static void write_pod(struct ctx *c, const char *uid, const char *image, bool ro)
{
	char spec[2048], name[128];

	snprintf(spec, sizeof(spec),
		 "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": \"data\", \"rbd\": "
		 "{\"monitors\": [\"%s\"], \"pool\": \"%s\", \"image\": \"%s\", "
		 "\"user\": \"admin\", \"secretFile\": \"%s\", \"fsType\": \"ext4\"%s}}]}",
		 uid, rt.mon, rt.pool, image ? image : c->image, c->keyfile,
		 ro ? ", \"readOnly\": true" : "");
	snprintf(name, sizeof(name), "%s.json", uid);
	assert_int_equal(fixture_write_pod(c->f, name, spec), 0);
}

static void remove_pod(struct ctx *c, const char *uid)
{
	char name[128];

	snprintf(name, sizeof(name), "%s.json", uid);
	assert_int_equal(fixture_remove_pod(c->f, name), 0);
}

static const char *pod_dir(const struct ctx *c, const char *uid, char *buf)
{
	snprintf(buf, 600, "%s/pods/%s/volumes/kubernetes.io~rbd/data", c->f->root, uid);
	return buf;
}

static int fuse_pid(const struct ctx *c)
{
	int pids[4];

	return rt_fuse_pids(c->run_dir, pids, 4) == 1 ? pids[0] : -1;
}

static void write_and_sync(const char *dir, const char *name, const char *content)
{
	char path[700];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(test_write_file(path, content), 0);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(syncfs(fd), 0);
	close(fd);
}

static void assert_file(const char *dir, const char *name, const char *content)
{
	char path[700], *back;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	back = test_read_file(path);
	assert_non_null(back);
	assert_string_equal(back, content);
	free(back);
}

static void test_mount_write_move(void **state)
{
	struct ctx *c = *state;
	char a[600], b[600];

	write_pod(c, "pod-a", NULL, false);
	start(c, NULL);
	assert_true(fixture_wait_mounted(pod_dir(c, "pod-a", a), WAIT_MS));
	assert_true(fixture_wait_log(c->f, "msg=\"device mounted\"", WAIT_MS));
	assert_int_equal(rt_watchers(c->image), 1);
	write_and_sync(a, "hello", "from pod a\n");

	/* Move: the old pod goes first (unmount, detach), then the new one mounts. */
	remove_pod(c, "pod-a");
	assert_true(fixture_wait_mount_count(c->f, 0, WAIT_MS));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	write_pod(c, "pod-b", NULL, false);
	assert_true(fixture_wait_mounted(pod_dir(c, "pod-b", b), WAIT_MS));
	assert_file(b, "hello", "from pod a\n");
	/* Formatted once: the second stage found the filesystem. */
	assert_true(fixture_wait_log(c->f, "msg=\"device mounted\"", WAIT_MS));
	remove_pod(c, "pod-b");
	assert_true(fixture_wait_mount_count(c->f, 0, WAIT_MS));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	assert_true(fixture_wait_log(c->f, "device unmounted", WAIT_MS));
	usleep(300 * 1000);
	rt_assert_nothing_left(c->run_dir);
}

static void test_two_pods_share_one_attachment(void **state)
{
	struct ctx *c = *state;
	char a[600], b[600];
	int pid;

	write_pod(c, "pod-a", NULL, false);
	write_pod(c, "pod-b", NULL, false);
	start(c, NULL);
	assert_true(fixture_wait_mounted(pod_dir(c, "pod-a", a), WAIT_MS));
	assert_true(fixture_wait_mounted(pod_dir(c, "pod-b", b), WAIT_MS));
	assert_true(fixture_wait_mount_count(c->f, 3, WAIT_MS)); /* global + 2 binds */
	pid = fuse_pid(c);
	assert_true(pid > 0);
	assert_int_equal(rt_loops_under(c->run_dir), 1);
	assert_int_equal(rt_watchers(c->image), 1);
	assert_int_equal(fixture_log_count(c->f, "msg=\"device mounted\""), 1);
	write_and_sync(a, "shared", "seen by both\n");
	assert_file(b, "shared", "seen by both\n");

	remove_pod(c, "pod-a");
	assert_true(fixture_wait_unmounted(a, WAIT_MS));
	usleep(500 * 1000);
	assert_true(test_is_mountpoint(b));
	assert_int_equal(fuse_pid(c), pid);

	remove_pod(c, "pod-b");
	assert_true(fixture_wait_mount_count(c->f, 0, WAIT_MS));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	usleep(300 * 1000);
	rt_assert_nothing_left(c->run_dir);
}

static void test_held_elsewhere_is_refused_then_retried(void **state)
{
	struct ctx *c = *state;
	rbd_image_t other = rt_hold(c->image);
	char a[600], text[200], volume[200];

	assert_non_null(other);
	write_pod(c, "pod-a", NULL, false);
	start(c, NULL);
	/* The refusal, on the line of the volume's failed operation (waited for as one line: a
	 * check of the text first and of its line after failed once under CI). */
	snprintf(text, sizeof(text), "image %s/%s is in use by client.", rt.pool, c->image);
	snprintf(volume, sizeof(volume), "volume=rbd:%s/%s", rt.pool, c->image);
	assert_true(fixture_wait_log_line(c->f, text, volume, WAIT_MS));
	assert_false(test_is_mountpoint(pod_dir(c, "pod-a", a)));
	rt_assert_nothing_left(c->run_dir);

	rbd_close(other);
	assert_true(fixture_wait_mounted(a, WAIT_MS));
	assert_int_equal(rt_watchers(c->image), 1);
}

static void test_restart_adopts(void **state)
{
	struct ctx *c = *state;
	char a[600];
	int pid, id_global, id_pod;

	write_pod(c, "pod-a", NULL, false);
	start(c, NULL);
	assert_true(fixture_wait_mounted(pod_dir(c, "pod-a", a), WAIT_MS));
	write_and_sync(a, "f", "before restart\n");
	pid = fuse_pid(c);
	id_pod = test_mount_id(a);
	{
		char g[700];
		snprintf(g, sizeof(g), "%s/plugins/kubernetes.io/rbd/mounts", c->f->root);
		assert_int_equal(test_count_mounts_under(g), 1);
	}
	id_global = test_count_mounts_under(c->f->root);
	assert_int_equal(fixture_stop(c->f, SIGTERM), 0);
	assert_int_equal(test_count_mounts_under(c->f->root), id_global); /* nothing unmounted */
	assert_int_equal(fuse_pid(c), pid); /* rbd-fuse outlives the agent */

	start(c, NULL);
	assert_true(fixture_wait_log(c->f, "startup reconstruction complete", WAIT_MS));
	assert_true(fixture_wait_log(c->f, "adopted existing mount", WAIT_MS));
	usleep(2500 * 1000); /* a health check or two */
	assert_int_equal(test_mount_id(a), id_pod);
	assert_int_equal(fuse_pid(c), pid);
	assert_int_equal(fixture_log_count(c->f, "msg=\"device mounted\""), 1);
	assert_int_equal(fixture_log_count(c->f, "healing"), 0);
	assert_file(a, "f", "before restart\n");

	/* The restarted agent releases what the first one made. */
	remove_pod(c, "pod-a");
	assert_true(fixture_wait_mount_count(c->f, 0, WAIT_MS));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	usleep(300 * 1000);
	rt_assert_nothing_left(c->run_dir);
}

/* The loop device the journal names for the volume ("loop=/dev/loopN" of the plugin's record
 * in run_dir), into buf. */
static void recorded_loop(const struct ctx *c, char *buf, size_t size)
{
	DIR *d = opendir(c->run_dir);
	struct dirent *de;
	char path[1400], *text = NULL, *l;

	assert_non_null(d);
	while (!text && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len > 4 && !strcmp(de->d_name + len - 4, ".rec")) {
			snprintf(path, sizeof(path), "%s/%s", c->run_dir, de->d_name);
			text = test_read_file(path);
		}
	}
	closedir(d);
	assert_non_null(text);
	l = strstr(text, "loop=");
	assert_non_null(l);
	snprintf(buf, size, "%.*s", (int)strcspn(l + 5, "\n"), l + 5);
	free(text);
}

/* A name reused while the agent was down (issue 45 item 5): the agent stopped, every mount
 * gone (as after a crash and a cleanup), the volume's loop device detached and its number
 * given to another file of the test's own.  The restarted agent (the same boot: its journal's
 * attachment is trusted this far) sees the loop device is not backed by the image any more,
 * drops that attachment, and attaches afresh: the pod gets its own data back, and the other
 * file is neither formatted, mounted nor detached.  Before, the recorded name was mounted: the
 * other file's blank device refused only by the volume's filesystem record, and mounted
 * outright when there was none. */
static void test_reused_loop_name(void **state)
{
	struct ctx *c = *state;
	char a[600], loop[64], other[700], back[700], type[64];
	long off;

	write_pod(c, "pod-a", NULL, false);
	start(c, "fuse");
	assert_true(fixture_wait_mounted(pod_dir(c, "pod-a", a), WAIT_MS));
	write_and_sync(a, "mine", "the volume's own data\n");
	assert_int_equal(fixture_stop(c->f, SIGTERM), 0);
	recorded_loop(c, loop, sizeof(loop));

	fixture_unmount_all(c->f);
	assert_int_equal(test_run((const char *const[]){ "losetup", "-d", loop, NULL }), 0);
	snprintf(other, sizeof(other), "%s/other.img", c->f->dir);
	assert_int_equal(test_make_sparse(other, 64 << 20), 0);
	assert_int_equal(test_run((const char *const[]){ "losetup", loop, other, NULL }), 0);

	off = fixture_log_size(c->f);
	start(c, "fuse");
	assert_true(
		fixture_wait_log_after(c->f, off, "attachment names something else now", WAIT_MS));
	assert_true(fixture_log_find(c->f, "attachment names something else now", loop) >= 0);
	assert_true(fixture_wait_mounted(a, WAIT_MS));
	assert_file(a, "mine", "the volume's own data\n");
	assert_int_equal(fixture_log_count(c->f, "refusing to format it again"), 0);
	/* The other file: still on its loop device, never formatted. */
	assert_int_equal(rbd_loop_backing_file(loop, back, sizeof(back)), 0);
	assert_string_equal(back, other);
	test_blkid_value(loop, "TYPE", type, sizeof(type));
	assert_string_equal(type, "");
	assert_int_equal(test_run((const char *const[]){ "losetup", "-d", loop, NULL }), 0);

	remove_pod(c, "pod-a");
	assert_true(fixture_wait_mount_count(c->f, 0, WAIT_MS));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	usleep(300 * 1000);
	rt_assert_nothing_left(c->run_dir);
}

static void test_heal_after_kill9(void **state)
{
	struct ctx *c = *state;
	char a[600];
	int pid, pid2 = -1;

	write_pod(c, "pod-a", NULL, false);
	start(c, NULL);
	assert_true(fixture_wait_mounted(pod_dir(c, "pod-a", a), WAIT_MS));
	write_and_sync(a, "precious", "synced before kill -9\n");
	pid = fuse_pid(c);
	assert_true(pid > 0);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_true(fixture_wait_log(c->f, "volume is broken, healing it", WAIT_MS));
	assert_true(fixture_log_find(c->f, "volume is broken", "rbd-fuse") >= 0);
	/* Healed: a new rbd-fuse, the pod's dir mounted again, the data there. */
	for (int i = 0; i < 600; i++) {
		pid2 = fuse_pid(c);
		if (pid2 > 0 && pid2 != pid && test_is_mountpoint(a) &&
		    fixture_log_count(c->f, "msg=\"volume mounted\"") >= 2)
			break;
		usleep(100 * 1000);
	}
	assert_true(pid2 > 0 && pid2 != pid);
	assert_true(test_is_mountpoint(a));
	assert_file(a, "precious", "synced before kill -9\n");
	write_and_sync(a, "after", "written after healing\n");
	assert_int_equal(rt_loops_under(c->run_dir), 1);

	remove_pod(c, "pod-a");
	assert_true(fixture_wait_mount_count(c->f, 0, WAIT_MS));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	usleep(300 * 1000);
	rt_assert_nothing_left(c->run_dir);
}

static void test_bad_inputs_leave_nothing(void **state)
{
	struct ctx *c = *state;

	write_pod(c, "pod-img", "nosuchimage", false);
	start(c, "krbd,nbd");
	/* The volume's own error line (a line without the volume may come first). */
	assert_true(fixture_wait_log_line(c->f, "does not exist in pool",
					  "volume=rbd:rbd/nosuchimage", WAIT_MS));

	/* This kernel refuses krbd and nbd: each refusal is in the error. */
	char text[200];
	write_pod(c, "pod-a", NULL, false);
	snprintf(text, sizeof(text), "cannot attach %s/%s with any method (krbd,nbd)", rt.pool,
		 c->image);
	assert_true(fixture_wait_log(c->f, text, WAIT_MS));
	assert_true(fixture_log_find(c->f, "krbd: rbd map exited", "nbd: rbd-nbd map exited") >= 0);
	assert_int_equal(test_count_mounts_under(c->f->root), 0);
	rt_assert_nothing_left(c->run_dir);
	assert_int_equal(rt_watchers(c->image), 0);
}

/* --- the CSI path: NodeStage with the key in secrets, NodePublish, NodeUnpublish, NodeUnstage,
 * driven by tests/csi/csi_client.py over the agent's real socket --- */

static bool socket_exists(void *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* Runs the calls (one per line) and returns the answers, one line each (caller frees). */
static char *csi(struct ctx *c, const char *sock, const char *calls)
{
	char input[700], stubs[700], *out = NULL;
	const char *argv[] = { "/usr/bin/python3",
			       "tests/csi/csi_client.py",
			       "--socket",
			       sock,
			       "--stub-dir",
			       stubs,
			       "--timeout",
			       "60",
			       "--input",
			       input,
			       NULL };

	snprintf(input, sizeof(input), "%s/calls.txt", c->f->dir);
	snprintf(stubs, sizeof(stubs), "%s/stubs", c->f->dir);
	assert_int_equal(test_write_file(input, calls), 0);
	assert_int_equal(test_run_capture(argv, &out), 0);
	unlink(input); /* it holds the key */
	return out;
}

static const char *answer(const char *out, int n, char *buf, size_t len)
{
	const char *p = out;

	for (int i = 0; i < n && p; i++) {
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	snprintf(buf, len, "%.*s", p ? (int)strcspn(p, "\n") : 0, p ? p : "");
	return buf;
}

#define assert_answer(out, n, text)                                                    \
	do {                                                                           \
		char _b[4096];                                                         \
		const char *_l = answer(out, n, _b, sizeof(_b));                       \
		if (!strstr(_l, text))                                                 \
			fail_msg("answer %d is \"%s\", expected \"%s\"", n, _l, text); \
	} while (0)

static void test_csi_stage_publish(void **state)
{
	struct ctx *c = *state;
	char kubelet[600], sock[700], stg[700], tgt[700], stg2[700], img2[64], calls[8192], *out;
	char journal[700], *j;
	const char *python = "/usr/bin/python3";
	rbd_image_t other;

	if (access(python, X_OK) < 0 ||
	    test_run((const char *const[]){ python, "-c", "import grpc, grpc_tools", NULL }) != 0)
		skip();
	snprintf(c->kubelet, sizeof(c->kubelet), "/tmp/vrbd-XXXXXX");
	assert_non_null(mkdtemp(c->kubelet));
	snprintf(kubelet, sizeof(kubelet), "%s", c->kubelet);
	snprintf(sock, sizeof(sock), "%s/plugins/csi.volagent.io/csi.sock", kubelet);
	snprintf(stg, sizeof(stg), "%s/plugins/kubernetes.io/csi/csi.volagent.io/v1/globalmount",
		 kubelet);
	snprintf(stg2, sizeof(stg2), "%s/plugins/kubernetes.io/csi/csi.volagent.io/v2/globalmount",
		 kubelet);
	snprintf(tgt, sizeof(tgt), "%s/pods/pod-a/volumes/kubernetes.io~csi/pv1/mount", kubelet);
	for (const char *d = stg; d; d = d == stg ? stg2 : NULL)
		assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", d, NULL }), 0);
	{
		char parent[700];
		snprintf(parent, sizeof(parent), "%s/pods/pod-a/volumes/kubernetes.io~csi/pv1",
			 kubelet);
		assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", parent, NULL }), 0);
	}
	snprintf(img2, sizeof(img2), "%s-held", c->image);
	assert_int_equal(rt_create_image(img2, 64), 0);
	other = rt_hold(img2);
	assert_non_null(other);
	assert_int_equal(fixture_start(c->f, (const char *const[]){ "--csi", "--kubelet-root-dir",
								    kubelet, "--device-inventory",
								    "false", "--log-level", "debug",
								    NULL }),
			 0);
	assert_true(test_wait_until(socket_exists, sock, 10000));
	assert_true(fixture_wait_log(c->f, "startup reconstruction complete", 10000));

#define CTX(img)                                                                           \
	"\"volume_context\": {\"type\": \"rbd\", \"monitors\": \"%s\", \"pool\": \"%s\", " \
	"\"image\": \"" img "\"}, \"secrets\": {\"userID\": \"admin\", \"userKey\": \"%s\"}"
#define CAP                                                                             \
	"\"volume_capability\": {\"mount\": {\"fs_type\": \"ext4\"}, \"access_mode\": " \
	"{\"mode\": \"SINGLE_NODE_WRITER\"}}"
	snprintf(calls, sizeof(calls),
		 "Node/NodeStageVolume {\"volume_id\": \"v1\", \"staging_target_path\": \"%s\", " CAP
		 ", " CTX("%s") "}\n"
				"Node/NodePublishVolume {\"volume_id\": \"v1\", "
				"\"staging_target_path\": \"%s\", "
				"\"target_path\": \"%s\", " CAP
				", " CTX("%s") "}\n"
					       "Node/NodeStageVolume {\"volume_id\": \"v2\", "
					       "\"staging_target_path\": \"%s\", " CAP
					       ", " CTX("%s") "}\n",
		 stg, rt.mon, rt.pool, c->image, rt.key, stg, tgt, rt.mon, rt.pool, c->image,
		 rt.key, stg2, rt.mon, rt.pool, img2, rt.key);
	out = csi(c, sock, calls);
	print_message("%s", out);
	assert_answer(out, 0, "OK {}");
	assert_answer(out, 1, "OK {}");
	/* The plugin says -EBUSY (another client holds the image): FAILED_PRECONDITION. */
	{
		char b[4096];
		answer(out, 2, b, sizeof(b));
		assert_true(startswith(b, "ERR FAILED_PRECONDITION"));
	}
	assert_answer(out, 2, "is in use by client.");
	free(out);
	assert_true(test_is_mountpoint(stg));
	assert_true(test_is_mountpoint(tgt));
	assert_false(test_is_mountpoint(stg2));
	write_and_sync(tgt, "csi", "through CSI\n");
	assert_int_equal(rt_watchers(c->image), 1);

	/* The key went nowhere lasting: not the journal, no key file, not the log (teardown). */
	snprintf(journal, sizeof(journal), "%s/journal.json", c->f->state);
	j = test_read_file(journal);
	assert_non_null(j);
	assert_null(strstr(j, rt.key));
	free(j);
	/* It was handed to the helper through the secret dir, mode 0600, and removed once read;
	 * never through the state or root dir (teardown). */
	{
		char found[4096];
		unsigned mode = 0;
		assert_non_null(secret_watch_found(c->secrets, c->f->secrets, found, sizeof(found),
						   NULL, &mode));
		assert_int_equal(mode, 0600);
		assert_true(dir_is_empty(c->f->secrets));
	}

	snprintf(calls, sizeof(calls),
		 "Node/NodeUnpublishVolume {\"volume_id\": \"v1\", \"target_path\": \"%s\"}\n"
		 "Node/NodeUnstageVolume {\"volume_id\": \"v1\", \"staging_target_path\": \"%s\"}\n"
		 "Node/NodeUnstageVolume {\"volume_id\": \"v2\", \"staging_target_path\": \"%s\"}\n",
		 tgt, stg, stg2);
	out = csi(c, sock, calls);
	print_message("%s", out);
	assert_answer(out, 0, "OK {}");
	assert_answer(out, 1, "OK {}");
	assert_answer(out, 2, "OK {}");
	free(out);
	assert_false(test_is_mountpoint(tgt));
	assert_false(test_is_mountpoint(stg));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	usleep(300 * 1000);
	rt_assert_nothing_left(c->run_dir);
	rbd_close(other);
}

/* --- raw block volumes (volumeMode Block): the image's device node bound onto the pod's file --- */

static void write_block_pod(struct ctx *c, const char *uid, bool ro)
{
	char spec[2048], name[128];

	snprintf(spec, sizeof(spec),
		 "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": \"data\", \"rbd\": "
		 "{\"monitors\": [\"%s\"], \"pool\": \"%s\", \"image\": \"%s\", "
		 "\"user\": \"admin\", \"secretFile\": \"%s\"}, \"volumeMode\": \"Block\"%s}]}",
		 uid, rt.mon, rt.pool, c->image, c->keyfile, ro ? ", \"readOnly\": true" : "");
	snprintf(name, sizeof(name), "%s.json", uid);
	assert_int_equal(fixture_write_pod(c->f, name, spec), 0);
}

static const char *pod_dev(const struct ctx *c, const char *uid, char *buf)
{
	snprintf(buf, 600, "%s/pods/%s/volumeDevices/kubernetes.io~rbd/data", c->f->root, uid);
	return buf;
}

/* 64 KiB of c at offset 1 MiB through path, with dd oflag=direct. */
static void dd_block(const struct ctx *c, const char *path, char ch)
{
	char src[700], ifarg[720], ofarg[720];
	char *buf = malloc(65536);
	const char *argv[] = { "dd",	      ifarg,	 ofarg,		 "bs=65536",
			       "count=1",     "seek=16", "oflag=direct", "conv=notrunc,fsync",
			       "status=none", NULL };

	assert_non_null(buf);
	memset(buf, ch, 65536);
	snprintf(src, sizeof(src), "%s/pattern", c->f->dir);
	{
		FILE *fp = fopen(src, "w");
		assert_non_null(fp);
		assert_int_equal(fwrite(buf, 1, 65536, fp), 65536);
		fclose(fp);
	}
	free(buf);
	snprintf(ifarg, sizeof(ifarg), "if=%s", src);
	snprintf(ofarg, sizeof(ofarg), "of=%s", path);
	assert_int_equal(test_run(argv), 0);
}

/* Whether the image holds 64 KiB of ch at offset 1 MiB, read through librbd (the cluster's
 * view, not the node's). */
static bool image_holds(const char *image, char ch)
{
	char buf[65536];
	rbd_image_t img;
	bool ok;

	if (rbd_open_read_only(rt.io, image, &img, NULL) < 0)
		return false;
	ok = rbd_read(img, 16 * 65536, sizeof(buf), buf) == (ssize_t)sizeof(buf);
	rbd_close(img);
	for (size_t i = 0; ok && i < sizeof(buf); i++)
		ok = buf[i] == ch;
	return ok;
}

/* The lines of the agent's log that mention text, except the start-up's list of the helpers
 * it found ("msg=helper name=mkfs.ext4 path=..."). */
static int log_lines_mentioning(const struct ctx *c, const char *text)
{
	char *log = test_read_file(c->f->agent.log_path), *line, *save = NULL;
	int n = 0;

	for (line = log ? strtok_r(log, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		n += strstr(line, text) && !strstr(line, "msg=helper ");
	free(log);
	return n;
}

static void test_block_volume_map_write_restart(void **state)
{
	struct ctx *c = *state;
	char a[600], r[600];
	struct stat st;
	int pid, id_pod, n_mounts;

	write_block_pod(c, "pod-a", false);
	start(c, NULL);
	assert_true(fixture_wait_mounted(pod_dev(c, "pod-a", a), WAIT_MS));
	assert_int_equal(stat(a, &st), 0);
	assert_true(S_ISBLK(st.st_mode));
	assert_int_equal(rt_watchers(c->image), 1);
	/* Bytes written through the pod's file reach the image; nothing was formatted. */
	dd_block(c, a, 'R');
	assert_true(image_holds(c->image, 'R'));
	assert_int_equal(log_lines_mentioning(c, "mkfs"), 0);

	/* SIGKILL and restart: adopted, not re-mapped. */
	pid = fuse_pid(c);
	id_pod = test_mount_id(a);
	n_mounts = test_count_mounts_under(c->f->root);
	assert_int_equal(fixture_stop(c->f, SIGKILL), 128 + SIGKILL);
	start(c, NULL);
	assert_true(fixture_wait_log(c->f, "startup reconstruction complete", WAIT_MS));
	assert_true(fixture_wait_log(c->f, "adopted existing mount", WAIT_MS));
	usleep(2500 * 1000); /* a health check or two */
	assert_int_equal(test_mount_id(a), id_pod);
	assert_int_equal(test_count_mounts_under(c->f->root), n_mounts);
	assert_int_equal(fuse_pid(c), pid);
	assert_int_equal(fixture_log_count(c->f, "msg=\"device mounted\""), 1);

	/* The pod goes: the image is released, nothing left behind. */
	remove_pod(c, "pod-a");
	assert_true(fixture_wait_mount_count(c->f, 0, WAIT_MS));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	usleep(300 * 1000);
	rt_assert_nothing_left(c->run_dir);
	assert_true(image_holds(c->image, 'R'));

	/* Read-only: every pod reads only, so the image is attached read-only (rbd-fuse's loop
	 * device is read-only) and the kernel refuses a write through the pod's file. */
	write_block_pod(c, "pod-r", true);
	assert_true(fixture_wait_mounted(pod_dev(c, "pod-r", r), WAIT_MS));
	assert_true(test_mount_is_ro(r));
	assert_block_write_refused(r);
	assert_true(image_holds(c->image, 'R'));
	remove_pod(c, "pod-r");
	assert_true(fixture_wait_mount_count(c->f, 0, WAIT_MS));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	usleep(300 * 1000);
	rt_assert_nothing_left(c->run_dir);
}

/* CSI access modes for an rbd volume, through the real socket: SINGLE_NODE_SINGLE_WRITER
 * allows one target on this node (a second, even read-only, is FAILED_PRECONDITION naming the
 * first), SINGLE_NODE_MULTI_WRITER several read-write ones, a publish with another mode than
 * the stage's is refused, and a writer on several nodes (MULTI_NODE_MULTI_WRITER) is
 * "exceeds capabilities": its ext4 would be written from several nodes. */
static void test_csi_access_modes(void **state)
{
	struct ctx *c = *state;
	char sock[700], stg[700], t1[700], t2[700], calls[8192], file[800], *out, *data;
	const char *python = "/usr/bin/python3";
	const char *modes[] = { "SINGLE_NODE_SINGLE_WRITER", "SINGLE_NODE_MULTI_WRITER",
				"MULTI_NODE_MULTI_WRITER" };
	char cc[3][1400];

	if (access(python, X_OK) < 0 ||
	    test_run((const char *const[]){ python, "-c", "import grpc, grpc_tools", NULL }) != 0)
		skip();
	snprintf(c->kubelet, sizeof(c->kubelet), "/tmp/vrbd-XXXXXX");
	assert_non_null(mkdtemp(c->kubelet));
	snprintf(sock, sizeof(sock), "%s/plugins/csi.volagent.io/csi.sock", c->kubelet);
	snprintf(stg, sizeof(stg), "%s/plugins/kubernetes.io/csi/csi.volagent.io/m/globalmount",
		 c->kubelet);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", stg, NULL }), 0);
	for (int i = 0; i < 2; i++) {
		char parent[700];
		snprintf(parent, sizeof(parent), "%s/pods/pod-%d/volumes/kubernetes.io~csi/pv",
			 c->kubelet, i);
		assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", parent, NULL }), 0);
		snprintf(i ? t2 : t1, 700, "%s/mount", parent);
	}
	assert_int_equal(fixture_start(c->f,
				       (const char *const[]){ "--csi", "--kubelet-root-dir",
							      c->kubelet, "--device-inventory",
							      "false", NULL }),
			 0);
	assert_true(test_wait_until(socket_exists, sock, 10000));
	assert_true(fixture_wait_log(c->f, "startup reconstruction complete", 10000));
	for (int i = 0; i < 3; i++)
		snprintf(
			cc[i], sizeof(cc[i]),
			"\"volume_capability\": {\"mount\": {\"fs_type\": \"ext4\"}, \"access_mode\": "
			"{\"mode\": \"%s\"}}, \"volume_context\": {\"type\": \"rbd\", \"monitors\": "
			"\"%s\", \"pool\": \"%s\", \"image\": \"%s\"}, \"secrets\": {\"userID\": "
			"\"admin\", \"userKey\": \"%s\"}",
			modes[i], rt.mon, rt.pool, c->image, rt.key);

	/* SINGLE_NODE_SINGLE_WRITER; a multi-node writer is refused first */
	snprintf(
		calls, sizeof(calls),
		"Node/NodeStageVolume {\"volume_id\": \"m\", \"staging_target_path\": \"%s\", %s}\n"
		"Node/NodeStageVolume {\"volume_id\": \"m\", \"staging_target_path\": \"%s\", %s}\n"
		"Node/NodePublishVolume {\"volume_id\": \"m\", \"staging_target_path\": \"%s\", "
		"\"target_path\": \"%s\", %s}\n"
		"Node/NodePublishVolume {\"volume_id\": \"m\", \"staging_target_path\": \"%s\", "
		"\"target_path\": \"%s\", \"readonly\": true, %s}\n"
		"Node/NodePublishVolume {\"volume_id\": \"m\", \"staging_target_path\": \"%s\", "
		"\"target_path\": \"%s\", %s}\n"
		"Node/NodeUnpublishVolume {\"volume_id\": \"m\", \"target_path\": \"%s\"}\n"
		"Node/NodeUnstageVolume {\"volume_id\": \"m\", \"staging_target_path\": \"%s\"}\n",
		stg, cc[2], stg, cc[0], stg, t1, cc[0], stg, t2, cc[0], stg, t2, cc[1], t1, stg);
	out = csi(c, sock, calls);
	print_message("%s", out);
	assert_answer(out, 0,
		      "ERR FAILED_PRECONDITION volume_capability.access_mode: "
		      "MULTI_NODE_MULTI_WRITER is not supported by rbd volumes with a filesystem");
	assert_answer(out, 1, "OK {}");
	assert_answer(out, 2, "OK {}");
	assert_answer(out, 3,
		      "ERR FAILED_PRECONDITION volume m is SINGLE_NODE_SINGLE_WRITER and "
		      "already published on this node at");
	assert_answer(out, 3, t1);
	assert_answer(out, 4,
		      "ERR FAILED_PRECONDITION volume m is staged with access mode "
		      "SINGLE_NODE_SINGLE_WRITER, not SINGLE_NODE_MULTI_WRITER");
	assert_answer(out, 5, "OK {}");
	assert_answer(out, 6, "OK {}");
	free(out);
	assert_false(test_is_mountpoint(t2));
	assert_false(test_is_mountpoint(stg));

	/* SINGLE_NODE_MULTI_WRITER: two writers on this node, one filesystem */
	snprintf(calls, sizeof(calls),
		 "Node/NodeStageVolume {\"volume_id\": \"m\", \"staging_target_path\": \"%s\", %s}\n"
		 "Node/NodePublishVolume {\"volume_id\": \"m\", \"staging_target_path\": \"%s\", "
		 "\"target_path\": \"%s\", %s}\n"
		 "Node/NodePublishVolume {\"volume_id\": \"m\", \"staging_target_path\": \"%s\", "
		 "\"target_path\": \"%s\", %s}\n",
		 stg, cc[1], stg, t1, cc[1], stg, t2, cc[1]);
	out = csi(c, sock, calls);
	print_message("%s", out);
	for (int i = 0; i < 3; i++)
		assert_answer(out, i, "OK {}");
	free(out);
	assert_false(test_mount_is_ro(t1));
	assert_false(test_mount_is_ro(t2));
	write_and_sync(t2, "from-t2", "second writer\n");
	snprintf(file, sizeof(file), "%s/from-t2", t1);
	data = test_read_file(file);
	assert_non_null(data);
	assert_string_equal(data, "second writer\n");
	free(data);
	snprintf(calls, sizeof(calls),
		 "Node/NodeUnpublishVolume {\"volume_id\": \"m\", \"target_path\": \"%s\"}\n"
		 "Node/NodeUnpublishVolume {\"volume_id\": \"m\", \"target_path\": \"%s\"}\n"
		 "Node/NodeUnstageVolume {\"volume_id\": \"m\", \"staging_target_path\": \"%s\"}\n",
		 t1, t2, stg);
	out = csi(c, sock, calls);
	for (int i = 0; i < 3; i++)
		assert_answer(out, i, "OK {}");
	free(out);
	assert_false(test_is_mountpoint(stg));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
}

/* --- a Ceph cluster that is down: new attaches to it fail fast (rbd-health.h) --- */

/* The PID of the cluster's ceph-mon, as scripts/ceph-cluster recorded it ("PID ceph-mon a"
 * in $CEPH_DIR/run/started). */
static pid_t mon_pid(void)
{
	const char *dir = getenv("CEPH_DIR");
	char path[600], line[200];
	pid_t pid = 0;
	FILE *f;

	if (!dir)
		return 0;
	snprintf(path, sizeof(path), "%s/run/started", dir);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f)) {
		int p;
		char name[32];
		if (sscanf(line, "%d %31s", &p, name) == 2 && !strcmp(name, "ceph-mon"))
			pid = p;
	}
	if (f)
		fclose(f);
	return pid;
}

static int count_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* The processes whose parent is pid. */
static int children_of(pid_t pid)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d))) {
		char path[300], line[128];
		FILE *f;

		if (atoi(de->d_name) <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/status", de->d_name);
		f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, "PPid:", 5)) {
				n += atoi(line + 5) == pid;
				break;
			}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

struct agent_procs {
	pid_t pid;
	int most; /* children */
};

static bool children_at_most(void *arg)
{
	struct agent_procs *a = arg;

	return children_of(a->pid) <= a->most;
}

/* Whether status shows the cluster (key) in state. */
static bool cluster_is(json_t *status, const void *arg)
{
	const char *const *want = arg;
	json_t *s;
	size_t i;

	json_array_foreach(
		json_object_get(status, "storage_servers"), i,
		s) if (!strcmp(json_string_value(json_object_get(s, "server")) ?: "",
			       want[0])) return !strcmp(json_string_value(json_object_get(s,
											  "state"))
								?: "",
							want[1]);
	return false;
}

/* The ceph-mon SIGSTOPped (it accepts connections and answers nothing): the first attach
 * hangs until --rbd-timeout, the cluster is down after --rbd-hung-after, a CSI NodeStage to it
 * answers UNAVAILABLE within a second naming it, a local volume goes through, and the agent
 * starts no more helpers or threads while it lasts; SIGCONTed, the held pod's volume and a new
 * NodeStage go through, same agent. */
static void test_cluster_down_fails_fast(void **state)
{
	struct ctx *c = *state;
	char sock[700], stg[700], img2[64], key[128], calls[4096], tgt[600], local[600], *out;
	const char *down[] = { key, "down" }, *up[] = { key, "up" };
	const char *python = "/usr/bin/python3";
	struct agent_procs procs;
	struct timespec t0, t1;
	int th0, th1, ch0, ch1;
	long ms;
	pid_t mon = mon_pid(), agent;

	if (access(python, X_OK) < 0 ||
	    test_run((const char *const[]){ python, "-c", "import grpc, grpc_tools", NULL }) != 0)
		skip();
	assert_true(mon > 0);
	snprintf(c->kubelet, sizeof(c->kubelet), "/tmp/vrbd-XXXXXX");
	assert_non_null(mkdtemp(c->kubelet));
	snprintf(sock, sizeof(sock), "%s/plugins/csi.volagent.io/csi.sock", c->kubelet);
	snprintf(stg, sizeof(stg), "%s/plugins/kubernetes.io/csi/csi.volagent.io/d2/globalmount",
		 c->kubelet);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", stg, NULL }), 0);
	snprintf(img2, sizeof(img2), "%s-2", c->image);
	assert_int_equal(rt_create_image(img2, 64), 0);
	snprintf(key, sizeof(key), "rbd cluster %s", rt.mon);
	assert_int_equal(fixture_start(c->f,
				       (const char *const[]){
					       "--csi", "--kubelet-root-dir", c->kubelet,
					       "--device-inventory", "false",
					       "--rbd-attach-methods", "fuse", "--rbd-timeout",
					       "4s", "--rbd-hung-after", "1s", "--backoff-max",
					       "2s", "--log-level", "debug", NULL }),
			 0);
	agent = c->f->agent.pid;
	assert_true(test_wait_until(socket_exists, sock, 10000));
	assert_true(fixture_wait_ready(c->f, NULL, 10000));
	out = csi(c, sock, "Identity/Probe {}\n"); /* its threads started: counted after */
	free(out);
	{
		char task[64];
		snprintf(task, sizeof(task), "/proc/%d/task", (int)agent);
		th0 = count_entries(task);
		ch0 = children_of(agent);

		assert_int_equal(kill(mon, SIGSTOP), 0);
		c->mon_stopped = mon;
		write_pod(c, "p1", NULL, false);
		pod_dir(c, "p1", tgt);
		/* The first attach's helper hangs; after 1 s the cluster is down. */
		assert_true(fixture_wait_status(c->f, NULL, cluster_is, down, 20000));
		assert_false(test_is_mountpoint(tgt));

		snprintf(calls, sizeof(calls),
			 "Node/NodeStageVolume {\"volume_id\": \"d2\", \"staging_target_path\": "
			 "\"%s\", " CAP ", " CTX("%s") "}\n",
			 stg, rt.mon, rt.pool, img2, rt.key);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		out = csi(c, sock, calls);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		print_message("%s", out);
		ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		print_message("NodeStageVolume to the stopped cluster answered in %ld ms (with "
			      "python's start)\n",
			      ms);
		assert_answer(out, 0, "ERR UNAVAILABLE");
		assert_answer(out, 0, "is down since 20");
		{
			char want[200];
			snprintf(want, sizeof(want), "%s is down", key);
			assert_answer(out, 0, want);
		}
		free(out);
		ch1 = children_of(agent);
		print_message("down, first helper still running: children %d -> %d\n", ch0, ch1);
		assert_true(ch1 <= ch0 + 1);
		/* The call's own time, without python's start: a second call, deadline 1 s. */
		{
			char *argv_out = NULL, input[700], stubs[700];
			const char *argv[] = { python,	     "tests/csi/csi_client.py",
					       "--socket",   sock,
					       "--stub-dir", stubs,
					       "--timeout",  "1",
					       "--input",    input,
					       NULL };
			snprintf(input, sizeof(input), "%s/calls.txt", c->f->dir);
			snprintf(stubs, sizeof(stubs), "%s/stubs", c->f->dir);
			assert_int_equal(test_write_file(input, calls), 0);
			assert_int_equal(test_run_capture(argv, &argv_out), 0);
			unlink(input);
			assert_answer(argv_out, 0, "ERR UNAVAILABLE");
			free(argv_out);
		}

		/* Local volumes go on meanwhile. */
		snprintf(local, sizeof(local), "%s",
			 fixture_make_source(c->f, "localsrc", "local\n"));
		assert_int_equal(fixture_write_local_pod(c->f, "l1", "v", local), 0);
		{
			char ld[600];
			assert_true(fixture_wait_mounted(fixture_pod_dir(c->f, "l1", "v", ld),
							 WAIT_MS));
		}
		/* The held attach times out (4 s) and is retried at backoff: refused, no new
		 * helper; more NodeStage calls are refused too. */
		{
			char vol[128];
			snprintf(vol, sizeof(vol), "volume=rbd:%s/%s", rt.pool, c->image);
			assert_true(fixture_wait_log_line(c->f, vol, "is down since", WAIT_MS));
		}
		for (int i = 0; i < 3; i++) {
			out = csi(c, sock, calls);
			assert_answer(out, 0, "ERR UNAVAILABLE");
			free(out);
		}
		th1 = count_entries(task);
		ch1 = children_of(agent);
		print_message("down: threads %d -> %d, children %d -> %d\n", th0, th1, ch0, ch1);
		assert_true(th1 <= th0 + 2);
		assert_true(ch1 <= ch0 + 1);
		assert_false(test_is_mountpoint(tgt));

		assert_int_equal(kill(mon, SIGCONT), 0);
		c->mon_stopped = 0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		assert_true(fixture_wait_mounted(tgt, WAIT_MS));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		print_message("the held pod's volume mounted %ld ms after SIGCONT\n",
			      (long)((t1.tv_sec - t0.tv_sec) * 1000 +
				     (t1.tv_nsec - t0.tv_nsec) / 1000000));
		assert_true(fixture_wait_status(c->f, NULL, cluster_is, up, WAIT_MS));
		out = csi(c, sock, calls);
		print_message("%s", out);
		assert_answer(out, 0, "OK {}");
		free(out);
		assert_int_equal(c->f->agent.pid, agent);
		assert_int_equal(kill(agent, 0), 0);
		th1 = count_entries(task);
		procs = (struct agent_procs){ .pid = agent, .most = ch0 };
		assert_true(test_wait_until(children_at_most, &procs, WAIT_MS));
		print_message("up: threads %d -> %d\n", th0, th1);
		assert_true(th1 <= th0 + 2);
	}

	snprintf(calls, sizeof(calls),
		 "Node/NodeUnstageVolume {\"volume_id\": \"d2\", \"staging_target_path\": \"%s\"}\n",
		 stg);
	out = csi(c, sock, calls);
	assert_answer(out, 0, "OK {}");
	free(out);
	remove_pod(c, "p1");
	assert_int_equal(fixture_remove_pod(c->f, "l1.json"), 0);
	assert_true(fixture_wait_unmounted(tgt, WAIT_MS));
	assert_true(rt_wait_no_watchers(c->image, WAIT_MS));
	assert_true(rt_wait_no_watchers(img2, WAIT_MS));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		FIXTURE_CASE(test_mount_write_move),
		FIXTURE_CASE(test_two_pods_share_one_attachment),
		FIXTURE_CASE(test_held_elsewhere_is_refused_then_retried),
		FIXTURE_CASE(test_restart_adopts),
		FIXTURE_CASE(test_heal_after_kill9),
		FIXTURE_CASE(test_reused_loop_name),
		FIXTURE_CASE(test_bad_inputs_leave_nothing),
		FIXTURE_CASE(test_csi_stage_publish),
		FIXTURE_CASE(test_csi_access_modes),
		FIXTURE_CASE(test_block_volume_map_write_restart),
		FIXTURE_CASE(test_cluster_down_fails_fast),
	};

	rt_init();
	test_enter_private_mountns();
	return cmocka_run_group_tests_name("rbd through the agent", tests, NULL, NULL);
}
