#!/usr/bin/env bash
# The Prometheus endpoint (--metrics ADDR:PORT): a scrape returns the text
# format with the counters the maps hold - requests by path, per-backend
# load and cache tokens, the backends' own first-token times (a histogram
# of their END reports, by either data path), errors by kind, routes, the
# decision-latency histogram - checked against what was sent and against
# kvsplicectl; a
# wrong path gets 404, HEAD the head alone, another method 405; a scraper
# that sends nothing is dropped.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.005
kvs_start_sim B --time-scale 0.005
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B" \
	--metrics 127.0.0.1:0
MPORT=$(grep -o 'event=metrics_listening addr=[^ ]* port=[0-9]*' "$KVS_TMP/gw.log" | grep -o '[0-9]*$')
[ -n "$MPORT" ] || kvs_fail "no metrics_listening line"
scrape() { # path -> status line, then body
	python3 - "$MPORT" "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(f"GET {sys.argv[2]} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
head, _, body = data.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode())
print(body.decode(), end="")
PY
}
metric() { awk -v m="$2" '$1 == m { print $2 }' <<<"$1"; }

out=$(kvs_bench -n 200 -k 4 --prefixes 8 --prefix-tokens 1024 --json) || kvs_fail "load: $out"
m=$(scrape /metrics)
assert_eq "status" "$(head -1 <<<"$m")" "HTTP/1.1 200 OK"
st=$(kvs_stats)
kernel=$(metric "$m" 'kvsplice_requests_total{path="kernel"}')
ctrl=$(metric "$m" 'kvsplice_requests_total{path="controller"}')
user=$(metric "$m" 'kvsplice_requests_total{path="user"}')
assert_eq "requests by path add up to those sent" $((kernel + ctrl + user)) 200
assert_eq "userspace path = kvsplicectl's user_path_frames" "$user" \
	"$(jget "$st" .controller.user_path_frames)"
assert_eq "kernel path = kvsplicectl's fast_path_frames" "$kernel" "$(jget "$st" .fast_path_frames)"
cached=0
for p in $SIM_PORT_A $SIM_PORT_B; do
	v=$(metric "$m" "kvsplice_backend_cached_tokens_total{backend=\"127.0.0.1:$p\"}")
	cached=$((cached + v))
	assert_eq "backend $p up" "$(metric "$m" "kvsplice_backend_up{backend=\"127.0.0.1:$p\"}")" 1
done
assert_eq "cached tokens = the backends' own reports" "$cached" "$(jget "$out" .cached_tokens)"
# The backends' first-token times: every END counted once (the sims
# report a queue and a prefill time for each), its buckets cumulative up
# to +Inf = its count, its sum its two parts.
ttft_n=0
for p in $SIM_PORT_A $SIM_PORT_B; do
	lb="backend=\"127.0.0.1:$p\""
	n=$(metric "$m" "kvsplice_backend_ttft_seconds_count{$lb}")
	assert_eq "backend $p: TTFT +Inf bucket = count" \
		"$(metric "$m" "kvsplice_backend_ttft_seconds_bucket{$lb,le=\"+Inf\"}")" "$n"
	prev=0
	for v in $(awk -v b="kvsplice_backend_ttft_seconds_bucket{$lb," \
		'index($1, b) == 1 { print $2 }' <<<"$m"); do
		assert_ge "backend $p: TTFT buckets cumulative" "$v" "$prev"
		prev=$v
	done
	python3 - "$(metric "$m" "kvsplice_backend_ttft_seconds_sum{$lb}")" \
		"$(metric "$m" "kvsplice_backend_queue_seconds_total{$lb}")" \
		"$(metric "$m" "kvsplice_backend_prefill_seconds_total{$lb}")" "$n" <<'PY' ||
import sys
s, q, p, n = map(float, sys.argv[1:])
assert abs(s - (q + p)) < 1e-5 and (n == 0 or p > 0), (s, q, p, n)
PY
		kvs_fail "backend $p: TTFT sum is not queue + prefill, or no prefill time"
	ttft_n=$((ttft_n + n))
done
assert_eq "TTFTs counted = requests ended" "$ttft_n" 200
# The index's size per backend, as kvsplicectl reads it (a correction
# may land on a tick between two reads: read both until they agree).
index_agrees() { # i
	local b p
	b=$("$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" backends --json)
	p=$(jq -r ".[$1].backend" <<<"$b")
	[ "$(metric "$(scrape /metrics)" "kvsplice_backend_index_blocks{backend=\"$p\"}")" = \
		"$(jq -r ".[$1].index_blocks" <<<"$b")" ]
}
for i in 0 1; do
	kvs_wait_for "backend $i's index size in the metrics = kvsplicectl's" "index_agrees $i"
done
assert_eq "decisions observed = requests the controller routed (either path)" \
	"$(metric "$m" 'kvsplice_decision_seconds_count')" $((ctrl + user))
assert_eq "histogram's +Inf bucket = its count" \
	"$(metric "$m" 'kvsplice_decision_seconds_bucket{le="+Inf"}')" $((ctrl + user))
assert_eq "routes = entries in the map" "$(metric "$m" kvsplice_routes)" \
	"$(bpftool map dump pinned "$KVS_PIN/routes" -j | jq length)"
# (the scrape's own among them, and clients of the load still closing)
fds=$(ls "/proc/$GW_PID/fd" | wc -l)
assert_ge "process_open_fds, against /proc's $fds" "$(metric "$m" process_open_fds)" $((fds - 8))
assert_le "process_open_fds, against /proc's $fds" "$(metric "$m" process_open_fds)" $((fds + 8))
assert_eq "process_max_fds = its RLIMIT_NOFILE" "$(metric "$m" process_max_fds)" \
	"$(awk '/^Max open files/ { print $4 }' "/proc/$GW_PID/limits")"
grep -q '^# TYPE kvsplice_decision_seconds histogram$' <<<"$m" || kvs_fail "no histogram TYPE line"
grep -q '^kvsplice_errors_total{kind="bad_frame"} 0$' <<<"$m" || kvs_fail "no errors by kind"
# Every sample line is "name{labels} value" or "name value".
bad=$(grep -v '^#' <<<"$m" | tail -n +2 |
	grep -cvE '^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [0-9.e+-]+$' || true)
assert_eq "malformed sample lines" "$bad" 0

nope=$(scrape /nope)
assert_eq "a wrong path" "${nope%%$'\n'*}" "HTTP/1.1 404 Not Found"
# HEAD: the head a GET gets, no body; another method: 405, saying which
# (both were 404, which reads as "no metrics here")
raw() { # method -> the answer's head, then its body's length
	python3 - "$MPORT" "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(f"{sys.argv[2]} /metrics HTTP/1.1\r\nHost: x\r\n\r\n".encode())
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
head, _, body = data.partition(b"\r\n\r\n")
print(head.decode().replace("\r", ""))
print("body bytes", len(body))
PY
}
head=$(raw HEAD)
assert_eq "HEAD /metrics" "${head%%$'\n'*}" "HTTP/1.1 200 OK"
grep -q "^Content-Length: [1-9]" <<<"$head" || kvs_fail "HEAD: no Content-Length: $head"
assert_eq "HEAD /metrics: no body" "$(tail -1 <<<"$head")" "body bytes 0"
post=$(raw POST)
assert_eq "POST /metrics" "${post%%$'\n'*}" "HTTP/1.1 405 Method Not Allowed"
grep -q "^Allow: GET, HEAD" <<<"$post" || kvs_fail "POST: no Allow: $post"
# A scraper that connects and sends nothing is closed within ~2 s.
python3 - "$MPORT" <<'PY' || kvs_fail "an idle scraper was kept open"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(5)
t = time.time()
assert s.recv(1) == b"" and time.time() - t < 4
PY
echo "ok: an idle scraper is closed"
echo "PASS test_metrics"
