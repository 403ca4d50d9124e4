#!/usr/bin/env bash
# An upgrade whose successor fails after it opened the pinned maps leaves
# the running controller's tenants as they were. The configuration file
# swaps the two tenants' lines (so each index would name the other's salt)
# and asks for an index the successor cannot allocate (the controller runs
# under a memory limit it inherits): the successor exits before the ACK and
# the old one carries on, its clients still bound by its indices. Had the
# successor written its salts into the tenants map already, tenant 1's
# clients would be sent with tenant 2's salt from then on. The same
# upgrade without the index then succeeds and publishes the swap, a client
# it adopts bound by its new index (staged on the way: never by an index
# holding the other tenant's salt).
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
conf=$KVS_TMP/kvspliced.conf
cat >"$conf" <<CONF
listen = 127.0.0.1:0
pin-dir = $KVS_PIN
backend = 127.0.0.1:$SIM_PORT_A
tenant-source = 127.0.0.2=111
tenant-source = 127.0.0.3=222
CONF
# 1 GB of address space: enough for the controller, not for an index of
# 2^28 blocks per backend (4 GB).
(
	ulimit -v 1048576
	exec "$KVS_BUILD/kvspliced" --config "$conf" --port-file "$KVS_TMP/gw.port"
) 2>"$KVS_TMP/gw.log" &
GW_PID=$!
KVS_PIDS+=($GW_PID)
kvs_wait_file "$KVS_TMP/gw.port"
ctl() { "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" "$@"; }
salt() {
	bpftool map dump pinned "$KVS_PIN/tenants" -j |
		jq -r --argjson i "$1" '.[] | select(.formatted.key == $i) | .formatted.value.salt'
}
# A client of tenant 111 connected across both upgrades: at the word, one
# REQUEST (its own salt 0), the END awaited.
cat >"$KVS_TMP/held.py" <<'PY'
import os, sys, time
import kvs1
port, go = int(sys.argv[1]), sys.argv[2]
s = kvs1.connect(port, "127.0.0.2", timeout=30)
print("connected", flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
s.sendall(kvs1.request(b"held across the upgrades " * 40, 1))
try:
    f = kvs1.Reader(s).until_end()
except EOFError:
    sys.exit("closed before the END")
if f.type == kvs1.ERROR:
    sys.exit("ERROR: " + f.text())
print("end", flush=True)
PY
PYTHONPATH="$(dirname "$0")/../helpers" python3 "$KVS_TMP/held.py" "$(cat "$KVS_TMP/gw.port")" "$KVS_TMP/go" >"$KVS_TMP/held.out" 2>&1 &
HELD=$!
KVS_PIDS+=($HELD)
kvs_wait_for "the held client connected" 'grep -qs connected "$KVS_TMP/held.out"'
assert_eq "tenant 1's salt before" "$(salt 1)" 111
assert_eq "tenant 2's salt before" "$(salt 2)" 222

cat >"$conf" <<CONF
listen = 127.0.0.1:0
pin-dir = $KVS_PIN
backend = 127.0.0.1:$SIM_PORT_A
tenant-source = 127.0.0.3=222
tenant-source = 127.0.0.2=111
backend-kv-blocks = 268435456
CONF
set +e
out=$(ctl upgrade 2>&1)
rc=$?
set -e
[ "$rc" -ne 0 ] || kvs_fail "the upgrade that cannot allocate its index succeeded: $out"
kvs_wait_for "the old controller's word on the failed upgrade" \
	"grep -q event=upgrade_failed '$KVS_TMP/gw.log'"
assert_eq "controller after the failed upgrade" "$(jget "$(ctl status --json)" .pid)" "$GW_PID"
# ...holding its pin directory's lock again (the successor had it when the
# hand-over failed), so that no other controller starts there.
kvs_wait_for "the old controller holding the pin lock again" '! flock -n "$KVS_PIN" true'
assert_eq "tenant 1's salt after the failed upgrade" "$(salt 1)" 111
assert_eq "tenant 2's salt after the failed upgrade" "$(salt 2)" 222

# The same swap with an index it can allocate: the successor takes over
# and its tenants are the map's.
sed -i '/^backend-kv-blocks/d' "$conf"
out=$(ctl upgrade) || kvs_fail "upgrade: $out"
NEW=$(jget "$(ctl status --json)" .pid)
KVS_PIDS+=($NEW)
[ "$NEW" != "$GW_PID" ] || kvs_fail "upgrade: still pid $GW_PID: $out"
assert_eq "tenant 1's salt after the upgrade" "$(salt 1)" 222
assert_eq "tenant 2's salt after the upgrade" "$(salt 2)" 111
# The client adopted is bound by its new index (its request counted
# there), and the staging copy the swap went through is gone.
touch "$KVS_TMP/go"
wait $HELD || kvs_fail "the held client: $(cat "$KVS_TMP/held.out")"
t=$(bpftool map dump pinned "$KVS_PIN/tenants" -j)
field() { jq -r --argjson i "$1" ".[] | select(.formatted.key == \$i) | .formatted.value.$2" <<<"$t"; }
assert_eq "requests of the held client, counted under tenant 2 (111)" "$(field 2 requests)" 1
assert_eq "requests counted under tenant 1 (222)" "$(field 1 requests)" 0
assert_eq "staging entries left (salts of entries 3 and 4)" "$(field 3 salt)/$(field 4 salt)" 0/0
grep -q "event=tenants_staged clients=1 entries=3-4" "$KVS_TMP/gw.log" ||
	kvs_fail "the swap was not staged: $(grep event=tenants_ "$KVS_TMP/gw.log")"
echo "PASS test_tenant_upgrade_failed"
