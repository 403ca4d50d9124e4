# Unit tests (cmocka), the programs the integration tests drive, the fuzzer.
UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
HELPERS   := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(wildcard tests/helpers/*.c))
$(BUILD)/tests/%.o: INC := $(MODEL_INC) -Iuser/kvspliced -I$(BUILD)

$(BUILD)/tests/helpers/%: $(BUILD)/tests/helpers/%.o $(MODEL_LIB) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/test_%: $(BUILD)/tests/unit/test_%.o $(GW_LIB) $(MODEL_LIB) $(LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) -lcmocka

# libFuzzer target for the codec (clang; its own sanitizers).
FUZZ      := $(BUILD)/fuzz/fuzz_codec
FUZZ_TIME ?= 60
$(FUZZ): tests/fuzz/fuzz_codec.c user/core/codec.c user/core/buf.c $(wildcard include/kvsplice/*.h) \
		user/core/codec.h user/core/buf.h
	@mkdir -p $(@D)
	$(CLANG) -g -O1 -std=gnu11 -D_GNU_SOURCE $(WARN) -Iinclude $(CORE_INC) \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$(filter %.c,$^) -o $@
