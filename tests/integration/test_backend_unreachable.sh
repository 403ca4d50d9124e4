#!/usr/bin/env bash
# A backend that cannot be reached. Given at start (here in the config
# file), it is logged once (event=backend_unreachable, with the reason), not
# at every retry, and kept: it comes up once something listens there.
# `kvsplicectl backend add` of one fails (exit 1, "cannot be reached ...:
# not added"), logs only that, and leaves the backend list as it was; of
# one that answers, it succeeds (exit 0, up, logged added).
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
be() { ctl backends --json | jq -c --arg a "$1" '[.[] | select(.backend == $a)][0]'; }
# A loopback port nothing listens on: a simulator's, once it has exited.
dead_port() {
	local p
	"$KVS_BUILD/kvsplice-sim" --port-file "$KVS_TMP/dead.port" 2>/dev/null &
	p=$!
	kvs_wait_file "$KVS_TMP/dead.port"
	kill "$p"
	wait "$p" 2>/dev/null || true
	cat "$KVS_TMP/dead.port"
	rm -f "$KVS_TMP/dead.port"
}

kvs_start_sim A --time-scale 0.005
kvs_start_sim B --time-scale 0.005
a=127.0.0.1:$SIM_PORT_A b=127.0.0.1:$SIM_PORT_B
dport=$(dead_port)
d=127.0.0.1:$dport
conf=$KVS_TMP/kvspliced.conf
printf '[backends]\nbackend = %s\nbackend = %s\n' "$a" "$d" >"$conf"
kvs_start_gw --config "$conf"

# At start: said once, with why, however often it is retried.
kvs_wait_for "the log names $d unreachable" \
	"grep -q 'event=backend_unreachable backend=$d .*reason=\"Connection refused\"' '$KVS_TMP/gw.log'"
assert_eq "$d's state" "$(jget "$(be "$d")" .state)" down
f0=$(jget "$(kvs_stats)" .controller.upstream_failures)
kvs_wait_for "three more retries of $d" \
	"[ \$(jget \"\$(kvs_stats)\" .controller.upstream_failures) -ge $((f0 + 3)) ]"
assert_eq "backend_unreachable lines for $d after retries" \
	"$(grep -c "event=backend_unreachable backend=$d " "$KVS_TMP/gw.log")" 1

# backend add of a port nothing listens on: exit 1, says why, not added.
# Not d's port: the kernel may hand a freed port out again (a CI run once
# drew the same one, and the add was refused as a backend already there).
e=$d
while [ "$e" = "$d" ]; do e=127.0.0.1:$(dead_port); done
set +e
out=$(ctl backend add "$e" 2>&1)
rc=$?
set -e
assert_eq "backend add of an unreachable backend: exit status" "$rc" 1
grep -q "$e cannot be reached (Connection refused): not added" <<<"$out" ||
	kvs_fail "backend add of $e: $out"
assert_eq "$e in the backend list" "$(be "$e")" null
assert_eq "backends after the refused add" "$(ctl backends --json | jq length)" 2
# The log says so in one line, the refusal with why: not the lines of a
# backend it keeps (added, unreachable and retried, removed).
grep -q "level=warn prog=kvspliced event=backend_add_refused backend=$e reason=\"Connection refused\"" \
	"$KVS_TMP/gw.log" || kvs_fail "no backend_add_refused log: $(grep "backend=$e " "$KVS_TMP/gw.log")"
assert_eq "log lines naming $e" "$(grep -c "backend=$e " "$KVS_TMP/gw.log")" 1
# ... and its slot is free again: the next add takes it, and works.
r=$(ctl backend add "$b" --json) || kvs_fail "backend add of $b: $r"
assert_eq "backend add of a live backend: state" "$(jget "$r" .state)" up
grep -q "event=backend_added backend=$b index=[0-9]* state=up" "$KVS_TMP/gw.log" ||
	kvs_fail "no backend_added log: $(grep "backend=$b " "$KVS_TMP/gw.log")"
out=$(kvs_bench -n 40 -k 4 --prefixes 8 --json) || kvs_fail "requests with $d down: $out"
assert_eq "requests with $d down" "$(jget "$out" .ok)" 40

# The backend the config lists is kept: it comes up once it listens.
kvs_start_sim D --port "$dport" --time-scale 0.005
assert_eq "$d once it listens" "$(kvs_wait_backend 1 up 200)" up
grep -q "event=backend_up backend=$d " "$KVS_TMP/gw.log" || kvs_fail "no backend_up for $d"
echo "PASS test_backend_unreachable"
