#!/usr/bin/env bash
# Conversations stay on their server: turn 2 (turn 1's messages, the
# answer, a new question) goes where turn 1 went. The front hints the
# first message after any system messages as the conversation's reusable
# part. Without the
# hint, a ~450-byte first message and a ~200-token answer left turn 2's
# deepest match with turn 1 (4 blocks of its ~20) under --min-match-pct,
# and the request was placed anew: on 2 servers, about half the
# conversations moved at turn 2 and recomputed their history. And with a
# shared system prompt, under concurrency (below).
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sims "A B" --time-scale 0.05
kvs_start_gw "${KVS_BACKENDS[@]}" --front-source 127.0.0.0/8
for i in 0 1; do
	[ "$(kvs_wait_backend $i up)" = up ] || kvs_fail "backend $i not up"
done
kvs_start_http --model sim-model


moved=0
for c in $(seq 1 12); do
	q=$(awk -v c="$c" 'BEGIN { printf "Conversation %d opens with a question of some length. ", c
		for (i = 0; i < 7; i++) printf "Detail %d of conversation %d matters here. ", i, c }')
	t1=$(jq -n --arg q "$q" '{model:"sim-model",max_tokens:200,messages:[{role:"user",content:$q}]}')
	r1=$(kvs_chat "$t1")
	b1=$(kvs_served_by)
	a1=$(jget "$r1" .choices[0].message.content)
	t2=$(jq --arg a "$a1" '.messages += [{role:"assistant",content:$a},{role:"user",content:"And then?"}]' <<<"$t1")
	r2=$(kvs_chat "$t2")
	b2=$(kvs_served_by)
	echo "conversation $c: first message ${#q} bytes, answer ${#a1} bytes; turn 1 on $b1, turn 2 on $b2"
	[ -n "$b1" ] && [ -n "$b2" ] || kvs_fail "conversation $c: no X-Kvsplice-Backend header"
	[ "$b1" = "$b2" ] || moved=$((moved + 1))
done
assert_eq "conversations that moved at turn 2" "$moved" 0

# Conversations sharing a system prompt, 16 at once, 4 turns each. Hinted
# with the system prompt alone, every conversation followed its route,
# the holder's bound spilled some elsewhere, and their next turn went back
# to it: 20 of 48 later turns moved. Hinted with their first question too,
# each follows its own.
sys=$(awk 'BEGIN { for (i = 0; i < 14; i++) printf "Rule %d: be helpful and exact. ", i }')
conv() { # C: one line a turn, "SERVER PREVIOUS"
	local c=$1 t body r b prev=-
	q=$(awk -v c="$c" 'BEGIN { printf "Conversation %d asks. ", c
		for (i = 0; i < 7; i++) printf "Detail %d of conversation %d matters. ", i, c }')
	body=$(jq -n --arg s "$sys" --arg q "$q" '{model:"sim-model",max_tokens:200,
		messages:[{role:"system",content:$s},{role:"user",content:$q}]}')
	for t in 1 2 3 4; do
		r=$(kvs_chat "$body" "$KVS_TMP/h$c")
		b=$(kvs_served_by "$KVS_TMP/h$c")
		echo "${b:-none} $prev"
		prev=$b
		body=$(jq --arg a "$(jget "$r" .choices[0].message.content)" --arg t "$t" \
			'.messages += [{role:"assistant",content:$a},{role:"user",content:("Question " + $t + "?")}]' <<<"$body")
	done
}
pids=()
for c in $(seq 1 16); do
	conv "$c" >"$KVS_TMP/conv$c" &
	pids+=($!)
done
wait "${pids[@]}"
later=$(cat "$KVS_TMP"/conv* | awk '$2 != "-"' | wc -l)
moved=$(cat "$KVS_TMP"/conv* | awk '$2 != "-" && $1 != $2' | wc -l)
echo "shared system prompt: $moved of $later later turns moved"
assert_eq "later turns answered" "$(cat "$KVS_TMP"/conv* | awk '$2 != "-" && $1 != "none"' | wc -l)" 48
assert_le "later turns that moved (with the system prompt alone as the hint: 20)" "$moved" 4
echo "PASS test_http_turns"
