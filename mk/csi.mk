# csi.mk - the CSI transport: protobuf-c code generated from proto/ at build time, and the
# gRPC core and protobuf-c libraries.  Included by the top Makefile before it computes flags
# and object lists.
#
# Generated files are build outputs under $(BUILD)/gen (never committed); the top Makefile has
# settled BUILD (build, or build-sanitize for SANITIZE=1) before including this fragment.

CSI_GEN := $(BUILD)/gen

PROTOC_C ?= protoc-c
# Protobuf's well-known types: Debian ships their .proto files, not C code for them.
CSI_WKT_DIR ?= /usr/include
CSI_WKT := google/protobuf/wrappers google/protobuf/timestamp
CSI_PROTOS := csi pluginregistration

CSI_GEN_SRCS := $(foreach p,$(CSI_PROTOS) $(CSI_WKT),$(CSI_GEN)/$(p).pb-c.c)
CSI_GEN_HDRS := $(CSI_GEN_SRCS:.c=.h)

GEN_SRCS += $(CSI_GEN_SRCS)
GEN_HDRS += $(CSI_GEN_HDRS)
PKGS += libprotobuf-c
# gRPC core is not linked: agent/csi/grpc-core.c dlopen()s it when the CSI service (or a
# client call) first needs it, so a daemon without CSI never maps it.  Its soname comes from
# the installed library, so the dlopen and the binary's .note.dlopen follow the package.
# (Programs that call gRPC themselves, like tests/bench/csi-bench, link -lgrpc -lgpr.)
GRPC_SONAME := $(shell objdump -p $$($(CC) -print-file-name=libgrpc.so) 2>/dev/null | \
		 awk '$$1 == "SONAME" {print $$2}')
# Every build of the file (normal, sanitizer, fuzz) gets it.
GCORE_DEFS := -DGCORE_GRPC_SONAME='"$(GRPC_SONAME)"'
%/agent/csi/grpc-core.o: CFLAGS += $(GCORE_DEFS)
%/agent/csi/grpc-core.o: FUZZ_CFLAGS += $(GCORE_DEFS)

$(CSI_GEN)/%.pb-c.c $(CSI_GEN)/%.pb-c.h: proto/%.proto
	@mkdir -p $(CSI_GEN)
	$(PROTOC_C) -Iproto -I$(CSI_WKT_DIR) --c_out=$(CSI_GEN) $<

$(CSI_GEN)/google/protobuf/%.pb-c.c $(CSI_GEN)/google/protobuf/%.pb-c.h: \
		$(CSI_WKT_DIR)/google/protobuf/%.proto
	@mkdir -p $(CSI_GEN)
	$(PROTOC_C) -I$(CSI_WKT_DIR) --c_out=$(CSI_GEN) google/protobuf/$*.proto
