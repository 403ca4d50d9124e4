#!/usr/bin/env bash
# A void route the kernel replaces moves from its former tenant's count
# (route_shares) to the count of the tenant whose request replaced it.
# Tenant 1 teaches the routes of a prompt; they are made void (their gen
# rewritten by bpftool: a backend that goes down has its routes deleted
# from the map since 2026-12-02, so a void route is now one a verdict
# installed just as its backend's routes were withdrawn, which the
# controller's walk missed); tenant 2 (another source with the same cache
# salt, so the same prefix hashes) sends the same prompt: the kernel finds
# the void route, places the request anew and writes its route over the
# void one. Before, the replaced route stayed counted to tenant 1 as well
# as to tenant 2 until the controller's recount (10 s).
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_sim B --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--tenant-routes 1000 --tenant-source 127.0.0.2=111 --tenant-source 127.0.0.3=111
send() { kvs_send_prompts "$@" 1; } # SOURCE TAG: one prompt
share() { kvs_route_share "$@"; }
routes_of() { kvs_routes_of "$@"; }

assert_eq "tenant 1: the prompt answered" "$(send 127.0.0.2 shared-prompt)" 1
assert_eq "tenant 1: its routes" "$(routes_of 1)" 4
kvs_void_routes '.[] | select(.formatted.value.tenant == 1)' # each of tenant 1's
assert_eq "tenant 1: its routes, void" "$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" routes --json |
	jq '[.top[] | select(.current)] | length')" 0
s0=$(kvs_stats)
assert_eq "tenant 2: the same prompt answered" "$(send 127.0.0.3 shared-prompt)" 1
s1=$(kvs_stats)
assert_ge "a void route found" $(($(jget "$s1" .pass_stale) - $(jget "$s0" .pass_stale))) 1
replaced=$(routes_of 2)
assert_ge "tenant 2: the route it wrote over the void one" "$replaced" 1
# At once, not at the recount: each count is what the map holds.
assert_eq "tenant 1: counted" "$(share 1 routes)" "$(routes_of 1)"
assert_eq "tenant 2: counted" "$(share 2 routes)" "$replaced"
assert_eq "tenant 1: its routes, less the replaced" "$(routes_of 1)" $((4 - replaced))
echo "PASS test_routes_stale_shares"
