# kvsplice build. `make` builds everything into build/; `make test` runs all
# tests; `make run` starts a demo fleet and prints what happened. `make deps`
# installs missing Debian packages (and mounts bpffs); `test`, `run` and the
# benchmarks run it first, a plain build does not.
#
# Each folder says what it builds in its module.mk; this file holds what they
# share. Layers, each seeing only the headers below it (the include paths
# enforce it; scripts/layering.sh checks the calls):
#   include/kvsplice  kernel <-> user ABI
#   user/core         libkvs.a: what the daemon and the tools share
#   user/model        libkvsmodel.a: the backend simulator's model
#   user/kvspliced    the daemon (libkvspliced.a + main.o)
#   tools/*           one folder a program

BUILD     ?= build
CC        ?= gcc
CLANG     ?= clang
BPFTOOL   ?= bpftool
ARCH      := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)

# SAN=1 builds userspace with ASan and UBSan (make test SAN=1).
SAN       ?= 0
WARN      := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CFLAGS    ?= -O2 -g
CFLAGS    += $(WARN) -std=gnu11 -D_GNU_SOURCE -Iinclude -I/usr/include/libnl3
LDLIBS    := -lbpf -luring -lelf -lz -lm
ifeq ($(SAN),1)
CFLAGS    += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS   += -fsanitize=address,undefined
endif

BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
	-Iinclude -I/usr/include/$(MULTIARCH)

CORE_INC  := -Iuser/core
MODEL_INC := $(CORE_INC) -Iuser/model

LIB       := $(BUILD)/libkvs.a
MODEL_LIB := $(BUILD)/libkvsmodel.a
GW_LIB    := $(BUILD)/libkvspliced.a

PROGS     :=
.SECONDARY:
.PHONY: all deps test test-loaded unit integration run clean format format-check lint layering llama llama-server bench \
	bench-datapath \
	fuzz soak install

all:

include bpf/module.mk
include user/core/module.mk
include user/model/module.mk
include user/kvspliced/module.mk
include tools/kvsplicectl/module.mk
include tools/kvsplice-sim/module.mk
include tools/kvsplice-bench/module.mk
include tools/kvsplice-adapter/module.mk
include tools/kvsplice-http/module.mk
include tests/module.mk

all: $(PROGS) $(UNIT_TESTS) $(HELPERS) $(FUZZ)

deps:
	@scripts/deps.sh

# Every C object: its folder's module.mk sets INC (the layers it may see).
$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(INC) -MMD -MP -c $< -o $@

# make install [PREFIX=/usr/local] [DESTDIR=]: programs, the systemd units,
# the docs, and a configuration file where the unit reads it (an example with
# every key commented out, never over an existing one). The units go where
# systemd looks for a PREFIX: /lib/systemd/system for /usr (Debian's),
# PREFIX/lib/systemd/system otherwise (/usr/local/lib/systemd/system is
# searched too); UNITDIR=/etc/systemd/system for a PREFIX it does not search.
PREFIX    ?= /usr/local
SBINDIR   := $(PREFIX)/sbin
BINDIR    := $(PREFIX)/bin
DOCDIR    := $(PREFIX)/share/doc/kvsplice
UNITDIR   ?= $(if $(filter /usr /usr/,$(PREFIX)),/lib/systemd/system,$(PREFIX)/lib/systemd/system)
SYSCONFDIR ?= /etc
CONF      := $(SYSCONFDIR)/kvsplice/kvspliced.conf
UNIT_SED  := 's|@SBINDIR@|$(SBINDIR)|g; s|@BINDIR@|$(BINDIR)|g; s|@DOCDIR@|$(DOCDIR)|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g'

# The gateway under mixed load for SOAK_MINUTES (default 3): RSS, descriptors
# and map sizes at start, every round and at the end.
soak: deps
	@$(MAKE) --no-print-directory all
	scripts/soak.sh $(BUILD)

# Fuzzes the codec for FUZZ_TIME seconds, growing a corpus in BUILD/fuzz.
fuzz: $(FUZZ)
	@mkdir -p $(BUILD)/fuzz/corpus
	$(FUZZ) -max_total_time=$(FUZZ_TIME) -print_final_stats=1 $(BUILD)/fuzz/corpus tests/fuzz/corpus

test: deps llama
	@$(MAKE) --no-print-directory all
	KVS_REQUIRE_LLAMA=1 LLAMA_SERVER=$(LLAMA_PREFIX)/bin/llama-server tests/run.sh $(BUILD)

# The same suite with two CPU hogs spinning beside it (tests/run.sh,
# KVS_TEST_HOGS): what passes only on a quiet machine is a bug.
test-loaded: deps llama
	@$(MAKE) --no-print-directory all
	KVS_TEST_HOGS=2 KVS_REQUIRE_LLAMA=1 LLAMA_SERVER=$(LLAMA_PREFIX)/bin/llama-server \
		tests/run.sh $(BUILD)

unit: $(UNIT_TESTS)
	tests/run.sh $(BUILD) unit

run: deps
	@$(MAKE) --no-print-directory all
	scripts/demo.sh $(BUILD)

# Which file calls which, from the objects' symbols: fails on a cycle or a
# call against the layers (also run by make test, tests/integration).
layering: all
	scripts/layering.sh $(BUILD)

# Benchmarks measure; their numbers go to docs/EVALUATION.md with the command.
bench: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/kvsplice-bench decisions

# The data-path benchmark: direct, kernel path, userspace path and HAProxy
# (installed here if missing), side by side (docs/EVALUATION.md).
bench-datapath:
	@scripts/deps.sh haproxy
	@$(MAKE) --no-print-directory all
	@systemctl stop haproxy 2>/dev/null || true
	$(BUILD)/kvsplice-bench datapath $(DATAPATH_ARGS)

# A real inference server, for tests (make test runs this first) and by hand:
# llama-server built from the llama.cpp source node-llama-cpp ships, installed
# as LLAMA_PREFIX/bin/llama-server (the converter and vocabulary the model
# needs in LLAMA_PREFIX/lib/kvsplice/llama), and a tiny random-weight model,
# BUILD/llama/tiny.gguf (scripts/llama.sh). Seconds when that build is
# installed; ~12 minutes on two cores when not. LLAMA_FORCE=1 builds anyway,
# LLAMA_JOBS=N sets the build's jobs.
LLAMA_PREFIX ?= /usr/local
llama: deps
	@$(MAKE) --no-print-directory $(BUILD)/tests/helpers/llama2c_ckpt
	@scripts/llama.sh $(BUILD) $(LLAMA_PREFIX)

llama-server: llama

SRC_DIRS  := bpf bpf/datapath tests/bpf include/kvsplice user/core user/model user/kvspliced \
	     user/kvspliced/datapath tools/kvsplicectl \
	tools/kvsplice-sim tools/kvsplice-bench tools/kvsplice-adapter tools/kvsplice-http tests/unit tests/helpers tests/fuzz
FORMAT_SRCS = $(foreach d,$(SRC_DIRS),$(wildcard $(d)/*.c $(d)/*.h))
# .clang-format is the kernel's style; the tree was formatted with it once,
# and tests/integration/test_format.sh (make test) keeps it so.
format:
	clang-format -i $(FORMAT_SRCS)

format-check:
	clang-format --dry-run --Werror $(FORMAT_SRCS)

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--suppress=missingIncludeSystem --suppress=unknownMacro -Iinclude \
		-Iuser/core -Iuser/model -Iuser/kvspliced user tools

install: $(PROGS)
	install -D -m 0755 $(BUILD)/kvspliced $(DESTDIR)$(SBINDIR)/kvspliced
	install -D -m 0755 $(BUILD)/kvsplicectl $(DESTDIR)$(SBINDIR)/kvsplicectl
	install -D -m 0755 $(BUILD)/kvsplice-sim $(DESTDIR)$(BINDIR)/kvsplice-sim
	install -D -m 0755 $(BUILD)/kvsplice-bench $(DESTDIR)$(BINDIR)/kvsplice-bench
	install -D -m 0755 $(BUILD)/kvsplice-adapter $(DESTDIR)$(BINDIR)/kvsplice-adapter
	install -D -m 0755 $(BUILD)/kvsplice-http $(DESTDIR)$(BINDIR)/kvsplice-http
	install -d $(DESTDIR)$(DOCDIR)
	install -m 0644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 dist/kvspliced.conf $(DESTDIR)$(DOCDIR)/kvspliced.conf.example
	install -d $(DESTDIR)$(UNITDIR)
	for u in kvspliced.service kvsplice-adapter@.service kvsplice-http.service; do \
		sed $(UNIT_SED) dist/$$u > $(DESTDIR)$(UNITDIR)/$$u && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/kvsplice
	@if [ -e $(DESTDIR)$(CONF) ]; then \
		echo "make install: $(DESTDIR)$(CONF) exists, left as it is"; \
	else \
		{ printf '%s\n' "# Installed by make install, every backend commented out: name yours" \
			"# below (kvspliced will not start without one). The full example:" \
			"# $(DOCDIR)/kvspliced.conf.example" ""; \
		  sed 's/^backend = /# backend = /' dist/kvspliced.conf; } > $(DESTDIR)$(CONF) && \
		chmod 0644 $(DESTDIR)$(CONF) && echo "make install: wrote $(DESTDIR)$(CONF)"; \
	fi

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
