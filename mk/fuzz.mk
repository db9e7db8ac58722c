# fuzz.mk - libFuzzer targets for every parser of outside input (tests/fuzz/fuzz-*.c): pod spec
# files, CSI requests (decoded from arbitrary bytes through the server's own checks), saved OSD
# records, mount option strings and the journal.  See docs/hardening.md.
#
#   make fuzz                      builds the targets and runs each for FUZZ_SECONDS (60)
#   make fuzz FUZZ_SECONDS=600     longer; new inputs accumulate in build-fuzz/work/<target>
#   make fuzz-smoke                each target over its seed corpus only (a few seconds)
#   make fuzz-build                only builds them
#
# The targets are built with clang (-fsanitize=fuzzer,address,undefined) from the agent and
# plugin sources into build-fuzz/, never mixed with the gcc objects of build/.  `make check`
# runs tests/fuzz/run.sh: the seed corpus, then each target for FUZZ_SECONDS (default 20 there).

FUZZ_CC ?= clang
FUZZ_BUILD := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz-*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(FUZZ_BUILD)/%,$(FUZZ_SRCS))
FUZZ_LIB := $(FUZZ_BUILD)/libvolagent-fuzz.a
# AGENT_SRCS and GEN_SRCS (csi.mk) are known here; the pkg-config flags only later, hence '='.
FUZZ_AGENT_OBJS := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(AGENT_SRCS)) \
	$(patsubst $(CSI_GEN)/%.c,$(FUZZ_BUILD)/gen/%.o,$(GEN_SRCS))
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -O1 -g $(BASE_CFLAGS) $(ALL_INCLUDES) -I$(CSI_GEN) $(PKG_CFLAGS) \
	$(FUZZ_SAN) -fsanitize=fuzzer-no-link

CHECK_SCRIPTS += tests/fuzz/run.sh

.PHONY: fuzz fuzz-build fuzz-smoke
fuzz-build: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_WORK=$(FUZZ_BUILD)/work \
		tests/fuzz/run.sh

fuzz-smoke: $(FUZZ_BINS)
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=0 tests/fuzz/run.sh

# `make check` builds the targets when clang is there; run.sh skips (77) without them,
# unless CI=true.
ifneq ($(shell command -v $(FUZZ_CC) 2>/dev/null),)
check: $(FUZZ_BINS)
endif

$(FUZZ_BUILD)/%.o: %.c $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_BUILD)/gen/%.o: $(CSI_GEN)/%.c $(GEN_HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_LIB): $(FUZZ_AGENT_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz-%: $(FUZZ_BUILD)/tests/fuzz/fuzz-%.o $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS) $(LIBS_EXTRA)

clean: fuzz-clean
.PHONY: fuzz-clean
fuzz-clean:
	rm -rf $(FUZZ_BUILD)

-include $(shell find $(FUZZ_BUILD) -type f -name '*.d' 2>/dev/null)
