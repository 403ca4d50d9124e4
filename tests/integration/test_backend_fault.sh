#!/usr/bin/env bash
# A backend dies (SIGKILL) while requests are streaming from it: each of
# its in-flight requests gets an ERROR frame (backend_gone) at once - none
# hangs, none is lost - and the requests on the other backend finish byte
# for byte. Afterwards nothing is left charged to the dead backend, no
# inflight record names it, new requests go to the survivor, and when it
# comes back on its port it is re-admitted and takes work again.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

# Slow backends (a request streams for seconds) so the kill lands mid-stream.
kvs_start_sim A --time-scale 0.5
kvs_start_sim B --time-scale 0.5
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"
WL=(--prefixes 0 --suffix-tokens 256 --json)

kvs_bench -n 16 -k 16 -m 400 "${WL[@]}" --timeout-s 60 >"$KVS_TMP/run.json" \
	2>"$KVS_TMP/bench.log" &
BENCH=$!
# Wait until all 16 are placed and both backends are streaming, then
# kill A (what A holds then is what must fail).
kvs_wait_for "all 16 requests in flight, on both backends" \
	'[ "$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json |
		jq -c "[([.[] | select(.outstanding > 0)] | length), ([.[].outstanding] | add)]")" = "[2,16]" ]'
held=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json | jq '.[0].outstanding')
kill -9 "${KVS_PIDS[0]}"
t0=$(date +%s%N)
wait $BENCH || true # errors make its exit status 1
t1=$(date +%s%N)
out=$(cat "$KVS_TMP/run.json")
echo "bench: $(jq -c '{ok, errors, mismatches, lost}' <<<"$out") after the kill: $(((t1 - t0) / 1000000)) ms"
assert_eq "requests lost (never answered)" "$(jget "$out" .lost)" 0
assert_eq "requests answered wrongly" "$(jget "$out" .mismatches)" 0
assert_eq "ok + errors" "$(jget "$out" '.ok + .errors')" 16
assert_eq "errors = requests in flight on A at the kill" "$(jget "$out" .errors)" "$held"
assert_ge "requests that failed with A" "$(jget "$out" .errors)" 1
assert_ge "requests B finished" "$(jget "$out" .ok)" 1
n=$(grep -c "error backend_gone" "$KVS_TMP/bench.log" || true)
assert_eq "errors naming backend_gone" "$n" "$held"
grep -q "failed while serving the request" "$KVS_TMP/bench.log" ||
	kvs_fail "error frames do not say what happened: $(head -3 "$KVS_TMP/bench.log")"
st=$(kvs_stats)
assert_eq "controller.failed_inflight" "$(jget "$st" .controller.failed_inflight)" "$held"
be=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)
assert_eq "A's state" "$(jget "$be" '.[0].state')" down
assert_eq "requests still charged to A" "$(jget "$be" '.[0].outstanding')" 0
assert_eq "work still charged to A" "$(jget "$be" '.[0].outstanding_work')" 0
left=$(bpftool map dump pinned "$KVS_PIN/inflight" -j | jq '[.[] | select(.value.backend == 0)] | length')
assert_eq "inflight records naming A" "$left" 0
grep -q "event=backend_down.*failed_requests=$held" "$KVS_TMP/gw.log" ||
	kvs_fail "no backend_down log line with failed_requests=$held"

# New requests go to B alone, and all succeed.
out=$(kvs_bench -n 20 -k 4 -m 4 --salt 1 "${WL[@]}") ||
	kvs_fail "requests after the kill failed: $out"
assert_eq "requests ok after the kill" "$(jget "$out" .ok)" 20
assert_eq "backends that served them" "$(jget "$out" '.backends | length')" 1

# A comes back on its port: re-admitted, it takes work again.
"$KVS_BUILD/kvsplice-sim" --port "$SIM_PORT_A" --time-scale 0.5 2>"$KVS_TMP/A2.log" &
KVS_PIDS+=($!)
st=$(kvs_wait_backend 0 up "" 0.1)
assert_eq "A's state after it returned" "$st" up
# (another salt: the same request ids would otherwise repeat the prompts B
# has cached, and the kernel would rightly send them there)
out=$(kvs_bench -n 20 -k 4 -m 4 --salt 2 "${WL[@]}") ||
	kvs_fail "requests after A returned failed: $out"
assert_eq "requests ok after A returned" "$(jget "$out" .ok)" 20
assert_eq "backends that served them" "$(jget "$out" '.backends | length')" 2
echo "PASS test_backend_fault"
