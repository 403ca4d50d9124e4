#!/usr/bin/env bash
# libbpf speaks through the controller's logger: at --log-level debug its
# loading narrative is there as logfmt records (event=libbpf), at the
# default level it is not, and every line the controller writes is logfmt.
source "$(dirname "$0")/lib.sh"
kvs_setup

# Every line a logfmt record of the controller's, none of libbpf's raw text.
all_logfmt() {
	local bad
	bad=$(grep -cv '^ts=[^ ]* level=[a-z]* prog=kvspliced event=' "$1" || true)
	assert_eq "lines of $2 that are not logfmt" "$bad" 0
}

kvs_start_sim A --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --log-level debug
kill "$GW_PID"
wait "$GW_PID" 2>/dev/null
cp "$KVS_TMP/gw.log" "$KVS_TMP/debug.log"
assert_ge "libbpf records at debug" "$(grep -c 'level=debug prog=kvspliced event=libbpf msg=' "$KVS_TMP/debug.log")" 10
grep -q 'event=libbpf msg=".*created successfully' "$KVS_TMP/debug.log" ||
	kvs_fail "no libbpf map creation record at debug"
all_logfmt "$KVS_TMP/debug.log" "the debug log"

rm -f "$KVS_TMP/gw.port"
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A"
kill "$GW_PID"
wait "$GW_PID" 2>/dev/null
assert_eq "libbpf records at info" "$(grep -c 'event=libbpf' "$KVS_TMP/gw.log" || true)" 0
all_logfmt "$KVS_TMP/gw.log" "the info log"
echo "PASS test_libbpf_log"
