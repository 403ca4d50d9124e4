# The kernel programs, and the skeletons the daemon's loaders include.
$(BUILD)/%.bpf.o: bpf/%.bpf.c $(wildcard include/kvsplice/*.h) $(wildcard bpf/*.h bpf/datapath/*.h)
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@
