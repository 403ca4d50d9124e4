#!/usr/bin/env bash
# The backends' own reports reach the gateway: the kernel reads every END it
# splices, and its per-backend prompt and cached token counts equal what the
# clients were told. And they correct the controller: a gateway that believes
# each backend holds 100,000 blocks when it holds 400 sees its predictions
# fail and shrinks its index of each backend toward the truth, withdrawing
# the routes of what it let go.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sims "A B C D" --time-scale 0.005 --kv-blocks 400
# (--backend-kv-reports no: the simulators say their size, which the
# gateway would take; this is a gateway that cannot know it)
kvs_start_gw "${KVS_BACKENDS[@]}" --backend-kv-blocks 100000 --backend-kv-reports no

# Runs whose 40 templates (2,560 blocks) exceed the fleet (1,600), so the
# predictions fail, then one whose 8 templates fit, so some tokens are cached.
prompt=0
cached=0
run() {
	out=$(kvs_bench -n 400 -k 8 --prefixes "$1" --prefix-tokens 1024 --suffix-tokens 128 \
		--json) || kvs_fail "run with $1 templates failed: $out"
	prompt=$((prompt + $(jget "$out" .prompt_tokens)))
	cached=$((cached + $(jget "$out" .cached_tokens)))
}
backends() {
	sleep 0.3 # a controller tick
	"$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json
}
# Each sixteenth of the index's size in failed predictions halves it about;
# once it is below what it holds it evicts, and withdraws routes. How many runs that
# takes depends on how fast they go, and each backend shrinks at its own
# pace (one that served fewer requests lags): run until every index is
# small and routes were withdrawn, at most 12 runs.
for i in $(seq 1 12); do
	run 40
	b=$(backends)
	[ "$(jget "$(kvs_stats)" .controller.routes_withdrawn)" -ge 1 ] &&
		[ "$(jq '[.[].index_blocks] | max' <<<"$b")" -le 10000 ] && break
done
assert_ge "mispredicted tokens seen" "$(jq '[.[].mispredicted] | add' <<<"$b")" 1
assert_le "largest index after failed predictions (blocks, of 100000 configured)" \
	"$(jq '[.[].index_blocks] | max' <<<"$b")" 10000
# What the shrinking index let go of, the kernel no longer routes to.
assert_ge "routes withdrawn as the index evicted their prefix" \
	"$(jget "$(kvs_stats)" .controller.routes_withdrawn)" 1
run 8
assert_ge "cached tokens the clients were told of" "$cached" 1
b=$(backends)
assert_eq "prompt tokens the kernel read from ENDs" "$(jq '[.[].prompt_tokens] | add' <<<"$b")" "$prompt"
assert_eq "cached tokens the kernel read from ENDs" "$(jq '[.[].cached_tokens] | add' <<<"$b")" "$cached"
echo "PASS test_feedback"
