/* rbd-health.h - a Ceph cluster that does not answer (lib/server-health.h, as the NFS plugin
 * does for its servers): while an operation on a cluster (a question of the rbd helper, or a
 * map by krbd, rbd-nbd or rbd-fuse) hangs past the hung-after time or has timed out, new
 * ones on that cluster fail at once with -EHOSTUNREACH and a message naming it ("rbd cluster
 * <monitors>") and since when, instead of starting one more helper that would hang.
 *
 * The cluster is named by its monitors as the spec gives them.  The probe, run at backoff and
 * at most one at a time per cluster by the caller that finds it due, is cheap and has a
 * deadline: a TCP connect to each monitor in turn and the banner a Ceph messenger sends
 * first on a new connection ("ceph v2" on msgr2, "ceph v027" on msgr1).  The kernel accepts
 * connections to a stopped or wedged monitor as well, so the banner, not the connect, tells
 * that the monitor answers.  Nothing here logs. */
#pragma once

#include <stdint.h>

#include "error.h"
#include "server-health.h"

#define RBD_HEALTH_KEY_PREFIX "rbd cluster "
/* The probe's deadline over all monitors: short, so that the attach that runs it still
 * answers within a second (a monitor that runs sends its banner at once). */
#define RBD_HEALTH_PROBE_MS 500

/* Operations on a cluster in flight this long make it down (0: only timeouts do). */
void rbd_health_set_hung_after(uint64_t ms);

/* Before an operation on the cluster with these monitors: 0 (go on; end it with
 * rbd_health_end), or -EHOSTUNREACH with err saying the cluster is down, since when and why
 * (the probe was run when it was due, and the cluster did not answer it). */
int rbd_health_begin(const char *monitors, struct server_health_op *op, struct error_info *err);
/* After it: r 0 makes the cluster up, -ETIMEDOUT down (err's message the reason). */
void rbd_health_end(struct server_health_op *op, int r, const struct error_info *err);

/* Whether a monitor of the list answers within timeout_ms in all: 0, or -ETIMEDOUT /
 * -EHOSTUNREACH / -EINVAL with err saying which monitors were tried and why they failed. */
int rbd_health_probe(const char *monitors, uint64_t timeout_ms, struct error_info *err);
