# kvsplice-sim: a KVS1 backend that behaves like vLLM with prefix caching.
SIM_SRCS  := $(wildcard tools/kvsplice-sim/*.c)
$(BUILD)/tools/kvsplice-sim/%.o: INC := $(MODEL_INC)
$(BUILD)/kvsplice-sim: $(SIM_SRCS:%.c=$(BUILD)/%.o) $(MODEL_LIB) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)
PROGS     += $(BUILD)/kvsplice-sim
