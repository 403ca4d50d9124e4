#!/usr/bin/env bash
# The issue's tenant flood, at the routes map's full size: a victim tenant
# teaches the kernel its routes, then another tenant (kvsplice-bench live
# from 127.0.0.1) sends FLOOD unique prompts of 4 blocks (one route each,
# more than the map's 262,144 entries), then the victim's routes still in
# the map are counted, with --tenant-routes off and auto. The backend's KV
# (and so the controller's index of it) is KV blocks (default 2,000,000,
# 32 M tokens: a large fleet's): with a smaller one the index evicts the
# flood's blocks, and withdraws their routes, before the map is full, and
# the victim's routes go with its blocks evicted from the backend's shared
# cache, shares or not (the backends' caches are not shared out).
#   KV=N scripts/bench-tenant-flood.sh [FLOOD]   (default 300000)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$HERE/../build}
FLOOD=${1:-300000}
KV=${KV:-2000000}
source "$HERE/bench-lib.sh"
bench_setup tenant-flood
bench_start_sims 1 --time-scale 0 --kv-blocks "$KV"

cat >"$TMP/victim.py" <<'PY'
# victim.py PORT N: N prompts of 64 blocks (5 routes each: 4, 8, 16, 32,
# 64 blocks) from 127.0.0.2, one after another; prints how many ended.
import socket, struct, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket()
s.bind(("127.0.0.2", 0))
s.connect(("127.0.0.1", port))
ends, data = 0, b''
for i in range(n):
    prompt = (f"victim prompt {i} " * 400).encode()[:4096]
    s.sendall(struct.pack('>IBBHHHIQQQIIIIQ', 0x4b565331, 1, 1, 0, 64, 0, len(prompt), i + 1,
                          0, 0, 0, 0, 1, 0, 0) + prompt)
    while True:
        data += s.recv(65536)
        t = None
        while len(data) >= 64 and len(data) >= 64 + struct.unpack('>I', data[12:16])[0]:
            t, pl = data[5], struct.unpack('>I', data[12:16])[0]
            data = data[64 + pl:]
            if t in (3, 4):
                ends += t == 3
                break
        if t in (3, 4):
            break
print(ends)
PY
victim_routes() {
	bpftool map dump pinned "$PIN/routes" -j | jq '[.[] | select(.formatted.value.tenant == 2)] | length'
}
all_routes() {
	bpftool map dump pinned "$PIN/routes" -j | jq 'length'
}

for shares in off auto; do
	rm -f "$TMP/gw.port"
	"$BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$TMP/gw.port" --pin-dir "$PIN" \
		"${BACKENDS[@]}" --backend-kv-blocks "$KV" --tenant-routes "$shares" --ctl-rate 0 \
		--tenant-source 127.0.0.1=222 --tenant-source 127.0.0.2=111 2>"$TMP/gw-$shares.log" &
	gw=$!
	PIDS+=($gw)
	bench_wait_file "$TMP/gw.port"
	port=$(cat "$TMP/gw.port")
	python3 "$TMP/victim.py" "$port" 4 >/dev/null
	before=$(victim_routes)
	start=$SECONDS
	"$BUILD/kvsplice-bench" live --connect "127.0.0.1:$port" -n "$FLOOD" -k 8 -d 16 \
		--prefixes 0 --suffix-tokens 64 -m 1 --fleet 1 >"$TMP/flood-$shares.txt" 2>&1 ||
		{ echo "flood failed:"; tail -5 "$TMP/flood-$shares.txt"; }
	secs=$((SECONDS - start))
	after=$(victim_routes)
	total=$(all_routes)
	share=$(bpftool map dump pinned "$PIN/route_shares" -j |
		jq '.[] | select(.formatted.key == 1) | .formatted.value | "\(.routes) of \(.share), refused \(.refused), trimmed \(.trimmed)"')
	echo "tenant-routes $shares: flood of $FLOOD prompts in ${secs}s; victim's routes $before before, $after after; routes in the map $total; flooder's share: $share"
	kill "$gw"
	wait "$gw" 2>/dev/null || true
done
