/* helper-scope.c - see helper-scope.h.  One short sd-bus connection per helper started: the
 * agent starts helpers rarely, from any worker thread, and an sd_bus is not thread-safe. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-login.h>

#include "helper-scope.h"
#include "log.h"
#include "macro.h"
#include "time-util.h"

#define SCOPE_SLICE "system-volagent.slice"
#define MOVE_TIMEOUT_MS 10000

bool helper_scope_wanted(void)
{
	const char *e = getenv("VOLAGENT_HELPER_SCOPE");
	_cleanup_free_ char *unit = NULL;
	size_t n;

	if (e && streq(e, "0"))
		return false;
	if (sd_booted() <= 0)
		return false;
	/* Only a service's processes are killed with it; a shell's scope is left alone. */
	if (sd_pid_get_unit(0, &unit) < 0 || !unit)
		return false;
	n = strlen(unit);
	return n > 8 && streq(unit + n - 8, ".service");
}

static sd_bus *bus_free(sd_bus *bus)
{
	return sd_bus_flush_close_unref(bus);
}

static void bus_freep(sd_bus **b)
{
	bus_free(*b);
}

/* systemd's own socket (root only) works also when no D-Bus daemon runs, as systemctl's
 * does; the system bus otherwise. */
static int bus_open(sd_bus **ret)
{
	sd_bus *bus = NULL;
	int r;

	if (geteuid() == 0 && access("/run/systemd/private", F_OK) == 0) {
		r = sd_bus_new(&bus);
		if (r < 0)
			return r;
		r = sd_bus_set_address(bus, "unix:path=/run/systemd/private");
		if (r >= 0)
			r = sd_bus_start(bus);
		if (r >= 0) {
			*ret = bus;
			return 0;
		}
		bus = bus_free(bus);
	}
	r = sd_bus_open_system(&bus);
	if (r < 0)
		return r;
	*ret = bus;
	return 0;
}

/* 1 when pid is in unit, 0 when not (yet), -ESRCH when it is gone. */
static int pid_in_unit(pid_t pid, const char *unit)
{
	_cleanup_free_ char *u = NULL;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return -ESRCH;
	if (sd_pid_get_unit(pid, &u) < 0 || !u)
		return 0;
	return streq(u, unit);
}

int helper_scope_move(pid_t pid, const char *kind, const char *description, char *ret_unit,
		      size_t unit_size, struct error_info *err)
{
	_cleanup_(bus_freep) sd_bus *bus = NULL;
	sd_bus_message *m = NULL, *reply = NULL;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	char unit[256];
	uint64_t deadline;
	int r;

	if (pid <= 0 || !kind)
		return -EINVAL;
	if (!helper_scope_wanted())
		return 0;
	snprintf(unit, sizeof(unit), "volagent-%s-%d.scope", kind, (int)pid);
	r = bus_open(&bus);
	if (r < 0)
		return err_set(err, r,
			       "cannot reach systemd over D-Bus to move %s (pid %d) out of "
			       "volagent's cgroup: %s",
			       kind, (int)pid, strerror(-r));
	r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1",
					   "/org/freedesktop/systemd1",
					   "org.freedesktop.systemd1.Manager",
					   "StartTransientUnit");
	if (r >= 0)
		r = sd_bus_message_append(m, "ss", unit, "fail");
	if (r >= 0)
		r = sd_bus_message_open_container(m, 'a', "(sv)");
	if (r >= 0)
		r = sd_bus_message_append(m, "(sv)(sv)(sv)(sv)", "Description", "s",
					  description ? description : kind, "Slice", "s",
					  SCOPE_SLICE, "CollectMode", "s", "inactive-or-failed",
					  "PIDs", "au", 1, (uint32_t)pid);
	if (r >= 0)
		r = sd_bus_message_close_container(m);
	if (r >= 0)
		r = sd_bus_message_append(m, "a(sa(sv))", 0);
	if (r < 0) {
		sd_bus_message_unref(m);
		return err_set(err, r, "cannot build the StartTransientUnit call: %s",
			       strerror(-r));
	}
	r = sd_bus_call(bus, m, 10 * 1000 * 1000ULL, &e, &reply);
	sd_bus_message_unref(m);
	sd_bus_message_unref(reply);
	if (r < 0) {
		err_set(err, r, "systemd refused the scope %s for %s (pid %d): %s", unit, kind,
			(int)pid, e.message ? e.message : strerror(-r));
		sd_bus_error_free(&e);
		return r;
	}
	sd_bus_error_free(&e);
	/* The job that moves the process runs after the reply: wait for its effect. */
	deadline = now_ms() + MOVE_TIMEOUT_MS;
	for (;;) {
		r = pid_in_unit(pid, unit);
		if (r == 1)
			break;
		if (r < 0)
			return err_set(err, r, "%s (pid %d) exited before it was moved to %s", kind,
				       (int)pid, unit);
		if (now_ms() >= deadline)
			return err_set(err, -ETIMEDOUT,
				       "%s (pid %d) was not moved to %s within %ds", kind, (int)pid,
				       unit, MOVE_TIMEOUT_MS / 1000);
		usleep(10 * 1000);
	}
	log_debug("helper", "helper moved to its own scope", "unit", unit, "pid", LOG_INT(pid));
	if (ret_unit)
		snprintf(ret_unit, unit_size, "%s", unit);
	return 1;
}
