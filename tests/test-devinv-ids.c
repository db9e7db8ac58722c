/* test-devinv-ids.c - hardware ids named as udev names them (agent/devices/devid.c): udev's
 * escaping, and what scsi_id/ata_id make of VPD pages 0x83 and 0x80.  The pages of the SCSI
 * cases are the bytes the test VM's virtio-scsi disks show in sysfs (qemu scsi-hd with and
 * without wwn=); the ATA page has the layout libata's SCSI translation writes.  Whether the
 * names equal udev's own is checked against a running udev in the VM
 * (tests/vm/test-device-ids.sh); here, the edge cases a VM does not reach (NAA 6, target-port
 * designators, truncated pages).  Also: this machine's virtio disks get their id from sysfs. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "devid.h"
#include "devinv.h"
#include "macro.h"

static void check_escape_link(const char *in, const char *want)
{
	_cleanup_free_ char *got = devid_escape_link(in);

	assert_non_null(got);
	assert_string_equal(got, want);
}

static void test_escape_link(void **state)
{
	check_escape_link("VIRTSER1", "VIRTSER1");
	/* As udev made /dev/disk/by-id/virtio-Odd_Ser_1_é in the VM. */
	check_escape_link("Odd  Ser*1!\xc3\xa9", "Odd_Ser_1_\xc3\xa9");
	check_escape_link("  lead and trail  \n", "lead_and_trail");
	check_escape_link("tab\there", "tab_here");
	check_escape_link("a$b%c?d,e", "a_b_c_d_e");
	check_escape_link("keep#+-.:=@_", "keep#+-.:=@_");
	check_escape_link("hex\\x20ok", "hex\\x20ok");
	check_escape_link("bad\xff\xfeutf8", "bad__utf8");
	check_escape_link("overlong\xc0\xaf", "overlong__");
	check_escape_link("", "");
}

static void test_escape_replace(void **state)
{
	_cleanup_free_ char *model =
		devid_escape_replace("QEMU NVMe Ctrl                          ");
	_cleanup_free_ char *two = devid_escape_replace(" A  B/c");

	assert_string_equal(model, "QEMU_NVMe_Ctrl");
	/* string_escape=replace: every space and "/" becomes "_", runs are not merged. */
	assert_string_equal(two, "_A__B_c");
}

static void test_escape_whitespace(void **state)
{
	_cleanup_free_ char *a = devid_escape_whitespace("  WDC WD10EZEX-00B    ", 22);
	_cleanup_free_ char *b = devid_escape_whitespace("0123456789abcdefXYZ", 10);

	assert_string_equal(a, "WDC_WD10EZEX-00B");
	assert_string_equal(b, "0123456789");
}

struct vpd_case {
	const char *what;
	const uint8_t *pg83;
	size_t n83;
	const uint8_t *pg80;
	size_t n80;
	const char *vendor, *model;
	int ret;
	const char *bus, *serial, *wwn;
};

static void check_vpd(const struct vpd_case *c)
{
	const char *bus = NULL;
	char *serial = NULL, *wwn = NULL;
	int r = devid_scsi_from_vpd(c->pg83, c->n83, c->pg80, c->n80, c->vendor, c->model, &bus,
				    &serial, &wwn);

	if (r != c->ret)
		fail_msg("%s: returned %d, wanted %d", c->what, r, c->ret);
	if (r == 0) {
		assert_string_equal(bus, c->bus);
		assert_string_equal(serial, c->serial);
		if (c->wwn)
			assert_string_equal(wwn, c->wwn);
		else
			assert_null(wwn);
	}
	free(serial);
	free(wwn);
}

/* qemu scsi-hd,serial=SCSISER1,wwn=0x5000c500a1b2c3d4: a vendor-specific ASCII designator (the
 * serial) and an NAA 5 one.  scsi_id prefers the NAA. */
static const uint8_t pg83_wwn[] = { 0x00, 0x83, 0x00, 0x18, 0x02, 0x00, 0x00, 0x08, 0x53, 0x43,
				    0x53, 0x49, 0x53, 0x45, 0x52, 0x31, 0x01, 0x03, 0x00, 0x08,
				    0x50, 0x00, 0xc5, 0x00, 0xa1, 0xb2, 0xc3, 0xd4 };
/* qemu scsi-hd,serial=SCSISER2: the vendor-specific designator only. */
static const uint8_t pg83_serial[] = { 0x00, 0x83, 0x00, 0x0c, 0x02, 0x00, 0x00, 0x08,
				       0x53, 0x43, 0x53, 0x49, 0x53, 0x45, 0x52, 0x32 };
/* An NAA 5 and an NAA 6 (16 bytes, with vendor extension): NAA 6 wins. */
static const uint8_t pg83_naa6[] = {
	0x00, 0x83, 0x00, 0x20, 0x01, 0x03, 0x00, 0x08, 0x50, 0x00, 0xc5, 0x00,
	0x11, 0x11, 0x11, 0x11, 0x01, 0x03, 0x00, 0x10, 0x60, 0x01, 0x40, 0x50,
	0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb,
};
/* An NAA designator of the target port (association 1) is not the disk's; the EUI-64 is. */
static const uint8_t pg83_port[] = { 0x00, 0x83, 0x00, 0x18, 0x01, 0x13, 0x00, 0x08, 0x50, 0x00,
				     0xc5, 0x00, 0x22, 0x22, 0x22, 0x22, 0x01, 0x02, 0x00, 0x08,
				     0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77 };
/* The NAA designator claims more bytes than the page has. */
static const uint8_t pg83_truncated[] = { 0x00, 0x83, 0x00, 0x18, 0x01, 0x03,
					  0x00, 0x08, 0x50, 0x00, 0xc5 };
static const uint8_t pg80[] = { 0x00, 0x80, 0x00, 0x08, 'S', 'C', 'S', 'I', 'S', 'E', 'R', '3' };

static void test_scsi_vpd(void **state)
{
	static const struct vpd_case cases[] = {
		{ "naa 5", pg83_wwn, sizeof(pg83_wwn), NULL, 0, "QEMU    ", "QEMU HARDDISK   ", 0,
		  "scsi", "35000c500a1b2c3d4", "0x5000c500a1b2c3d4" },
		{ "vendor specific", pg83_serial, sizeof(pg83_serial), pg80, sizeof(pg80),
		  "QEMU    ", "QEMU HARDDISK   ", 0, "scsi", "0QEMU_QEMU_HARDDISK_SCSISER2", NULL },
		{ "naa 6 first", pg83_naa6, sizeof(pg83_naa6), NULL, 0, "LIO-ORG ", "disk0", 0,
		  "scsi", "36001405000112233445566778899aabb",
		  "0x6001405000112233445566778899aabb" },
		{ "port designator", pg83_port, sizeof(pg83_port), NULL, 0, "X", "Y", 0, "scsi",
		  "20011223344556677", NULL },
		{ "page 0x80 only", NULL, 0, pg80, sizeof(pg80), "QEMU    ", "QEMU HARDDISK   ", 0,
		  "scsi", "SQEMU_QEMU_HARDDISK_SCSISER3", NULL },
		{ "truncated, then 0x80", pg83_truncated, sizeof(pg83_truncated), pg80,
		  sizeof(pg80), "QEMU", "QEMU HARDDISK", 0, "scsi", "SQEMU_QEMU_HARDDISK_SCSISER3",
		  NULL },
		{ "nothing", pg83_truncated, sizeof(pg83_truncated), NULL, 0, "QEMU", "M", -ENOENT,
		  NULL, NULL, NULL },
		{ "no pages", NULL, 0, NULL, 0, NULL, NULL, -ENOENT, NULL, NULL, NULL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		check_vpd(&cases[i]);
}

/* libata's page 0x83: the serial (vendor specific), the T10 vendor id "ATA     " + model (40) +
 * serial (20), and the WWN as NAA 5.  ata_id names it ata-<model>_<serial>, wwn-0x<naa>. */
static void test_ata_vpd(void **state)
{
	uint8_t pg[4 + 24 + 72 + 12] = { 0x00, 0x83, 0x00, sizeof(pg) - 4 };
	uint8_t *p = pg + 4;
	const char *bus = NULL;
	char *serial = NULL, *wwn = NULL;

	p[0] = 0x02, p[1] = 0x00, p[3] = 20;
	memcpy(p + 4, "ATASER1             ", 20);
	p += 24;
	p[0] = 0x02, p[1] = 0x01, p[3] = 68;
	memcpy(p + 4, "ATA     ", 8);
	memcpy(p + 12, "Volagent Test Disk                      ", 40);
	memcpy(p + 52, "ATASER1             ", 20);
	p += 72;
	p[0] = 0x01, p[1] = 0x03, p[3] = 8;
	memcpy(p + 4, "\x50\x00\xc5\x00\xa1\xb2\xc3\xe5", 8);
	assert_int_equal(devid_scsi_from_vpd(pg, sizeof(pg), NULL, 0, "ATA     ",
					     "Volagent Test Di", &bus, &serial, &wwn),
			 0);
	assert_string_equal(bus, "ata");
	assert_string_equal(serial, "Volagent_Test_Disk_ATASER1");
	assert_string_equal(wwn, "0x5000c500a1b2c3e5");
	free(serial);
	free(wwn);
	/* Without the T10 designator ata_id's answer cannot be known from sysfs: none. */
	pg[4 + 24 + 1] = 0x00;
	assert_int_equal(devid_scsi_from_vpd(pg, sizeof(pg), NULL, 0, "ATA", "X", &bus, &serial,
					     &wwn),
			 -ENOENT);
}

/* The disks of this machine that sysfs gives a virtio serial get "serial:virtio-<serial>" from
 * sysfs, with or without a udev database (the vda, "- (no identity)" before). */
static void test_this_machine_virtio(void **state)
{
	struct devinv *inv = NULL;
	struct error_info err = { 0 };
	size_t seen = 0;

	assert_int_equal(devinv_scan(NULL, 0, &inv, &err), 0);
	for (size_t i = 0; i < inv->n_devices; i++) {
		const struct devinv_device *d = inv->devices[i];
		_cleanup_free_ char *path = strdup_printf("/sys/block/%s/serial", d->name);
		_cleanup_free_ char *esc = NULL, *want = NULL;
		char serial[256] = "";
		FILE *f;

		if (!startswith(d->name, "vd") || !(f = fopen(path, "re")))
			continue;
		if (!fgets(serial, sizeof(serial), f))
			serial[0] = '\0';
		fclose(f);
		serial[strcspn(serial, "\n")] = '\0';
		if (!serial[0])
			continue;
		esc = devid_escape_link(serial);
		want = strdup_printf("virtio-%s", esc);
		assert_int_equal(d->id_kind, DEVINV_ID_SERIAL);
		assert_string_equal(devinv_device_identity(d, DEVINV_ID_SERIAL), want);
		assert_string_equal(d->id_source, "sysfs");
		assert_string_equal(d->by_id[0], want);
		assert_ptr_equal(devinv_find(inv, want), d);
		seen++;
	}
	if (!seen)
		fprintf(stderr, "no virtio disk with a serial here; the VM test covers them\n");
	devinv_free(inv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape_link),
		cmocka_unit_test(test_escape_replace),
		cmocka_unit_test(test_escape_whitespace),
		cmocka_unit_test(test_scsi_vpd),
		cmocka_unit_test(test_ata_vpd),
		cmocka_unit_test(test_this_machine_virtio),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
