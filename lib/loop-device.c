/* loop-device.c - see loop-device.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "macro.h"
#include "loop-device.h"

static int configure(int lfd, int ffd, const char *file, bool read_only, bool direct_io)
{
	struct loop_config cfg = { 0 };

	cfg.fd = (unsigned)ffd;
	cfg.info.lo_flags = (read_only ? LO_FLAGS_READ_ONLY : 0) |
			    (direct_io ? LO_FLAGS_DIRECT_IO : 0);
	snprintf((char *)cfg.info.lo_file_name, LO_NAME_SIZE, "%s", file);
	return ioctl(lfd, LOOP_CONFIGURE, &cfg) < 0 ? -errno : 0;
}

int rbd_loop_attach(const char *file, bool read_only, char *ret_dev)
{
	_cleanup_close_ int ffd = -1, ctl = -1;
	char dev[32];
	int r = -EBUSY;

	ffd = open(file, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (ffd < 0)
		return -errno;
	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return -errno;
	/* Another process may take the free device between GET_FREE and CONFIGURE. */
	for (int attempt = 0; attempt < 20; attempt++) {
		_cleanup_close_ int lfd = -1;
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);

		if (n < 0)
			return -errno;
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		lfd = open(dev, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (lfd < 0) {
			r = -errno;
			continue;
		}
		r = configure(lfd, ffd, file, read_only, true);
		if (r == -EINVAL) /* the backing file cannot do O_DIRECT */
			r = configure(lfd, ffd, file, read_only, false);
		if (r == 0) {
			snprintf(ret_dev, 32, "%s", dev);
			return 0;
		}
		if (r != -EBUSY)
			return r;
	}
	return r;
}

int rbd_loop_backing_file(const char *dev, char *buf, size_t len)
{
	char path[128];
	const char *name = strrchr(dev, '/');
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", name ? name + 1 : dev);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENXIO : -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -ENXIO;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

int rbd_loop_detach(const char *dev, const char *expect_file)
{
	_cleanup_close_ int fd = -1;
	char back[4096];
	int r = rbd_loop_backing_file(dev, back, sizeof(back));

	if (r == -ENXIO)
		return 0; /* already free */
	if (r < 0)
		return r;
	/* The kernel may show a file on a dead FUSE mount with " (deleted)". */
	if (expect_file && !streq(back, expect_file) &&
	    !(startswith(back, expect_file) && streq(back + strlen(expect_file), " (deleted)")))
		return 0;
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, LOOP_CLR_FD, 0) < 0) {
		if (errno == ENXIO)
			return 0;
		if (errno == EBUSY) { /* still open: clear on last close */
			struct loop_info64 info;
			if (ioctl(fd, LOOP_GET_STATUS64, &info) < 0)
				return -errno;
			info.lo_flags |= LO_FLAGS_AUTOCLEAR;
			return ioctl(fd, LOOP_SET_STATUS64, &info) < 0 ? -errno : 0;
		}
		return -errno;
	}
	return 0;
}
