# kvsplice-bench: load generator, discrete-event simulator, benchmarks.
BENCH_SRCS := $(wildcard tools/kvsplice-bench/*.c)
$(BUILD)/tools/kvsplice-bench/%.o: INC := $(MODEL_INC)
$(BUILD)/kvsplice-bench: $(BENCH_SRCS:%.c=$(BUILD)/%.o) $(MODEL_LIB) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lpthread -lcurl -ljansson
PROGS     += $(BUILD)/kvsplice-bench
