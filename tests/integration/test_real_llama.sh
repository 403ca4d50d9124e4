#!/usr/bin/env bash
# kvsplice in front of real inference servers: three llama.cpp llama-server
# processes (a tiny random-weight Llama, real tokenizer, real prefix cache),
# a kvsplice-adapter each, the gateway in front (kernel data path).
#  - requests sharing long prefixes stream back complete (framing checked,
#    one END each), each prefix's requests land on one server, and that
#    server's own cached_tokens shows the prefix reused;
#  - a client that disconnects mid-stream makes its server stop generating
#    (the gateway CANCELs, the adapter aborts the HTTP request);
#  - a server killed mid-stream gives ERROR backend_gone, its adapter turns
#    not ready, the gateway takes the backend out, and the next requests for
#    that prefix go to another server;
#  - kvsplice-bench live (--verify framing) runs against the fleet.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_llama.sh"
kvs_setup
kvs_need_llama

C="$KVS_BUILD/tests/helpers/kvs_client"
for n in A B C; do
	kvs_start_llama "$n"
done
for n in A B C; do
	port=LLAMA_PORT_$n
	kvs_start_adapter "$n" "http://127.0.0.1:${!port}" --id "$(printf '%d' "'$n")" \
		--poll-ms 200 --extra-body "$KVS_LLAMA_BODY"
done
kvs_start_gw --backend "127.0.0.1:$AD_PORT_A" --backend "127.0.0.1:$AD_PORT_B" \
	--backend "127.0.0.1:$AD_PORT_C" --health-interval-ms 200
for i in 0 1 2; do
	[ "$(kvs_wait_backend $i up)" = up ] || kvs_fail "backend $i not up"
done
GW=127.0.0.1:$GW_PORT

# Three long prefixes (~1,300 tokens each), different from the first word.
for p in 1 2 3; do
	awk -v p="$p" 'BEGIN { printf "Document %d. ", p
		for (i = 0; i < 70; i++) printf "Section %d of document %d says the river is %d miles long. ", i, p, i * p
	}' >"$KVS_TMP/prefix$p"
done

# ask PREFIX COUNT MAX_TOKENS [ACTION]: COUNT requests on one connection,
# the prefix plus " #i"; prints the client's lines.
ask() {
	timeout 120 "$C" "$GW" "$KVS_TMP/prefix$1" "$2" "$3" "${4:-none}" suffix ||
		kvs_fail "prefix $1: client failed"
}
field() { # LINE NAME
	sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"
}

# 1. Per prefix: a first request (cold), then three at once that follow it.
declare -A owner
for p in 1 2 3; do
	first=$(ask "$p" 1 16)
	[[ $first == "req=1 end "* ]] || kvs_fail "prefix $p first request: $first"
	owner[$p]=$(field "$first" backend)
	echo "prefix $p: first request -> backend ${owner[$p]} ($first)"
	out=$(ask "$p" 3 16)
	echo "$out"
	[ "$(grep -c ' end ' <<<"$out")" = 3 ] || kvs_fail "prefix $p: not 3 ENDs: $out"
	while read -r line; do
		assert_eq "prefix $p lands on its server" "$(field "$line" backend)" "${owner[$p]}"
		prompt=$(field "$line" prompt)
		cached=$(field "$line" cached)
		out_tok=$(field "$line" output)
		assert_ge "prefix $p: the server generated" "$out_tok" 1
		# The server's own count: the shared ~1,300 tokens came from its
		# cache (the suffix and the last token are computed).
		assert_ge "prefix $p: server's cached_tokens x100 / prompt" $((cached * 100 / prompt)) 90
	done <<<"$out"
done

# 2. A client that leaves mid-stream: its server stops generating.
lp_owner=${owner[2]}
case $lp_owner in 65) sp=$LLAMA_PORT_A ;; 66) sp=$LLAMA_PORT_B ;; *) sp=$LLAMA_PORT_C ;; esac
before=$(kvs_llama_metric "$sp" llamacpp:tokens_predicted_total)
assert_eq "client closes after the first chunk" "$(ask 2 1 3000 close)" closed
idle=0
for i in $(seq 1 300); do
	busy=$(curl -sf "http://127.0.0.1:$sp/slots" | jq '[.[] | select(.is_processing)] | length')
	[ "$busy" = 0 ] && { idle=1; break; }
	sleep 0.1
done
assert_eq "server idle again after the client left" "$idle" 1
after=$(kvs_llama_metric "$sp" llamacpp:tokens_predicted_total)
# Had it gone on, it would have generated 3,000 tokens.
assert_le "tokens the server generated for the abandoned request" $((${after%.*} - ${before%.*})) 2000

# 3. A server killed mid-stream: backend_gone, then its prefix elsewhere.
victim=${owner[1]}
case $victim in 65) vn=A ;; 66) vn=B ;; *) vn=C ;; esac
vport=LLAMA_PORT_$vn
vpid=LLAMA_PID_$vn
ask 1 1 3000 >"$KVS_TMP/killed.out" &
client=$!
for i in $(seq 1 300); do
	busy=$(curl -sf "http://127.0.0.1:${!vport}/slots" | jq '[.[] | select(.is_processing)] | length')
	[ "${busy:-0}" -gt 0 ] && break
	sleep 0.05
done
kill -9 "${!vpid}"
wait "$client" || true
out=$(cat "$KVS_TMP/killed.out")
[[ $out == "req=1 error code=backend_gone"* ]] || kvs_fail "killed server: got '$out'"
echo "ok: killed server -> $out"
idx=$(("$victim" - 65))
[ "$(kvs_wait_backend "$idx" down)" = down ] || kvs_fail "backend $idx not taken out"
echo "ok: backend $idx down after its server died"
out=$(ask 1 2 16)
echo "$out"
[ "$(grep -c ' end ' <<<"$out")" = 2 ] || kvs_fail "prefix 1 after the kill: $out"
while read -r line; do
	b=$(field "$line" backend)
	[ "$b" != "$victim" ] || kvs_fail "prefix 1 still sent to the dead server"
done <<<"$out"
echo "ok: prefix 1 served elsewhere"

# 4. kvsplice-bench live against the two servers left, real-server checks.
out=$(kvs_bench --verify framing -n 24 -k 4 --prefixes 2 --prefix-tokens 512 --suffix-tokens 64 \
	--max-tokens 8 --declare-true-length --json) || kvs_fail "bench live: $out"
assert_eq "bench live: framing errors" "$(jget "$out" '.framing_errors // 0')" 0
assert_eq "bench live: requests answered" "$(jget "$out" .ok)" 24
echo "PASS test_real_llama"
