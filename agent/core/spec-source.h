/* spec-source.h - the pods directory as a source of desired state, on a bare host.
 *
 * Every "*.json" file (not starting with '.') in the directory is one pod.  Files are read
 * when they are closed after writing (IN_CLOSE_WRITE) or renamed into place (IN_MOVED_TO),
 * never on IN_MODIFY, so a half-written file is not acted on; editor swap and temp files
 * (.x.swp, x.json~, x.json.tmp) do not end in ".json" and are ignored.
 *
 * A file that fails to parse, or claims a uid another file already has, is logged (file,
 * field, reason) and ignored: whatever it declared before stays desired.
 *
 * A file is read only when it is trusted (spec-trust.h: only root could have written it or
 * put it there); anything else is refused with the file and the reason, logged once, shown by
 * `volagent status`, and nothing of it is mounted.  A pods dir that is not safe is said so at
 * start (and whenever that changes), and all its files are refused.  insecure (the
 * --insecure-pods-dir flag, for tests only) skips these checks. */
#pragma once

#include <stdbool.h>

#include "desired-state.h"
#include "error.h"
#include "hashmap.h"

struct spec_source;

int spec_source_new(const char *pods_dir, bool insecure, struct desired_state *dsw,
		    struct spec_source **ret, struct error_info *err);
struct spec_source *spec_source_free(struct spec_source *s);
int spec_source_get_fd(const struct spec_source *s);
/* Reads every file of the directory (at start, and after an inotify queue overflow), and logs
 * one summary line (files, volumes, refused); each refused file still gets its own error
 * line.  Returns 1 when the desired state changed, 0, or -errno. */
int spec_source_scan(struct spec_source *s);
/* spec_source_scan() in two halves: begin lists the directory and starts parsing the files
 * on a helper thread; finish parses what is left on the caller's thread, waits for the
 * helper and applies the results to the desired state (only finish touches it).  The caller
 * may do independent work in between, e.g. read the mount table.  begin returns 0 or -errno
 * (-EBUSY: a scan is already under way); finish returns what spec_source_scan() does. */
int spec_source_scan_begin(struct spec_source *s);
int spec_source_scan_finish(struct spec_source *s);
/* Handles the pending inotify events of one read (a batch of some tens of files; the fd stays
 * readable while more are queued).  Returns 1 when the desired state changed, 0, or -errno. */
int spec_source_dispatch(struct spec_source *s);
/* The next rejected file from it (start with HASHMAP_ITER_INIT), its name and why; false at
 * the end.  The strings live until the next call that reads files. */
bool spec_source_next_rejected(const struct spec_source *s, struct hashmap_iter *it,
			       const char **ret_name, const char **ret_reason);
const char *spec_source_dir(const struct spec_source *s);
/* Why the pods dir is not trusted, or NULL. */
const char *spec_source_dir_error(const struct spec_source *s);
/* How many files are currently rejected. */
unsigned spec_source_rejected_count(const struct spec_source *s);
/* Whether name is a file this source reads. */
bool spec_source_wants_name(const char *name);
