#!/usr/bin/env bash
# The kernel routes without the controller. With kvspliced stopped
# (SIGSTOP) for ten seconds, a client connected before keeps being served:
# requests with prefixes nobody has seen are placed by the kernel, and the
# next turns of those prompts follow the routes the kernel learned from
# them, to the same backend. The kernel's reports wait in their ring; once
# the controller runs again it reads every one, nothing lost, and it never
# read a byte of any prompt (its slow-path counters stay at 0).
# Meanwhile kvsplicectl status says the controller runs but does not
# answer, and counts the connections the kernel still splices.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_sim B --time-scale 0.01
kvs_start_sim C --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--backend "127.0.0.1:$SIM_PORT_C" --health-interval-ms 200
state() { awk '{print $3}' "/proc/$GW_PID/stat"; }

# A client: connects, says so, waits for the go file, then for ~10 s sends
# new prompts (each a prefix of its own) and, for every other one, a second
# turn (the prompt plus more), one at a time; prints one JSON summary.
cat >"$KVS_TMP/client.py" <<'PY'
import json, os, socket, sys, time
import kvs1
port, go, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
print("connected", flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
reader = kvs1.Reader(s)
def ask(rid, prompt):
    s.sendall(kvs1.request(prompt, rid, max_tokens=4))
    s.settimeout(10)
    while True:
        f = reader.next()
        if f.req_id == rid and f.type in (kvs1.END, kvs1.ERROR):
            # the low byte of gw_backend: the backend index it went to
            return f.type, f.gw_backend & 0xff
out = {"ends": 0, "errors": 0, "same_backend": 0, "second_turns": 0}
t0, rid = time.time(), 0
while time.time() - t0 < seconds:
    prompt = os.urandom(16).hex().encode() * 64  # 2 KiB, 32 blocks of its own
    rid += 1
    t, b1 = ask(rid, prompt)
    out["ends" if t == kvs1.END else "errors"] += 1
    if rid % 2:
        rid += 1
        t, b2 = ask(rid, prompt + b"and then, the next turn " * 40)
        out["ends" if t == kvs1.END else "errors"] += 1
        out["second_turns"] += 1
        out["same_backend"] += b1 == b2
    time.sleep(0.05)
out["requests"] = rid
print(json.dumps(out), flush=True)
PY
PYTHONPATH="$(dirname "$0")/../helpers" python3 "$KVS_TMP/client.py" "$GW_PORT" "$KVS_TMP/go" 10 \
	>"$KVS_TMP/client.out" 2>&1 &
CLIENT=$!
kvs_wait_for "the client is connected" 'grep -q connected "$KVS_TMP/client.out"'
# Accepted and in the maps: the controller's part is done.
kvs_wait_for "the gateway accepted it" \
	'[ "$(jget "$(kvs_stats)" .controller.clients_accepted)" = 1 ]'
s0=$(kvs_stats)

kill -STOP "$GW_PID"
kvs_wait_for "the controller is stopped" '[ "$(state)" = T ]'
touch "$KVS_TMP/go"
wait "$CLIENT" || kvs_fail "client failed: $(cat "$KVS_TMP/client.out")"
assert_eq "controller state when the client is done" "$(state)" T
out=$(tail -1 "$KVS_TMP/client.out")
echo "client: $out"
s1=$(kvs_stats)
# kvsplicectl status against the stopped controller (it once said "not
# running" and that the connections "closed with the controller"): alive,
# holding its pin dir, not answering, its connections still in the map.
# (--timeout: the wait for an answer, 10 s by default.)
rc=0
txt=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" --timeout 1500 status 2>&1) || rc=$?
echo "$txt"
assert_eq "status exit code, no answer" "$rc" 3
grep -q "^controller  running (pid $GW_PID holds the pin dir) but not answering (.*no answer within 1500 ms)" \
	<<<"$txt" || kvs_fail "status does not say the controller runs but does not answer"
grep -q "^spliced     1 client and [0-9]* backend connections still in the socket map" <<<"$txt" ||
	kvs_fail "status does not count the client still spliced"
js=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" --json --timeout 1000 status 2>/dev/null) || true
assert_eq "status --json: controller, pid, clients, why" \
	"$(jq -c '[.controller, .pid, .spliced.clients, .error]' <<<"$js")" \
	"[\"not answering\",$GW_PID,1,\"no answer within 1 s\"]"
kill -CONT "$GW_PID"

n=$(jget "$out" .requests)
assert_ge "requests sent while the controller was stopped" "$n" 20
assert_eq "requests answered with an END" "$(jget "$out" .ends)" "$n"
assert_eq "second turns on the first turn's backend" "$(jget "$out" .same_backend)" \
	"$(jget "$out" .second_turns)"
assert_eq "new prefixes the kernel placed" \
	$(($(jget "$s1" .placed_cold) - $(jget "$s0" .placed_cold))) $(((n + 1) / 2))
assert_eq "requests the kernel sent" \
	$(($(jget "$s1" .fast_path_frames) - $(jget "$s0" .fast_path_frames))) "$n"
assert_eq "requests that went to the controller" \
	$(($(jget "$s1" .slow_path_frames) - $(jget "$s0" .slow_path_frames))) 0
assert_eq "reports lost" "$(jget "$s1" .reports_lost)" 0
# Running again, the controller reads what the kernel reported meanwhile.
kvs_wait_for "the controller read every report" \
	'[ "$(jget "$(kvs_stats)" .controller.reports_read)" = "$(jget "$(kvs_stats)" .reports)" ]'
# A health round after the pause: every backend has answered a PING sent
# since (its PONG is younger than the 10 s pause). An ejection for the
# PONGs the stopped controller could not read would have come before.
kvs_wait_for "every backend answered a PING after the pause" \
	'[ "$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json |
		jq "[.[] | select(.pong.age_s < 2)] | length")" = 3 ]'
s2=$(kvs_stats)
assert_eq "prompt bytes the controller read" "$(jget "$s2" .controller.slow_bytes)" 0
assert_eq "health-check ejections after the pause" "$(jget "$s2" .controller.health_failures)" 0
b=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)
assert_eq "backends up after the pause" "$(jq '[.[] | select(.state == "up")] | length' <<<"$b")" 3
echo "PASS test_controller_stopped"
