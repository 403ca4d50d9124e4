#!/usr/bin/env bash
# A backend's PONGs say its instance (docs/PROTOCOL.md, "PONG"): one that
# comes back as another instance restarted, its cache empty, and its routes
# are withdrawn however it looked while away; one that comes back as the
# same instance keeps them (docs/RUNBOOK.md, "A backend restarts"). With
# health checks every 200 ms, two simulators, A told its instance:
#  - A stopped (SIGSTOP), ejected as silent, continued: the same instance,
#    its routes kept and followed (backend_routes_kept, no restart).
#  - A stopped and ejected again, then killed and started anew on the same
#    port as another instance before its routes' ten intervals ran out:
#    event=backend_restarted names both instances, its routes are deleted
#    from the map, and requests after it are served. Before, a silent
#    backend that came back in time kept its routes whoever answered, and
#    the "hits" they promised were misses.
#  - A started again with no --instance draws one at random: again a
#    restart (its instance is never 0, which says nothing).
# kvsplice_backend_restarts_total counts A's two restarts, none of B's.
#  - A successor controller takes over while A is stopped (ejected, so it
#    has none of A's PONGs of its own), and A comes back as another
#    instance: the successor, told A's instance in the hand-over, sees the
#    restart. Before, the hand-over had no room for it.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.005 --instance 1111
kvs_start_sim B --time-scale 0.005
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--health-interval-ms 200 --metrics 127.0.0.1:0
MPORT=$(grep -o 'event=metrics_listening addr=[^ ]* port=[0-9]*' "$KVS_TMP/gw.log" | grep -o '[0-9]*$')
[ -n "$MPORT" ] || kvs_fail "no metrics_listening line"
WL=(--prefixes 8 --prefix-tokens 1024 --suffix-tokens 64 --json)
A=${KVS_PIDS[0]}
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
restarted() { grep -c "event=backend_restarted backend=127.0.0.1:$SIM_PORT_A " "$KVS_TMP/gw.log"; }
# restart_a FLAGS...: A (stopped, ejected) killed and a new simulator
# started on its port, all while the controller is stopped with none of
# A's probes out (its state down, not on probation): the controller never
# sees the port closed (a refusal, or a probe's connection reset, says the
# cache is gone by itself), only the new A's answer.
restart_a() {
	local end=$((SECONDS + KVS_WAIT_S))
	while :; do
		kill -STOP "$GW_PID"
		kvs_wait_for "the controller stopped" '[ "$(awk "{print \$3}" /proc/$GW_PID/stat)" = T ]'
		[ "$(ctl backends --json | jq -r '.[0].state')" = down ] && break
		kill -CONT "$GW_PID"
		[ $SECONDS -le $end ] || kvs_fail "A never down between its probes"
		sleep 0.02
	done
	kill -KILL "$A"
	wait "$A" 2>/dev/null || true
	kvs_start_sim A --port "$SIM_PORT_A" --time-scale 0.005 "$@"
	A=${KVS_PIDS[-1]}
	kill -CONT "$GW_PID"
}

kvs_bench -n 64 -k 1 "${WL[@]}" >"$KVS_TMP/warm.json" || kvs_fail "warm-up failed"
assert_eq "backends that served the warm-up" "$(jq '.backends | length' "$KVS_TMP/warm.json")" 2
held=$(kvs_routes_to 0 current)
assert_ge "routes to A" "$held" 1

# The same instance: only silent, its cache there.
kill -STOP "$A"
assert_eq "A ejected" "$(kvs_wait_backend 0 down)" down
kill -CONT "$A"
assert_eq "A back" "$(kvs_wait_backend 0 up)" up
grep -q "event=backend_routes_kept backend=127.0.0.1:$SIM_PORT_A " "$KVS_TMP/gw.log" ||
	kvs_fail "no backend_routes_kept line for A"
assert_eq "restarts logged for the same instance" "$(restarted)" 0
assert_eq "A's routes after it came back as itself" "$(kvs_routes_to 0 current)" "$held"

# Another instance on the same port, back within the routes' ten intervals.
kill -STOP "$A"
assert_eq "A ejected again" "$(kvs_wait_backend 0 down)" down
restart_a --instance 2222
assert_eq "A (anew) up" "$(kvs_wait_backend 0 up)" up
kvs_wait_for "A's routes deleted from the map" '[ "$(kvs_routes_to 0)" = 0 ]' 5
grep -q "event=backend_restarted backend=127.0.0.1:$SIM_PORT_A index=0 instance=2222 previous=1111 " \
	"$KVS_TMP/gw.log" || kvs_fail "no backend_restarted line for A: $(grep "backend=127.0.0.1:$SIM_PORT_A " "$KVS_TMP/gw.log" | tail -5)"
grep -q "event=backend_routes_withdrawn backend=127.0.0.1:$SIM_PORT_A .*reason=\"it restarted" \
	"$KVS_TMP/gw.log" || kvs_fail "A's routes not withdrawn for its restart"
if grep "backend=127.0.0.1:$SIM_PORT_A " "$KVS_TMP/gw.log" | tail -3 | grep -q event=backend_routes_kept; then
	kvs_fail "the new A's routes were said kept"
fi
out=$(kvs_bench -n 64 -k 1 "${WL[@]}") || kvs_fail "requests after A restarted: $out"
assert_eq "requests ok after A restarted" "$(jget "$out" .ok)" 64
assert_ge "routes to the new A" "$(kvs_routes_to 0 current)" 1

# A random instance (no --instance): never 0, never 2222 again.
kill -STOP "$A"
assert_eq "A ejected a third time" "$(kvs_wait_backend 0 down)" down
restart_a
assert_eq "A (random) up" "$(kvs_wait_backend 0 up)" up
kvs_wait_for "a second restart logged" '[ "$(restarted)" = 2 ]' 5
grep "event=backend_restarted backend=127.0.0.1:$SIM_PORT_A " "$KVS_TMP/gw.log" | tail -1 |
	grep -q " previous=2222 " || kvs_fail "the random restart: $(restarted)"
kvs_wait_for "A's routes deleted again" '[ "$(kvs_routes_to 0)" = 0 ]' 5
m=$(curl -sf "http://127.0.0.1:$MPORT/metrics") || kvs_fail "no metrics"
metric() { awk -v m="$1" '$1 == m { print $2 }' <<<"$m"; }
assert_eq "kvsplice_backend_restarts_total of A" \
	"$(metric "kvsplice_backend_restarts_total{backend=\"127.0.0.1:$SIM_PORT_A\"}")" 2
assert_eq "kvsplice_backend_restarts_total of B" \
	"$(metric "kvsplice_backend_restarts_total{backend=\"127.0.0.1:$SIM_PORT_B\"}")" 0

# Through a take-over: the instance is handed over.
third=$(grep -o "event=backend_restarted backend=127.0.0.1:$SIM_PORT_A .*" "$KVS_TMP/gw.log" |
	tail -1 | grep -o ' instance=[0-9]*' | cut -d= -f2)
out=$(kvs_bench -n 64 -k 1 "${WL[@]}") || kvs_fail "requests before the take-over: $out"
assert_ge "routes to A before the take-over" "$(kvs_routes_to 0 current)" 1
kill -STOP "$A"
assert_eq "A ejected before the take-over" "$(kvs_wait_backend 0 down)" down
kvs_start_successor --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--health-interval-ms 200
wait "$GW_PID" || true
GW_PID=$GW2_PID
restart_a --instance 3333
assert_eq "A (after the take-over) up" "$(kvs_wait_backend 0 up)" up
grep -q "event=backend_restarted backend=127.0.0.1:$SIM_PORT_A index=0 instance=3333 previous=$third " \
	"$KVS_TMP/gw2.log" || kvs_fail "the successor did not see A's restart (previous $third): $(grep "backend=127.0.0.1:$SIM_PORT_A " "$KVS_TMP/gw2.log" | tail -5)"
kvs_wait_for "A's routes deleted by the successor" '[ "$(kvs_routes_to 0)" = 0 ]' 5
echo "PASS test_backend_restarted"
