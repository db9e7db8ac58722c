/* testlib.h - what the integration tests share: a private mount namespace, temp dirs, sparse
 * files and loop devices that are always detached, running helper programs, and starting and
 * stopping the agent by PID.
 *
 * Loop devices are attached with LO_FLAGS_AUTOCLEAR and the test keeps an fd on each, so the
 * kernel detaches them once the test's namespace (and with it every mount) is gone, even if
 * the test crashes; test_loop_detach_all() also runs at exit. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Exit 77 (skipped) unless root with CAP_SYS_ADMIN; then unshare(CLONE_NEWNS) and make every
 * mount private, so nothing this process mounts is seen by the host, and put a tmpfs on
 * /run/mount, so that libmount's utab entries of the test's mounts stay in it too. */
void test_enter_private_mountns(void);
bool test_have_root(void);
/* Whether the kernel lacks mount events (mount_notify_probe()); if so, says on stderr that the
 * case is skipped. */
bool test_no_mount_events(void);
/* One cmocka case run on each source of mount changes, named for it: the kernel's mount
 * events, then libmount's monitor and mountinfo (the fallback).  setup finds *state pointing
 * at a bool, true for the events (*(bool *)*state). */
extern bool test_mount_events_on, test_mount_events_off;
#define TEST_ON_BOTH_MOUNT_SOURCES(fn, setup, teardown)                       \
	{ "events: " #fn, fn, setup, teardown, &test_mount_events_on },       \
	{                                                                     \
		"fallback: " #fn, fn, setup, teardown, &test_mount_events_off \
	}

/* A fresh directory under $TMPDIR (or /tmp); the caller frees the string. */
char *test_mkdtemp(const char *tag);
/* rm -rf that never crosses into a mount point (it refuses and returns -EBUSY). */
int test_rm_rf(const char *path);

int test_make_sparse(const char *path, long long size);
/* Attaches file to the first free loop device and writes its path to ret_dev (>= 32 bytes). */
int test_loop_attach(const char *file, char *ret_dev);
int test_loop_detach(const char *dev);
void test_loop_detach_all(void);
/* Whether the loop device dev ("/dev/loopN", a const char *) is bound to no file: a
 * test_wait_until predicate.  LOOP_CLR_FD only marks a loop device another process has open
 * (a blkid probe of every block device: udev's, an agent's device inventory) to be cleared
 * at that process's last close. */
bool test_loop_unbound(void *dev);
/* The end of a test group with loop devices on images in dir: detaches every loop device
 * this process attached, removes dir and frees it.  Returns 0, for a cmocka teardown. */
int test_cleanup_loops_and_dir(char *dir);

/* Runs argv[0] (searched in PATH) and returns its exit status, or -1 when it died.  Its
 * output goes to the test's stderr only when VERBOSE is set. */
int test_run(const char *const argv[]);
/* Same, and returns what it printed on stdout (caller frees). */
int test_run_capture(const char *const argv[], char **ret_out);
/* Same, with stdout and stderr each returned (either may be NULL). */
int test_run_capture2(const char *const argv[], char **ret_out, char **ret_err);
/* Runs CSI calls (one per line, as tests/csi/csi_client.py reads them) against the socket
 * sock, the client's generated stubs in stubs_dir, through an input file in dir.  Returns the
 * answers, one line each (caller frees), or NULL when the client did not exit 0. */
char *test_csi_client(const char *sock, const char *stubs_dir, const char *dir, const char *calls);
/* mkfs.ext4 -q -F dev (or xfs with -f). */
int test_mkfs(const char *fstype, const char *dev);
/* The superblock value name ("TYPE", "UUID") libblkid finds on dev into ret ("" for none). */
void test_blkid_value(const char *dev, const char *name, char *ret, size_t size);

int test_write_file(const char *path, const char *content);
/* Writes the file path until its filesystem is full (ENOSPC), for a test of a full disk.
 * Returns: 0 when the filesystem is full, negative errno on another failure. */
int test_fill_fs(const char *path);
char *test_read_file(const char *path);
/* The options libmount's utab (/run/mount/utab, or LIBMOUNT_UTAB) holds for target (caller
 * frees; "" for an entry without), or NULL when it has no entry for it.  Read as text:
 * libmount has no public reader of utab's format ("SRC=... TARGET=... OPTS=...", a mount a
 * line); the tests' paths have nothing to escape. */
char *test_utab_options(const char *target);
/* Compares actual with the golden file expected_path, printing both to stderr when they
 * differ or the file is missing; with $VOLAGENT_UPDATE_GOLDEN set, writes actual to it instead.
 * Returns true when they match (or the file was written). */
bool test_golden_matches(const char *expected_path, const char *actual);

/* Polls pred every 10 ms until it is true or timeout_ms passed (times $TEST_TIME_SCALE, for
 * slow runs such as the agent under valgrind). */
bool test_wait_until(bool (*pred)(void *arg), void *arg, int timeout_ms);
/* Waits (as test_wait_until) until the file at path has text in it (present) or has not (a
 * missing file has no text), e.g. the agent's journal after a coalesced save. */
bool test_wait_file_text(const char *path, const char *text, bool present, int timeout_ms);

/* Mount-table queries through libmount on a fresh read of /proc/self/mountinfo. */
bool test_is_mountpoint(const char *path);
/* The mount ID of the mount at path, or -1. */
int test_mount_id(const char *path);
/* Whether the mount at path is read-only (VFS flag). */
bool test_mount_is_ro(const char *path);
/* How many mounts have a target under prefix. */
int test_count_mounts_under(const char *prefix);

/* The agent under test: $VOLAGENT_BIN or build/volagent. */
struct test_agent {
	pid_t pid;
	char log_path[512];
};
/* Starts `volagent run ARGS...`, logging to log_path (set by the caller, or a temp file). */
int test_agent_start(struct test_agent *agent, const char *const args[]);
/* Sends sig and waits for the process; returns its exit status (or 128+signal). */
int test_agent_stop(struct test_agent *agent, int sig);
/* Whether the agent's log contains text. */
bool test_agent_log_contains(const struct test_agent *agent, const char *text);
/* Runs `volagent ARGS...` to completion; output captured like test_run_capture. */
int test_volagent(const char *const args[], char **ret_out);
int test_volagent2(const char *const args[], char **ret_out, char **ret_err);
const char *test_volagent_bin(void);
/* The agent built with the tests' seams (rbd-helper-fault.h): $VOLAGENT_TEST_BIN, else the
 * agent under test's path plus "-test" (build/volagent-test). */
const char *test_volagent_test_bin(void);
