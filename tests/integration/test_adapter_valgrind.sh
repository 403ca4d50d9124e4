#!/usr/bin/env bash
# kvsplice-adapter under valgrind (memcheck) in front of a server that
# misbehaves (tests/helpers/fake_openai): good streams, every fault mode,
# CANCEL, a client gone mid-stream and a server gone, then a clean stop:
# no invalid read or write, nothing definitely or indirectly lost. Then
# requests that asked for no stream, through kvsplice-http, cancelled at a
# server that goes on with them (llama.cpp's way): one kept until the
# server answers, one still kept at the stop.
source "$(dirname "$0")/lib.sh"
kvs_setup
command -v valgrind >/dev/null || kvs_fail "valgrind is not installed (make deps)"
if grep -q __asan_init <<<"$(nm -D "$KVS_BUILD/kvsplice-adapter" 2>/dev/null)"; then
	echo "PASS test_adapter_valgrind (skipped: $KVS_BUILD is an ASan build)"
	exit 0
fi

C="$KVS_BUILD/tests/helpers/kvs_client"
kvs_start_fake F
valgrind --leak-check=full --show-leak-kinds=definite,indirect \
	--errors-for-leak-kinds=definite,indirect --error-exitcode=3 \
	"$KVS_BUILD/kvsplice-adapter" --server "$FAKE_URL_F" \
	--port-file "$KVS_TMP/ad.port" --stall-timeout 1 --poll-ms 100 2>"$KVS_TMP/valgrind.log" &
VG=$!
KVS_PIDS+=($VG) # cleaned up on every path
KVS_WAIT_S=180 kvs_wait_file "$KVS_TMP/ad.port"
AD=127.0.0.1:$(cat "$KVS_TMP/ad.port")

ask() { # MODE COUNT ACTION
	echo "a prompt mode:$1" >"$KVS_TMP/prompt"
	timeout 60 "$C" "$AD" "$KVS_TMP/prompt" "$2" 8 "$3" suffix || true
}
ends=$(ask ok 50 none | grep -c ' end ' || true)
assert_eq "good streams under valgrind" "$ends" 50
for m in malformed oversize cut stall errevent http400 http500 ctx reset; do
	n=$(ask "$m" 2 none | grep -c ' error ' || true)
	assert_eq "mode $m: one ERROR per request" "$n" 2
done
# [DONE], then the connection held silent: the END, and the transfer
# ended by the adapter (or by the 1 s stall timeout, whichever first)
ends=$(ask donechunked 2 none | grep -c ' end ' || true)
assert_eq "[DONE], then silent: ENDs" "$ends" 2
ask stall 3 cancel | grep -q 'req=1 error code=cancelled' || kvs_fail "no cancelled answer"
ask stall 3 close >/dev/null
"$C" "$AD" ping >/dev/null || kvs_fail "no PONG"
kill "$FAKE_PID_F"
wait "$FAKE_PID_F" 2>/dev/null || true
ask ok 2 none | grep -q 'error code=backend_gone' || kvs_fail "server gone: no backend_gone"

# vg_stop PID LOG: the adapter under valgrind stopped; its report clean.
vg_stop() {
	local rc=0
	kill "$1"
	wait "$1" || rc=$?
	if [ "$rc" -ne 0 ]; then
		tail -n 40 "$2" >&2
		kvs_fail "valgrind reported errors (exit $rc)"
	fi
	grep -q "ERROR SUMMARY: 0 errors" "$2" || kvs_fail "valgrind found errors"
	echo "ok: $(grep 'ERROR SUMMARY' "$2" | sed 's/==[0-9]*== //')"
}
vg_stop "$VG" "$KVS_TMP/valgrind.log"

kvs_start_fake H
valgrind --leak-check=full --show-leak-kinds=definite,indirect \
	--errors-for-leak-kinds=definite,indirect --error-exitcode=3 \
	"$KVS_BUILD/kvsplice-adapter" --server "$FAKE_URL_H" --server-kind llama.cpp \
	--port-file "$KVS_TMP/ad2.port" --poll-ms 100 --log-level debug 2>"$KVS_TMP/valgrind2.log" &
VG2=$!
KVS_PIDS+=($VG2)
KVS_WAIT_S=180 kvs_wait_file "$KVS_TMP/ad2.port"
AD2=127.0.0.1:$(cat "$KVS_TMP/ad2.port")
kvs_start_http --gateway "$AD2" --model fake
held() { wc -l 2>/dev/null <"$KVS_TMP/stalls.held" || echo 0; }
# abandon N: a whole answer asked, its client gone once the server has it
# (the N-th the server holds), its CANCEL answered.
abandon() {
	curl -s -m 120 -o /dev/null "$HTTP_URL/v1/completions" \
		-d '{"model":"fake","prompt":"mode:holdjson","max_tokens":8}' &
	local cp=$!
	KVS_WAIT_S=180 kvs_wait_for "the server has whole answer $1" "[ \"\$(held)\" -ge $1 ]"
	kill "$cp"
	wait "$cp" 2>/dev/null || true
	KVS_WAIT_S=180 kvs_wait_for "its CANCEL answered" \
		"[ \"\$(grep -c 'event=request_error .*status=cancelled' \"\$KVS_TMP/valgrind2.log\")\" -ge $1 ]"
}
abandon 1
grep -q 'event=cancel_kept' "$KVS_TMP/valgrind2.log" || kvs_fail "not kept after its CANCEL"
touch "$KVS_TMP/healthy.release"
KVS_WAIT_S=180 kvs_wait_for "the kept one answered, and ended" \
	'[[ $("$C" "$AD2" ping) == *" waiting=0 "* ]]'
rm "$KVS_TMP/healthy.release"
abandon 2
assert_eq "kept at the stop: counted as waiting" "$("$C" "$AD2" ping | grep -o ' waiting=[0-9]*')" \
	" waiting=1"
vg_stop "$VG2" "$KVS_TMP/valgrind2.log"
touch "$KVS_TMP/healthy.release" # the fake's last one ends
echo "PASS test_adapter_valgrind"
