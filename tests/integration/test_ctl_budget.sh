#!/usr/bin/env bash
# The budget of controller work (--ctl-rate) leaves what a client really
# sends alone, and fronts uncapped:
#  1. defaults: a health check's PINGs (20 a second), 256 requests at once
#     on one connection (its --max-client-inflight), each a new prompt the
#     controller routes (--kernel-place no), and a load generator (which
#     PINGs the fleet before and after): all answered, nothing counted over
#     the budget;
#  2. a tiny budget (20 a second, burst 20) and --front-source 127.0.0.0/8:
#     a front's PINGs at 2,000 a second and its 256 requests at once are
#     all answered;
#  3. the same budget, no front-source: the same client is capped (its
#     PINGs over the budget dropped, its requests over it answered busy,
#     every one answered; on the userspace path routed requests are not
#     budgeted), so step 2 passes because of the front's place.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_sim B --time-scale 0.01
start_gw() {
	rm -f "$KVS_TMP/gw.port"
	kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
		--kernel-place no "$@"
	for i in 0 1; do
		[ "$(kvs_wait_backend $i up 400)" = up ] || kvs_fail "backend $i not up"
	done
}
stop_gw() {
	kill "$GW_PID"
	wait "$GW_PID" 2>/dev/null || true
}
status() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status --json | jq "$1"; }
# flood CONNS SECONDS RATE [--drain] -> ping_flood's line
flood() { "$KVS_BUILD/tests/helpers/ping_flood" "127.0.0.1:$GW_PORT" "$@"; }
fv() { sed -n "s/.* $2=\([0-9.]*\).*/\1/p" <<<" $1"; }
# burst SALT: 256 requests at once on one connection, each a new prompt;
# prints how many ended, and how many were answered busy.
printf 'a prompt nobody has sent before, salted by its number:' >"$KVS_TMP/prompt"
burst() {
	local out
	out=$("$KVS_BUILD/tests/helpers/kvs_client" "127.0.0.1:$GW_PORT" "$KVS_TMP/prompt" 256 2 \
		none "$1") || kvs_fail "kvs_client: not every request was answered: $out"
	echo "$(grep -c ' end ' <<<"$out" || true) $(grep -c 'code=busy' <<<"$out" || true)"
}

# 1. What a client sends, against the defaults.
start_gw
p=$(flood 1 2 20 --drain)
echo "health check: $p"
assert_eq "health-check PINGs answered" "$(fv "$p" pongs)" "$(fv "$p" sent)"
assert_ge "of 20 a second for 2 s" "$(fv "$p" sent)" 30
assert_eq "256 new prompts at once: ended, busy" "$(burst 1)" "256 0"
out=$(kvs_bench -n 400 -k 4 -d 8 --prefixes 0 --suffix-tokens 64 -m 2 --json) ||
	kvs_fail "load: $out"
assert_eq "load generator's requests answered" "$(jget "$out" .ok)" 400
assert_eq "frames over the budget" "$(status '.ctl_budget | .dropped + .busy + .closed')" 0
assert_eq "status shows the default rate" "$(status .ctl_budget.rate)" 1000
stop_gw

# 2. A front, with a budget far below what it sends.
start_gw --front-source 127.0.0.0/8 --ctl-rate 20 --ctl-burst 20
p=$(flood 2 1 2000 --drain)
echo "front: $p"
assert_eq "front's PINGs answered" "$(fv "$p" pongs)" "$(fv "$p" sent)"
assert_ge "of 2,000 a second for 1 s, on 2 connections (far over 20)" "$(fv "$p" sent)" 1000
assert_eq "front's 256 new prompts at once: ended, busy" "$(burst 2)" "256 0"
assert_eq "front's frames over the budget" "$(status '.ctl_budget | .dropped + .busy')" 0
stop_gw

# 3. The same client, not a front: capped.
start_gw --ctl-rate 20 --ctl-burst 20 --metrics 127.0.0.1:0
p=$(flood 2 1 2000)
echo "not a front: $p"
cap=$(awk -v s="$(fv "$p" seconds)" 'BEGIN { printf "%d", 2 * (20 + 20 * s) + 2 }')
assert_le "its PONGs: burst + rate over the run, per connection" "$(fv "$p" pongs)" "$cap"
assert_ge "its PINGs dropped" "$(status .ctl_budget.dropped)" 1000
read -r ended busy <<<"$(burst 3)"
if [ "${KVS_DATAPATH:-kernel}" = user ]; then
	# The userspace path's routed requests are its data path, not budgeted.
	assert_eq "its 256 new prompts at once (userspace path): ended, busy" "$ended $busy" "256 0"
else
	assert_le "its 256 new prompts at once: routed" "$ended" 40
	assert_eq "the rest answered busy" "$busy" $((256 - ended))
	assert_eq "status counts them" "$(status .ctl_budget.busy)" "$busy"
fi
mport=$(sed -n 's/.*event=metrics_listening.* port=\([0-9]*\).*/\1/p' "$KVS_TMP/gw.log" | head -1)
m=$(curl -s "127.0.0.1:$mport/metrics")
metric() { awk -v k="$1" '$1 == k { print $2 }' <<<"$m"; }
assert_eq "metric: frames dropped = status's" \
	"$(metric 'kvsplice_ctl_budget_frames_total{action="dropped"}')" "$(status .ctl_budget.dropped)"
assert_eq "metric: requests answered busy = status's" \
	"$(metric 'kvsplice_ctl_budget_frames_total{action="busy"}')" "$(status .ctl_budget.busy)"
assert_eq "metric: clients closed" "$(metric kvsplice_ctl_budget_closed_total)" 0
stop_gw
echo "PASS test_ctl_budget"
