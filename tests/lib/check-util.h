/* check-util.h - cmocka checks that several tests make alike: whether a process has a library
 * mapped, that the kernel refuses a write through a read-only block device's file, and a
 * direct write and read of a pattern through a block device's file, that no canary (a secret
 * a test handed the agent) shows up in a text, a tree of files, anywhere a running agent
 * writes or a core dump.  They fail the running cmocka test when the check cannot be made. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct agent_fixture;

/* Whether /proc/<pid>/maps names what (a library's file name, e.g. "libgrpc"); fails the test
 * when the maps cannot be read. */
bool test_maps_have(pid_t pid, const char *what);

/* Fails the test unless a direct write of 4 KiB through path (a read-only block device or a
 * bind of one) is refused: at open (EROFS, EACCES) or at the write (EPERM). */
void assert_block_write_refused(const char *path);

/* The pattern the two below write and read: TEST_BLOCK_CHUNK bytes at offset 16 chunks (1 MiB),
 * with O_DIRECT, so the bytes go to and come from the device, not the page cache. */
#define TEST_BLOCK_CHUNK 65536
/* Writes the pattern of byte c through path (and fsyncs); 0 or -errno of the open or write. */
int test_direct_write(const char *path, char c);
/* Whether the pattern read through path is all c. */
bool test_direct_read_is(const char *path, char c);

/* Fails the test naming where and the canary when text holds any of canaries[0..n). */
void assert_no_canary_in(const char *where, const char *text, const char *const *canaries,
			 size_t n);
/* assert_no_canary_in() for every regular file below dir; returns how many were read. */
int assert_no_canary_in_files(const char *dir, const char *const *canaries, size_t n);

/* What the running agent of a fixture answers: status in both forms and its metrics. */
struct canary_outputs {
	char *status_json; /* `volagent status --json` */
	char *status;	   /* `volagent status` */
	char *metrics;	   /* GET /metrics on <state-dir>/metrics.sock */
};
/* Fails the test when any of canaries[0..n) shows up anywhere the running agent of f writes:
 * its status (both forms), its metrics, the files of its state dir (one at least) and its log.
 * The three answers are handed back in ret for the test's own checks (free them with
 * canary_outputs_free). */
void assert_no_canary_anywhere_in(struct agent_fixture *f, const char *const *canaries, size_t n,
				  struct canary_outputs *ret);
void canary_outputs_free(struct canary_outputs *o);

/* Whether the kernel's core_pattern writes a core dump as a plain file in the crashing
 * process's cwd ("core", "core.%p"), not to a pipe (systemd-coredump) or another dir. */
bool test_core_pattern_is_plain(void);
/* How many times needle occurs in the files of dir whose names start with "core" (core
 * dumps: binary, read in chunks); *ret_files is how many such files were read. */
int test_core_files_count(const char *dir, const char *needle, int *ret_files);
