/* test-rbd-plugin.c - the rbd plugin's ops called directly against a real cluster: spec
 * validation; attach with the krbd -> nbd -> fuse fallback (this kernel refuses krbd and nbd,
 * and the refusal must be reported); format, mount, write, unmount, detach and the watcher
 * gone; the single-writer guard; errors for a bad pool, image, key and an unreachable cluster
 * with nothing left behind; the CSI key in secrets never written anywhere lasting; the health
 * check and a second attach after kill -9 of rbd-fuse; the mount carries _netdev, kept from
 * the kernel and recorded in utab, as libmount's merged mount table shows, and gone from utab
 * once unmounted.  Run by tests/rbd/run.sh; root, private mount namespace (its own utab). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "plugin-option.h"
#include "plugin.h"
#include "rbd-cluster.h"
#include "rbd/rbd-testlib.h"
#include "testlib.h"

extern const struct volume_plugin rbd_plugin;

struct ctx {
	char *dir;
	char run_dir[512];
	char secret_dir[512]; /* key files: <dir>/secrets */
	char mnt[512];
	char keyfile[512];
	char image[64];
};

static int image_seq;

static void set_methods(struct ctx *c, const char *methods, uint64_t timeout_ms)
{
	struct error_info err = { 0 };
	char timeout[32];

	snprintf(timeout, sizeof(timeout), "%llums", (unsigned long long)timeout_ms);
	assert_int_equal(plugin_option_set("rbd-attach-methods", methods, &err), 0);
	assert_int_equal(plugin_option_set("rbd-timeout", timeout, &err), 0);
	plugin_set_state_dir(c->dir); /* records under <dir>/rbd */
	plugin_set_secret_dir(c->secret_dir);
}

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	c->dir = test_mkdtemp("rbdp");
	snprintf(c->run_dir, sizeof(c->run_dir), "%s/rbd", c->dir);
	snprintf(c->secret_dir, sizeof(c->secret_dir), "%s/secrets", c->dir);
	snprintf(c->mnt, sizeof(c->mnt), "%s/mnt", c->dir);
	snprintf(c->keyfile, sizeof(c->keyfile), "%s/admin.key", c->dir);
	mkdir(c->mnt, 0755);
	test_write_file(c->keyfile, rt.key);
	chmod(c->keyfile, 0600);
	snprintf(c->image, sizeof(c->image), "plug%d-%d", (int)getpid(), image_seq++);
	assert_int_equal(rt_create_image(c->image, 64), 0);
	set_methods(c, "fuse", 20000);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;

	umount2(c->mnt, MNT_DETACH);
	/* Whatever a failed test left: rbd-fuse processes and their loops. */
	rt_fuse_kill(c->run_dir, SIGKILL);
	test_rm_rf(c->dir);
	free(c->dir);
	free(c);
	return 0;
}

static struct volume_spec *spec_new(const struct ctx *c, const char *image)
{
	struct volume_spec *s = volume_spec_new("rbd");

	volume_spec_set(s, "monitors", rt.mon);
	volume_spec_set(s, "pool", rt.pool);
	volume_spec_set(s, "image", image ? image : c->image);
	volume_spec_set(s, "secretFile", c->keyfile);
	return s;
}

static int mount_dev(const struct ctx *c, struct volume_spec *s, const char *dev, bool ro,
		     struct error_info *err)
{
	int parent = open(c->dir, O_PATH | O_DIRECTORY | O_CLOEXEC), r;

	r = plugin_mount_device(&rbd_plugin, s, dev, ro,
				&(struct mount_target){
					.path = c->mnt, .parent_fd = parent, .name = "mnt" },
				err);
	close(parent);
	return r;
}

/* The options of the mount at target as libmount merges them from mountinfo and utab:
 * *ret_user gets its userspace options (utab), *ret_fs the kernel's ("" and NULL when not
 * mounted); callers free both. */
static void merged_options(const char *target, char **ret_user, char **ret_vfs)
{
	struct libmnt_table *tb = mnt_new_table();
	struct libmnt_fs *fs;

	assert_non_null(tb);
	assert_int_equal(mnt_table_parse_mtab(tb, NULL), 0);
	fs = mnt_table_find_target(tb, target, MNT_ITER_BACKWARD);
	*ret_user = strdup(fs && mnt_fs_get_user_options(fs) ? mnt_fs_get_user_options(fs) : "");
	*ret_vfs = fs ? strdup(mnt_fs_get_options(fs)) : NULL;
	mnt_unref_table(tb);
}

static void test_validate(void **state)
{
	struct ctx *c = *state;
	struct error_info err = { 0 };
	struct volume_spec *s = spec_new(c, NULL);

	assert_int_equal(plugin_validate(&rbd_plugin, s, &err), 0);
	volume_spec_set(s, "fsType", "zfs");
	assert_int_equal(plugin_validate(&rbd_plugin, s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "fsType: \"zfs\" is not supported"));
	volume_spec_unref(s);

	s = volume_spec_new("rbd");
	volume_spec_set(s, "image", "x");
	assert_int_equal(plugin_validate(&rbd_plugin, s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "monitors: required"));
	volume_spec_set(s, "monitors", rt.mon);
	volume_spec_set(s, "secretRef.name", "ceph-secret");
	assert_int_equal(plugin_validate(&rbd_plugin, s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "secretRef.name: not supported"));
	volume_spec_unref(s);

	s = volume_spec_new("rbd");
	volume_spec_set(s, "monitors", rt.mon);
	volume_spec_set(s, "image", "a/b");
	assert_int_equal(plugin_validate(&rbd_plugin, s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "image:"));
	volume_spec_set(s, "image", "img");
	{
		char *name = plugin_get_volume_name(&rbd_plugin, s);
		assert_string_equal(name, "rbd:rbd/img"); /* pool defaults to rbd */
		free(name);
	}
	volume_spec_unref(s);
}

/* krbd and nbd are refused by this kernel: each refusal is named, and fuse is taken. */
static void test_fallback_to_fuse(void **state)
{
	struct ctx *c = *state;
	struct error_info err = { 0 };
	struct device_attachment att = { 0 };
	struct volume_spec *s = spec_new(c, NULL);
	const char *skipped;

	set_methods(c, "krbd", 20000);
	assert_true(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err) < 0);
	print_message("krbd only: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "krbd: rbd map exited with"));
	assert_non_null(strstr(err.msg, "rbd kernel module"));
	rt_assert_nothing_left(c->run_dir);

	set_methods(c, "krbd,nbd", 20000);
	err_clear(&err);
	assert_true(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err) < 0);
	print_message("krbd,nbd: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "krbd: "));
	assert_non_null(strstr(err.msg, "nbd: rbd-nbd map exited with"));
	rt_assert_nothing_left(c->run_dir);
	assert_int_equal(rt_watchers(c->image), 0);

	set_methods(c, "krbd,nbd,fuse", 20000);
	err_clear(&err);
	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), 0);
	assert_string_equal(device_attachment_get_meta(&att, "method"), "fuse");
	assert_true(startswith(att.device_path, "/dev/loop"));
	skipped = device_attachment_get_meta(&att, "skipped");
	assert_non_null(skipped);
	assert_non_null(strstr(skipped, "krbd: "));
	assert_non_null(strstr(skipped, "nbd: "));
	assert_non_null(device_attachment_get_meta(&att, "client"));
	assert_int_equal(rt_watchers(c->image), 1);
	assert_int_equal(plugin_detach(&rbd_plugin, s, &att, &err), 0);
	assert_true(rt_wait_no_watchers(c->image, 10000));
	rt_assert_nothing_left(c->run_dir);
	device_attachment_clear(&att);
	volume_spec_unref(s);
}

static void test_attach_format_mount_detach(void **state)
{
	struct ctx *c = *state;
	struct error_info err = { 0 };
	struct device_attachment att = { 0 };
	struct volume_spec *s = spec_new(c, NULL);
	char path[600], *back;
	int pids[4];

	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), 0);
	assert_int_equal(rt_fuse_pids(c->run_dir, pids, 4), 1);
	assert_int_equal(mount_dev(c, s, att.device_path, false, &err), 0);
	assert_true(test_is_mountpoint(c->mnt));
	/* _netdev: a userspace option in utab (systemd unmounts it before the network goes),
	 * never given to the kernel (ext4 would refuse it). */
	{
		char *user, *all;
		merged_options(c->mnt, &user, &all);
		print_message("options of %s: %s (userspace: %s)\n", c->mnt, all, user);
		assert_non_null(strstr(user, "_netdev"));
		free(user);
		free(all);
		user = test_utab_options(c->mnt);
		assert_non_null(user);
		assert_non_null(strstr(user, "_netdev"));
		free(user);
	}
	snprintf(path, sizeof(path), "%s/hello", c->mnt);
	assert_int_equal(test_write_file(path, "written through rbd-fuse\n"), 0);
	assert_int_equal(plugin_check_health(&rbd_plugin, s, c->mnt, &err), 0);
	assert_int_equal(plugin_unmount_device(&rbd_plugin, c->mnt, &err), 0);
	/* utab forgot it: no entry for the target is left to a later mount. */
	assert_null(test_utab_options(c->mnt));
	assert_int_equal(plugin_detach(&rbd_plugin, s, &att, &err), 0);
	device_attachment_clear(&att);
	assert_true(rt_wait_no_watchers(c->image, 10000));
	rt_assert_nothing_left(c->run_dir);

	/* Again: the filesystem is found (not formatted twice) and the file is there. */
	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), 0);
	assert_int_equal(mount_dev(c, s, att.device_path, false, &err), 0);
	back = test_read_file(path);
	assert_non_null(back);
	assert_string_equal(back, "written through rbd-fuse\n");
	free(back);
	/* mount_device is idempotent. */
	assert_int_equal(mount_dev(c, s, att.device_path, false, &err), 0);
	assert_int_equal(plugin_unmount_device(&rbd_plugin, c->mnt, &err), 0);
	assert_int_equal(plugin_unmount_device(&rbd_plugin, c->mnt, &err), 0);
	assert_int_equal(plugin_detach(&rbd_plugin, s, &att, &err), 0);
	assert_int_equal(plugin_detach(&rbd_plugin, s, &att, &err), 0); /* idempotent */
	device_attachment_clear(&att);
	rt_assert_nothing_left(c->run_dir);
	volume_spec_unref(s);
}

static void test_second_writer_refused(void **state)
{
	struct ctx *c = *state;
	struct error_info err = { 0 };
	struct device_attachment att = { 0 };
	struct volume_spec *s = spec_new(c, NULL), *ro;
	rbd_image_t other = rt_hold(c->image);

	assert_non_null(other);
	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), -EBUSY);
	print_message("%s\n", err.msg);
	assert_non_null(strstr(err.msg, "is in use by client."));
	assert_non_null(strstr(err.msg, c->image));
	rt_assert_nothing_left(c->run_dir);

	/* Read-only attaches may share the image. */
	ro = spec_new(c, NULL);
	ro->read_only = true;
	err_clear(&err);
	assert_int_equal(plugin_attach(&rbd_plugin, ro, ro->read_only, &att, &err), 0);
	assert_int_equal(plugin_detach(&rbd_plugin, ro, &att, &err), 0);
	device_attachment_clear(&att);
	volume_spec_unref(ro);
	/* So may a read-write source that every pod mounts read-only (the core says so). */
	err_clear(&err);
	assert_int_equal(plugin_attach(&rbd_plugin, s, true, &att, &err), 0);
	assert_int_equal(plugin_detach(&rbd_plugin, s, &att, &err), 0);
	device_attachment_clear(&att);

	/* Once the other client is gone, the read-write attach goes through. */
	rbd_close(other);
	err_clear(&err);
	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), 0);
	assert_int_equal(plugin_detach(&rbd_plugin, s, &att, &err), 0);
	device_attachment_clear(&att);
	rt_assert_nothing_left(c->run_dir);
	volume_spec_unref(s);
}

static void test_user_errors(void **state)
{
	struct ctx *c = *state;
	struct error_info err = { 0 };
	struct device_attachment att = { 0 };
	struct volume_spec *s;

	set_methods(c, "krbd,nbd,fuse", 3000);
	s = spec_new(c, NULL);
	volume_spec_set(s, "pool", "nosuchpool");
	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), -ENOENT);
	print_message("bad pool: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "pool \"nosuchpool\" does not exist"));
	volume_spec_unref(s);

	s = spec_new(c, "nosuchimage");
	err_clear(&err);
	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), -ENOENT);
	print_message("bad image: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "image \"nosuchimage\" does not exist in pool"));
	volume_spec_unref(s);

	/* A wrong key from CSI secrets: refused, and the key is in no message. */
	s = spec_new(c, NULL);
	volume_spec_set_secret(s, "userKey", "AQDMqQJpAAAAABAAp8fWrKGJbfnUvvJmP0eG2w==");
	err_clear(&err);
	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), -EACCES);
	print_message("bad key: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "authentication as client.admin"));
	assert_null(strstr(err.msg, "AQDMqQJp"));
	volume_spec_unref(s);

	/* A keyring file that does not exist. */
	s = spec_new(c, NULL);
	volume_spec_set(s, "secretFile", "/nonexistent/key");
	err_clear(&err);
	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), -ENOENT);
	print_message("missing key file: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "secretFile /nonexistent/key: No such file"));
	volume_spec_unref(s);

	/* Nobody listening: a timeout, not a hang. */
	s = spec_new(c, NULL);
	volume_spec_set(s, "monitors", "127.0.0.1:9");
	err_clear(&err);
	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), -ETIMEDOUT);
	print_message("unreachable: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "cluster unreachable"));
	volume_spec_unref(s);
	rt_assert_nothing_left(c->run_dir);
	assert_int_equal(rt_watchers(c->image), 0);
}

/* The CSI path's key: passed in memory to librados, and to rbd-fuse through a 0600 file that
 * is gone once rbd-fuse has connected. */
static void test_key_from_secrets(void **state)
{
	struct ctx *c = *state;
	struct error_info err = { 0 };
	struct device_attachment att = { 0 };
	struct volume_spec *s = volume_spec_new("rbd");
	char cmd[700];
	int pids[2];

	volume_spec_set(s, "monitors", rt.mon);
	volume_spec_set(s, "image", c->image);
	volume_spec_set_secret(s, "userKey", rt.key);
	volume_spec_set_secret(s, "userID", "admin");
	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), 0);
	/* No key file is left (none was ever in the run dir, and the secret dir is empty again),
	 * and rbd-fuse's command line holds no key. */
	for (int i = 0; i < 2; i++) {
		DIR *d = opendir(i ? c->secret_dir : c->run_dir);
		struct dirent *de;
		assert_non_null(d);
		while ((de = readdir(d)))
			assert_true(i ? de->d_name[0] == '.' : !startswith(de->d_name, "key."));
		closedir(d);
	}
	assert_int_equal(rt_fuse_pids(c->run_dir, pids, 2), 1);
	snprintf(cmd, sizeof(cmd), "/proc/%d/cmdline", pids[0]);
	{
		FILE *f = fopen(cmd, "r");
		char buf[4096] = "";
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		for (size_t i = 0; i < n; i++)
			if (!buf[i])
				buf[i] = ' ';
		assert_null(strstr(buf, rt.key));
	}
	for (size_t i = 0; i < att.n_meta; i++)
		assert_null(strstr(att.meta[i].value, rt.key));
	assert_int_equal(plugin_detach(&rbd_plugin, s, &att, &err), 0);
	device_attachment_clear(&att);
	rt_assert_nothing_left(c->run_dir);
	volume_spec_unref(s);
}

/* kill -9 of rbd-fuse: the health check says so, detach copes with the dead helper, and the
 * image attaches again at once (our dead client is fenced) with the synced data intact. */
static void test_dead_fuse(void **state)
{
	struct ctx *c = *state;
	struct error_info err = { 0 };
	struct device_attachment att = { 0 };
	struct volume_spec *s = spec_new(c, NULL);
	char path[600], *back;
	int pids[2], fd;

	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), 0);
	assert_int_equal(mount_dev(c, s, att.device_path, false, &err), 0);
	snprintf(path, sizeof(path), "%s/data", c->mnt);
	assert_int_equal(test_write_file(path, "synced before the crash\n"), 0);
	fd = open(path, O_RDONLY);
	assert_int_equal(syncfs(fd), 0);
	close(fd);
	assert_int_equal(rt_fuse_pids(c->run_dir, pids, 2), 1);
	assert_int_equal(kill(pids[0], SIGKILL), 0);
	usleep(200 * 1000);
	err_clear(&err);
	assert_int_equal(plugin_check_health(&rbd_plugin, s, c->mnt, &err), -ENOTCONN);
	print_message("health: %s\n", err.msg);
	assert_non_null(strstr(err.msg, "rbd-fuse"));
	assert_int_equal(plugin_unmount_device(&rbd_plugin, c->mnt, &err), 0);
	assert_int_equal(plugin_detach(&rbd_plugin, s, &att, &err), 0);
	device_attachment_clear(&att);
	rt_assert_nothing_left(c->run_dir);

	err_clear(&err);
	assert_int_equal(plugin_attach(&rbd_plugin, s, s->read_only, &att, &err), 0);
	assert_int_equal(mount_dev(c, s, att.device_path, false, &err), 0);
	back = test_read_file(path);
	assert_non_null(back);
	assert_string_equal(back, "synced before the crash\n");
	free(back);
	assert_int_equal(plugin_unmount_device(&rbd_plugin, c->mnt, &err), 0);
	assert_int_equal(plugin_detach(&rbd_plugin, s, &att, &err), 0);
	device_attachment_clear(&att);
	assert_true(rt_wait_no_watchers(c->image, 40000));
	rt_assert_nothing_left(c->run_dir);
	volume_spec_unref(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_validate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fallback_to_fuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_attach_format_mount_detach, setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_writer_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_user_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_from_secrets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dead_fuse, setup, teardown),
	};

	rt_init();
	/* The plugin's Ceph calls run in `volagent rbd-helper`. */
	rbd_cluster_set_helper(test_volagent_bin());
	test_enter_private_mountns();
	return cmocka_run_group_tests_name("rbd plugin", tests, NULL, NULL);
}
