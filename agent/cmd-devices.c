/* cmd-devices.c - `volagent devices`: the node's block devices and their stable ids, as a table
 * or as JSON shaped like `lsblk --json`. */
#include <getopt.h>
#include <stdio.h>

#include "commands.h"
#include "devinv.h"
#include "macro.h"

static void devices_usage(FILE *f)
{
	fprintf(f,
		"Usage: volagent devices [--json] [--all] [DEVICE...]\n"
		"\n"
		"Lists the block devices of this node with their stable ids (see docs/devices.md).\n"
		"\n"
		"  --json     print JSON shaped like `lsblk --json`\n"
		"  --all      also list empty devices (size 0) and RAM disks\n"
		"  DEVICE     only these devices (sda, /dev/sda, /dev/mapper/NAME, or a by-id\n"
		"             name: /dev/disk/by-id/virtio-SER1 or virtio-SER1, no link needed)\n");
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct devinv *, devinv_free);

struct named {
	const struct devinv_device **want;
	int n;
};

static bool is_named(const struct devinv_device *d, void *arg)
{
	const struct named *nm = arg;

	for (int k = 0; k < nm->n; k++)
		if (nm->want[k] == d || (d->parent && streq(d->parent, nm->want[k]->name)))
			return true;
	return false;
}

/* Cuts the inventory down to the named devices, each with its partitions. */
static int select_named(struct devinv *inv, char **names, int n_names)
{
	_cleanup_free_ const struct devinv_device **want = calloc(n_names, sizeof(*want));
	struct named nm = { want, n_names };

	if (!want)
		return -ENOMEM;
	for (int i = 0; i < n_names; i++) {
		want[i] = devinv_find(inv, names[i]);
		if (!want[i]) {
			fprintf(stderr, "volagent devices: %s: no such block device\n", names[i]);
			return -ENOENT;
		}
	}
	devinv_filter(inv, is_named, &nm);
	return 0;
}

int cmd_devices(int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
					      { "all", no_argument, NULL, 'a' },
					      { "help", no_argument, NULL, 'h' },
					      {} };
	_cleanup_(devinv_freep) struct devinv *inv = NULL;
	struct error_info err = { 0 };
	bool json = false;
	unsigned flags = 0;
	int c, r;

	while ((c = getopt_long(argc, argv, "jah", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'a':
			flags |= DEVINV_SCAN_ALL;
			break;
		case 'h':
			devices_usage(stdout);
			return 0;
		default:
			devices_usage(stderr);
			return 2;
		}
	}
	r = devinv_scan(NULL, flags, &inv, &err);
	if (r < 0) {
		fprintf(stderr, "volagent devices: %s\n", err_msg(&err));
		return 1;
	}
	if (optind < argc && select_named(inv, argv + optind, argc - optind) < 0)
		return 2;
	if (json) {
		_cleanup_(json_decrefp) json_t *root = devinv_to_json(inv);
		if (!root || json_dumpf(root, stdout, JSON_INDENT(2)) < 0) {
			fprintf(stderr, "volagent devices: cannot format JSON\n");
			return 1;
		}
		fputc('\n', stdout);
	} else {
		devinv_print_table(inv, stdout);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
