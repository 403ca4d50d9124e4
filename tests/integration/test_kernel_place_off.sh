#!/usr/bin/env bash
# --kernel-place no: the split before the kernel placed requests, kept for
# comparison (scripts/bench-kernel-place.sh, bench-slowpath.sh). Requests
# with new prefixes go to the controller, which decides, copies them and
# installs their routes; the next request of each prefix follows a route
# in the kernel; the kernel places nothing itself.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_sim B --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--kernel-place no --kernel-slack-tokens 1000000000
grep -q "kernel_place=no" "$KVS_TMP/gw.log" || kvs_fail "not said in the log: $(cat "$KVS_TMP/gw.log")"

COMMON=(--prefixes 5 --prefix-tokens 512 --suffix-tokens 32 -m 2 --json)
out=$(kvs_bench -n 5 -k 1 "${COMMON[@]}") || kvs_fail "first requests failed: $out"
s=$(kvs_stats)
assert_eq "new prefixes the controller decided" "$(jget "$s" .controller.decided_cold)" 5
assert_eq "requests punted to the controller" "$(jget "$s" .slow_path_frames)" 5
assert_eq "requests the kernel placed" "$(jget "$s" .placed_cold)" 0
assert_ge "routes the controller installed" "$(jget "$s" .controller.routes_installed)" 5
out=$(kvs_bench -n 20 -k 2 "${COMMON[@]}") || kvs_fail "second run failed: $out"
s1=$(kvs_stats)
assert_eq "the same prefixes again: punted" "$(jget "$s1" .slow_path_frames)" 5
assert_eq "the same prefixes again: routed in the kernel" \
	$(($(jget "$s1" .fast_path_frames) - $(jget "$s" .fast_path_frames))) 20
echo "PASS test_kernel_place_off"
