#!/usr/bin/env bash
# Backends say their KV capacity in their PONGs (KVS_LOAD_F_KV_BLOCKS, in
# 16-token blocks) and the gateway sizes its index of each by it, before
# any request: simulators of 400, 4,000 and 100,000 blocks behind a gateway
# told 1,000 get indexes of 400 and 4,000, and the third is held to 4x the
# configured size (the memory the operator allowed an index). The size a
# backend said survives traffic and the reports' corrections move around
# it; a new connection's probe says it before the first health check;
# with --backend-kv-reports no the configured size stands for all.
# kvsplice-adapter says its server's: vLLM's cache_config_info
# (num_gpu_blocks x block_size, tests/helpers/fake_openai standing for
# vLLM), again when it changes (a server restarted with another memory
# budget), or --kv-tokens when the server says none.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.005 --kv-blocks 400
kvs_start_sim B --time-scale 0.005 --kv-blocks 4000
kvs_start_sim C --time-scale 0.005 --kv-blocks 100000
BACKENDS=(--backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"
	--backend "127.0.0.1:$SIM_PORT_C")
sizes() {
	"$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json |
		jq -r "[.[] | .$1] | map(tostring) | join(\" \")"
}

kvs_start_gw "${BACKENDS[@]}" --backend-kv-blocks 1000 --health-interval-ms 200
kvs_wait_for "each index sized by what its backend said" '[ "$(sizes index_blocks)" = "400 4000 4000" ]'
assert_eq "capacities said, logged once each" \
	"$(grep -c 'event=backend_capacity' "$KVS_TMP/gw.log")" 3
grep -q "event=backend_capacity backend=127.0.0.1:$SIM_PORT_C kv_blocks=100000 index_blocks=4000" \
	"$KVS_TMP/gw.log" || kvs_fail "C's capacity not logged as held to 4x: $(grep capacity "$KVS_TMP/gw.log")"

# Traffic that fits: the sizes stand (the PONGs that keep coming change
# nothing once said; only the reports' evidence would).
out=$(kvs_bench -n 120 -k 4 --prefixes 6 --prefix-tokens 1024 --suffix-tokens 64 --json) ||
	kvs_fail "requests failed: $out"
assert_eq "requests answered" "$(jget "$out" .ok)" 120
# a health check answered after the traffic, by every backend: the
# oldest PONG younger than the time since
done_at=$(date +%s.%N)
kvs_wait_for "a health check after the traffic" \
	'awk -v a="$(sizes pong.age_s | tr " " "\n" | sort -g | tail -1)" -v t="$done_at" \
		-v n="$(date +%s.%N)" "BEGIN { exit !(a >= 0 && a < n - t) }"'
assert_eq "capacities logged after traffic" \
	"$(grep -c 'event=backend_capacity' "$KVS_TMP/gw.log")" 3
assert_eq "indexes after traffic" "$(sizes index_blocks)" "400 4000 4000"

kill "$GW_PID"
wait "$GW_PID" || true

# Before the first health check: a new connection's probe says it, so a
# backend takes its first request with its index sized (it is logged
# before the backend is up, which only a probe's PONG can do).
kvs_start_gw "${BACKENDS[@]}" --backend-kv-blocks 1000 --health-interval-ms 3600000
for i in 0 1 2; do
	[ "$(kvs_wait_backend $i up)" = up ] || kvs_fail "backend $i not up"
done
assert_eq "indexes once up, from the probes" "$(sizes index_blocks)" "400 4000 4000"
for n in A B C; do
	port=SIM_PORT_$n
	assert_eq "what the log says first of $n: its capacity, before it is up" \
		"$(grep -m1 -oE "event=(backend_capacity|backend_up) backend=127.0.0.1:${!port} " \
			"$KVS_TMP/gw.log")" "event=backend_capacity backend=127.0.0.1:${!port} "
done
kill "$GW_PID"
wait "$GW_PID" || true

kvs_start_gw "${BACKENDS[@]}" --backend-kv-blocks 1000 --health-interval-ms 200 \
	--backend-kv-reports no
kvs_wait_for "every backend's PONG read" '[ "$(sizes pong.kv_total_blocks)" = "400 4000 100000" ]'
assert_eq "indexes with --backend-kv-reports no" "$(sizes index_blocks)" "1000 1000 1000"
assert_eq "no capacity taken" "$(grep -c 'event=backend_capacity' "$KVS_TMP/gw.log" || true)" 0
kill "$GW_PID"
wait "$GW_PID" || true

# Behind kvsplice-adapter: a vLLM of 2,000 blocks of 16 tokens, and a
# server that says nothing, given --kv-tokens 48000 (3,000 blocks).
kvs_start_fake V
echo 2000 >"$KVS_TMP/healthy.kv-blocks"
kvs_start_adapter V "$FAKE_URL_V" --poll-ms 50
kvs_start_adapter O "$FAKE_URL_V" --poll-ms 50 --server-kind openai --kv-tokens 48000
kvs_start_gw --backend "$AD_V" --backend "$AD_O" --backend-kv-blocks 1000 --health-interval-ms 200
kvs_wait_for "the adapters' capacities taken" '[ "$(sizes index_blocks)" = "2000 3000" ]'
grep -q "event=server_capacity kv_tokens=32000" "$KVS_TMP/adapter-V.log" ||
	kvs_fail "the adapter did not log vLLM's capacity: $(cat "$KVS_TMP/adapter-V.log")"
kvs_wait_for "the PONGs in blocks (in use: vLLM's 50% of them)" \
	'[ "$(sizes pong.kv_used_blocks)/$(sizes pong.kv_total_blocks)" = "1000 0/2000 3000" ]'
echo 3500 >"$KVS_TMP/healthy.kv-blocks"
kvs_wait_for "a new capacity said, taken" '[ "$(sizes index_blocks)" = "3500 3000" ]'
# One that no longer says (not sized yet): the last size said stands.
echo None >"$KVS_TMP/healthy.kv-blocks"
kvs_wait_for "the adapter no longer says it" \
	'grep -q "event=server_capacity kv_tokens=0" "$KVS_TMP/adapter-V.log"'
kvs_wait_for "a PONG without it" '[ "$(sizes pong.kv_total_blocks)" = "1000 3000" ]'
assert_eq "indexes once vLLM says nothing" "$(sizes index_blocks)" "3500 3000"
echo "PASS test_kv_reports"
