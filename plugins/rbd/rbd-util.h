/* rbd-util.h - the process and file chores of the rbd plugin: running the ceph helpers (rbd,
 * rbd-nbd) with a deadline, starting rbd-fuse as a daemon that outlives the agent, probing a
 * path that may hang (a FUSE mount whose server died) in a child that is killed at a
 * deadline, 0600 key files, and the small key=value record files kept under the run dir.
 *
 * Nothing here logs; errors come back as -errno (and text where a helper said something). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin.h"

/* Runs argv (argv[0] searched in PATH) without CEPH_ARGS/CEPH_CONF from our environment, with
 * stdin from /dev/null and stdout+stderr captured into out (always terminated).  The helper
 * may leave a daemon behind (rbd-nbd does): reading stops when argv[0] itself exits.  Returns
 * the exit status (0..255), -ENOENT when the program is missing, -ETIMEDOUT when it ran past
 * timeout_ms (it and its process group are killed), or another -errno. */
int rbd_exec(const char *const argv[], uint64_t timeout_ms, char *out, size_t outlen);

/* Starts argv as a daemon in its own session (so it is not killed with the agent and is not
 * the agent's child: a double fork), stdout+stderr appended to log_path.  Stores its PID. */
int rbd_spawn_daemon(const char *const argv[], const char *log_path, pid_t *ret_pid);

/* Whether pid is alive (not a zombie), runs the program named exe (basename of
 * /proc/PID/exe) and, if arg is not NULL, has arg as one of its arguments. */
bool rbd_pid_is(pid_t pid, const char *exe, const char *arg);

/* Sends SIGTERM to pid if rbd_pid_is(pid, exe, arg), waits up to grace_ms for it to exit,
 * then SIGKILL and waits up to 2 s more.  Returns 0 when it is gone (or was not ours),
 * -ETIMEDOUT when it would not die. */
int rbd_pid_stop(pid_t pid, const char *exe, const char *arg, uint64_t grace_ms);

enum rbd_probe {
	RBD_PROBE_STAT,	  /* stat(path): a regular file or directory answers */
	RBD_PROBE_STATFS, /* statfs(path) */
	RBD_PROBE_READ,	  /* read 4 KiB at offset 0 of path with O_DIRECT */
};

/* Runs the probe in a forked child and waits at most timeout_ms.  Returns 0, the probe's
 * -errno, or -ETIMEDOUT (the child is killed; a FUSE wait is killable). */
int rbd_probe_path(enum rbd_probe what, const char *path, uint64_t timeout_ms);

/* Writes value to a new 0600 file under dir (O_EXCL, random name) and returns its path.  The
 * caller removes it with rbd_key_file_remove as soon as the helper has read it. */
int rbd_key_file_write(const char *dir, const char *value, char **ret_path);
/* Overwrites the file with zeros, then unlinks it.  Accepts NULL. */
void rbd_key_file_remove(const char *path);

/* A record file: "key=value" lines, written atomically (temp file, fsync, rename). */
int rbd_record_write(const char *path, const struct device_attachment *att);
/* Reads a record into ret (its device_path from the "device" line). -ENOENT when absent. */
int rbd_record_read(const char *path, struct device_attachment *ret);

/* Appends "addr unix-seconds" to the file of our clients that died (so that their lingering
 * watchers are recognised as ours), dropping entries older than max_age_s. */
int rbd_released_add(const char *path, const char *addr, unsigned max_age_s);
bool rbd_released_has(const char *path, const char *addr, unsigned max_age_s);
