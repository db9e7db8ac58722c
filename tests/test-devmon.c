/* test-devmon.c - the daemon's device monitor on real events: loop devices attached, changed
 * and re-attached in another order, first from the kernel's uevents (no udev daemon), then
 * from a real systemd-udevd started here in private /run/udev and /dev/disk mounts, when one
 * can be started. */
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "devmon.h"
#include "log.h"
#include "macro.h"
#include "test-devinv-images.h"

#define UDEVD "/lib/systemd/systemd-udevd"
#define WAIT_MS 10000

static struct {
	char *dir;
	char state[600], log[600];
	int saved_stderr;
} fx;

/* The agent's log lines go to a file the test can read. */
static void log_to_file(void)
{
	int fd = open(fx.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	fflush(stderr);
	fx.saved_stderr = dup(2);
	dup2(fd, 2);
	close(fd);
}

static void log_restore(void)
{
	fflush(stderr);
	dup2(fx.saved_stderr, 2);
	close(fx.saved_stderr);
}

static bool log_has(const char *text)
{
	char *log = test_read_file(fx.log);
	bool found = log && strstr(log, text);

	free(log);
	return found;
}

struct want {
	struct devmon *dm;
	const struct img *im;
	const char *name;  /* the kernel name it must have, or NULL */
	const char *field; /* a field that must be true, or NULL */
	const char *link;  /* a link that must be listed, or NULL */
};

/* The device of im in devices.json, or NULL. */
static json_t *json_device(json_t *root, const struct img *im)
{
	char real[PATH_MAX];
	json_t *d;
	size_t i;

	if (!realpath(im->file, real))
		return NULL;
	json_array_foreach(json_object_get(root, "blockdevices"), i, d)
	{
		const char *b = json_string_value(json_object_get(d, "back-file"));
		if (b && streq(b, real))
			return d;
	}
	return NULL;
}

static bool file_shows(void *arg)
{
	const struct want *w = arg;
	json_t *root, *d, *links, *l;
	struct pollfd p = { .fd = devmon_get_fd(w->dm), .events = POLLIN };
	bool ok;
	size_t i;

	if (poll(&p, 1, 0) > 0)
		assert_int_equal(devmon_dispatch(w->dm, NULL), 0);
	root = json_load_file(fx.state, 0, NULL);
	d = json_device(root, w->im);
	ok = d != NULL;
	if (ok && w->name)
		ok = streq(json_string_value(json_object_get(d, "name")), w->name);
	if (ok && w->field)
		ok = json_is_true(json_object_get(d, w->field));
	if (ok && w->link) {
		ok = false;
		links = json_object_get(d, "links");
		json_array_foreach(links, i, l) ok = ok || streq(json_string_value(l), w->link);
	}
	json_decref(root);
	return ok;
}

static int setup(void **state)
{
	fx.dir = test_mkdtemp("devmon");
	snprintf(fx.state, sizeof(fx.state), "%s/state/devices.json", fx.dir);
	snprintf(fx.log, sizeof(fx.log), "%s/agent.log", fx.dir);
	log_init_from_env();
	log_set_level(LOG_LVL_INFO);
	return 0;
}

static int teardown(void **state)
{
	return test_cleanup_loops_and_dir(fx.dir);
}

static char *state_dir(void)
{
	return strdup_printf("%s/state", fx.dir);
}

static void test_kernel_events(void **state)
{
	_cleanup_free_ char *dir = state_dir();
	struct error_info err = { 0 };
	struct img ext4, xfs;
	struct devmon *dm;
	struct want w;
	struct stat before, after;
	char old_ext4[32], old_xfs[32], line[256], ext4_uuid[37];
	bool swapped;

	if (access("/run/udev/control", F_OK) == 0) {
		fprintf(stderr, "skipped: a udev daemon runs here, so the monitor listens to it; "
				"test_udevd_events covers that\n");
		skip();
	}
	/* Random, so another run of this test on the host makes no duplicate id (those are not
	 * reported as renames). */
	img_random_uuid(ext4_uuid);
	assert_int_equal(img_make(&ext4, fx.dir, "ext4.img", IMG_SIZE), 0);
	assert_int_equal(img_ext4_uuid(&ext4, ext4_uuid), 0);
	assert_int_equal(img_make(&xfs, fx.dir, "xfs.img", XFS_IMG_SIZE), 0);
	assert_int_equal(img_xfs(&xfs), 0);

	log_to_file();
	dm = devmon_new(dir, &err);
	if (!dm) {
		log_restore();
		fail_msg("devmon_new: %s", err_msg(&err));
	}
	assert_string_equal(devmon_get_source(dm), "kernel");
	/* Written at start, before any event. */
	assert_int_equal(access(fx.state, F_OK), 0);

	/* Attaching makes a uevent; the file follows. */
	assert_int_equal(img_attach(&ext4, false), 0);
	assert_int_equal(img_attach(&xfs, false), 0);
	w = (struct want){ .dm = dm, .im = &ext4, .name = img_name(&ext4) };
	assert_true(test_wait_until(file_shows, &w, WAIT_MS));
	w = (struct want){ .dm = dm, .im = &xfs, .name = img_name(&xfs) };
	assert_true(test_wait_until(file_shows, &w, WAIT_MS));
	assert_non_null(devinv_find(devmon_get_inventory(dm), ext4.dev));

	/* An event that changes nothing leaves the file alone. */
	assert_int_equal(stat(fx.state, &before), 0);
	{
		char path[128];
		snprintf(path, sizeof(path), "/sys/class/block/%s/uevent", img_name(&ext4));
		assert_int_equal(test_write_file(path, "change"), 0);
	}
	{
		struct pollfd p = { .fd = devmon_get_fd(dm), .events = POLLIN };
		assert_int_equal(poll(&p, 1, WAIT_MS), 1);
		assert_int_equal(devmon_dispatch(dm, &err), 0);
	}
	assert_int_equal(stat(fx.state, &after), 0);
	assert_true(before.st_ino == after.st_ino);
	assert_int_equal(devmon_dispatch(dm, &err), 0); /* nothing pending: no-op */

	/* The images change names: each rename is logged with both names. */
	snprintf(old_ext4, sizeof(old_ext4), "%s", img_name(&ext4));
	snprintf(old_xfs, sizeof(old_xfs), "%s", img_name(&xfs));
	swapped = img_swap(&ext4, &xfs, false, fx.dir);
	w = (struct want){ .dm = dm, .im = &ext4, .name = img_name(&ext4) };
	assert_true(test_wait_until(file_shows, &w, WAIT_MS));
	w = (struct want){ .dm = dm, .im = &xfs, .name = img_name(&xfs) };
	assert_true(test_wait_until(file_shows, &w, WAIT_MS));
	log_restore();
	fprintf(stderr, "ext4 %s -> %s, xfs %s -> %s%s\n", old_ext4, img_name(&ext4), old_xfs,
		img_name(&xfs), swapped ? "" : " (not an exact swap)");
	if (!streq(old_ext4, img_name(&ext4))) {
		snprintf(line, sizeof(line),
			 "msg=\"device renamed\" stable_id=fs-uuid:%s old_name=%s new_name=%s",
			 ext4_uuid, old_ext4, img_name(&ext4));
		if (!log_has(line))
			fail_msg("the log lacks: %s\nlog:\n%s", line, test_read_file(fx.log));
	}
	/* Atomic replacement leaves no temp file behind. */
	{
		_cleanup_free_ char *tmp = strdup_printf("%s/.devices.json.tmp", dir);
		assert_int_equal(access(tmp, F_OK), -1);
	}
	/* Removing a device takes it out of the file. */
	img_detach(&xfs);
	{
		bool gone = false;
		for (int i = 0; i < WAIT_MS / 10 && !gone; i++) {
			json_t *root;
			struct pollfd p = { .fd = devmon_get_fd(dm), .events = POLLIN };

			if (poll(&p, 1, 10) > 0)
				assert_int_equal(devmon_dispatch(dm, &err), 0);
			root = json_load_file(fx.state, 0, NULL);
			gone = root && !json_device(root, &xfs);
			json_decref(root);
		}
		assert_true(gone);
	}
	devmon_free(dm);
	img_detach(&ext4);
}

/* ---- with a real udev daemon ---- */

struct udevd {
	pid_t pid;
	char made[4][32]; /* directories this test created in the shared /run and /dev */
	int n_made;
	char mounted[4][32];
	int n_mounted;
};

/* A private, empty directory at path for this mount namespace only. */
static int private_dir(struct udevd *u, const char *path)
{
	if (mkdir(path, 0755) == 0)
		snprintf(u->made[u->n_made++], sizeof(u->made[0]), "%s", path);
	else if (errno != EEXIST)
		return -errno;
	if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755") < 0)
		return -errno;
	snprintf(u->mounted[u->n_mounted++], sizeof(u->mounted[0]), "%s", path);
	return 0;
}

static void udevd_stop(struct udevd *u)
{
	int status;

	if (u->pid > 0) {
		kill(u->pid, SIGTERM);
		while (waitpid(u->pid, &status, 0) < 0 && errno == EINTR)
			;
		u->pid = 0;
	}
	while (u->n_mounted > 0)
		umount2(u->mounted[--u->n_mounted], MNT_DETACH);
	while (u->n_made > 0)
		rmdir(u->made[--u->n_made]);
}

static bool udevd_ready(void *arg)
{
	return access("/run/udev/control", F_OK) == 0;
}

/* Starts systemd-udevd with /run/udev and the /dev directories it fills private to this test,
 * so that nothing it writes is seen outside.  Returns NULL and says why when it cannot. */
static const char *udevd_start(struct udevd *u, const char *log_path)
{
	static char why[300];
	static const char *const dirs[] = { "/run/udev", "/dev/disk", "/dev/block", "/dev/char" };
	int r;

	if (access(UDEVD, X_OK) != 0)
		return UDEVD " is not installed (Debian package udev)";
	if (access("/run/udev/control", F_OK) == 0)
		return "a udev daemon already runs on this host";
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		r = private_dir(u, dirs[i]);
		if (r < 0) {
			snprintf(why, sizeof(why), "cannot mount a private %s: %s", dirs[i],
				 strerror(-r));
			return why;
		}
	}
	u->pid = fork();
	if (u->pid < 0)
		return "fork failed";
	if (u->pid == 0) {
		int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(UDEVD, UDEVD, "--debug", (char *)NULL);
		_exit(127);
	}
	if (!test_wait_until(udevd_ready, NULL, WAIT_MS)) {
		snprintf(why, sizeof(why), "systemd-udevd did not create /run/udev/control; see %s",
			 log_path);
		return why;
	}
	return NULL;
}

static void test_udevd_events(void **state)
{
	_cleanup_free_ char *dir = state_dir(), *udev_log = NULL, *by_uuid = NULL;
	struct error_info err = { 0 };
	struct udevd u = { 0 };
	struct img ext4;
	struct devmon *dm;
	struct want w;
	const char *why;
	char uuid[37];

	udev_log = strdup_printf("%s/udevd.log", fx.dir);
	why = udevd_start(&u, udev_log);
	if (why) {
		udevd_stop(&u);
		fprintf(stderr, "skipped: cannot start a udev daemon here: %s\n", why);
		skip();
	}
	img_random_uuid(uuid);
	assert_int_equal(img_make(&ext4, fx.dir, "ext4-udev.img", IMG_SIZE), 0);
	assert_int_equal(img_ext4_uuid(&ext4, uuid), 0);
	dm = devmon_new(dir, &err);
	if (!dm) {
		udevd_stop(&u);
		fail_msg("devmon_new: %s", err_msg(&err));
	}
	assert_string_equal(devmon_get_source(dm), "udev");

	/* The attach event reaches the monitor only after udev processed it, with its links. */
	assert_int_equal(img_attach(&ext4, false), 0);
	by_uuid = strdup_printf("/dev/disk/by-uuid/%s", uuid);
	w = (struct want){
		.dm = dm, .im = &ext4, .name = img_name(&ext4), .field = "udev", .link = by_uuid
	};
	if (!test_wait_until(file_shows, &w, WAIT_MS)) {
		char *log = test_read_file(udev_log);
		devmon_free(dm);
		udevd_stop(&u);
		fail_msg("devices.json never showed %s with udev's data; udevd log tail:\n%s",
			 ext4.dev, log ? log + (strlen(log) > 3000 ? strlen(log) - 3000 : 0) : "");
	}
	assert_true(devmon_get_inventory(dm)->udev_db);
	devmon_free(dm);
	img_detach(&ext4);
	udevd_stop(&u);
	assert_int_equal(access("/run/udev/control", F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_kernel_events, setup, teardown),
		cmocka_unit_test_setup_teardown(test_udevd_events, setup, teardown),
	};

	test_enter_private_mountns();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
