/* exec-util.h - running a helper program (mkfs) and keeping what it said, for tools that have
 * no library interface.  Never used for mount, blkid or lsblk: libmount and libblkid do that. */
#pragma once

#include <stddef.h>

/* Runs argv (argv[0] searched in PATH) with stdin from /dev/null and stdout+stderr captured
 * into out (truncated to outlen, always terminated).  Returns the exit status (0..255),
 * -ENOENT when the program is missing, or another -errno. */
int exec_capture(const char *const argv[], char *out, size_t outlen);
