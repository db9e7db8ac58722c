/* check-util.c - cmocka checks shared by several tests (see check-util.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-fixture.h"
#include "check-util.h"
#include "testlib.h"

bool test_maps_have(pid_t pid, const char *what)
{
	char path[64], *maps;
	bool has;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	maps = test_read_file(path);
	assert_non_null(maps);
	has = strstr(maps, what) != NULL;
	free(maps);
	return has;
}

void assert_block_write_refused(const char *path)
{
	int fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);

	if (fd >= 0) {
		void *buf = NULL;
		ssize_t n;
		assert_int_equal(posix_memalign(&buf, 4096, 4096), 0);
		memset(buf, 'W', 4096);
		n = pwrite(fd, buf, 4096, 0);
		free(buf);
		close(fd);
		assert_int_equal(n, -1);
		assert_int_equal(errno, EPERM);
	} else {
		assert_true(errno == EROFS || errno == EACCES);
	}
}

int test_direct_write(const char *path, char c)
{
	void *buf = NULL;
	int fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	assert_int_equal(posix_memalign(&buf, 4096, TEST_BLOCK_CHUNK), 0);
	memset(buf, c, TEST_BLOCK_CHUNK);
	if (pwrite(fd, buf, TEST_BLOCK_CHUNK, 16 * TEST_BLOCK_CHUNK) != TEST_BLOCK_CHUNK)
		r = -errno;
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	free(buf);
	close(fd);
	return r;
}

bool test_direct_read_is(const char *path, char c)
{
	void *buf = NULL;
	bool ok;
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);

	if (fd < 0)
		return false;
	assert_int_equal(posix_memalign(&buf, 4096, TEST_BLOCK_CHUNK), 0);
	ok = pread(fd, buf, TEST_BLOCK_CHUNK, 16 * TEST_BLOCK_CHUNK) == TEST_BLOCK_CHUNK;
	for (size_t i = 0; ok && i < TEST_BLOCK_CHUNK; i++)
		ok = ((char *)buf)[i] == c;
	free(buf);
	close(fd);
	return ok;
}

void assert_no_canary_in(const char *where, const char *text, const char *const *canaries, size_t n)
{
	assert_non_null(text);
	for (size_t i = 0; i < n; i++) {
		const char *p = strstr(text, canaries[i]);
		if (p) {
			const char *from = p - text > 200 ? p - 200 : text;
			fail_msg("%s holds the canary %s: ...%.400s...", where, canaries[i], from);
		}
	}
}

/* nftw's callback takes no argument of ours. */
static const char *const *tree_canaries;
static size_t tree_n;
static int tree_files;

static int check_tree_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	char *text;

	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	text = test_read_file(path);
	assert_no_canary_in(path, text ? text : "", tree_canaries, tree_n);
	free(text);
	tree_files++;
	return 0;
}

int assert_no_canary_in_files(const char *dir, const char *const *canaries, size_t n)
{
	tree_canaries = canaries;
	tree_n = n;
	tree_files = 0;
	assert_int_equal(nftw(dir, check_tree_file, 16, FTW_PHYS), 0);
	return tree_files;
}

void assert_no_canary_anywhere_in(struct agent_fixture *f, const char *const *canaries, size_t n,
				  struct canary_outputs *ret)
{
	char sock[700], msock[700], *log;

	*ret = (struct canary_outputs){ 0 };
	snprintf(sock, sizeof(sock), "%s/admin.sock", f->state);
	snprintf(msock, sizeof(msock), "%s/metrics.sock", f->state);
	assert_int_equal(test_volagent((const char *const[]){ "status", "--json", "--socket", sock,
							      NULL },
				       &ret->status_json),
			 0);
	assert_no_canary_in("status --json", ret->status_json, canaries, n);
	assert_int_equal(test_volagent((const char *const[]){ "status", "--socket", sock, NULL },
				       &ret->status),
			 0);
	assert_no_canary_in("status", ret->status, canaries, n);
	assert_int_equal(test_run_capture((const char *const[]){ "curl", "-sf", "--unix-socket",
								 msock, "http://agent/metrics",
								 NULL },
					  &ret->metrics),
			 0);
	assert_no_canary_in("metrics", ret->metrics, canaries, n);
	assert_true(assert_no_canary_in_files(f->state, canaries, n) >= 1);
	log = test_read_file(f->agent.log_path);
	assert_no_canary_in("agent log", log, canaries, n);
	free(log);
}

void canary_outputs_free(struct canary_outputs *o)
{
	free(o->status_json);
	free(o->status);
	free(o->metrics);
}

bool test_core_pattern_is_plain(void)
{
	char *p = test_read_file("/proc/sys/kernel/core_pattern");
	bool plain = p && p[0] && p[0] != '|' && !strchr(p, '/');

	free(p);
	return plain;
}

/* Occurrences of needle in the file at path, read in chunks that overlap by its length. */
static int file_count(const char *path, const char *needle)
{
	size_t len = strlen(needle), chunk = 1 << 20, have = 0;
	char *buf = malloc(chunk + len);
	int fd = open(path, O_RDONLY | O_CLOEXEC), n = 0;
	ssize_t got;

	assert_non_null(buf);
	assert_true(fd >= 0);
	while ((got = read(fd, buf + have, chunk)) > 0) {
		size_t end = have + (size_t)got;

		for (char *p = buf; (p = memmem(p, end - (p - buf), needle, len)); p += len)
			n++;
		/* keep the last len-1 bytes: a needle across two reads is found once */
		have = end >= len ? len - 1 : end;
		memmove(buf, buf + end - have, have);
	}
	close(fd);
	free(buf);
	return n;
}

int test_core_files_count(const char *dir, const char *needle, int *ret_files)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	*ret_files = 0;
	while ((de = readdir(d))) {
		char path[PATH_MAX];

		if (strncmp(de->d_name, "core", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		n += file_count(path, needle);
		(*ret_files)++;
	}
	closedir(d);
	return n;
}
