#!/usr/bin/env bash
# Clients that send their first request the moment they connect, before the
# gateway has accepted the socket and put it in the SOCKHASH. On this kernel
# such bytes raise no data-ready event for the strparser, and reading the
# socket from userspace while they are queued stalls the stream for good
# after its first frame (docs/ARCHITECTURE.md, "Bytes that predate the map";
# the figures: docs/EVALUATION.md, "Correctness figures from the test
# suite"). Every request of many fresh, immediately-sending clients must
# complete.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_sim B --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"

# 40 short-lived clients, each 6 cold requests in a row (all slow path, so the
# first frame of each is the one that arrived early).
for i in $(seq 1 40); do
	out=$(kvs_bench -n 6 -k 1 -d 1 --prefixes 6 --salt "$i" --json --timeout-s 30) ||
		kvs_fail "client $i stalled: $out"
done
echo "ok: 40 immediately-sending clients, 240 requests complete"

# And many at once: 64 connections opened together, all sending at once.
out=$(kvs_bench -n 512 -k 64 -d 2 --prefixes 0 --suffix-tokens 300 --json --timeout-s 30) ||
	kvs_fail "burst of new clients stalled: $out"
assert_eq "burst requests ok" "$(jget "$out" .ok)" 512
echo "PASS test_early_data"
