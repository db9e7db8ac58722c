/* metrics.h - the agent's Prometheus metrics: counters, gauges and histograms kept in
 * memory, updated from any thread, rendered in the text exposition format.
 *
 *   volagent_operations_started_total{plugin,operation}      counter
 *   volagent_operations_succeeded_total{plugin,operation}    counter
 *   volagent_operations_failed_total{plugin,operation}       counter
 *   volagent_operation_duration_seconds{plugin,operation}    histogram
 *   volagent_csi_calls_total{method,code}                    counter
 *   volagent_device_inventory_changes_total                  counter
 *   volagent_device_renames_total                            counter
 *   volagent_reconcile_passes_total                          counter
 *   volagent_journal_save_failures_total                     counter
 *   volagent_journal_writable (1: the last save worked)      gauge
 *   volagent_reconcile_pass_duration_seconds                 histogram
 *   volagent_volumes_desired, volagent_volumes_mounted,
 *   volagent_volumes_in_backoff, volagent_devices_attached,
 *   volagent_oldest_pending_operation_age_seconds,
 *   volagent_volumes_on_node, volagent_stale_stages             gauges
 *
 * Operations are the plugin calls: attach, mount_device, set_up, tear_down, unmount_device,
 * detach, map_device, unmap_device (raw block), expand, check_set_up (adopting a mount after a
 * restart), construct_spec (a volume's spec rebuilt from what is mounted) and check_health. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

void metrics_op_started(const char *plugin, const char *operation);
void metrics_op_finished(const char *plugin, const char *operation, bool ok, double seconds);
void metrics_csi_call(const char *method, const char *code);
void metrics_device_inventory_changed(void);
void metrics_device_renamed(void);
void metrics_reconcile_pass(double seconds);
/* A journal save's outcome: sets the writable gauge, counts failures. */
void metrics_journal_save(bool ok);
/* Volumes still on the node (published, staged or attached: what `volagent drain-check`
 * waits for), and of those the lost stages (staged or attached with no pod for longer than
 * --stale-stage-after). */
void metrics_set_node_gauges(size_t on_node, size_t stale_stages);
void metrics_set_volume_gauges(size_t desired, size_t mounted, unsigned in_backoff, size_t devices,
			       double oldest_pending_age_seconds);

/* The text exposition of every metric; caller frees. */
char *metrics_render(void);
/* Forgets everything (tests). */
void metrics_reset(void);
