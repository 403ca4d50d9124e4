#!/usr/bin/env bash
# What one metrics scrape costs the controller with a full routes map: one
# kvsplice-sim and the gateway (--metrics), the routes map filled with
# ROUTES void routes (tests/helpers/routes_fill), then SCRAPES scrapes one
# after another; the wall time per scrape (curl's) and the controller's CPU
# time per scrape (/proc, user + system; the scrape runs on its loop).
# VIA=status: `kvsplicectl status` instead of a scrape (it reports the same
# routes count), its wall time the command's whole run.
#
#   scripts/bench-scrape.sh [BUILD]     (root; docs/RUNBOOK.md, "Metrics")
set -euo pipefail

BUILD=${1:-build}
ROUTES=${ROUTES:-262144}
SCRAPES=${SCRAPES:-20}
VIA=${VIA:-metrics}
source "$(dirname "$0")/bench-lib.sh"
bench_setup bench-scrape

bench_start_sims 1 --time-scale 0.001
"$BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$TMP/gw.port" --pin-dir "$PIN" \
	"${BACKENDS[@]}" --metrics 127.0.0.1:0 --log-level info 2>"$TMP/gw.log" &
GW=$!
PIDS+=($GW)
bench_wait_file "$TMP/gw.port"
mport=$(grep -o 'event=metrics_listening addr=[^ ]* port=[0-9]*' "$TMP/gw.log" | grep -o '[0-9]*$')
"$BUILD/tests/helpers/routes_fill" "$PIN/routes" "$ROUTES"
# (curl's own time from connect to the last byte: the processes started
# around it are not the scrape's)
scrape() { curl -s -o "$TMP/m" -w '%{time_total}\n' "http://127.0.0.1:$mport/metrics"; }
if [ "$VIA" = status ]; then
	scrape() {
		local t0 t1
		t0=$(date +%s%N)
		"$BUILD/kvsplicectl" --pin-dir "$PIN" status >"$TMP/s"
		t1=$(date +%s%N)
		awk -v d=$((t1 - t0)) 'BEGIN { printf "%.6f\n", d / 1e9 }'
		sed -n 's/^routes *\([0-9]*\).*/kvsplice_routes \1/p' "$TMP/s" >"$TMP/m"
	}
fi
scrape >/dev/null # the first: whatever it caches
c0=$(bench_cpu_ms "$GW")
for _ in $(seq 1 "$SCRAPES"); do scrape; done >"$TMP/times"
c1=$(bench_cpu_ms "$GW")
echo "$VIA: $SCRAPES calls, routes map $(grep '^kvsplice_routes ' "$TMP/m" | cut -d' ' -f2) entries:" \
	"$(sort -g "$TMP/times" | awk '{ t[NR] = $1 } END { printf "median %.1f ms, max %.1f ms", \
	t[int((NR + 1) / 2)] * 1000, t[NR] * 1000 }') wall," \
	"$(awk -v c="$c1" -v b="$c0" -v n="$SCRAPES" 'BEGIN { printf "%.2f", (c - b) / n }')" \
	"ms controller CPU per call"
