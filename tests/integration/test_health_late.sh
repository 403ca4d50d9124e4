#!/usr/bin/env bash
# Health checks whose PING or PONG waits in the gateway's own kernel: each
# takes an egress redirect, which waits for a kernel worker, and such a
# worker can go unscheduled for seconds on a loaded machine (docs/RUNBOOK.md,
# "A backend goes down"). That cannot be made to happen at will; its effect
# on the check can: a backend (tests/helpers/late_backend.py) holds its PONGs
# to health checks, and only them, or every PONG.
#  - PONGs to health checks held past three intervals, the backend
#    otherwise well: it answers the controller's direct PING (a connection
#    of its own, no redirect) and is kept, logged and counted as held, not
#    ejected; the held PONG, once it comes, answers the check.
#  - Every PONG held while the backend streams a response: its responses
#    keep it in, the stream ends with its END; then, silent with its
#    connections open, it is still ejected ("no PONG"), and readmitted once
#    it answers again.
# Before, both ejected the backend three intervals after the PING that
# waited, and the stream ended in an ERROR.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

PYTHONPATH="$(dirname "$0")/../helpers" python3 "$(dirname "$0")/../helpers/late_backend.py" \
	"$KVS_TMP" 2>"$KVS_TMP/backend.log" &
KVS_PIDS+=($!)
kvs_wait_file "$KVS_TMP/backend.port"
A=127.0.0.1:$(cat "$KVS_TMP/backend.port")
kvs_start_gw --backend "$A" --health-interval-ms 200 --log-level debug
ctl() { jget "$(kvs_stats)" ".controller.$1"; }
state() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json | jq -r '.[0].state'; }
pongs() { grep -c "event=pong backend=$A" "$KVS_TMP/gw.log" || true; }
kvs_wait_for "A answers the health check" '[ "$(pongs)" -ge 1 ]'

# --- PONGs to health checks held; direct PINGs answered ----------------------
touch "$KVS_TMP/late"
kvs_wait_for "a check past its three intervals is decided" \
	'grep -q "event=health_answered_directly backend=$A\|event=backend_down backend=$A" "$KVS_TMP/gw.log"'
n=$(pongs)
rm "$KVS_TMP/late"
kvs_wait_for "the held PONG answers the check" '[ "$(pongs)" -gt "$n" ]'
assert_eq "ejections of a backend that answers directly" "$(ctl health_failures)" 0
assert_eq "A's state" "$(state)" up
assert_ge "checks held" "$(ctl health_held)" 1
grep -q "event=health_answered_directly backend=$A waited_ms=[0-9]* hint=" "$KVS_TMP/gw.log" ||
	kvs_fail "no line for the check its direct answer held"
echo "ok: a backend whose check's PONG is late but which answers directly is kept"

# --- every PONG held while a response streams --------------------------------
PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" "$KVS_TMP" \
	>"$KVS_TMP/client.out" <<'PY' &
import sys
import kvs1
s = kvs1.connect(int(sys.argv[1]))
s.sendall(kvs1.request(b'a stream that outlasts a health check ' * 4, 1, max_tokens=1000))
r = kvs1.Reader(s)
f = r.next()
open(sys.argv[2] + '/streaming', 'w').write('1')
chunks = 1
while f.type == kvs1.CHUNK:
    f = r.next()
    chunks += f.type == kvs1.CHUNK
print(f.type, chunks)
PY
client=$!
KVS_PIDS+=($client)
kvs_wait_file "$KVS_TMP/streaming"
touch "$KVS_TMP/mute"
kvs_wait_for "a check past its three intervals is decided" \
	'grep -q "event=health_pong_late backend=$A\|event=backend_down backend=$A" "$KVS_TMP/gw.log"'
touch "$KVS_TMP/finish"
wait $client || kvs_fail "the client failed: $(cat "$KVS_TMP/client.out")"
read -r type chunks <"$KVS_TMP/client.out"
assert_eq "the stream's last frame (3: END; 4: ERROR)" "$type" 3
assert_ge "CHUNKs streamed" "$chunks" 2
assert_eq "ejections while A streams" "$(ctl health_failures)" 0
echo "ok: a backend whose responses still come is kept"

ms=$(kvs_ms_until_out 0)
assert_le "ms to eject it once silent (3 intervals, a direct PING's, ticks, slack)" "$ms" 2500
grep -q "event=backend_down backend=$A reason=\"no PONG in [0-9]* ms\"" "$KVS_TMP/gw.log" ||
	kvs_fail "no ejection line"
assert_eq "ejections once silent" "$(ctl health_failures)" 1
rm "$KVS_TMP/mute"
assert_eq "A once it answers again" "$(kvs_wait_backend 0 up "" 0.1)" up
echo "PASS test_health_late"
