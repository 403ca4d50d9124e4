#!/usr/bin/env bash
# Routing scenarios through the live gateway and four simulated backends:
#  - a common system prompt shared by every request does not pull traffic to
#    one backend (load max/mean <= 1.3) and is not followed by the kernel,
#    which places those requests as new prefixes itself;
#  - shared templates are served from cache and stay balanced;
#  - requests with nothing in common spread evenly;
#  - another tenant's salt never shares a route or a cache entry;
#  - multi-turn conversations stay on their backend from the second turn
#    on, while it holds them, even though later turns are served by the
#    kernel alone (it learns the deeper routes itself).
source "$(dirname "$0")/lib.sh"
kvs_setup

# start_fleet KV_BLOCKS NAME...: a simulator of KV_BLOCKS blocks per name,
# and the gateway in front of them (any gateway before it stopped first).
# At a tenth of the model's times (not the usual hundredth) the modelled
# work outweighs what CPU starvation adds: on a busy machine (load 11) the
# spread of unshared requests was 1.27-1.36 at 0.01, 1.01-1.02 at 0.1.
start_fleet() {
	local kv=$1
	shift
	if [ -n "${GW_PID:-}" ]; then
		kill "$GW_PID"
		wait "$GW_PID" 2>/dev/null
		rm -f "$KVS_TMP/gw.port"
	fi
	kvs_start_sims "$*" --time-scale 0.1 --kv-blocks "$kv"
	kvs_start_gw "${KVS_BACKENDS[@]}" --backend-kv-blocks "$kv"
}
start_fleet 1200 A B C D

# 1. Every request: the same 256-token system prompt, then 1,024 of its own.
s0=$(kvs_stats)
out=$(kvs_bench -n 800 -k 8 --prefixes 1 --prefix-tokens 256 --suffix-tokens 1024 --fleet 4 --json) ||
	kvs_fail "system-prompt run failed: $out"
mm=$(jget "$out" '.load_max_over_mean * 100 | floor')
assert_le "system prompt: load max/mean x100" "$mm" 130
s1=$(kvs_stats)
assert_ge "system prompt: matches too shallow to follow" \
	$(($(jget "$s1" .pass_shallow) - $(jget "$s0" .pass_shallow))) 700
assert_ge "system prompt: placed by the kernel as new prefixes" \
	$(($(jget "$s1" .placed_shallow) - $(jget "$s0" .placed_shallow))) 700
assert_eq "system prompt: requests sent to the controller" \
	$(($(jget "$s1" .slow_path_frames) - $(jget "$s0" .slow_path_frames))) 0

# 2. 16 templates of 1,536 tokens (2x one backend's 19k-token cache), 256 of
#    its own each: mostly from cache, balanced, mostly routed in the kernel.
s0=$(kvs_stats)
out=$(kvs_bench -n 960 -k 8 --prefixes 16 --prefix-tokens 1536 --suffix-tokens 256 --fleet 4 --json) ||
	kvs_fail "template run failed: $out"
hit=$(jget "$out" '.hit_rate * 100 | floor')
assert_ge "templates: cache hit rate %" "$hit" 70
# Requests per backend: the policy balances work in tokens, and once their
# prompts are computed these cheap cached requests (8 output tokens) weigh
# almost nothing, so the 16 templates stay where they were first placed.
# New prefixes are placed under a bound on recent placements (fewer than 2
# ahead of the least placed backend, load permitting), which a burst of 16
# can still end 6/4/3/3 when it starts from counts 2 apart (the spread
# measured: docs/EVALUATION.md, "Routing scenarios"). The routing issue's
# 1.3 holds for the shared system prompt, nothing shared and conversations;
# here the bound catches a pile-up.
mm=$(jget "$out" '.load_max_over_mean * 100 | floor')
assert_le "templates: load max/mean x100" "$mm" 160
s1=$(kvs_stats)
fast=$(($(jget "$s1" .fast_path_frames) - $(jget "$s0" .fast_path_frames)))
assert_ge "templates: routed in the kernel (of 960)" "$fast" 860

# 3. Nothing shared: an even spread.
out=$(kvs_bench -n 800 -k 8 --prefixes 0 --suffix-tokens 1024 --fleet 4 --json) ||
	kvs_fail "unshared run failed: $out"
mm=$(jget "$out" '.load_max_over_mean * 100 | floor')
assert_le "nothing shared: load max/mean x100" "$mm" 115

# 4. Tenant salts: the same prompts as run 2 under another salt find no route
#    and no cached prefix anywhere.
s0=$(kvs_stats)
out=$(kvs_bench -n 16 -k 1 --prefixes 16 --prefix-tokens 1536 --suffix-tokens 256 \
	--salt 77 --json) || kvs_fail "salted run failed: $out"
assert_eq "other salt: cached prompt tokens" "$(jget "$out" '.hit_rate')" 0
s1=$(kvs_stats)
assert_eq "other salt: requests placed as new prefixes" \
	$(($(jget "$s1" .placed_cold) - $(jget "$s0" .placed_cold))) 16
assert_eq "other salt: requests that followed a route" \
	$(($(jget "$s1" .fast_path_frames) - $(jget "$s0" .fast_path_frames) - 16)) 0
# 5. 64 conversations, 6 turns of 256 tokens each (each turn's prompt is the
#    conversation so far). Fewer conversations make max/mean coarse: with 32,
#    one conversation more on a backend is +12.5 points. On a fleet of its
#    own whose caches hold them all (2,400 blocks a backend; the 64 fill 64%
#    of the fleet at most): a turn then moves only if routing moves it. (On
#    the 1,200-block fleet the backends evict a third of the conversations,
#    the index withdraws their routes, and their next turns are placed anew,
#    as test_route_turnover shows for cold prompts.)
start_fleet 2400 E F G H
s0=$(kvs_stats)
out=$(kvs_bench -n 384 -k 8 --conversations 64 --turn-tokens 256 --fleet 4 --json) ||
	kvs_fail "conversation run failed: $out"
later=$(jget "$out" .later_turns)
assert_eq "conversations: later turns served" "$later" 320
assert_le "conversations: later turns moved to another backend" "$(jget "$out" .turn_moves)" 16
mm=$(jget "$out" '.load_max_over_mean * 100 | floor')
assert_le "conversations: load max/mean x100" "$mm" 130
s1=$(kvs_stats)
assert_ge "conversations: routes the kernel learned" \
	$(($(jget "$s1" .routes_learned) - $(jget "$s0" .routes_learned))) 64
assert_eq "conversations: requests sent to the controller" \
	$(($(jget "$s1" .slow_path_frames) - $(jget "$s0" .slow_path_frames))) 0

# stats --json carries each backend's outstanding work; all of it has ended.
s=$(kvs_stats)
assert_eq "backends in stats" "$(jget "$s" '.backends | length')" 4
assert_eq "outstanding work after the runs" "$(jget "$s" '[.backends[].outstanding_work] | add')" 0
echo "PASS test_routing"
