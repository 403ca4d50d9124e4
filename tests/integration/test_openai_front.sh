#!/usr/bin/env bash
# OpenAI clients through kvsplice: kvsplice-http -> kvspliced (kernel path)
# -> kvsplice-adapter -> llama.cpp's llama-server (two of them).
#  - the openai npm package (pinned, installed here from the npm registry)
#    streams a chat completion and a completion (of one prompt and of two),
#    gets a whole one, and a 400 it understands for a bad body, lists the
#    models and retrieves each (models.retrieve), and a 404 for an unknown
#    one;
#  - curl streams through the front, and the front's SSE is byte for byte
#    what llama-server sends for the same request (a chat, and a prompt
#    array's completions), apart from ids, timestamps, timings and usage;
#  - a conversation's second turn lands on the server that served its
#    first, and that server's own cached_tokens shows the history reused;
#  - a prompt over the server's context: HTTP 400 context_length_exceeded.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_llama.sh"
kvs_setup
kvs_need_llama

OPENAI_VERSION=6.30.1 # runs on Node 20 (7.x needs Node 22)
NPM_DIR=$KVS_BUILD/npm
if [ "$(jq -r .version "$NPM_DIR/node_modules/openai/package.json" 2>/dev/null)" != "$OPENAI_VERSION" ]; then
	mkdir -p "$NPM_DIR"
	npm install --prefix "$NPM_DIR" --no-audit --no-fund --silent "openai@$OPENAI_VERSION" ||
		kvs_fail "npm install openai@$OPENAI_VERSION failed"
fi

for n in A B; do
	kvs_start_llama "$n"
	port=LLAMA_PORT_$n
	kvs_start_adapter "$n" "http://127.0.0.1:${!port}" --poll-ms 200 --extra-body "$KVS_LLAMA_BODY" \
		--id "$(printf '%d' "'$n")"
done
kvs_start_gw --backend "$AD_A" --backend "$AD_B" --health-interval-ms 200 \
	--front-source 127.0.0.1/32
for i in 0 1; do
	[ "$(kvs_wait_backend $i up)" = up ] || kvs_fail "backend $i not up"
done
kvs_start_http --model tiny --model org/tiny-2

# 1. The openai package.
out=$(NODE_PATH="$NPM_DIR/node_modules" timeout 120 node "$(dirname "$0")/../helpers/openai_client.cjs" \
	"$HTTP_URL" tiny) || kvs_fail "the openai client failed"
echo "$out"
assert_eq "openai package version" "$(jget "$out" .version)" "$OPENAI_VERSION"
assert_ge "chat stream: chunks" "$(jget "$out" .chat.chunks)" 2
assert_ge "chat stream: text" "$(jget "$out" '.chat.text | length')" 1
assert_eq "chat stream: finish_reason" "$(jget "$out" .chat.finish)" length
assert_ge "completion stream: text" "$(jget "$out" '.completion.text | length')" 1
assert_eq "completion stream: finish_reason" "$(jget "$out" .completion.finish)" length
assert_eq "prompt array stream: both prompts finished" "$(jget "$out" '.array.finished | join(" ")')" "0 1"
assert_eq "whole chat: completion_tokens" "$(jget "$out" .whole.completion_tokens)" 12
assert_eq "bad body: status" "$(jget "$out" .bad.status)" 400
assert_eq "models listed" "$(jget "$out" '.models | join(" ")')" "tiny org/tiny-2"
assert_eq "models retrieved one by one" "$(jget "$out" '.retrieved | join(" ")')" "tiny org/tiny-2"
assert_eq "an unknown model: status" "$(jget "$out" .unknown.status)" 404
assert_eq "an unknown model: code" "$(jget "$out" .unknown.code)" model_not_found
assert_eq "bad body: type" "$(jget "$out" .bad.type)" invalid_request_error

# 2. curl, and the same request straight to llama-server: the same bytes.
# cache_prompt off: both compute the prompt from scratch (the same
# arithmetic, the same greedy tokens); the grammar is the adapter's
# --extra-body, written out for the direct request.
req='{"model":"tiny","messages":[{"role":"system","content":"Compare me."},{"role":"user","content":"Stream a few words."}],"max_tokens":16,"temperature":0,"seed":7,"stream":true,"cache_prompt":false,"grammar":"root ::= [ -~]*"}'
curl -sSN "$HTTP_URL/v1/chat/completions" -H 'Content-Type: application/json' -d "$req" \
	>"$KVS_TMP/front.sse"
curl -sSN "http://127.0.0.1:$LLAMA_PORT_A/v1/chat/completions" -H 'Content-Type: application/json' \
	-d "$req" >"$KVS_TMP/direct.sse"
norm() {
	sed -E 's/"(created|id)":("[^"]*"|[0-9]+)/"\1":X/g;
		s/,"timings":\{[^{}]*\}//; s/,"usage":\{[^{}]*(\{[^{}]*\}[^{}]*)?\}//' "$1"
}
assert_ge "front stream: events" "$(grep -c '^data: {' "$KVS_TMP/front.sse")" 3
assert_eq "front stream ends with [DONE]" "$(grep '^data: ' "$KVS_TMP/front.sse" | tail -n 1)" "data: [DONE]"
if ! diff <(norm "$KVS_TMP/direct.sse") <(norm "$KVS_TMP/front.sse") >"$KVS_TMP/sse.diff"; then
	cat "$KVS_TMP/sse.diff"
	kvs_fail "the front's stream differs from llama-server's"
fi
echo "ok: the front's SSE is llama-server's, byte for byte ($(wc -c <"$KVS_TMP/front.sse") bytes)"
# A prompt array streamed: llama-server's streams of both prompts, with the
# `data: null` it writes between them.
req='{"model":"tiny","prompt":["Compare me.","And me."],"max_tokens":4,"temperature":0,"seed":7,"stream":true,"cache_prompt":false,"grammar":"root ::= [ -~]*"}'
curl -sSN "$HTTP_URL/v1/completions" -H 'Content-Type: application/json' -d "$req" \
	>"$KVS_TMP/front.sse"
curl -sSN "http://127.0.0.1:$LLAMA_PORT_A/v1/completions" -H 'Content-Type: application/json' \
	-d "$req" >"$KVS_TMP/direct.sse"
assert_eq "prompt array stream: separators" "$(grep -c '^data: null$' "$KVS_TMP/front.sse")" 1
if ! diff <(norm "$KVS_TMP/direct.sse") <(norm "$KVS_TMP/front.sse") >"$KVS_TMP/sse.diff"; then
	cat "$KVS_TMP/sse.diff"
	kvs_fail "the front's prompt array stream differs from llama-server's"
fi
out=$(curl -sSN "$HTTP_URL/v1/completions" -d '{"prompt":"The river","max_tokens":8,"stream":true}')
assert_eq "curl completion stream ends with [DONE]" "$(grep '^data: ' <<<"$out" | tail -n 1)" "data: [DONE]"

# 3. Conversations: turn 2 (turn 1's messages, the answer, a new question)
# goes where turn 1 went (the front's X-Kvsplice-Backend: the END's
# backend_id, the adapter's --id), and finds it cached there.
for c in 1 2 3 4 5 6; do
	sys=$(awk -v c="$c" 'BEGIN { printf "Conversation %d. ", c
		for (i = 0; i < 40; i++) printf "Rule %d of conversation %d: answer with care. ", i, c }')
	t1=$(jq -n --arg s "$sys" '{model:"tiny",max_tokens:8,
		messages:[{role:"system",content:$s},{role:"user",content:"First question?"}]}')
	r1=$(kvs_chat "$t1")
	b1=$(kvs_served_by)
	a1=$(jget "$r1" .choices[0].message.content)
	t2=$(jq --arg a "$a1" '.messages += [{role:"assistant",content:$a},{role:"user",content:"And the second?"}]' <<<"$t1")
	r2=$(kvs_chat "$t2")
	b2=$(kvs_served_by)
	p1=$(jget "$r1" .usage.prompt_tokens)
	cached=$(jget "$r2" .usage.prompt_tokens_details.cached_tokens)
	echo "conversation $c: turn 1 on $b1 ($p1 prompt tokens), turn 2 on $b2, cached $cached"
	[ -n "$b1" ] || kvs_fail "conversation $c: no X-Kvsplice-Backend header"
	assert_eq "conversation $c: turn 2 on turn 1's server" "$b2" "$b1"
	assert_ge "conversation $c: turn 2 cached x100 / turn 1's prompt" $((cached * 100 / p1)) 90
done

# 4. Past the server's context (4,096 tokens): the server's refusal, as
# OpenAI words it.
long=$(jq -n --arg p "$(printf 'word %.0s' $(seq 1 6000))" '{prompt:$p,max_tokens:4}')
out=$(curl -sS -w '\n%{http_code}' "$HTTP_URL/v1/completions" -d "$long")
assert_eq "too long: status" "$(tail -n 1 <<<"$out")" 400
assert_eq "too long: code" "$(sed '$d' <<<"$out" | jq -r .error.code)" context_length_exceeded
echo "PASS test_openai_front"
