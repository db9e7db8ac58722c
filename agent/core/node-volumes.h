/* node-volumes.h - what is still on this node, for `volagent drain-check`, and the volumes
 * left staged with no pod (lost stages).
 *
 * A volume is on the node while the actual state has a pod mount of it (published) or a
 * device-level record of it (staged: its node-wide mount, or attached).  A volume staged or
 * attached with no pod mount of it for longer than stale_after is a lost stage: what a kubelet
 * that lost track of a volume (a restart, a deleted pod dir) leaves behind.  It is shown in
 * status and in a metric and logged once, never unstaged by the agent on its own: the stage
 * is kubelet's to undo.
 *
 * Reconciler thread only. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "actual-state.h"
#include "desired-state.h"

struct node_volumes;

/* stale_after_ms: 0 never calls a stage lost. */
struct node_volumes *node_volumes_new(uint64_t stale_after_ms);
struct node_volumes *node_volumes_free(struct node_volumes *nv);
/* After each pass: notes since when each staged volume has had no pod mount, logs each one
 * that became lost (once, and once more when it is published or gone again), and sets the
 * volagent_volumes_on_node and volagent_stale_stages metrics. */
void node_volumes_update(struct node_volumes *nv, const struct actual_state *a, uint64_t now_ms);
/* Every volume on the node, for status: {volume, plugin, published: [{pod_uid, target}],
 * staged_at, device, attached, unpublished_since_seconds, stale}.  *ret_stale: how many are
 * lost stages. */
json_t *node_volumes_json(const struct node_volumes *nv, const struct actual_state *a,
			  uint64_t now_ms, size_t *ret_stale);
