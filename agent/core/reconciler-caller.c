/* reconciler-caller.c - a CSI call run to completion on the thread that received it.
 *
 * Kubelet makes its calls one at a time, with its volume manager asleep in between: each finds
 * the agent idle.  Handed from the gRPC thread to the reconciler thread, then to a worker, then
 * back to the reconciler, a publish woke three sleeping threads, each a wake-up of a halted CPU
 * (docs/performance.md, "Calls as kubelet paces them").  Instead, the thread that received the
 * call takes the reconciler's state (state_lock) while the loop sleeps, and does what the loop
 * would: applies the request to the desired state, runs the pass, runs the operation on the
 * call's own path or device itself, as a worker would, and applies its result and answers.
 *
 * The guarantees are the loop's, because it is the loop's code under the loop's lock:
 *  - one decision at a time against the one desired/actual state: state_lock is held for
 *    every step but the operation itself, and the loop holds it for each of its turns;
 *  - one operation per volume and target, unmount before mount: the operation is started by
 *    the pass (rec_op_start puts it in flight), so another call or pass sees the volume busy
 *    until its result is applied, as for an operation a worker runs;
 *  - the journal: the pass saves device records before it hands out the work they describe
 *    (hold_unrecorded_device_work), the CSI entries are saved by the loop's timer
 *    (rec_csi_journal_changed), as before;
 *  - a hung filesystem blocks only the call that touched it: state_lock is dropped while the
 *    operation runs, so the loop, other calls and `volagent status` go on; only the thread
 *    that waits for this call's answer anyway is held.  Operations of the pass that are not
 *    the call's go to the executor, as the loop hands them; and at most REC_CALLER_OPS_MAX
 *    calls run their operation themselves at once, so operations that hang hold at most
 *    that many of the CSI server's pool threads, never all of them.
 * A call that finds the lock taken (the loop is in a turn) is handed to the loop as before:
 * the loop is awake then, so no sleeping thread is woken for it. */
#include <pthread.h>
#include <stdbool.h>

#include "log.h"
#include "macro.h"
#include "reconciler-internal.h"

bool rec_caller_begin(struct reconciler *r)
{
	if (pthread_mutex_trylock(&r->state_lock) != 0)
		return false;
	if (r->loop_running) {
		/* The call's log lines (an operation's result) go out after its answer: a write
		 * to stderr is a pipe to the container runtime or journald, whose reader it
		 * wakes.  Warnings go out at once, and the lines before an operation are written
		 * before it runs, so that nothing logged is held back behind a hang. */
		(void)log_buffer_start();
		return true;
	}
	pthread_mutex_unlock(&r->state_lock); /* not started yet, or stopped */
	return false;
}

/* Whether op is the call's own: on its path, or on its volume's device.  A health check is
 * not (it may wait on a server the call does not need). */
static bool call_owns(const struct volume_op *op, const char *path, const char *volume_name)
{
	if (op->kind == VOLUME_OP_CHECK_HEALTH)
		return false;
	if (streq_ptr(op->target, path))
		return true;
	return (op->kind == VOLUME_OP_MOUNT_DEVICE || op->kind == VOLUME_OP_UNMOUNT_DEVICE) &&
	       streq_ptr(op->volume_name, volume_name);
}

/* Splits list into the call's operations (returned, in order, linked through job.next) and
 * the others, which go to the executor. */
static struct executor_job *take_own(struct reconciler *r, struct volume_op *list, const char *path,
				     const char *volume_name)
{
	struct executor_job *own = NULL, **own_tail = &own;
	struct executor_job *others = NULL, **others_tail = &others;
	struct executor_job *job = list ? &list->job : NULL;

	while (job) {
		struct executor_job *next = job->next;

		job->next = NULL;
		if (call_owns(volume_op_from_job(job), path, volume_name)) {
			*own_tail = job;
			own_tail = &job->next;
		} else {
			*others_tail = job;
			others_tail = &job->next;
		}
		job = next;
	}
	if (others)
		executor_submit_list(r->ex, others);
	return own;
}

void rec_caller_run(struct reconciler *r, const char *path, const char *volume_name,
		    bool (*answered)(void *arg), void *arg)
{
	bool held = false; /* this call paused the mount monitor (rec_monitor_hold) */

	while (!answered(arg) && rec_pass_pending(r)) {
		struct volume_op *list = NULL;
		struct executor_job *own;

		rec_pass_collect(r, &list);
		if (r->caller_ops >= REC_CALLER_OPS_MAX) {
			/* Enough pool threads are held by operations already: a worker runs it. */
			if (list)
				executor_submit_list(r->ex, &list->job);
			break;
		}
		own = take_own(r, list, path, volume_name);
		if (!own)
			break; /* waits for an operation of someone else: the loop answers */
		while (own) {
			struct executor_job *job = own;

			own = job->next;
			job->next = NULL;
			/* As a worker runs it: in flight, with the state free for everyone else.
			 * The first operation pauses the monitor; the pause covers the rest. */
			held |= rec_monitor_hold(r);
			/* The request's time, the CSI entries' save and the monitor's pause are
			 * the loop's to keep, even while the operation hangs. */
			rec_arm_timer(r);
			r->caller_ops++;
			pthread_mutex_unlock(&r->state_lock);
			log_flush();
			job->run(job);
			pthread_mutex_lock(&r->state_lock);
			r->caller_ops--;
			rec_op_done(r, volume_op_from_job(job));
		}
		/* The answer first: whether the request is done is read from the results just
		 * applied, not from the mount table.  Then the mount events the operations made,
		 * before any pass looks at the table again. */
		rec_requests_check_waiting(r);
		if (held)
			rec_monitor_release(r);
		held = false;
	}
}

void rec_caller_end(struct reconciler *r)
{
	/* What the operations' results asked for (another target of the volume, its device):
	 * started as the loop would, on the executor. */
	if (rec_pass_pending(r))
		rec_pass(r);
	rec_requests_check_waiting(r);
	rec_save_journal(r, false);
	rec_arm_timer(r);
	pthread_mutex_unlock(&r->state_lock);
	log_buffer_stop(); /* the answer is out (or the loop gives it): now the lines */
}
