/* loop-device.h - loop devices over a file (the image file rbd-fuse exposes), through the
 * loop-control and LOOP_CONFIGURE ioctls: no losetup.
 *
 * The devices are not auto-cleared: between attach and mount nothing holds them open, and
 * an auto-clearing device would vanish then.  Detach checks the backing file first, so a
 * device number reused by someone else is never cleared. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Attaches file (opened read-only when read_only) to a free loop device, with direct I/O when
 * the file allows it, and stores "/dev/loopN" in ret_dev (>= 32 bytes). */
int rbd_loop_attach(const char *file, bool read_only, char *ret_dev);

/* The backing file of dev ("/dev/loopN") into buf, from sysfs.  -ENXIO when it has none. */
int rbd_loop_backing_file(const char *dev, char *buf, size_t len);

/* Detaches dev if its backing file is expect_file (any file when NULL).  0 when detached or
 * already free (or backed by another file: not ours any more), -errno otherwise.  A device
 * still open (mounted lazily) is set to clear itself on last close. */
int rbd_loop_detach(const char *dev, const char *expect_file);
