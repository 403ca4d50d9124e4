#!/usr/bin/env bash
# Every map the gateway pins is readable by bpftool with named fields: its
# BTF names the key or value struct and its members, and `bpftool map dump`
# prints them by name (docs/RUNBOOK.md shows these commands). The one
# exception is socks, a SOCKHASH: the kernel keeps no BTF for sockmap
# types, so its keys and values (socket cookies) print as bytes; and
# reports, a ring buffer of variable-length records (struct kvs_report)
# that the controller consumes: bpftool shows its size, not its records. The XDP
# admission maps are checked in test_admission, where they have entries.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.5
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A"
kvs_bench -n 20 -k 2 --prefixes 2 --json >/dev/null || kvs_fail "load failed"
# A slow request, so that the inflight map has an entry while we look.
kvs_bench -n 1 -k 1 -m 400 --prefixes 0 --json >/dev/null &
slow=$!
kvs_wait_for "the slow request is in the inflight map" \
	'[ "$(bpftool map dump pinned "$KVS_PIN/inflight" -j | jq length)" -ge 1 ]'

kvs_btf_named inflight kvs_inflight held_tokens .value.held_tokens
kvs_btf_named inflight kvs_req_key req_id .key.conn
kvs_btf_named backends kvs_backend outstanding_work .value.outstanding_work
kvs_btf_named backends kvs_backend addr .value.addr.port
kvs_btf_named conns kvs_conn role .value.remote.port
kvs_btf_named conns kvs_conn by_role .value.by_role.backend
kvs_btf_named routes kvs_route depth_blocks .value.depth_blocks
kvs_btf_named stats kvs_stats fast_path_frames .values[0].value.fast_path_frames
kvs_btf_named ctl_stats kvs_ctl_stats slow_frames .value.slow_frames
kvs_btf_named chain kvs_chain req_id .values[0].value.req_id
kvs_btf_named tenants kvs_tenant rewritten .value.rewritten
kvs_btf_named route_shares kvs_route_share trimmed .value.trimmed
kvs_btf_named backend_ttft kvs_ttft prefill_us .value.prefill_us
wait "$slow" || kvs_fail "slow request failed"

# socks: no BTF (SOCKHASH), but its entries dump: one per spliced socket.
[ "$(bpftool map show pinned "$KVS_PIN/socks" -j | jq .btf_id)" = null ] ||
	kvs_fail "socks has BTF now: name its fields in the runbook"
# The two dumps are taken one after the other: a client closing between
# them (the slow request's, whose FIN the controller is still handling)
# is in the first and not the second. Equal once the closes are done.
same_count() {
	socks=$(bpftool map dump pinned "$KVS_PIN/socks" -j | jq length)
	conns=$(bpftool map dump pinned "$KVS_PIN/conns" -j | jq length)
	[ "$socks" = "$conns" ]
}
kvs_wait_for "socks and conns agree" same_count
assert_eq "socks entries = conns entries" "$socks" "$conns"

# reports: the kernel's ring of decisions, 8 MiB.
r=$(bpftool map show pinned "$KVS_PIN/reports" -j)
assert_eq "reports map type" "$(jq -r .type <<<"$r")" ringbuf
assert_eq "reports ring bytes" "$(jq -r .max_entries <<<"$r")" $((8 << 20))

# chain and nest: a slot per verdict running on a CPU, and their count
# (bpf/datapath/maps.bpf.h), both pinned so that a controller taken over
# and its successor share them.
c=$(bpftool map show pinned "$KVS_PIN/chain" -j)
assert_eq "chain map type" "$(jq -r .type <<<"$c")" percpu_array
assert_eq "chain slots" "$(jq -r .max_entries <<<"$c")" 3
n=$(bpftool map show pinned "$KVS_PIN/nest" -j)
assert_eq "nest map type" "$(jq -r .type <<<"$n")" percpu_array
assert_eq "nest entries" "$(jq -r .max_entries <<<"$n")" 1
assert_eq "verdicts running now, on any CPU" \
	"$(bpftool map lookup pinned "$KVS_PIN/nest" key 0 0 0 0 -j | jq '[.formatted.values[].value] | add')" 0

# No field without a name: bpftool prints an anonymous member (a union
# in a struct, say) as the key "", which jq and operators cannot address.
for m in inflight backends conns routes stats ctl_stats chain nest tenants route_shares backend_ttft; do
	assert_eq "$m: fields bpftool names \"\"" \
		"$(bpftool map dump pinned "$KVS_PIN/$m" -j | jq '[.. | objects | keys[] | select(. == "")] | length')" 0
done

# Every pinned map is one this test or test_admission checks.
for m in "$KVS_PIN"/*; do
	case $(basename "$m") in
	inflight | backends | conns | routes | stats | ctl_stats | chain | nest | socks | reports | \
		tenants | route_shares | backend_ttft) ;;
	*) kvs_fail "pinned map $(basename "$m") is not checked here" ;;
	esac
done
echo "PASS test_bpftool_maps"
