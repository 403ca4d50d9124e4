#!/usr/bin/env bash
# The foundation's end-to-end test: two simulated backends behind the
# gateway on loopback. Proves that
#  - every response arrives complete and byte-exact for its request id,
#  - requests with the same prefix reach the same backend,
#  - the kernel places each new prefix itself (include/kvsplice/place.h)
#    and routes the rest of its requests by the routes it learned: the
#    controller copies no byte of any request, and learns of each one from
#    the kernel's reports,
#  - responses come back spliced by the kernel (response-frame counters).
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_sim B --time-scale 0.01
# Load deferral off (a huge slack): this test is about the splice mechanism,
# so every request after a prefix's first must go through the kernel.
# test_routing.sh covers the kernel deferring to the controller under load.
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--kernel-slack-tokens 1000000000

PREFIXES=6
TOKENS=8
# --fleet: the bench asks the gateway nothing (its PONGs would count among
# the response frames spliced).
COMMON=(--prefixes $PREFIXES --prefix-tokens 1024 --suffix-tokens 64 --max-tokens $TOKENS --fleet 2)

# Warm-up: one request per prefix, one at a time: each is a new prefix,
# placed by the kernel.
kvs_bench -n $PREFIXES -k 1 -d 1 "${COMMON[@]}" --json --timeout-s 5 >"$KVS_TMP/warm.json" ||
	kvs_fail "warm-up run failed: $(cat "$KVS_TMP/warm.json")"
s0=$(kvs_stats)
assert_eq "warm-up placed by the kernel" "$(jget "$s0" .placed_cold)" $PREFIXES
assert_eq "warm-up slow-path frames" "$(jget "$s0" .slow_path_frames)" 0
assert_eq "warm-up fast-path frames" "$(jget "$s0" .fast_path_frames)" $PREFIXES
assert_eq "controller routed frames" "$(jget "$s0" .controller.slow_frames)" 0
slow_bytes0=$(jget "$s0" .controller.slow_bytes)
assert_eq "controller copied bytes" "$slow_bytes0" 0
assert_eq "decisions reported" "$(jget "$s0" .reports)" $PREFIXES
kvs_wait_for "the controller read the reports" \
	'[ "$(jget "$(kvs_stats)" .controller.reports_read)" = '$PREFIXES' ]'

# The load: 300 requests over 4 connections, 4 in flight on each.
N=300
out=$(kvs_bench -n $N -k 4 -d 4 "${COMMON[@]}" --json) || kvs_fail "load run failed: $out"
assert_eq "requests ok" "$(jget "$out" .ok)" $N
assert_eq "mismatched responses" "$(jget "$out" .mismatches)" 0
assert_eq "prefix groups split over backends" "$(jget "$out" .groups_split)" 0

s1=$(kvs_stats)
assert_eq "fast-path frames of the load" \
	$(($(jget "$s1" .fast_path_frames) - $(jget "$s0" .fast_path_frames))) $N
assert_eq "requests placed during the load (all follow routes)" \
	$(($(jget "$s1" .placed_cold) - $(jget "$s0" .placed_cold))) 0
assert_eq "reports lost" "$(jget "$s1" .reports_lost)" 0
assert_eq "slow-path frames of the load" \
	$(($(jget "$s1" .slow_path_frames) - $(jget "$s0" .slow_path_frames))) 0
assert_eq "bytes the controller copied during the load" \
	$(($(jget "$s1" .controller.slow_bytes) - slow_bytes0)) 0
# Every CHUNK and END of the load came back through the kernel.
assert_eq "response frames spliced" \
	$(($(jget "$s1" .resp_frames) - $(jget "$s0" .resp_frames))) $((N * (TOKENS + 1)))
assert_eq "responses dropped" "$(jget "$s1" .drop_no_client)" 0

# The per-backend counters agree with what the clients saw.
b=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)
assert_eq "backends up" "$(jq '[.[] | select(.state == "up")] | length' <<<"$b")" 2
assert_eq "requests counted per backend" "$(jq '[.[].requests] | add' <<<"$b")" $((N + PREFIXES))
assert_eq "outstanding after the run" "$(jq '[.[].outstanding] | add' <<<"$b")" 0
# Both backends got prefixes (6 prefixes over 2 backends).
assert_ge "backends that served requests" "$(jget "$out" '.backends | length')" 2

# Clients that disconnected were removed from the maps: only the 2x2
# upstream sockets and the controller's inject and punt sockets remain.
kvs_wait_for "the closed clients leave the maps" '[ "$(jget "$(kvs_stats)" .connections)" -le 6 ]'
assert_eq "connections left in the maps" "$(jget "$(kvs_stats)" .connections)" 6
echo "PASS test_splice"
