/* dlopen-note.h - DLOPEN_NOTE(): an ELF note in section .note.dlopen naming the libraries a
 * file dlopen()s, in the format systemd uses (FDO_DLOPEN_METADATA: the owner "FDO" and a JSON
 * array of {"feature", "description", "priority", "soname": [...]}).  Tools that derive a
 * package list from a binary (scripts/build-image) read it to find libraries that ldd cannot
 * see.  Used next to each dlopen(): agent/csi/grpc-core.c (gRPC), plugins/rbd/rbd-ceph.c
 * (librados, librbd), lib/luks.c (libcryptsetup). */
#pragma once

#include <stdint.h>

#define DLOPEN_NOTE_TYPE 0x407c0c0a /* FDO_DLOPEN_METADATA */
#define DLOPEN_NOTE_SIZE(json) ((sizeof(json) + 3) & ~3)

/* A static note called ident holding json (a string literal), padded to 4 bytes. */
#define DLOPEN_NOTE(ident, json)                                                         \
	__attribute__((used, section(".note.dlopen"), aligned(4))) static const struct { \
		uint32_t n_namesz, n_descsz, n_type;                                     \
		char name[4];                                                            \
		char desc[DLOPEN_NOTE_SIZE(json)];                                       \
	} ident = {                                                                      \
		.n_namesz = 4,                                                           \
		.n_descsz = DLOPEN_NOTE_SIZE(json),                                      \
		.n_type = DLOPEN_NOTE_TYPE,                                              \
		.name = "FDO",                                                           \
		.desc = json,                                                            \
	}
