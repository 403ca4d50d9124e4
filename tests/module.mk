# Unit tests (cmocka), the programs the integration tests drive, the fuzzer.
UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
HELPERS   := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(wildcard tests/helpers/*.c))
$(BUILD)/tests/%.o: INC := $(MODEL_INC) -Iuser/kvspliced -I$(BUILD)

$(BUILD)/tests/helpers/%: $(BUILD)/tests/helpers/%.o $(MODEL_LIB) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/test_%: $(BUILD)/tests/unit/test_%.o $(GW_LIB) $(MODEL_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(GW_LDLIBS) -lcmocka

# The placement probe: the verdict's own placement code (bpf/datapath/place.bpf.h)
# as a program test_place runs on inputs it writes.
$(BUILD)/tests/place_probe.bpf.o: tests/bpf/place_probe.bpf.c bpf/datapath/place.bpf.h \
		$(wildcard include/kvsplice/*.h)
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -Ibpf/datapath -c $< -o $@
$(BUILD)/tests/unit/test_place.o: $(BUILD)/tests/place_probe.skel.h
$(BUILD)/tests/unit/test_place.o: INC := $(MODEL_INC) -I$(BUILD)/tests
# test_dp_routes runs the controller's route installer (kvs_install) from the
# gateway's own skeleton.
$(BUILD)/tests/unit/test_dp_routes.o: $(BUILD)/kvsplice.skel.h
# test_ho_layout fingerprints the pinned maps' values from the gateway's
# own objects.
$(BUILD)/tests/unit/test_ho_layout.o: $(BUILD)/kvsplice.skel.h $(BUILD)/admission.skel.h

# libFuzzer target for the codec (clang; its own sanitizers).
FUZZ      := $(BUILD)/fuzz/fuzz_codec
FUZZ_TIME ?= 60
$(FUZZ): tests/fuzz/fuzz_codec.c user/core/codec.c user/core/buf.c $(wildcard include/kvsplice/*.h) \
		user/core/codec.h user/core/buf.h
	@mkdir -p $(@D)
	$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE $(WARN) -Iinclude $(CORE_INC) \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(filter %.c,$^) -o $@

# The adapter's parsers: their own unit test and fuzzer (libcurl-free).
ADAPTER_PARSE_SRCS := tools/kvsplice-adapter/openai.c tools/kvsplice-adapter/promtext.c \
	tools/kvsplice-adapter/life.c tools/kvsplice-adapter/kvcap.c tools/kvsplice-adapter/srvload.c
$(BUILD)/tests/unit/test_adapter.o: INC := $(CORE_INC) -Itools/kvsplice-adapter
$(BUILD)/tests/test_adapter: $(BUILD)/tests/unit/test_adapter.o $(ADAPTER_PARSE_SRCS:%.c=$(BUILD)/%.o) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lcmocka -ljansson

# kvsplice-http's pure parts (no libevent).
HTTP_PURE_SRCS := tools/kvsplice-http/canon.c tools/kvsplice-http/oaierr.c
$(BUILD)/tests/unit/test_http.o: INC := $(CORE_INC) -Itools/kvsplice-http
$(BUILD)/tests/test_http: $(BUILD)/tests/unit/test_http.o $(HTTP_PURE_SRCS:%.c=$(BUILD)/%.o) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lcmocka -ljansson

FUZZ_HTTP := $(BUILD)/fuzz/fuzz_http
$(FUZZ_HTTP): tests/fuzz/fuzz_http.c $(HTTP_PURE_SRCS) user/core/buf.c user/core/chash.c \
		$(wildcard tools/kvsplice-http/*.h)
	@mkdir -p $(@D)
	$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE $(WARN) -Iinclude $(CORE_INC) -Itools/kvsplice-http \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(filter %.c,$^) -o $@ -ljansson
all: $(FUZZ_HTTP)

FUZZ_ADAPTER := $(BUILD)/fuzz/fuzz_adapter
$(FUZZ_ADAPTER): tests/fuzz/fuzz_adapter.c $(ADAPTER_PARSE_SRCS) user/core/sse.c user/core/sse.h \
		$(wildcard tools/kvsplice-adapter/*.h)
	@mkdir -p $(@D)
	$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE $(WARN) -Iinclude $(CORE_INC) -Itools/kvsplice-adapter \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(filter %.c,$^) -o $@ -ljansson
all: $(FUZZ_ADAPTER)

# The simulator's re-implemented routers, built from kvsplice-bench's objects.
BASELINE_OBJS := $(addprefix $(BUILD)/tools/kvsplice-bench/,sim_baselines.o sim_sgltree.o sim_bmap.o)
$(BUILD)/tests/unit/test_baselines.o: INC := $(MODEL_INC) -Itools/kvsplice-bench
$(BUILD)/tests/test_baselines: $(BUILD)/tests/unit/test_baselines.o $(BASELINE_OBJS) $(MODEL_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lcmocka

# The simulator's fleet (sim --join-at), built from kvsplice-bench's objects.
SIMJOIN_OBJS := $(addprefix $(BUILD)/tools/kvsplice-bench/,sim_fleet.o sim_workload.o) $(BASELINE_OBJS)
$(BUILD)/tests/unit/test_simjoin.o: INC := $(MODEL_INC) -Itools/kvsplice-bench
$(BUILD)/tests/test_simjoin: $(BUILD)/tests/unit/test_simjoin.o $(SIMJOIN_OBJS) \
		$(BUILD)/tools/kvsplice-bench/sim_report.o $(MODEL_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lcmocka

# The simulator's load sweep (sim --sweep), built from kvsplice-bench's objects.
SWEEP_OBJS := $(addprefix $(BUILD)/tools/kvsplice-bench/,sim_sweep.o sim_sweep_report.o sim_report.o) $(SIMJOIN_OBJS)
$(BUILD)/tests/unit/test_sweep.o: INC := $(MODEL_INC) -Itools/kvsplice-bench
$(BUILD)/tests/test_sweep: $(BUILD)/tests/unit/test_sweep.o $(SWEEP_OBJS) $(MODEL_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lcmocka
