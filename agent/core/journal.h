/* journal.h - what only the agent knows, kept across restarts: which device backs each
 * node-wide device mount, and what attach made for it (a loop device, a FUSE dir, a client).
 *
 * One JSON document, <state-dir>/journal.json, replaced atomically (temp file, fsync, rename,
 * fsync of the directory).  The reconciler marks it dirty and saves it once per pass, so a
 * burst of changes costs one fsync; device entries are saved *before* the attach or mount
 * they describe starts, so a crash in between leaves a record of what may exist.
 *
 * CSI publish and stage entries are kept too ("csi"), so that a restarted agent adopts what
 * kubelet asked for; they are dropped after a reboot, when kubelet asks again.  Secrets are
 * never written.
 *
 * Each save keeps the text it replaces as journal.json.prev.  A journal that cannot be parsed is
 * moved aside (journal.json.corrupt) and reported; the previous copy is read in its place when
 * it parses (a power cut or a failing disk may tear the newest one), else the agent goes on
 * from the mount table alone: pod mounts never depend on the journal. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "actual-state.h"
#include "error.h"

struct journal;

/* Opens (creating) state_dir.  Does not read anything yet. */
int journal_open(const char *state_dir, struct journal **ret, struct error_info *err);
struct journal *journal_free(struct journal *j);

/* journal_load read journal.json.prev: journal.json was corrupt (moved aside). */
#define JOURNAL_LOADED_PREVIOUS 1

/* Loads the device entries into a.  Returns 0 (also when there is no journal yet),
 * JOURNAL_LOADED_PREVIOUS (err says what was wrong with the journal), or -EBADMSG when the
 * journal was corrupt (moved aside) and there was no readable previous copy (err says why; a
 * is left empty).  Sets *ret_same_boot to whether what was read was written during this boot. */
int journal_load(struct journal *j, struct actual_state *a, bool *ret_same_boot, json_t **ret_csi,
		 struct error_info *err);

/* Writes a's device entries, and csi (the CSI desired entries; may be NULL) atomically.  The
 * text of each entry of csi (an array) is kept from one save to the next by the entry's
 * pointer: an entry passed again must not have been modified (build a new one instead). */
int journal_save(struct journal *j, const struct actual_state *a, json_t *csi,
		 struct error_info *err);

void journal_mark_dirty(struct journal *j);
bool journal_is_dirty(const struct journal *j);
/* Saves if dirty.  Returns 0, or -errno (the journal stays dirty and is retried). */
int journal_flush(struct journal *j, const struct actual_state *a, json_t *csi,
		  struct error_info *err);
/* The number of saves so far (for tests and metrics). */
unsigned long journal_save_count(const struct journal *j);
const char *journal_path(const struct journal *j);

/* This boot's id (/proc/sys/kernel/random/boot_id), or "" when unknown. */
const char *journal_boot_id(void);
