# libkvs: what the daemon and the tools share. Sees include/ and itself only.
CORE_SRCS := $(wildcard user/core/*.c)
$(BUILD)/user/core/%.o: INC := $(CORE_INC)
$(LIB): $(CORE_SRCS:%.c=$(BUILD)/%.o)
	rm -f $@ && $(AR) rcs $@ $^
