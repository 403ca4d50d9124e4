#!/usr/bin/env bash
# kvsplicectl routes: counts and lists the routes map by hits (--limit,
# --json), marks void routes (a backend's routes leave the map with it),
# and `routes flush`
# empties it - the kernel then sends each prompt to the controller once
# more, which installs its routes again, and the answers stay right.
# kvsplicectl's usage errors, and its failures with --json (an object on
# stdout).
# Also: `make install` lays out the programs, docs, the systemd units
# (where PREFIX says) and the configuration file the unit reads.
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.005
kvs_start_sim B --time-scale 0.005
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }

kvs_bench -n 120 -k 2 --prefixes 6 --prefix-tokens 1024 --json >/dev/null || kvs_fail "load failed"
r=$(ctl routes --limit 3 --json)
n=$(jget "$r" .routes)
assert_eq "routes counted = entries in the map" "$n" "$(bpftool map dump pinned "$KVS_PIN/routes" -j | jq length)"
assert_eq "routes listed with --limit 3" "$(jget "$r" '.top | length')" 3
top=$(jget "$r" '.top[0].hits')
assert_ge "hits of the busiest route" "$top" 10
sorted=$(jget "$r" '[.top[].hits] | . == (sort | reverse)')
assert_eq "listed by hits, most first" "$sorted" true
assert_eq "all current" "$(jget "$r" '[.top[].current] | all')" true
txt=$(ctl routes --limit 3)
grep -q "routes; top 3 by hits" <<<"$txt" || kvs_fail "text output: $txt"

# A backend leaves: its routes are void at once, and deleted from the map.
kill "${KVS_PIDS[0]}"
kvs_wait_backend 0 down >/dev/null
kvs_wait_for "A's routes deleted after it left" \
	'[ "$(ctl routes --limit 1000000 --json | jq "[.top[] | select(.backend == 0)] | length")" = 0 ]' 10
# A void route the deletion missed (one a verdict installed as they were
# withdrawn) is shown so: here one of B's, made void.
kvs_void_routes '[.[] | select(.formatted.value.backend == 1)][0]'
void=$(ctl routes --limit 1000000 --json | jq '[.top[] | select(.current | not)] | length')
assert_eq "a void route shown void" "$void" 1
n=$(jget "$(ctl routes --json)" .routes)

f=$(ctl routes flush --json)
assert_eq "routes flushed" "$(jget "$f" .flushed)" "$n"
assert_eq "routes left" "$(jget "$(ctl routes --json)" .routes)" 0
s0=$(kvs_stats)
out=$(kvs_bench -n 60 -k 2 --prefixes 6 --prefix-tokens 1024 --json) || kvs_fail "after the flush: $out"
assert_eq "requests ok after a flush" "$(jget "$out" .ok)" 60
assert_ge "routes installed again" "$(jget "$(ctl routes --json)" .routes)" 6
if ctl routes bogus 2>/dev/null; then kvs_fail "'routes bogus' accepted"; fi
if ctl routes --limit 0 2>/dev/null; then kvs_fail "--limit 0 accepted"; fi
# Usage errors exit 2 and name the word that is wrong: the first past those
# the command takes, or the command itself when there is none such.
# ctl_usage WHAT WANT_TEXT ARGS...
ctl_usage() {
	local what=$1 want=$2 out rc=0
	shift 2
	out=$(ctl "$@" 2>&1) || rc=$?
	assert_eq "$what: exit status" "$rc" 2
	grep -qF -- "$want" <<<"$out" || kvs_fail "$what: $out"
}
before=$(jget "$(ctl routes --json)" .routes)
ctl_usage "routes flush extra" "unexpected argument 'extra'" routes flush extra
assert_eq "routes after 'routes flush extra' (not flushed)" "$(jget "$(ctl routes --json)" .routes)" "$before"
ctl_usage "bogus extra" "unknown command 'bogus'" bogus extra
ctl_usage "stats extra" "unexpected argument 'extra'" stats extra
ctl_usage "--timeout 0" "--timeout" --timeout 0 status
# With --json, a failure is JSON on stdout as well, one object: what stderr
# says and the exit status, which is unchanged.
# ctl_json_error WHAT WANT_EXIT WANT_TEXT ARGS...
ctl_json_error() {
	local what=$1 want_rc=$2 want=$3 out rc=0
	shift 3
	out=$(ctl "$@" 2>"$KVS_TMP/err") || rc=$?
	assert_eq "$what: exit status" "$rc" "$want_rc"
	assert_eq "$what: JSON documents on stdout" "$(jq -s length <<<"$out" 2>&1)" 1
	assert_eq "$what: JSON exit" "$(jq .exit <<<"$out")" "$want_rc"
	jq -e --arg w "$want" '.error | contains($w)' <<<"$out" >/dev/null ||
		kvs_fail "$what: stdout: $out"
	grep -qF -- "$want" "$KVS_TMP/err" || kvs_fail "$what: stderr: $(cat "$KVS_TMP/err")"
}
ctl_json_error "--json bogus" 2 "unknown command 'bogus'" --json bogus extra
ctl_json_error "--json routes flush extra" 2 "unexpected argument 'extra'" routes flush extra --json
ctl_json_error "--json --limit 0" 2 "--limit: '0' is not 1..1000000" --json routes --limit 0
ctl_json_error "--json --frobnicate" 2 "unrecognized option '--frobnicate'" --frobnicate --json stats
ctl_json_error "--json backend drain (not a backend)" 1 "is not a backend" --json backend drain 127.0.0.1:9
ctl_json_error "--json, no maps" 1 "cannot open" --json --pin-dir "$KVS_PIN-none" stats
ctl_json_error "--json, no controller" 3 "no controller answers" --json --pin-dir "$KVS_PIN-none" reload
assert_eq "--json '\"' in the error (escaped)" \
	"$(ctl --json 'bo"gus' 2>/dev/null | jq -r .error)" "unknown command 'bo\"gus' (see --help)"
# -j in a cluster of short options, --json= (getopt refuses it), and
# getopt's own words without the path kvsplicectl was run as.
ctl_json_error "-jp DIR" 1 "cannot open" -jp "$KVS_PIN-none" stats
ctl_json_error "--json=1" 2 "doesn't allow an argument" --json=1 stats
ln -s "$KVS_BUILD/kvsplicectl" "$KVS_TMP/kctl"
assert_eq "--json, run as another path: getopt's error" \
	"$("$KVS_TMP/kctl" --json --frobnicate stats 2>/dev/null | jq -r .error)" \
	"unrecognized option '--frobnicate'"
# What prints its JSON before it fails (status with the maps pinned and no
# answer on the socket) prints no second object.
rc=0
out=$(ctl --json --socket "$KVS_TMP/none.sock" status 2>/dev/null) || rc=$?
assert_eq "--json status, no answer: exit status" "$rc" 3
assert_eq "--json status, no answer: JSON documents" "$(jq -s length <<<"$out")" 1
assert_eq "--json status, no answer: its own object" "$(jq -r .controller <<<"$out")" "not answering"

# make install into a staging directory.
dest=$KVS_TMP/dest
make -s -C "$(dirname "$0")/../.." BUILD="$KVS_BUILD" DESTDIR="$dest" PREFIX=/usr install >/dev/null ||
	kvs_fail "make install failed"
for f in usr/sbin/kvspliced usr/sbin/kvsplicectl usr/bin/kvsplice-sim usr/bin/kvsplice-bench; do
	[ -x "$dest/$f" ] || kvs_fail "make install: no $f"
done
[ -f "$dest/usr/share/doc/kvsplice/RUNBOOK.md" ] || kvs_fail "make install: no runbook"
grep -q "^ExecStart=/usr/sbin/kvspliced \$KVSPLICED_ARGS" "$dest/lib/systemd/system/kvspliced.service" ||
	kvs_fail "unit's ExecStart: $(grep ExecStart "$dest/lib/systemd/system/kvspliced.service")"
grep -q "@" "$dest/lib/systemd/system/kvspliced.service" && kvs_fail "unsubstituted @VAR@ in the unit"
grep -q "^Type=notify" "$dest/lib/systemd/system/kvspliced.service" || kvs_fail "unit not Type=notify"
# The example configuration parses (its backends need not answer for that).
out=$("$dest/usr/sbin/kvspliced" --config "$dest/usr/share/doc/kvsplice/kvspliced.conf.example" \
	--check) || kvs_fail "example config: $out"
grep -q "configuration OK: 2 backends, listening on 0.0.0.0:7480" <<<"$out" || kvs_fail "check: $out"
grep -q -- "--takeover" <<<"$("$dest/usr/sbin/kvspliced" --help)" ||
	kvs_fail "installed binary does not run"
# The configuration file the unit reads is there, every backend commented
# out (it names none until the operator does), and a second install leaves
# the operator's file alone.
conf=$(sed -n 's/^Environment=KVSPLICED_ARGS=--config=//p' "$dest/lib/systemd/system/kvspliced.service")
assert_eq "the unit's config file" "$conf" /etc/kvsplice/kvspliced.conf
[ -f "$dest$conf" ] || kvs_fail "make install: no $conf"
out=$("$dest/usr/sbin/kvspliced" --config "$dest$conf" --check 2>&1) &&
	kvs_fail "installed config names a backend: $out"
grep -q "at least one backend is required" <<<"$out" || kvs_fail "installed config: $out"
out=$("$dest/usr/sbin/kvspliced" --config "$dest$conf" --backend 10.0.0.1:8000 --check) ||
	kvs_fail "installed config with a backend: $out"
echo "backend = 10.0.0.9:8000 # the operator's" >>"$dest$conf"
make -s -C "$(dirname "$0")/../.." BUILD="$KVS_BUILD" DESTDIR="$dest" PREFIX=/usr install >/dev/null ||
	kvs_fail "second make install failed"
grep -q "the operator's" "$dest$conf" || kvs_fail "make install overwrote $conf"
# PREFIX decides where the units go too, and what they run.
dest2=$KVS_TMP/dest2
make -s -C "$(dirname "$0")/../.." BUILD="$KVS_BUILD" DESTDIR="$dest2" PREFIX=/usr/local install \
	>/dev/null || kvs_fail "make install PREFIX=/usr/local failed"
unit=$dest2/usr/local/lib/systemd/system/kvspliced.service
[ -f "$unit" ] || kvs_fail "PREFIX=/usr/local: no $unit: $(find "$dest2" -name '*.service')"
[ -e "$dest2/lib" ] && kvs_fail "PREFIX=/usr/local: something in /lib: $(find "$dest2/lib")"
grep -q "^ExecStart=/usr/local/sbin/kvspliced \$KVSPLICED_ARGS" "$unit" ||
	kvs_fail "PREFIX=/usr/local: $(grep ExecStart "$unit")"
[ -f "$dest2/etc/kvsplice/kvspliced.conf" ] || kvs_fail "PREFIX=/usr/local: no config file"
echo "ok: make install lays out programs, docs, the systemd units (by PREFIX) and a config file"
echo "PASS test_ctl_routes"
