#!/usr/bin/env bash
# Who may touch the gateway, and what tenants can learn of each other:
#  - the pin directory is root's, mode 0700, its maps 0600: an unprivileged
#    user can neither list it nor read a map (bpftool, kvsplicectl), and is
#    told why;
#  - a pin directory that another user made first (as anybody can in a
#    world-writable /sys/fs/bpf) is refused at start, not used;
#  - cache salts never mix: prompts byte-identical to another tenant's,
#    under another salt, find none of its routes in the kernel and none of
#    its cached prefixes in the controller (placed as new prompts, by the
#    kernel or on the userspace path by the controller, served with nothing
#    cached), so routing reveals nothing of the other tenant.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sim A --time-scale 0.005
kvs_start_sim B --time-scale 0.005
kvs_start_gw --backend "127.0.0.1:$SIM_PORT_A" --backend "127.0.0.1:$SIM_PORT_B"

assert_eq "pin directory mode and owner" "$(stat -c '%a %U' "$KVS_PIN")" "700 root"
modes=$(stat -c '%a' "$KVS_PIN"/* | sort -u | tr '\n' ' ')
assert_eq "modes of the pinned maps" "$modes" "600 "
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
if as_nobody ls "$KVS_PIN" >/dev/null 2>&1; then kvs_fail "nobody can list the pin directory"; fi
if as_nobody bpftool map dump pinned "$KVS_PIN/routes" >/dev/null 2>&1; then
	kvs_fail "nobody can dump the routes"
fi
if msg=$(as_nobody "$KVS_BUILD/kvsplicectl" --pin-dir "$KVS_PIN" stats 2>&1); then
	kvs_fail "nobody can read the counters"
fi
grep -q "run as root" <<<"$msg" || kvs_fail "unprivileged kvsplicectl not told why: $msg"
echo "ok: an unprivileged user reads nothing, and is told why"

evil=/sys/fs/bpf/kvs-test-evil-$$
mkdir "$evil" && chown 65534:65534 "$evil"
if "$KVS_BUILD/kvspliced" --listen 127.0.0.1:0 --backend "127.0.0.1:$SIM_PORT_A" \
	--pin-dir "$evil" 2>"$KVS_TMP/evil.log"; then
	rmdir "$evil"
	kvs_fail "a pin directory owned by another user was used"
fi
rmdir "$evil"
grep -q "event=pin_dir_refused" "$KVS_TMP/evil.log" || kvs_fail "no reason given: $(cat "$KVS_TMP/evil.log")"
echo "ok: a pin directory owned by another user is refused"

# Tenant 1 warms 8 prefixes; tenant 2 then sends the same bytes.
WL=(--prefixes 8 --prefix-tokens 1024 --suffix-tokens 64 -k 1 --json)
kvs_bench -n 64 --salt 1 "${WL[@]}" >/dev/null || kvs_fail "tenant 1 failed"
s0=$(kvs_stats)
out=$(kvs_bench -n 8 --salt 2 "${WL[@]}") || kvs_fail "tenant 2 failed"
s1=$(kvs_stats)
d() { echo $(($(jget "$s1" "$1") - $(jget "$s0" "$1"))); }
if [ "${KVS_DATAPATH:-kernel}" = kernel ]; then
	# Every one placed: none followed a route (fast path = placed).
	assert_eq "tenant 2's first prompts placed as new by the kernel" "$(d .placed_cold)" 8
	assert_eq "tenant 2's first prompts that followed a route (tenant 1's)" \
		$(($(d .fast_path_frames) - $(d .placed_cold))) 0
else
	assert_eq "tenant 2's first prompts decided as new" "$(d .controller.decided_cold)" 8
fi
assert_eq "tokens tenant 2 found cached" "$(jget "$out" .cached_tokens)" 0
out=$(kvs_bench -n 8 --salt 2 "${WL[@]}") || kvs_fail "tenant 2 again failed"
assert_ge "tenant 2's own prompts, the second time: cached tokens" \
	"$(jget "$out" .cached_tokens)" $((8 * 1000))
echo "PASS test_isolation"
