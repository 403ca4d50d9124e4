#!/usr/bin/env bash
# kvsplice-adapter in front of a server that misbehaves (tests/helpers/
# fake_openai): every fault becomes exactly one ERROR with the right code
# and the server's message, nothing hangs, the link stays usable; CANCEL
# and a client that leaves close the HTTP transfer (the server sees its
# client go); PONG reports the server's /metrics (the kind of server
# kept while /metrics is silent), and "not ready" while its /health fails
# or it cannot be reached.
source "$(dirname "$0")/lib.sh"
kvs_setup

C="$KVS_BUILD/tests/helpers/kvs_client"
kvs_start_fake F
# (a URL ending in /v1/, as users copy it from their client's settings)
kvs_start_adapter A "$FAKE_URL_F/v1/" --stall-timeout 1 --poll-ms 100 --id 41 --log-level debug
AD=$AD_A

# wait_pong FLAGS: until the adapter's PONG carries FLAGS (the poll runs
# every 100 ms; bounded at 20 s for a loaded machine).
wait_pong() {
	local i p
	for i in $(seq 1 200); do
		p=$("$C" "$AD" ping) || kvs_fail "no PONG from the adapter"
		[[ $p == *"flags=$1" ]] && { echo "$p"; return 0; }
		sleep 0.1
	done
	kvs_fail "PONG never said flags=$1 (last: $p)"
}

p=$(wait_pong 0)
assert_eq "PONG from vLLM-style /metrics" "$p" "pong running=2 waiting=1 kv=500/1000 backend=41 flags=0"

# ask MODE [ACTION]: one request whose prompt names the fault; prints the
# client's line for it.
ask() {
	echo "a prompt mode:$1" >"$KVS_TMP/prompt"
	timeout 30 "$C" "$AD" "$KVS_TMP/prompt" 1 8 "${2:-none}" || kvs_fail "mode $1: client failed"
}

out=$(ask ok)
[[ $out == "req=1 end prompt=9 cached=4 output=3 chunks=3 bytes=12 backend=41 "* ]] ||
	kvs_fail "a good stream: $out"
echo "ok: $out"

expect() { # MODE CODE TEXT
	local out
	out=$(ask "$1")
	[[ $out == "req=1 error code=$2 msg="*"$3"* ]] || kvs_fail "mode $1: got '$out', want $2 ... $3"
	echo "ok: $1 -> $out"
}
expect malformed internal "malformed event from the server"
expect oversize internal "larger than"
expect cut backend_gone "stream ended before the response was complete"
expect stall timeout "sent nothing for 1 s"
# Keep-alive comments and no event: a stall too. curl's check counts
# bytes, and the request was held for ever.
expect pings timeout "sent nothing for 1 s (no event"
expect errevent internal "does not match"
expect http400 rejected "HTTP 400: 'n' must be 1"
expect http500 internal "HTTP 500: Internal Server Error"
expect ctx too_long "maximum context length"
expect reset backend_gone "inference server http://127.0.0.1:"
expect e503 busy "HTTP 503: (empty body)"
expect e400 rejected "HTTP 400: (empty body)"
expect json200 internal "not a stream"
# A body that never ends, on an error or a 2xx that is not a stream: the
# part kept for the message is all that is read (the request was held,
# and the adapter read the flood, until the client gave up).
expect errflood internal "HTTP 500: flooding: xxx"
expect jsonflood internal "not a stream"
# Response headers beyond libcurl's limits (a line of 100 KB, 300 KB in
# all): the message says so. The line over 100 KB was backend_gone "Out of
# memory" (libcurl 7.88's words), 300 KB in all before the Content-Type
# "not a stream".
expect bigheader internal "response headers are too large"
expect manyheaders internal "response headers are too large"

# [DONE], then the server holds the connection open: the END goes at
# [DONE], not a timeout when the stall timer fires.
out=$(ask doneopen)
[[ $out == "req=1 end prompt=9 cached=4 output=3 chunks=3 "* ]] || kvs_fail "[DONE] held open: $out"
echo "ok: [DONE] then held open -> $out"

# A req_id sent again while it is in flight is dropped, not answered: an
# answer would end the first one too.
echo "a prompt mode:doneopen" >"$KVS_TMP/prompt"
out=$(timeout 30 "$C" "$AD" "$KVS_TMP/prompt" 1 8 dup)
assert_eq "answers to a duplicated req_id" "$(grep -c '^req=1 ' <<<"$out")" 1
grep -q 'event=duplicate_req_id' "$KVS_TMP/adapter-A.log" || kvs_fail "duplicate not logged"

# Not JSON-able: refused before any HTTP.
printf 'bad \xff\xfe prompt' >"$KVS_TMP/prompt"
out=$("$C" "$AD" "$KVS_TMP/prompt" 1 8 none)
[[ $out == *"error code=rejected"*"not UTF-8"* ]] || kvs_fail "non-UTF-8 prompt: $out"
echo "ok: non-UTF-8 prompt -> $out"

# CANCEL: the client gets ERROR cancelled at once, the server sees its
# client leave (the adapter closed the transfer), the other request of the
# same connection completes.
left_before=$(wc -l <"$KVS_TMP/stalls" 2>/dev/null || echo 0)
echo "a prompt mode:stall" >"$KVS_TMP/prompt"
out=$(timeout 30 "$C" "$AD" "$KVS_TMP/prompt" 1 8 cancel)
assert_eq "CANCEL answer" "$out" 'req=1 error code=cancelled msg="kvsplice-adapter: cancelled"'
for i in $(seq 1 200); do
	[ "$(wc -l <"$KVS_TMP/stalls")" -gt "$left_before" ] && break
	sleep 0.05
done
assert_ge "server saw the cancelled transfer close" "$(wc -l <"$KVS_TMP/stalls")" $((left_before + 1))

# A client that leaves mid-stream: the transfer closes too.
out=$(ask stall close)
assert_eq "client closed" "$out" closed
for i in $(seq 1 200); do
	[ "$(wc -l <"$KVS_TMP/stalls")" -gt $((left_before + 1)) ] && break
	sleep 0.05
done
assert_ge "server saw the dropped client's transfer close" "$(wc -l <"$KVS_TMP/stalls")" \
	$((left_before + 2))

# A half-closed link that is then reset (a client gone with an answer
# owed) is closed, and its stalled transfer with it, not left to the
# stall timeout (60 s here) while the adapter spins on the hang-up.
kvs_start_adapter B "$FAKE_URL_F" --stall-timeout 60 --max-connections 1 --poll-ms 100
AD2=$AD_B
before=$(wc -l <"$KVS_TMP/stalls")
echo "a prompt mode:stall" >"$KVS_TMP/prompt"
assert_eq "client half-closes, then resets" "$(timeout 30 "$C" "$AD2" "$KVS_TMP/prompt" 1 8 hup)" reset
for i in $(seq 1 400); do
	[ "$(wc -l <"$KVS_TMP/stalls")" -gt "$before" ] && break
	sleep 0.05
done
assert_ge "the reset link's transfer closed" "$(wc -l <"$KVS_TMP/stalls")" $((before + 1))

# Events after [DONE] (a server that goes on): the transfer ends at the
# first of them. It ran on, holding the one connection (--max-connections
# 1), and the requests behind it were never sent.
echo "a prompt mode:afterdone" >"$KVS_TMP/prompt"
out=$(timeout 30 "$C" "$AD2" "$KVS_TMP/prompt" 3 8 none) || kvs_fail "after [DONE]: $out"
assert_eq "after [DONE], on one connection: ENDs" "$(grep -c ' end prompt=9 ' <<<"$out")" 3

# [DONE], then the server silent, the connection open and its chunked
# body unfinished: the END goes at [DONE], and the transfer, the one
# connection (--max-connections 1), ends a moment (1 s) later for the
# request behind it. Before, it was held until --stall-timeout (60 s
# here), and the request behind it waited as long. (--poll-ms 10000: no
# poll wakes the adapter in between.)
kvs_start_adapter D "$FAKE_URL_F" --stall-timeout 60 --max-connections 1 --poll-ms 10000
before=$(wc -l <"$KVS_TMP/stalls.done" 2>/dev/null || echo 0)
echo "a prompt mode:donechunked" >"$KVS_TMP/prompt"
out=$(timeout 30 "$C" "$AD_D" "$KVS_TMP/prompt" 2 8 none) || kvs_fail "[DONE], then silent: $out"
assert_eq "[DONE], then silent, on one connection: ENDs" "$(grep -c ' end prompt=9 ' <<<"$out")" 2
kvs_wait_for "the server sees both held transfers closed" \
	'[ "$(wc -l <"$KVS_TMP/stalls.done" 2>/dev/null || echo 0)" -ge $((before + 2)) ]' 30
grep -q 'event=server_held_after_done .*count=1 ' "$KVS_TMP/adapter-D.log" ||
	kvs_fail "not logged: $(cat "$KVS_TMP/adapter-D.log")"

# Busy is not down: with one connection to the server (--max-connections
# 1) held by a stalled stream, two more requests wait in the adapter; the
# health polls do not queue behind them, PONG stays ready for 40 polls and
# counts the two as waiting (the server's 1 + 2).
echo "a prompt mode:stall" >"$KVS_TMP/prompt"
timeout 60 "$C" "$AD2" "$KVS_TMP/prompt" 3 8 none >/dev/null &
busy=$!
for i in $(seq 1 200); do
	p=$("$C" "$AD2" ping)
	[[ $p == *"waiting=3 "* ]] && break
	sleep 0.05
done
assert_eq "PONG while busy" "$p" "pong running=2 waiting=3 kv=500/1000 backend=$AD_PORT_B flags=0"
for i in $(seq 1 40); do
	p=$("$C" "$AD2" ping)
	[[ $p == *"flags=0" ]] || kvs_fail "busy adapter said not ready: $p"
	sleep 0.1
done
echo "ok: busy, still ready after 40 polls"
kill "$busy" 2>/dev/null || true

# Answers go as transfers finish, not at the next poll: 50 requests in a
# row through an adapter that polls its server every 10 s take well under
# one poll interval (a finished transfer left unread waited for it). The
# server sends its events 2 ms apart, so transfers end at any point of
# the adapter's loop.
kvs_start_fake S slow
kvs_start_adapter C "$FAKE_URL_S" --poll-ms 10000
out=$("$KVS_BUILD/kvsplice-bench" live --connect "$AD_C" --quiet \
	--verify framing -n 50 -k 1 --prefixes 1 --prefix-tokens 16 --suffix-tokens 4 \
	--max-tokens 3 --declare-true-length --json) || kvs_fail "sequential run: $out"
assert_eq "sequential requests answered" "$(jget "$out" .ok)" 50
assert_le "50 sequential requests, seconds (a poll interval is 10)" \
	"$(jget "$out" '.wall_s | floor')" 5

# /metrics that stops answering (a busy or stuck server: the poll times
# out) says nothing of which server it is: the kind found stays, with
# vLLM's cache_salt and the last figures. It was taken for "another
# OpenAI server": running became the adapter's own count (0 here), and
# tenants' requests went to vLLM without their salt until a poll read
# /metrics again.
touch "$KVS_TMP/healthy.stall-metrics"
# Two polls given up (2 s each): the first has been judged by then.
kvs_wait_for "two /metrics polls given up" \
	'[ "$(wc -l <"$KVS_TMP/stalls.metrics" 2>/dev/null || echo 0)" -ge 2 ]'
p=$("$C" "$AD" ping) || kvs_fail "no PONG from the adapter"
assert_eq "PONG with /metrics silent" "$p" "pong running=2 waiting=1 kv=500/1000 backend=41 flags=0"
! grep 'event=server_kind' "$KVS_TMP/adapter-A.log" | grep -v 'kind=vllm' ||
	kvs_fail "the kind changed when /metrics did not answer"
rm "$KVS_TMP/healthy.stall-metrics"

# Not ready while /health fails; ready again after.
rm "$KVS_TMP/healthy"
wait_pong 1 >/dev/null
echo "ok: PONG not ready while /health says 503"
grep -q 'event=server_not_ready.*HTTP 503' "$KVS_TMP/adapter-A.log" || kvs_fail "no not-ready log line"
touch "$KVS_TMP/healthy"
wait_pong 0 >/dev/null
echo "ok: ready again"

# The server gone: requests fail with backend_gone at once, PONG not ready.
kill "$FAKE_PID_F"
wait "$FAKE_PID_F" 2>/dev/null || true
expect ok backend_gone "inference server"
wait_pong 1 >/dev/null
echo "ok: server gone -> not ready"
echo "PASS test_adapter_faults"
