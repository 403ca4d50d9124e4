#!/usr/bin/env bash
# One client cannot take the controller from the others (issue 18, item
# 4): 8 connections flood PINGs while a victim sends requests the
# controller routes (--kernel-place no: each is a new prompt, decided by
# the controller; on the userspace path every request is). The victim
# runs in rounds, alone (the flooders stopped) and under the flood in
# turn, so that what the rest of the machine does falls on both alike;
# the median of the rounds' P50 under the flood stays within 2x of the
# median alone (+1 ms), P90 within 5x (+3 ms). Measured: 0.9-1.1x and 0.8-1.7x with the
# budget; without it (KVS_FAIRNESS_ARGS="--ctl-rate 0") every PING was
# answered (up to 80,000 a second here), P50 2.2-4.5x and P90 2.2-9.5x,
# and the test fails (on the counts below when not on the latency).
#
# The flooders send 10,000 PINGs a second each, more than the controller
# could answer for all of them, and reconnect whenever they are closed:
# capped at --ctl-rate (default 1,000 a second, burst 1,000) and closed at
# --ctl-close-after (10,000 frames over), each of their connections got
# at most its burst plus the rate over its life. They are paced rather
# than flat out so that the flooding process, which on loopback also
# carries the kernel's work for its frames, does not take a whole core of
# this 2-core machine: that cost is the kernel's, not the controller's
# (docs/RUNBOOK.md, "One client and the controller"). KVS_FAIRNESS_ARGS
# adds kvspliced flags: "--ctl-rate 0" (no budget) makes this test fail.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

FLOODERS=8
FLOOD_RATE=${FLOOD_RATE:-10000} # PINGs a second, each
RATE=1000        # the defaults of --ctl-rate and --ctl-burst
BURST=1000
ROUNDS=4 # of each: the victim alone, then under the flood
N=400    # victim requests a round, one at a time
# shellcheck disable=SC2206
extra=(${KVS_FAIRNESS_ARGS:-})

kvs_start_sim A --time-scale 0.001
kvs_start_sim B --time-scale 0.001
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--kernel-place no "${extra[@]}"

# N requests, one at a time, each a prompt nobody holds (a salt per run);
# --fleet: no PINGs of its own.
victim() {
	kvs_bench -k 1 -d 1 -n "$N" --prefixes 0 --suffix-tokens 64 -m 1 --fleet 2 \
		--salt "$1" --json
}
# ratio_ok WHAT GOT BASE MAX SLACK: GOT <= MAX x BASE + SLACK ms. The
# victim's latencies are fractions of a millisecond: with two CPU hogs
# beside the test (make test-loaded), a few milliseconds of scheduling
# delay under the flood, whose processes take CPU too, would break a pure
# ratio; the starvation this guards against cost hundreds (P99 412 ms).
ratio_ok() {
	awk -v g="$2" -v b="$3" -v m="$4" -v s="$5" 'BEGIN { exit !(g <= m * b + s) }' ||
		kvs_fail "$1: $2 ms, more than $4 x the baseline's $3 ms + $5 ms"
	echo "ok: $1 = $2 ms (baseline $3 ms, at most x$4 + $5 ms)"
}

"$KVS_BUILD/tests/helpers/ping_flood" "127.0.0.1:$GW_PORT" "$FLOODERS" 120 "$FLOOD_RATE" \
	--reconnect >"$KVS_TMP/flood.out" 2>"$KVS_TMP/flood.log" &
FLOOD_PID=$!
KVS_PIDS+=("$FLOOD_PID")
status() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status --json | jq "$1"; }
kvs_wait_for "the flooders are connected" '[ "$(status .clients)" -ge "$FLOODERS" ]'

# Rounds of the victim alone (the flooders stopped: SIGSTOP) and under the
# flood, in turn, so that the load the rest of the machine brings and
# takes away falls on both alike; compared by the median of the rounds.
base=() flood=()
for r in $(seq 1 "$ROUNDS"); do
	kill -STOP "$FLOOD_PID"
	out=$(victim "$r") || kvs_fail "round $r, alone: $out"
	assert_eq "round $r, alone: requests answered" "$(jget "$out" .ok)" "$N"
	base+=("$(jget "$out" '"\(.e2e_p50_ms) \(.e2e_p90_ms)"')")
	d0=$(status .ctl_budget.dropped)
	kill -CONT "$FLOOD_PID"
	# Past the bursts their buckets saved while stopped: over budget again
	# (with no budget, KVS_FAIRNESS_ARGS="--ctl-rate 0", at once).
	kvs_wait_for "round $r: the flooders are over their budget" \
		'[ "$(status .ctl_budget.rate)" = 0 ] || [ "$(status .ctl_budget.dropped)" -ge $((d0 + 8000)) ]'
	out=$(victim $((100 + r))) || kvs_fail "round $r, under the flood: $out"
	assert_eq "round $r, under the flood: requests answered" "$(jget "$out" .ok)" "$N"
	assert_eq "round $r, under the flood: errors" "$(jget "$out" .errors)" 0
	flood+=("$(jget "$out" '"\(.e2e_p50_ms) \(.e2e_p90_ms)"')")
done
kill -0 "$FLOOD_PID" 2>/dev/null || kvs_fail "the flood ended before the victim's rounds"
echo "victim alone (P50 P90 ms): ${base[*]}"
echo "under the flood:           ${flood[*]}"
median() { # COLUMN ROWS...: the median of that column
	local c=$1
	shift
	printf '%s\n' "$@" | awk -v c="$c" '{ print $c }' | sort -g |
		awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio_ok "victim's P50 under the flood (median of rounds)" "$(median 1 "${flood[@]}")" \
	"$(median 1 "${base[@]}")" 2 1
ratio_ok "victim's P90 under the flood (median of rounds)" "$(median 2 "${flood[@]}")" \
	"$(median 2 "${base[@]}")" 5 3

if [ "${KVS_DATAPATH:-kernel}" = kernel ]; then # the verdict's count, per connection
	# Waited for, not read once: the flooders are closed and reconnect, so
	# at one look every client connection may be a new one still within its
	# burst (a loaded run's single look got 0).
	kvs_wait_for "kvsplicectl conns shows a flooder over its budget" \
		'over=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" conns --json |
			jq "[.[] | select(.role == \"client\") | .over_budget] | max // 0")
		[ "$over" -ge 1 ]'
	assert_ge "kvsplicectl conns: a flooder's frames over its budget" "$over" 1
fi
# Each flooder goes 10,000 frames over its budget within ~1.2 s.
kvs_wait_for "each flooder was closed" '[ "$(status .ctl_budget.closed)" -ge "$FLOODERS" ]'
kill -TERM "$FLOOD_PID"
wait "$FLOOD_PID" || kvs_fail "ping_flood failed: $(cat "$KVS_TMP/flood.log")"
f=$(cat "$KVS_TMP/flood.out")
echo "flood: $f"
fv() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<" $f"; }

# Each connection a flooder had got at most its burst, then the rate over
# its life; their lives add up to FLOODERS x the run.
conns=$(($(fv closed) + FLOODERS))
cap=$(awk -v c="$conns" -v b="$BURST" -v r="$RATE" -v k="$FLOODERS" -v s="$(fv seconds)" \
	'BEGIN { printf "%d", c * b + r * k * s }')
assert_le "PONGs the flooders got" "$(fv pongs)" "$cap"
assert_ge "PINGs they sent (more than they may)" "$(fv sent)" "$cap"
# Each closed after an ERROR busy (the close follows it by 200 ms: the
# last ones may not have been seen by the flooder when it stopped).
assert_ge "flooder connections told busy" "$(fv busy)" "$FLOODERS"
assert_ge "kvsplicectl: flooders closed" "$(status .ctl_budget.closed)" "$FLOODERS"
assert_ge "kvsplicectl: their frames dropped" "$(status .ctl_budget.dropped)" $(($(fv sent) / 2))
grep -q 'event=client_over_budget' "$KVS_TMP/gw.log" || kvs_fail "no client_over_budget log line"
echo "PASS test_ctl_fairness"
