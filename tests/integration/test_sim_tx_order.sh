#!/usr/bin/env bash
# kvsplice-sim writes a decode step's answers at once, each client's frames
# together (kvs_frames_by_client, tools/kvsplice-sim/server.c): never while
# a frame is part sent (tx_cut), or the stream to the gateway is corrupt.
# A test playing the gateway on one connection asks for 200 requests of
# 400 tokens for 5 clients, read at once, then three times with a small
# receive buffer, read slowly after a 1 s pause (the sim's sends then stop
# short again and again: EAGAIN and part-sent frames, where differs from
# run to run). Every time every frame is well formed, names the client its
# request came from, and each request's CHUNKs (the same texts, in the
# same order every time) end with its END. With tx_cut ignored (and
# kvs_frames_by_client checking lengths only) two runs out of two failed:
# frames lost, garbage read as frames.
source "$(dirname "$0")/lib.sh"
kvs_setup
kvs_start_sim s1 --time-scale 0.01

read_answers() { # fast|pause
	PYTHONPATH="$(dirname "$0")/../helpers" python3 "$(dirname "$0")/../helpers/tx_order_read.py" \
		--port "$SIM_PORT_s1" --mode "$1" --requests 200 --max-tokens 400 --prompt "tx order %d " --repeat 30 \
		--frames 401
}

fast=$(read_answers fast)
echo "read at once: $fast"
assert_eq "read at once" "${fast%% *}" ok
# Where the sends stop differs from run to run: three tries.
for i in 1 2 3; do
	slow=$(read_answers pause)
	echo "read after a pause ($i): $slow"
	assert_eq "read after a pause ($i), the same answers" "$slow" "$fast"
done
echo "PASS test_sim_tx_order"
