#!/usr/bin/env bash
# Heavy load (docs/EVALUATION.md, "Heavy load (item 5)"): issue 16's
# matrix of load sweeps in virtual time, `kvsplice-bench sim --sweep` on
# 3, 7 and 16 backends for the brief's scenario (contexts), conversations
# and the public trace. Each sweep finds round robin's knee, then runs
# every policy from 0.5x the knee in steps of 0.1x until the best policy
# serves under 97% of what is offered, and says per load whether kvsplice
# is best or tied (within 2% or 5 ms) on TTFT p90 and p99.
#
#   scripts/bench-sweep.sh [BUILD [OUT]]
#   BACKENDS="3 7 16"  WORKLOADS="contexts conversations trace"
#   REQUESTS=4000 (a run; the trace has 3,993)  SEED=1
#   POLICIES=rr,sglang,llmd,dynamo,kvsplice
#   REPEAT=1 runs a load, their mean judged (--sweep-repeat; 4 for the
#   trace near saturation, where one speed is a coin toss)
#   EXTRA="..." more sim options (e.g. --sweep-step 0.2)
#   TRACE=FILE another trace in the Mooncake format for the trace workload
#   (default: the repository's; docs/EVALUATION.md, "A second public
#   trace, never tuned on")
# Writes OUT/<workload>-<backends>.json (and .log, the progress; OUT: a new
# directory under /tmp) and prints a summary line per sweep. About 8
# minutes on one core at the defaults.
set -euo pipefail

BUILD=${1:-build}
OUT=${2:-$(mktemp -d /tmp/bench-sweep.XXXXXX)}
BACKENDS=${BACKENDS:-3 7 16}
WORKLOADS=${WORKLOADS:-contexts conversations trace}
REQUESTS=${REQUESTS:-4000}
SEED=${SEED:-1}
POLICIES=${POLICIES:-rr,sglang,llmd,dynamo,kvsplice}
REPEAT=${REPEAT:-1}
EXTRA=${EXTRA:-}
TRACE=${TRACE:-$(dirname "$0")/../traces/mooncake_fast25_synthetic_trace.jsonl}
case " $WORKLOADS " in
*" trace "*) [ -r "$TRACE" ] || {
	echo "bench-sweep: cannot read the trace $TRACE" >&2
	exit 1
} ;;
esac
mkdir -p "$OUT"

for w in $WORKLOADS; do
	case $w in
	trace) work=(--trace "$TRACE") ;;
	*) work=(--workload "$w") ;;
	esac
	for b in $BACKENDS; do
		# shellcheck disable=SC2086 # EXTRA is options, split on purpose
		"$BUILD/kvsplice-bench" sim --sweep --backends "$b" --requests "$REQUESTS" \
			--seed "$SEED" --policies "$POLICIES" --sweep-repeat "$REPEAT" "${work[@]}" $EXTRA \
			--json >"$OUT/$w-$b.json" 2>"$OUT/$w-$b.log"
		# shellcheck disable=SC2086
		jq -r --arg w "$w" '"\($w) \(.backends) backends: knee \(.knee | . * 1000 | round / 1000) \(.load_unit); kvsplice best or tied at \(.kvsplice_p90_ok)/\(.judged) loads on p90, \(.kvsplice_p99_ok)/\(.judged) on p99; loses at: " + ([.loads[] | select(.saturated | not) | select(.p90 == "loses" or .p99 == "loses") | "\(.factor)x (p90 \(.p90_gap_pct | if . == null then "saturated" else "\(round)%" end), p99 \(.p99_gap_pct | if . == null then "saturated" else "\(round)%" end))"] | join(", "))' \
			"$OUT/$w-$b.json" | tee -a "$OUT/summary.txt"
	done
done
echo "bench-sweep: results in $OUT"
