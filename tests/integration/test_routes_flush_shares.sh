#!/usr/bin/env bash
# `kvsplicectl routes flush` takes each tenant's flushed routes off its
# count in route_shares at once: left, the counts held each share full of
# routes that were gone until the controller's recount (10 s), refusing
# the tenant's new routes meanwhile. Then the tenants learn again from 0.
# A backend removed: its routes (void since it went) leave the map, and
# their tenants' counts, at once; left, they held both until the LRU or a
# trim took them.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_sim B --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" --tenant-routes 1000 \
	--tenant-source 127.0.0.2=111 --tenant-source 127.0.0.3=222
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
send() { kvs_send_prompts "$@"; }
share() { kvs_route_share "$@"; }
routes_of() { kvs_routes_of "$@"; }
# routes_to B [T]: routes in the map naming backend slot B (of tenant T)
routes_to() {
	bpftool map dump pinned "$KVS_PIN/routes" -j | jq --argjson b "$1" --argjson t "${2:--1}" \
		'[.[] | select(.formatted.value.backend == $b and
			($t < 0 or .formatted.value.tenant == $t))] | length'
}

assert_eq "tenant 1: requests answered" "$(send 127.0.0.2 one 4)" 4
assert_eq "tenant 2: requests answered" "$(send 127.0.0.3 two 2)" 2
assert_eq "tenant 1: its routes" "$(routes_of 1)" 16
assert_eq "tenant 1: counted" "$(share 1 routes)" 16
assert_eq "tenant 2: counted" "$(share 2 routes)" 8

f=$(ctl routes flush --json)
assert_eq "routes flushed" "$(jget "$f" .flushed)" 24
assert_eq "routes left" "$(jget "$(ctl routes --json)" .routes)" 0
# At once, not at the recount.
assert_eq "tenant 1: count after the flush" "$(share 1 routes)" 0
assert_eq "tenant 2: count after the flush" "$(share 2 routes)" 0
assert_eq "unbound: count after the flush" "$(share 0 routes)" 0

assert_eq "tenant 1: a request after the flush" "$(send 127.0.0.2 again 1)" 1
assert_eq "tenant 1: learns again, counted from 0" "$(share 1 routes)" 4
assert_eq "tenant 1: its routes after the flush" "$(routes_of 1)" 4
assert_eq "tenant 2: still 0" "$(share 2 routes)" 0

# A backend removed. Eight new prompts of tenant 2: placement spreads new
# prefixes over both backends.
assert_eq "tenant 2: requests answered" "$(send 127.0.0.3 spread 8)" 8
a=$(routes_to 0 2)
assert_ge "tenant 2: its routes to A" "$a" 4
all=$(share 2 routes)
assert_eq "tenant 2: counted" "$all" "$(routes_of 2)"
ctl backend remove "127.0.0.1:$SIM_PORT_A" >/dev/null || kvs_fail "remove A"
kvs_wait_for "A removed" 'grep -q "event=backend_removed backend=127.0.0.1:$SIM_PORT_A" "$KVS_TMP/gw.log"'
assert_eq "routes to A left in the map after its removal" "$(routes_to 0)" 0
assert_eq "tenant 2: its routes after A's removal" "$(routes_of 2)" $((all - a))
assert_eq "tenant 2: counted after A's removal" "$(share 2 routes)" $((all - a))
grep -q "event=backend_removed backend=127.0.0.1:$SIM_PORT_A index=0 routes_removed=[1-9]" \
	"$KVS_TMP/gw.log" || kvs_fail "log: $(grep event=backend_removed "$KVS_TMP/gw.log")"
echo "PASS test_routes_flush_shares"
