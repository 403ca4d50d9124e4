#!/usr/bin/env bash
# A client that sends garbage gets a KVS1 ERROR frame naming the problem and
# a closed connection; a well-behaved client on the same gateway at the same
# time keeps getting byte-exact responses.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A"

# A good client in the background for the whole test.
kvs_bench -n 400 -k 2 -d 2 --json --timeout-s 60 >"$KVS_TMP/good.json" &
good=$!

# bad_client HEXBYTES: send them, print what comes back as hex until EOF.
bad_client() {
	timeout 5 bash -c '
		exec 3<>/dev/tcp/127.0.0.1/'"$GW_PORT"'
		printf "$1" >&3
		od -An -v -tx1 <&3 | tr -d " \n"
	' _ "$1"
}

hdr() { # magic version type flags hdr_len status payload_len, rest zero
	printf '%s' "$1"
	printf '\\x00%.0s' $(seq 1 48)
}

# 64 bytes of 'A': bad magic.
reply=$(bad_client "$(printf 'A%.0s' $(seq 1 64))")
# ERROR header: magic KVS1, version 1, type 4, flags 0, hdr_len 64, status 1
assert_eq "answer to bad magic" "${reply:0:24}" "4b5653310104000000400001"

# Version 9.
reply=$(bad_client "$(hdr '\x4b\x56\x53\x31\x09\x01\x00\x00\x00\x40\x00\x00\x00\x00\x00\x00')")
assert_eq "answer to bad version" "${reply:0:24}" "4b5653310104000000400002"

# A CHUNK frame from a client (only backends send those): bad type.
reply=$(bad_client "$(hdr '\x4b\x56\x53\x31\x01\x02\x00\x00\x00\x40\x00\x00\x00\x00\x00\x00')")
assert_eq "answer to a client CHUNK" "${reply:0:24}" "4b5653310104000000400003"

# A payload larger than the gateway's maximum frame.
reply=$(bad_client "$(hdr '\x4b\x56\x53\x31\x01\x01\x00\x00\x00\x40\x00\x00\x7f\x00\x00\x00')")
assert_eq "answer to an oversized frame" "${reply:0:24}" "4b5653310104000000400005"

# Flags: an unknown bit (0x0008) on a REQUEST, and the known JSON bit on a
# PING (flags belong to REQUESTs only): bad flags, in the kernel's verdict.
reply=$(bad_client "$(hdr '\x4b\x56\x53\x31\x01\x01\x00\x08\x00\x40\x00\x00\x00\x00\x00\x00')")
assert_eq "answer to an unknown flag" "${reply:0:24}" "4b5653310104000000400006"
reply=$(bad_client "$(hdr '\x4b\x56\x53\x31\x01\x05\x00\x01\x00\x40\x00\x00\x00\x00\x00\x00')")
assert_eq "answer to a flag on a PING" "${reply:0:24}" "4b5653310104000000400006"

wait $good || kvs_fail "the good client was affected: $(cat "$KVS_TMP/good.json")"
assert_eq "good client requests ok" "$(jq .ok "$KVS_TMP/good.json")" 400
s=$(kvs_stats)
assert_eq "malformed frames counted by the kernel" "$(jget "$s" .pass_bad_frame)" 6
assert_eq "errors the controller sent" "$(jget "$s" .controller.errors_sent)" 6
echo "PASS test_bad_frame"
