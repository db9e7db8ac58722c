# volagent - a per-node volume agent.  See README.md.
#
#   make            build build/volagent
#   make check      build and run every test (root for the integration tests)
#   make check SANITIZE=1   the same under ASan + UBSan
#   make check-fast the tests that need no VM, Ceph cluster or valgrind (a few minutes)
#   make install    PREFIX=/usr/local DESTDIR=
#   make deps       install the Debian packages needed to build and test
#
# Feature areas add their sources, packages and test steps in mk/*.mk.

.DEFAULT_GOAL := all
VERSION := 0.1.0
PREFIX ?= /usr/local
DESTDIR ?=
BUILD ?= build
ifeq ($(SANITIZE),1)
BUILD := build-sanitize
endif
CC ?= cc
PKG_CONFIG ?= pkg-config

PKGS := mount blkid libudev jansson libsystemd libtirpc
# Headers only: dlopen()ed at run time (mk/crypt.mk).
PKGS_HEADERS := libcryptsetup
LIBS_EXTRA := -lpthread
AGENT_SRCS := $(wildcard lib/*.c plugins/*.c plugins/nfs/*.c plugins/rbd/*.c agent/core/*.c \
		agent/csi/*.c agent/devices/*.c) $(filter-out agent/main.c,$(wildcard agent/*.c))
GEN_SRCS :=
GEN_HDRS :=
TEST_LIB_SRCS := $(wildcard tests/lib/*.c)
TEST_SRCS := $(wildcard tests/test-*.c)
# Extra steps of `make check`: scripts run after the C test binaries, by tests/run-tests.sh.
CHECK_SCRIPTS :=

-include $(sort $(wildcard mk/*.mk))

# The rooms (docs/architecture.md) and what each may include: lib <- plugins <- core <- csi,
# devices, commands.  The compiler enforces the direction: a file sees only the headers of its
# own room and the rooms below it.
INC_LIB := -Ilib
INC_PLUGINS := $(INC_LIB) -Iplugins
INC_CORE := $(INC_PLUGINS) -Iagent/core
INC_CSI := $(INC_CORE) -Iagent/csi -I$(BUILD)/gen
INC_DEVICES := $(INC_LIB) -Iagent/devices
ALL_INCLUDES := $(INC_CORE) -Iplugins/nfs -Iplugins/rbd -Iagent/csi -Iagent/devices -Iagent \
		-I$(BUILD)/gen
INCLUDES = $(ALL_INCLUDES)
$(BUILD)/lib/%.o: INCLUDES = $(INC_LIB)
$(BUILD)/plugins/%.o: INCLUDES = $(INC_PLUGINS)
$(BUILD)/plugins/nfs/%.o: INCLUDES = $(INC_PLUGINS) -Iplugins/nfs
$(BUILD)/plugins/rbd/%.o: INCLUDES = $(INC_PLUGINS) -Iplugins/rbd
$(BUILD)/agent/core/%.o: INCLUDES = $(INC_CORE)
$(BUILD)/agent/csi/%.o: INCLUDES = $(INC_CSI)
$(BUILD)/agent/devices/%.o: INCLUDES = $(INC_DEVICES)
# The one set of warnings and language flags of every build: normal, sanitizer, fuzz, bench.
WARNINGS := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	    -Wno-unused-parameter
BASE_CFLAGS := -std=gnu11 $(WARNINGS) -fno-strict-aliasing -D_GNU_SOURCE \
	       -DVOLAGENT_VERSION='"$(VERSION)"'
CFLAGS ?= -O2 -g
CFLAGS += $(BASE_CFLAGS) $(INCLUDES)
ifeq ($(SANITIZE),1)
CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
# Everything runs 2-3x slower under ASan: the tests' waits stretch with it (tests/lib).
TEST_TIME_SCALE ?= 2
export TEST_TIME_SCALE
endif
# A missing library stops the build with the name of its pkg-config package (not with a
# compiler error about a header), except for the targets that install or clean.
ifeq ($(filter deps test-deps clean fuzz-clean,$(MAKECMDGOALS)),)
# The tests also need cmocka.
CHECKED_PKGS := $(PKGS) $(PKGS_HEADERS) $(if $(filter check%,$(MAKECMDGOALS)),cmocka)
MISSING_PKGS := $(strip $(foreach p,$(CHECKED_PKGS),$(if $(shell $(PKG_CONFIG) --exists $(p) && echo y),,$(p))))
ifneq ($(MISSING_PKGS),)
$(error pkg-config finds no $(MISSING_PKGS): install the dependencies first (scripts/install-deps build, or test for the tests))
endif
endif
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) $(PKGS_HEADERS) 2>/dev/null)
PKG_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
CFLAGS += $(PKG_CFLAGS)

AGENT_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(AGENT_SRCS)) $(GEN_SRCS:.c=.o)
TEST_LIB_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(TEST_LIB_SRCS))
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
LIBAGENT := $(BUILD)/libvolagent.a

.PHONY: all check check-fast check-format install uninstall clean deps test-deps
# Every file made on the way to another (a test binary's objects, the generated protobuf-c
# sources, the fuzz targets' objects) is kept: make would otherwise delete them after the run
# (rebuilding them next time), and its "rm" line would come after the test summary.  Only
# this empty form does it: a .SECONDARY with files anywhere else makes it those files alone.
.SECONDARY:
all: $(BUILD)/volagent

$(BUILD)/%.o: %.c $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

# Generated sources live in $(BUILD)/gen already; their objects go beside them.
$(BUILD)/gen/%.o: $(BUILD)/gen/%.c $(GEN_HDRS)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(LIBAGENT): $(AGENT_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/volagent: $(BUILD)/agent/main.o $(LIBAGENT)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LIBS_EXTRA)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_LIB_OBJS) $(LIBAGENT)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LIBS_EXTRA) $$($(PKG_CONFIG) --libs cmocka)

# Tests build fixed-size paths freely; truncation there is not a bug worth a warning.
$(BUILD)/tests/%.o: CFLAGS += -Itests/lib -Wno-format-truncation $(shell $(PKG_CONFIG) --cflags cmocka 2>/dev/null)
$(BUILD)/tests/lib/%.o: CFLAGS += -Itests/lib -Wno-format-truncation

check: $(BUILD)/volagent $(TEST_BINS)
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="$(CHECK_SCRIPTS)" \
		tests/run-tests.sh $(TEST_BINS)

# The C tests that need no VM, no Ceph cluster and no valgrind: a few minutes, for the
# edit-build-test loop.  `make check` stays the whole suite (what .ci/run runs).
# The code's format (.clang-format); CI runs it before the tests.
check-format:
	scripts/check-format

check-fast: $(BUILD)/volagent $(TEST_BINS)
	BUILD=$(BUILD) VOLAGENT_BIN=$(BUILD)/volagent CHECK_SCRIPTS="" tests/run-tests.sh $(TEST_BINS)

install: $(BUILD)/volagent
	install -D -m 0755 $(BUILD)/volagent $(DESTDIR)$(PREFIX)/bin/volagent
	install -D -m 0644 systemd/volagent.service $(DESTDIR)$(PREFIX)/lib/systemd/system/volagent.service
	sed -i 's|@BINDIR@|$(PREFIX)/bin|g; s|@DOCDIR@|$(PREFIX)/share/doc/volagent|g' \
		$(DESTDIR)$(PREFIX)/lib/systemd/system/volagent.service
	install -D -m 0644 README.md $(DESTDIR)$(PREFIX)/share/doc/volagent/README.md
	install -D -m 0644 systemd/volagent.json $(DESTDIR)/etc/volagent/volagent.json.example
	install -d -m 0755 $(DESTDIR)/etc/volagent/pods.d

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/volagent $(DESTDIR)$(PREFIX)/lib/systemd/system/volagent.service
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/volagent

# Debian packages to build and run (deps) and to run every test (test-deps).
deps:
	scripts/install-deps build
test-deps:
	scripts/install-deps test

clean:
	rm -rf build build-sanitize

-include $(shell find $(BUILD) -type f -name '*.d' 2>/dev/null)
