/* commands.h - the subcommands of the volagent binary.  Each takes the arguments after its
 * own name (argv[0] is the subcommand) and returns the process exit code: 0 success, 1 a
 * negative answer or runtime failure, 2 bad usage or configuration. */
#pragma once

int cmd_run(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_osd_check(int argc, char **argv);
int cmd_rbd_helper(int argc, char **argv);
