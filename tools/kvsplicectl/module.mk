# kvsplicectl: the operator's tool (maps, control socket, connections).
CTL_SRCS  := $(wildcard tools/kvsplicectl/*.c)
$(BUILD)/tools/kvsplicectl/%.o: INC := $(CORE_INC)
$(BUILD)/kvsplicectl: $(CTL_SRCS:%.c=$(BUILD)/%.o) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lnl-idiag-3 -lnl-3
PROGS     += $(BUILD)/kvsplicectl
