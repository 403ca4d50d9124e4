#!/usr/bin/env bash
# kvsplice-adapter writes what a turn of its loop queued in one write, each
# client's frames together (kvs_frames_by_client, tools/kvsplice-adapter/
# tx.c): never while a frame is part sent (tx_cut), or the stream to the
# gateway is corrupt. A test playing the gateway on one connection sends
# 300 requests for 5 clients to an adapter in front of tests/helpers/
# fake_openai (each answer three text events, the usage, [DONE]), read at
# once, then twice with a small receive buffer, read slowly after a pause
# (the adapter's sends then stop short again and again). Every time every
# frame is well formed and names the client its request came from, and
# each request's CHUNKs (the same texts, in the same order every time)
# end with its END. (test_sim_tx_order.sh does the same for kvsplice-sim.)
# Unlike that one, this test did not fail on an adapter that ignores
# tx_cut (and a kvs_frames_by_client without its magic check): the
# adapter pauses its transfers while its queue is above its high mark, so
# it seldom queues behind a part-sent frame. What it checks is the grouped
# stream under back-pressure: whole, each request's frames in order.
source "$(dirname "$0")/lib.sh"
kvs_setup
kvs_start_fake F
kvs_start_adapter A "$FAKE_URL_F"

read_answers() { # fast|pause
	PYTHONPATH="$(dirname "$0")/../helpers" python3 "$(dirname "$0")/../helpers/tx_order_read.py" \
		--port "$AD_PORT_A" --mode "$1" --requests 300 --max-tokens 8 --prompt "tx order %d mode:ok " \
		--repeat 8 --slow-recv 1024 --timeout 60
}

fast=$(read_answers fast)
echo "read at once: $fast"
assert_eq "read at once" "${fast%% *}" ok
# Where the sends stop differs from run to run: two tries.
for i in 1 2; do
	slow=$(read_answers pause)
	echo "read after a pause ($i): $slow"
	assert_eq "read after a pause ($i), the same answers" "$slow" "$fast"
done
echo "PASS test_adapter_tx_order"
