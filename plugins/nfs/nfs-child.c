/* nfs-child.c - see nfs-child.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nfs-child.h"

unsigned nfs_child_stuck_count(void)
{
	return process_stuck_count();
}

/* In the child: the nfs job, in the runner's function-child shape. */
static int child_main(void *arg, void *result, struct error_info *err)
{
	struct nfs_child *c = arg; /* the child's copy of the parent's struct */

	return c->fn(c->arg, err);
}

int nfs_child_start(struct nfs_child *c, nfs_child_fn fn, void *arg, struct error_info *err)
{
	int r;

	memset(c, 0, sizeof(*c));
	c->fn = fn;
	c->arg = arg;
	/* The deadline is the caller's (nfs_child_wait); a kill is SIGKILL at once. */
	r = process_start_fn(&c->proc, child_main, c, NULL, 0,
			     &(struct process_options){ .kill_at_once = true,
							.output_max = sizeof(c->output) - 1 },
			     err);
	if (r < 0) {
		process_done(&c->proc);
		c->done = true;
	}
	return r;
}

/* Copies what the runner collected and releases it. */
static void collect(struct nfs_child *c)
{
	c->result = c->proc.result;
	c->output_len = c->proc.output_len;
	snprintf(c->output, sizeof(c->output), "%s", c->proc.output ? c->proc.output : "");
	process_done(&c->proc);
	c->done = true;
}

int nfs_child_wait(struct nfs_child *c, uint64_t timeout_ms)
{
	if (c->done)
		return 1;
	if (process_wait(&c->proc, timeout_ms) == 0)
		return 0;
	collect(c);
	return 1;
}

void nfs_child_abandon(struct nfs_child *c)
{
	if (c->done)
		return;
	process_stop(&c->proc);
	collect(c);
	err_set(&c->result, -ETIMEDOUT, "abandoned");
}

int nfs_child_run(struct nfs_child *c, nfs_child_fn fn, void *arg, uint64_t timeout_ms,
		  struct error_info *err)
{
	int r = nfs_child_start(c, fn, arg, err);

	if (r < 0)
		return r;
	if (nfs_child_wait(c, timeout_ms) == 0) {
		nfs_child_abandon(c);
		return -ETIMEDOUT;
	}
	if (c->result.code < 0 && err)
		*err = c->result;
	return c->result.code;
}
