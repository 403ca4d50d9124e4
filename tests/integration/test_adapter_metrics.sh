#!/usr/bin/env bash
# What kvsplice-adapter reads of its server's /metrics to tell a restart
# (docs/RUNBOOK.md, "kvsplice-adapter"; tools/kvsplice-adapter/life.h),
# with tests/helpers/fake_openai as the server, its token counters with
# two label sets (two engines), the adapter polling every 50 ms:
#  - a sample of one engine that is no number (NaN, +Inf, -Inf, garbage)
#    makes the counter unknown at that poll: no restart. Before, that
#    line was skipped and the other engine's alone read as a counter gone
#    back, a restart (the gateway's routes to a cache still there
#    withdrawn), and again when a down and up came with it;
#  - counters typed as gauges (an old SGLang's prompt_tokens_total) are
#    not read as counters: one that drops is no restart. Before, it was.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_fake F
kvs_start_adapter A "$FAKE_URL_F" --poll-ms 50
ADLOG=$KVS_TMP/adapter-A.log
count() { grep -c "event=$1" "$2" || true; }
served() { [ "$(cat "$KVS_TMP/healthy.counters-served" 2>/dev/null)" = "$1" ]; }
# set TOKENS MORE [TYPE]: the counters served from the next poll on; waits
# until a poll served them, and the poll after (which starts only once
# the first was judged).
# One file, replaced whole (a rename): written as three files, a poll
# between two writes served a mix (the new first engine's counter beside
# the old second's, or none while one was truncated), which read as a
# counter grown to a figure never set, or gone back (a restart the test
# did not make).
put() { echo "$2" >"$1.new" && mv "$1.new" "$1"; }
set_counters() {
	put "$KVS_TMP/healthy.counters" "$1 $2 ${3:-counter}"
	kvs_wait_for "a poll serves $*" "served '$1 $2 ${3:-counter}'" 10
	rm -f "$KVS_TMP/healthy.counters-served"
	kvs_wait_for "the next poll" "[ -s '$KVS_TMP/healthy.counters-served' ]" 10
}

kvs_wait_for "the adapter reads its server ready" 'grep -q event=server_ready "$ADLOG"' 10
set_counters 0 0
set_counters 100 50
kvs_wait_for "the adapter reads the counters grown" \
	'grep -q "event=server_counters .*vllm:prompt_tokens_total=150 " "$ADLOG"' 10
restarts=$(count server_restarted "$ADLOG")
for bad in NaN +Inf -Inf nonsense; do
	set_counters 100 "$bad"
	assert_eq "restarts, one engine's counters $bad" "$(count server_restarted "$ADLOG")" "$restarts"
done
grep -q 'event=server_metric_unused .*name=vllm:prompt_tokens_total why="a sample that is no number' \
	"$ADLOG" || kvs_fail "the unreadable counter was not logged: $(cat "$ADLOG")"
set_counters 110 55
assert_eq "restarts, the counters whole again" "$(count server_restarted "$ADLOG")" "$restarts"

# A down and up, the counters unreadable at the poll that finds it back:
# that poll says nothing, and the next that reads them decides (grown:
# the same process).
downs=$(count server_not_ready "$ADLOG")
ups=$(count server_ready "$ADLOG")
rm "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads its server down" '[ "$(count server_not_ready "$ADLOG")" -gt "$downs" ]' 10
put "$KVS_TMP/healthy.counters" "110 NaN counter"
touch "$KVS_TMP/healthy"
kvs_wait_for "the adapter reads it ready" '[ "$(count server_ready "$ADLOG")" -gt "$ups" ]' 10
set_counters 110 NaN
assert_eq "restarts, down and up, counters unreadable" "$(count server_restarted "$ADLOG")" "$restarts"
set_counters 120 60
assert_eq "restarts, down and up, then counters grown" "$(count server_restarted "$ADLOG")" "$restarts"

# Typed as gauges: not counters, and a drop is no restart.
set_counters 120 60 gauge
grep -q 'event=server_metric_unused .*name=vllm:prompt_tokens_total why="typed as a gauge' "$ADLOG" ||
	kvs_fail "the gauge was not logged: $(cat "$ADLOG")"
set_counters 3 1 gauge
assert_eq "restarts, gauges dropped" "$(count server_restarted "$ADLOG")" "$restarts"

# A counter that goes back still says: the test sees what it would have.
set_counters 3 1
kvs_wait_for "the counters went back" \
	'grep -q "event=server_restarted .*why=\"its counter vllm:prompt_tokens_total went back from 180 to 4\"" "$ADLOG"' 10
echo "PASS test_adapter_metrics"
