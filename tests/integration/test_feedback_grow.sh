#!/usr/bin/env bash
# The backends' reports correct an index that is too small as well: a
# gateway that believes each backend holds 256 blocks when it holds 4,000
# forgets prefixes the backends still hold; placed again, they hit where
# the gateway expected nothing (unexpected_cached), and its index of each
# backend grows past the configured size toward the truth.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sims "A B C D" --time-scale 0.005 --kv-blocks 4000
# (--backend-kv-reports no: the simulators say their size, which the
# gateway would take; this is a gateway that cannot know it)
kvs_start_gw "${KVS_BACKENDS[@]}" --backend-kv-blocks 256 --backend-kv-reports no

# 40 templates of 64 blocks (2,560 blocks): the fleet (16,000) holds them
# all, the index of each backend (256) about four of its ten.
run() {
	out=$(kvs_bench -n 400 -k 8 --prefixes 40 --prefix-tokens 1024 --suffix-tokens 128 \
		--json) || kvs_fail "run failed: $out"
}
backends() {
	sleep 0.3 # a controller tick
	"$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json
}
# How many runs the growth takes depends on how the templates fall: run
# until every index has grown past 512 blocks (twice the configured size),
# at most 12 runs.
for i in $(seq 1 12); do
	run
	b=$(backends)
	[ "$(jq '[.[].index_blocks] | min' <<<"$b")" -gt 512 ] && break
done
assert_ge "unexpected cached tokens seen" "$(jq '[.[].unexpected_cached] | add' <<<"$b")" 1
assert_ge "smallest index after unexpected hits (blocks, of 256 configured)" \
	"$(jq '[.[].index_blocks] | min' <<<"$b")" 513
# Bounded: never above 4x the configured size.
assert_le "largest index (blocks, at most 4 x 256)" "$(jq '[.[].index_blocks] | max' <<<"$b")" 1024
echo "PASS test_feedback_grow"
