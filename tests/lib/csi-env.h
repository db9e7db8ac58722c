/* csi-env.h - what the CSI tests share: an agent fixture served as `volagent run --csi` with
 * kubelet's root dir, the plugin socket below it, and the Python client's stubs dir; starting
 * it and waiting until it serves, running calls through tests/csi/csi_client.py, reading an
 * answer line, and kubelet's publish and staging paths.  The functions fail the running
 * cmocka test on error. */
#pragma once

#include <stdbool.h>

#include "agent-fixture.h"

struct csi_env {
	struct agent_fixture *f;
	char kubelet[600];
	char sock[700];
	char stubs[600];
};

/* Fills e for fixture f: kubelet's root dir under fixture_short_dir() (short: the sockets below
 * it must fit a unix socket path, as kubelet's do), made; the socket and stubs paths. */
void csi_env_init(struct csi_env *e, struct agent_fixture *f);
/* A new env on a new fixture named name (for a cmocka setup), and its end: the fixture is
 * freed (its agent stopped, its mounts and loop devices gone). */
struct csi_env *csi_env_new(const char *name);
void csi_env_free(struct csi_env *e);
/* csi_env_free of *state, as a cmocka teardown. */
int csi_env_teardown(void **state);

/* The volume capabilities most calls carry: a mount (no fs_type), a raw block device, an ext4
 * mount; all SINGLE_NODE_WRITER. */
#define CSI_CAP_MOUNT "{\"mount\": {}, \"access_mode\": {\"mode\": \"SINGLE_NODE_WRITER\"}}"
#define CSI_CAP_BLOCK "{\"block\": {}, \"access_mode\": {\"mode\": \"SINGLE_NODE_WRITER\"}}"
#define CSI_CAP_EXT4 \
	"{\"mount\": {\"fs_type\": \"ext4\"}, \"access_mode\": {\"mode\": \"SINGLE_NODE_WRITER\"}}"

/* Starts `volagent run --csi` on kubelet's root dir (no device inventory) and waits for the
 * socket and for "startup reconstruction complete" logged by this run (a restart's log
 * continues the previous run's). */
void csi_env_start(struct csi_env *e);
/* The same with more flags (NULL-terminated, NULL: none), e.g. "--controller". */
void csi_env_start_with(struct csi_env *e, const char *const extra[]);

/* Runs the calls (one per line) and returns the answers, one line each (caller frees); with
 * VERBOSE set, also prints them to stderr. */
char *csi_env_call(struct csi_env *e, const char *calls);
/* Runs the calls and fails the test unless each of the first n answers is "OK {}". */
void csi_env_call_ok(struct csi_env *e, const char *calls, int n);

/* Fails the test unless nothing is mounted below kubelet's root dir; then stops the agent
 * (SIGTERM) and fails unless it exits 0: the end of a test that cleaned up after itself. */
void csi_env_stop_clean(struct csi_env *e);

/* Kubelet's publish target for pod uid and pv into buf (>= 700), its parent made as kubelet
 * does. */
const char *csi_env_target(struct csi_env *e, const char *uid, const char *pv, char *buf);
/* kubelet's vol_data.json in dir (made), naming driver and handle, as kubelet writes it before
 * it calls NodeStageVolume or NodePublishVolume. */
void csi_write_kubelet_record(const char *dir, const char *driver, const char *handle);
/* Kubelet's staging path of volume vol into buf (>= 700), made as kubelet does. */
const char *csi_env_staging(struct csi_env *e, const char *vol, char *buf);

/* Whether the Python client can run (python3 with grpcio and grpc-tools). */
bool csi_env_have_client(void);

/* Whether path is a unix socket (a test_wait_until predicate). */
bool csi_socket_exists(void *path);

/* The n-th answer line (0-based) of out, in a static buffer ("" past the end). */
const char *csi_line(const char *out, int n);

/* Fails the test unless answer line n of out is the NOT_FOUND of a publish whose target's
 * parent (kubelet's dir) is missing: it names target_path and parent.  NOT_FOUND is final for
 * kubelet (csi_client.go isFinalError): it forgets the attempt. */
void csi_assert_parent_missing(const char *out, int n, const char *parent);

/* Fails the test unless answer line n of out contains text. */
#define assert_line(out, n, text)                                                      \
	do {                                                                           \
		const char *_l = csi_line(out, n);                                     \
		if (!strstr(_l, text))                                                 \
			fail_msg("answer %d is \"%s\", expected \"%s\"", n, _l, text); \
	} while (0)
