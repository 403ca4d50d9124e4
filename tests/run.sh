#!/usr/bin/env bash
# Runs kvsplice's tests: every unit test binary in BUILD/tests, then every
# integration script in tests/integration (root needed), and a short fuzz
# run (tests/fuzz); the integration tests marked "datapath: both" run a
# second time on the userspace data path (user-path/...). A test that exits
# 77 was skipped (what it needs is not here; it says why). Prints one line
# per test and a closing "N passed, N failed, N skipped" line; exits 1 if
# any failed.
#   tests/run.sh BUILD [unit|integration]
# KVS_TEST_HOGS=N (make test-loaded: 2) runs N CPU hogs, processes spinning
# at normal priority, for the whole run: the suite must hold on a machine
# whose cores are busy, as a user's CI often is.
set -u
BUILD=${1:-build}
WHAT=${2:-all}
HERE=$(cd "$(dirname "$0")" && pwd)
export KVS_BUILD=$(cd "$BUILD" && pwd)
LOGDIR=$(mktemp -d /tmp/kvs-tests.XXXXXX)
HOGS=()
stop_hogs() {
	[ ${#HOGS[@]} -gt 0 ] && kill "${HOGS[@]}" 2>/dev/null
	HOGS=()
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT TERM
for _ in $(seq 1 "${KVS_TEST_HOGS:-0}"); do
	(while :; do :; done) &
	HOGS+=($!)
done
[ ${#HOGS[@]} -gt 0 ] && echo "with ${#HOGS[@]} CPU hogs running (pids ${HOGS[*]})"
pass=0
fail=0
skip=0
failed=()

run_one() { # name command...
	local name=$1 t0 t1 rc log
	shift
	log="$LOGDIR/${name//\//_}.log"
	t0=$(date +%s.%N)
	"$@" >"$log" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1))
		printf 'PASS  %-28s %6.2fs\n' "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
	elif [ $rc -eq 77 ]; then
		skip=$((skip + 1))
		printf 'SKIP  %-28s %6.2fs  (%s)\n' "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
			"$(tail -n 1 "$log")"
	else
		fail=$((fail + 1))
		failed+=("$name")
		printf 'FAIL  %-28s %6.2fs  (log: %s)\n' "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
			"$log"
		sed 's/^/      | /' "$log" | tail -n 25
	fi
}

if [ "$WHAT" = all ] || [ "$WHAT" = unit ]; then
	for t in "$BUILD"/tests/test_*; do
		[ -x "$t" ] && run_one "unit/$(basename "$t")" "$t"
	done
fi
if [ "$WHAT" = all ] || [ "$WHAT" = unit ]; then
	for t in "$HERE"/fuzz/test_*.sh; do
		run_one "fuzz/$(basename "$t" .sh)" "$t"
	done
fi
if [ "$WHAT" = all ] || [ "$WHAT" = integration ]; then
	for t in "$HERE"/integration/test_*.sh; do
		run_one "integration/$(basename "$t" .sh)" "$t"
	done
	# Those that hold for both data paths, again on the userspace one.
	for t in $(grep -l '^# datapath: both' "$HERE"/integration/test_*.sh); do
		run_one "user-path/$(basename "$t" .sh)" env KVS_DATAPATH=user "$t"
	done
fi

echo
[ $fail -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped${HOGS:+ (with ${#HOGS[@]} CPU hogs)}"
[ $fail -eq 0 ]
