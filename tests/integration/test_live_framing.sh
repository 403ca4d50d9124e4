#!/usr/bin/env bash
# kvsplice-bench live --verify framing: the checks that hold for any KVS1
# server (a real one behind kvsplice-adapter streams CHUNKs of generated
# text, any number of them, and may stop before max_tokens), and the
# server's own figures in the report. Through the gateway to kvsplice-sim
# every request completes with no framing error and the backends' hit rate;
# a fake server shaped like a real one (UTF-8 text CHUNKs, an early stop,
# rejected and cancelled requests) passes framing and fails --verify sim;
# and each way of breaking the framing (a CHUNK after END, two ENDs, a
# frame for a request never sent or sent on another connection, a type no
# server sends, impossible END figures, a header that is not KVS1) is
# caught and named, while frames after the gateway's backend_gone are
# ignored as PROTOCOL.md allows.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

# --- kvsplice-sim through the gateway ------------------------------------
kvs_start_sim A --time-scale 0.05 --id 1
kvs_start_sim B --time-scale 0.05 --id 2
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"

out=$(kvs_bench -n 120 -k 4 -d 2 --prefixes 4 --prefix-tokens 512 -m 6 --verify framing \
	--json 2>"$KVS_TMP/bench.err") || kvs_fail "framing run through the gateway failed: $out"
assert_eq "verify mode" "$(jget "$out" .verify)" framing
assert_eq "requests answered" "$(jget "$out" .ok)" 120
assert_eq "requests ended by an END" "$(jget "$out" .ends)" 120
assert_eq "framing errors" "$(jget "$out" .framing_errors)" 0
assert_eq "errors, mismatches, lost" "$(jget "$out" '[.errors, .mismatches, .lost] | add')" 0
assert_eq "errors by code" "$(jget "$out" '.errors_by_code | length')" 0
assert_ge "hit rate (per mille, the backends' cached_tokens)" \
	"$(jget "$out" '.hit_rate * 1000 | floor')" 1
assert_eq "output tokens (END's output_tokens)" "$(jget "$out" .output_tokens)" 720
assert_eq "requests per backend add up" "$(jget "$out" '[.backends[].requests] | add')" 120
assert_ge "TTFT p50 (us)" "$(jget "$out" '.ttft_p50_ms * 1000 | floor')" 1
assert_ge "TTFT p99 - p50 (us)" "$(jget "$out" '(.ttft_p99_ms - .ttft_p50_ms) * 1000 | floor')" 0
assert_ge "requests/s" "$(jget "$out" '.throughput_rps | floor')" 1
assert_ge "output tokens/s" "$(jget "$out" '.output_tok_s | floor')" 1

# The default (sim) checks the same run and reports the same lines.
txt=$(kvs_bench -n 40 -k 2 --prefixes 4 --prefix-tokens 512) || kvs_fail "sim run failed: $txt"
grep -q "^verify        sim: 40 ended by END, 0 framing errors$" <<<"$txt" || kvs_fail "no verify line: $txt"
grep -q "^errors        none$" <<<"$txt" || kvs_fail "no errors line: $txt"
grep -q "^TTFT          p50 .* p90 .* p99 " <<<"$txt" || kvs_fail "no TTFT line: $txt"
grep -q "^load .* backend [12]=" <<<"$txt" || kvs_fail "no requests per backend: $txt"
echo "ok: the text report has the verify, errors, TTFT and per-backend lines"

# --- a fake server: the answer's shape by model id (--model) -------------
python3 - "$KVS_TMP/fake.port" <<'PY' 2>"$KVS_TMP/fake.log" &
import os, socket, struct, sys, threading, time

HDR = struct.Struct(">IBBHHHIQQQIIIIQ")
REQUEST, CHUNK, END, ERROR, PING, PONG = 1, 2, 3, 4, 5, 6
# socket -> [its send lock, the model ids its requests named]
conns, lock = {}, threading.Lock()

def send(sock, data):
    with lock:
        c = conns.get(sock)
    if c:
        with c[0]:  # one frame sequence at a time: never interleaved
            try:
                sock.sendall(data)
            except OSError:  # the client has gone: its reader cleans up
                pass

def frame(typ, req_id, payload=b"", status=0, gw=(0, 0)):
    return HDR.pack(0x4B565331, 1, typ, 0, 64, status, len(payload), req_id, 0, 0, 0, 0, 0,
                    gw[0], gw[1]) + payload

def end(req_id, gw, prompt, cached, output):
    return frame(END, req_id, struct.pack(">8I", prompt, cached, output, 10, 200, 300, 7, 0),
                 gw=gw)

TEXT = ["Hé", "llo, wörld", " — ", "日本語", " ok", "!"]

def good(req_id, gw, prompt_len, max_tokens):
    # As a real server: pieces of UTF-8 text, fewer than max_tokens of
    # them (an end of sequence), tokens that are not the CHUNK count.
    n = max(1, max_tokens // 2)
    out = b"".join(frame(CHUNK, req_id, TEXT[i % len(TEXT)].encode(), gw=gw) for i in range(n))
    prompt = prompt_len // 4
    return out + end(req_id, gw, prompt, prompt // 2, n + 1)

def answer(sock, h, prompt_len):
    req_id, model, max_tokens, gw = h[7], h[10], h[12], (h[13], h[14])
    ok = good(req_id, gw, prompt_len, max_tokens)
    if model == 1:  # per-request errors of a real server
        if req_id % 4 == 0:
            return frame(ERROR, req_id, b"cancelled", 14, gw)
        if req_id % 4 == 2:
            return frame(ERROR, req_id, b"HTTP 400: prompt too long", 15, gw)
        return ok
    if model == 2:  # a CHUNK after END
        return ok + frame(CHUNK, req_id, b"late", gw=gw)
    if model == 3:  # two ENDs
        return ok + end(req_id, gw, 1, 0, 1)
    if model == 4:  # a frame for a request never sent
        return frame(CHUNK, req_id + 1000000, b"?", gw=gw) + ok
    if model == 5:  # END figures that cannot be
        if req_id % 2:
            return frame(CHUNK, req_id, b"x", gw=gw) + end(req_id, gw, 10, 0, 0)
        return end(req_id, gw, 10, 11, 1)
    if model == 6:  # not KVS1 at all
        return b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".ljust(64, b" ")
    if model == 7:  # a CHUNK on the client's other connection (not a gateway's)
        for _ in range(200):
            with lock:
                other = [c for c, v in conns.items() if c is not sock and 7 in v[1]]
            if other:
                send(other[0], frame(CHUNK, req_id, b"misrouted", gw=gw))
                break
            time.sleep(0.01)
        return ok
    if model == 8:  # the gateway's backend_gone, then what the backend had sent
        return frame(ERROR, req_id, b"backend failed", 9, gw) + frame(CHUNK, req_id, b"x", gw=gw)
    if model == 9:  # a PONG nobody asked for
        return frame(PONG, req_id, bytes(24), gw=gw) + ok
    return ok

def serve(sock):
    buf = b""
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            break
        if not data:
            break
        buf += data
        while len(buf) >= 64:
            h = HDR.unpack_from(buf)
            if len(buf) < 64 + h[6]:
                break
            buf = buf[64 + h[6]:]
            if h[2] == PING:  # the gateway's health check: idle, ready
                out = frame(PONG, h[7], struct.pack(">6I", 0, 0, 0, 1000, 7, 0),
                            gw=(h[13], h[14]))
            elif h[2] == REQUEST:
                with lock:
                    conns[sock][1].add(h[10])
                out = answer(sock, h, h[6])
            else:
                continue
            send(sock, out)  # one write: a broken pair arrives together
    with lock:
        del conns[sock]
    sock.close()

ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(64)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(ls.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = ls.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with lock:
        conns[c] = [threading.Lock(), set()]
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
KVS_PIDS+=($!)
kvs_wait_file "$KVS_TMP/fake.port"
FAKE=127.0.0.1:$(cat "$KVS_TMP/fake.port")

# fake MODEL [live options...]: a run straight at the fake server (which
# answers max_tokens / 2 CHUNKs: it declares 8, not 4096); its JSON
# in $out, its exit status in $rc, its stderr in $KVS_TMP/fake-bench.err.
fake() {
	local model=$1
	shift
	rc=0
	out=$("$KVS_BUILD/kvsplice-bench" live --connect "$FAKE" --quiet --model "$model" \
		--prefixes 2 --prefix-tokens 64 --suffix-tokens 8 -m 8 --declared-max-tokens 8 \
		--timeout-s 20 --json "$@" \
		2>"$KVS_TMP/fake-bench.err") || rc=$?
	[ -n "$out" ] || kvs_fail "model $model: no report: $(head -5 "$KVS_TMP/fake-bench.err")"
}

# A real server's shape: passes framing, with END's figures as the report's.
fake 0 -n 20 -k 2 --verify framing
assert_eq "real-shaped stream: exit status under framing" "$rc" 0
assert_eq "real-shaped stream: ok" "$(jget "$out" .ok)" 20
assert_eq "real-shaped stream: framing errors" "$(jget "$out" .framing_errors)" 0
assert_eq "real-shaped stream: output tokens from END (5 per request)" \
	"$(jget "$out" .output_tokens)" 100
assert_eq "real-shaped stream: hit rate from END" "$(jget "$out" .hit_rate)" 0.5
assert_eq "real-shaped stream: requests of backend 7" "$(jget "$out" '.backends[0] | "\(.id)=\(.requests)"')" 7=20
fake 0 -n 20 -k 2
assert_eq "real-shaped stream: exit status under sim" "$rc" 1
assert_eq "real-shaped stream: mismatched under sim" "$(jget "$out" .mismatches)" 20
assert_eq "real-shaped stream: framing errors under sim" "$(jget "$out" .framing_errors)" 0
grep -q "needs --verify framing" "$KVS_TMP/fake-bench.err" ||
	kvs_fail "sim mode does not point to --verify framing: $(cat "$KVS_TMP/fake-bench.err")"
echo "ok: sim mode points a real-shaped stream to --verify framing"

# The same through the gateway (the kernel or userspace path splices it).
kill "$GW_PID"
wait "$GW_PID" 2>/dev/null || true
rm -rf "$KVS_PIN" # the first gateway's; cleanup removes the second's
KVS_PIN=$KVS_PIN-2
rm -f "$KVS_TMP/gw.port"
kvs_start_gw --backend "$FAKE"
[ "$(kvs_wait_backend 0 up)" = up ] || kvs_fail "the fake server never came up"
out=$(kvs_bench -n 40 -k 4 --prefixes 2 --prefix-tokens 64 -m 8 --declared-max-tokens 8 \
	--verify framing --json) || kvs_fail "real-shaped stream through the gateway failed: $out"
assert_eq "through the gateway: ok" "$(jget "$out" .ok)" 40
assert_eq "through the gateway: framing errors" "$(jget "$out" .framing_errors)" 0
assert_eq "through the gateway: output tokens" "$(jget "$out" .output_tokens)" 200

# Per-request errors, counted by code; the framing is fine.
fake 1 -n 20 -k 2 --verify framing
assert_eq "errors: exit status" "$rc" 1
assert_eq "errors: framing errors" "$(jget "$out" .framing_errors)" 0
assert_eq "errors: cancelled" "$(jget "$out" .errors_by_code.cancelled)" 5
assert_eq "errors: rejected" "$(jget "$out" .errors_by_code.rejected)" 5
assert_eq "errors: ok" "$(jget "$out" .ok)" 10
assert_eq "errors: ended by an END" "$(jget "$out" .ends)" 10
txt=$("$KVS_BUILD/kvsplice-bench" live --connect "$FAKE" --quiet --model 1 -n 20 -k 2 \
	--prefixes 2 --prefix-tokens 64 --declared-max-tokens 8 --verify framing 2>/dev/null) || true
grep -q "^errors        cancelled 5, rejected 5$" <<<"$txt" || kvs_fail "errors line: $txt"
echo "ok: the text report names the error codes"

# broken MODEL KIND: the framing verifier fails the run and names KIND.
broken() {
	local what=$1 model=$2 kind=$3
	fake "$model" -n 8 -k 2 --verify framing
	assert_eq "$what: exit status" "$rc" 1
	assert_ge "$what: framing.$kind" "$(jget "$out" ".framing.$kind")" 1
	assert_eq "$what: no other kind" \
		"$(jget "$out" ".framing_errors - .framing.$kind")" 0
	grep -q "$kind" "$KVS_TMP/fake-bench.err" || kvs_fail "$what: stderr does not say $kind"
}
broken "CHUNK after END" 2 after_end
broken "two ENDs" 3 dup_end
broken "a request never sent" 4 unknown_req
broken "impossible END figures" 5 bad_end
assert_eq "impossible END figures: mismatched" "$(jget "$out" .mismatches)" 8
broken "not KVS1" 6 bad_frame
assert_eq "not KVS1: lost" "$(jget "$out" .lost)" 8
broken "another connection's request" 7 wrong_conn
broken "unsolicited PONG" 9 bad_type
# The sim mode has the same framing checks under its own.
fake 3 -n 8 -k 2
assert_ge "two ENDs under --verify sim" "$(jget "$out" .framing.dup_end)" 1

# backend_gone: stragglers are not framing errors (PROTOCOL.md).
fake 8 -n 8 -k 2 --verify framing
assert_eq "backend_gone: framing errors" "$(jget "$out" .framing_errors)" 0
assert_eq "backend_gone: errors" "$(jget "$out" .errors_by_code.backend_gone)" 8
assert_ge "backend_gone: late frames ignored" "$(jget "$out" .late_frames)" 1

if msg=$("$KVS_BUILD/kvsplice-bench" live --connect "$FAKE" --verify exact 2>&1); then
	kvs_fail "--verify exact accepted"
fi
grep -q "'exact' is not sim or framing" <<<"$msg" || kvs_fail "unexpected message: $msg"
"$KVS_BUILD/kvsplice-bench" live --help | grep -q -- "--verify MODE" || kvs_fail "--help has no --verify"
echo "PASS test_live_framing"
