/* test-block-volumes.c - raw block volumes (volumeMode: Block) from pod spec files, with the
 * local plugin on real loop devices: the device is bind-mounted onto a file at kubelet's
 * volumeDevices layout, never formatted; bytes written through the pod's file with dd
 * oflag=direct are on the device and survive the pod's removal and return; read-only binds
 * refusing writes (of a writable device through a read-only loop over it, of a read-only
 * device as it is), a reader and a writer sharing a device, a move between pods (unmap before map), mixed
 * block and filesystem use refused, and SIGKILL + restart adopting the binds (mount IDs
 * unchanged).  Root, private mount namespace; the fixture stops the agent and detaches every
 * loop device even on failure. */
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
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "check-util.h"
#include "csi-calls.h"
#include "csi-env.h"
#include "macro.h"
#include "path-util.h"
#include "pod-spec.h"
#include "testlib.h"

#define WAIT_MS 20000

FIXTURE_SETUP_TEARDOWN("block")

/* BLKROSET's read-only flag belongs to the loop device node and outlives the attachment: the
 * next user of that loop device would get a read-only disk.  Cleared on every loop of the
 * test before the fixture detaches them, also when the test failed. */
static void loop_set_ro(const char *dev, int ro)
{
	int fd = open(dev, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	(void)ioctl(fd, BLKROSET, &ro);
	close(fd);
}

static int teardown_ro(void **state)
{
	struct agent_fixture *f = *state;

	for (int i = 0; i < f->n_loops; i++)
		loop_set_ro(f->loops[i], 0);
	return teardown(state);
}

/* "<root>/pods/<uid>/volumeDevices/kubernetes.io~local/<name>" */
static void pod_dev(const struct agent_fixture *f, const char *uid, const char *name, char *buf)
{
	snprintf(buf, 600, "%s/pods/%s/volumeDevices/kubernetes.io~local/%s", f->root, uid, name);
}

/* The held file of local volume dev: <root>/plugins/kubernetes.io/local/volumeDevices/<esc>/dev */
static void held_dev(const struct agent_fixture *f, const char *dev, char *buf)
{
	char name[128];
	char *esc;

	snprintf(name, sizeof(name), "local:%s", dev);
	esc = path_escape_component(name);
	assert_non_null(esc);
	snprintf(buf, 800, "%s/plugins/kubernetes.io/local/volumeDevices/%s/dev", f->root, esc);
	free(esc);
}

static int write_block_pod(struct agent_fixture *f, const char *file, const char *uid,
			   const char *dev, const char *mode, bool read_only)
{
	return fixture_write_podf(f, file,
				  "{\"pod\": {\"uid\": \"%s\"}, \"volumes\": [{\"name\": \"raw\", "
				  "\"local\": {\"path\": \"%s\"}, \"volumeMode\": \"%s\", "
				  "\"readOnly\": %s}]}",
				  uid, dev, mode, read_only ? "true" : "false");
}

/* Writes pod uid's spec file (named file) with dev as its raw block volume "raw", read-only or
 * not, starts the agent, and puts the path of the pod's file into target (>= 600 bytes). */
static void start_block_pod(struct agent_fixture *f, const char *file, const char *uid,
			    const char *dev, bool read_only, char *target)
{
	assert_int_equal(write_block_pod(f, file, uid, dev, "Block", read_only), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	pod_dev(f, uid, "raw", target);
}

/* Whether path is a block device node with the same device number as dev. */
static bool same_block_device(const char *path, const char *dev)
{
	struct stat a, b;

	return stat(path, &a) == 0 && stat(dev, &b) == 0 && S_ISBLK(a.st_mode) &&
	       a.st_rdev == b.st_rdev;
}

static bool path_is_gone(void *path)
{
	return access(path, F_OK) < 0 && errno == ENOENT;
}

/* Writes TEST_BLOCK_CHUNK bytes of pattern c at offset 1 MiB through path with dd oflag=direct. */
static void dd_write(const struct agent_fixture *f, const char *path, char c)
{
	char src[600], of[700];
	char *buf = malloc(TEST_BLOCK_CHUNK);
	const char *argv[] = { "dd",	      NULL,	 NULL,		 "bs=65536",
			       "count=1",     "seek=16", "oflag=direct", "conv=notrunc,fsync",
			       "status=none", NULL };

	assert_non_null(buf);
	memset(buf, c, TEST_BLOCK_CHUNK);
	snprintf(src, sizeof(src), "%s/pattern", f->dir);
	{
		FILE *fp = fopen(src, "w");
		assert_non_null(fp);
		assert_int_equal(fwrite(buf, 1, TEST_BLOCK_CHUNK, fp), TEST_BLOCK_CHUNK);
		fclose(fp);
	}
	free(buf);
	snprintf(of, sizeof(of), "of=%s", path);
	{
		char ifarg[700];
		snprintf(ifarg, sizeof(ifarg), "if=%s", src);
		argv[1] = ifarg;
		argv[2] = of;
		assert_int_equal(test_run(argv), 0);
	}
}

static void test_pod_spec_volume_mode(void **state)
{
	static const struct {
		const char *json;
		const char *error; /* NULL: accepted */
	} cases[] = {
		{ "{\"pod\":{\"uid\":\"u\"},\"volumes\":[{\"name\":\"v\",\"local\":{\"path\":"
		  "\"/dev/x\"},\"volumeMode\":\"Block\"}]}",
		  NULL },
		{ "{\"pod\":{\"uid\":\"u\"},\"volumes\":[{\"name\":\"v\",\"local\":{\"path\":"
		  "\"/dev/x\"},\"volumeMode\":\"Filesystem\"}]}",
		  NULL },
		{ "{\"pod\":{\"uid\":\"u\"},\"volumes\":[{\"name\":\"v\",\"local\":{\"path\":"
		  "\"/dev/x\"},\"volumeMode\":\"block\"}]}",
		  "volumes[0].volumeMode: must be \"Block\" or \"Filesystem\"" },
		{ "{\"pod\":{\"uid\":\"u\"},\"volumes\":[{\"name\":\"v\",\"local\":{\"path\":"
		  "\"/dev/x\"},\"volumeMode\":1}]}",
		  "volumes[0].volumeMode: must be" },
		{ "{\"pod\":{\"uid\":\"u\"},\"volumes\":[{\"name\":\"v\",\"nfs\":{\"server\":\"h\","
		  "\"path\":\"/x\"},\"volumeMode\":\"Block\"}]}",
		  "volumes[0].volumeMode: nfs volumes have no Block mode" },
		{ "{\"pod\":{\"uid\":\"u\"},\"volumes\":[{\"name\":\"v\",\"local\":{\"path\":"
		  "\"/dev/x\",\"fsType\":\"ext4\"},\"volumeMode\":\"Block\"}]}",
		  "volumes[0].local.fsType: a volume with volumeMode Block is never formatted" },
		{ "{\"pod\":{\"uid\":\"u\"},\"volumes\":[{\"name\":\"v\",\"local\":{\"path\":"
		  "\"/dev/x\"},\"volumeMode\":\"Block\",\"mountOptions\":[\"noatime\"]}]}",
		  "volumes[0].mountOptions: a volume with volumeMode Block is not mounted" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct error_info err = { 0 };
		struct pod_spec *p = NULL;
		int r = pod_spec_parse_string(cases[i].json, "test", &p, &err);

		if (!cases[i].error) {
			assert_int_equal(r, 0);
			assert_int_equal(p->volumes[0].spec->block,
					 strstr(cases[i].json, "\"Block\"") != NULL);
		} else {
			assert_int_equal(r, -EINVAL);
			if (!strstr(err_msg(&err), cases[i].error))
				fail_msg("case %zu: %s", i, err_msg(&err));
		}
		pod_spec_free(p);
	}
}

static void test_block_volume_dd_survives_remove_and_readd(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 16 << 20);
	char target[600], held[800], heldir[800], poddir[600];
	char *out = NULL;

	assert_non_null(dev);
	start_block_pod(f, "b.json", "pod-b", dev, false, target);
	held_dev(f, dev, held);
	assert_true(fixture_wait_mounted(target, WAIT_MS));
	assert_true(test_is_mountpoint(held));
	/* A file with the device bind-mounted onto it, in pod and node-wide. */
	assert_true(same_block_device(target, dev));
	assert_true(same_block_device(held, dev));
	assert_false(test_mount_is_ro(target));
	/* Never formatted: the device still carries no signature. */
	{
		const char *argv[] = { "blkid", "-p", dev, NULL };
		assert_int_not_equal(test_run_capture(argv, &out), 0);
		free(out);
		out = NULL;
	}

	dd_write(f, target, 'A');
	assert_true(test_direct_read_is(dev, 'A'));
	assert_true(test_direct_read_is(target, 'A'));

	/* The pod goes: its file and the held device go, the bytes stay on the device. */
	assert_int_equal(fixture_remove_pod(f, "b.json"), 0);
	assert_true(fixture_wait_unmounted(target, WAIT_MS));
	assert_true(fixture_wait_mount_count(f, 0, WAIT_MS));
	snprintf(poddir, sizeof(poddir), "%s/pods/pod-b", f->root);
	assert_true(test_wait_until(path_is_gone, poddir, WAIT_MS));
	snprintf(heldir, sizeof(heldir), "%s", held);
	*strrchr(heldir, '/') = '\0';
	assert_true(test_wait_until(path_is_gone, heldir, WAIT_MS));
	assert_true(test_direct_read_is(dev, 'A'));

	/* Back again: the same bytes through the pod's file. */
	assert_int_equal(write_block_pod(f, "b.json", "pod-b", dev, "Block", false), 0);
	assert_true(fixture_wait_mounted(target, WAIT_MS));
	assert_true(test_direct_read_is(target, 'A'));
	dd_write(f, target, 'B');
	assert_true(test_direct_read_is(dev, 'B'));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_read_only_block_volume(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 16 << 20);
	char target[600], rodev[32];

	assert_non_null(dev);
	/* readOnly: the bind is read-only (the mount table says so).  The kernel does not refuse
	 * writes to a device node on a read-only mount, so a writable device is bound through a
	 * read-only loop device over it (plugins/block-map.c): the pod reads the device's bytes
	 * and its writes are refused; the device itself stays writable. */
	dd_write(f, dev, 'R');
	start_block_pod(f, "r.json", "pod-r", dev, true, target);
	assert_true(fixture_wait_pod_state(f, target, "mounted", 1, WAIT_MS));
	assert_true(test_mount_is_ro(target));
	assert_true(test_direct_read_is(target, 'R'));
	assert_block_write_refused(target);
	dd_write(f, dev, 'S');
	assert_true(test_direct_read_is(dev, 'S'));

	/* Where the kernel enforces it (a read-only device: a loop made read-only with
	 * BLKROSET, as rbd maps read-only), a write through the pod's file is refused. */
	{
		const char *ro = fixture_add_loop(f, 16 << 20);
		int one = 1, dfd;
		assert_non_null(ro);
		snprintf(rodev, sizeof(rodev), "%s", ro);
		dfd = open(rodev, O_RDONLY | O_CLOEXEC);
		assert_true(dfd >= 0);
		assert_int_equal(ioctl(dfd, BLKROSET, &one), 0); /* undone by teardown_ro */
		close(dfd);
	}
	assert_int_equal(write_block_pod(f, "w.json", "pod-w", rodev, "Block", true), 0);
	pod_dev(f, "pod-w", "raw", target);
	assert_true(fixture_wait_mounted(target, WAIT_MS));
	/* The kernel refuses at open (EACCES, EROFS) or at write (EPERM, blkdev_write_iter). */
	assert_block_write_refused(target);
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* A readOnly pod and a read-write pod of one writable device, the reader first (so the node's
 * hold of the device is made read-only): the reader's file refuses writes, the writer's
 * writes reach the device. */
static void test_reader_and_writer_share_a_device(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 16 << 20);
	char tr[600], tw[600], sys[96];
	struct stat st, sd;

	assert_non_null(dev);
	start_block_pod(f, "r.json", "pod-r", dev, true, tr);
	assert_true(fixture_wait_pod_state(f, tr, "mounted", 1, WAIT_MS));
	assert_int_equal(write_block_pod(f, "w.json", "pod-w", dev, "Block", false), 0);
	pod_dev(f, "pod-w", "raw", tw);
	assert_true(fixture_wait_pod_state(f, tw, "mounted", 0, WAIT_MS));
	dd_write(f, tw, 'W');
	assert_true(test_direct_read_is(dev, 'W'));
	assert_true(test_direct_read_is(tr, 'W'));
	assert_block_write_refused(tr);
	assert_int_equal(stat(tr, &st), 0);
	assert_int_equal(stat(dev, &sd), 0);
	assert_true(st.st_rdev != sd.st_rdev); /* a read-only loop device over dev */
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/loop/backing_file", major(st.st_rdev),
		 minor(st.st_rdev));
	assert_int_equal(access(sys, F_OK), 0);

	/* Both go: no mount and no loop device of the agent's is left. */
	assert_int_equal(fixture_remove_pod(f, "r.json"), 0);
	assert_int_equal(fixture_remove_pod(f, "w.json"), 0);
	assert_true(fixture_wait_mount_count(f, 0, WAIT_MS));
	assert_true(test_wait_until(path_is_gone, tr, WAIT_MS));
	assert_true(test_wait_until(path_is_gone, sys, WAIT_MS));
	assert_true(test_direct_read_is(dev, 'W'));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_move_between_pods_unmaps_first(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 16 << 20);
	char ta[600], tb[600];
	long unmapped_a, mapped_b;

	assert_non_null(dev);
	start_block_pod(f, "app.json", "pod-a", dev, false, ta);
	pod_dev(f, "pod-b", "raw", tb);
	assert_true(fixture_wait_mounted(ta, WAIT_MS));
	dd_write(f, ta, 'M');

	/* One edit moves the volume from pod-a to pod-b. */
	assert_int_equal(write_block_pod(f, "app.json", "pod-b", dev, "Block", false), 0);
	assert_true(fixture_wait_mounted(tb, WAIT_MS));
	assert_true(test_wait_until(path_is_gone, ta, WAIT_MS));
	assert_true(test_direct_read_is(tb, 'M'));
	/* The log is written by the one reconciler thread in the order it learned of each
	 * result: pod-b's bind was started only after pod-a's was undone. */
	unmapped_a = fixture_log_find(f, "msg=\"volume unmounted\"",
				      "pod-a/volumeDevices/kubernetes.io~local/raw");
	mapped_b = fixture_log_find(f, "msg=\"volume mounted\"",
				    "pod-b/volumeDevices/kubernetes.io~local/raw");
	assert_true(unmapped_a >= 0);
	assert_true(mapped_b > unmapped_a);
	assert_true(fixture_wait_mount_count(f, 2, WAIT_MS)); /* held + pod-b */
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_block_and_filesystem_mixed_refused(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 16 << 20);
	char ta[600], fsdir[600];

	assert_non_null(dev);
	start_block_pod(f, "a.json", "pod-a", dev, false, ta);
	assert_true(fixture_wait_mounted(ta, WAIT_MS));
	assert_int_equal(write_block_pod(f, "b.json", "pod-b", dev, "Filesystem", false), 0);
	assert_true(fixture_wait_log(f, "already in use by another pod with different settings",
				     WAIT_MS));
	fixture_pod_dir(f, "pod-b", "raw", fsdir);
	assert_false(test_is_mountpoint(fsdir));
	/* Nothing of pod-a's was touched, and nothing was formatted. */
	assert_true(same_block_device(ta, dev));
	assert_true(fixture_wait_mount_count(f, 2, WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_device_with_filesystem_published_raw(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 32 << 20);
	char target[600], *out = NULL;

	assert_non_null(dev);
	assert_int_equal(test_mkfs("ext4", dev), 0);
	start_block_pod(f, "x.json", "pod-x", dev, false, target);
	assert_true(fixture_wait_mounted(target, WAIT_MS));
	/* Allowed, and logged; the filesystem is not touched (not mounted, not reformatted). */
	assert_true(fixture_wait_log(f, "raw block volume handed out with data on it", WAIT_MS));
	assert_true(fixture_wait_log(f, "content=ext4", WAIT_MS));
	assert_true(same_block_device(target, dev));
	{
		const char *argv[] = { "blkid", "-p", "-s", "TYPE", "-o", "value", target, NULL };
		assert_int_equal(test_run_capture(argv, &out), 0);
		assert_non_null(strstr(out, "ext4"));
		free(out);
	}
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

static void test_sigkill_restart_adopts(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 16 << 20);
	char target[600], held[800];
	int id_target, id_held;
	long off;

	assert_non_null(dev);
	start_block_pod(f, "k.json", "pod-k", dev, false, target);
	held_dev(f, dev, held);
	assert_true(fixture_wait_mounted(target, WAIT_MS));
	assert_true(fixture_wait_ready(f, NULL, WAIT_MS));
	dd_write(f, target, 'K');
	id_target = test_mount_id(target);
	id_held = test_mount_id(held);

	assert_int_equal(fixture_stop(f, SIGKILL), 128 + SIGKILL);
	off = fixture_log_size(f);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_ready(f, NULL, WAIT_MS));
	assert_true(fixture_wait_pod_state(f, target, "mounted", 0, WAIT_MS));
	/* Adopted, not re-mapped: the same mounts, the same bytes. */
	assert_int_equal(test_mount_id(target), id_target);
	assert_int_equal(test_mount_id(held), id_held);
	assert_int_equal(test_count_mounts_under(f->root), 2);
	assert_false(fixture_wait_log_after(f, off, "msg=\"volume mounted\"", 200));
	assert_true(test_direct_read_is(target, 'K'));

	/* And the restarted agent releases it as any other. */
	assert_int_equal(fixture_remove_pod(f, "k.json"), 0);
	assert_true(fixture_wait_mount_count(f, 0, WAIT_MS));
	assert_true(test_wait_until(path_is_gone, held, WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* --- CSI: the block access type, with the Python client (tests/csi/csi_client.py) --- */

static int csi_setup(void **state)
{
	*state = csi_env_new("blockcsi");
	return 0;
}

static void test_csi_block_stage_publish_stats_expand(void **state)
{
	struct csi_env *e = *state;
	const char *dev = fixture_add_loop(e->f, 32 << 20);
	char stg[700], t1[800], t2[800], held[800], img[700], ctx[200], calls[8192] = "";
	char *out;

	assert_non_null(dev);
	/* kubelet's layout for CSI block volumes: it makes the staging dir and the publish
	 * target's parent; the target file is the driver's to make. */
	snprintf(stg, sizeof(stg), "%s/plugins/kubernetes.io/csi/volumeDevices/staging/pv-raw",
		 e->kubelet);
	snprintf(t1, sizeof(t1), "%s/plugins/kubernetes.io/csi/volumeDevices/publish/pv-raw",
		 e->kubelet);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", stg, t1, NULL }), 0);
	strcat(t1, "/pod-a");
	snprintf(t2, sizeof(t2), "%s/pods/pod-b/volumes/kubernetes.io~csi/pv-raw/mount",
		 e->kubelet);
	assert_int_equal(test_run((const char *const[]){ "mkdir", "-p", t2, NULL }), 0);
	snprintf(held, sizeof(held), "%s/dev", stg);
	csi_local_ctx(dev, ctx);
	csi_env_start(e);

	csi_calls_stage(calls, sizeof(calls), "raw", stg, CSI_CAP_BLOCK, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), "raw", stg, t1, CSI_CAP_BLOCK, ctx, NULL);
	csi_calls_publish(calls, sizeof(calls), "raw", stg, t1, CSI_CAP_BLOCK, ctx, NULL);
	csi_calls_stats(calls, sizeof(calls), "raw", t1);
	csi_calls_publish(calls, sizeof(calls), "raw", stg, t2, CSI_CAP_MOUNT, ctx, NULL);
	csi_calls_stage(calls, sizeof(calls), "raw", stg, CSI_CAP_MOUNT, ctx, NULL);
	out = csi_env_call(e, calls);
	assert_line(out, 0, "OK {}");
	assert_line(out, 1, "OK {}");
	assert_line(out, 2, "OK {}"); /* a repeat */
	assert_line(out, 3, "\"total\": \"33554432\"");
	assert_line(out, 3, "\"unit\": \"BYTES\"");
	if (strstr(csi_line(out, 3), "INODES") || strstr(csi_line(out, 3), "\"used\""))
		fail_msg("block stats report only the total bytes: %s", csi_line(out, 3));
	/* Mixed access types on one volume: a mount publish of the block-staged volume, and a
	 * mount stage of it. */
	assert_line(out, 4, "ERR FAILED_PRECONDITION");
	assert_line(out, 4, "raw block");
	assert_line(out, 5, "ERR ALREADY_EXISTS");
	free(out);

	/* The target is a file with the device bound onto it; the device is held at a file in
	 * the staging dir, which is itself no mount.  Nothing was formatted or mounted. */
	assert_true(same_block_device(t1, dev));
	assert_true(same_block_device(held, dev));
	assert_true(test_is_mountpoint(t1));
	assert_true(test_is_mountpoint(held));
	assert_false(test_is_mountpoint(stg));
	assert_false(test_is_mountpoint(t2));
	dd_write(e->f, t1, 'C');
	assert_true(test_direct_read_is(dev, 'C'));

	/* SIGKILL and restart once the journal (saved a moment after each call) has the
	 * publish; kubelet stages and publishes again (as it does after a driver restart):
	 * both binds are adopted, not made again.  (Had the journal missed the publish, the
	 * repeat would find the bind in place and keep it, the same mount ID, but log it as
	 * set up: under a slow run that is what the log check below saw.) */
	{
		char journal[700];
		int id_t1, id_held;
		long off;

		snprintf(journal, sizeof(journal), "%s/journal.json", e->f->state);
		assert_true(test_wait_file_text(journal, t1, true, WAIT_MS));
		id_t1 = test_mount_id(t1);
		id_held = test_mount_id(held);

		assert_int_equal(fixture_stop(e->f, SIGKILL), 128 + SIGKILL);
		off = fixture_log_size(e->f);
		csi_env_start(e);
		calls[0] = '\0';
		csi_calls_stage(calls, sizeof(calls), "raw", stg, CSI_CAP_BLOCK, ctx, NULL);
		csi_calls_publish(calls, sizeof(calls), "raw", stg, t1, CSI_CAP_BLOCK, ctx, NULL);
		csi_env_call_ok(e, calls, 2);
		assert_true(fixture_wait_pod_state(e->f, t1, "mounted", 0, WAIT_MS));
		assert_int_equal(test_mount_id(t1), id_t1);
		assert_int_equal(test_mount_id(held), id_held);
		assert_false(fixture_wait_log_after(e->f, off, "msg=\"volume mounted\"", 200));
		assert_false(fixture_wait_log_after(e->f, off, "msg=\"device mounted\"", 10));
	}

	/* The loop's backing file grows: expand re-reads the device's size and reports it. */
	snprintf(img, sizeof(img), "%s/disk0.img", e->f->dir);
	assert_int_equal(truncate(img, 48 << 20), 0);
	snprintf(calls, sizeof(calls),
		 "Node/NodeExpandVolume {\"volume_id\": \"raw\", \"volume_path\": \"%s\", "
		 "\"capacity_range\": {\"required_bytes\": 50331648}}\n"
		 "Node/NodeGetVolumeStats {\"volume_id\": \"raw\", \"volume_path\": \"%s\"}\n"
		 "Node/NodeExpandVolume {\"volume_id\": \"raw\", \"volume_path\": \"%s\", "
		 "\"capacity_range\": {\"required_bytes\": 67108864}}\n",
		 t1, t1, t1);
	for (int i = 0; i < 2; i++) /* each twice: the second finds it gone, OK */
		csi_calls_unpublish(calls, sizeof(calls), "raw", t1);
	for (int i = 0; i < 2; i++)
		csi_calls_unstage(calls, sizeof(calls), "raw", stg);
	out = csi_env_call(e, calls);
	assert_line(out, 0, "\"capacity_bytes\": \"50331648\"");
	assert_line(out, 1, "\"total\": \"50331648\"");
	assert_line(out, 2, "ERR OUT_OF_RANGE");
	for (int i = 3; i < 7; i++)
		assert_line(out, i, "OK {}");
	free(out);
	/* Unpublish removed the bind and the file, unstage the held file; kubelet's dirs stay. */
	assert_true(path_is_gone(t1));
	assert_true(path_is_gone(held));
	assert_int_equal(access(stg, F_OK), 0);
	assert_int_equal(test_count_mounts_under(e->kubelet), 0);
	assert_true(test_direct_read_is(dev, 'C'));
	assert_int_equal(fixture_stop(e->f, SIGTERM), 0);
}

static void test_pod_deleted_while_down_is_released(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 16 << 20);
	char target[600], held[800], poddir[600];

	assert_non_null(dev);
	start_block_pod(f, "d.json", "pod-d", dev, false, target);
	held_dev(f, dev, held);
	assert_true(fixture_wait_mounted(target, WAIT_MS));
	assert_true(fixture_wait_ready(f, NULL, WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGKILL), 128 + SIGKILL);
	/* While the agent is down the pod goes: the restarted agent finds the pod's file in the
	 * mount table (volumeDevices/) and the hold in its journal, and releases both. */
	assert_int_equal(fixture_remove_pod(f, "d.json"), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_mount_count(f, 0, WAIT_MS));
	assert_true(test_wait_until(path_is_gone, target, WAIT_MS));
	assert_true(test_wait_until(path_is_gone, held, WAIT_MS));
	snprintf(poddir, sizeof(poddir), "%s/pods/pod-d", f->root);
	assert_true(test_wait_until(path_is_gone, poddir, WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

/* The journal lost while the agent was down: the held device is found in the mount table
 * (volumeDevices/<name>/dev), adopted without re-mapping while a pod wants it, and released
 * when none does. */
static void test_journal_lost_held_device_found(void **state)
{
	struct agent_fixture *f = *state;
	const char *dev = fixture_add_loop(f, 16 << 20);
	char target[600], held[800], journal[600];
	int id_target, id_held;

	assert_non_null(dev);
	snprintf(journal, sizeof(journal), "%s/journal.json", f->state);
	start_block_pod(f, "j.json", "pod-j", dev, false, target);
	held_dev(f, dev, held);
	assert_true(fixture_wait_mounted(target, WAIT_MS));
	assert_true(fixture_wait_ready(f, NULL, WAIT_MS));
	id_target = test_mount_id(target);
	id_held = test_mount_id(held);

	assert_int_equal(fixture_stop(f, SIGKILL), 128 + SIGKILL);
	assert_int_equal(unlink(journal), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(
		fixture_wait_log(f, "found a device mount the journal did not record", WAIT_MS));
	assert_true(fixture_wait_pod_state(f, target, "mounted", 0, WAIT_MS));
	assert_int_equal(test_mount_id(target), id_target);
	assert_int_equal(test_mount_id(held), id_held);
	assert_int_equal(test_count_mounts_under(f->root), 2);

	assert_int_equal(fixture_stop(f, SIGKILL), 128 + SIGKILL);
	assert_int_equal(unlink(journal), 0);
	assert_int_equal(fixture_remove_pod(f, "j.json"), 0);
	assert_int_equal(fixture_start(f, NULL), 0);
	assert_true(fixture_wait_mount_count(f, 0, WAIT_MS));
	assert_true(test_wait_until(path_is_gone, held, WAIT_MS));
	assert_true(test_wait_until(path_is_gone, target, WAIT_MS));
	assert_int_equal(fixture_stop(f, SIGTERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pod_spec_volume_mode),
		cmocka_unit_test_setup_teardown(test_block_volume_dd_survives_remove_and_readd,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only_block_volume, setup, teardown_ro),
		cmocka_unit_test_setup_teardown(test_reader_and_writer_share_a_device, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_move_between_pods_unmaps_first, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_block_and_filesystem_mixed_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_device_with_filesystem_published_raw, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sigkill_restart_adopts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pod_deleted_while_down_is_released, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_journal_lost_held_device_found, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_csi_block_stage_publish_stats_expand,
						csi_setup, csi_env_teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
