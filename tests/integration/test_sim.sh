#!/usr/bin/env bash
# The discrete-event simulator: deterministic for a seed (the same JSON,
# byte for byte), different for another seed, every request completed for
# every policy, and no policy above the ceiling one fleet-sized LRU cache
# reaches on the same requests (with a point of slack: the policies may
# keep a context a fleet LRU would have let go); where the hits went adds
# up (the anatomy: what the fleet held, what the chosen backend held).
set -euo pipefail
B=${KVS_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
fail() { echo "FAIL: $*" >&2; exit 1; }

args=(sim --requests 3000 --rate 14 --kv-blocks 20000 --json)
a=$("$B/kvsplice-bench" "${args[@]}" --seed 7)
b=$("$B/kvsplice-bench" "${args[@]}" --seed 7)
c=$("$B/kvsplice-bench" "${args[@]}" --seed 8)
[ "$a" = "$b" ] || fail "same seed, different results"
echo "ok: seed 7 twice gives the same report"
[ "$a" != "$c" ] || fail "seeds 7 and 8 gave the same report"
echo "ok: seed 8 gives another"
# Any 64-bit seed, and the JSON says it exactly, to any reader: as a
# string (a number past 2^63 was refused by jansson, "too big integer",
# and past 2^53 jq read it rounded). --sweep's report too.
for s in 9223372036854775808 18446744073709551615; do
	for mode in "" --sweep; do
		r=$("$B/kvsplice-bench" sim $mode --requests 200 --backends 2 --policies rr,kvsplice \
			--seed "$s" --json 2>/dev/null) || fail "--seed $s $mode refused"
		[ "$(jq -r .seed <<<"$r")" = "$s" ] || fail "--seed $s $mode: JSON says $(jq .seed <<<"$r")"
		python3 -c 'import json, sys; assert json.loads(sys.argv[1])["seed"] == sys.argv[2]' \
			"$r" "$s" || fail "--seed $s $mode: python reads another seed"
	done
done
echo "ok: seeds up to 2^64-1, said exactly in the JSON (sim and --sweep)"

[ "$(jq '.policies | length' <<<"$a")" = 6 ] || fail "want 6 policies"
[ "$(jq '[.policies[].requests] | unique' <<<"$a")" = "[
  3000
]" ] || fail "not every request completed: $(jq -c '[.policies[].requests]' <<<"$a")"
echo "ok: every policy completed all 3000 requests"
over=$(jq '.fleet_lru_hit_rate as $c | [.policies[] | select(.hit_rate > $c + 0.01)] | length' \
	<<<"$a")
[ "$over" = 0 ] || fail "a policy beat the fleet LRU ceiling by more than a point"
echo "ok: no policy above the fleet LRU ceiling ($(jq .fleet_lru_hit_rate <<<"$a"))"
# The report's arithmetic: each change is against rr, from the figures shown.
bad=$(jq '.policies[0] as $rr | [.policies[] | select(
	((.ttft_p50_ms - $rr.ttft_p50_ms) / $rr.ttft_p50_ms * 100 - .vs_baseline.ttft_p50_pct
	  | fabs) > 0.06 or
	((.ttft_p90_ms - $rr.ttft_p90_ms) / $rr.ttft_p90_ms * 100 - .vs_baseline.ttft_p90_pct
	  | fabs) > 0.06 or
	(((.hit_rate - $rr.hit_rate) * 100 - .vs_baseline.hit_rate_points) | fabs) > 0.011 or
	(([.backend_requests[]] | add) != .requests))] | length' <<<"$a")
[ "$(jq -r .baseline <<<"$a")" = rr ] || fail "baseline is not rr"
[ "$bad" = 0 ] || fail "changes against rr or per-backend loads do not add up"
echo "ok: changes against rr and per-backend loads add up"
# Where the hits went: no policy's chosen backend held more than the
# fleet did; round robin, which ignores the caches, loses hits to routing
# and kvsplice (which reads them) loses less; kvsplice's verdicts account
# for every request.
bad=$(jq '[.policies[] | select(.anatomy.held_by_chosen > .anatomy.held_anywhere)] | length' <<<"$a")
[ "$bad" = 0 ] || fail "a chosen backend held more than the fleet"
rr_lost=$(jq '.policies[] | select(.name == "rr") | .anatomy.lost_to_routing' <<<"$a")
kv_lost=$(jq '.policies[] | select(.name == "kvsplice") | .anatomy.lost_to_routing' <<<"$a")
jq -e --argjson r "$rr_lost" --argjson k "$kv_lost" -n '$r > 0.05 and $k < $r / 4' >/dev/null ||
	fail "lost to routing: rr $rr_lost, kvsplice $kv_lost"
[ "$(jq '.policies[] | select(.name == "kvsplice") | [.anatomy.by_verdict[].requests] | add' \
	<<<"$a")" = 3000 ] || fail "kvsplice's verdicts do not add up to the requests"
echo "ok: lost to routing: rr $rr_lost, kvsplice $kv_lost; kvsplice's verdicts add up"

# Trace replay: four requests, the last three sharing the first's two
# 512-token blocks; replayed one at a time (1 backend), all but the first
# find them cached; a malformed line is refused with its line number.
t=$(mktemp)
trap 'rm -f "$t"' EXIT
# (tests/fixtures/trace4.jsonl; test_live_trace.sh replays it live)
r=$("$B/kvsplice-bench" sim --trace "$(dirname "$0")/../fixtures/trace4.jsonl" --backends 1 --policies rr --json)
[ "$(jq .requests <<<"$r")" = 4 ] || fail "trace: want 4 requests, got $(jq .requests <<<"$r")"
# cached: 0, 1024, 1008 (a full hit recomputes its last block), 1024 of 5224 prompt tokens
hit=$(jq '.policies[0].hit_rate' <<<"$r")
awk -v h="$hit" 'BEGIN { d = h - 3056 / 5224; exit !(d < 0.0001 && d > -0.0001) }' ||
	fail "trace: hit rate $hit, want 3056/5224"
echo "ok: a 4-request trace replays with the sharing its block ids describe (hit $hit)"
# A trace's path is said in the JSON as it is, whatever it holds (it was
# printed unescaped: a quote or a backslash broke the document).
qd=$(mktemp -d)
q="$qd/a \"quoted\" \\ path.jsonl"
cp "$(dirname "$0")/../fixtures/trace4.jsonl" "$q"
for mode in "" --sweep; do
	r=$("$B/kvsplice-bench" sim $mode --trace "$q" --backends 1 --policies rr --json 2>/dev/null) ||
		fail "sim $mode --trace with a quote in its path failed"
	[ "$(jq -r .trace <<<"$r")" = "$q" ] || fail "sim $mode: the JSON's trace is $(jq .trace <<<"$r")"
done
rm -rf "$qd"
echo "ok: a trace path with quotes and a backslash is said exactly in the JSON (sim and --sweep)"
echo '{"timestamp": 0, "input_length": 10}' >"$t"
if out=$("$B/kvsplice-bench" sim --trace "$t" 2>&1); then fail "a malformed trace was accepted"; fi
grep -q ":1: not a trace record" <<<"$out" || fail "unexpected error: $out"
echo "ok: a malformed trace is refused, with its line"

# --plot: TTFT CDFs and load bars drawn by gnuplot, one series per policy.
pd=$(mktemp -d)
trap 'rm -f "$t"; rm -rf "$pd"' EXIT
"$B/kvsplice-bench" sim --requests 500 --rate 14 --policies rr,kvsplice --plot "$pd" >/dev/null ||
	fail "sim --plot failed"
for f in ttft_cdf.svg ttft_cdf.png load.svg load.png ttft_cdf.dat load.dat plot.gp; do
	[ -s "$pd/$f" ] || fail "--plot did not write $f"
done
grep -q "<svg" "$pd/ttft_cdf.svg" || fail "ttft_cdf.svg is not SVG"
grep -q ">kvsplice<" "$pd/ttft_cdf.svg" || fail "no kvsplice series in the CDF"
[ "$(grep -c '^# rr$\|^# kvsplice$' "$pd/ttft_cdf.dat")" = 2 ] || fail "want 2 CDF series"
# the last point of each CDF is at fraction 1
[ "$(awk 'NF == 2 && $2 == 1.000000' "$pd/ttft_cdf.dat" | wc -l)" -ge 2 ] ||
	fail "a CDF does not reach 1"
[ "$(awk 'NR > 1 { s += $2 } END { print s }' "$pd/load.dat")" = 500 ] ||
	fail "rr's load bars do not add up to 500 requests"
echo "ok: --plot writes CDFs and load bars (SVG, PNG) and their data"

# Generated workloads, one backend, arrivals far apart: hit rates by hand.
one=(sim --backends 1 --policies rr --rate 0.01 --json)
close_to() { awk -v h="$1" -v w="$2" 'BEGIN { d = h - w; exit !(d < 0.0001 && d > -0.0001) }'; }
# 2 groups x 3 prompts of 1,024 shared + 256 own: all but each group's first
# find the 1,024 cached.
r=$("$B/kvsplice-bench" "${one[@]}" --workload groups --groups 2 --per-group 3 \
	--system-tokens 1024 --question-tokens 256)
[ "$(jq .requests <<<"$r")" = 6 ] || fail "groups: want 6 requests, got $(jq .requests <<<"$r")"
hit=$(jq '.policies[0].hit_rate' <<<"$r")
close_to "$hit" "$(awk 'BEGIN { print 4096 / 7680 }')" || fail "groups: hit $hit, want 4096/7680"
echo "ok: groups: each group's later prompts find its system prompt cached (hit $hit)"
# One conversation, 3 turns over a 256-token system prompt, 256 tokens a
# turn: prompts of 512, 768, 1,024 tokens, each finding the one before.
r=$("$B/kvsplice-bench" "${one[@]}" --workload conversations --conversations 1 --requests 3 \
	--system-tokens 256 --turn-tokens 256)
hit=$(jq '.policies[0].hit_rate' <<<"$r")
close_to "$hit" "$(awk 'BEGIN { print 1280 / 2304 }')" ||
	fail "conversations: hit $hit, want 1280/2304"
echo "ok: conversations: each turn finds the conversation so far cached (hit $hit)"
r=$("$B/kvsplice-bench" "${one[@]}" --workload unique --requests 5)
[ "$(jq '.policies[0].hit_rate' <<<"$r")" = 0 ] || fail "unique: something was cached"
echo "ok: unique: nothing cached"
if out=$("$B/kvsplice-bench" sim --workload nope 2>&1); then fail "--workload nope accepted"; fi
grep -q "is not contexts, groups" <<<"$out" || fail "unexpected error: $out"
echo "ok: an unknown workload is refused"
# Prompts larger than a backend's whole KV cache: refused up front, as a
# server refuses them (it once waited for ever and grew without bound).
# The memory cap catches the growth; an ASan build reserves terabytes of
# shadow memory at start and cannot run under it (the timeout still does).
vcap=4000000
grep -q __asan_init <<<"$(nm -D "$B/kvsplice-bench" 2>/dev/null)" && vcap=unlimited
rc=0
out=$( (ulimit -v "$vcap"; timeout 60 "$B/kvsplice-bench" sim --requests 20 --backends 2 \
	--kv-blocks 64) 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "a workload no backend can hold: exit $rc, want 2: $out"
grep -q "needs 508 KV blocks .*more than a backend holds (--kv-blocks 64)" <<<"$out" ||
	fail "unexpected message: $out"
echo "ok: a prompt larger than a backend's KV cache is refused, naming the request"
# --dump: every request of every policy, one CSV line each; its TTFTs
# are the ones the report's percentiles were taken from.
d=$(mktemp)
j=$("$B/kvsplice-bench" sim --requests 500 --rate 14 --kv-blocks 20000 --policies rr,kvsplice \
	--json --dump "$d")
python3 - "$d" "$j" <<'PY' || fail "--dump does not match the report"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rep = {p["name"]: p for p in json.loads(sys.argv[2])["policies"]}
assert len(rows) == 1000, len(rows)
for pol in ("rr", "kvsplice"):
    mine = [r for r in rows if r["policy"] == pol]
    assert sorted(int(r["request"]) for r in mine) == list(range(500))
    t = sorted(float(r["ttft_ms"]) for r in mine)
    k = 0.9 * (len(t) - 1)
    p90 = t[int(k)] + (t[min(int(k) + 1, len(t) - 1)] - t[int(k)]) * (k - int(k))
    assert abs(p90 - rep[pol]["ttft_p90_ms"]) < 0.01, (pol, p90, rep[pol]["ttft_p90_ms"])
    whys = {r["why"] for r in mine}
    assert whys == {"-"} if pol == "rr" else "-" not in whys and whys <= {
        "key", "hint", "prefix", "kept", "cold", "shallow", "spill", "stale"}, whys
PY
rm -f "$d"
echo "ok: --dump lists every request, TTFTs as the report has them"
out=$("$B/kvsplice-bench" sim --sweep --dump /dev/null 2>&1) && fail "--dump with --sweep accepted"
grep -q "not a --sweep" <<<"$out" || fail "--dump with --sweep: $out"
echo "PASS test_sim"
