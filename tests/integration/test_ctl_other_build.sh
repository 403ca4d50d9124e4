#!/bin/bash
# kvsplicectl reads pinned maps into its own build's structs. Maps pinned
# by a kvspliced of another build (a field added, a layout changed) hold
# values of another size: read as they are, a larger one would be written
# past kvsplicectl's struct and a smaller one misread. It refuses them by
# name, with what to do, and reads nothing. Here a gateway of this build
# runs; its ctl_stats pin is then replaced by one of another value size.
# (On the old code, `stats` read a ctl_stats of 8-byte values as zeros
# and printed them with exit code 0; one of 4,096-byte values filled with
# 0x41 overran its stack and it died of SIGSEGV.)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sims A --time-scale 0.01
kvs_start_gw "${KVS_BACKENDS[@]}"
out=$(kvs_stats) || kvs_fail "kvsplicectl stats on its own build's maps failed"
assert_eq "its own build's maps: controller counters read" \
	"$(jget "$out" '.controller | has("health_held")')" true

# A gateway from before backend_ttft (2026-12-03) pinned none: backends
# and stats go without it, a dash for each TTFT, their JSON still JSON.
# The gateway has sent nothing yet: backends with no END, the same dash.
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
for pins in own old; do
	[ "$pins" = old ] && rm -f "$KVS_PIN/backend_ttft"
	out=$(ctl backends) || kvs_fail "backends, $pins pins: exit code $?"
	awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "ttft_ms") c = i; next }
	     $c != "-" { exit 1 }' <<<"$out" || kvs_fail "backends, $pins pins: ttft_ms not '-': $out"
	out=$(ctl backends --json) || kvs_fail "backends --json, $pins pins: exit code $?"
	assert_eq "backends --json, $pins pins: TTFTs counted, none" \
		"$(jq -c '[.[].ttft.count] | unique' <<<"$out")" "[0]"
	out=$(ctl stats --json) || kvs_fail "stats --json, $pins pins: exit code $?"
	assert_eq "stats --json, $pins pins: backends' TTFTs" \
		"$(jq -c '[.backends[].ttft.mean_ms] | unique' <<<"$out")" "[0]"
	echo "ok: $pins pins: backends and stats show no TTFT, as JSON and text"
done
bpftool map create "$KVS_PIN/backend_ttft" type array key 4 value 8 entries 64 \
	name backend_ttft || kvs_fail "bpftool map create backend_ttft"
rc=0
err=$(ctl backends 2>&1 >/dev/null) || rc=$?
assert_eq "backends, backend_ttft of another build: exit code" "$rc" 1
grep -q "backend_ttft was pinned by a kvspliced of another build" <<<"$err" ||
	kvs_fail "backends: backend_ttft of another build not refused: $err"
rm -f "$KVS_PIN/backend_ttft"
echo "ok: backends: backend_ttft of another build refused by name"

# The maps a command goes without when absent are refused all the same
# when of another build. (On the old code, stats printed "backends": []
# with exit code 0, and status without a controller counted every client
# connection as the controller's own: "spliced nothing".)
nosock="$KVS_TMP/no-controller.sock" # status reads the maps, as with no controller
rc=0
err=$(ctl --socket "$nosock" status 2>&1 >/dev/null) || rc=$?
assert_eq "status without a controller, own build: exit code 3" "$rc" 3
grep -q "another build" <<<"$err" && kvs_fail "own build's maps refused: $err"
rm -f "$KVS_PIN/conns"
bpftool map create "$KVS_PIN/conns" type hash key 8 value 8 entries 16 name conns ||
	kvs_fail "bpftool map create conns"
rc=0
err=$(ctl --socket "$nosock" status 2>&1 >/dev/null) || rc=$?
assert_eq "status without a controller, conns of another build: exit code 3" "$rc" 3
grep -q "conns was pinned by a kvspliced of another build" <<<"$err" ||
	kvs_fail "status: conns of another build not refused: $err"
echo "ok: status without a controller: conns of another build refused by name"
rm -f "$KVS_PIN/backends"
bpftool map create "$KVS_PIN/backends" type array key 4 value 8 entries 64 name backends ||
	kvs_fail "bpftool map create backends"
rc=0
err=$(ctl stats --json 2>&1 >/dev/null) || rc=$?
assert_ge "stats, backends of another build: exit code" "$rc" 1
grep -q "backends was pinned by a kvspliced of another build" <<<"$err" ||
	kvs_fail "stats: backends of another build not refused: $err"
echo "ok: stats: backends of another build refused by name"

for size in 8 4096; do
	rm -f "$KVS_PIN/ctl_stats"
	bpftool map create "$KVS_PIN/ctl_stats" type array key 4 value "$size" entries 1 \
		name ctl_stats || kvs_fail "bpftool map create"
	rc=0
	err=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" stats 2>&1 >/dev/null) || rc=$?
	assert_ge "ctl_stats of $size-byte values: kvsplicectl stats fails (exit code)" "$rc" 1
	grep -q "ctl_stats was pinned by a kvspliced of another build" <<<"$err" ||
		kvs_fail "ctl_stats of $size-byte values: no clear error: $err"
	echo "ok: ctl_stats of $size-byte values: refused by name"
done
# a flush still flushes, and says the tenants' counts were left to the
# controller's recount
rm -f "$KVS_PIN/route_shares"
bpftool map create "$KVS_PIN/route_shares" type array key 4 value 8 entries 4 \
	name route_shares || kvs_fail "bpftool map create route_shares"
rc=0
err=$(ctl routes flush 2>&1 >/dev/null) || rc=$?
assert_eq "routes flush, route_shares of another build: exit code" "$rc" 0
grep -q "route_shares was pinned by a kvspliced of another build" <<<"$err" ||
	kvs_fail "routes flush: route_shares of another build not named: $err"
echo "ok: routes flush: route_shares of another build named"
echo "PASS test_ctl_other_build"
