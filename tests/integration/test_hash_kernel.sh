#!/usr/bin/env bash
# One prefix hash, two compilers: the block hashes the kernel computes for
# a prompt (clang, BPF) equal the ones userspace computes (gcc), for random
# prompts of many lengths (empty, sub-block, off and on block boundaries,
# up to and past the hashing window), models and salts. Read back from the
# kernel's per-CPU chain map after each request.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.001
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A"

"$KVS_BUILD/tests/helpers/hash_check" "127.0.0.1:$GW_PORT" "$KVS_PIN" 300 "$RANDOM" ||
	kvs_fail "kernel and userspace hashes differ"
echo "PASS test_hash_kernel"
