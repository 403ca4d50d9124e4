#!/usr/bin/env bash
# A backend that is only silent keeps its routes; one whose cache is gone
# does not, and its routes leave the map (docs/RUNBOOK.md, "A backend goes
# down"). With health checks every 200 ms:
#  - A stopped (SIGSTOP: a hung process keeps its cache) is ejected, but
#    its routes stay current; continued within ten intervals, it is back
#    with them, and its prefixes follow them again (no route found void).
#    Before, every ejection voided them: each prefix was placed anew.
#  - A stopped past ten intervals (2 s): its routes are withdrawn and
#    deleted from the map.
#  - B killed (its connections close: a crash or a restart loses the
#    cache): its routes are withdrawn at once and deleted from the map.
#    Before, they stayed in it, void, holding entries until replaced.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sims "A B" --time-scale 0.005
kvs_start_gw "${KVS_BACKENDS[@]}" --health-interval-ms 200
WL=(--prefixes 8 --prefix-tokens 1024 --suffix-tokens 64 --json)
A=${KVS_PIDS[0]}
B=${KVS_PIDS[1]}

kvs_bench -n 64 -k 1 "${WL[@]}" >"$KVS_TMP/warm.json" || kvs_fail "warm-up failed"
assert_eq "backends that served the warm-up" "$(jq '.backends | length' "$KVS_TMP/warm.json")" 2
held=$(kvs_routes_to 0 current)
assert_ge "routes to A" "$held" 1

# A only silent, briefly.
kill -STOP "$A"
assert_eq "A ejected" "$(kvs_wait_backend 0 down)" down
kill -CONT "$A"
assert_eq "A's routes while it is down" "$(kvs_routes_to 0 current)" "$held"
assert_eq "A back" "$(kvs_wait_backend 0 up)" up
grep -q "event=backend_routes_kept backend=127.0.0.1:$SIM_PORT_A " "$KVS_TMP/gw.log" ||
	kvs_fail "no backend_routes_kept line for A"
s0=$(kvs_stats)
out=$(kvs_bench -n 64 -k 1 "${WL[@]}") || kvs_fail "requests after A came back: $out"
s1=$(kvs_stats)
assert_eq "routes found void after A came back" \
	$(($(jget "$s1" .pass_stale) - $(jget "$s0" .pass_stale))) 0
assert_eq "A's routes after it came back" "$(kvs_routes_to 0 void)" 0
assert_ge "A's routes still there" "$(kvs_routes_to 0 current)" "$held"

# A silent past ten intervals.
kill -STOP "$A"
assert_eq "A ejected again" "$(kvs_wait_backend 0 down)" down
kvs_wait_for "A's routes withdrawn from the map" '[ "$(kvs_routes_to 0)" = 0 ]' 30
grep -q "event=backend_routes_withdrawn backend=127.0.0.1:$SIM_PORT_A .*reason=\"down past" \
	"$KVS_TMP/gw.log" || kvs_fail "no backend_routes_withdrawn line for A"
kill -CONT "$A"
assert_eq "A back again" "$(kvs_wait_backend 0 up)" up

# B gone: its connections closed.
assert_ge "routes to B" "$(kvs_routes_to 1)" 1
kill "$B"
assert_eq "B down" "$(kvs_wait_backend 1 down)" down
kvs_wait_for "B's routes deleted from the map" '[ "$(kvs_routes_to 1)" = 0 ]' 2
grep -q "event=backend_routes_withdrawn backend=127.0.0.1:$SIM_PORT_B .*reason=\"" \
	"$KVS_TMP/gw.log" || kvs_fail "no backend_routes_withdrawn line for B"
out=$(kvs_bench -n 64 -k 1 "${WL[@]}") || kvs_fail "requests after B left: $out"
assert_eq "requests ok after B left" "$(jget "$out" .ok)" 64
echo "PASS test_backend_silent"
