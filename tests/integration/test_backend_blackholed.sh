#!/usr/bin/env bash
# A backend whose host has gone: its SYNs unanswered, every connect to it
# hangs until the gateway gives up (300 ms). The controller used to wait
# for each in its event loop: at every retry (every 5 s at most) nothing
# else was done for 300 ms, neither clients' PINGs nor punted requests nor
# the other backends' health checks (PING RTTs through the controller: max
# 300 ms, 6 of 640 over 100 ms in 15 s; with the connect in the event
# loop, max 5 ms). The test needs no clock: a client's PING is answered
# while the gateway's connect to the dead backend is still under way
# (ss shows it in SYN-SENT before and after), which a controller blocked
# in that connect cannot do. The backend is down with the reason the
# connect gave, and comes up once something answers there; `backend add`
# of such a backend is refused, as before.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }

python3 "$(dirname "$0")/../helpers/syn_blackhole.py" "$KVS_TMP/dead.port" &
HOLE=$!
KVS_PIDS+=($HOLE)
kvs_wait_file "$KVS_TMP/dead.port"
d=127.0.0.1:$(cat "$KVS_TMP/dead.port")
kvs_start_sims "A" --time-scale 0.005
kvs_start_gw "${KVS_BACKENDS[@]}" --backend "$d"
[ "$(kvs_wait_backend 0 up)" = up ] || kvs_fail "backend 0 not up"
kvs_wait_for "the log names $d unreachable, timed out" \
	"grep -q 'event=backend_unreachable backend=$d .*reason=\"Connection timed out\"' '$KVS_TMP/gw.log'"
assert_eq "$d's state" "$(ctl backends --json | jq -r '.[1].state')" down

# PINGs answered during the gateway's connects to $d: each round waits
# for one in SYN-SENT, sends a PING, and counts the PONG if that same
# connect is still under way when it comes.
out=$(PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" "$d" <<'PY'
import subprocess, sys, time
import kvs1

port, dead = int(sys.argv[1]), sys.argv[2]


def connecting():
    """The local ports of the gateway's connects to dead in SYN-SENT."""
    out = subprocess.run(["ss", "-Htn", "state", "syn-sent", "dst", dead],
                         capture_output=True, text=True, check=True).stdout
    return {line.split()[-2] for line in out.splitlines() if line.split()}


s = kvs1.connect(port)
r = kvs1.Reader(s)
rounds = during = 0
end = time.time() + 60
while rounds < 5 and time.time() < end:
    before = connecting()
    if not before:
        time.sleep(0.005)
        continue
    rounds += 1
    s.sendall(kvs1.ping(rounds))
    while True:
        f = r.next()
        if f.type == kvs1.PONG and f.req_id == rounds:
            break
    if before & connecting():
        during += 1
print(rounds, during)
PY
) || kvs_fail "client failed: $out"
read -r rounds during <<<"$out"
echo "$rounds rounds, $during PINGs answered while a connect to $d was under way"
assert_eq "rounds with a connect to $d under way" "$rounds" 5
assert_ge "PINGs answered during a connect (blocking connects: 0)" "$during" 3

# backend add of one: refused as a blocking connect refused it (the
# handshake is waited for in place, 300 ms at most), the list unchanged.
python3 "$(dirname "$0")/../helpers/syn_blackhole.py" "$KVS_TMP/dead2.port" &
KVS_PIDS+=($!)
kvs_wait_file "$KVS_TMP/dead2.port"
e=127.0.0.1:$(cat "$KVS_TMP/dead2.port")
set +e
out=$(ctl backend add "$e" 2>&1)
rc=$?
set -e
assert_eq "backend add of $e: exit status" "$rc" 1
grep -q "$e cannot be reached (Connection timed out): not added" <<<"$out" ||
	kvs_fail "backend add of $e: $out"
assert_eq "backends after the refused add" "$(ctl backends --json | jq length)" 2

# Comes up once it answers.
kill "$HOLE"
wait "$HOLE" 2>/dev/null || true
kvs_start_sim D --time-scale 0.005 --port "${d##*:}"
[ "$(kvs_wait_backend 1 up 30)" = up ] || kvs_fail "$d not up once it answers"
echo "PASS test_backend_blackholed"
