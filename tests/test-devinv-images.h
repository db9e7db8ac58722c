/* test-devinv-images.h - real disk images for the device inventory, OSD check and device monitor
 * tests: sparse files with ext4, xfs, a GPT table, a bluestore OSD or nothing, attached as loop
 * devices, and renames made by re-attaching them in another order.
 *
 * The loop devices of this machine are shared with other tests running at the same time, so
 * a test only ever finds, detaches and re-attaches devices whose backing file it made. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/blkpg.h>
#include <linux/loop.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "testlib.h"

#define IMG_SIZE (64LL << 20)
#define BLUESTORE_IMG_SIZE (1LL << 30)
#define XFS_IMG_SIZE (320LL << 20) /* mkfs.xfs wants more than 300 MB */

/* Fixed identities, so that the golden files do not change from run to run. */
#define EXT4_UUID "6f3c2a1e-0b4d-4c8e-9a5f-1d2e3f405162"
#define XFS_UUID "8a9b0c1d-2e3f-4a5b-8c6d-7e8f90a1b2c3"
#define GPT_LABEL_ID "3C0F7B52-6E1A-4D2B-9F84-0A1B2C3D4E5F"
#define GPT_P1_UUID "A1B2C3D4-1111-4222-8333-444455556666"
#define GPT_P2_UUID "B1B2C3D4-7777-4888-9999-AAAABBBBCCCC"
#define GPT_P1_FS_UUID "0d1e2f30-4152-4637-8899-aabbccddeeff"
#define OSD_UUID "5e7a1c9d-3b2f-4e8a-9c6d-0f1e2d3c4b5a"
#define OSD_FSID "c0ffee00-1234-4abc-8def-0123456789ab"
#define OSD_ID "7"

struct img {
	char file[512];
	char dev[32]; /* "/dev/loopN", "" when detached */
};

static inline __attribute__((unused)) int img_make(struct img *im, const char *dir,
						   const char *name, long long size)
{
	snprintf(im->file, sizeof(im->file), "%s/%s", dir, name);
	im->dev[0] = '\0';
	return test_make_sparse(im->file, size);
}

/* Scanning partitions is off on loop devices by default; the GPT image needs it. */
static inline __attribute__((unused)) int img_enable_partscan(const char *dev)
{
	struct loop_info64 info;
	int fd = open(dev, O_RDWR | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (ioctl(fd, LOOP_GET_STATUS64, &info) < 0 ||
	    (info.lo_flags |= LO_FLAGS_PARTSCAN, ioctl(fd, LOOP_SET_STATUS64, &info) < 0))
		r = -errno;
	close(fd);
	return r;
}

static inline __attribute__((unused)) bool img_wait_path(const char *path)
{
	for (int i = 0; i < 500; i++) {
		if (access(path, F_OK) == 0)
			return true;
		usleep(10000);
	}
	return false;
}

/* The partitions of the GPT image, in 512-byte sectors (see img_gpt_table). */
static const struct {
	long long start, size;
} img_gpt_parts[] = { { 2048, 40960 }, { 43008, 40960 } };

/* Tells the kernel about the GPT image's partitions with BLKPG, as `partx -a` does: kernels
 * built without partition table parsers (CONFIG_EFI_PARTITION unset, as on some CI VMs) would
 * otherwise show none. */
static inline __attribute__((unused)) int img_add_partitions(const char *dev)
{
	int fd = open(dev, O_RDONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	for (size_t i = 0; i < sizeof(img_gpt_parts) / sizeof(img_gpt_parts[0]) && r == 0; i++) {
		struct blkpg_partition part = {
			.start = img_gpt_parts[i].start * 512,
			.length = img_gpt_parts[i].size * 512,
			.pno = (int)i + 1,
		};
		struct blkpg_ioctl_arg arg = {
			.op = BLKPG_ADD_PARTITION,
			.datalen = sizeof(part),
			.data = &part,
		};
		/* EBUSY: the kernel's own scan found it already. */
		if (ioctl(fd, BLKPG, &arg) < 0 && errno != EBUSY)
			r = -errno;
	}
	close(fd);
	return r;
}

static inline __attribute__((unused)) int img_attach(struct img *im, bool partitions)
{
	int r = test_loop_attach(im->file, im->dev);

	if (r == 0 && partitions) {
		char p1[48];
		r = img_enable_partscan(im->dev);
		if (r == 0)
			r = img_add_partitions(im->dev);
		snprintf(p1, sizeof(p1), "%sp1", im->dev);
		if (r == 0 && !img_wait_path(p1))
			r = -ETIMEDOUT;
	}
	return r;
}

static inline __attribute__((unused)) void img_detach(struct img *im)
{
	if (im->dev[0])
		test_loop_detach(im->dev);
	im->dev[0] = '\0';
}

/* A fresh random uuid, for tests that must not collide with another run of themselves on the
 * same host (ids shared between two devices are duplicates, which change the answers). */
static inline __attribute__((unused)) void img_random_uuid(char ret[37])
{
	char *s = test_read_file("/proc/sys/kernel/random/uuid");

	snprintf(ret, 37, "%s", s ? s : "");
	free(s);
}

static inline __attribute__((unused)) int img_ext4_uuid(struct img *im, const char *uuid)
{
	return test_run((const char *const[]){ "mkfs.ext4", "-q", "-F", "-U", uuid, "-L", "va-ext4",
					       im->file, NULL });
}

static inline __attribute__((unused)) int img_ext4(struct img *im)
{
	return img_ext4_uuid(im, EXT4_UUID);
}

static inline __attribute__((unused)) int img_xfs(struct img *im)
{
	return test_run((const char *const[]){ "mkfs.xfs", "-q", "-f", "-m", "uuid=" XFS_UUID, "-L",
					       "va-xfs", im->file, NULL });
}

/* A GPT with two partitions, written into the file before it is attached; the first partition
 * gets an ext4 once the loop device shows it. */
static inline __attribute__((unused)) int img_gpt_table(struct img *im)
{
	char script_path[600];
	const char *script = "label: gpt\n"
			     "label-id: " GPT_LABEL_ID "\n"
			     "first-lba: 2048\n"
			     "start=2048, size=40960, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, "
			     "uuid=" GPT_P1_UUID ", name=\"va-data\"\n"
			     "start=43008, size=40960, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, "
			     "uuid=" GPT_P2_UUID ", name=\"va-blank\"\n";
	char cmd[1400];

	snprintf(script_path, sizeof(script_path), "%s.sfdisk", im->file);
	if (test_write_file(script_path, script) < 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "sfdisk --no-reread --no-tell-kernel -q '%s' < '%s'", im->file,
		 script_path);
	return test_run((const char *const[]){ "sh", "-c", cmd, NULL });
}

static inline __attribute__((unused)) int img_gpt_fs(struct img *im)
{
	char p1[48];

	snprintf(p1, sizeof(p1), "%sp1", im->dev);
	return test_run((const char *const[]){ "mkfs.ext4", "-q", "-F", "-U", GPT_P1_FS_UUID, "-L",
					       "va-part1", p1, NULL });
}

static inline __attribute__((unused)) bool img_have_ceph_osd(void)
{
	return test_run((const char *const[]){ "sh", "-c", "command -v ceph-osd", NULL }) == 0;
}

/* A real bluestore OSD (osd.7) on the attached device, made by ceph-osd with no cluster. */
static inline __attribute__((unused)) int img_bluestore_uuid(struct img *im, const char *dir,
							     const char *uuid)
{
	char data[512];

	snprintf(data, sizeof(data), "%s/osd-data", dir);
	mkdir(data, 0700);
	return test_run((const char *const[]){
		"ceph-osd", "--mkfs", "-i", OSD_ID, "--osd-data", data, "--osd-uuid", uuid,
		"--osd-objectstore", "bluestore", "--bluestore-block-path", im->dev,
		"--no-mon-config", "--fsid", OSD_FSID, "--keyring", "/dev/null", NULL });
}

static inline __attribute__((unused)) int img_bluestore(struct img *im, const char *dir)
{
	return img_bluestore_uuid(im, dir, OSD_UUID);
}

/* Kernel name of an image's device: "/dev/loop3" -> "loop3". */
static inline __attribute__((unused)) const char *img_name(const struct img *im)
{
	return im->dev[0] ? im->dev + strlen("/dev/") : "";
}

static inline __attribute__((unused)) int img_loop_number(const char *dev)
{
	return atoi(dev + strlen("/dev/loop"));
}

/* Attaches im at exactly the device want: lower free numbers are taken by fillers (attachments
 * of filler_file) first, since the kernel hands out the lowest free number.  Returns -EBUSY
 * when another test took want in between. */
static inline __attribute__((unused)) int img_attach_at(struct img *im, const char *want,
							bool partscan, const char *filler_file,
							struct img *fillers, int *n_fillers)
{
	while (*n_fillers < 16) {
		struct img *f = &fillers[*n_fillers];
		int r;

		snprintf(f->file, sizeof(f->file), "%s", filler_file);
		r = img_attach(f, false);
		if (r < 0)
			return r;
		if (img_loop_number(f->dev) > img_loop_number(want)) {
			img_detach(f);
			return -EBUSY;
		}
		if (strcmp(f->dev, want) != 0) {
			(*n_fillers)++;
			continue;
		}
		img_detach(f);
		r = img_attach(im, partscan);
		if (r == 0 && strcmp(im->dev, want) != 0)
			r = -EBUSY;
		return r;
	}
	return -EBUSY;
}

/* Detaches a and b and attaches each under the other's name, for a rename the kernel really
 * makes.  Retries a few times when another test takes a number in between; returns true when
 * the names really swapped, and in any case leaves a->dev and b->dev as they are now. */
static inline __attribute__((unused)) bool img_swap(struct img *a, struct img *b, bool partscan,
						    const char *dir)
{
	char want_a[32], want_b[32], filler_file[sizeof(a->file)];
	struct img fillers[16];
	int n_fillers = 0;
	bool ok = false;

	snprintf(filler_file, sizeof(filler_file), "%s/filler.img", dir);
	if (test_make_sparse(filler_file, 1 << 20) < 0)
		return false;
	snprintf(want_a, sizeof(want_a), "%s", b->dev);
	snprintf(want_b, sizeof(want_b), "%s", a->dev);
	for (int attempt = 0; attempt < 5 && !ok; attempt++) {
		bool a_first = img_loop_number(want_a) < img_loop_number(want_b);
		struct img *first = a_first ? a : b, *second = a_first ? b : a;

		img_detach(a);
		img_detach(b);
		ok = img_attach_at(first, a_first ? want_a : want_b, partscan, filler_file, fillers,
				   &n_fillers) == 0 &&
		     img_attach_at(second, a_first ? want_b : want_a, partscan, filler_file,
				   fillers, &n_fillers) == 0;
		while (n_fillers > 0)
			img_detach(&fillers[--n_fillers]);
		if (!a->dev[0] && img_attach(a, partscan) < 0)
			return false;
		if (!b->dev[0] && img_attach(b, partscan) < 0)
			return false;
	}
	return ok;
}
