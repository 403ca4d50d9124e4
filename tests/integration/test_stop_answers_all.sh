#!/usr/bin/env bash
# A stop loses no request a client sent before the gateway closed: KVS1
# clients send requests without pause on six connections while the
# gateway stops (SIGTERM), one of them with a long request in flight.
# Every request gets its END or an ERROR (busy: "the gateway is
# stopping"), and no connection is reset. Four clients do what
# docs/PROTOCOL.md ("Closing") asks of one told its connection closes
# (ERROR busy with req_id 0): they send nothing more and shut down their
# sending side; two ignore it and go on sending until the gateway's FIN,
# and lose only what they sent after being told. Before, the gateway
# closed its sockets 200 ms after its drain with requests unread: the
# close reset the connection, and those requests had no answer
# (docs/RUNBOOK.md, "Stop").
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

# Real pace: the long request decodes 150 tokens in ~2 s; a short one ~20 ms.
kvs_start_sim A --time-scale 1
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A"
[ "$(kvs_wait_backend 0 up 400)" = up ] || kvs_fail "backend not up"

cat >"$KVS_TMP/clients.py" <<'PY'
import json, os, socket, sys, threading, time
import kvs1
port, tmp = int(sys.argv[1]), sys.argv[2]
NCONN, AWARE, LONG_ID = 6, 4, 1 << 40


class Conn:
    """A connection: a sender that sends requests without pause, a reader
    that records each request's last frame. An aware one, told the
    connection closes, sends no more and shuts down its sending side."""

    def __init__(self, i):
        self.i, self.aware = i, i < AWARE
        self.s = kvs1.connect(port, timeout=60)
        self.lock = threading.Lock()
        self.sent, self.sent_after_told, self.answers = [], set(), {}
        self.told = self.eof = self.stop = False
        self.reset = None
        self.ends_before = 0

    def send_loop(self):
        n = 0
        if self.i == 0:  # a long one, in flight when the stop comes
            with self.lock:
                self.s.sendall(kvs1.request(b'a long answer, please. ' * 40, LONG_ID,
                                            max_tokens=150))
                self.sent.append(LONG_ID)
        while not self.stop:
            n += 1
            rid = self.i * 1000000 + n
            with self.lock:
                if self.stop:
                    break
                try:
                    self.s.sendall(kvs1.request(b'short request %d on %d. ' % (n, self.i) * 4,
                                                rid, max_tokens=1))
                except (ConnectionResetError, BrokenPipeError) as e:
                    self.reset = self.reset or 'send: %s' % e
                    break
                self.sent.append(rid)
                if self.told:
                    self.sent_after_told.add(rid)
            time.sleep(0.005)

    def read_loop(self):
        r = kvs1.Reader(self.s)
        while True:
            try:
                f = r.next()
            except EOFError:
                self.eof = True
                break
            except ConnectionResetError as e:
                self.reset = 'recv: %s' % e
                break
            if f.req_id == 0 and f.type == kvs1.ERROR:  # the connection closes
                with self.lock:
                    self.told = True
                    if self.aware:
                        self.stop = True
                        self.s.shutdown(socket.SHUT_WR)
                continue
            if f.type in (kvs1.END, kvs1.ERROR):
                self.answers[f.req_id] = (f.type, f.status)
                if f.type == kvs1.END:
                    self.ends_before += 1
        with self.lock:  # closed at once, as a client that saw the close does
            self.stop = True
            self.s.close()


conns = [Conn(i) for i in range(NCONN)]
threads = []
for c in conns:
    for fn in (c.send_loop, c.read_loop):
        t = threading.Thread(target=fn, daemon=True)
        t.start()
        threads.append(t)
# Serving: every connection has its answers coming, the long one begun.
while not all(c.ends_before >= 5 for c in conns):
    time.sleep(0.01)
open(os.path.join(tmp, 'serving'), 'w').close()
for t in threads:
    t.join(120)
out = []
for c in conns:
    lost = [r for r in c.sent if r not in c.answers]
    out.append({'aware': c.aware, 'sent': len(c.sent), 'told': c.told, 'eof': c.eof,
                'reset': c.reset, 'lost': len(lost),
                'lost_before_told': len([r for r in lost if r not in c.sent_after_told]),
                'busy': sum(1 for t, s in c.answers.values()
                            if t == kvs1.ERROR and s == kvs1.E_BUSY),
                'other_errors': sum(1 for t, s in c.answers.values()
                                    if t == kvs1.ERROR and s != kvs1.E_BUSY),
                'long': c.answers.get(LONG_ID, [0])[0] if c.i == 0 else None})
print(json.dumps(out))
PY

PYTHONPATH="$(dirname "$0")/../helpers" python3 "$KVS_TMP/clients.py" "$GW_PORT" "$KVS_TMP" \
	>"$KVS_TMP/clients.out" 2>"$KVS_TMP/clients.log" &
clients=$!
kvs_wait_for "requests served on every connection" '[ -e "$KVS_TMP/serving" ]'
kill -TERM "$GW_PID"
kvs_wait_for "the gateway exited" '! kill -0 "$GW_PID" 2>/dev/null'
wait "$clients" || kvs_fail "clients failed: $(cat "$KVS_TMP/clients.log")"
out=$(tail -1 "$KVS_TMP/clients.out")
echo "connections: $out"
grep -E 'event=stop_(draining|drained|clients_closed)' "$KVS_TMP/gw.log" | sed 's/^/  /'

assert_eq "connections reset" "$(jget "$out" '[.[] | select(.reset != null)] | length')" 0
assert_eq "requests without an answer (aware clients)" \
	"$(jget "$out" '[.[] | select(.aware) | .lost] | add')" 0
assert_eq "requests without an answer, sent before the client was told" \
	"$(jget "$out" '[.[] | .lost_before_told] | add')" 0
assert_eq "connections told they close" "$(jget "$out" '[.[] | select(.told)] | length')" 6
assert_eq "connections closed with a FIN" "$(jget "$out" '[.[] | select(.eof)] | length')" 6
assert_eq "the long request in flight: its END (type 3)" "$(jget "$out" '.[0].long')" 3
assert_eq "errors other than busy" "$(jget "$out" '[.[] | .other_errors] | add')" 0
# The window was there: requests came during the stop and were refused.
assert_ge "requests answered busy during the stop" "$(jget "$out" '[.[] | .busy] | add')" 6
grep -q "event=stop_drained" "$KVS_TMP/gw.log" || kvs_fail "no stop_drained in the log"
echo "PASS test_stop_answers_all"
