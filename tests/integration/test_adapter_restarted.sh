#!/usr/bin/env bash
# An inference server restarted behind kvsplice-adapter, the adapter itself
# staying up: its KVS1 connections to the gateway stay open, and a restart
# between two of the gateway's health checks showed nothing there. Now the
# adapter gives its PONGs a new instance when it sees its server down and
# back (docs/ARCHITECTURE.md, "kvsplice-adapter"), and the gateway, which
# never ejects it, withdraws the routes to the lost cache at the first
# PONG that says so (event=backend_restarted ... up=1). Before, the routes
# stayed, current, and the requests they drew recomputed their prefixes.
# With the gateway checking every 2 s (three intervals before an ejection),
# the adapter polling every 50 ms, and tests/helpers/fake_openai as the
# server, its /health failing (503, "Loading model") for a moment.
# Then the server serves counters of the tokens it took in and put out
# (as llama.cpp's, vLLM's and SGLang's /metrics do), which only grow in one
# process: a /health 503 blip with them growing is no restart (before, it
# was one: routes withdrawn for nothing), a counter lower than the last
# poll's is one, though no poll saw it down (before, unseen), counters
# not grown since the process started say nothing (before, they did), a
# /metrics 5xx says nothing either, and a 501 says the server has none.
# Then the server says when its process started (/metrics'
# process_start_time_seconds, as vLLM's does): a health check that fails
# and passes again in the same process is no restart (nor when /metrics
# times out at the poll that finds it back), and another start time is
# one, though no poll saw it down.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_fake F
kvs_start_adapter A "$FAKE_URL_F" --poll-ms 50
kvs_start_gw --backend "$AD_A" --health-interval-ms 2000
ADLOG=$KVS_TMP/adapter-A.log
instance() { grep -o "event=$1 .*" "$ADLOG" | tail -1 | grep -o ' instance=[0-9]*' | cut -d= -f2; }

assert_eq "adapter up at the gateway" "$(kvs_wait_backend 0 up)" up
first=$(instance listening)
[ -n "$first" ] && [ "$first" != 0 ] || kvs_fail "the adapter said no instance: $(cat "$ADLOG")"
kvs_wait_for "the adapter reads its server ready" 'grep -q event=server_ready "$ADLOG"'
out=$(kvs_bench -n 16 -k 1 --prefixes 4 --prefix-tokens 512 --suffix-tokens 16 --verify framing --json) ||
	kvs_fail "requests before the restart: $out"
assert_eq "requests ok before the restart" "$(jget "$out" .ok)" 16
assert_ge "routes to the adapter" "$(kvs_routes_to 0 current)" 1

# The server down for a moment, and back: a restart, its cache gone.
rm "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads its server down" 'grep -q event=server_not_ready "$ADLOG"' 10
touch "$KVS_TMP/healthy"
kvs_wait_for "the adapter's new instance" 'grep -q event=server_restarted "$ADLOG"' 10
second=$(instance server_restarted)
grep -q "event=server_restarted .* previous=$first " "$ADLOG" ||
	kvs_fail "server_restarted does not name the first instance: $(grep server_restarted "$ADLOG")"
[ "$second" != "$first" ] || kvs_fail "the instance did not change"
kvs_wait_for "the gateway sees the restart" \
	'grep -q "event=backend_restarted backend=$AD_A index=0 instance=$second previous=$first " "$KVS_TMP/gw.log"' 10
# (the line is logged just before the routes are voided: wait, not look)
kvs_wait_for "no route to the adapter after its server restarted" '[ "$(kvs_routes_to 0 current)" = 0 ]' 10
if grep -q "event=backend_down backend=$AD_A " "$KVS_TMP/gw.log"; then
	kvs_fail "the adapter was ejected: the restart was to be seen without it"
fi
assert_eq "adapter still up at the gateway" "$(kvs_wait_backend 0 up)" up
out=$(kvs_bench -n 16 -k 1 --prefixes 4 --prefix-tokens 512 --suffix-tokens 16 --verify framing --json) ||
	kvs_fail "requests after the restart: $out"
assert_eq "requests ok after the restart" "$(jget "$out" .ok)" 16

count() { grep -c "event=$1" "$2" || true; }

# The counters say, once grown in this process: a /health blip with them
# growing keeps the instance.
served() { [ "$(cat "$KVS_TMP/healthy.tokens-served" 2>/dev/null)" = "$1" ]; }
echo 0 >"$KVS_TMP/healthy.tokens"
kvs_wait_for "a poll reads the counters at 0" 'served 0' 10
echo 100 >"$KVS_TMP/healthy.tokens"
kvs_wait_for "the adapter reads the counters grown" \
	'grep -q "event=server_counters .*vllm:prompt_tokens_total=100 " "$ADLOG"' 10
restarts=$(count server_restarted "$ADLOG")
gw_restarts=$(count backend_restarted "$KVS_TMP/gw.log")
downs=$(count server_not_ready "$ADLOG")
ups=$(count server_ready "$ADLOG")
rm "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads its server down" '[ "$(count server_not_ready "$ADLOG")" -gt "$downs" ]' 10
echo 1.5e+02 >"$KVS_TMP/healthy.tokens" # grown, as llama.cpp writes it
touch "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads it ready" '[ "$(count server_ready "$ADLOG")" -gt "$ups" ]' 10
assert_eq "restarts after a 503 blip, counters grown" "$(count server_restarted "$ADLOG")" "$restarts"
assert_eq "adapter up at the gateway after the blip" "$(kvs_wait_backend 0 up)" up
assert_ge "routes to the adapter after the blip" "$(kvs_routes_to 0 current)" 1
# Counters lower than the last poll's, no poll having seen it down: a
# restart quicker than --poll-ms.
downs=$(count server_not_ready "$ADLOG")
echo 3 >"$KVS_TMP/healthy.tokens"
kvs_wait_for "the adapter sees the counters go back" \
	'grep -q "event=server_restarted .*why=\"its counter vllm:prompt_tokens_total went back from 150 to 3\"" "$ADLOG"' 10
assert_eq "downs the adapter saw around the reset" "$(count server_not_ready "$ADLOG")" "$downs"
fourth=$(instance server_restarted)
kvs_wait_for "the gateway sees it" \
	'grep -q "event=backend_restarted backend=$AD_A index=0 instance=$fourth previous=$second up=1 " "$KVS_TMP/gw.log"' 10
kvs_wait_for "no route to the adapter after its counters went back" '[ "$(kvs_routes_to 0 current)" = 0 ]' 10
# (previous=$second above: the gateway saw no instance from the blip)
assert_eq "restarts the gateway logged since the blip" \
	"$(count backend_restarted "$KVS_TMP/gw.log")" $((gw_restarts + 1))
# The counters where this process started them (3 here; SGLang's after the
# request it sends itself before it says ready), not grown since: they
# cannot tell it from another that started the same way, and a down and up
# is a restart, as with counters at 0. Before, any counter above 0 said
# "the same process", and a server restarted before any of its requests
# finished kept the routes to its lost cache.
restarts=$(count server_restarted "$ADLOG")
downs=$(count server_not_ready "$ADLOG")
rm "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads its server down" '[ "$(count server_not_ready "$ADLOG")" -gt "$downs" ]' 10
touch "$KVS_TMP/healthy"
kvs_wait_for "the adapter sees it back as another process" \
	'[ "$(count server_restarted "$ADLOG")" -gt "$restarts" ]' 10
grep "event=server_restarted" "$ADLOG" | tail -1 | grep -q 'why="it was down' ||
	kvs_fail "not a down and up: $(grep event=server_restarted "$ADLOG" | tail -1)"
fifth=$(instance server_restarted)
kvs_wait_for "the gateway sees it" \
	'grep -q "event=backend_restarted backend=$AD_A index=0 instance=$fifth previous=$fourth " "$KVS_TMP/gw.log"' 10
# Grown again, a down, and back with /metrics answering 502 (a proxy's, a
# busy server's): that says nothing of which process answers, and leaves
# it to the next poll that says: the counters grown, the same process.
echo 5 >"$KVS_TMP/healthy.tokens"
kvs_wait_for "the adapter reads the counters grown" \
	'grep -q "event=server_counters .*vllm:prompt_tokens_total=5 " "$ADLOG"' 10
restarts=$(count server_restarted "$ADLOG")
downs=$(count server_not_ready "$ADLOG")
ups=$(count server_ready "$ADLOG")
kinds=$(count server_kind "$ADLOG")
rm "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads its server down" '[ "$(count server_not_ready "$ADLOG")" -gt "$downs" ]' 10
echo 502 >"$KVS_TMP/healthy.metrics-status"
touch "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads it ready, /metrics 502" '[ "$(count server_ready "$ADLOG")" -gt "$ups" ]' 10
echo 6 >"$KVS_TMP/healthy.tokens"
rm "$KVS_TMP/healthy.metrics-status"
kvs_wait_for "a poll reads the counters" 'served 6' 10
echo 7 >"$KVS_TMP/healthy.tokens" # served at the next poll: the last one judged
kvs_wait_for "the next poll" 'served 7' 10
assert_eq "restarts after a down, /metrics 502 at the poll back" \
	"$(count server_restarted "$ADLOG")" "$restarts"
# and still vLLM (its cache_salt kept): a 502 says no other kind
assert_eq "kinds read, /metrics 502 a poll" "$(count server_kind "$ADLOG")" "$kinds"
# Back with /metrics 501 (llama-server restarted without --metrics): it
# says it has none, and the down and up decide.
downs=$(count server_not_ready "$ADLOG")
rm "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads its server down" '[ "$(count server_not_ready "$ADLOG")" -gt "$downs" ]' 10
rm "$KVS_TMP/healthy.tokens"
echo 501 >"$KVS_TMP/healthy.metrics-status"
touch "$KVS_TMP/healthy"
kvs_wait_for "the adapter sees it back, /metrics 501" \
	'[ "$(count server_restarted "$ADLOG")" -gt "$restarts" ]' 10
grep "event=server_restarted" "$ADLOG" | tail -1 | grep -q 'why="it was down' ||
	kvs_fail "not a down and up: $(grep event=server_restarted "$ADLOG" | tail -1)"
sixth=$(instance server_restarted)
kvs_wait_for "the gateway sees it" \
	'grep -q "event=backend_restarted backend=$AD_A index=0 instance=$sixth previous=$fifth " "$KVS_TMP/gw.log"' 10
rm "$KVS_TMP/healthy.metrics-status"
second=$sixth

# The process says: a failed check in the same process is no restart.
echo 1000.5 >"$KVS_TMP/healthy.start"
kvs_wait_for "the adapter reads the start time" 'grep -q "event=server_start_time .*started=1000.500" "$ADLOG"' 10
restarts=$(count server_restarted "$ADLOG")
downs=$(count server_not_ready "$ADLOG")
ups=$(count server_ready "$ADLOG")
rm "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads its server down" '[ "$(count server_not_ready "$ADLOG")" -gt "$downs" ]' 10
touch "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads it ready" '[ "$(count server_ready "$ADLOG")" -gt "$ups" ]' 10
assert_eq "restarts after a failed check in the same process" \
	"$(count server_restarted "$ADLOG")" "$restarts"
# The same process, its /metrics not answering at the poll that finds it
# back (timed out: a slow server): that poll cannot say which process it
# is and decides nothing. Before, it was read as a server without a start
# time, and the down before it as a restart.
downs=$(count server_not_ready "$ADLOG")
rm "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads its server down" '[ "$(count server_not_ready "$ADLOG")" -gt "$downs" ]' 10
ups=$(count server_ready "$ADLOG")
touch "$KVS_TMP/healthy.stall-metrics" "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads it ready, /metrics stalled" '[ "$(count server_ready "$ADLOG")" -gt "$ups" ]' 10
rm "$KVS_TMP/healthy.stall-metrics"
assert_eq "restarts after a failed check in the same process, /metrics stalled" \
	"$(count server_restarted "$ADLOG")" "$restarts"
# Another process, between two polls.
gw_restarts=$(count backend_restarted "$KVS_TMP/gw.log")
echo 2000.25 >"$KVS_TMP/healthy.start"
kvs_wait_for "the adapter sees another process" \
	'grep -q "event=server_restarted .*why=\"its process_start_time_seconds changed\"" "$ADLOG"' 10
third=$(instance server_restarted)
kvs_wait_for "the gateway sees it" \
	'grep -q "event=backend_restarted backend=$AD_A index=0 instance=$third previous=$second " "$KVS_TMP/gw.log"' 10
assert_eq "restarts the gateway logged" "$(count backend_restarted "$KVS_TMP/gw.log")" $((gw_restarts + 1))
echo "PASS test_adapter_restarted"
