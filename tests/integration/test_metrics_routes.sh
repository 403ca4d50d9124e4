#!/usr/bin/env bash
# kvsplice_routes and kvsplicectl status without a walk of the routes map:
# a walk reads the whole map (262,144 entries: ~75-100 ms of the
# controller's CPU, scripts/bench-scrape.sh). The kernel counts the map's
# entries itself (Linux 6.6 and later; kvs_count_routes reads it), so both
# give the count as it is now, age 0. Here the map changes behind the
# controller's back (tests/helpers/routes_fill): the next scrape and the
# next status have the new count. (Before, a scrape reused a walk's count
# up to 10 s old, and status walked the map at each call.)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --metrics 127.0.0.1:0
MPORT=$(grep -o 'event=metrics_listening addr=[^ ]* port=[0-9]*' "$KVS_TMP/gw.log" | grep -o '[0-9]*$')
[ -n "$MPORT" ] || kvs_fail "no metrics_listening line"
metric() { curl -s "http://127.0.0.1:$MPORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
status() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" status "$@"; }

assert_eq "routes at the start" "$(metric kvsplice_routes)" 0
"$KVS_BUILD/tests/helpers/routes_fill" "$KVS_PIN/routes" 1000 || kvs_fail "routes_fill"
assert_eq "the map, filled" "$(bpftool map dump pinned "$KVS_PIN/routes" -j | jq length)" 1000
assert_eq "the next scrape: the map as it is" "$(metric kvsplice_routes)" 1000
assert_eq "its age" "$(metric kvsplice_routes_count_age_seconds)" 0.000
st=$(status --json)
assert_eq "status: the map as it is" "$(jget "$st" .routes)" 1000
assert_eq "status: its age" "$(jget "$st" .routes_age_s)" 0
status | grep -q '^routes      1000 (counted now' || kvs_fail "status text: $(status | grep routes)"
"$KVS_BUILD/tests/helpers/routes_fill" "$KVS_PIN/routes" 1500 || kvs_fail "routes_fill"
assert_eq "status: more routes" "$(jget "$(status --json)" .routes)" 1500
echo "PASS test_metrics_routes"
