#!/usr/bin/env bash
# A busy llama-server is not a dead one. 60 requests at once through
# kvsplice-adapter (its default --max-connections, 64) to a one-slot
# llama-server: every PONG during the burst says ready, and every request
# ends.
#
# llama-server answers HTTP on a few threads (6 with -np 1 here); the
# adapter opened a connection a request, the health poll's waited behind
# them past its 2 s timeout, and the PONG said not ready: a gateway then
# ejected the backend and failed its requests (28 of 400 in a trial with
# the openai client, 300 at once on 3 servers). The adapter now sends
# llama.cpp no more requests at once than its slots (its /slots) and
# queues the rest itself.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_llama.sh"
kvs_setup
kvs_need_llama

C="$KVS_BUILD/tests/helpers/kvs_client"
kvs_start_llama A
kvs_start_adapter A "http://127.0.0.1:$LLAMA_PORT_A" --poll-ms 200 --id 7 \
	--extra-body "$KVS_LLAMA_BODY"
kvs_wait_for "the adapter says ready" '[[ $("$C" "$AD_A" ping) == *"flags=0" ]]'

echo "a prompt for a busy server" >"$KVS_TMP/prompt"
"$C" "$AD_A" "$KVS_TMP/prompt" 60 128 none suffix >"$KVS_TMP/answers" &
burst=$!
pongs=0
not_ready=0
conns=0
while kill -0 "$burst" 2>/dev/null; do
	p=$("$C" "$AD_A" ping) || kvs_fail "no PONG from the adapter"
	pongs=$((pongs + 1))
	[[ $p == *"flags=0" ]] || not_ready=$((not_ready + 1))
	# the server's connections (the adapter's: this loop's own curl has
	# closed its one)
	n=$(ss -Htn state established "( dport = :$LLAMA_PORT_A )" | wc -l)
	[ "$n" -gt "$conns" ] && conns=$n
	curl -s -o /dev/null -m 3 -w '%{time_total}\n' "http://127.0.0.1:$LLAMA_PORT_A/health" \
		>>"$KVS_TMP/health_s" || echo 3 >>"$KVS_TMP/health_s"
	sleep 0.1
done
wait "$burst" || kvs_fail "not every request ended: $(sort "$KVS_TMP/answers" | head -n 3)"
echo "during the burst: the server's /health took $(sort -n "$KVS_TMP/health_s" | tail -n 1) s at" \
	"most, $pongs PONGs, $conns connections to it at most"
assert_eq "requests that ended" "$(grep -c '^req=[0-9]* end ' "$KVS_TMP/answers")" 60
# One request connection (one slot) and the poll's three (/health,
# /metrics, /slots), with room for one curl keeps idle.
assert_le "connections to the one-slot server" "$conns" 5
assert_ge "PONGs during the burst" "$pongs" 10
assert_eq "PONGs that said not ready during the burst" "$not_ready" 0
assert_eq "the server's /health answers over 1 s" \
	"$(awk '$1 >= 1 { n++ } END { print n + 0 }' "$KVS_TMP/health_s")" 0
! grep 'event=server_not_ready' "$KVS_TMP/adapter-A.log" ||
	kvs_fail "the adapter took its busy server for one that is down"
grep -q 'event=server_slots slots=1 max_connections=1' "$KVS_TMP/adapter-A.log" ||
	kvs_fail "no server_slots line"
echo "PASS test_llama_busy"
