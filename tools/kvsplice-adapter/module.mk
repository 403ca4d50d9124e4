# kvsplice-adapter: a real inference server (vLLM, SGLang, llama.cpp) behind
# the gateway, over its OpenAI-compatible HTTP API (libcurl, jansson).
ADAPTER_SRCS := $(wildcard tools/kvsplice-adapter/*.c)
$(BUILD)/tools/kvsplice-adapter/%.o: INC := $(CORE_INC)
$(BUILD)/kvsplice-adapter: $(ADAPTER_SRCS:%.c=$(BUILD)/%.o) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lcurl -ljansson
PROGS     += $(BUILD)/kvsplice-adapter
