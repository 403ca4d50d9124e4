#!/usr/bin/env bash
# Routes come and go with the controller's index, in batches: the kernel
# places each new prompt and learns its routes; the controller, reading the
# kernel's report of it, records the prompt in its index and withdraws, in
# one system call, the routes of what its index evicted to make room (the
# kvs_withdraw syscall program). With an index of 600 blocks, room for one
# 8,000-token prompt, 40 cold prompts must leave about one prompt's routes
# in the kernel's map, not forty: the withdrawals really delete, and the
# counts add up.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.001 --kv-blocks 600
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend-kv-blocks 600

out=$(kvs_bench -n 40 -k 1 --prefixes 0 --suffix-tokens 8000 -m 1 --json) ||
	kvs_fail "cold prompts failed: $out"
assert_eq "cold prompts answered" "$(jget "$out" .ok)" 40
kvs_wait_for "the controller read the kernel's 40 reports" \
	'[ "$(jget "$(kvs_stats)" .controller.reports_read)" = 40 ]'
s=$(kvs_stats)
# 8,000 tokens = 500 blocks: checkpoints 4, 8, 16, 32, 64, ..., 448: 11 routes
assert_eq "routes the kernel learned (11 a prompt)" "$(jget "$s" .routes_learned)" 440
assert_eq "prompts nobody holds, placed by the kernel" "$(jget "$s" .placed_cold)" 40
assert_eq "routes the controller installed" "$(jget "$s" .controller.routes_installed)" 0
withdrawn=$(jget "$s" .controller.routes_withdrawn)
left=$(jget "$s" .routes)
assert_ge "routes withdrawn as the index evicted their prompts" "$withdrawn" 400
[ "$left" -le 22 ] || kvs_fail "$left routes left in the map: withdrawals did not delete"
assert_eq "routes learned = left + withdrawn" "$((left + withdrawn))" 440
echo "PASS test_route_turnover"
