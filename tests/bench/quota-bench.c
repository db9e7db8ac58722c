/* quota-bench.c - the cost of giving a directory volume its size (lib/quota.c), the calls a
 * set-up with `size` adds before its bind: the enforcement check (Q_XGETQSTATV), the
 * directory's project ID (FS_IOC_FSGETXATTR, the ID probe with Q_XGETQUOTA, FS_IOC_FSSETXATTR)
 * and the limit (Q_XSETQLIM).
 *
 *   quota-bench --dir DIR [--n N]
 *
 * DIR is an empty directory on the filesystem to measure (scripts/bench gives it XFS on a loop
 * device, mounted prjquota where the kernel can).  N (200) fresh directories are each given a
 * size once (the first set-up, probe included) and then again (what every later set-up and
 * adoption repeats).  Where the filesystem has no project quotas (this build host's kernel has
 * none) the set-up is refused: then the refusal is what is measured, and said.
 *
 * Output: "figure quota.<first|repeat|refusal> <median> us" lines and one line for people. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench-util.h"
#include "error.h"
#include "quota.h"

int main(int argc, char **argv)
{
	const char *dir = NULL;
	int n = 200;
	double *first, *repeat;
	int *fds;

	bench_init("quota-bench", NULL);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--n") && i + 1 < argc)
			n = atoi(argv[++i]);
		else
			die("usage: quota-bench --dir DIR [--n N]");
	}
	if (!dir || n <= 0)
		die("usage: quota-bench --dir DIR [--n N]");
	first = calloc(n, sizeof(*first));
	repeat = calloc(n, sizeof(*repeat));
	fds = calloc(n, sizeof(*fds));
	if (!first || !repeat || !fds)
		die("out of memory");
	for (int i = 0; i < n; i++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/v%d", dir, i);
		if (mkdir(path, 0750) < 0 && errno != EEXIST)
			die("mkdir %s: %s", path, strerror(errno));
		fds[i] = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fds[i] < 0)
			die("open %s: %s", path, strerror(errno));
	}
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < n; i++) {
			struct error_info err = { 0 };
			char key[64];
			uint64_t t0 = bench_now_ns();
			int r;

			snprintf(key, sizeof(key), "bench-%d", i);
			r = quota_prj_set_size(fds[i], dir, key, 1 << 20, NULL, &err);
			(pass ? repeat : first)[i] = (double)(bench_now_ns() - t0) / 1000.0;
			if (r == -EOPNOTSUPP && pass == 0 && i == 0) {
				/* No project quotas: every call is the refusal. */
				for (int j = 1; j < n; j++) {
					t0 = bench_now_ns();
					(void)quota_prj_set_size(fds[j], dir, key, 1 << 20, NULL,
								 NULL);
					first[j] = (double)(bench_now_ns() - t0) / 1000.0;
				}
				printf("figure quota.refusal %.1f us\n", bench_median(first, n));
				printf("quota: no project quotas on this filesystem (%s): a set-up with a "
				       "size is refused, the refusal costs %.1f us (median of %d); the "
				       "cost of setting a size is measured where quotas are enabled "
				       "(tests/vm/test-quota.sh prints it)\n",
				       err_msg(&err), bench_median(first, n), n);
				return 0;
			}
			if (r < 0)
				die("directory %d: %s", i, err_msg(&err));
		}
	}
	printf("figure quota.first %.1f us\n", bench_median(first, n));
	printf("figure quota.repeat %.1f us\n", bench_median(repeat, n));
	printf("quota: setting a size, %d directories: first set-up %.1f us (median, the ID probe "
	       "included), each later set-up %.1f us\n",
	       n, bench_median(first, n), bench_median(repeat, n));
	for (int i = 0; i < n; i++)
		close(fds[i]);
	return 0;
}
