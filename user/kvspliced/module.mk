# kvspliced, the controller: its modules in libkvspliced.a (the unit tests
# link them too), main.o on top. Sees core and itself, never the model.
# The data path (datapath/: the BPF object's loader and its maps) is a
# folder of its own, under datapath.h; it calls user/core only
# (scripts/layering.sh).
GW_SRCS   := $(filter-out user/kvspliced/main.c,$(wildcard user/kvspliced/*.c)) \
	$(wildcard user/kvspliced/datapath/*.c)
$(BUILD)/user/kvspliced/%.o: INC := $(CORE_INC) -Iuser/kvspliced -I$(BUILD)
# Each loader depends on the skeleton it includes, and only on that one.
$(BUILD)/user/kvspliced/datapath/load.o $(BUILD)/user/kvspliced/datapath/routes.o: \
	$(BUILD)/kvsplice.skel.h
$(BUILD)/user/kvspliced/admission.o: $(BUILD)/admission.skel.h
$(BUILD)/user/kvspliced/datapath/route_count.o: $(BUILD)/route_count.skel.h
$(GW_LIB): $(GW_SRCS:%.c=$(BUILD)/%.o)
	rm -f $@ && $(AR) rcs $@ $^
# libsystemd: sd-daemon (sdnotify.c), the service manager's protocols.
GW_LDLIBS := -lsystemd
$(BUILD)/kvspliced: $(BUILD)/user/kvspliced/main.o $(GW_LIB) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(GW_LDLIBS)
PROGS     += $(BUILD)/kvspliced
