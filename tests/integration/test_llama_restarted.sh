#!/usr/bin/env bash
# A real llama-server restarted behind kvsplice-adapter, quicker than the
# adapter's --poll-ms (2 s here; the tiny model loads in about 0.5 s).
# llama.cpp's /metrics has no process start time; its counters of tokens
# in and out (llamacpp:prompt_tokens_total, llamacpp:tokens_predicted_total,
# served with --metrics) only grow within one process, and the adapter
# reads one lower than at its last poll as a restart, whether or not a
# poll happened to find the server down in between (life.h). Before, only
# a poll that found it down saw the restart, and one between two polls
# kept the instance: the gateway kept the routes to the lost cache.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_llama.sh"
kvs_setup
kvs_need_llama

C="$KVS_BUILD/tests/helpers/kvs_client"
ADLOG=$KVS_TMP/adapter-A.log
kvs_start_llama A
kvs_start_adapter A "http://127.0.0.1:$LLAMA_PORT_A" --poll-ms 2000 --id 7 \
	--extra-body "$KVS_LLAMA_BODY"
kvs_wait_for "the adapter says ready" '[[ $("$C" "$AD_A" ping) == *"flags=0" ]]'
first=$(grep -o 'event=listening .* instance=[0-9]*' "$ADLOG" | grep -o '[0-9]*$')

echo "a prompt for a server about to restart" >"$KVS_TMP/prompt"
"$C" "$AD_A" "$KVS_TMP/prompt" 2 8 none suffix >"$KVS_TMP/answers" || kvs_fail "requests failed"
assert_eq "requests that ended" "$(grep -c '^req=[0-9]* end ' "$KVS_TMP/answers")" 2
kvs_wait_for "the adapter reads the server's counters" \
	'grep -q "event=server_counters .*llamacpp:prompt_tokens_total=[1-9]" "$ADLOG"' 10
grep -o 'event=server_counters .*' "$ADLOG"

kill -9 "$LLAMA_PID_A"
wait "$LLAMA_PID_A" 2>/dev/null || true
kvs_start_llama A2 --port "$LLAMA_PORT_A" # later flags win: the same port
kvs_wait_for "the adapter sees the counters go back" \
	'grep -q "event=server_restarted .*why=\"its counter llamacpp:[a-z_]* went back from [0-9]* to 0\"" "$ADLOG"' 10
grep -o 'event=server_restarted .*' "$ADLOG"
grep -q "event=server_restarted .* previous=$first " "$ADLOG" ||
	kvs_fail "server_restarted does not name the first instance"
echo "polls that found the server down: $(grep -c event=server_not_ready "$ADLOG" || true)"
assert_eq "restarts the adapter saw" "$(grep -c event=server_restarted "$ADLOG")" 1
kvs_wait_for "the adapter says ready" '[[ $("$C" "$AD_A" ping) == *"flags=0" ]]'
"$C" "$AD_A" "$KVS_TMP/prompt" 1 8 none suffix >"$KVS_TMP/answers" || kvs_fail "request failed"
assert_eq "requests that ended after the restart" "$(grep -c '^req=[0-9]* end ' "$KVS_TMP/answers")" 1
echo "PASS test_llama_restarted"
