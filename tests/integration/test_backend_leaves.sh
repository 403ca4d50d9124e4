#!/usr/bin/env bash
# A backend leaves: its routes are withdrawn at once (one generation bump)
# and deleted from the map, so requests for the prefixes it held are placed
# anew on the backends that are left; when it comes back, the gateway
# reconnects and it takes new work again.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.005
kvs_start_sim B --time-scale 0.005
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"
WL=(--prefixes 8 --prefix-tokens 1024 --suffix-tokens 64 --json)

kvs_bench -n 64 -k 1 "${WL[@]}" >"$KVS_TMP/warm.json" || kvs_fail "warm-up failed"
assert_eq "backends that served the warm-up" "$(jq '.backends | length' "$KVS_TMP/warm.json")" 2

# A leaves (not under load: in-flight requests on a dying backend are the
# reliability issue's subject).
kill "${KVS_PIDS[0]}"
st=$(kvs_wait_backend 0 down)
assert_eq "state of the backend that left" "$st" down

s0=$(kvs_stats)
out=$(kvs_bench -n 200 -k 4 "${WL[@]}") || kvs_fail "requests after A left failed: $out"
assert_eq "requests ok after A left" "$(jget "$out" .ok)" 200
assert_eq "backends that served them" "$(jget "$out" '.backends | length')" 1
assert_eq "the backend that served them" "$(jget "$out" '.backends[0].id')" "$SIM_PORT_B"
s1=$(kvs_stats)
placed=$(($(jget "$s1" .placed_cold) + $(jget "$s1" .placed_stale) -
	$(jget "$s0" .placed_cold) - $(jget "$s0" .placed_stale)))
assert_ge "A's prefixes placed anew (no route, or a void one)" "$placed" 1

# A comes back on its port: reconnected within the back-off, and takes work.
"$KVS_BUILD/kvsplice-sim" --port "$SIM_PORT_A" --time-scale 0.005 2>"$KVS_TMP/A2.log" &
KVS_PIDS+=($!)
st=$(kvs_wait_backend 0 up)
assert_eq "state of the backend that came back" "$st" up
out=$(kvs_bench -n 200 -k 8 --prefixes 0 --suffix-tokens 512 --json) ||
	kvs_fail "requests after A came back failed: $out"
assert_eq "backends serving new prompts after A came back" "$(jget "$out" '.backends | length')" 2
echo "PASS test_backend_leaves"
