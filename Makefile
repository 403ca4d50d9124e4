# kvsplice build. `make` builds everything into build/; `make test` runs all
# tests; `make run` starts a demo fleet and prints what happened. Every target
# first runs `make deps`, which installs missing Debian packages.

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
CFLAGS    += $(WARN) -std=gnu11 -D_GNU_SOURCE -Iinclude -Iuser -I$(BUILD) -I/usr/include/libnl3
LDLIBS    := -lbpf -luring -lelf -lz -lm
ifeq ($(SAN),1)
CFLAGS    += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS   += -fsanitize=address,undefined
endif

BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
	-Iinclude -I/usr/include/$(MULTIARCH)

BPF_OBJS  := $(BUILD)/kvsplice.bpf.o $(BUILD)/admission.bpf.o
SKELS     := $(BUILD)/kvsplice.skel.h $(BUILD)/admission.skel.h

# Modules shared by the daemon and the tools.
LIB_SRCS  := user/log.c user/buf.c user/codec.c user/netutil.c user/chash.c user/prompt.c \
	user/pins.c user/model.c user/prefix_cache.c user/stats.c user/args.c user/idmap.c user/policy.c user/engine.c \
	user/trace.c user/handover.c user/metrics.c user/config.c user/sdnotify.c
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
LIB       := $(BUILD)/libkvs.a

GW_SRCS   := user/kvspliced.c user/gateway.c user/gw_control.c user/gw_userpath.c user/gw_sendq.c user/datapath.c user/admission.c
PROGS     := $(BUILD)/kvspliced $(BUILD)/kvsplicectl $(BUILD)/kvsplice-sim $(BUILD)/kvsplice-bench

UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
# Programs the integration tests drive (not tests by themselves).
HELPERS   := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(wildcard tests/helpers/*.c))

# libFuzzer target for the codec (clang; its own sanitizers).
FUZZ      := $(BUILD)/fuzz/fuzz_codec
FUZZ_TIME ?= 60

.SECONDARY:
.PHONY: all deps test unit integration run clean format lint bench bench-datapath fuzz soak install

# make install [PREFIX=/usr/local] [DESTDIR=]: programs, the systemd unit,
# the docs.
PREFIX    ?= /usr/local
SBINDIR   := $(PREFIX)/sbin
BINDIR    := $(PREFIX)/bin
DOCDIR    := $(PREFIX)/share/doc/kvsplice
UNITDIR   ?= /lib/systemd/system
all: $(PROGS) $(UNIT_TESTS) $(HELPERS) $(FUZZ)

$(BUILD)/.deps-ok: scripts/deps.sh
	@scripts/deps.sh
	@mkdir -p $(BUILD) && touch $@
deps:
	@scripts/deps.sh

$(BUILD)/%.bpf.o: bpf/%.bpf.c include/kvsplice/*.h | $(BUILD)/.deps-ok
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@

$(BUILD)/%.o: %.c $(SKELS) | $(BUILD)/.deps-ok
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJS)
	$(AR) rcs $@ $^

$(BUILD)/kvspliced: $(GW_SRCS:%.c=$(BUILD)/%.o) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/kvsplice-bench: $(BUILD)/tools/kvsplice-bench.o $(BUILD)/tools/bench_decisions.o \
		$(BUILD)/tools/bench_sim.o $(BUILD)/tools/bench_plot.o \
		$(BUILD)/tools/bench_datapath.o $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lpthread

$(BUILD)/kvsplicectl: $(BUILD)/tools/kvsplicectl.o $(BUILD)/tools/ctl_control.o \
		$(BUILD)/tools/ctl_conns.o $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lnl-idiag-3 -lnl-3

$(BUILD)/kvsplice%: $(BUILD)/tools/kvsplice%.o $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/helpers/%: $(BUILD)/tests/helpers/%.o $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/test_%: $(BUILD)/tests/unit/test_%.o $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lcmocka

$(FUZZ): tests/fuzz/fuzz_codec.c user/codec.c user/buf.c include/kvsplice/*.h user/codec.h \
		user/buf.h | $(BUILD)/.deps-ok
	@mkdir -p $(@D)
	$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE $(WARN) -Iinclude -Iuser \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(filter %.c,$^) -o $@

# The gateway under mixed load for SOAK_MINUTES (default 3): RSS, descriptors
# and map sizes at start, every round and at the end.
soak: all
	scripts/soak.sh $(BUILD)

# Fuzzes the codec for FUZZ_TIME seconds, growing a corpus in BUILD/fuzz.
fuzz: $(FUZZ)
	@mkdir -p $(BUILD)/fuzz/corpus
	$(FUZZ) -max_total_time=$(FUZZ_TIME) -print_final_stats=1 $(BUILD)/fuzz/corpus tests/fuzz/corpus

test: all
	tests/run.sh $(BUILD)

unit: $(UNIT_TESTS)
	tests/run.sh $(BUILD) unit

run: all
	scripts/demo.sh $(BUILD)

# Benchmarks measure; their numbers go to docs/EVALUATION.md with the command.
bench: all
	$(BUILD)/kvsplice-bench decisions

# The data-path benchmark: direct, kernel path, userspace path and HAProxy
# (installed here if missing), side by side (docs/EVALUATION.md).
bench-datapath: all
	@command -v haproxy >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q haproxy
	@systemctl stop haproxy 2>/dev/null || true
	$(BUILD)/kvsplice-bench datapath $(DATAPATH_ARGS)

format:
	clang-format -i bpf/*.c include/kvsplice/*.h user/*.c user/*.h tools/*.c tests/unit/*.c

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--suppress=missingIncludeSystem --suppress=unknownMacro -Iinclude -Iuser user tools

install: $(PROGS)
	install -D -m 0755 $(BUILD)/kvspliced $(DESTDIR)$(SBINDIR)/kvspliced
	install -D -m 0755 $(BUILD)/kvsplicectl $(DESTDIR)$(SBINDIR)/kvsplicectl
	install -D -m 0755 $(BUILD)/kvsplice-sim $(DESTDIR)$(BINDIR)/kvsplice-sim
	install -D -m 0755 $(BUILD)/kvsplice-bench $(DESTDIR)$(BINDIR)/kvsplice-bench
	install -d $(DESTDIR)$(DOCDIR)
	install -m 0644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 dist/kvspliced.conf $(DESTDIR)$(DOCDIR)/kvspliced.conf.example
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|@SBINDIR@|$(SBINDIR)|; s|@DOCDIR@|$(DOCDIR)|' dist/kvspliced.service \
		> $(DESTDIR)$(UNITDIR)/kvspliced.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/kvspliced.service

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
