#!/usr/bin/env bash
# No oracle inputs: kvsplice-bench live declares a client's max_tokens
# (--declared-max-tokens), never the true output length, which reaches only
# the model in the prompt's end-of-sequence marker (" <eos:N>"). Two
# kvsplice-sims behind the gateway. Proves that
#  - the backends see max_tokens 4096 in every REQUEST the gateway passed
#    on (the sims log it; the gateway does not rewrite max_tokens, and
#    what it charges for a declared bound is its own affair),
#  - the sims stop at the marker's 8 tokens, as a model at its end of
#    sequence, and --verify sim still passes byte for byte,
#  - a declared max_tokens below the marker's wins; 0 declares none,
#  - the report gives the load by work beside the load by requests.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01 --log-level debug
kvs_start_sim B --time-scale 0.01 --log-level debug
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"

N=40
COMMON=(-k 2 -d 2 --prefixes 4 --prefix-tokens 256 --suffix-tokens 32 -m 8 --json)

# The sims' served lines: a request's max_tokens and output, as they saw it.
served() {
	cat "$KVS_TMP/A.log" "$KVS_TMP/B.log" | grep 'event=served' || true
}

out=$(kvs_bench -n $N "${COMMON[@]}" --declared-max-tokens 4096) ||
	kvs_fail "declared 4096 run failed: $out"
assert_eq "requests ok" "$(jget "$out" .ok)" $N
assert_eq "mismatched responses" "$(jget "$out" .mismatches)" 0
assert_eq "output tokens (the marker's 8 each)" "$(jget "$out" .output_tokens)" $((N * 8))
# The sims log a request served just after sending its END.
kvs_wait_for "the sims logged $N served requests" '[ "$(served | wc -l)" -ge '$N' ]'
assert_eq "requests the sims saw declare 4096" \
	"$(served | grep -c 'max_tokens=4096 output_tokens=8$')" $N
# Work per backend: prefill tokens computed, prompt less cached, from ENDs.
work=$(jget "$out" '[.backends[].prefill_tokens] | add')
assert_eq "prefill tokens per backend add up" "$work" \
	$(($(jget "$out" .prompt_tokens) - $(jget "$out" .cached_tokens)))
jget "$out" .load_max_over_mean_work | grep -Eq '^[0-9]+(\.[0-9]+)?$' ||
	kvs_fail "no load_max_over_mean_work in the report: $out"

# A declared max_tokens below the marker's length stops the answer first.
out=$(kvs_bench -n 8 "${COMMON[@]}" --declared-max-tokens 5) ||
	kvs_fail "declared 5 run failed: $out"
assert_eq "declared 5: output tokens" "$(jget "$out" .output_tokens)" $((8 * 5))

# None declared (max_tokens 0): the marker alone decides.
out=$(kvs_bench -n 8 "${COMMON[@]}" --declared-max-tokens 0) ||
	kvs_fail "declared 0 run failed: $out"
assert_eq "declared none: output tokens" "$(jget "$out" .output_tokens)" $((8 * 8))
kvs_wait_for "the sims logged the last runs" '[ "$(served | wc -l)" -ge '$((N + 16))' ]'
assert_eq "requests the sims saw declare none" \
	"$(served | grep -c 'max_tokens=0 output_tokens=8$')" 8

# The text report has the work line too.
txt=$(kvs_bench -n 8 -k 2 --prefixes 2 --prefix-tokens 64 -m 4) || kvs_fail "text run failed: $txt"
grep -q '^work  .*max/mean' <<<"$txt" || kvs_fail "no work line in the text report: $txt"

echo "PASS test_declared_max_tokens"
