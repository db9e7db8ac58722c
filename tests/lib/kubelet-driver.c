/* kubelet-driver.c - the kubelet-faithful driver (tests/kubelet/lifecycle.py) run from the C
 * tests; see kubelet-driver.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "kubelet-driver.h"
#include "testlib.h"

void kubelet_driver_start_agent(struct csi_env *e)
{
	long off = fixture_log_size(e->f);

	assert_int_equal(fixture_start(e->f, (const char *const[]){ "--csi", "--kubelet-root-dir",
								    e->kubelet,
								    "--device-inventory", "false",
								    "--node-id", "node-a", NULL }),
			 0);
	assert_true(test_wait_until(csi_socket_exists, e->sock, 10000));
	assert_true(fixture_wait_log_after(e->f, off, "startup reconstruction complete", 10000));
}

void kubelet_driver_run(struct csi_env *e, const char *label, const char *pv_json,
			const char *bad_pv_json)
{
	kubelet_driver_run_args(e, label, pv_json, bad_pv_json, NULL);
}

void kubelet_driver_run_args(struct csi_env *e, const char *label, const char *pv_json,
			     const char *bad_pv_json, const char *const extra[])
{
	char host[256] = "", host_label[300], *out = NULL, *err = NULL;
	const char *argv[32] = { "/usr/bin/python3",
				 "tests/kubelet/lifecycle.py",
				 "--root",
				 e->kubelet,
				 "--stub-dir",
				 e->stubs,
				 "--node-name",
				 "node-a",
				 "--label",
				 label,
				 "--node-label",
				 host_label,
				 "--pv",
				 pv_json };
	int n = 14, rc;

	gethostname(host, sizeof(host) - 1);
	snprintf(host_label, sizeof(host_label), "kubernetes.io/hostname=%s", host);
	if (bad_pv_json) {
		argv[n++] = "--bad-pv";
		argv[n++] = bad_pv_json;
	}
	for (size_t i = 0; extra && extra[i] && n < 31; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	rc = test_run_capture2(argv, &out, &err);
	fprintf(stderr, "%s", out ? out : "");
	if (rc != 0 && err && *err)
		fprintf(stderr, "--- lifecycle.py stderr:\n%s", err);
	free(out);
	free(err);
	assert_int_equal(rc, 0);
}

void kubelet_driver_detach_locks(const char *kubelet_root)
{
	size_t len = strlen(kubelet_root);
	struct dirent *de;
	DIR *dir = opendir("/sys/block");

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		char path[300], *backing;
		int fd;

		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
		backing = test_read_file(path);
		if (backing && strncmp(backing, kubelet_root, len) == 0 && backing[len] == '/') {
			snprintf(path, sizeof(path), "/dev/%s", de->d_name);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				(void)ioctl(fd, LOOP_CLR_FD, 0);
				close(fd);
			}
		}
		free(backing);
	}
	closedir(dir);
}
