#!/usr/bin/env bash
# The discrete-event simulator: deterministic for a seed (the same JSON,
# byte for byte), different for another seed, every request completed for
# every policy, and no policy above the ceiling one fleet-sized LRU cache
# reaches on the same requests (with a point of slack: the policies may
# keep a context a fleet LRU would have let go).
set -euo pipefail
B=${KVS_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
fail() { echo "FAIL: $*" >&2; exit 1; }

args=(sim --requests 3000 --rate 14 --kv-blocks 20000 --json)
a=$("$B/kvsplice-bench" "${args[@]}" --seed 7)
b=$("$B/kvsplice-bench" "${args[@]}" --seed 7)
c=$("$B/kvsplice-bench" "${args[@]}" --seed 8)
[ "$a" = "$b" ] || fail "same seed, different results"
echo "ok: seed 7 twice gives the same report"
[ "$a" != "$c" ] || fail "seeds 7 and 8 gave the same report"
echo "ok: seed 8 gives another"

[ "$(jq '.policies | length' <<<"$a")" = 4 ] || fail "want 4 policies"
[ "$(jq '[.policies[].requests] | unique' <<<"$a")" = "[
  3000
]" ] || fail "not every request completed: $(jq -c '[.policies[].requests]' <<<"$a")"
echo "ok: every policy completed all 3000 requests"
over=$(jq '.fleet_lru_hit_rate as $c | [.policies[] | select(.hit_rate > $c + 0.01)] | length' \
	<<<"$a")
[ "$over" = 0 ] || fail "a policy beat the fleet LRU ceiling by more than a point"
echo "ok: no policy above the fleet LRU ceiling ($(jq .fleet_lru_hit_rate <<<"$a"))"
echo "PASS test_sim"
