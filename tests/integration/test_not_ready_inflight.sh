#!/usr/bin/env bash
# A backend that says it is not ready while it still has requests in
# flight: it takes no new work at once, and it is ejected once they have
# ended (event=backend_not_ready_draining), not three health intervals on,
# which failed every stream there with backend_gone while its server went
# on generating for nobody (a reviewer's trial: a server whose /health
# answered late). A request that does not end is failed at
# --drain-timeout-ms, as a removed backend's are.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

flag=$KVS_TMP/A.not-ready
# ~2-3 s for 150 tokens at the simulator's real pace
kvs_start_sim A --time-scale 1 --not-ready-file "$flag"
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --health-interval-ms 200 --drain-timeout-ms 1500
[ "$(kvs_wait_backend 0 up 400)" = up ] || kvs_fail "backend not up"
A=127.0.0.1:$SIM_PORT_A

# One request of max_tokens tokens: says "inflight" at its first CHUNK,
# then prints how it ended (END 3, ERROR 4 with its text, or closed).
cat >"$KVS_TMP/client.py" <<'PY'
import json, os, sys
import kvs1
port, tmp, max_tokens, tag = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
a = kvs1.connect(port, timeout=120)
a.sendall(kvs1.request(b'a long answer, please. ' * 40, 1, max_tokens=max_tokens))
r = kvs1.Reader(a)
r.next()
open(os.path.join(tmp, 'inflight.' + tag), 'w').close()
try:
    f = r.until_end()
    print(json.dumps({'type': f.type, 'text': f.text() if f.type == kvs1.ERROR else ''}))
except EOFError:
    print(json.dumps({'type': 'closed'}))
PY
run_client() { # max_tokens tag
	PYTHONPATH="$(dirname "$0")/../helpers" python3 "$KVS_TMP/client.py" "$GW_PORT" "$KVS_TMP" \
		"$1" "$2" >"$KVS_TMP/client.$2.out" 2>&1 &
	CLIENT=$!
	kvs_wait_for "a request in flight ($2)" "[ -e '$KVS_TMP/inflight.$2' ]"
}

# 1. It ends: the request runs to its END, then the backend is ejected.
run_client 150 ends
touch "$flag"
kvs_wait_for "the ejection waits for the request" \
	'grep -q "event=backend_not_ready_draining backend=$A index=0 in_flight=1 " "$KVS_TMP/gw.log"' 10
wait "$CLIENT" || kvs_fail "client failed: $(cat "$KVS_TMP/client.ends.out")"
echo "client: $(tail -1 "$KVS_TMP/client.ends.out")"
assert_eq "the request in flight when A said not ready: its END (3)" \
	"$(jget "$(tail -1 "$KVS_TMP/client.ends.out")" .type)" 3
kvs_wait_for "A ejected once it had none in flight" \
	'grep -q "event=backend_down backend=$A reason=\"reported not ready for 600 ms\"" "$KVS_TMP/gw.log"' 10
assert_eq "requests failed at its ejection" \
	"$(grep "event=backend_down backend=$A" "$KVS_TMP/gw.log" | head -1 | sed -n 's/.*failed_requests=\([0-9]*\).*/\1/p')" 0
rm "$flag"
[ "$(kvs_wait_backend 0 up 400 0.1)" = up ] || kvs_fail "A not back up"

# 2. It does not end (2,000 tokens: ~30 s): failed at --drain-timeout-ms.
run_client 2000 stuck
touch "$flag"
kvs_wait_for "the request failed at the drain limit" '[ -s "$KVS_TMP/client.stuck.out" ]' 20
out=$(tail -1 "$KVS_TMP/client.stuck.out")
echo "client: $out"
assert_eq "a request that does not end: ERROR (4) at the limit" "$(jget "$out" .type)" 4
grep -q "failed while serving" <<<"$(jget "$out" .text)" || kvs_fail "the ERROR does not say why: $out"
echo "PASS test_not_ready_inflight"
