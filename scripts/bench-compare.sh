#!/usr/bin/env bash
# Two builds side by side, alternately in one sitting (this machine's speed
# drifts within minutes: compare only figures taken together): the policy's
# decisions per second, the live slow path, the data path, the fleet in
# virtual time. Prints each build's range over the rounds.
#
#   scripts/bench-compare.sh BUILD_A BUILD_B    (root; docs/EVALUATION.md,
#                                                "The reshape of 2026-12-01")
#   ROUNDS (3), DECISIONS_ARGS (""), REQUESTS (3000, the slow path's),
#   DATAPATH_ARGS ("--configs direct,kernel,user --sizes 1024,32768
#   --seconds 2"), OUT (a new directory under /tmp: every run's output).
set -euo pipefail

[ $# -eq 2 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
A=$(cd "$1" && pwd)
B=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-3}
DECISIONS_ARGS=${DECISIONS_ARGS:-}
DATAPATH_ARGS=${DATAPATH_ARGS:---configs direct,kernel,user --sizes 1024,32768 --seconds 2}
OUT=${OUT:-$(mktemp -d /tmp/kvs-bench-compare.XXXXXX)}
mkdir -p "$OUT"

for r in $(seq 1 "$ROUNDS"); do
	for tag in A B; do
		build=$A
		[ $tag = B ] && build=$B
		# shellcheck disable=SC2086
		"$build/kvsplice-bench" decisions --json $DECISIONS_ARGS >"$OUT/decisions-$tag-$r.json"
		REQUESTS=${REQUESTS:-3000} "$HERE/bench-slowpath.sh" "$build" >"$OUT/slowpath-$tag-$r.txt" 2>&1
		# shellcheck disable=SC2086
		"$build/kvsplice-bench" datapath $DATAPATH_ARGS --json >"$OUT/datapath-$tag-$r.json" \
			2>"$OUT/datapath-$tag-$r.err"
		echo "bench-compare: round $r of $ROUNDS, build $tag done" >&2
	done
done
"$A/kvsplice-bench" sim --json >"$OUT/sim-A.json"
"$B/kvsplice-bench" sim --json >"$OUT/sim-B.json"

range() { # values... -> "min-max"
	printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }'
}
echo "A = $A"
echo "B = $B"
echo "($ROUNDS rounds, alternately; outputs in $OUT)"
echo
printf '%-34s %-24s %-24s\n' "decisions" "A" "B"
for f in full_per_s hash_us decide_us seen_per_s; do
	a=() b=()
	for r in $(seq 1 "$ROUNDS"); do
		a+=("$(jq -r ".$f" "$OUT/decisions-A-$r.json")")
		b+=("$(jq -r ".$f" "$OUT/decisions-B-$r.json")")
	done
	printf '  %-32s %-24s %-24s\n' "$f" "$(range "${a[@]}")" "$(range "${b[@]}")"
done
a=() b=()
for r in $(seq 1 "$ROUNDS"); do
	a+=("$(grep -o '[0-9.]* us each' "$OUT/slowpath-A-$r.txt" | cut -d' ' -f1)")
	b+=("$(grep -o '[0-9.]* us each' "$OUT/slowpath-B-$r.txt" | cut -d' ' -f1)")
done
printf '%-34s %-24s %-24s\n' "slow path (us a decision)" "$(range "${a[@]}")" "$(range "${b[@]}")"
echo
printf '%-34s %-24s %-24s\n' "data path: req/s, CPU us/req" "A" "B"
jq -r '.configs[] | select(.name != "direct") | "\(.name) \(.mode) \(.frame_bytes)"' \
	"$OUT/datapath-A-1.json" | while read -r name mode bytes; do
	sel=".configs[] | select(.name == \"$name\" and .mode == \"$mode\" and .frame_bytes == $bytes)"
	for f in rps cpu_us_per_req; do
		a=() b=()
		for r in $(seq 1 "$ROUNDS"); do
			a+=("$(jq -r "$sel | .$f" "$OUT/datapath-A-$r.json")")
			b+=("$(jq -r "$sel | .$f" "$OUT/datapath-B-$r.json")")
		done
		printf '  %-32s %-24s %-24s\n' "$name $mode $bytes $f" "$(range "${a[@]}")" \
			"$(range "${b[@]}")"
	done
done
echo
# (the seed read as a string from both: older builds wrote it as a number)
same_sim() { cmp -s <(jq -S '.seed |= tostring' "$1") <(jq -S '.seed |= tostring' "$2"); }
if same_sim "$OUT/sim-A.json" "$OUT/sim-B.json"; then
	echo "sim (the fleet in virtual time, seed 1): identical output"
else
	echo "sim (the fleet in virtual time, seed 1): outputs differ (see $OUT/sim-*.json)"
fi
