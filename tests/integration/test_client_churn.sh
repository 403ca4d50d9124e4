#!/usr/bin/env bash
# Clients that leave mid-stream - closing, resetting, closing before any
# answer, half-closing and still reading, or half-closing right after the
# request - 2,000 of them (tests/helpers/churn_client.c), while a
# well-behaved client keeps going: half-closed clients get their whole
# answer byte for byte; those that shut down before the gateway even
# accepted them get an ERROR saying so, never silence; the others' answers
# are discarded and counted;
# afterwards the gateway holds no more sockets, descriptors or map entries
# than before, nothing is left in CLOSE_WAIT, and the good client never
# noticed.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.02
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A"

count_conns() { bpftool map dump pinned "$KVS_PIN/conns" -j | jq length; }
count_inflight() { bpftool map dump pinned "$KVS_PIN/inflight" -j | jq length; }
count_fds() { ls "/proc/$GW_PID/fd" | wc -l; }
count_close_wait() { ss -tanH state close-wait "( sport = :$GW_PORT or dport = :$GW_PORT )" | wc -l; }

conns0=$(count_conns)
fds0=$(count_fds)
s0=$(kvs_stats)

# --fleet: the bench asks the gateway nothing (its PINGs' connections
# would count among the clients accepted).
kvs_bench -n 600 -k 2 -d 2 --prefixes 4 --prefix-tokens 512 --json --timeout-s 120 --fleet 1 \
	>"$KVS_TMP/good.json" &
good=$!

out=$("$KVS_BUILD/tests/helpers/churn_client" "127.0.0.1:$GW_PORT" 2000 16 16) ||
	kvs_fail "churn clients: $out"
echo "churn: $out"
assert_eq "clients half-closed mid-stream, answered in full" "$(jget "$out" .halfclose_ok)" 400
assert_eq "clients shut right after the request: answered or told why" \
	"$(jget "$out" '.shut_answered + .shut_errors')" 400

wait $good || kvs_fail "the good client failed: $(cat "$KVS_TMP/good.json")"
assert_eq "good client: requests ok" "$(jq .ok "$KVS_TMP/good.json")" 600

# Answers still streaming to vanished clients drain within the sim's time.
kvs_wait_for "the churned clients leave the maps" \
	'[ "$(count_inflight)" = 0 ] && [ "$(count_conns)" = "$conns0" ]'
assert_eq "inflight records left" "$(count_inflight)" 0
assert_eq "conns map entries (before: $conns0)" "$(count_conns)" "$conns0"
assert_eq "gateway descriptors (before: $fds0)" "$(count_fds)" "$fds0"
assert_eq "sockets in CLOSE_WAIT" "$(count_close_wait)" 0
s1=$(kvs_stats)
accepted=$(($(jget "$s1" .controller.clients_accepted) - $(jget "$s0" .controller.clients_accepted)))
closed=$(($(jget "$s1" .controller.clients_closed) - $(jget "$s0" .controller.clients_closed)))
assert_eq "clients accepted" "$accepted" 2002
assert_eq "clients closed" "$closed" 2002
assert_ge "clients kept open after a half-close" "$(jget "$s1" .controller.clients_half_closed)" 400
assert_ge "clients closed before accept, answered with an ERROR" \
	"$(jget "$s1" .controller.clients_early_closed)" "$(jget "$out" .shut_errors)"
dropped=$(($(jget "$s1" .drop_no_client) + $(jget "$s1" .controller.user_path_no_client) - $(jget "$s0" .drop_no_client) - $(jget "$s0" .controller.user_path_no_client)))
assert_ge "answers for vanished clients discarded and counted" "$dropped" 1
be=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)
assert_eq "requests still charged to the backend" "$(jget "$be" '.[0].outstanding')" 0
echo "PASS test_client_churn"
