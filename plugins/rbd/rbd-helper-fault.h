/* rbd-helper-fault.h - the tests' forced failures of `volagent rbd-helper` (a hang or a crash
 * inside librados, which cannot be produced for real on demand), as a seam that exists only in
 * a test build.  Both are weak and defined by tests/lib/rbd-helper-fault.c alone, which is
 * linked into the test binaries and $(BUILD)/volagent-test, never into $(BUILD)/volagent: there
 * they are NULL, and the agent neither reads the tests' switch nor hands it to the helper. */
#ifndef VOLAGENT_RBD_HELPER_FAULT_H
#define VOLAGENT_RBD_HELPER_FAULT_H

/* In the helper, after the request for op (check, watchers, blocklist) was read: hangs or
 * aborts when the test asked for it. */
void rbd_helper_fault_apply(const char *op) __attribute__((weak));

/* In the daemon: the "NAME=VALUE" to add to the helper's environment, or NULL for none.
 * Returns a string the caller frees. */
char *rbd_helper_fault_env(void) __attribute__((weak));

#endif
