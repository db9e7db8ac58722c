/* cmd-drain-check.c - `volagent drain-check [--wait SECONDS] [--json] [--socket PATH |
 * --state-dir DIR] [--config FILE]`: may this node be drained?  Asks the running agent (as
 * `volagent status` does) for every volume still published, staged or attached on this node
 * (the actual state: node-volumes.h) and lists each with its pods and who holds its mounts.
 * Exit 0 only when there is none; 1 when some remain (or no agent answers: then nobody can
 * say), after waiting up to --wait seconds for them to go; 2 on bad usage.  A script runs it
 * before a reboot. */
#include <getopt.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "macro.h"

static const char *str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static void print_volume(json_t *e)
{
	json_auto_t *holders = json_array();
	json_t *p, *h;
	size_t i;

	printf("%s (%s)\n", str(e, "volume"), str(e, "plugin") ? str(e, "plugin") : "-");
	json_array_foreach(json_object_get(e, "published"), i, p)
		printf("    published for pod %s at %s\n", str(p, "pod_uid"), str(p, "target"));
	if (str(e, "staged_at"))
		printf("    staged at %s\n", str(e, "staged_at"));
	if (json_is_true(json_object_get(e, "attached")) && str(e, "device"))
		printf("    attached as %s\n", str(e, "device"));
	if (json_is_true(json_object_get(e, "stale")))
		printf("    no pod has published it for %llds: kubelet may have lost track of it\n",
		       (long long)json_integer_value(
			       json_object_get(e, "unpublished_since_seconds")));
	status_node_volume_holders(e, holders);
	json_array_foreach(holders, i, h)
	{
		if (str(h, "error"))
			printf("    %s: holders not found: %s\n", str(h, "path"), str(h, "error"));
		else if (str(h, "holders") && *str(h, "holders"))
			printf("    %s: held by: %s\n", str(h, "path"), str(h, "holders"));
	}
}

static uint64_t mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

int cmd_drain_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "wait", required_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "socket", required_argument, NULL, 's' },
		{ "state-dir", required_argument, NULL, 'd' },
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct status_args a = { 0 };
	unsigned long wait_s = 0;
	uint64_t deadline;
	json_t *root = NULL, *list;
	size_t i;
	int c, rc;
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'w':
			wait_s = strtoul(optarg, &end, 10);
			if (!*optarg || *end || wait_s > 86400) {
				fprintf(stderr,
					"volagent drain-check: --wait: seconds from 0 to 86400, got "
					"\"%s\"\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			printf("Usage: volagent drain-check [--wait SECONDS] [--json] "
			       "[--socket PATH | --state-dir DIR] [--config FILE]\n\n"
			       "Lists every volume still published, staged or attached on this node,\n"
			       "with its pods and who holds its mounts.  Exit 0 only when there is "
			       "none\n"
			       "(the node may be drained), 1 when some remain after waiting up to\n"
			       "--wait seconds (or no agent answers), 2 on bad usage.\n");
			return 0;
		default:
			if (status_args_take(&a, c, optarg))
				break;
			fprintf(stderr, "Try 'volagent drain-check --help'.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "volagent drain-check: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	deadline = mono_s() + wait_s;
	for (;;) {
		root = status_fetch("drain-check", &a, NULL, &rc);
		if (!root && rc == 2)
			return 2;
		list = root ? json_object_get(root, "on_node") : NULL;
		if (root && !json_is_array(list)) {
			fprintf(stderr,
				"volagent drain-check: the agent does not say what is on the "
				"node (an older version?)\n");
			json_decref(root);
			return 1;
		}
		if (root && json_array_size(list) == 0)
			break;
		if (mono_s() >= deadline)
			break;
		json_decref(root);
		root = NULL;
		sleep(1);
	}
	if (!root)
		return 1;
	if (a.as_json) {
		json_auto_t *out = json_array();
		json_t *e;
		char *s;

		json_array_foreach(list, i, e)
		{
			json_t *copy = json_deep_copy(e), *holders = json_array();

			status_node_volume_holders(e, holders);
			json_object_set_new(copy, "holders", holders);
			json_array_append_new(out, copy);
		}
		s = json_dumps(out, JSON_INDENT(2));
		if (s)
			puts(s);
		free(s);
	} else if (json_array_size(list) == 0) {
		printf("nothing is published, staged or attached on this node: it may be drained\n");
	} else {
		json_t *e;

		printf("%zu volume(s) still on this node:\n", json_array_size(list));
		json_array_foreach(list, i, e) print_volume(e);
	}
	rc = json_array_size(list) == 0 ? 0 : 1;
	json_decref(root);
	return rc;
}
