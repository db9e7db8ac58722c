/* fake-plugin.h - the tests' one fake volume plugin, type and name "fake", for the suites that
 * drive the core (or the registry) with a plugin of their own (plugin_registry_set).
 *
 * It does real but trivial work: a pod volume is a bind mount of its spec's "path" (a source
 * directory); a volume whose spec has a "device" key is staged once per node as a tmpfs that
 * pods bind, after an attach that returns the path as the device.  It records every call with
 * a sequence number and a time.  What no real mount does on demand is a mock, per volume or
 * for all: failures (set_up and mount_device of one path fail), delays (tear_down, set_up,
 * check_set_up), and a gate that holds every set_up until it opens (a stand-in for a slow
 * mount: an NFS server slow to answer, a long mkfs).
 *
 * fake_plugin_checked is the same with a health check (always healthy; its event has the path
 * it checks).  fake_plugin_bare has only the two required ops and no table, for the wrappers'
 * answers to absent ops. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "plugin.h"

#define FAKE_MAX_EVENTS 4096

struct fake_event {
	unsigned seq;
	uint64_t ms;
	char op[24];	/* "set_up", "set_up.done", "tear_down", "tear_down.done", ... */
	char path[512]; /* the volume's source path (its spec "path") or the target */
};

/* The fake's state; a test reads or sets it under lock. */
struct fake_state {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* the gate changed */
	struct fake_event events[FAKE_MAX_EVENTS];
	unsigned n;
	char failing[512];	 /* set_up / mount_device of the volume with this path fail */
	unsigned delay_ms;	 /* every tear_down takes this long */
	unsigned setup_delay_ms; /* every set_up takes this long */
	unsigned check_delay_ms; /* every check_set_up takes this long */
	bool gate_open;		 /* set_ups may go on (true after fake_reset) */
	unsigned gate_waiting;	 /* set_ups waiting at the gate */
};

extern struct fake_state fake;
extern const struct volume_plugin fake_plugin;
extern const struct volume_plugin fake_plugin_checked;
extern const struct volume_plugin fake_plugin_bare;

/* Forgets the events and undoes every failure, delay and closed gate. */
void fake_reset(void);
/* set_up and mount_device of the volume whose path is path fail with -EIO (NULL: none). */
void fake_set_failing(const char *path);
/* The events of op for path (NULL: any), at most max, in order; returns how many. */
unsigned fake_find(const char *op, const char *path, struct fake_event *ret, unsigned max);
unsigned fake_count(const char *op, const char *path);
/* Closes (every set_up waits) or opens the gate. */
void fake_gate_set(bool open);
/* Whether a set_up waits at the gate (a test_wait_until condition; arg unused). */
bool fake_gate_has_waiter(void *arg);
