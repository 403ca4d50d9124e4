# kvsplice-http: an OpenAI-compatible HTTP front for the gateway (libevent's
# HTTP server, jansson).
HTTP_SRCS := $(wildcard tools/kvsplice-http/*.c)
$(BUILD)/tools/kvsplice-http/%.o: INC := $(CORE_INC)
$(BUILD)/kvsplice-http: $(HTTP_SRCS:%.c=$(BUILD)/%.o) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -levent_core -levent_extra -ljansson
PROGS     += $(BUILD)/kvsplice-http
