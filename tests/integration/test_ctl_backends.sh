#!/usr/bin/env bash
# The operator's commands against a live gateway, under load: kvsplicectl
# status, backend add / drain / undrain / remove, conns, and the --config
# file with its reload (SIGHUP and kvsplicectl reload). Traffic runs through
# every change and not one request may fail; each command's output is
# checked against what the test did (the backends' own request counts, the
# test's own client connection).
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.005
sim_a=${KVS_PIDS[-1]}
kvs_start_sim B --time-scale 0.005
kvs_start_sim C --time-scale 0.005
sim_c=${KVS_PIDS[-1]}
a=127.0.0.1:$SIM_PORT_A b=127.0.0.1:$SIM_PORT_B c=127.0.0.1:$SIM_PORT_C
conf=$KVS_TMP/kvspliced.conf
cat >"$conf" <<CONF
# kvsplice gateway (test)
[backends]
backend = $a
backend = $b
[limits]
max-outstanding = 1024
drain-timeout-ms = 5000
front-source = 10.9.0.0/16
CONF
kvs_start_gw --config "$conf"
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
# backend ADDR -> its entry in `kvsplicectl backends --json` (or null)
be() { ctl backends --json | jq -c --arg a "$1" '[.[] | select(.backend == $a)][0]'; }

# status
s=$(ctl status --json)
assert_eq "status: controller" "$(jget "$s" .controller)" running
assert_eq "status: pid" "$(jget "$s" .pid)" "$GW_PID"
assert_eq "status: listen" "$(jget "$s" .listen)" "127.0.0.1:$GW_PORT"
assert_eq "status: config" "$(jget "$s" .config)" "$conf"
assert_eq "status: backends up" "$(jget "$s" .backends.up)" 2
grep -q "^controller  running, pid $GW_PID" <<<"$(ctl status)" || kvs_fail "status text: $(ctl status)"

# Load for the whole sequence: ~7 s of open-loop requests.
kvs_bench -n 700 --rate 100 -k 8 --prefixes 64 --prefix-tokens 512 --json >"$KVS_TMP/load.json" &
load=$!
kvs_wait_for "the load under way" '[ "$(ctl backends --json | jq "[.[].requests] | add")" -ge 8 ]'

# add C: it takes work.
r=$(ctl backend add "$c" --json) || kvs_fail "backend add: $r"
assert_eq "added C" "$(jget "$r" .state)" up
out=$(ctl backend add "$c" 2>&1) && kvs_fail "adding C twice succeeded"
grep -q "is a backend already" <<<"$out" || kvs_fail "add twice: $out"
kvs_wait_for "C takes requests" '[ "$(jget "$(be "$c")" .requests)" -ge 1 ]'

# drain A: it takes no new request while the load goes on.
ctl backend drain "$a" >/dev/null || kvs_fail "drain A"
assert_eq "A draining" "$(jget "$(be "$a")" .state)" draining
# What was in flight to A (or being placed as it was drained) finishes.
kvs_wait_for "A's work in flight finishes" '[ "$(jget "$(be "$a")" .outstanding)" = 0 ]'
before=$(jget "$(be "$a")" .requests)
sleep 1.2 # while the load goes on: nothing new may reach A
assert_eq "requests to A while drained" "$(jget "$(be "$a")" .requests)" "$before"
assert_eq "A's work in flight, drained" "$(jget "$(be "$a")" .outstanding)" 0
ctl backend undrain "$a" >/dev/null || kvs_fail "undrain A"
assert_eq "A up again" "$(jget "$(be "$a")" .state)" up

# remove B: drained, then gone.
r=$(ctl backend remove "$b" --json) || kvs_fail "remove B: $r"
kvs_wait_for "B is removed" '[ "$(be "$b")" = null ]'
assert_eq "B gone from the backends" "$(be "$b")" null
grep -q "event=backend_removed backend=$b" "$KVS_TMP/gw.log" || kvs_fail "no backend_removed log"

# Errors say what is wrong.
out=$(ctl backend drain 127.0.0.1:1 2>&1) && kvs_fail "drained a backend that is not there"
grep -q "is not a backend" <<<"$out" || kvs_fail "drain unknown: $out"
out=$(ctl backend add nonsense 2>&1) && kvs_fail "added 'nonsense'"
grep -q "ADDR:PORT" <<<"$out" || kvs_fail "add nonsense: $out"
out=$(ctl backend frobnicate "$a" 2>&1) && kvs_fail "frobnicate accepted"
# A malformed address is a usage error (exit 2), as the other ones are,
# said before the controller is asked.
rc=0
out=$(ctl backend drain notanaddr 2>&1) || rc=$?
assert_eq "backend drain notanaddr: exit status" "$rc" 2
grep -q "backend drain: 'notanaddr' is not ADDR:PORT" <<<"$out" || kvs_fail "drain notanaddr: $out"

wait "$load" || kvs_fail "load generator failed: $(cat "$KVS_TMP/load.json")"
res=$(cat "$KVS_TMP/load.json")
assert_eq "requests through add, drain, undrain, remove: ok" "$(jget "$res" .ok)" 700
assert_eq "errors" "$(jget "$res" .errors)" 0
# Each backend's first-token times (its END reports): every END counted
# (the sims report a time for each), the mean its two parts'.
for x in "$a" "$c"; do
	j=$(be "$x")
	assert_eq "backend $x: TTFTs counted = its ENDs" "$(jget "$j" .ttft.count)" "$(jget "$j" .ends)"
	python3 -c 'import sys; m, q, p = map(float, sys.argv[1:]); assert m > 0 and abs(m - q - p) < 0.01' \
		"$(jget "$j" .ttft.mean_ms)" "$(jget "$j" .ttft.queue_ms)" "$(jget "$j" .ttft.prefill_ms)" ||
		kvs_fail "backend $x: TTFT mean is not queue + prefill: $(jget "$j" .ttft)"
done
grep -q " ttft_ms " <<<"$(ctl backends)" || kvs_fail "backends text: no ttft_ms column"

# conns: this test's own client, and the upstream pools, with TCP state.
# The client sends 5 REQUESTs of 300 bytes and 2 PINGs, each answered, then
# (on the go file) one more REQUEST, which the test holds in flight by
# stopping both backends; it closes on the bye file. Its frames, bytes and
# requests in flight are the same on both paths: the verdict's counts on
# the kernel's, the controller's (written on its tick) on the userspace one.
PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" "$KVS_TMP" <<'PY' &
import os, sys, time
import kvs1
port, tmp = int(sys.argv[1]), sys.argv[2]
s = kvs1.connect(port)
r, got = kvs1.Reader(s), 0
def say(name, text):
    with open(os.path.join(tmp, name + '.tmp'), 'w') as f:
        f.write(text)
    os.rename(os.path.join(tmp, name + '.tmp'), os.path.join(tmp, name))
def wait(name):
    while not os.path.exists(os.path.join(tmp, name)):
        time.sleep(0.02)
for i in range(5):
    s.sendall(kvs1.request(((b'conns test %d ' % i) * 30)[:300], i + 1, max_tokens=4))
    while True:
        f = r.next()
        got += 1
        if f.type in (kvs1.END, kvs1.ERROR):
            break
for rid in (101, 102):
    s.sendall(kvs1.ping(rid))
    while r.next().type != kvs1.PONG:
        got += 1
say('me', '127.0.0.1:%d %d\n' % (s.getsockname()[1], got))
wait('go')
s.sendall(kvs1.request(b'held in flight ' * 20, 6, max_tokens=4))
say('held', str(r.until_end().type))
wait('bye')
PY
client=$!
kvs_wait_file "$KVS_TMP/me"
read -r mine answers <"$KVS_TMP/me"
my_row() { ctl conns --json | jq -c --arg m "$mine" '[.[] | select(.role == "client" and .remote == $m)][0]'; }
counts() { jq -c '[.frames, .bytes, .inflight]' <<<"$(my_row)"; }
kvs_wait_for "conns counts this test's client" '[ "$(counts)" = "[7,1948,0]" ]'
cj=$(ctl conns --json)
row=$(my_row)
assert_eq "conns: client state" "$(jget "$row" .state)" ESTABLISHED
assert_eq "conns: client local" "$(jget "$row" .local)" "127.0.0.1:$GW_PORT"
path=${KVS_DATAPATH:-kernel}
assert_eq "conns: client path" "$(jget "$row" .path)" "$path"
# 5 x (64 + 300) + 2 x 64 bytes, nothing in flight once answered
assert_eq "conns: client frames, bytes, in flight" "$(counts)" "[7,1948,0]"
assert_eq "conns: client over budget" "$(jget "$row" .over_budget)" 0
assert_eq "conns --json: keys or values that are \"\"" \
	"$(jq '[.. | objects | to_entries[] | select(.key == "" or .value == "")] | length' <<<"$cj")" 0
ups=$(jq --arg a "$a" --arg c "$c" --arg p "$path" '[.[] | select(.role == "upstream" and .path == $p and (.remote == $a or .remote == $c) and .state == "ESTABLISHED")] | length' <<<"$cj")
assert_eq "conns: upstream connections (2 backends x pool 2)" "$ups" 4
# What the backends sent the client (its answers less the PONGs, which
# are the gateway's) passed their upstream connections, and was counted.
up_frames=$(jq --arg p "$path" '[.[] | select(.role == "upstream" and .path == $p) | .frames] | add' <<<"$cj")
assert_ge "conns: upstream frames on the $path path" "$up_frames" "$answers"
kill -STOP "$sim_a" "$sim_c"
touch "$KVS_TMP/go"
kvs_wait_for "conns shows the request held in flight" '[ "$(counts)" = "[8,2312,1]" ]'
kill -CONT "$sim_a" "$sim_c"
kvs_wait_file "$KVS_TMP/held"
assert_eq "the held request's answer (END)" "$(cat "$KVS_TMP/held")" 3
kvs_wait_for "conns: the held request ended" '[ "$(counts)" = "[8,2312,0]" ]'
touch "$KVS_TMP/bye"
wait "$client" || kvs_fail "conns test client failed"
grep -q "^role " <<<"$(ctl conns)" || kvs_fail "conns text header"

# Reload: the file now lists A and B. C (added at run time) goes, B comes.
sed -i "s/^backend = .*//; s/^max-outstanding = .*/max-outstanding = 77/" "$conf"
printf 'backend = %s\nbackend = %s\n' "$a" "$b" >>"$conf"
kill -HUP "$GW_PID"
kvs_wait_for "the reload is applied" '[ "$(be "$c")" = null ] && [ "$(be "$b")" != null ]'
assert_eq "after SIGHUP: backends" "$(ctl backends --json | jq -c '[.[].backend] | sort')" \
	"$(jq -cn --arg a "$a" --arg b "$b" '[$a, $b] | sort')"
assert_eq "after SIGHUP: max_outstanding in the map" \
	"$(bpftool map dump pinned "$KVS_PIN/backends" -j | jq '[.[] | select(.formatted.value.state == 1) | .formatted.value.max_outstanding] | unique | .[0]')" 77
out=$(kvs_bench -n 100 -k 4 --prefixes 4 --json) || kvs_fail "after the reload: $out"
assert_eq "requests after the reload" "$(jget "$out" .ok)" 100

# A broken file changes nothing, and says so.
echo "max-outstanding = lots" >>"$conf"
out=$(ctl reload 2>&1) && kvs_fail "reload of a broken file succeeded"
grep -q "errors" <<<"$out" || kvs_fail "reload error: $out"
grep -q "conf:[0-9]*: --max-outstanding: 'lots'" <<<"$out" || kvs_fail "reload error, where: $out"
# The log says it as it says the rest, in logfmt: a line of its own, with
# the file, line and problem.
grep -q "^ts=[^ ]* level=warn prog=kvspliced event=reload_failed config=$conf err=\".*conf:[0-9]*: --max-outstanding: 'lots'" \
	"$KVS_TMP/gw.log" || kvs_fail "no reload_failed line with the error: $(grep reload "$KVS_TMP/gw.log")"
assert_eq "log lines that are not logfmt" "$(grep -cv '^ts=' "$KVS_TMP/gw.log" || true)" 0
assert_eq "backends after a failed reload" "$(ctl backends --json | jq length)" 2
sed -i '$d' "$conf"
r=$(ctl reload --json) || kvs_fail "reload: $r"
grep -q "0 added, 0 removing" <<<"$(jget "$r" .message)" || kvs_fail "reload message: $r"
# A changed front-source (one CIDR for another: the same count) takes a
# restart, and the reload says so.
sed -i 's/^front-source = 10.9.0.0\/16/front-source = 127.0.0.0\/8/' "$conf"
r=$(ctl reload --json) || kvs_fail "reload: $r"
grep -q "front-source" <<<"$(jget "$r" .message)" || kvs_fail "front-source change unreported: $r"
echo "ok: reload: $(jget "$r" .message)"
# balance is the controller's (the work limit it publishes, its policy):
# changed at once, no restart asked; keep-balance is in the kernel's
# read-only data and asks for one.
echo "balance = 1.3" >>"$conf"
r=$(ctl reload --json) || kvs_fail "reload: $r"
grep -q "balance" <<<"$(jget "$r" .message)" && kvs_fail "a changed balance asks a restart: $r"
echo "keep-balance = 3" >>"$conf"
r=$(ctl reload --json) || kvs_fail "reload: $r"
grep -q "keep-balance" <<<"$(jget "$r" .message)" || kvs_fail "keep-balance change unreported: $r"

# The controller dies (SIGKILL: its maps stay pinned, the kernel splices
# on): status says so, exit 3, with what the maps still say.
kill -9 "$GW_PID"
wait "$GW_PID" 2>/dev/null || true
set +e
out=$(ctl status 2>&1)
rc=$?
set -e
assert_eq "status exit code with no controller" "$rc" 3
grep -q "^controller  not running" <<<"$out" || kvs_fail "status: $out"
grep -q "as last set: 2 up" <<<"$out" || kvs_fail "status from the maps: $out"
out=$(ctl backend drain "$a" 2>&1) && kvs_fail "drain with no controller succeeded"
grep -q "no controller answers" <<<"$out" || kvs_fail "drain with no controller: $out"
echo "PASS test_ctl_backends"
