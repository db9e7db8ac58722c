/* quantity.h - a Kubernetes resource quantity of bytes ("512Mi", "10Gi", "1G", "1048576"),
 * as a pod spec file's `local.size` and a CSI volume_context's `size` give it. */
#pragma once

#include <stdint.h>

#include "error.h"

/* Parses s strictly: digits, an optional decimal fraction, then nothing or one of the
 * suffixes k M G T P E (powers of 1000) or Ki Mi Gi Ti Pi Ei (powers of 1024).  A fraction
 * that leaves part of a byte is rounded up (as Kubernetes rounds a quantity up to an
 * integer).  Refused: an empty string, a sign, spaces, exponents ("1e9"), milli ("500m"),
 * zero, and values beyond 2^63-1.  field names the input in the message ("size: ...").
 * Returns 0 and stores the bytes in *ret_bytes, or -EINVAL (-ERANGE when too big). */
int quantity_parse_bytes(const char *s, const char *field, uint64_t *ret_bytes,
			 struct error_info *err);
