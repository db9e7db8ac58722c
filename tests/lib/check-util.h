/* check-util.h - cmocka checks that several tests make alike: whether a process has a library
 * mapped, and that the kernel refuses a write through a read-only block device's file.  They
 * fail the running cmocka test when the check cannot be made. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Whether /proc/<pid>/maps names what (a library's file name, e.g. "libgrpc"); fails the test
 * when the maps cannot be read. */
bool test_maps_have(pid_t pid, const char *what);

/* Fails the test unless a direct write of 4 KiB through path (a read-only block device or a
 * bind of one) is refused: at open (EROFS, EACCES) or at the write (EPERM). */
void assert_block_write_refused(const char *path);
