#!/usr/bin/env bash
# Where BPF is not permitted (here: root without CAP_BPF, CAP_SYS_ADMIN and
# CAP_PERFMON, as in a locked-down container), kvspliced --datapath user
# still runs: the userspace path needs no BPF. It says so in its log and in
# `kvsplicectl status`, serves prefix-aware as on the kernel's path, refuses
# `datapath kernel` with the reason, and a start on the kernel path fails
# with a message instead of half-running.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_sim B --time-scale 0.01
# setpriv execs the program: $! is the gateway's own pid.
NOBPF=(setpriv --bounding-set -bpf,-sys_admin,-perfmon --inh-caps -bpf,-sys_admin,-perfmon --)

if "${NOBPF[@]}" "$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --pin-dir "$KVS_PIN" \
	--backend "127.0.0.1:$SIM_PORT_A" 2>"$KVS_TMP/kernel.log"; then
	kvs_fail "the kernel path started without BPF"
fi
grep -q "event=bpf_load_failed" "$KVS_TMP/kernel.log" || kvs_fail "no reason: $(tail -3 "$KVS_TMP/kernel.log")"
echo "ok: the kernel path refuses to start without BPF, and says why"

"${NOBPF[@]}" "$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$KVS_TMP/gw.port" \
	--pin-dir "$KVS_PIN" --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--datapath user 2>"$KVS_TMP/gw.log" &
GW_PID=$!
KVS_PIDS+=($GW_PID)
kvs_wait_file "$KVS_TMP/gw.port"
GW_PORT=$(cat "$KVS_TMP/gw.port")
[ "$(awk '/^CapEff/ { print $2 }' "/proc/$GW_PID/status")" != 000001ffffffffff ] ||
	kvs_fail "the gateway runs with every capability"
grep -q "event=bpf_unavailable" "$KVS_TMP/gw.log" || kvs_fail "no bpf_unavailable line"

out=$(kvs_bench -n 300 -k 4 --prefixes 8 --prefix-tokens 512 --json) || kvs_fail "requests: $out"
assert_eq "requests answered without BPF" "$(jget "$out" .ok)" 300
assert_ge "hit rate without BPF, % of prompt tokens" "$(jget "$out" '.hit_rate * 100 | floor')" 60
assert_eq "backends that served" "$(jget "$out" '.backends | length')" 2
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
s=$(ctl status --json)
assert_eq "status: bpf" "$(jget "$s" .bpf)" false
assert_eq "status: requests on the userspace path" "$(jget "$s" .requests.user)" 300
out=$(ctl datapath kernel 2>&1) && kvs_fail "datapath kernel accepted without BPF"
grep -q "BPF could not be loaded" <<<"$out" || kvs_fail "datapath kernel: $out"
ctl backend drain "127.0.0.1:$SIM_PORT_B" >/dev/null || kvs_fail "drain without BPF"
out=$(kvs_bench -n 50 -k 2 --prefixes 4 --salt 9 --json) || kvs_fail "after the drain: $out"
assert_eq "backends serving after B drained" "$(jget "$out" '.backends | length')" 1
echo "PASS test_datapath_nobpf"
