#!/usr/bin/env bash
# kvsplice_routes after the tenants' recount trimmed a share: the count
# the scrape reuses (up to 10 s old) is the map's after the trim, not the
# walk's before it. Before, the gauge kept the trimmed routes for up to
# 10 s (until the next count), as if the trim had not happened.
# Unbound clients' share (tenant 0) is 1000 routes; tests/helpers/
# routes_fill puts 1000 of tenant 0 in the map behind the controller's
# back; the recount (within 10 s) finds the share full, trims it to 750.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --metrics 127.0.0.1:0 \
	--tenant-routes 1000 --tenant-source 127.0.0.2=111
MPORT=$(grep -o 'event=metrics_listening addr=[^ ]* port=[0-9]*' "$KVS_TMP/gw.log" | grep -o '[0-9]*$')
[ -n "$MPORT" ] || kvs_fail "no metrics_listening line"
metric() { curl -s "http://127.0.0.1:$MPORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
in_map() { bpftool map dump pinned "$KVS_PIN/routes" -j | jq length; }

kvs_wait_for "the shares applied" 'grep -q "event=route_shares" "$KVS_TMP/gw.log"'
"$KVS_BUILD/tests/helpers/routes_fill" "$KVS_PIN/routes" 1000 || kvs_fail "routes_fill"
kvs_wait_for "the share trimmed" 'grep -q "event=routes_trimmed" "$KVS_TMP/gw.log"' 40
assert_eq "routes in the map after the trim" "$(in_map)" 750
assert_eq "kvsplice_routes after the trim" "$(metric kvsplice_routes)" 750
echo "PASS test_metrics_routes_trim"
