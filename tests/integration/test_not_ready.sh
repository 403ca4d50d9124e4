#!/usr/bin/env bash
# A backend that answers PINGs but says it is not ready (the PONG's
# NOT_READY flag: its inference server down or loading; kvsplice-sim's
# --not-ready-file stands in) is treated as one that does not answer: out
# within three health intervals, with a log line saying why (once), its
# requests going to the other backend, kept out while it says so, and
# back as soon as it answers ready.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

flag=$KVS_TMP/A.not-ready
kvs_start_sim A --time-scale 0.05 --not-ready-file "$flag"
kvs_start_sim B --time-scale 0.05
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--health-interval-ms 200 --log-level debug
state() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json | jq -r ".[$1].state"; }
A=127.0.0.1:$SIM_PORT_A

out=$(kvs_bench -n 40 -k 4 --prefixes 0 --json) || kvs_fail "requests while both are ready: $out"
assert_eq "backends serving while both are ready" "$(jget "$out" '.backends | length')" 2

touch "$flag"
ms=$(kvs_ms_until_out 0)
grep -qx "down\|probation" <<<"$(state 0)" || kvs_fail "A's state once not ready: $(state 0)"
assert_le "ms to take out a backend that says it is not ready (3 intervals of 200, a tick, slack)" \
	"$ms" 1500
grep -q "event=backend_not_ready backend=$A" "$KVS_TMP/gw.log" || kvs_fail "no not-ready line"
grep -q "event=backend_down backend=$A reason=\"reported not ready for 600 ms\"" \
	"$KVS_TMP/gw.log" || kvs_fail "no ejection line naming the reason"
assert_ge "health failures counted" "$(jget "$(kvs_stats)" .controller.health_failures)" 1

out=$(kvs_bench -n 40 -k 4 --prefixes 0 --salt 1 --json) || kvs_fail "requests while A is not ready: $out"
assert_eq "requests ok while A is not ready" "$(jget "$out" .ok)" 40
assert_eq "backends that served them" "$(jget "$out" '.backends | length')" 1
assert_eq "the backend that served them" "$(jget "$out" '.backends[0].id')" "$SIM_PORT_B"
sleep 1.5
grep -qx "down\|probation" <<<"$(state 0)" || kvs_fail "A's state while it stays not ready: $(state 0)"
assert_eq "not-ready lines while it stays so (said once)" \
	"$(grep -c "event=backend_not_ready backend=$A" "$KVS_TMP/gw.log")" 1
assert_le "probation lines at info while it stays so (it reconnects at every back-off)" \
	"$(grep -c "level=info .*event=backend_probation backend=$A" "$KVS_TMP/gw.log")" 1

rm "$flag"
st=$(kvs_wait_backend 0 up "" 0.1)
assert_eq "A's state once ready again" "$st" up
out=$(kvs_bench -n 40 -k 4 --prefixes 0 --salt 2 --json) || kvs_fail "requests after A is ready: $out"
assert_eq "backends serving after A is ready again" "$(jget "$out" '.backends | length')" 2

# A second ejection says its probation again (once an ejection, not once
# a run: the readmission between them is no dial).
touch "$flag"
kvs_wait_for "A's second ejection" \
	"[ \$(grep -c 'event=backend_down backend=$A' '$KVS_TMP/gw.log') -ge 2 ]" 10
kvs_wait_for "A's probation after its second ejection, at info" \
	"[ \$(grep -c 'level=info .*event=backend_probation backend=$A' '$KVS_TMP/gw.log') -ge 2 ]" 10
rm "$flag"
assert_eq "A's state once ready again" "$(kvs_wait_backend 0 up "" 0.1)" up

# Between its first not-ready answer and its ejection three intervals on
# (here 12 s), A takes no new work: sent there, each request failed at
# once in an operator's trial, and new prefixes went there first.
kill "$GW_PID"
wait "$GW_PID" || true
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--health-interval-ms 4000
kvs_wait_backend 0 up >/dev/null
touch "$flag"
kvs_wait_for "A's first not-ready answer" \
	"grep -q 'event=backend_not_ready backend=$A' '$KVS_TMP/gw.log'" 10
assert_eq "A's state once it says it is not ready" "$(state 0)" not-ready
reason=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json | jq -r '.[0].reason')
assert_eq "A's reason" "$reason" "its server says it is not ready"
# drained meanwhile, the reply says why it would not serve if undrained
out=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" --json backend drain "$A") ||
	kvs_fail "drain: $out"
assert_eq "drain's reply: the reason" "$(jq -r .reason <<<"$out")" "its server says it is not ready"
out=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" --json backend undrain "$A") ||
	kvs_fail "undrain: $out"
assert_eq "undrain's reply: the state" "$(jq -r .state <<<"$out")" not-ready
out=$(kvs_bench -n 40 -k 4 --prefixes 0 --salt 3 --json) || kvs_fail "requests before A is out: $out"
assert_eq "requests ok before A is taken out" "$(jget "$out" .ok)" 40
assert_eq "backends that served them" "$(jget "$out" '.backends | length')" 1
assert_eq "the backend that served them" "$(jget "$out" '.backends[0].id')" "$SIM_PORT_B"
grep -q "event=backend_down backend=$A" "$KVS_TMP/gw.log" &&
	kvs_fail "A was ejected before the requests were sent: the window was not tested"

# A successor taking over keeps A out: published up at the take-over, it
# took new work until its first PONG to the new controller.
kvs_start_successor --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--health-interval-ms 4000
assert_eq "A's state just after a take-over" "$(state 0)" not-ready
wait "$GW_PID" || true
GW_PID=$GW2_PID
rm "$flag"
assert_eq "A's state once ready again" "$(kvs_wait_backend 0 up 15 0.1)" up
echo "PASS test_not_ready"
