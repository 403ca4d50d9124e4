#!/usr/bin/env bash
# The kernel's per-request load accounting (the inflight map). One request
# with a 4,000-token prompt and 500 tokens to generate (and declared),
# decoding for about a second, sampled while it runs. Its output is charged
# as min(declared, learnt) (kvs_charged_output): 256 tokens, since a fresh
# gateway has seen no END to learn from yet (KVS_EXPECT_OUTPUT_INIT).
#  - --release-prefill end: the whole charge (prompt + output) is held until
#    the END;
#  - --release-prefill first-token: after the first CHUNK only the decode part
#    (the 256 output tokens charged) is still charged;
# and in both modes, once it has ended, no work is left charged and no
# inflight record is left behind.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.2

# Prints "outstanding outstanding_work" of backend 0 every 20 ms while a
# request runs, then checks that everything was released.
sample_one_request() {
	local out samples
	kvs_bench -n 1 -k 1 --prefixes 1 --prefix-tokens 4000 --suffix-tokens 0 -m 500 \
		--declared-max-tokens 500 --json \
		>"$KVS_TMP/bench.json" &
	local bench=$!
	samples=""
	while kill -0 "$bench" 2>/dev/null; do
		samples+="$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json |
			jq -r '.[0] | "\(.outstanding) \(.outstanding_work)"')"$'\n'
		sleep 0.02
	done
	wait "$bench" || kvs_fail "request failed: $(cat "$KVS_TMP/bench.json")"
	out=$(cat "$KVS_TMP/bench.json")
	assert_eq "requests answered" "$(jget "$out" .ok)" 1
	b=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)
	assert_eq "work left charged after the END" "$(jget "$b" '.[0].outstanding_work')" 0
	assert_eq "inflight records left" \
		"$(bpftool -j map dump pinned "$KVS_PIN/inflight" | jq length)" 0
	assert_eq "END without a record" "$(jget "$(kvs_stats)" .inflight_lost)" 0
	SAMPLES=$(grep '^1 ' <<<"$samples")
	[ -n "$SAMPLES" ] || kvs_fail "no sample caught the request in flight"
}

kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --release-prefill end
sample_one_request
assert_ge "end: least work charged while in flight" \
	"$(awk 'NR == 1 || $2 < m { m = $2 } END { print m }' <<<"$SAMPLES")" 4256
kill "$GW_PID"
wait "$GW_PID" 2>/dev/null
rm -f "$KVS_TMP/gw.port"

kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --release-prefill first-token
sample_one_request
least=$(awk 'NR == 1 || $2 < m { m = $2 } END { print m }' <<<"$SAMPLES")
assert_eq "first-token: work charged while decoding (the 256 output tokens charged)" "$least" 256
echo "PASS test_prefill_release"
