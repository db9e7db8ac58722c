/* crypt-bench.c - what opening an encrypted volume costs on this machine (`make bench`,
 * docs/encryption.md): the LUKS2 parameters every volume gets (lib/luks.h), then, on a 64 MiB
 * file in a temp dir, the time of luksFormat, of one passphrase check (one argon2id
 * derivation: the part of an open that the PBKDF's costs bound) and, where the kernel has
 * device-mapper, of a whole open (a loop device, the check and the dm-crypt mapping) and
 * close.  Each timed step runs 3 times; the median is printed.  Needs root for the open. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loop-device.h"
#include "luks.h"

#define REPS 3
static const char pass[] = "volagent-bench-passphrase";

static double clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double now_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v)
{
	qsort(v, REPS, sizeof(*v), cmp);
	return v[REPS / 2];
}

static int fail(const char *what, const struct error_info *err)
{
	fprintf(stderr, "crypt-bench: %s: %s\n", what, err_msg(err));
	return 1;
}

int main(void)
{
	char dir[] = "/tmp/crypt-bench.XXXXXX", img[64], loop[32], mapping[LUKS_PATH_MAX];
	double fmt[REPS], check[REPS], check_cpu[REPS], open_[REPS], close_[REPS];
	struct error_info err = { 0 };
	FILE *f;
	int rc = 0;

	printf("encryption: LUKS2, %s-%s, %d-bit key, 512-byte sectors; keyslot PBKDF %s, time "
	       "cost %d, memory %d KiB, %d thread(s), fixed (not benchmarked per node)\n",
	       LUKS_CIPHER, LUKS_CIPHER_MODE, LUKS_KEY_BITS, LUKS_PBKDF, LUKS_PBKDF_ITERATIONS,
	       LUKS_PBKDF_MEMORY_KB, LUKS_PBKDF_THREADS);
	if (!mkdtemp(dir))
		return 1;
	snprintf(img, sizeof(img), "%s/disk.img", dir);
	for (int i = 0; i < REPS; i++) {
		double t;

		f = fopen(img, "w");
		if (!f || ftruncate(fileno(f), 64 << 20) < 0)
			return 1;
		fclose(f);
		t = now_ms();
		if (luks_format(img, NULL, pass, strlen(pass), &err) < 0)
			return fail("luksFormat", &err);
		fmt[i] = now_ms() - t;
		t = now_ms();
		check_cpu[i] = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
		if (luks_verify(img, pass, strlen(pass), &err) < 0)
			return fail("passphrase check", &err);
		check[i] = now_ms() - t;
		check_cpu[i] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - check_cpu[i];
	}
	printf("encryption: luksFormat %.0f ms; unlock (one %s derivation, the PBKDF's part of an "
	       "open) %.0f ms, of which %.0f ms CPU (median of %d; the rest is waiting for a CPU "
	       "on a busy machine)\n",
	       median(fmt), LUKS_PBKDF, median(check), median(check_cpu), REPS);
	if (!luks_dm_available()) {
		printf("encryption: open of a volume (dm-crypt mapping): not measurable here, the "
		       "kernel has no device-mapper; it is the unlock above plus the mapping's "
		       "creation\n");
		goto out;
	}
	if (rbd_loop_attach(img, false, loop) < 0) {
		fprintf(stderr, "crypt-bench: cannot attach %s to a loop device\n", img);
		rc = 1;
		goto out;
	}
	for (int i = 0; i < REPS && !rc; i++) {
		double t = now_ms();

		if (luks_open(loop, "volagent-bench", pass, strlen(pass), false, mapping, &err) <
		    0) {
			rc = fail("open", &err);
			break;
		}
		open_[i] = now_ms() - t;
		t = now_ms();
		if (luks_close("volagent-bench", &err) < 0) {
			rc = fail("close", &err);
			break;
		}
		close_[i] = now_ms() - t;
	}
	if (!rc)
		printf("encryption: open of a volume (unlock + dm-crypt mapping) %.0f ms, close %.0f "
		       "ms (median of %d)\n",
		       median(open_), median(close_), REPS);
	(void)rbd_loop_detach(loop, NULL);
out:
	unlink(img);
	rmdir(dir);
	return rc;
}
