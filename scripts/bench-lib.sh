# Sourced by the benchmark scripts: a temporary directory, a pin directory,
# the processes they start, and the clean-up of all three on exit.
#   bench_setup NAME    sets TMP and PIN, and the trap (bench_cleanup_hook, if
#                       the script defines it, runs first)
#   bench_wait_file F   waits until F has content (a port file), or exits 1
#   bench_start_sims N [kvsplice-sim flags...]
#                       starts N simulators; sets BACKENDS to their
#                       --backend ADDR:PORT arguments
#   bench_cpu_ms PID    the CPU time (user + system) PID has used, in ms
PIDS=()

bench_setup() {
	BENCH_NAME=$1
	TMP=$(mktemp -d "/tmp/kvs-$1.XXXXXX")
	PIN=/sys/fs/bpf/kvs-$1-$$
	trap bench_cleanup EXIT
}

bench_cleanup() {
	if declare -F bench_cleanup_hook >/dev/null; then bench_cleanup_hook || true; fi
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$TMP"
	rm -rf "$PIN" 2>/dev/null || true
	rm -f "/run/kvsplice/$(basename "$PIN").sock" "/run/kvsplice/$(basename "$PIN").handover"
}

bench_wait_file() {
	for _ in $(seq 1 100); do [ -s "$1" ] && return 0; sleep 0.05; done
	echo "$BENCH_NAME: $1 did not appear" >&2
	exit 1
}

bench_start_sims() {
	local n=$1 i
	shift
	BACKENDS=()
	for i in $(seq 1 "$n"); do
		rm -f "$TMP/sim$i.port"
		"$BUILD/kvsplice-sim" --port-file "$TMP/sim$i.port" "$@" 2>"$TMP/sim$i.log" &
		PIDS+=($!)
	done
	for i in $(seq 1 "$n"); do
		bench_wait_file "$TMP/sim$i.port"
		BACKENDS+=(--backend "127.0.0.1:$(cat "$TMP/sim$i.port")")
	done
}

bench_cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) * 1000 / hz }' "/proc/$1/stat"; }
