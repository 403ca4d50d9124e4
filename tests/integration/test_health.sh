#!/usr/bin/env bash
# Health checks: a backend that hangs with its connections open (SIGSTOP:
# no EOF ever comes) is found by its missing PONG within three health
# intervals and ejected - its in-flight requests answered backend_gone,
# new requests on the other backend. While it stays stopped it is kept out
# (reconnecting succeeds, the kernel completes handshakes for a stopped
# process, but it takes no work on probation until it answers a PING), and
# the retries back off. Once it runs again it answers and is re-admitted.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.05
kvs_start_sim B --time-scale 0.05
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--health-interval-ms 200 --log-level debug
A=${KVS_PIDS[0]}
state() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json | jq -r ".[$1].state"; }

kvs_wait_for "A answers the health check" \
	'grep -q "event=pong backend=127.0.0.1:$SIM_PORT_A" "$KVS_TMP/gw.log"'
echo "ok: backends answer the health check"

kvs_bench -n 8 -k 8 -m 400 --prefixes 0 --json --timeout-s 30 >"$KVS_TMP/hung.json" 2>/dev/null &
bench=$!
kvs_wait_for "requests are in flight to A" \
	'[ "$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json | jq ".[0].outstanding")" -gt 0 ]'
kill -STOP "$A"
# Ejected: down, then (connections still succeed) on probation.
ms=$(kvs_ms_until_out 0)
grep -qx "down\|probation" <<<"$(state 0)" || kvs_fail "A's state after it hung: $(state 0)"
assert_le "time to eject a hung backend (ms; 3 intervals of 200, a tick, slack)" "$ms" 1500
grep -q "event=backend_down backend=127.0.0.1:$SIM_PORT_A reason=\"no PONG in 600 ms\"" \
	"$KVS_TMP/gw.log" || kvs_fail "no ejection line"
wait $bench || true
st=$(kvs_stats)
assert_ge "health failures counted" "$(jget "$st" .controller.health_failures)" 1
assert_eq "requests lost with the hung backend" "$(jq .lost "$KVS_TMP/hung.json")" 0

out=$(kvs_bench -n 40 -k 4 --prefixes 0 --salt 1 --json) || kvs_fail "requests while A hangs: $out"
assert_eq "requests ok while A hangs" "$(jget "$out" .ok)" 40
assert_eq "backends that served them" "$(jget "$out" '.backends | length')" 1
sleep 2
n=$(grep -c "event=backend_probation backend=127.0.0.1:$SIM_PORT_A" "$KVS_TMP/gw.log" || true)
assert_ge "reconnections on probation while A hangs" "$n" 1
assert_le "reconnections on probation in ~3 s (backing off)" "$n" 8
st=$(state 0)
grep -qx "down\|probation" <<<"$st" || kvs_fail "A's state while it hangs: $st (re-admitted?)"

kill -CONT "$A"
kvs_wait_backend 0 up "" 0.1 >/dev/null
assert_eq "A's state once it runs again" "$(state 0)" up
grep -q "event=backend_readmitted backend=127.0.0.1:$SIM_PORT_A" "$KVS_TMP/gw.log" ||
	kvs_fail "no re-admission line"
out=$(kvs_bench -n 40 -k 4 --prefixes 0 --salt 2 --json) || kvs_fail "requests after A came back: $out"
assert_eq "backends serving after A came back" "$(jget "$out" '.backends | length')" 2
echo "PASS test_health"
