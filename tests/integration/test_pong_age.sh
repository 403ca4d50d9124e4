#!/usr/bin/env bash
# kvsplicectl backends --json says how old each backend's last PONG report
# is (pong.age_s): never a wrapped 2^64 ns (1.8e10 s) for a report the
# gateway wrote while kvsplicectl was reading, a report younger than the
# clock reading the age is taken from (test_kv_reports once read one).
# That race is stood for deterministically: the test stamps the report an
# hour ahead (bpftool rewrites the backends map entry, at_ns found by its
# value in the bytes), so it is newer than any reading; it reads as 0.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.005
# one health check at start, the next in an hour: nothing rewrites the report
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --health-interval-ms 3600000
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
kvs_wait_for "A's first PONG report" \
	'[ "$(ctl backends --json | jq ".[0].pong.age_s >= 0")" = true ]'
idx=$(ctl backends --json | jq .[0].index)
m=$KVS_PIN/backends
key=$(printf '%d %d %d %d' $((idx & 255)) $((idx >> 8 & 255)) $((idx >> 16 & 255)) $((idx >> 24)))
entry=$(bpftool map lookup pinned "$m" key $key -j)
at=$(jq -r '.formatted.value.report.at_ns' <<<"$entry")
[ "$at" -gt 0 ] || kvs_fail "no at_ns in bpftool's view of the entry: $entry"
# at_ns's 8 bytes, little-endian, as bpftool writes them (0x..), old and new
le() { for i in 0 1 2 3 4 5 6 7; do printf '0x%02x ' $(($1 >> (8 * i) & 255)); done; }
old=$(le "$at")
new=$(le $((at + 3600000000000)))
value=$(jq -r '.value | join(" ")' <<<"$entry")
value=$(sed 's/0x\([0-9a-f]\)\b/0x0\1/g' <<<"$value")" " # 0x0 -> 0x00, a trailing blank
[ "$(grep -o "$old" <<<"$value" | wc -l)" = 1 ] ||
	kvs_fail "at_ns ($at: $old) is not found once in the entry: $value"
# shellcheck disable=SC2086 # the bytes, one argument each
bpftool map update pinned "$m" key $key value ${value/"$old"/"$new"} ||
	kvs_fail "bpftool could not rewrite the entry"
assert_eq "the report's stamp, as bpftool reads it back" \
	"$(bpftool map lookup pinned "$m" key $key -j | jq -r .formatted.value.report.at_ns)" \
	$((at + 3600000000000))
age=$(ctl backends --json | jq .[0].pong.age_s)
assert_eq "the age of a report newer than the reading (s)" "$age" 0
echo "PASS test_pong_age"
