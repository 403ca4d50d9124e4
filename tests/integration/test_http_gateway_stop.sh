#!/usr/bin/env bash
# kvsplice-http's only gateway stops (SIGTERM) while 16 clients send it
# requests without pause: each is answered 200, or 429 "the gateway is
# stopping" (from the gateway, or from the front once the gateway said it
# closes its links), then 503 once the gateway is gone; never 502
# backend_gone. The gateway tells each link it closes (ERROR busy, req_id
# 0) once nothing is in flight there; the front sends nothing more on it,
# shuts its sending side down, and the gateway closes it having answered
# every request it read (log: gateway_closing_link, gateway_link_closed;
# no gateway_lost). Before (attack round 13, finding 5), the requests of
# the last moment were never read, the close reset the link, and their
# clients got 502 "the connection to the gateway was lost".
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 1
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --front-source 127.0.0.1/32
[ "$(kvs_wait_backend 0 up 400)" = up ] || kvs_fail "backend not up"
kvs_start_http --links 2
kvs_wait_for "the front's links up" \
	'[ "$(curl -s "$HTTP_URL/health" | jq -r .gateway_links_up)" = 2 ]'

cat >"$KVS_TMP/load.py" <<'PY'
import collections, http.client, json, os, sys, threading, time
port, tmp = int(sys.argv[1]), sys.argv[2]
res, lock = collections.Counter(), threading.Lock()


def done():
    return os.path.exists(os.path.join(tmp, 'done'))


def worker(i):
    n = 0
    while not done():
        n += 1
        body = json.dumps({'model': 'm', 'max_tokens': 4, 'stream': i % 2 == 0,
                           'messages': [{'role': 'user', 'content': 'hello %d %d' % (i, n)}]})
        try:
            c = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
            c.request('POST', '/v1/chat/completions', body,
                      {'Content-Type': 'application/json'})
            r = c.getresponse()
            b = r.read().decode(errors='replace')
            key = str(r.status)
            if r.status != 200:
                key += ':' + (json.loads(b)['error'].get('code') or '')
            elif '"error"' in b:
                key += ':stream_error'
            c.close()
        except Exception as e:
            key = 'exception:' + type(e).__name__
        with lock:
            res[key] += 1
            if res['200'] >= 100:
                open(os.path.join(tmp, 'serving'), 'a').close()
        # the refused come back at once: no spinning on them
        time.sleep(0.002 if key == '200' or key.startswith('429') else 0.05)


ts = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(json.dumps(res))
PY
python3 "$KVS_TMP/load.py" "${HTTP_URL##*:}" "$KVS_TMP" >"$KVS_TMP/load.out" 2>"$KVS_TMP/load.log" &
load=$!
kvs_wait_for "requests served" '[ -e "$KVS_TMP/serving" ]'
kill -TERM "$GW_PID"
kvs_wait_for "the gateway exited" '! kill -0 "$GW_PID" 2>/dev/null'
kvs_wait_for "the front saw both links go" \
	'[ "$(grep -cE "event=gateway_(link_closed|lost)" "$KVS_TMP/http.log")" -ge 2 ]'
kvs_wait_for "requests refused for want of a gateway" \
	'curl -s "$HTTP_URL/health" | jq -e ".status == \"no_gateway\"" >/dev/null'
touch "$KVS_TMP/done"
wait "$load" || kvs_fail "the load failed: $(cat "$KVS_TMP/load.log")"
out=$(tail -1 "$KVS_TMP/load.out")
echo "answers: $out"
grep -E 'event=gateway_(closing_link|link_closed|lost)' "$KVS_TMP/http.log" | sed 's/^/  /'

assert_eq "answers other than 200, 429 server_busy and 503 no_backend" \
	"$(jget "$out" 'to_entries | map(select(.key | test("^(200|429:server_busy|503:no_backend)$") | not)) | length')" 0
assert_ge "requests refused busy during the stop" "$(jget "$out" '."429:server_busy" // 0')" 1
assert_eq "links lost (gateway_lost)" "$(grep -c 'event=gateway_lost' "$KVS_TMP/http.log" || true)" 0
assert_eq "links closed as the gateway said" \
	"$(grep -c 'event=gateway_link_closed' "$KVS_TMP/http.log" || true)" 2
echo "PASS test_http_gateway_stop"
