/* agent-fixture.h - one agent under test with its own root, state and pods dirs in a temp dir,
 * for the integration tests.  Used from cmocka setup/teardown so that the agent is stopped and
 * every mount under the temp dir is removed even when an assertion fails. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "fixture-case.h"
#include "testlib.h"

struct agent_fixture {
	char *dir;
	char root[512];
	char state[512];
	char secrets[512]; /* --secret-dir */
	char pods[512];
	char config[512];
	struct test_agent agent;
	char loops[4][32];
	int n_loops;
	char short_dir[32]; /* see fixture_short_dir */
};

struct agent_fixture *fixture_new(const char *tag);
/* Stops the agent (SIGTERM), detaches mounts under the temp dir, detaches loop devices, and
 * removes the temp dir. */
void fixture_free(struct agent_fixture *f);

/* The cmocka setup and teardown of a suite whose state is one fixture named tag: defines
 * static setup() (fixture_new) and teardown() (fixture_free); see fixture-case.h. */
#define FIXTURE_SETUP_TEARDOWN(tag) STATE_SETUP_TEARDOWN(fixture_new(tag), fixture_free)

/* Starts `volagent run` with the fixture's dirs (and extra args, NULL-terminated). */
int fixture_start(struct agent_fixture *f, const char *const extra[]);
int fixture_stop(struct agent_fixture *f, int sig);

/* A temp dir with a short path (/tmp/va.XXXXXX), for unix sockets below it (a socket path has
 * at most 107 bytes); cleaned up like the fixture's own dir. */
const char *fixture_short_dir(struct agent_fixture *f);

/* Writes pods/<name> atomically (a dot-file, then rename): the agent sees the whole file. */
int fixture_write_pod(struct agent_fixture *f, const char *name, const char *json);
/* fixture_write_pod() of a spec built from a printf format. */
int fixture_write_podf(struct agent_fixture *f, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Writes pods/<uid>.json: pod uid with one local volume named volume, of path (a directory or
 * a block device). */
int fixture_write_local_pod(struct agent_fixture *f, const char *uid, const char *volume,
			    const char *path);
int fixture_remove_pod(struct agent_fixture *f, const char *name);
/* Makes <dir>/<name> holding one file "hello" with content, for a local volume's source;
 * returns its path, in one of 8 static buffers used in turn. */
const char *fixture_make_source(struct agent_fixture *f, const char *name, const char *content);
/* "<root>/pods/<uid>/volumes/kubernetes.io~local/<name>" into buf (>= 512). */
const char *fixture_pod_dir(const struct agent_fixture *f, const char *uid, const char *name,
			    char *buf);
/* A sparse image of size bytes in the temp dir, attached to a loop device; its path is stored
 * in f->loops[i] and returned. */
const char *fixture_add_loop(struct agent_fixture *f, long long size);

/* Lazily detaches every mount below the fixture's root: what a reboot leaves of them. */
void fixture_unmount_all(struct agent_fixture *f);

bool fixture_wait_mounted(const char *path, int timeout_ms);
bool fixture_wait_unmounted(const char *path, int timeout_ms);
/* Waits until exactly n mounts exist below <root>. */
bool fixture_wait_mount_count(const struct agent_fixture *f, int n, int timeout_ms);
/* Waits until the agent's log contains text. */
bool fixture_wait_log(const struct agent_fixture *f, const char *text, int timeout_ms);
/* The log's current size, and waiting for text written after such a point: for a restarted
 * agent, whose log continues the previous run's. */
long fixture_log_size(const struct agent_fixture *f);
bool fixture_wait_log_after(const struct agent_fixture *f, long offset, const char *text,
			    int timeout_ms);
/* How many times text occurs in the agent's log. */
int fixture_log_count(const struct agent_fixture *f, const char *text);
/* Offset in the log of the first line containing all of a and b, or -1. */
long fixture_log_find(const struct agent_fixture *f, const char *a, const char *b);
/* Waits until one line of the agent's log has both texts. */
bool fixture_wait_log_line(const struct agent_fixture *f, const char *a, const char *b,
			   int timeout_ms);

/* --- the agent's state, through `volagent status --json` (the admin socket) --- */

/* The agent's status snapshot, parsed (caller decrefs); NULL while no agent answers on
 * <state>/admin.sock.  fixture_status_at asks at socket instead. */
json_t *fixture_status(const struct agent_fixture *f);
json_t *fixture_status_at(const char *socket);
/* The entry of the pod volume at target in a snapshot (borrowed), or NULL. */
json_t *status_pod_volume(json_t *status, const char *target);
/* The entry of the device whose volume name or device path is name (borrowed), or NULL. */
json_t *status_device(json_t *status, const char *name);
/* counts.<key> of a snapshot, or -1. */
long long status_count(json_t *status, const char *key);
/* Waits until pred holds for a snapshot from the agent (at socket; NULL: <state>/admin.sock). */
bool fixture_wait_status(const struct agent_fixture *f, const char *socket,
			 bool (*pred)(json_t *status, const void *arg), const void *arg,
			 int timeout_ms);
/* Waits until the agent is ready (startup reconstruction complete). */
bool fixture_wait_ready(const struct agent_fixture *f, const char *socket, int timeout_ms);
/* Waits until the pod volume at target is in state ("mounted", "not mounted", ...), and, when
 * read_only is 0 or 1, has that read-only setting. */
bool fixture_wait_pod_state(const struct agent_fixture *f, const char *target, const char *state,
			    int read_only, int timeout_ms);
/* Waits until the last error of the pod volume at target contains text. */
bool fixture_wait_pod_error(const struct agent_fixture *f, const char *target, const char *text,
			    int timeout_ms);
/* Waits until counts.<key> of the snapshot is n. */
bool fixture_wait_count(const struct agent_fixture *f, const char *key, long long n,
			int timeout_ms);
