#!/usr/bin/env bash
# Two requests routed on one CPU at once (bpf/datapath/request.bpf.h): a
# verdict run by the strparser's worker (kstrp), in process context,
# interrupted by one from softirq. Each must keep its own scratch (the
# prompt's chain of block hashes, the placement's state, the report): a
# request that read the other's chain would follow the other's route.
#  - Four families of prompts, each a 128-block prefix of its own and a
#    64-block tail unique to the request; one request of each first, so
#    that every family has its routes (to either backend) before the rest.
#  - Clients send requests of every family, pipelined, NREQ each at least
#    and on until the kernel has counted NESTED verdicts nested. The
#    gateway's sockets of half of them are held by loops that take their
#    socket lock (copies of the gateway's sockets, pidfd_getfd;
#    sock_locker.py): their bytes wait in the socket's backlog and kstrp
#    runs their verdicts. The others' verdicts run in softirq, which RPS
#    runs on either CPU by an interrupt, on top of whatever runs there.
#  - With KVS_NESTED_TAKEOVER set (test_request_nested_takeover.sh) a
#    successor takes the gateway over between the two halves' connecting:
#    the held half's sockets keep the old controller's verdict, the other
#    half's get the successor's, and the two programs share the pinned
#    chain and nest maps.
# Every request of a family must reach the backend that family's routes
# name: the backends count what they get by family, and nothing may move a
# family (no spill: a work limit of 10^8 tokens and no --max-outstanding,
# so no backend is past its bound; no hot replica; no placement once
# routed), and every route the map lists must be found by a lookup. The
# kernel must have seen verdicts nested (its verdict_nested count).
# In a network namespace of its own whose loopback spreads its packets over
# every CPU (kvs_rps_netns).
source "$(dirname "$0")/lib.sh"
kvs_rps_netns "$0"
kvs_setup

NCLIENTS=${NCLIENTS:-8}     # half of them held
NREQ=${NREQ:-3000}          # requests each client sends at least
NESTED=${NESTED:-100}       # ... and until the kernel has nested that many verdicts
FAMILIES=4
TAKEOVER=${KVS_NESTED_TAKEOVER:-} # set: test_request_nested_takeover.sh

# A backend answering each REQUEST with an END at once, counting what it
# got by family (the prompt's first 8 bytes); writes the counts to
# $KVS_TMP/NAME.counts once $KVS_TMP/stop exists. Its ENDs say the family's
# prefix was cached once it has seen the family, as an engine's would: ENDs
# with less cached than the routes promise make the controller shrink its
# index of the backend and withdraw routes, the families' among them.
backend() { # NAME
	PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$KVS_TMP" "$1" <<'PY' \
		2>"$KVS_TMP/backend-$1.log" &
import collections, json, os, sys, threading, time
from held_backend import end, serve
tmp, name = sys.argv[1], sys.argv[2]
counts, lock = collections.Counter(), threading.Lock()
PREFIX_TOKENS = 128 * 16

def answer(c, f, clock):
    fam = f.payload[:8].decode()
    with lock:
        cached = PREFIX_TOKENS if counts[fam] else 0
        counts[fam] += 1
    with clock:
        c.sendall(end(f, prompt=len(f.payload) // 4, cached=cached, output=1))

serve('%s/%s.port' % (tmp, name), answer, nodelay=True)
# Every request is counted before its END goes out, and the clients have
# all their ENDs once stop exists: the counts are whole.
while not os.path.exists(tmp + '/stop'):
    time.sleep(0.05)
with lock, open('%s/%s.counts.tmp' % (tmp, name), 'w') as out:
    json.dump(counts, out)
os.rename('%s/%s.counts.tmp' % (tmp, name), '%s/%s.counts' % (tmp, name))
PY
	KVS_PIDS+=($!)
	kvs_wait_file "$KVS_TMP/$1.port"
}
backend b0
backend b1
kvs_start_gw --backend "127.0.0.1:$(cat "$KVS_TMP/b0.port")" \
	--backend "127.0.0.1:$(cat "$KVS_TMP/b1.port")" --pool 1 --health-interval-ms 0 \
	--kernel-slack-tokens 100000000 --max-outstanding 0
kvs_wait_for "the backends are up" \
	'[ "$(kvs_wait_backend 0 up 0)" = up ] && [ "$(kvs_wait_backend 1 up 0)" = up ]'

# The clients: half connect (the held ones), client 0 sends one request of
# each family, one at a time (the families' routes), they write their
# ports to $KVS_TMP/ports.held and wait for $KVS_TMP/taken (the take-over,
# if any); the other half connect and write ports.free; on $KVS_TMP/go
# all send requests, 16 in flight, NREQ each at least and on until
# $KVS_TMP/enough exists, then print what went wrong or "ok".
PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" "$NCLIENTS" "$NREQ" "$FAMILIES" \
	"$KVS_TMP" >"$KVS_TMP/clients.out" 2>"$KVS_TMP/clients.log" <<'PY' &
import os, sys, threading, time
import kvs1
port, nclients, nreq, nfam, tmp = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                   int(sys.argv[4]), sys.argv[5])
BLOCK = 64  # bytes: 16 tokens of 4

def prompt(fam, k, tag):
    head = ('fam%05d' % fam).encode()
    prefix = (head + b' shared instructions of family %d. ' % fam * 400)[:128 * BLOCK]
    tail = (b'request %d of client %s. ' % (k, tag) * 300)[:64 * BLOCK]
    return prefix + tail

def ports(name, part):
    with open('%s/ports.%s.tmp' % (tmp, name), 'w') as p:
        p.write(','.join(str(s.getsockname()[1]) for s in part))
    os.rename('%s/ports.%s.tmp' % (tmp, name), '%s/ports.%s' % (tmp, name))

def wait(name):
    while not os.path.exists('%s/%s' % (tmp, name)):
        time.sleep(0.02)

socks = [kvs1.connect(port, timeout=60) for _ in range(nclients // 2)]
r0 = kvs1.Reader(socks[0])
for fam in range(nfam):
    socks[0].sendall(kvs1.request(prompt(fam, 0, b'warm'), 1 + fam))
    f = r0.until_end()
    assert f.type == kvs1.END, 'family %d: frame type %d' % (fam, f.type)
ports('held', socks)
wait('taken')  # the take-over variant's: these keep the old verdict
socks += [kvs1.connect(port, timeout=60) for _ in range(nclients - nclients // 2)]
ports('free', socks[nclients // 2:])
wait('go')
out = [None] * nclients

def client(c):
    s, r, sent, got, window, more = socks[c], kvs1.Reader(socks[c]), 0, 0, 16, True
    try:
        while got < sent or more:
            while more and sent - got < window:
                s.sendall(kvs1.request(prompt((sent + c) % nfam, sent, b'%d' % c), 100 + sent))
                sent += 1
                if sent >= nreq and sent % 64 == 0:
                    more = not os.path.exists(tmp + '/enough')
            f = r.next()
            if f.type != kvs1.END:
                out[c] = 'request %d: frame type %d %r' % (f.req_id, f.type, f.payload[:60])
                return
            got += 1
        out[c] = 'ok'
    except (OSError, EOFError) as e:
        out[c] = 'after %d ENDs: %s' % (got, e)

ts = [threading.Thread(target=client, args=(c,)) for c in range(nclients)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print('\n'.join(out))
PY
CLIENTS_PID=$!
kvs_wait_for "the families' routes are learnt" "[ -e '$KVS_TMP/ports.held' ]"
if [ -n "$TAKEOVER" ]; then
	# The held clients' sockets keep the old controller's verdict, the
	# free ones' get the successor's: two programs on one CPU, sharing
	# the pinned chain, counting on the pinned nest.
	kvs_start_successor --backend "127.0.0.1:$(cat "$KVS_TMP/b0.port")" \
		--backend "127.0.0.1:$(cat "$KVS_TMP/b1.port")" --pool 1 --health-interval-ms 0 \
		--kernel-slack-tokens 100000000 --max-outstanding 0
	wait "$GW_PID" || true
	GW_PID=$GW2_PID
fi
touch "$KVS_TMP/taken"
kvs_wait_for "the free clients are connected" "[ -e '$KVS_TMP/ports.free' ]"
python3 "$(dirname "$0")/../helpers/sock_locker.py" \
	"$GW_PID" "$KVS_TMP" held --local "$GW_PORT" --remote "$(cat "$KVS_TMP/ports.held")" \
	2>"$KVS_TMP/locker.log" &
KVS_PIDS+=($!)
kvs_wait_for "the held clients' sockets are held" "[ -e '$KVS_TMP/locking.held' ]"

st0=$(kvs_stats)
nested0=$(jget "$st0" .verdict_nested)
touch "$KVS_TMP/go"
kvs_wait_for "$NESTED verdicts nested" \
	'[ $(($(jget "$(kvs_stats)" .verdict_nested) - nested0)) -ge "$NESTED" ]' 600
touch "$KVS_TMP/enough"
wait "$CLIENTS_PID"
touch "$KVS_TMP/stop"
cat "$KVS_TMP/clients.out"
kvs_wait_for "the backends' counts" "[ -e '$KVS_TMP/b0.counts' ] && [ -e '$KVS_TMP/b1.counts' ]"
st=$(kvs_stats)
delta() { echo $(($(jget "$st" ".$1") - $(jget "$st0" ".$1"))); }
echo "b0 $(cat "$KVS_TMP/b0.counts") b1 $(cat "$KVS_TMP/b1.counts")"
echo "verdict_nested $(delta verdict_nested) verdict_nest_full $(delta verdict_nest_full)" \
	"fast_path_frames $(delta fast_path_frames) slow_path_frames $(delta slow_path_frames)"

assert_eq "clients that got an END for every request" \
	"$(grep -c '^ok$' "$KVS_TMP/clients.out")" "$NCLIENTS"
# A family's requests on the backend it did not go to first: its minority.
moved=$(python3 - "$KVS_TMP" "$FAMILIES" <<'PY'
import json, sys
tmp, nfam = sys.argv[1], int(sys.argv[2])
c0, c1 = (json.load(open('%s/%s.counts' % (tmp, b))) for b in ('b0', 'b1'))
fams = ['fam%05d' % f for f in range(nfam)]
print(sum(min(c0.get(f, 0), c1.get(f, 0)) for f in fams))
PY
)
for c in placed_spill kept_holder hot_replica placed_cold placed_shallow placed_stale; do
	assert_eq "requests $c while every family had its route" "$(delta $c)" 0
done
assert_eq "requests of a family on the other backend than its route's" "$moved" 0
# A route learnt while a nested verdict rewrote its key in place is filed
# under the other key's hash (bpf/datapath/route.bpf.h, learn_routes).
assert_eq "routes the map lists that no lookup finds" \
	"$("$KVS_BUILD/tests/helpers/map_lost_keys" "$KVS_PIN/routes")" 0
assert_ge "verdicts that began while another ran on their CPU" "$(delta verdict_nested)" "$NESTED"
echo "PASS test_request_nested${TAKEOVER:+_takeover}"
