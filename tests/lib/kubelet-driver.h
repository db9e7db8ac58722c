/* kubelet-driver.h - running tests/kubelet/lifecycle.py (the kubelet-faithful test driver)
 * against an agent under test, for the C tests that give it volumes: the agent started as a
 * DaemonSet runs it (node id "node-a", not the hostname), one volume's whole lifecycle run and
 * its PASS/FAIL lines printed, and the loop devices the driver takes as kubelet's lock
 * detached.  The functions fail the running cmocka test on error. */
#pragma once

#include "csi-env.h"

/* Starts `volagent run --csi` on e's kubelet root with --node-id node-a and waits until it
 * serves (see csi_env_start). */
void kubelet_driver_start_agent(struct csi_env *e);

/* Runs lifecycle.py for the PV described by pv_json (and, when bad_pv_json is not NULL, a PV
 * whose stage must fail with a final code), labelled label; the Node carries kubelet's own
 * kubernetes.io/hostname label (this host's name).  Fails the test unless every check
 * passed. */
void kubelet_driver_run(struct csi_env *e, const char *label, const char *pv_json,
			const char *bad_pv_json);

/* kubelet_driver_run() with extra arguments for lifecycle.py (NULL-terminated), e.g.
 * --selinux-label LABEL. */
void kubelet_driver_run_args(struct csi_env *e, const char *label, const char *pv_json,
			     const char *bad_pv_json, const char *const extra[]);

/* Detaches every loop device whose backing file lies below kubelet_root (kubelet's locks,
 * left by a run that failed half way). */
void kubelet_driver_detach_locks(const char *kubelet_root);
