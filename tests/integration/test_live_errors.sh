#!/usr/bin/env bash
# kvsplice-bench live on an overloaded gateway: the requests' ERRORs are
# printed one by one only at first (20 of each code), then counted, a line
# a second, so that a fleet that answers thousands busy does not bury
# stderr (a trace replayed too fast once printed 1,100 busy lines). Every
# error is still in the counts: the lines shown and counted add up to the
# summary's.
source "$(dirname "$0")/lib.sh"
kvs_setup

# Slow (a request takes about a second), so that the 4 taken are still
# in flight when the other 96 arrive, however busy the machine.
kvs_start_sim A --time-scale 10
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --max-client-inflight 4
# One connection, 100 requests at once: 4 are taken, the others are busy.
set +e
out=$(kvs_bench -n 100 -k 1 -d 100 --prefixes 4 --json 2>"$KVS_TMP/bench.err")
rc=$?
set -e
assert_eq "bench exit status with errors" "$rc" 1
busy=$(jget "$out" '.errors_by_code.busy')
assert_ge "busy answers (more than are printed)" "$busy" 40
shown=$(grep -c ": error busy:" "$KVS_TMP/bench.err" || true)
assert_eq "busy errors printed one by one" "$shown" 20
grep -q "more busy errors are counted, not shown" "$KVS_TMP/bench.err" ||
	kvs_fail "no word that the rest are counted: $(tail -3 "$KVS_TMP/bench.err")"
counted=$(awk '/ more busy errors \(/ { n += $(NF - 6) } END { print n + 0 }' "$KVS_TMP/bench.err")
assert_eq "busy errors printed + counted" "$((shown + counted))" "$busy"
assert_le "stderr lines" "$(wc -l <"$KVS_TMP/bench.err")" 30
echo "PASS test_live_errors"
