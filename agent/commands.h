/* commands.h - the subcommands of the volagent binary.  Each takes the arguments after its
 * own name (argv[0] is the subcommand) and returns the process exit code: 0 success, 1 a
 * negative answer or runtime failure, 2 bad usage or configuration. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

int cmd_run(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_drain_check(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_osd_check(int argc, char **argv);
int cmd_rbd_helper(int argc, char **argv);

/* The options `volagent status` and `drain-check` share: --json and where the agent's admin
 * socket is (--socket, --state-dir, --config; NULL: the default). */
struct status_args {
	const char *socket, *state_dir, *config;
	bool as_json;
};
/* Takes getopt's answer c (with optarg arg) into a when it is one of these options (their
 * values 'j', 's', 'd', 'c'); false when it is not. */
bool status_args_take(struct status_args *a, int c, const char *arg);

/* What `volagent status` and `drain-check` share (cmd-status.c): the agent's status snapshot,
 * asked over the admin socket found from a's socket, state_dir and config.  Returns the
 * parsed snapshot (caller decrefs) and its text in *ret_text (may be NULL; caller frees), or
 * NULL with the reason printed on stderr, prefixed "volagent cmd: ", and *ret_code the exit
 * code to give (1: no answer, 2: bad usage). */
json_t *status_fetch(const char *cmd, const struct status_args *a, char **ret_text, int *ret_code);
/* status-holders.c: prints who holds each mount of VOLUME (a volume name or id in the
 * snapshot root) or the mount at PATH; as_json: as a JSON array.  Returns the exit code. */
int status_print_holders(json_t *root, const char *what, bool as_json);
/* Who holds the mounts of entry e of the snapshot's "on_node" list (its pod targets and its
 * staging mount, with its device): an object {"path", "device", "holders" or "error"} per
 * path mounted, appended to ret (an array). */
void status_node_volume_holders(json_t *e, json_t *ret);
