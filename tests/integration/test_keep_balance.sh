#!/usr/bin/env bash
# --keep-balance reaches the kernel: the verdict's keep bound (include/
# kvsplice/place.h, kvs_place_keep) is a constant of its read-only data,
# set before load, and read here from the loaded program itself (the one
# using this gateway's pinned routes map), not from the controller's word.
# A bound under the mean is refused by name.
source "$(dirname "$0")/lib.sh"
kvs_setup

# The loaded verdict's cfg_keep_balance, in 1/1024 of the mean.
kernel_keep_balance() {
	local routes ids m
	routes=$(bpftool map show pinned "$KVS_PIN/routes" -j | jq .id)
	ids=$(bpftool prog show -j | jq -r --argjson r "$routes" \
		'[.[] | select(.name == "kvs_verdict" and ((.map_ids // []) | index($r)))][0].map_ids[]')
	for m in $ids; do
		case $(bpftool map show id "$m" -j | jq -r .name) in
		*.rodata)
			bpftool map dump id "$m" -j |
				jq '[.. | objects | select(has("cfg_keep_balance"))][0].cfg_keep_balance'
			return
			;;
		esac
	done
	echo none
}

kvs_start_sim A --time-scale 0.01
kvs_start_sim B --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"
assert_eq "the default keep bound, in the kernel" "$(kernel_keep_balance)" 2048
grep -q "keep_balance=2.00" "$KVS_TMP/gw.log" || kvs_fail "not in the log: $(cat "$KVS_TMP/gw.log")"
kill "$GW_PID"
wait "$GW_PID" || true

kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--keep-balance 3
assert_eq "--keep-balance 3, in the kernel" "$(kernel_keep_balance)" 3072
out=$(kvs_bench -n 4 -k 1 --prefixes 2 --json) || kvs_fail "requests failed: $out"
kill "$GW_PID"
wait "$GW_PID" || true

if "$KVS_BUILD/kvspliced" --backend "127.0.0.1:$SIM_PORT_A" --pin-dir "$KVS_PIN" \
	--keep-balance 0.5 2>"$KVS_TMP/bad.log"; then
	kvs_fail "--keep-balance 0.5 accepted"
fi
grep -q "keep-balance" "$KVS_TMP/bad.log" || kvs_fail "the refusal does not name it: $(cat "$KVS_TMP/bad.log")"
echo "PASS test_keep_balance"
