#!/usr/bin/env bash
# kvsplice-bench live, open loop: requests go out on a Poisson schedule,
# however many are in flight, so a run of N at rate R takes about N / R
# seconds whatever the connection count, and every request is answered
# byte for byte through the gateway. Closed loop with one connection and a
# slow backend is, by contrast, paced by the backend.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.05
kvs_start_sim B --time-scale 0.05
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"

out=$("$KVS_BUILD/kvsplice-bench" live --connect "127.0.0.1:$GW_PORT" --quiet -n 300 -k 2 \
	--rate 150 --prefixes 4 --prefix-tokens 512 --suffix-tokens 64 --json) ||
	kvs_fail "open-loop run failed: $out"
assert_eq "mode" "$(jget "$out" .mode)" open
assert_eq "requests answered" "$(jget "$out" .ok)" 300
# 300 at 150/s: 2 s of arrivals; the last ones still need their answers.
wall_ms=$(jget "$out" '.wall_s * 1000 | floor')
assert_ge "open loop: wall time (ms)" "$wall_ms" 1500
assert_le "open loop: wall time (ms)" "$wall_ms" 3500

# Closed loop, one connection, one request at a time: each waits for the
# one before, so 60 requests take far longer than 60 / 150 s.
out=$("$KVS_BUILD/kvsplice-bench" live --connect "127.0.0.1:$GW_PORT" --quiet -n 60 -k 1 \
	--prefixes 4 --prefix-tokens 512 --suffix-tokens 64 -m 64 --json) ||
	kvs_fail "closed-loop run failed: $out"
assert_eq "mode" "$(jget "$out" .mode)" closed
closed=$(jget "$out" '.throughput_rps | floor')
out=$("$KVS_BUILD/kvsplice-bench" live --connect "127.0.0.1:$GW_PORT" --quiet -n 60 -k 1 \
	--rate 150 --prefixes 4 --prefix-tokens 512 --suffix-tokens 64 -m 64 --json) ||
	kvs_fail "open-loop run on one connection failed: $out"
open=$(jget "$out" '.throughput_rps | floor')
assert_ge "one connection: open-loop throughput over 2 x closed-loop" "$open" $((2 * closed))

# Bad usage is refused with a clear message.
if msg=$("$KVS_BUILD/kvsplice-bench" live --connect "127.0.0.1:$GW_PORT" --rate 0 2>&1); then
	kvs_fail "--rate 0 accepted"
fi
grep -q -- "--rate" <<<"$msg" || kvs_fail "no message naming --rate: $msg"
echo "PASS test_live_open_loop"
