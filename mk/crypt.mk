# crypt.mk - libcryptsetup is not linked: lib/luks.c dlopen()s it at its first call (an
# encrypted volume), so an agent that never opens one never maps it and what it pulls in
# (libdevmapper, libcrypto, libargon2, libjson-c).  Its headers are still needed (PKGS_HEADERS
# in the Makefile); its soname comes from the installed library, so the dlopen and the
# binary's .note.dlopen follow the package.
CRYPTSETUP_SONAME := $(shell objdump -p $$($(CC) -print-file-name=libcryptsetup.so) 2>/dev/null | \
		      awk '$$1 == "SONAME" {print $$2}')
LUKS_DEFS := -DLUKS_CRYPTSETUP_SONAME='"$(CRYPTSETUP_SONAME)"'
# Every build of the file (normal, sanitizer, fuzz) gets it.
%/lib/luks.o: CFLAGS += $(LUKS_DEFS)
%/lib/luks.o: FUZZ_CFLAGS += $(LUKS_DEFS)
