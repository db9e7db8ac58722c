/* main.c - the volagent binary: picks a subcommand and hands it the rest of argv. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "log.h"
#include "macro.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);

static const struct command commands[] = {
	{ "run", cmd_run, "run the agent: converge mounts with the pod spec files (and CSI)" },
	{ "devices", cmd_devices, "list block devices by stable identity" },
	{ "osd-check", cmd_osd_check, "may each saved Ceph OSD be removed now? (rename-safe)" },
	{ "status", cmd_status, "show the running agent's volumes, devices and journal" },
	{ "drain-check", cmd_drain_check,
	  "may this node be drained? (exit 0: no volume is left on it)" },
	{ "probe", cmd_probe, "ask a running agent's CSI service whether it is ready" },
	{ "rbd-helper", cmd_rbd_helper, "one librados/librbd call for the rbd plugin (JSON)" },
	{ "version", cmd_version, "print the version" },
	{ "help", cmd_help, "show this help" },
};

static int cmd_version(int argc, char **argv)
{
	printf("volagent %s\n", VOLAGENT_VERSION);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: volagent COMMAND [OPTIONS]\n\nCommands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n`volagent COMMAND --help` describes each command's options.\n");
}

static int cmd_help(int argc, char **argv)
{
	usage(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	log_init_from_env();
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (streq(argv[1], "--help") || streq(argv[1], "-h"))
		return cmd_help(argc - 1, argv + 1);
	if (streq(argv[1], "--version"))
		return cmd_version(argc - 1, argv + 1);
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (streq(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "volagent: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
