#!/usr/bin/env bash
# One client cannot take the controller from the others (issue 18, item
# 4): 8 connections flood PINGs while a victim sends requests the
# controller routes (--kernel-place no: each is a new prompt, decided by
# the controller; on the userspace path every request is), and the
# victim's latency stays within a ratio of its own baseline, measured just
# before in the same run: P50 within 3x, and P90 within 20x (the tail
# moves with whatever else the machine runs: 0.3-10x with the budget,
# 0.4-22x without). Before the budget every PING was answered (up to
# 80,000 PONGs a second here), and the victim's P50 rose 1.4-16x, most
# often 4-10x, with the machine's load; without the budget the test fails
# on the flooders' counts and closes, whatever the latencies.
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
N=1000 # victim requests, one at a time
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
# ratio_ok WHAT GOT BASE MAX: GOT <= MAX x BASE.
ratio_ok() {
	awk -v g="$2" -v b="$3" -v m="$4" 'BEGIN { exit !(g <= m * b) }' ||
		kvs_fail "$1: $2 ms, more than $4 x the baseline's $3 ms"
	echo "ok: $1 = $2 ms (baseline $3 ms, at most x$4)"
}

base=$(victim 1) || kvs_fail "baseline: $base"
assert_eq "baseline requests answered" "$(jget "$base" .ok)" "$N"

"$KVS_BUILD/tests/helpers/ping_flood" "127.0.0.1:$GW_PORT" "$FLOODERS" 120 "$FLOOD_RATE" \
	--reconnect >"$KVS_TMP/flood.out" 2>"$KVS_TMP/flood.log" &
FLOOD_PID=$!
KVS_PIDS+=("$FLOOD_PID")
status() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status --json | jq "$1"; }
kvs_wait_for "the flooders are connected" '[ "$(status .clients)" -ge "$FLOODERS" ]'

flood=$(victim 2) || kvs_fail "under the flood: $flood"
kill -0 "$FLOOD_PID" 2>/dev/null || kvs_fail "the flood ended before the victim's run"
assert_eq "victim's requests answered under the flood" "$(jget "$flood" .ok)" "$N"
assert_eq "victim's errors under the flood" "$(jget "$flood" .errors)" 0
ratio_ok "victim's P50 under the flood" "$(jget "$flood" .e2e_p50_ms)" \
	"$(jget "$base" .e2e_p50_ms)" 3
ratio_ok "victim's P90 under the flood" "$(jget "$flood" .e2e_p90_ms)" \
	"$(jget "$base" .e2e_p90_ms)" 20

if [ "${KVS_DATAPATH:-kernel}" = kernel ]; then # the verdict's count, per connection
	over=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" conns --json |
		jq '[.[] | select(.role == "client") | .over_budget] | max')
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
assert_ge "PINGs they sent (3x what they may)" "$(fv sent)" $((3 * cap))
# Each closed after an ERROR busy (the close follows it by 200 ms: the
# last ones may not have been seen by the flooder when it stopped).
assert_ge "flooder connections told busy" "$(fv busy)" "$FLOODERS"
assert_ge "kvsplicectl: flooders closed" "$(status .ctl_budget.closed)" "$FLOODERS"
assert_ge "kvsplicectl: their frames dropped" "$(status .ctl_budget.dropped)" $(($(fv sent) / 2))
grep -q 'event=client_over_budget' "$KVS_TMP/gw.log" || kvs_fail "no client_over_budget log line"
echo "PASS test_ctl_fairness"
