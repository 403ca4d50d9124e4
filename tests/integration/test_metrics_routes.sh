#!/usr/bin/env bash
# kvsplice_routes without a walk of the routes map at every scrape: the
# count walks the whole map (262,144 entries: ~75-95 ms of the
# controller's CPU, scripts/bench-scrape.sh), so a scrape reuses a count
# up to 10 s old and says how old (kvsplice_routes_count_age_seconds).
# Here the map changes behind the controller's back (tests/helpers/
# routes_fill): the next scrape still has the old count, a later one the
# new count, within the 10 s. `kvsplicectl status` reports the same
# count and its age (routes_age_s) rather than walking the map at each
# call.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --metrics 127.0.0.1:0
MPORT=$(grep -o 'event=metrics_listening addr=[^ ]* port=[0-9]*' "$KVS_TMP/gw.log" | grep -o '[0-9]*$')
[ -n "$MPORT" ] || kvs_fail "no metrics_listening line"
metric() { curl -s "http://127.0.0.1:$MPORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
status() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status --json; }

assert_eq "routes at the start" "$(metric kvsplice_routes)" 0
"$KVS_BUILD/tests/helpers/routes_fill" "$KVS_PIN/routes" 1000 || kvs_fail "routes_fill"
assert_eq "the map, filled" "$(bpftool map dump pinned "$KVS_PIN/routes" -j | jq length)" 1000
# (the first count is at most 10 s old: the next scrape reuses it)
assert_eq "the next scrape: the count it had" "$(metric kvsplice_routes)" 0
age=$(metric kvsplice_routes_count_age_seconds)
awk -v a="$age" 'BEGIN { exit !(a >= 0 && a <= 10) }' || kvs_fail "count age: '$age'"
st=$(status)
assert_eq "status: the count it had, not a walk" "$(jget "$st" .routes)" 0
age=$(jget "$st" .routes_age_s)
awk -v a="$age" 'BEGIN { exit !(a >= 0 && a <= 10) }' || kvs_fail "status count age: '$age'"
"$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status | grep -q '^routes      0 (counted [0-9.]* s ago' ||
	kvs_fail "status text: $("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status | grep routes)"
kvs_wait_for "a scrape with the new count" '[ "$(metric kvsplice_routes)" = 1000 ]' 30
age=$(metric kvsplice_routes_count_age_seconds)
awk -v a="$age" 'BEGIN { exit !(a >= 0 && a < 10) }' || kvs_fail "count age after: '$age'"
assert_eq "status: the new count" "$(jget "$(status)" .routes)" 1000
echo "PASS test_metrics_routes"
