#!/usr/bin/env bash
# Tenants bound to where their clients come from (--tenant-source
# CIDR=SALT): the gateway writes the tenant's salt into each request, so a
# client that sends another tenant's salt (the issue's probe read a
# victim's cached prompt from END cached_tokens, 8 of 8) gets none of that
# tenant's cache, while the same request from an unbound client shows what
# it would have read. Fronts (--front-source) are not bound. One backend,
# so that every request meets the same cache.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.01
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --front-source 127.0.0.4 \
	--tenant-source 127.0.0.2=111 --tenant-source 127.0.0.3/32=0xde \
	--tenant-source 127.0.0.4=444
cat >"$KVS_TMP/ask.py" <<'PY'
# ask.py PORT SOURCE SALT PROMPT_SEED: one request from SOURCE with SALT,
# prints the END's cached_tokens (or the ERROR).
import sys
import kvs1
port, src, salt, seed = int(sys.argv[1]), sys.argv[2], int(sys.argv[3], 0), sys.argv[4]
s = kvs1.connect(port, src)
s.sendall(kvs1.request((f"tenant secret {seed} " * 200).encode()[:2048], 1, salt=salt))
f = kvs1.Reader(s).until_end()
if f.type == kvs1.ERROR:
    sys.exit(f"ERROR {f.status}: {f.text()}")
print(f.end_cached_tokens())
PY
ask() { PYTHONPATH="$(dirname "$0")/../helpers" python3 "$KVS_TMP/ask.py" "$GW_PORT" "$@"; }

# The victim (tenant 0xde) sends its prompt with no salt of its own; the
# second time it is cached: the gateway wrote the same salt both times.
assert_eq "victim's first request: cached tokens" "$(ask 127.0.0.3 0 v)" 0
assert_ge "victim's second request: cached tokens" "$(ask 127.0.0.3 0 v)" 256
# Unbound, the victim's salt reads the victim's cache: the attack, and
# the proof that the victim's requests carried 0xde, not the 0 it sent.
assert_ge "unbound client with the victim's salt: cached tokens" "$(ask 127.0.0.1 0xde v)" 256
# Bound to tenant 111, the same request gets nothing of it.
assert_eq "tenant 111 sending the victim's salt: cached tokens" "$(ask 127.0.0.2 0xde v)" 0
# ...and its own requests share its own cache (the salt it was given,
# whatever they send).
assert_ge "tenant 111 again, salt 5: cached tokens (its own domain)" "$(ask 127.0.0.2 5 v)" 256
# A front is not bound (its CIDR is a tenant's too: the front counts).
assert_ge "front with the victim's salt: cached tokens" "$(ask 127.0.0.4 0xde v)" 256

if [ "${KVS_DATAPATH:-kernel}" = kernel ]; then
	t=$(bpftool map dump pinned "$KVS_PIN/tenants" -j)
	entry() { jq -r --argjson i "$1" ".[] | select(.formatted.key == \$i) | .formatted.value.$2" <<<"$t"; }
	assert_eq "tenants map: tenant 1's salt" "$(entry 1 salt)" 111
	assert_eq "tenants map: tenant 2's salt" "$(entry 2 salt)" 222
	assert_eq "tenants map: tenant 1's requests, another salt overwritten" \
		"$(entry 1 rewritten)/$(entry 1 requests)" 2/2
	assert_eq "tenants map: tenant 2's requests (no salt sent, overwritten)" \
		"$(entry 2 rewritten)/$(entry 2 requests)" 2/2
	assert_eq "tenants map: the front's tenant entry, unused" "$(entry 3 requests)" 0
fi

out=$("$KVS_BUILD/kvspliced" --tenant-source 10.0.0.0/8 --backend 127.0.0.1:1 2>&1) &&
	kvs_fail "a tenant source without a salt was accepted"
grep -q "is not CIDR=SALT" <<<"$out" || kvs_fail "tenant-source error: $out"
echo "PASS test_tenants"
