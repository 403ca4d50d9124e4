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

# The maps a command goes without when absent are refused all the same
# when of another build. (On the old code, stats printed "backends": []
# with exit code 0, and status without a controller counted every client
# connection as the controller's own: "spliced nothing".)
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
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
