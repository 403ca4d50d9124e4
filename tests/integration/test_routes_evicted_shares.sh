#!/usr/bin/env bash
# A route that leaves the map without a word to its tenant's count (the
# LRU's eviction: no program runs, and the insert that evicted does not
# say what it evicted) is taken off the count within about a second, not
# at the 10 s recount: the controller compares, on its tick, the kernel's
# count of the map's entries with the sum of the tenants' counts, and
# recounts when the map holds fewer. Here bpftool deletes two of tenant
# 1's routes behind the controller's back, as an eviction would, twice
# in a row: a recount every 10 s corrects one of them at most within the
# 2 s each may take.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --tenant-routes 1000 \
	--tenant-source 127.0.0.2=111
share() { kvs_route_share "$@"; }

# evict N: N of tenant 1's routes deleted from the map (not its count)
evict() {
	bpftool map dump pinned "$KVS_PIN/routes" -j |
		jq -r '.[] | select(.formatted.value.tenant == 1) | .key | join(" ")' |
		head -n "$1" | while read -r k; do
		# shellcheck disable=SC2086 # the key's bytes, one word each
		bpftool map delete pinned "$KVS_PIN/routes" key $k
	done
}

for round in 1 2; do
	assert_eq "round $round: the prompt answered" "$(kvs_send_prompts 127.0.0.2 "p$round" 1)" 1
	have=$(kvs_routes_of 1)
	assert_eq "round $round: counted" "$(share 1 routes)" "$have"
	evict 2
	assert_eq "round $round: two evicted" "$(kvs_routes_of 1)" $((have - 2))
	t0=$(date +%s%N)
	kvs_wait_for "round $round: the count corrected" \
		"[ \"\$(share 1 routes)\" = $((have - 2)) ]" 2
	echo "ok: round $round: corrected in $((($(date +%s%N) - t0) / 1000000)) ms"
done
echo "PASS test_routes_evicted_shares"
