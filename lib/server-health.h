/* server-health.h - which storage servers are down, so that a mount to a server that does
 * not answer fails fast instead of starting one more mount that would hang.
 *
 * A plugin names each server by a key ("nfs server 10.0.2.2:2049") and wraps each operation
 * that may hang on it in server_health_begin() / server_health_end().  A server is down once
 * an operation on it timed out, or has been in flight for longer than the hung-after time
 * (the first mount still hangs, the next ones are refused).  While it is down, begin refuses
 * at once with -EHOSTUNREACH (a code kubelet retries: UNAVAILABLE) and a message naming the
 * server, since when and why; a probe (the plugin's own: cheap, with a deadline) is due at
 * backoff (1 s, doubling to 15 s), and only one runs per server at a time, so probes cannot
 * pile up either: the caller whose begin returns 1 runs it and reports with
 * server_health_probe_end().  A server that answers the probe, or an operation that succeeds,
 * is up again.  Other servers are not affected.
 *
 * Thread-safe; at most SERVER_HEALTH_MAX servers are tracked (past that, none is refused).
 * Nothing here logs: the transitions are counted (server_health_list) for the caller to
 * report. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define SERVER_HEALTH_MAX 256
#define SERVER_HEALTH_KEY_MAX 300

struct server_entry;

/* One operation in flight on a server (the caller's, on its stack). */
struct server_health_op {
	struct server_entry *s; /* NULL: not tracked */
	uint64_t started_ms;
	bool probe;
	struct server_health_op *next, *prev;
};

/* Operations in flight longer than this make their server down (0: only timeouts do). */
void server_health_set_hung_after(uint64_t ms);
/* The same for the servers whose key starts with prefix (a plugin's own setting: "rbd cluster
 * "), instead of the one above.  At most 4 prefixes; -ENOSPC past that. */
int server_health_set_hung_after_for(const char *prefix, uint64_t ms);

/* Before an operation on server key that may hang.  Returns 0 (go on; end it with
 * server_health_end), 1 (the server is down and a probe is due: run it, then
 * server_health_probe_end), or -EHOSTUNREACH with err saying the server is down, since when
 * and why. */
int server_health_begin(const char *key, struct server_health_op *op, struct error_info *err);
/* After the operation: result 0 makes the server up; -ETIMEDOUT makes it down for reason;
 * other errors (the server answered, or never was reached) change nothing. */
void server_health_end(struct server_health_op *op, int result, const char *reason);
/* After a probe: answered makes the server up; else the next probe is due after the next
 * backoff step, reason saying why it failed. */
void server_health_probe_end(struct server_health_op *op, bool answered, const char *reason);

/* begin, with the probe run when it is due: probe(arg, err) returns 0 when the server
 * answered.  Returns 0 (go on; end op with server_health_end), or -EHOSTUNREACH with err
 * saying the server is down (the probe's answer the reason when it was run). */
int server_health_gate(const char *key, struct server_health_op *op,
		       int (*probe)(void *arg, struct error_info *err), void *arg,
		       struct error_info *err);

struct server_health_info {
	char key[SERVER_HEALTH_KEY_MAX];
	bool down;
	int64_t down_since; /* wall clock (s since the epoch) when it stopped answering */
	char reason[256];
	unsigned in_flight;	   /* operations running on it now */
	unsigned long refused;	   /* operations refused while it was down */
	unsigned long down_count;  /* times it went down */
	uint64_t next_probe_in_ms; /* while down */
};

/* Copies the state of up to max servers into ret.  Returns how many. */
size_t server_health_list(struct server_health_info *ret, size_t max);
/* Forgets every server (tests). */
void server_health_reset(void);
