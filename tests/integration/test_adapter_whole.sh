#!/usr/bin/env bash
# kvsplice-adapter in front of a server whose /health answers late
# (tests/helpers/fake_openai): a /health poll that times out says nothing,
# and the server stays ready (it was read as not ready, and the gateway
# ejected it with its requests), until silence has lasted --stall-timeout.
source "$(dirname "$0")/lib.sh"
kvs_setup

C="$KVS_BUILD/tests/helpers/kvs_client"
kvs_start_fake F

# wait_pong ADDR FLAGS: until the adapter's PONG carries FLAGS.
wait_pong() {
	kvs_wait_for "PONG from $1 says flags=$2" "[[ \$(\"\$C\" $1 ping) == *flags=$2 ]]"
}

# 3) /health answers late (past the poll's 2 s): the last state stays.
kvs_start_adapter B "$FAKE_URL_F" --poll-ms 100 --stall-timeout 600 --id 42
kvs_start_adapter D "$FAKE_URL_F" --poll-ms 100 --stall-timeout 3 --id 43
wait_pong "$AD_B" 0
wait_pong "$AD_D" 0
touch "$KVS_TMP/healthy.stall-health"
# Each adapter gives up a poll every 2 s: four given up, B's first among.
kvs_wait_for "/health polls given up" \
	'[ "$(wc -l 2>/dev/null <"$KVS_TMP/stalls.health" || echo 0)" -ge 4 ]'
assert_eq "PONG while /health does not answer" "$("$C" "$AD_B" ping)" \
	"pong running=2 waiting=1 kv=500/1000 backend=42 flags=0"
grep -q 'event=server_poll_silent' "$KVS_TMP/adapter-B.log" || kvs_fail "no poll_silent log line"
! grep -q 'event=server_not_ready' "$KVS_TMP/adapter-B.log" ||
	kvs_fail "not ready on a poll that timed out: $(grep server_not_ready "$KVS_TMP/adapter-B.log")"
# Silent for --stall-timeout (3 s for D): stuck, not ready.
wait_pong "$AD_D" 1
grep -q 'event=server_not_ready.*--stall-timeout' "$KVS_TMP/adapter-D.log" ||
	kvs_fail "D's not-ready line does not say why"
rm "$KVS_TMP/healthy.stall-health"
wait_pong "$AD_D" 0
assert_eq "B's PONG once /health answers again" "$("$C" "$AD_B" ping)" \
	"pong running=2 waiting=1 kv=500/1000 backend=42 flags=0"
echo "ok: a /health poll that times out says nothing, until --stall-timeout"
echo "PASS test_adapter_whole"
