#!/usr/bin/env bash
# kvsplice-adapter and requests that asked for no stream (a whole JSON
# answer, which the server sends at the end of its generation), and a
# server whose /health answers late (tests/helpers/fake_openai):
#  - a whole answer that takes longer than --stall-timeout is no stall: it
#    was failed with timeout (504 at the front) while the server worked;
#  - a whole answer cancelled (its client gone) at a server that does not
#    stop it (llama.cpp) keeps its connection, one of the server's slots,
#    until the server answers: the next request was sent at once, two at
#    the server with one slot, and waited behind the abandoned one;
#  - a /health poll that times out says nothing: the server stays ready
#    (it was read as not ready, and the gateway ejected it with its
#    requests), until silence has lasted --stall-timeout.
source "$(dirname "$0")/lib.sh"
kvs_setup

C="$KVS_BUILD/tests/helpers/kvs_client"
kvs_start_fake F
# llama.cpp (the fake's /metrics are vLLM's): the server that goes on with
# a whole answer whose client left. One connection: one slot.
kvs_start_adapter A "$FAKE_URL_F" --stall-timeout 1 --poll-ms 100 --max-connections 1 \
	--server-kind llama.cpp --id 41 --log-level debug
AD_PID_A=${KVS_PIDS[-1]}
kvs_start_http --gateway "$AD_A" --model fake
kvs_wait_for "the front linked to the adapter" \
	'[ "$(curl -s "$HTTP_URL/health" | jq -r .gateway_links_up)" -ge 1 ]'

# wait_pong ADDR FLAGS: until the adapter's PONG carries FLAGS.
wait_pong() {
	kvs_wait_for "PONG from $1 says flags=$2" "[[ \$(\"\$C\" $1 ping) == *flags=$2 ]]"
}
wait_pong "$AD_A" 0

# 1) A whole answer after 3 s of silence, --stall-timeout 1.
out=$(curl -s -m 60 -w '\n%{http_code}' "$HTTP_URL/v1/completions" \
	-d '{"model":"fake","prompt":"mode:slowjson","max_tokens":8}')
assert_eq "a whole answer slower than --stall-timeout: HTTP status" "$(tail -n 1 <<<"$out")" 200
assert_eq "its text" "$(head -n -1 <<<"$out" | jq -r '.choices[0].text')" "whole at last"
echo "ok: a whole answer after 3 s with --stall-timeout 1"

# 2) A whole answer whose client leaves while the server generates it.
curl -s -m 60 -o /dev/null "$HTTP_URL/v1/completions" \
	-d '{"model":"fake","prompt":"mode:holdjson","max_tokens":8}' &
cp=$!
kvs_wait_for "the server generating it" \
	'[ "$(wc -l 2>/dev/null <"$KVS_TMP/stalls.held" || echo 0)" -ge 1 ]'
kill "$cp"
wait "$cp" 2>/dev/null || true
posts() { wc -l <"$KVS_TMP/stalls.posts"; }
kvs_wait_for "the adapter answered its CANCEL" \
	'grep -q "event=request_error .*status=cancelled" "$KVS_TMP/adapter-A.log"'
# The next request: it must wait in the adapter (counted as waiting, beside
# the abandoned one the server still runs) until the server is done.
before=$(posts)
curl -sN -m 60 -o "$KVS_TMP/next.out" -w '%{http_code}' "$HTTP_URL/v1/completions" \
	-d '{"model":"fake","prompt":"mode:ok","max_tokens":8,"stream":true}' >"$KVS_TMP/next.code" &
np=$!
kvs_wait_for "the next request sent to the server, or waiting in the adapter" \
	'[ "$(posts)" -gt "$before" ] || [[ $("$C" "$AD_A" ping) == *" waiting=2 "* ]]'
assert_eq "requests sent to the one-slot server while the abandoned one runs" \
	"$(($(posts) - before))" 0
touch "$KVS_TMP/healthy.release"
wait "$np" || kvs_fail "the next request failed"
assert_eq "the next request, once the server was done: HTTP status" "$(cat "$KVS_TMP/next.code")" 200
grep -q '^data: \[DONE\]' "$KVS_TMP/next.out" || kvs_fail "the next request's stream: $(cat "$KVS_TMP/next.out")"
kvs_wait_for "the server finished the abandoned request" '[ -s "$KVS_TMP/stalls.held-done" ]'
grep -q 'event=cancel_kept' "$KVS_TMP/adapter-A.log" || kvs_fail "no cancel_kept log line"
wait_pong "$AD_A" 0
assert_eq "the adapter's PONG once it is over" "$("$C" "$AD_A" ping)" \
	"pong running=0 waiting=0 kv=0/0 backend=41 flags=0"
echo "ok: a cancelled whole answer held its slot until the server answered"
kill "$AD_PID_A"
wait "$AD_PID_A" 2>/dev/null || true

# 3) /health answers late (past the poll's 2 s): the last state stays.
kvs_start_adapter B "$FAKE_URL_F" --poll-ms 100 --stall-timeout 600 --id 42
kvs_start_adapter D "$FAKE_URL_F" --poll-ms 100 --stall-timeout 3 --id 43
wait_pong "$AD_B" 0
wait_pong "$AD_D" 0
touch "$KVS_TMP/healthy.stall-health"
# Each adapter gives up a poll every 2 s: four given up, B's first among.
kvs_wait_for "/health polls given up" \
	'[ "$(wc -l 2>/dev/null <"$KVS_TMP/stalls.health" || echo 0)" -ge 4 ]'
assert_eq "PONG while /health does not answer" "$("$C" "$AD_B" ping)" \
	"pong running=2 waiting=1 kv=500/1000 backend=42 flags=0"
grep -q 'event=server_poll_silent' "$KVS_TMP/adapter-B.log" || kvs_fail "no poll_silent log line"
! grep -q 'event=server_not_ready' "$KVS_TMP/adapter-B.log" ||
	kvs_fail "not ready on a poll that timed out: $(grep server_not_ready "$KVS_TMP/adapter-B.log")"
# Silent for --stall-timeout (3 s for D): stuck, not ready.
wait_pong "$AD_D" 1
grep -q 'event=server_not_ready.*--stall-timeout' "$KVS_TMP/adapter-D.log" ||
	kvs_fail "D's not-ready line does not say why"
rm "$KVS_TMP/healthy.stall-health"
wait_pong "$AD_D" 0
assert_eq "B's PONG once /health answers again" "$("$C" "$AD_B" ping)" \
	"pong running=2 waiting=1 kv=500/1000 backend=42 flags=0"
echo "ok: a /health poll that times out says nothing, until --stall-timeout"
echo "PASS test_adapter_whole"
