#!/usr/bin/env bash
# The commands the README and the RUNBOOK give work as written:
#  - the README's live trace replay (its simulators' flags and its bench
#    line, only the address, build dir and plot dir put in): the trace is
#    in the repository, and every request of it is answered, no busy line;
#  - no command signals gateways by process name (`kill -HUP $(pidof
#    kvspliced)` reloads every gateway on the host); the RUNBOOK's way to
#    signal one gateway reloads that one alone, and one started without
#    --config logs that it has nothing to reload;
#  - a live bench against real servers declares the true length.
source "$(dirname "$0")/lib.sh"
kvs_setup
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

bad=$(grep -nE 'pidof kvspliced|pkill[^|]*kvspliced|killall[^|]*kvspliced' README.md docs/*.md dist/* || true)
[ -z "$bad" ] || kvs_fail "commands that signal every gateway: $bad"
echo "ok: no command signals gateways by name"

# A live bench against real servers (--verify framing) declares the true
# length: without it every request asks its server for
# --declared-max-tokens (4,096), and the README's real-server run lost 51
# of 60 requests to its timeout. Continued lines are joined first.
bad=$(sed -e ':a' -e '/\\$/{N;s/\\\n//;ba}' README.md docs/RUNBOOK.md |
	grep -E 'kvsplice-bench live.*--verify framing' | grep -v -- '--declare-true-length' || true)
[ -z "$bad" ] || kvs_fail "a real-server bench without --declare-true-length: $bad"
echo "ok: real-server benches declare the true length"

# The README's trace: in the repository, where its commands say.
for f in $(grep -o 'traces/[A-Za-z0-9_.-]*\.jsonl' README.md | sort -u); do
	[ -r "$f" ] || kvs_fail "README names $f, not in the repository"
done
simflags=$(sed -n 's|^ *build/kvsplice-sim --port 9001 --id 1 \(.*\) &.*|\1|p' README.md)
[ -n "$simflags" ] || kvs_fail "no kvsplice-sim line in the README"
cmd=$(awk '/build\/kvsplice-bench live .*\\$/ { line = $0; sub(/\\$/, "", line); getline; print line $0 }' \
	README.md | grep -- "--trace")
[ -n "$cmd" ] || kvs_fail "no live trace command in the README"
echo "README: kvsplice-sim $simflags; $cmd"
# shellcheck disable=SC2086 # the README's flags, split as a shell would
kvs_start_sim A $simflags
# shellcheck disable=SC2086
kvs_start_sim B $simflags
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"
cmd=${cmd//build\//$KVS_BUILD/}
cmd=${cmd//127.0.0.1:7480/127.0.0.1:$GW_PORT}
cmd=$(sed "s|--plot [^ ]*|--plot $KVS_TMP/live|" <<<"$cmd")
n=$(sed -n 's/.* -n \([0-9]*\) .*/\1/p' <<<"$cmd")
out=$(eval "$cmd --json" 2>"$KVS_TMP/trace.err") ||
	kvs_fail "the README's trace replay failed: $(jq -c '{ok, errors, lost}' <<<"$out") $(tail -3 "$KVS_TMP/trace.err")"
assert_eq "README trace replay: answered" "$(jget "$out" .ok)" "$n"
assert_eq "README trace replay: busy lines" "$(grep -c busy "$KVS_TMP/trace.err" || true)" 0
ls "$KVS_TMP"/live/*.svg >/dev/null 2>&1 || kvs_fail "README trace replay: no plots in --plot's dir"

# One gateway's pid, as the RUNBOOK says, for a signal to it alone.
grep -q 'kill -HUP "$(kvsplicectl --pin-dir DIR status --json | jq .pid)"' docs/RUNBOOK.md ||
	kvs_fail "the RUNBOOK no longer says how to signal one gateway"
printf '[backends]\nbackend = 127.0.0.1:%s\n' "$SIM_PORT_A" >"$KVS_TMP/one.conf"
pin2=$KVS_PIN-2 pin3=$KVS_PIN-3
# Two more gateways: their pin dirs and sockets go too, whatever happens.
trap 'kvs_cleanup; rm -rf "$pin2" "$pin3"; rm -f /run/kvsplice/"$(basename "$pin2")".* /run/kvsplice/"$(basename "$pin3")".*' EXIT
"$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$KVS_TMP/gw2.port" --pin-dir "$pin2" \
	--config "$KVS_TMP/one.conf" 2>"$KVS_TMP/gw2.log" &
KVS_PIDS+=($!)
kvs_wait_file "$KVS_TMP/gw2.port"
rm -f "$KVS_TMP/gw.port"
"$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --port-file "$KVS_TMP/gw.port" --pin-dir "$pin3" \
	--config "$KVS_TMP/one.conf" 2>"$KVS_TMP/gw3.log" &
KVS_PIDS+=($!)
kvs_wait_file "$KVS_TMP/gw.port"
kill -HUP "$("$KVS_BUILD/kvsplicectl" --pin-dir "$pin2" status --json | jq .pid)"
kvs_wait_for "the gateway of $pin2 reloads" "grep -q event=reloaded '$KVS_TMP/gw2.log'"
"$KVS_BUILD/kvsplicectl" --pin-dir "$pin3" status >/dev/null || kvs_fail "third gateway gone"
grep -q "event=reloaded" "$KVS_TMP/gw3.log" && kvs_fail "the other gateway reloaded too"
echo "ok: the RUNBOOK's signal reaches one gateway"
# The first gateway has no --config: a SIGHUP has nothing to reload, and
# the log says so.
kill -HUP "$GW_PID"
kvs_wait_for "the gateway without --config says it has nothing to reload" \
	"grep -q 'level=info prog=kvspliced event=reload_skipped reason=\"started without --config FILE: nothing to reload\"' '$KVS_TMP/gw.log'"
echo "PASS test_docs_commands"
