/* csi-calls.h - the text of the CSI Node calls the tests make most, one line each as
 * tests/csi/csi_client.py reads them: each function appends its call (with the newline) to
 * calls, a string of size bytes that starts empty, so that several go to the client in one
 * run (csi_env_call).  The volumes are `local` ones of a path on the node; cap is a
 * volume_capability object (CSI_CAP_MOUNT, CSI_CAP_EXT4, ...). */
#pragma once

#include <stddef.h>

struct csi_env;

/* NodeStageVolume of vol at the staging path stg. */
void csi_calls_stage(char *calls, size_t size, const char *vol, const char *stg, const char *cap,
		     const char *path);
/* NodePublishVolume of vol at target, staged at stg (NULL: no staging_target_path). */
void csi_calls_publish(char *calls, size_t size, const char *vol, const char *stg,
		       const char *target, const char *cap, const char *path);
/* NodeUnpublishVolume of vol at target. */
void csi_calls_unpublish(char *calls, size_t size, const char *vol, const char *target);
/* NodeUnstageVolume of vol at the staging path stg. */
void csi_calls_unstage(char *calls, size_t size, const char *vol, const char *stg);

/* What one answer line must contain: line n (0-based) of the answers holds text. */
struct csi_want {
	int line;
	const char *text;
};
/* Runs the calls (csi_env_call) and fails the test unless each of want[0..n) holds. */
void csi_env_call_want(struct csi_env *e, const char *calls, const struct csi_want *want, size_t n);
#define CSI_CALL_WANT(e, calls, ...)                                          \
	csi_env_call_want(e, calls, (const struct csi_want[]){ __VA_ARGS__ }, \
			  sizeof((const struct csi_want[]){ __VA_ARGS__ }) /  \
				  sizeof(struct csi_want))
