#!/usr/bin/env bash
# An upgrade that brings a configuration change (issue 18, item 3). The
# gateway runs from a config file; the file is changed (the pool per
# backend up, then down; --metrics moved; a backend added, then one
# removed), a reload says what waits for a restart, and `kvsplicectl
# upgrade` runs under load. The successor applies the file as it is now:
# the pool connections it took over are kept, the missing ones opened and
# the surplus ones closed once they carry no request, and no request fails
# before, during or after; a moved --listen takes clients at its new
# address (those connected stay), a moved --metrics serves there. Also:
# the successor's command line holds one --takeover and one
# --handover-socket however many upgrades came before, and its log counts
# the backends there are. An upgrade to a file with an
# error, or to another pin-dir, is refused and the running one serves on.
source "$(dirname "$0")/lib.sh"
kvs_setup

# Requests long enough (tens of ms) that some are in flight on every
# connection when the pool shrinks.
kvs_start_sim A --time-scale 0.1
kvs_start_sim B --time-scale 0.1
kvs_start_sim C --time-scale 0.1
a=127.0.0.1:$SIM_PORT_A b=127.0.0.1:$SIM_PORT_B c=127.0.0.1:$SIM_PORT_C
conf=$KVS_TMP/kvspliced.conf
cat >"$conf" <<CONF
listen = 127.0.0.1:0
pin-dir = $KVS_PIN
[backends]
backend = $a
backend = $b
[limits]
pool = 2
max-outstanding = 1024
drain-timeout-ms = 10000
CONF
# (not kvs_start_gw: its --listen on the command line would override the file's)
"$KVS_BUILD/kvspliced" --config "$conf" --port-file "$KVS_TMP/gw.port" 2>"$KVS_TMP/gw.log" &
GW_PID=$!
KVS_PIDS+=($GW_PID)
kvs_wait_file "$KVS_TMP/gw.port"
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
GW_ADDR=$(jget "$(ctl status --json)" .listen)
bench() { "$KVS_BUILD/kvsplice-bench" live --connect "$GW_ADDR" --quiet "$@"; }

# upstream_slots: "BACKEND/SLOT ..." of the spliced upstream connections
# (kernel path, established), sorted.
upstream_slots() {
	ctl conns --json | jq -r '[.[] | select(.role == "upstream" and .path == "kernel"
		and .state == "ESTABLISHED") | "\(.remote)/\(.slot)"] | sort | join(" ")'
}
# want_slots POOL ADDR...: what upstream_slots should say.
want_slots() {
	local pool=$1 s x
	shift
	for x in "$@"; do
		for s in $(seq 0 $((pool - 1))); do echo "$x/$s"; done
	done | sort | paste -sd' '
}
# the backends' pool sizes in the map, one per line: "ADDR POOL"
pools() { ctl backends --json | jq -r '.[] | "\(.backend) \(.pool)"' | sort; }
# requests the backends were sent, in all
total_requests() { ctl backends --json | jq '[.[].requests] | add'; }
# upgrade_under_load N LABEL: N requests (8 connections, open loop) with an
# upgrade in the middle; every one must be answered, and answered right
# (kvsplice-bench checks each answer against the simulator's). Sets NEW.
upgrade_under_load() {
	local n=$1 label=$2 load out res before sent
	before=$(jget "$(ctl status --json)" .pid)
	sent=$(total_requests)
	bench -n "$n" --rate 150 -k 8 --prefixes 16 --prefix-tokens 512 -m 48 --json \
		>"$KVS_TMP/load-$label.json" &
	load=$!
	KVS_PIDS+=($load)
	# the load is under way: requests are in flight on every slot
	kvs_wait_for "requests in flight ($label)" "[ \$(total_requests) -ge $((sent + 200)) ]"
	out=$(ctl upgrade) || kvs_fail "upgrade ($label): $out"
	NEW=$(jget "$(ctl status --json)" .pid)
	KVS_PIDS+=($NEW)
	grep -q "^upgraded: controller pid $NEW took over from pid $before" <<<"$out" ||
		kvs_fail "upgrade ($label): $out"
	wait "$load" || kvs_fail "load across the upgrade ($label): $(cat "$KVS_TMP/load-$label.json")"
	res=$(cat "$KVS_TMP/load-$label.json")
	assert_eq "requests answered across the upgrade ($label)" "$(jget "$res" .ok)" "$n"
	assert_eq "errors across the upgrade ($label)" "$(jget "$res" .errors)" 0
	assert_eq "mismatches across the upgrade ($label)" "$(jget "$res" .mismatches)" 0
}
# after_upgrade N LABEL: N more requests, all answered right.
after_upgrade() {
	local out
	out=$(bench -n "$1" -k 8 --prefixes 16 --prefix-tokens 512 --json) ||
		kvs_fail "after the upgrade ($2): $out"
	assert_eq "requests after the upgrade ($2)" "$(jget "$out" .ok)" "$1"
}
# one_each PID: the command line holds --takeover and --handover-socket once
one_each() {
	local argv
	argv=$(tr '\0' '\n' <"/proc/$1/cmdline")
	assert_eq "--takeover in pid $1's command line" "$(grep -c '^--takeover$' <<<"$argv")" 1
	assert_eq "--handover-socket in pid $1's command line" \
		"$(grep -c '^--handover-socket' <<<"$argv")" 1
}

assert_eq "slots before" "$(upstream_slots)" "$(want_slots 2 "$a" "$b")"

# 1. The pool up (2 -> 3), a backend added in the file, --metrics added.
#    A reload applies the backend list and says the pool waits.
sed -i 's/^pool = .*/pool = 3/' "$conf"
printf 'backend = %s\nmetrics = 127.0.0.1:0\n' "$c" >>"$conf"
r=$(ctl reload --json) || kvs_fail "reload: $r"
grep -q "pool" <<<"$(jget "$r" .message)" || kvs_fail "reload does not name pool: $r"
echo "ok: reload: $(jget "$r" .message)"
kvs_wait_for "C up after the reload" "[ \"\$(ctl backends --json | jq -r --arg c '$c' '.[] | select(.backend == \$c) | .state')\" = up ]"
upgrade_under_load 1500 up
kvs_wait_for "three pool slots per backend" "[ \"\$(upstream_slots)\" = \"$(want_slots 3 "$a" "$b" "$c")\" ]"
echo "ok: slots $(upstream_slots)"
assert_eq "pool sizes in the map" "$(pools)" "$(printf '%s 3\n' "$a" "$b" "$c" | sort)"
grep "event=listening" "$KVS_TMP/gw.log" | tail -1 | grep -q " backends=3 " ||
	kvs_fail "log: $(grep event=listening "$KVS_TMP/gw.log" | tail -1)"
echo "ok: the successor logs backends=3"
grep -q "event=metrics_listening" "$KVS_TMP/gw.log" || kvs_fail "no metrics listener"
after_upgrade 400 up
one_each "$NEW"

# 2. The pool down (3 -> 1), B removed from the file, --metrics and
#    --listen moved: the surplus connections close once what they carry
#    has ended, B drains and goes; the clients connected at the old
#    address stay, new ones come to the new one.
sed -i "s/^pool = .*/pool = 1/; /^backend = ${b//./\\.}\$/d; s/^metrics = .*/metrics = 127.0.0.2:0/;
	s/^listen = .*/listen = 127.0.0.2:0/" "$conf"
MID=$NEW
OLD_ADDR=$GW_ADDR
upgrade_under_load 1500 down
GW_ADDR=$(jget "$(ctl status --json)" .listen)
[[ $GW_ADDR == 127.0.0.2:* ]] || kvs_fail "listen not moved: $GW_ADDR"
if (exec 3<>"/dev/tcp/${OLD_ADDR%:*}/${OLD_ADDR##*:}") 2>/dev/null; then
	kvs_fail "the old address $OLD_ADDR still takes connections"
fi
echo "ok: listening at $GW_ADDR, not at $OLD_ADDR"
grep -q "event=listen_moved from=$OLD_ADDR" "$KVS_TMP/gw.log" || kvs_fail "no listen_moved"
# the surplus connections waited for requests in flight on the backends
# (or the test did not test that)
w=$(grep -o 'event=pool_retiring .*waiting_for=[0-9]*' "$KVS_TMP/gw.log" | grep -o '[0-9]*$' |
	sort -n | tail -1)
assert_ge "requests the retiring connections waited for (most)" "${w:-0}" 1
kvs_wait_for "one pool slot per backend, B gone" "[ \"\$(upstream_slots)\" = \"$(want_slots 1 "$a" "$c")\" ]" 600
echo "ok: slots $(upstream_slots)"
assert_eq "pool sizes in the map" "$(pools)" "$(printf '%s 1\n' "$a" "$c" | sort)"
grep -q "event=metrics_listening addr=127.0.0.2" "$KVS_TMP/gw.log" ||
	kvs_fail "metrics not moved: $(grep metrics_listening "$KVS_TMP/gw.log")"
echo "ok: metrics moved to 127.0.0.2"
after_upgrade 400 down
one_each "$NEW"
[ "$MID" != "$NEW" ] || kvs_fail "second upgrade kept pid $MID"

# A file with an error: the successor exits before it asks for anything,
# and this controller serves on.
echo "pool = lots" >>"$conf"
set +e
out=$(ctl upgrade 2>&1)
rc=$?
set -e
assert_eq "exit status of an upgrade to a broken file" "$rc" 1
grep -q "exited with 2; pid $NEW carries on" <<<"$out" || kvs_fail "broken file: $out"
assert_eq "controller after the failed upgrade" "$(jget "$(ctl status --json)" .pid)" "$NEW"
sed -i '$d' "$conf"
after_upgrade 100 broken
# Another pin-dir: the successor would hold sockets that are in maps it
# does not see; it refuses, and this controller serves on.
sed -i "s|^pin-dir = .*|pin-dir = ${KVS_PIN}-moved|" "$conf"
set +e
out=$(ctl upgrade 2>&1)
rc=$?
set -e
rmdir "${KVS_PIN}-moved" 2>/dev/null || true
assert_eq "exit status of an upgrade to another pin-dir" "$rc" 1
grep -q "event=takeover_refused reason=\"no maps pinned at ${KVS_PIN}-moved\"" "$KVS_TMP/gw.log" ||
	kvs_fail "pin-dir change: $out"
assert_eq "controller after the refused upgrade" "$(jget "$(ctl status --json)" .pid)" "$NEW"
sed -i "s|^pin-dir = .*|pin-dir = $KVS_PIN|" "$conf"
after_upgrade 100 pin-dir

# 3. A third upgrade with nothing changed: still one of each, and the
#    backends counted as they are (2, not the slots ever used).
out=$(ctl upgrade) || kvs_fail "third upgrade: $out"
NEW=$(jget "$(ctl status --json)" .pid)
KVS_PIDS+=($NEW)
one_each "$NEW"
grep "event=listening" "$KVS_TMP/gw.log" | tail -1 | grep -q " backends=2 " ||
	kvs_fail "log: $(grep event=listening "$KVS_TMP/gw.log" | tail -1)"
echo "ok: the successor logs backends=2"
after_upgrade 200 same
echo "PASS test_upgrade_config"
