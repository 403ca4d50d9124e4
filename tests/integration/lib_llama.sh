# shellcheck shell=bash
# Helpers for the tests on a real inference server: llama.cpp's
# llama-server (`make llama` installs it and makes BUILD/llama/tiny.gguf, a
# tiny random-weight Llama), with kvsplice-adapter in front. Source after
# lib.sh and kvs_setup.
#
# LLAMA_SERVER and LLAMA_MODEL override where they are looked for. Without
# them the test is skipped (exit 77), unless KVS_REQUIRE_LLAMA=1 (make test
# sets it, after make llama): then their absence is a failure.

LLAMA_SERVER=${LLAMA_SERVER:-$(command -v llama-server || true)}
LLAMA_MODEL=${LLAMA_MODEL:-$KVS_BUILD/llama/tiny.gguf}

kvs_need_llama() {
	if [ -z "$LLAMA_SERVER" ] || [ ! -x "$LLAMA_SERVER" ] || [ ! -f "$LLAMA_MODEL" ]; then
		[ "${KVS_REQUIRE_LLAMA:-0}" = 1 ] &&
			kvs_fail "llama-server or $LLAMA_MODEL missing (make llama)"
		echo "skipped: no llama-server or $LLAMA_MODEL (make llama)"
		exit 77
	fi
}

# kvs_start_llama NAME [llama-server flags...]: a server on a free loopback
# port, one thread, one slot of 4096 tokens, /metrics on; sets
# LLAMA_PORT_<NAME> and LLAMA_PID_<NAME>. One slot: llama.cpp keeps a
# prefix in the slot that computed it, and a request that runs beside it
# on another slot computes it again, which would make the servers' hit
# rate depend on timing rather than on routing.
kvs_start_llama() {
	local name=$1 i port="" pid
	shift
	"$LLAMA_SERVER" -m "$LLAMA_MODEL" --host 127.0.0.1 --port 0 -t 1 -np 1 -c 4096 \
		--override-kv llama.context_length=int:4096 --metrics "$@" \
		>"$KVS_TMP/llama-$name.log" 2>&1 &
	pid=$!
	KVS_PIDS+=($pid)
	printf -v "LLAMA_PID_$name" '%s' "$pid"
	for i in $(seq 1 600); do
		port=$(grep -a -o 'listening on http://127.0.0.1:[0-9]*' "$KVS_TMP/llama-$name.log" |
			head -n 1 | sed 's/.*://' || true)
		[ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
		kill -0 "$pid" 2>/dev/null || kvs_fail "llama-server $name exited"
		port=""
		sleep 0.1
	done
	[ -n "$port" ] || kvs_fail "llama-server $name did not come up"
	printf -v "LLAMA_PORT_$name" '%s' "$port"
}

# The random model's output is any bytes of its vocabulary; llama.cpp fails a
# /v1/completions stream whose text ends inside a UTF-8 character ("does not
# match the expected Content-only format"). Printable ASCII only, by grammar,
# keeps the tests about kvsplice: adapters in front of llama-server take
# --extra-body "$KVS_LLAMA_BODY".
KVS_LLAMA_BODY='{"grammar":"root ::= [ -~]*"}'

# kvs_llama_metric PORT NAME: a llama.cpp /metrics value.
kvs_llama_metric() {
	curl -sf "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n { print $2 }'
}
