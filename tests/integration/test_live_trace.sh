#!/usr/bin/env bash
# kvsplice-bench live --trace: a JSONL trace replayed through the gateway to
# real simulators. The same four-request trace test_sim.sh replays in
# virtual time must give the same cache hits here, to the token (but for
# the end-of-sequence marker live appends): each hash id became the same
# 512 tokens of text in every request, and the backend found exactly the
# sharing the ids describe. Arrivals follow the trace's
# clock (scaled by --speed), -n and --max-tokens cut it down, --plot draws
# the run, and a malformed trace is refused naming its line.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.05
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A"

t=$KVS_TMP/trace.jsonl
cp "$(dirname "$0")/../fixtures/trace4.jsonl" "$t"

out=$(kvs_bench --trace "$t" --speed 10 --json --plot "$KVS_TMP/plot") ||
	kvs_fail "trace replay failed: $out"
assert_eq "requests replayed" "$(jget "$out" .requests)" 4
assert_eq "requests answered byte for byte" "$(jget "$out" .ok)" 4
# The backend counted exactly the trace's input lengths as prompt tokens,
# plus each prompt's end-of-sequence marker (" <eos:4>": 2 tokens).
assert_eq "prompt tokens seen by the backend" "$(jget "$out" .prompt_tokens)" $((5224 + 4 * 2))
# cached: 0, 1024, 1024, 1024. In virtual time the third is 1008 (a full
# hit recomputes its last block); live, the marker follows that block, so
# it is cached too.
assert_eq "cached tokens (virtual time's, and the marker's block)" \
	"$(jget "$out" .cached_tokens)" $((3056 + 16))
assert_eq "output tokens (the trace's lengths)" "$(jget "$out" .output_tokens)" 16
# 6 s of trace at 10x: the last request is due 0.6 s after the first.
wall_ms=$(jget "$out" '.wall_s * 1000 | floor')
assert_ge "wall time follows the trace's clock (ms)" "$wall_ms" 600
assert_le "wall time follows the trace's clock (ms)" "$wall_ms" 3000
# Virtual time knows no marker: its hit rate is the figures above without it.
sim=$("$KVS_BUILD/kvsplice-bench" sim --trace "$t" --backends 1 --policies kvsplice --json)
assert_eq "hit rate in virtual time = 3056 / 5224" \
	"$(jget "$sim" '.policies[0].hit_rate * 1000 | round')" $(((3056 * 1000 + 5224 / 2) / 5224))
for f in ttft_cdf.svg ttft_cdf.png load.svg load.png; do
	[ -s "$KVS_TMP/plot/$f" ] || kvs_fail "--plot did not write $f"
done
echo "ok: --plot drew the run"

out=$(kvs_bench --trace "$t" --speed 100 -n 2 -m 2 --json) || kvs_fail "cut-down replay failed"
assert_eq "-n 2 replays two" "$(jget "$out" .ok)" 2
assert_eq "--max-tokens caps the output" "$(jget "$out" .output_tokens)" 4

echo '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}' >"$t"
echo '{"timestamp": 0, "input_length": 10}' >>"$t"
if msg=$(kvs_bench --trace "$t" 2>&1); then kvs_fail "a malformed trace was accepted"; fi
grep -q "trace.jsonl:2: not a trace record" <<<"$msg" || kvs_fail "unexpected error: $msg"
echo "ok: a malformed trace is refused, naming line 2"
if msg=$(kvs_bench --trace "$t" --rate 5 2>&1); then kvs_fail "--trace with --rate accepted"; fi
grep -q "does not combine" <<<"$msg" || kvs_fail "unexpected error: $msg"
echo "PASS test_live_trace"
