/* outside-env.h - the fixture of the tests of what the agent must refuse (path attacks, a
 * journal trusted no further than the agent's own writing): one agent fixture served as a CSI
 * env, and an "outside" dir in its temp dir that stands for the host beyond the agent's reach,
 * where nothing may be mounted and nothing removed; and the journal of this boot written by
 * hand, as a crash, a corruption or someone else would leave it. */
#pragma once

#include "agent-fixture.h"
#include "csi-env.h"
#include "fixture-case.h"

struct outside_env {
	struct agent_fixture *f;
	struct csi_env csi;
	char outside[600];
};

/* A new env on a new fixture named tag, its outside dir made; its end (the fixture's agent
 * stopped, its mounts and loop devices gone). */
struct outside_env *outside_env_new(const char *tag);
void outside_env_free(struct outside_env *e);

/* The cmocka setup and teardown of a suite whose state is one env named tag
 * (fixture-case.h). */
#define OUTSIDE_ENV_SETUP_TEARDOWN(tag) STATE_SETUP_TEARDOWN(outside_env_new(tag), outside_env_free)

/* Writes <state>/journal.json of this boot (the kernel's boot_id) with devices (a JSON list)
 * and csi (a JSON list, or NULL for none), making the state dir; fails the test on error. */
void outside_env_write_journal(struct outside_env *e, const char *devices, const char *csi);
