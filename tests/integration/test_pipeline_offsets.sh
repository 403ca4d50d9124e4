#!/usr/bin/env bash
# The strparser-offset hazard (docs/ARCHITECTURE.md, "Hazards of sockmap
# splicing": the frame does not start at offset 0): when a frame ends
# inside a TCP skb, the next frame starts at an offset in that skb, and a
# parser that reads the length at 0 hangs the stream. Pipelined frames of
# many sizes, in both directions, must all arrive byte-exact, and the
# kernel's counter must show that frames at non-zero offsets really
# happened (so the test exercised the hazard rather than dodged it).
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.002
kvs_start_sim B --time-scale 0.002
# Load deferral off: with 96 requests in flight the kernel would rightly send
# some to the controller; this test is about framing, not balance.
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--kernel-slack-tokens 1000000000

N=3000
# The shared prefix is short against the prompts (64 of up to 365 tokens),
# so the clients name it with the prefix-length hint, which the kernel
# follows; without it such shallow matches go to the controller by design.
# --fleet: the bench asks the gateway nothing (its PONGs would count among
# the response frames spliced).
out=$(kvs_bench -n $N -k 3 -d 32 --prefixes 8 --prefix-tokens 64 --suffix-tokens 1 \
	--suffix-jitter 300 --max-tokens 3 --hint --json --timeout-s 120 --fleet 2) ||
	kvs_fail "pipelined run failed: $out"
assert_eq "requests ok" "$(jget "$out" .ok)" $N
assert_eq "mismatched responses" "$(jget "$out" .mismatches)" 0

s=$(kvs_stats)
if [ "${KVS_DATAPATH:-kernel}" = user ]; then
	# The controller frames the streams itself: every request is its own.
	assert_eq "requests the userspace path routed" "$(jget "$s" .controller.user_path_frames)" $N
	assert_eq "bad frames" "$(jget "$s" .controller.bad_frames)" 0
	echo "PASS test_pipeline_offsets"
	exit 0
fi
assert_ge "frames at a non-zero skb offset" "$(jget "$s" .frames_at_offset)" 100
assert_eq "bad frames seen by the kernel" "$(jget "$s" .pass_bad_frame)" 0
assert_eq "response frames spliced" "$(jget "$s" .resp_frames)" $((N * 4))
# All but the first wave (3 connections x 32 in flight) and the few that race
# the controller installing their route go through the kernel.
assert_ge "fast-path frames" "$(jget "$s" .fast_path_frames)" $((N * 9 / 10))
echo "PASS test_pipeline_offsets"
