#!/usr/bin/env bash
# XDP admission on the gateway's interface, tested through a veth pair into
# a network namespace the test creates: the gateway listens on the host end
# (10.199.N.1) with --allow 10.199.N.0/24 --deny 10.199.N.3 --syn-rate 5
# --syn-burst 5. From the namespace: an allowed source connects and gets its
# request answered; a denied one and one outside the allow list never get a
# connection (their SYNs die in XDP); an allowed source opening 20
# connections at once gets 5 (the burst) and the other SYNs are dropped;
# every drop is counted by reason; on exit the program is detached.
source "$(dirname "$0")/lib.sh"
kvs_setup

N=$((RANDOM % 200 + 20))
NS=kvsadm$$
V0=kva$$
V1=kvb$$
cleanup_net() {
	ip netns del "$NS" 2>/dev/null || true
	ip link del "$V0" 2>/dev/null || true
}
trap 'kvs_cleanup; cleanup_net' EXIT
ip netns add "$NS"
ip link add "$V0" type veth peer name "$V1"
ip link set "$V1" netns "$NS"
ip addr add "10.199.$N.1/24" dev "$V0"
ip link set "$V0" up
ip -n "$NS" link set lo up
ip -n "$NS" addr add "10.199.$N.2/24" dev "$V1"
ip -n "$NS" addr add "10.199.$N.3/24" dev "$V1"
ip -n "$NS" addr add "10.199.$N.4/24" dev "$V1"
ip -n "$NS" addr add "10.200.$N.2/24" dev "$V1" # outside the allow list
ip -n "$NS" link set "$V1" up

kvs_start_sim A --time-scale 0.01
"$KVS_BUILD/kvspliced" --listen "10.199.$N.1:0" --port-file "$KVS_TMP/gw.port" \
	--pin-dir "$KVS_PIN" --backend "127.0.0.1:$SIM_PORT_A" --xdp-iface "$V0" \
	--allow "10.199.$N.0/24" --deny "10.199.$N.3" --syn-rate 5 --syn-burst 5 \
	2>"$KVS_TMP/gw.log" &
GW_PID=$!
KVS_PIDS+=($GW_PID)
kvs_wait_file "$KVS_TMP/gw.port"
GW_PORT=$(cat "$KVS_TMP/gw.port")
grep -q "event=xdp_attached iface=$V0" "$KVS_TMP/gw.log" || kvs_fail "XDP not attached"
grep -q xdp <<<"$(ip link show "$V0")" || kvs_fail "no XDP program on $V0"

# probe SRC COUNT: opens COUNT connections from SRC at once (0.8 s to
# connect); with COUNT 1 also sends a request and waits for its END.
# Prints how many connected (and, for one, "answered").
probe() {
	PYTHONPATH="$(dirname "$0")/../helpers" ip netns exec "$NS" \
		python3 - "10.199.$N.1" "$GW_PORT" "$1" "$2" <<'PY'
import selectors, socket, sys, time
import kvs1
host, port, src, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
socks = []
for _ in range(count):
    s = socket.socket()
    s.bind((src, 0))
    s.setblocking(False)
    s.connect_ex((host, port))
    socks.append(s)
sel = selectors.DefaultSelector()
for s in socks:
    sel.register(s, selectors.EVENT_WRITE)
connected, deadline = [], time.time() + 0.8
while len(connected) < count and time.time() < deadline:
    for key, _ in sel.select(timeout=max(0, deadline - time.time())):
        s = key.fileobj
        sel.unregister(s)
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
            connected.append(s)
out = str(len(connected))
if count == 1 and connected:
    s = connected[0]
    s.setblocking(True)
    s.settimeout(5)
    s.sendall(kvs1.request(b'hello admission ' * 8, 1, max_tokens=2))
    r = kvs1.Reader(s)
    try:
        while r.next().type != kvs1.END:
            pass
        out += " answered"
    except EOFError:
        pass
print(out)
PY
}

assert_eq "allowed source: connections, request answered" "$(probe "10.199.$N.2" 1)" "1 answered"
assert_eq "denied source: connections" "$(probe "10.199.$N.3" 1)" 0
assert_eq "source outside the allow list: connections" "$(probe "10.200.$N.2" 1)" 0
burst=$(probe "10.199.$N.4" 20)
assert_ge "SYN burst of 20 from one source: connected" "$burst" 5
assert_le "SYN burst of 20 from one source: connected" "$burst" 6

x=$(kvs_stats)
echo "xdp counters: $(jget "$x" '.xdp | tostring')"
assert_ge "drop_denied" "$(jget "$x" .xdp.drop_denied)" 1
assert_ge "drop_not_allowed" "$(jget "$x" .xdp.drop_not_allowed)" 1
assert_ge "drop_syn_rate" "$(jget "$x" .xdp.drop_syn_rate)" 14
assert_ge "SYNs passed" "$(jget "$x" .xdp.syn_passed)" 6
# Every admission map reads with named fields (the v6 lists are empty here:
# their BTF is checked).
kvs_btf_named xdp_allow_v4 kvs_lpm_v4 prefixlen .key.prefixlen
kvs_btf_named xdp_deny_v4 kvs_lpm_v4 addr .key.addr
kvs_btf_named xdp_allow_v6 kvs_lpm_v6 prefixlen
kvs_btf_named xdp_deny_v6 kvs_lpm_v6 addr
kvs_btf_named xdp_syn kvs_syn_bucket milli_tokens .value.milli_tokens
kvs_btf_named xdp_stats kvs_xdp_stats drop_syn_rate .values[0].value.drop_syn_rate

# Bad lists are refused at start, with the value named.
if msg=$("$KVS_BUILD/kvspliced" --backend 127.0.0.1:1 --xdp-iface lo --deny 10.0.0.0/33 2>&1); then
	kvs_fail "--deny 10.0.0.0/33 accepted"
fi
grep -q "'10.0.0.0/33' is not an address or CIDR" <<<"$msg" || kvs_fail "unexpected: $msg"

kill "$GW_PID"
wait "$GW_PID" || true
grep -q xdp <<<"$(ip link show "$V0")" && kvs_fail "XDP program left on $V0 after exit"
echo "ok: XDP detached on exit"
echo "PASS test_admission"
