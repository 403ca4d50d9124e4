# libkvsmodel: the backend simulator's model (engine, timing, prompts,
# traces), for the tools and tests only; never linked into the daemon.
MODEL_SRCS := $(wildcard user/model/*.c)
$(BUILD)/user/model/%.o: INC := $(MODEL_INC)
$(MODEL_LIB): $(MODEL_SRCS:%.c=$(BUILD)/%.o)
	rm -f $@ && $(AR) rcs $@ $^
