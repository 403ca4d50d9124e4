#!/usr/bin/env bash
# A client's requests over --max-client-inflight, on a backend that answers:
# each goes to the controller, which answers busy, and each counts as a
# slow-path frame, as the RUNBOOK's counter table says. The verdict finds
# most of them over the limit before routing them, and once counted only
# those it found over the limit after routing (so a client failing most of
# its requests showed a fast-path share of 100%).
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.5
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --max-client-inflight 2
[ "$(kvs_wait_backend 0 up 400)" = up ] || kvs_fail "backend not up"

st0=$(kvs_stats)
# 2 connections, 4 requests in flight on each: 2 of every 4 over the limit
# (it exits 1: busy answers are errors to it)
kvs_bench -n 40 -k 2 -d 4 -m 50 >"$KVS_TMP/live.out" 2>&1 || true
grep -q "busy" "$KVS_TMP/live.out" || kvs_fail "no request answered busy: $(tail -3 "$KVS_TMP/live.out")"
st=$(kvs_stats)
d() { echo $(($(jget "$st" "$1") - $(jget "$st0" "$1"))); }
echo "fast $(d .fast_path_frames) slow $(d .slow_path_frames) over the limit" \
	"$(d .pass_client_limit) busy $(d .controller.busy_client)"
assert_ge "requests over the client's limit" "$(d .pass_client_limit)" 1
assert_eq "answered busy: each over the limit" "$(d .controller.busy_client)" "$(d .pass_client_limit)"
assert_eq "slow-path frames: each over the limit" "$(d .slow_path_frames)" "$(d .pass_client_limit)"
assert_eq "fast and slow: every request" $(($(d .fast_path_frames) + $(d .slow_path_frames))) 40
echo "PASS test_client_limit_counts"
