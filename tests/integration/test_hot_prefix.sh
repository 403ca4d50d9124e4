#!/bin/bash
# A hot prefix is replicated by the kernel (include/kvsplice/place.h, "Hot
# prefixes"): every request shares a 1,024-token prefix deep enough to be
# followed (then 1,024 tokens of its own), so its route carries all of the
# fleet's work, more than one backend's share: the kernel sends its
# requests to other replicas than the route's backend (hot_replica), and
# the load stays spread. Without the rule every request follows the route to
# one backend until the work limit spills it: load max/mean 2.58-3.26 in
# three runs at 04569e3 (1.01-1.36 with it, on busy cores). Then the same
# where the controller decides every request (the userspace data path,
# fresh backends): its policy replicates the prefix by the same rule (reason
# "hot" in its decision log: 923-1,062 of 1,200 in three runs, load
# max/mean 1.08-1.22); without it (a local build with the policy's hot
# prefixes off), none, and max/mean 1.39-1.56: the controller's own rule
# spills a loaded holder sooner than the kernel's work limit does. A
# replica's first request is charged for the prefix it recomputes.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sims "A B C D" --time-scale 0.01 --kv-blocks 2400
kvs_start_gw "${KVS_BACKENDS[@]}" --backend-kv-blocks 2400

s0=$(kvs_stats)
out=$(kvs_bench -n 1200 -k 8 --prefixes 1 --prefix-tokens 1024 --suffix-tokens 1024 --fleet 4 \
	--json) || kvs_fail "hot prefix run failed: $out"
s1=$(kvs_stats)
followed=$(($(jget "$s1" .fast_path_frames) - $(jget "$s0" .fast_path_frames)))
assert_ge "hot prefix: routed in the kernel (of 1200)" "$followed" 1100
hot=$(($(jget "$s1" '.hot_replica // -1000000') - $(jget "$s0" '.hot_replica // 0')))
assert_ge "hot prefix: sent to another replica than the route's backend" "$hot" 200
mm=$(jget "$out" '.load_max_over_mean * 100 | floor')
assert_le "hot prefix: load max/mean x100" "$mm" 150
hit=$(jget "$out" '.hit_rate * 100 | floor')
assert_ge "hot prefix: cache hit rate %" "$hit" 40
# Each replica's first request recomputes the prefix and is charged so:
# its END shows nothing the gateway expected cached and missed. Before,
# each replica's first was charged as cached: 996 tokens mispredicted on
# each of the three replicas, 2,988 in all (two runs at def87c2). So count
# the backends that missed a prefix they were expected to hold, not the
# tokens: until the simulator cached a block as it planned the step
# computing it (as vLLM v1 does), two of the prefix's requests reaching a
# new replica during one of its steps were admitted together at the next
# and the second recomputed the prefix: 996 on one replica in about 1 run
# of 6 at 618d37a. Since, 1 run in 37 on a quiet machine, 5 in 30 beside a
# test run: two requests on the backend's two pool connections read in
# the other order, and the same backend shows the first one's prefix
# cached unexpectedly (960); that one is not counted. Every new replica
# missing with nothing unexpected is the old charge.
bes=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)
used=$(jq '[.[] | select(.requests > 0)] | length' <<<"$bes")
assert_ge "hot prefix: backends that served requests" "$used" 3
missed=$(jq '[.[] | select(.mispredicted >= 900 and .unexpected_cached < 900)] | length' <<<"$bes")
assert_le "hot prefix: backends that missed a whole prefix expected cached" "$missed" $((used - 2))
kill "$GW_PID"
wait "$GW_PID" 2>/dev/null || true
kvs_start_sims "E F G H" --time-scale 0.01 --kv-blocks 2400
KVS_DATAPATH=user kvs_start_gw "${KVS_BACKENDS[@]}" --backend-kv-blocks 2400 --log-level debug
out=$(kvs_bench -n 1200 -k 8 --prefixes 1 --prefix-tokens 1024 --suffix-tokens 1024 --fleet 4 \
	--json) || kvs_fail "hot prefix run, controller's path, failed: $out"
hot=$(grep -c 'event=decision .*reason=hot' "$KVS_TMP/gw.log" || true)
assert_ge "hot prefix, controller's path: placed among replicas (of 1200)" "$hot" 600
# the controller publishes its counters on its tick
kvs_wait_for "decided_hot counts the $hot hot decisions" \
	'[ "$(jget "$(kvs_stats)" .controller.decided_hot)" = "$hot" ]'
mm=$(jget "$out" '.load_max_over_mean * 100 | floor')
assert_le "hot prefix, controller's path: load max/mean x100" "$mm" 150
hit=$(jget "$out" '.hit_rate * 100 | floor')
assert_ge "hot prefix, controller's path: cache hit rate %" "$hit" 40
echo "PASS test_hot_prefix"
