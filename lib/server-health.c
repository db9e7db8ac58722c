/* server-health.c - see server-health.h.  One mutex over a small array of servers; each
 * server keeps the list of its operations in flight (the caller's structs). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "server-health.h"
#include "time-util.h"

#define PROBE_FIRST_MS 1000
#define PROBE_MAX_MS 15000

struct server_entry {
	char key[SERVER_HEALTH_KEY_MAX];
	bool down;
	bool probing;
	uint64_t down_since_ms;	 /* CLOCK_MONOTONIC */
	int64_t down_since_wall; /* the same, wall clock */
	uint64_t up_since_ms;	 /* operations started before this prove nothing */
	uint64_t next_probe_ms;
	uint64_t probe_interval_ms;
	char reason[256];
	struct server_health_op *ops;
	unsigned in_flight;
	unsigned long refused, down_count;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct server_entry servers[SERVER_HEALTH_MAX];
static size_t n_servers;
static uint64_t hung_after_ms = 5000;
static struct {
	char prefix[32];
	uint64_t ms;
} hung_after_for[4];
static size_t n_hung_after_for;

void server_health_set_hung_after(uint64_t ms)
{
	pthread_mutex_lock(&lock);
	hung_after_ms = ms;
	pthread_mutex_unlock(&lock);
}

int server_health_set_hung_after_for(const char *prefix, uint64_t ms)
{
	int r = -ENOSPC;

	if (strlen(prefix) >= sizeof(hung_after_for[0].prefix))
		return -EINVAL;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i <= n_hung_after_for && i < ARRAY_SIZE(hung_after_for); i++) {
		if (i == n_hung_after_for) {
			snprintf(hung_after_for[i].prefix, sizeof(hung_after_for[i].prefix), "%s",
				 prefix);
			n_hung_after_for++;
		} else if (!streq(hung_after_for[i].prefix, prefix)) {
			continue;
		}
		hung_after_for[i].ms = ms;
		r = 0;
		break;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

/* Lock held. */
static uint64_t hung_after_of(const struct server_entry *s)
{
	for (size_t i = 0; i < n_hung_after_for; i++)
		if (startswith(s->key, hung_after_for[i].prefix))
			return hung_after_for[i].ms;
	return hung_after_ms;
}

static struct server_entry *find(const char *key, bool create)
{
	for (size_t i = 0; i < n_servers; i++)
		if (streq(servers[i].key, key))
			return &servers[i];
	if (!create || n_servers == SERVER_HEALTH_MAX || strlen(key) >= SERVER_HEALTH_KEY_MAX)
		return NULL;
	memset(&servers[n_servers], 0, sizeof(servers[0]));
	snprintf(servers[n_servers].key, SERVER_HEALTH_KEY_MAX, "%s", key);
	return &servers[n_servers++];
}

/* Lock held.  since: when it stopped answering (CLOCK_MONOTONIC). */
static void mark_down(struct server_entry *s, uint64_t since, uint64_t now, const char *reason)
{
	if (!s->down) {
		s->down = true;
		s->down_count++;
		s->down_since_ms = since;
		s->down_since_wall = (int64_t)time(NULL) - (int64_t)((now - since) / 1000);
		s->probe_interval_ms = PROBE_FIRST_MS;
		s->next_probe_ms = now + s->probe_interval_ms;
	}
	snprintf(s->reason, sizeof(s->reason), "%s", reason);
}

static void mark_up(struct server_entry *s, uint64_t now)
{
	s->down = false;
	s->reason[0] = '\0';
	s->up_since_ms = now;
}

/* Lock held: an operation that has hung for long enough makes the server down for the
 * others (and for status, which asks too). */
static void check_hung(struct server_entry *s, uint64_t now)
{
	uint64_t hung_after = hung_after_of(s);

	for (struct server_health_op *o = s->ops; o && !s->down && hung_after; o = o->next) {
		char why[96];

		if (o->probe || o->started_ms < s->up_since_ms || now - o->started_ms < hung_after)
			continue;
		snprintf(why, sizeof(why), "an operation on it has not returned for %llus",
			 (unsigned long long)((now - o->started_ms) / 1000));
		mark_down(s, o->started_ms, now, why);
	}
}

static void link_op(struct server_entry *s, struct server_health_op *op, uint64_t now)
{
	op->s = s;
	op->started_ms = now;
	op->prev = NULL;
	op->next = s->ops;
	if (s->ops)
		s->ops->prev = op;
	s->ops = op;
	s->in_flight++;
}

static void unlink_op(struct server_health_op *op)
{
	struct server_entry *s = op->s;

	if (op->prev)
		op->prev->next = op->next;
	else
		s->ops = op->next;
	if (op->next)
		op->next->prev = op->prev;
	s->in_flight--;
}

int server_health_begin(const char *key, struct server_health_op *op, struct error_info *err)
{
	uint64_t now = now_ms();
	struct server_entry *s;
	char since[32], next[48];
	struct tm tm;
	time_t t;
	int r = 0;

	memset(op, 0, sizeof(*op));
	pthread_mutex_lock(&lock);
	s = find(key, true);
	if (!s)
		goto out;
	check_hung(s, now);
	if (!s->down) {
		link_op(s, op, now);
		goto out;
	}
	if (!s->probing && now >= s->next_probe_ms) {
		s->probing = true;
		op->probe = true;
		link_op(s, op, now);
		r = 1;
		goto out;
	}
	s->refused++;
	if (s->probing)
		snprintf(next, sizeof(next), "a probe is running");
	else
		snprintf(next, sizeof(next), "next probe in %llums",
			 (unsigned long long)(s->next_probe_ms - now));
	t = (time_t)s->down_since_wall;
	gmtime_r(&t, &tm);
	strftime(since, sizeof(since), "%Y-%m-%dT%H:%M:%SZ", &tm);
	r = err_set(err, -EHOSTUNREACH,
		    "%s is down since %s (%s): not starting another operation that would hang; "
		    "tried again once it answers (%s)",
		    key, since, s->reason, next);
out:
	pthread_mutex_unlock(&lock);
	return r;
}

int server_health_gate(const char *key, struct server_health_op *op,
		       int (*probe)(void *arg, struct error_info *err), void *arg,
		       struct error_info *err)
{
	struct error_info perr = { 0 };
	char why[sizeof(perr.msg) + 8];
	int r = server_health_begin(key, op, err);

	if (r <= 0)
		return r;
	r = probe(arg, &perr);
	snprintf(why, sizeof(why), "probe: %s", err_msg(&perr));
	server_health_probe_end(op, r == 0, r == 0 ? NULL : why);
	/* Up now; or still down, refused with the usual message (the probe's answer its
	 * reason, the next probe later). */
	r = server_health_begin(key, op, err);
	if (r == 1) { /* cannot be: the next probe is not due yet */
		server_health_probe_end(op, false, why);
		return err_set(err, -EHOSTUNREACH, "%s is down: %s", key, why);
	}
	return r;
}

void server_health_end(struct server_health_op *op, int result, const char *reason)
{
	uint64_t now = now_ms();

	if (!op->s)
		return;
	pthread_mutex_lock(&lock);
	unlink_op(op);
	if (result == 0)
		mark_up(op->s, now);
	else if (result == -ETIMEDOUT)
		mark_down(op->s, op->started_ms, now, reason ? reason : "an operation timed out");
	pthread_mutex_unlock(&lock);
	op->s = NULL;
}

void server_health_probe_end(struct server_health_op *op, bool answered, const char *reason)
{
	uint64_t now = now_ms();
	struct server_entry *s = op->s;

	if (!s)
		return;
	pthread_mutex_lock(&lock);
	unlink_op(op);
	s->probing = false;
	if (answered) {
		mark_up(s, now);
	} else {
		if (s->down && reason)
			snprintf(s->reason, sizeof(s->reason), "%s", reason);
		s->probe_interval_ms = s->probe_interval_ms * 2 > PROBE_MAX_MS
					       ? PROBE_MAX_MS
					       : s->probe_interval_ms * 2;
		s->next_probe_ms = now + s->probe_interval_ms;
	}
	pthread_mutex_unlock(&lock);
	op->s = NULL;
}

size_t server_health_list(struct server_health_info *ret, size_t max)
{
	uint64_t now = now_ms();
	size_t n;

	pthread_mutex_lock(&lock);
	for (n = 0; n < n_servers && n < max; n++) {
		struct server_entry *s = &servers[n];

		check_hung(s, now);
		memset(&ret[n], 0, sizeof(ret[n]));
		memcpy(ret[n].key, s->key, sizeof(ret[n].key));
		ret[n].down = s->down;
		ret[n].down_since = s->down ? s->down_since_wall : 0;
		memcpy(ret[n].reason, s->reason, sizeof(ret[n].reason));
		ret[n].in_flight = s->in_flight;
		ret[n].refused = s->refused;
		ret[n].down_count = s->down_count;
		ret[n].next_probe_in_ms = s->down && s->next_probe_ms > now ? s->next_probe_ms - now
									    : 0;
	}
	pthread_mutex_unlock(&lock);
	return n;
}

void server_health_reset(void)
{
	pthread_mutex_lock(&lock);
	n_servers = 0;
	hung_after_ms = 5000;
	n_hung_after_for = 0;
	pthread_mutex_unlock(&lock);
}
