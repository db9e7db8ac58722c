/* cmd-run.c - PLACEHOLDER while the core is being written; replaced before commit. */
#include <stdio.h>
#include "commands.h"
int cmd_run(int argc, char **argv)
{
	fprintf(stderr, "volagent run: under construction\n");
	return 1;
}
