#!/usr/bin/env bash
# The gateway's answer to a client's PING carries the fleet (docs/
# PROTOCOL.md, "PONG payload"): how many backends it has and how many are
# in service, and slot by slot the requests it has sent each; and
# kvsplice-bench live counts every backend of the fleet in load max/mean,
# a drained one that served nothing as 0 (issue 16, item 7: it printed
# max/mean 1.00 while a backend idled).
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.005 --id 1
kvs_start_sim B --time-scale 0.005 --id 2
kvs_start_sim C --time-scale 0.005 --id 3
a=127.0.0.1:$SIM_PORT_A b=127.0.0.1:$SIM_PORT_B c=127.0.0.1:$SIM_PORT_C
kvs_start_gw --backend "$a" --backend "$b"
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
up() { ctl backends --json | jq '[.[] | select(.state == "up")] | length'; }
# ping ASK -> "running waiting used total backend flags" of the PONG
ping() {
	"$KVS_BUILD/tests/helpers/kvs_client" "127.0.0.1:$GW_PORT" ping "$1" |
		sed -E 's/^pong running=([0-9]+) waiting=([0-9]+) kv=([0-9]+)\/([0-9]+) backend=([0-9]+) flags=([0-9]+)$/\1 \2 \3 \4 \5 \6/'
}
kvs_wait_for "both backends are up" '[ "$(up)" = 2 ]'

read -r run wait used total id flags <<<"$(ping 0)"
assert_eq "fleet PONG: backend_id" "$id" 4294967295
assert_eq "fleet PONG: flags (FLEET)" "$flags" 2
assert_eq "fleet PONG: backends the gateway has" "$total" 2
assert_eq "fleet PONG: backends in service" "$used" 2
read -r run wait used total id flags <<<"$(ping 1)"
assert_eq "slot 0 PONG: backend_id is the slot" "$id" 0
assert_eq "slot 0 PONG: flags (FLEET, in service)" "$flags" 2
read -r run wait used total id flags <<<"$(ping 3)"
assert_eq "slot 2 PONG: flags (FLEET, NOT_READY, NO_BACKEND)" "$flags" 7

# The gateway's per-slot counts match what the backends answered.
r=$(kvs_bench -n 120 -k 4 --prefixes 16 --json) || kvs_fail "bench: $r"
assert_eq "bench: fleet" "$(jget "$r" .fleet)" 2
assert_eq "bench: fleet from" "$(jget "$r" .fleet_from)" gateway
assert_eq "bench: gateway's requests, all slots" "$(jget "$r" '[.gateway_slots[].requests] | add')" 120
assert_eq "bench: gateway's per-slot counts = the backends' ENDs" \
	"$(jget "$r" '[.gateway_slots[].requests] | sort | tostring')" \
	"$(jget "$r" '[.backends[].requests] | sort | tostring')"

# Drained, B serves nothing: the bench counts it as 0.
ctl backend drain "$b" >/dev/null || kvs_fail "drain B"
read -r run wait used total id flags <<<"$(ping 0)"
assert_eq "fleet PONG, B drained: backends" "$total" 2
assert_eq "fleet PONG, B drained: in service" "$used" 1
read -r run wait used total id flags <<<"$(ping 2)"
assert_eq "slot 1 PONG, drained: flags (FLEET, NOT_READY)" "$flags" 3
kvs_wait_for "B has nothing in flight" "[ \"\$(ping 2 | cut -d' ' -f1)\" = 0 ]"
r=$(kvs_bench -n 60 -k 4 --prefixes 16 --json) || kvs_fail "bench: $r"
assert_eq "bench, B drained: backends that answered" "$(jget "$r" '.backends | length')" 1
assert_eq "bench, B drained: fleet" "$(jget "$r" .fleet)" 2
assert_eq "bench, B drained: idle backends" "$(jget "$r" .idle_backends)" 1
assert_eq "bench, B drained: in service" "$(jget "$r" .fleet_in_service)" 1
assert_eq "bench, B drained: load max/mean" "$(jget "$r" .load_max_over_mean)" 2
assert_eq "bench, B drained: gateway's requests to B" \
	"$(jget "$r" '.gateway_slots[] | select(.slot == 1) | .requests')" 0
out=$(kvs_bench -n 20 -k 2 --prefixes 4)
grep -q "^fleet         2 backends (said by the gateway), 1 served nothing" <<<"$out" ||
	kvs_fail "bench text: $out"
echo "ok: the bench's text names the idle backend"
# --fleet overrides what the gateway says.
r=$(kvs_bench -n 20 -k 2 --prefixes 4 --fleet 4 --json) || kvs_fail "bench: $r"
assert_eq "bench --fleet 4: fleet" "$(jget "$r" .fleet)" 4
assert_eq "bench --fleet 4: from" "$(jget "$r" .fleet_from)" option

# Undrained and a backend added: three, all in service.
ctl backend undrain "$b" >/dev/null || kvs_fail "undrain B"
ctl backend add "$c" >/dev/null || kvs_fail "add C"
kvs_wait_for "three backends are up" '[ "$(up)" = 3 ]'
read -r run wait used total id flags <<<"$(ping 0)"
assert_eq "fleet PONG after the add: backends" "$total" 3
assert_eq "fleet PONG after the add: in service" "$used" 3
r=$(kvs_bench -n 30 -k 2 --prefixes 4 --json) || kvs_fail "bench: $r"
assert_eq "bench after the add: fleet" "$(jget "$r" .fleet)" 3
assert_eq "bench after the add: slots the gateway reported" "$(jget "$r" '.gateway_slots | length')" 3

# Without a gateway, the targets are the backends: they count themselves.
r=$("$KVS_BUILD/kvsplice-bench" live --connect "$a" --connect "$b" --connect "$c" -n 30 -k 3 \
	--quiet --json) || kvs_fail "bench direct: $r"
assert_eq "bench direct: fleet" "$(jget "$r" .fleet)" 3
assert_eq "bench direct: from" "$(jget "$r" .fleet_from)" backends
echo "PASS"
