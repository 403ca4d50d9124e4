#!/usr/bin/env bash
# Each tenant's share of the routes map (--tenant-routes): the issue's
# probe had one connection's flood of unique prompts evict a victim's
# routes across salts (fast-path hits 5/5 -> 0/5). Here a flooder sends
# far more new prompts than its share holds: its routes stop at its
# share (the requests that could teach none counted), every one of its requests is still
# answered, the victim's routes all stay, and the flooder's least used
# routes are trimmed so that it learns again. With --tenant-routes off the
# flooder's routes are bounded by nothing but the map.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
SHARE=48 # trimmed from 45 (share - share/16) to 36 (3/4)
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --tenant-routes $SHARE \
	--tenant-source 127.0.0.2=111 --tenant-source 127.0.0.3=222 --metrics 127.0.0.1:0
MPORT=$(grep -o 'event=metrics_listening addr=[^ ]* port=[0-9]*' "$KVS_TMP/gw.log" | grep -o '[0-9]*$')
send() { kvs_send_prompts "$@"; }
share() { kvs_route_share "$@"; }
routes_of() { kvs_routes_of "$@"; }

# Written before the gateway listens: its first clients' routes, too, are
# within their shares (written on the first tick, a burst of them went in
# unlimited on a busy machine).
assert_eq "tenant 1's share, as soon as the gateway listens" "$(share 1 share)" $SHARE
assert_eq "unbound clients' share (entry 0)" "$(share 0 share)" $SHARE
assert_eq "no share past the tenants (entry 3)" "$(share 3 share)" 0

assert_eq "victim: requests answered" "$(send 127.0.0.2 victim 4)" 4
assert_eq "victim: its routes in the map" "$(routes_of 1)" 16
assert_eq "victim: its share's count" "$(share 1 routes)" 16

# The flood: 100 new prompts, 400 routes' worth, ten times its share.
assert_eq "flooder: every request answered" "$(send 127.0.0.3 flood 100)" 100
# (the kernel checks once a request: one seeing room adds its 4)
assert_le "flooder: its routes in the map, at most its share + 3" "$(routes_of 2)" $((SHARE + 3))
assert_ge "flooder: requests refused a route" "$(share 2 refused)" 50
assert_eq "victim: every route still there after the flood" "$(routes_of 1)" 16
assert_eq "victim: nothing refused" "$(share 1 refused)" 0

# Near its share, the flooder's least used routes go (to 3/4 of it) and it
# learns new ones again; the victim, far from its share, keeps all of its.
# (A trim in the flood's last moments may leave it between 3/4 and near
# full, where nothing trims: a few more prompts fill it again.)
kvs_wait_for "the flooder trimmed to 3/4 of its share" \
	'c=$(routes_of 2); [ "$c" -le $((SHARE * 3 / 4)) ] ||
	 { [ "$c" -lt $((SHARE - SHARE / 16)) ] && send 127.0.0.3 "top$RANDOM" 3 >/dev/null; false; }'
assert_ge "flooder: routes trimmed" "$(share 2 trimmed)" 1
before=$(routes_of 2)
assert_eq "flooder: requests after the trim" "$(send 127.0.0.3 again 2)" 2
assert_eq "flooder: learns again after the trim (8 routes)" "$(routes_of 2)" $((before + 8))
assert_eq "victim: every route still there after the trim" "$(routes_of 1)" 16
kvs_wait_for "the log line" 'grep -q "event=routes_trimmed" "$KVS_TMP/gw.log"'

# The count matches the map after the controller's recount, and the
# metrics say the same.
assert_eq "flooder: its count against the map" "$(share 2 routes)" "$(routes_of 2)"
m=$(curl -s "http://127.0.0.1:$MPORT/metrics")
assert_eq "metrics: victim's routes" "$(grep '^kvsplice_tenant_routes{tenant="1"}' <<<"$m" | cut -d' ' -f2)" 16
assert_eq "metrics: flooder's share" "$(grep '^kvsplice_tenant_route_share{tenant="2"}' <<<"$m" | cut -d' ' -f2)" $SHARE
assert_eq "metrics: flooder's refusals" \
	"$(grep '^kvsplice_tenant_routes_refused_total{tenant="2"}' <<<"$m" | cut -d' ' -f2)" "$(share 2 refused)"
stop_gw() { kill "$GW_PID" && wait "$GW_PID" || true; }
stop_gw

# The controller's installs (--kernel-place no: it decides every new
# prompt) keep to the share too, all of a request's routes or none.
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --tenant-routes $SHARE --kernel-place no \
	--tenant-source 127.0.0.2=111 --tenant-source 127.0.0.3=222
assert_eq "controller: tenant 2's share, as soon as the gateway listens" "$(share 2 share)" $SHARE
assert_eq "controller: victim answered" "$(send 127.0.0.2 cvictim 4)" 4
assert_eq "controller: flooder answered" "$(send 127.0.0.3 cflood 40)" 40
assert_le "controller: the flooder's routes, within its share" "$(routes_of 2)" $SHARE
assert_ge "controller: requests refused a route" "$(share 2 refused)" 20
assert_eq "controller: the victim's routes" "$(routes_of 1)" 16
stop_gw

# Without shares the flood is bounded by nothing but the map.
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --tenant-routes off \
	--tenant-source 127.0.0.2=111 --tenant-source 127.0.0.3=222
assert_eq "no shares: flooder answered" "$(send 127.0.0.3 flood2 100)" 100
assert_ge "no shares: the flooder's routes, unbounded" "$(routes_of 2)" 400
assert_eq "no shares: no share, nothing counted" "$(share 2 share)/$(share 2 routes)" 0/0
stop_gw

# Shares that cannot fit are refused at start, saying how many would.
out=$("$KVS_BUILD/kvspliced" --pin-dir "$KVS_PIN" --listen 127.0.0.1:0 \
	--backend "127.0.0.1:$SIM_PORT_A" --tenant-routes 200000 \
	--tenant-source 10.0.0.0/8=1 2>&1) && kvs_fail "shares too big were accepted"
grep -q "event=tenant_routes_too_many.*at most [0-9]* each" <<<"$out" ||
	kvs_fail "tenant-routes error: $out"
out=$("$KVS_BUILD/kvspliced" --tenant-routes lots --backend 127.0.0.1:1 2>&1) &&
	kvs_fail "--tenant-routes lots was accepted"
grep -q "is not auto, off or a number" <<<"$out" || kvs_fail "tenant-routes parse error: $out"
echo "PASS test_tenant_routes"
