/* exec-util.h - running a short helper program and keeping what it said, for tools that have
 * no library interface: a thin shorthand for process_run (lib/process.h), the agent's one
 * process runner.  Never used for mount, blkid or lsblk: libmount and libblkid do that. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Runs argv (argv[0] searched in PATH) with stdin from /dev/null and stdout+stderr captured
 * into out (truncated to outlen, always terminated), stopping it (SIGTERM, then SIGKILL) when
 * it runs past timeout_ms (0: no deadline).  Returns the exit status (0..255), 128 + N when
 * killed by signal N, -ENOENT when the program is missing, -ETIMEDOUT, or another -errno. */
int exec_capture_timeout(const char *const argv[], uint64_t timeout_ms, char *out, size_t outlen);

/* exec_capture_timeout with EXEC_DEFAULT_TIMEOUT_MS. */
int exec_capture(const char *const argv[], char *out, size_t outlen);

#define EXEC_DEFAULT_TIMEOUT_MS (10 * 60 * 1000)
