#!/usr/bin/env bash
# A gateway pointed at something that does not speak KVS1 - HTTP servers
# (as a user pointing --backend at an inference server's OpenAI port
# would), a port that answers with a TLS alert, one that never answers -
# says so, and keeps it out of service. Every new upstream connection is
# probed with a PING before it joins the data path: an HTTP server answers
# it as a bad request (a status line; Python's http.server, taking it for
# HTTP/0.9, an HTML page alone), which is logged once (escaped) with the
# advice to put kvsplice-adapter in front of it, and
# `kvsplicectl backends` (and --json) shows why each is down; `backend
# add` of one says why and does not add it (logged once, as refused). No request is ever sent to them: all go to the simulator beside
# them, and none fails.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

# serve NAME KIND: a tiny server on loopback, its port in $KVS_TMP/NAME.port
serve() {
	python3 - "$KVS_TMP/$1.port" "$2" 2>"$KVS_TMP/$1.log" <<'PY' &
import http.server, socket, sys, threading
port_file, kind = sys.argv[1], sys.argv[2]
if kind == 'http':
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
    open(port_file, 'w').write(str(srv.server_port))
    srv.serve_forever()
ls = socket.socket()
ls.bind(('127.0.0.1', 0))
ls.listen(64)
open(port_file, 'w').write(str(ls.getsockname()[1]))
held = []
while True:
    c, _ = ls.accept()
    if kind == 'tls':  # a TLS server's fatal alert (protocol_version), then close
        c.recv(4096)
        c.sendall(b'\x15\x03\x03\x00\x02\x02\x46')
        c.close()
    elif kind == 'status':  # what llama-server or uvicorn answer a bad request line
        c.recv(4096)
        c.sendall(b'HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
        c.close()
    else:  # 'silent': takes the bytes, never answers
        held.append(c)
PY
	KVS_PIDS+=($!)
	kvs_wait_file "$KVS_TMP/$1.port"
}
serve H status
serve P http
serve T tls
serve S silent
serve H2 http
H=127.0.0.1:$(cat "$KVS_TMP/H.port")
P=127.0.0.1:$(cat "$KVS_TMP/P.port")
T=127.0.0.1:$(cat "$KVS_TMP/T.port")
S=127.0.0.1:$(cat "$KVS_TMP/S.port")
H2=127.0.0.1:$(cat "$KVS_TMP/H2.port")
kvs_start_sim A --time-scale 0.01
A=127.0.0.1:$SIM_PORT_A
kvs_start_gw --backend "$H" --backend "$A" --backend "$P" --backend "$T" --backend "$S" \
	--health-interval-ms 200
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
be() { ctl backends --json | jq -c --arg a "$1" '[.[] | select(.backend == $a)][0]'; }

assert_eq "the simulator's state" "$(jget "$(be "$A")" .state)" up
assert_eq "its reason (none while up)" "$(jget "$(be "$A")" .reason)" ""
for x in "$H" "$P" "$T" "$S"; do
	assert_eq "state of $x" "$(jget "$(be "$x")" .state)" down
done
r=$(jget "$(be "$H")" .reason)
echo "HTTP server: $r"
assert_eq "the HTTP server's reason" "$r" \
	'not KVS1, put kvsplice-adapter in front of it; it answered "HTTP/1.1 400 Bad Request\r\nConten"'
r=$(jget "$(be "$P")" .reason)
echo "Python's http.server: $r"
grep -q '^not KVS1, put kvsplice-adapter in front of it; it answered "<!DOCTYPE HTML>' <<<"$r" ||
	kvs_fail "http.server's reason: $r"
r=$(jget "$(be "$T")" .reason)
echo "TLS alert: $r"
assert_eq "the TLS port's reason" "$r" 'not KVS1, put kvsplice-adapter in front of it; it answered "\x15\x03\x03\x00\x02\x02F"'
r=$(jget "$(be "$S")" .reason)
assert_eq "the silent port's reason" "$r" "no answer to a PING in 600 ms"
grep -q "reason" <<<"$(ctl backends | head -1)" || kvs_fail "no reason column: $(ctl backends)"
grep -q "^[0-9].*$H .*down .*not KVS1, put kvsplice-adapter in front of it" <<<"$(ctl backends)" ||
	kvs_fail "kvsplicectl backends does not say why $H is down: $(ctl backends)"

# Said once, with what it answered, escaped; no backend_up for it.
line=$(grep "event=backend_not_kvs1 backend=$H " "$KVS_TMP/gw.log") || kvs_fail "no not-KVS1 line for $H"
echo "log: $line"
grep -q 'answer="HTTP/1.1 400 Bad Request\\r\\nConten"' <<<"$line" ||
	kvs_fail "the line lacks the answer's first 32 bytes"
grep -q 'kvsplice-adapter --listen ADDR:PORT --server http://' <<<"$line" || kvs_fail "the line lacks the advice"
grep -q "event=backend_not_kvs1 backend=$T .*answer=\"\\\\x15\\\\x03\\\\x03" "$KVS_TMP/gw.log" ||
	kvs_fail "no not-KVS1 line for the TLS port"
! grep -q "event=backend_up backend=$H" "$KVS_TMP/gw.log" || kvs_fail "$H was taken up"

# Requests all go to the simulator; none fails (the issue's first request
# failed backend_gone when the HTTP port was taken for a backend).
out=$(kvs_bench -n 60 -k 4 --prefixes 4 --json) || kvs_fail "requests: $out"
assert_eq "requests ok" "$(jget "$out" .ok)" 60
assert_eq "backends that served them" "$(jget "$out" '.backends | length')" 1
assert_eq "requests sent to the HTTP servers" \
	"$(jget "$(be "$H")" .requests)+$(jget "$(be "$P")" .requests)" 0+0

# The gateway keeps retrying (backing off), and says it no more.
kvs_wait_for "the gateway retried the HTTP servers" '[ "$(grep -c "\" 400 -" "$KVS_TMP/P.log")" -ge 3 ]'
assert_eq "not-KVS1 lines for $H after its retries" \
	"$(grep -c "event=backend_not_kvs1 backend=$H " "$KVS_TMP/gw.log")" 1
n=$(grep -c '" 400 -' "$KVS_TMP/P.log" || true)
assert_ge "probes http.server answered (start, then retries)" "$n" 3
assert_eq "state of $H after its retries" "$(jget "$(be "$H")" .state)" down

# An operator adding one hears why at once, and it is not added (exit 1).
out=$(ctl backend add "$H2" 2>&1) && kvs_fail "backend add of an HTTP server succeeded: $out"
grep -q "$H2 does not speak KVS1 (not KVS1, put kvsplice-adapter in front of it" <<<"$out" ||
	kvs_fail "backend add: $out"
assert_eq "HTTP server after its add" "$(be "$H2")" null
# The log has the refusal, with why, and nothing else of it: no not-KVS1
# line (that is for a backend kept and retried).
grep -q "event=backend_add_refused backend=$H2 reason=\"not KVS1, put kvsplice-adapter in front of it" \
	"$KVS_TMP/gw.log" || kvs_fail "no backend_add_refused line for $H2"
assert_eq "log lines naming $H2" "$(grep -c "backend=$H2 " "$KVS_TMP/gw.log")" 1
echo "PASS test_not_kvs1"
