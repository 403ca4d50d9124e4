#!/usr/bin/env bash
# kvs_cleanup (lib.sh) ends every process a test started, one the test
# stopped too, and sends no SIGCONT after a SIGTERM: under SAN=1 a SIGCONT
# that lands while LeakSanitizer attaches to an exiting process (its check
# at exit) discards the attach's SIGSTOP and hangs the process for good
# (lib.sh says how; make test SAN=1 saw simulators hang so). What
# kvs_cleanup sends is recorded by a function standing in for the kill
# builtin, so that the order is checked, not left to a race: a running
# process gets SIGTERM alone, a stopped one SIGCONT and then SIGTERM.
# And a process that does not exit within KVS_EXIT_S of its SIGTERM is
# killed and fails the test, named (bash's wait has no time limit: it
# stalled make test silently).
source "$(dirname "$0")/lib.sh"
kvs_setup

sleep 1000 &
RUN=$!
sleep 1000 &
STOPPED=$!
KVS_PIDS+=("$RUN" "$STOPPED") # ended at exit should the test fail first
# Each running sleep: until it has, the fork holds the shell's handler for
# SIGTERM (its trap), which would take the signal.
for pid in "$RUN" "$STOPPED"; do
	kvs_wait_for "$pid running sleep" '[ "$(cat "/proc/$pid/comm")" = sleep ]'
done
kill -STOP "$STOPPED"
kvs_wait_for "the stopped one stopped" '[ "$(kvs_proc_state "$STOPPED")" = T ]'

# kvs_cleanup on those two, in a subshell: the test's own pin dir, files
# and processes stay for the clean-up at its exit.
SENT=$KVS_TMP/sent
(
	kill() {
		echo "$*" >>"$SENT"
		builtin kill "$@"
	}
	KVS_PIDS=("$RUN" "$STOPPED")
	KVS_TMP=""
	KVS_PIN=""
	kvs_cleanup
)
# One "SIGNAL:PID" a kill, SIGTERM where none is named.
sent=$(awk '{ sig = "TERM" } /^-/ { sig = substr($1, 2); $1 = "" }
	{ gsub(/ /, ""); printf "%s%s:%s", (NR > 1 ? " " : ""), sig, $0 }' "$SENT")
assert_eq "signals sent, in order" "$sent" "TERM:$RUN CONT:$STOPPED TERM:$STOPPED"

for pid in "$RUN" "$STOPPED"; do
	kvs_wait_for "$pid ended" '[[ "$(kvs_proc_state "$pid")" =~ ^Z?$ ]]'
	rc=0
	wait "$pid" || rc=$?
	assert_eq "$pid's end (128 + SIGTERM)" "$rc" 143
done
# One that ignores SIGTERM: killed after KVS_EXIT_S, and the test fails.
sh -c 'trap "" TERM; while :; do sleep 0.1; done' &
DEAF=$!
KVS_PIDS+=("$DEAF")
kvs_wait_for "$DEAF ignoring SIGTERM" \
	'grep -q "^SigIgn:.*[4-7c-f]...$" "/proc/$DEAF/status" 2>/dev/null'
rc=0
out=$( (
	KVS_PIDS=("$DEAF")
	KVS_TMP=""
	KVS_PIN=""
	KVS_EXIT_S=1
	kvs_cleanup
) 2>&1) || rc=$?
assert_eq "cleanup with a process that did not exit: exit status" "$rc" 1
grep -q "FAIL: cleanup: still running 1 s after SIGTERM, killed: $DEAF(sh)" <<<"$out" ||
	kvs_fail "not named: $out"
rc=0
wait "$DEAF" || rc=$?
assert_eq "$DEAF's end (128 + SIGKILL)" "$rc" 137
echo "PASS test_cleanup_signals"
