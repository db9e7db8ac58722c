/* test-nfs-plugin.c - the nfs plugin on the host, where no NFS server answers and this
 * kernel has no NFS client: spec validation and volume names, the reachability check (a
 * closed port fails in milliseconds), "unknown filesystem type" turned into a plain message,
 * masking of sensitive options in every error and in the agent's log, and the child runner's
 * deadline.  Nothing is left mounted.  The real mounts are tested in the VM
 * (tests/vm/test-nfs-plugin.sh).  Mounting cases run as root in a private mount namespace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "nfs-child.h"
#include "plugin-option.h"
#include "plugin.h"
#include "testlib.h"
#include "time-util.h"

#define WAIT_MS 15000

static const struct volume_plugin *nfs(void)
{
	const struct volume_plugin *p = plugin_find_by_name("nfs");

	assert_non_null(p);
	return p;
}

/* A spec from "key=value" pairs; "opt:X" adds mount option X, "ro" sets readOnly. */
static struct volume_spec *spec_of(const char *first, ...)
{
	struct volume_spec *s = volume_spec_new("nfs");
	va_list ap;

	va_start(ap, first);
	for (const char *kv = first; kv; kv = va_arg(ap, const char *)) {
		if (!strncmp(kv, "opt:", 4)) {
			assert_int_equal(volume_spec_add_mount_option(s, kv + 4), 0);
		} else if (!strcmp(kv, "ro")) {
			s->read_only = true;
		} else {
			char *k = strdup(kv), *eq = strchr(k, '=');
			*eq = '\0';
			assert_int_equal(volume_spec_set(s, k, eq + 1), 0);
			free(k);
		}
	}
	va_end(ap);
	return s;
}

static void expect_invalid(struct volume_spec *s, const char *msg)
{
	struct error_info err = { 0 };

	assert_int_equal(plugin_validate(nfs(), s, &err), -EINVAL);
	assert_string_equal(err_msg(&err), msg);
	volume_spec_unref(s);
}

static void expect_valid(struct volume_spec *s)
{
	struct error_info err = { 0 };
	int r = plugin_validate(nfs(), s, &err);

	if (r < 0)
		fail_msg("unexpectedly invalid: %s", err_msg(&err));
	volume_spec_unref(s);
}

static void test_validate(void **state)
{
	expect_valid(spec_of("server=10.0.2.2", "path=/export", NULL));
	expect_valid(spec_of("server=nfs.example.com", "path=/", "opt:vers=4.1", NULL));
	expect_valid(spec_of("server=fd00::1", "path=/x", NULL));
	expect_valid(spec_of("server=[fd00::1]", "path=/x", NULL));
	/* CSI's names, and kubelet's pod info keys. */
	expect_valid(spec_of("server=10.0.2.2", "share=/export", "mountOptions=vers=4.1,port=2049",
			     "csi.storage.k8s.io/pod.name=web-0", NULL));
	expect_valid(spec_of("server=h", "share=/a", "path=/a/", NULL));

	expect_invalid(spec_of("path=/export", NULL), "server: required");
	expect_invalid(spec_of("server=10.0.2.2", NULL), "path: required (CSI: share or path)");
	expect_invalid(spec_of("server=10.0.2.2", "path=export", NULL),
		       "path: must be an absolute path on the server");
	expect_invalid(spec_of("server=10.0.2.2", "share=/a/../b", NULL),
		       "share: \"/a/../b\" has a '.' or '..' component");
	expect_invalid(spec_of("server=h", "share=/a", "path=/b", NULL),
		       "share: differs from path; give one of them");
	expect_invalid(spec_of("server=-o", "path=/x", NULL),
		       "server: \"-o\" is not a host name or an IP address");
	expect_invalid(spec_of("server=a/b", "path=/x", NULL),
		       "server: \"a/b\" is not a host name or an IP address");
	expect_invalid(spec_of("server=[10.0.0.1]", "path=/x", NULL),
		       "server: \"[10.0.0.1]\" is not a bracketed IPv6 address");
	expect_invalid(spec_of("server=h", "path=/x", "fsType=ext4", NULL),
		       "fsType: unknown field (nfs takes server, path, readOnly; CSI: server, "
		       "share or path, mountOptions; and sensitiveMountOptions)");
	expect_invalid(spec_of("server=h", "path=/x", "opt:port=99999", NULL),
		       "mountOptions: port=99999 is not a port number");
	expect_invalid(spec_of("server=h", "path=/x", "mountOptions=a,,b", NULL),
		       "mountOptions: an empty option or a control character in the list");
	expect_invalid(spec_of("server=h", "path=/x", "opt:bind", NULL),
		       "mountOptions: \"bind\" is not an NFS mount option");
	expect_invalid(spec_of("server=h", "path=/x", "opt:password=a b", NULL),
		       "mountOptions: the option password=... holds a space or a control character");
}

static char *name_of(struct volume_spec *s)
{
	char *n = plugin_get_volume_name(nfs(), s);

	volume_spec_unref(s);
	assert_non_null(n);
	return n;
}

static void test_volume_names(void **state)
{
	char *a, *b, *c, *d;
	struct volume_spec *s = NULL;
	struct error_info err = { 0 };

	a = name_of(spec_of("server=10.0.2.2", "path=/export/", NULL));
	assert_string_equal(a, "nfs:10.0.2.2:/export");
	free(a);
	a = name_of(spec_of("server=[fd00::1]", "path=/x", NULL));
	assert_string_equal(a, "nfs:[fd00::1]:/x");
	free(a);

	/* The same options in another order (or from CSI's string) share a mount ... */
	a = name_of(spec_of("server=h", "path=/x", "opt:vers=4.1", "opt:port=2049", NULL));
	b = name_of(spec_of("server=h", "path=/x", "mountOptions=port=2049,vers=4.1", NULL));
	assert_string_equal(a, b);
	assert_true(!strncmp(a, "nfs:h:/x#", 9) && strlen(a) == 17);
	/* ... other options, or a read-only source, do not; secrets are not in the name. */
	c = name_of(spec_of("server=h", "path=/x", "opt:vers=4.2", "opt:port=2049", NULL));
	d = name_of(spec_of("server=h", "path=/x", "opt:vers=4.1", "opt:port=2049", "ro", NULL));
	assert_string_not_equal(a, c);
	assert_string_not_equal(a, d);
	free(a);
	free(b);
	free(c);
	free(d);
	a = name_of(spec_of("server=h", "path=/x", "opt:password=hunter2", NULL));
	assert_null(strstr(a, "hunter2"));
	free(a);

	/* A name without options turns back into its spec. */
	assert_int_equal(plugin_construct_spec(nfs(), "nfs:[fd00::1]:/x/y", "/m", &s, &err), 0);
	assert_string_equal(volume_spec_get(s, "server"), "fd00::1");
	assert_string_equal(volume_spec_get(s, "path"), "/x/y");
	s = volume_spec_unref(s);
	assert_int_equal(plugin_construct_spec(nfs(), "nfs:10.0.2.2:/export", "/m", &s, &err), 0);
	a = plugin_get_volume_name(nfs(), s);
	assert_string_equal(a, "nfs:10.0.2.2:/export");
	free(a);
	s = volume_spec_unref(s);
	assert_int_equal(plugin_construct_spec(nfs(), "nfs:h:/x#0badf00d", "/m", &s, &err),
			 -EINVAL);
	assert_int_equal(plugin_construct_spec(nfs(), "local:/x", "/m", &s, &err), -EINVAL);
}

static void test_modes(void **state)
{
	struct volume_spec *s = spec_of("server=h", "path=/x", NULL);
	struct error_info err = { 0 };

	assert_true(plugin_uses_device(nfs(), s)); /* shared is the default */
	assert_int_equal(plugin_option_set("nfs-mode", "direct", &err), 0);
	assert_false(plugin_uses_device(nfs(), s));
	assert_int_equal(plugin_option_set("nfs-mode", "sometimes", &err), -EINVAL);
	assert_string_equal(err_msg(&err), "nfs-mode: \"sometimes\" is not shared or direct");
	assert_false(plugin_uses_device(nfs(), s)); /* a bad value changes nothing */
	assert_int_equal(plugin_option_set("nfs-mode", "shared", &err), 0);
	assert_true(plugin_uses_device(nfs(), s));
	volume_spec_unref(s);
}

static int sleeper(void *arg, struct error_info *err)
{
	for (;;)
		pause();
	return 0;
}

static int failer(void *arg, struct error_info *err)
{
	fprintf(stderr, "helper says: %s\n", (const char *)arg);
	return err_set(err, -EACCES, "failed on purpose");
}

static void test_child_deadline(void **state)
{
	struct nfs_child c;
	struct error_info err = { 0 };
	uint64_t t0 = now_ms();

	/* A child that never finishes is killed at its deadline. */
	assert_int_equal(nfs_child_run(&c, sleeper, NULL, 200, &err), -ETIMEDOUT);
	assert_true(now_ms() - t0 < 2000);
	assert_int_equal(kill(c.proc.pid, 0), -1); /* gone and reaped */
	assert_int_equal(nfs_child_stuck_count(), 0);

	/* A failing child hands back its error and what it printed. */
	assert_int_equal(nfs_child_run(&c, failer, "the reason", 5000, &err), -EACCES);
	assert_string_equal(err_msg(&err), "failed on purpose");
	assert_string_equal(c.output, "helper says: the reason\n");
}

/* A TCP port on 127.0.0.1 that nothing listens on. */
static int closed_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* A listening socket (never accepting): the reachability check passes against it. */
static int listener(int *ret_port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*ret_port = ntohs(a.sin_port);
	return fd;
}

static bool kernel_has_nfs(void)
{
	char *fs = test_read_file("/proc/filesystems");
	bool has = fs && strstr(fs, "\tnfs\n");

	free(fs);
	return has;
}

struct target {
	char *dir;
	char path[600];
	int parent_fd;
};

static void target_new(struct target *t)
{
	t->dir = test_mkdtemp("nfs-target");
	snprintf(t->path, sizeof(t->path), "%s/mnt", t->dir);
	assert_int_equal(mkdir(t->path, 0755), 0);
	t->parent_fd = open(t->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(t->parent_fd >= 0);
}

static void target_free(struct target *t)
{
	close(t->parent_fd);
	assert_int_equal(test_count_mounts_under(t->dir), 0); /* nothing left behind */
	test_rm_rf(t->dir);
	free(t->dir);
}

static void test_unreachable_is_fast_and_clear(void **state)
{
	struct target t;
	struct error_info err = { 0 };
	char opt[32], want[128];
	struct volume_spec *s;
	struct volume_mounter *m;
	uint64_t t0;
	int port = closed_port();

	assert_int_equal(plugin_option_set("nfs-mode", "direct", &err), 0);
	assert_int_equal(plugin_option_set("nfs-connect-timeout", "500ms", &err), 0);
	target_new(&t);
	snprintf(opt, sizeof(opt), "opt:port=%d", port);
	s = spec_of("server=127.0.0.1", "path=/export", opt, "opt:password=hunter2", NULL);
	m = plugin_new_mounter(nfs(), s, "pod", false, NULL);
	t0 = now_ms();
	assert_int_equal(plugin_set_up_at(m,
					  &(struct mount_target){ .path = t.path,
								  .parent_fd = t.parent_fd,
								  .name = "mnt" },
					  &err),
			 -ECONNREFUSED);
	assert_true(now_ms() - t0 < 1000);
	snprintf(want, sizeof(want), "nfs server 127.0.0.1:%d is unreachable: Connection refused",
		 port);
	assert_string_equal(err_msg(&err), want);
	assert_false(test_is_mountpoint(t.path));
	/* Unmounting what is not mounted is done at once. */
	assert_int_equal(plugin_tear_down_at(nfs(), "v", "pod", t.path, &err), 0);
	plugin_free_mounter(m);
	volume_spec_unref(s);
	target_free(&t);
	assert_int_equal(plugin_options_reset(&err), 0);
}

static void test_no_nfs_in_kernel(void **state)
{
	struct target t;
	struct error_info err = { 0 };
	char opt[32];
	struct volume_spec *s;
	int port, lfd;

	if (kernel_has_nfs()) {
		fprintf(stderr, "SKIP: this kernel has an NFS client, so \"unknown filesystem "
				"type\" cannot happen here (the VM test covers real mounts)\n");
		skip();
	}
	lfd = listener(&port);
	target_new(&t);
	snprintf(opt, sizeof(opt), "opt:port=%d", port);
	s = spec_of("server=127.0.0.1", "path=/export", opt, "opt:vers=4.1", "opt:password=hunter2",
		    "opt:ticket=abc123", "sensitiveMountOptions=ticket", NULL);
	assert_int_equal(plugin_mount_device(nfs(), s, NULL, false,
					     &(struct mount_target){ .path = t.path,
								     .parent_fd = t.parent_fd,
								     .name = "mnt" },
					     &err),
			 -ENODEV);
	assert_string_equal(err_msg(&err),
			    "mount 127.0.0.1:/export: this kernel has no NFS client (unknown "
			    "filesystem type 'nfs'): load the nfs module or install the kernel's "
			    "NFS support");
	assert_false(test_is_mountpoint(t.path));
	assert_int_equal(plugin_unmount_device(nfs(), t.path, &err), 0);
	volume_spec_unref(s);
	target_free(&t);
	close(lfd);
}

static void test_health_of_local_paths(void **state)
{
	struct volume_spec *s = spec_of("server=h", "path=/x", NULL);
	struct error_info err = { 0 };
	char *dir = test_mkdtemp("nfs-health"), missing[600];

	assert_int_equal(plugin_check_health(nfs(), s, dir, &err), 0);
	snprintf(missing, sizeof(missing), "%s/missing", dir);
	assert_int_equal(plugin_check_health(nfs(), s, missing, &err), -ENOENT);
	test_rm_rf(dir);
	free(dir);
	volume_spec_unref(s);
}

/* The agent with an NFS volume whose mount fails: the log says why, plainly, and holds none
 * of the sensitive option values; the options it mounts with have nosuid and nodev unless the
 * volume asks suid and dev; nothing stays mounted. */
static int agent_setup(void **state)
{
	*state = fixture_new("nfs-agent");
	return 0;
}

static int agent_teardown(void **state)
{
	fixture_free(*state); /* stops the agent even when an assertion failed */
	return 0;
}

static void test_agent_logs_mask_secrets(void **state)
{
	struct agent_fixture *f = *state;
	char target[700], want_d[200], want_s[200], *log;
	int port, lfd = listener(&port);
	int closed = closed_port();

	assert_int_equal(
		fixture_write_podf(
			f, "a.json",
			"{\"pod\": {\"uid\": \"pa\"}, \"volumes\": ["
			"{\"name\": \"d\", \"nfs\": {\"server\": \"127.0.0.1\", \"path\": \"/export\","
			" \"sensitiveMountOptions\": [\"ticket\"]},"
			" \"mountOptions\": [\"port=%d\", \"password=hunter2\", \"ticket=abc123\","
			" \"sec=krb5p\"]},"
			"{\"name\": \"e\", \"nfs\": {\"server\": \"127.0.0.1\", \"path\": \"/export\"},"
			" \"mountOptions\": [\"port=%d\", \"secret=s3cr3t\"]},"
			"{\"name\": \"s\", \"nfs\": {\"server\": \"127.0.0.1\", \"path\": \"/suid\"},"
			" \"mountOptions\": [\"port=%d\", \"suid\", \"dev\"]}]}",
			port, closed, port),
		0);
	assert_int_equal(fixture_start(f, (const char *const[]){ "--nfs-mode", "direct",
								 "--nfs-connect-timeout", "300ms",
								 "--nfs-timeout", "2s",
								 "--log-level", "debug", NULL }),
			 0);
	assert_true(fixture_wait_log(f, "unreachable: Connection refused", WAIT_MS));
	if (!kernel_has_nfs())
		assert_true(fixture_wait_log(f, "this kernel has no NFS client", WAIT_MS));
	else
		assert_true(fixture_wait_log(f, "mount 127.0.0.1:/export", WAIT_MS));
	fixture_stop(f, SIGTERM);
	log = test_read_file(f->agent.log_path);
	assert_non_null(log);
	if (strstr(log, "hunter2") || strstr(log, "abc123") || strstr(log, "s3cr3t") ||
	    strstr(log, "krb5p")) {
		fprintf(stderr, "--- agent log ---\n%s", log);
		fail_msg("a sensitive mount option reached the log");
	}
	/* The options handed to libmount (and mount.nfs): nosuid and nodev added, unless the
	 * volume asks suid and dev (this kernel has no NFS client; the VM test checks the
	 * mount's flags). */
	snprintf(want_d, sizeof(want_d),
		 "options=\"port=%d,password=****,ticket=****,sec=****,nosuid,nodev\"", port);
	snprintf(want_s, sizeof(want_s), "options=\"port=%d,suid,dev\"", port);
	if (!strstr(log, want_d) || !strstr(log, want_s)) {
		fprintf(stderr, "--- agent log ---\n%s", log);
		fail_msg("the mount options are not %s and %s", want_d, want_s);
	}
	free(log);
	snprintf(target, sizeof(target), "%s/pods/pa/volumes/kubernetes.io~nfs/d", f->root);
	assert_false(test_is_mountpoint(target));
	assert_int_equal(test_count_mounts_under(f->dir), 0);
	close(lfd);
}

int main(void)
{
	const struct CMUnitTest unit[] = {
		cmocka_unit_test(test_validate),
		cmocka_unit_test(test_volume_names),
		cmocka_unit_test(test_modes),
		cmocka_unit_test(test_child_deadline),
	};
	const struct CMUnitTest mounting[] = {
		cmocka_unit_test(test_unreachable_is_fast_and_clear),
		cmocka_unit_test(test_no_nfs_in_kernel),
		cmocka_unit_test(test_health_of_local_paths),
		cmocka_unit_test_setup_teardown(test_agent_logs_mask_secrets, agent_setup,
						agent_teardown),
	};
	int r = cmocka_run_group_tests_name("nfs plugin", unit, NULL, NULL);

	test_enter_private_mountns(); /* exits 77 unless root */
	return r | cmocka_run_group_tests_name("nfs plugin mounts", mounting, NULL, NULL);
}
