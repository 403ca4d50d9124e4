#!/usr/bin/env bash
# The data path switched at run time, both ways, under load: `kvsplicectl
# datapath user` sends new clients through the controller (no BPF on their
# bytes) while the clients already connected stay spliced by the kernel;
# `datapath kernel` sends new ones back to the kernel while the userspace
# clients finish where they are. No request fails or is answered wrongly on
# either path, each path's counters show its own requests, and the maps
# say which path each connection is on.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_sim B --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
assert_eq "data path at start" "$(jget "$(ctl datapath --json)" .datapath)" kernel

# Kernel-path clients streaming over 4 connections until the test is done
# with them (--until: a bench of a fixed length ended before the switch on
# a busy machine).
kvs_bench --fleet 2 -n 100000 --rate 100 -k 4 --prefixes 8 --prefix-tokens 512 --salt 1 --json \
	--until "$KVS_TMP/stop" >"$KVS_TMP/k1.json" &
k1=$!
clients_on() { # PATH: client connections the maps put on it
	ctl conns --json | jq "[.[] | select(.role == \"client\" and .path == \"$1\")] | length"
}
# All four connected before the switch (on a busy machine that takes a
# while). --fleet 2 above: no PING connection of the bench's own to count.
kvs_wait_for "the kernel-path clients are connected" '[ "$(clients_on kernel)" -ge 4 ]'
r=$(ctl datapath user --json) || kvs_fail "datapath user: $r"
assert_eq "data path after the switch" "$(jget "$r" .datapath)" user
assert_eq "kernel-path clients still connected" "$(jget "$r" .clients.kernel)" 4

# New clients now take the userspace path, beside the kernel's.
u0=$(jget "$(kvs_stats)" .controller.user_path_frames)
kvs_bench --fleet 2 -n 100000 --rate 100 -k 3 --prefixes 8 --prefix-tokens 512 --salt 2 --json \
	--until "$KVS_TMP/stop" >"$KVS_TMP/u1.json" &
u1=$!
kvs_wait_for "the userspace-path clients are connected" '[ "$(clients_on user)" -ge 3 ]'
c=$(ctl conns --json)
assert_eq "clients on the userspace path (conns)" \
	"$(jq '[.[] | select(.role == "client" and .path == "user")] | length' <<<"$c")" 3
assert_ge "clients still on the kernel path (conns)" \
	"$(jq '[.[] | select(.role == "client" and .path == "kernel")] | length' <<<"$c")" 4
assert_eq "userspace upstream connections (2 backends x pool 2)" \
	"$(jq '[.[] | select(.role == "upstream" and .path == "user" and .state == "ESTABLISHED")] | length' <<<"$c")" 4

# And back, while both are busy.
r=$(ctl datapath kernel --json) || kvs_fail "datapath kernel: $r"
assert_eq "userspace clients still connected" "$(jget "$r" .clients.user)" 3
kvs_bench --fleet 2 -n 200 -k 2 --prefixes 8 --prefix-tokens 512 --salt 3 --json >"$KVS_TMP/k2.json" ||
	kvs_fail "kernel path after switching back: $(cat "$KVS_TMP/k2.json")"

# Enough of the userspace path's for its hit rate to mean something.
kvs_wait_for "150 requests on the userspace path" \
	'[ $(($(jget "$(kvs_stats)" .controller.user_path_frames) - u0)) -ge 150 ]' 120
touch "$KVS_TMP/stop"
for f in k1 u1; do
	wait "${!f}" || kvs_fail "$f: $(cat "$KVS_TMP/$f.json")"
done
for f in k1 u1 k2; do
	j=$(cat "$KVS_TMP/$f.json")
	assert_eq "$f: requests answered" "$(jget "$j" .ok)" "$(jget "$j" .requests)"
	assert_eq "$f: errors, mismatches, lost" \
		"$(jget "$j" '[.errors, .mismatches, .lost] | add')" 0
done
u=$(($(jget "$(kvs_stats)" .controller.user_path_frames) - u0))
assert_eq "requests the userspace path routed" "$u" "$(jget "$(cat "$KVS_TMP/u1.json")" .requests)"
# Prefix-aware there too: 8 prefixes of 512 tokens shared by the requests
# of ~580 tokens; routed by the controller's index, most of each prompt is
# a cache hit (at least 60%: only the first sight of each prefix misses).
assert_ge "hit rate on the userspace path, % of prompt tokens" \
	"$(jget "$(cat "$KVS_TMP/u1.json")" '.hit_rate * 100 | floor')" 60
out=$(ctl datapath sideways 2>&1) && kvs_fail "datapath sideways accepted"
grep -q "not kernel or user" <<<"$out" || kvs_fail "datapath sideways: $out"
echo "PASS test_datapath_switch"
