#!/usr/bin/env bash
# KVS1 clients that hint a template many conversations share (the hint's
# documented use: docs/PROTOCOL.md, prefix_len) keep each conversation on
# its server. The kernel looked the hint up before the deeper checkpoints,
# so every later turn went to the template's holder: a conversation that
# the holder's bound had sent elsewhere came back, and recomputed its
# history there. Deeper routes now come first. 16 conversations at once,
# 4 turns each, on 2 servers.
# datapath: both (tests/run.sh runs it on the userspace data path too)
source "$(dirname "$0")/lib.sh"
kvs_setup

kvs_start_sims "A B" --time-scale 0.05
kvs_start_gw "${KVS_BACKENDS[@]}"
for i in 0 1; do
	[ "$(kvs_wait_backend $i up)" = up ] || kvs_fail "backend $i not up"
done

out=$(PYTHONPATH="$(dirname "$0")/../helpers" python3 - "$GW_PORT" <<'PY'
import sys
import threading
import kvs1

port = int(sys.argv[1])
template = ''.join('Rule %d: be helpful and exact. ' % i for i in range(14)).encode()
lines, errors = [], []


def conversation(c):
    try:
        s = kvs1.connect(port, timeout=120)
        rd = kvs1.Reader(s)
        prompt = template + ('Conversation %d asks. ' % c).encode() + b''.join(
            ('Detail %d of conversation %d matters. ' % (i, c)).encode() for i in range(7))
        prev = None
        for t in range(1, 5):
            s.sendall(kvs1.request(prompt, req_id=t, max_tokens=200, prefix_len=len(template)))
            answer = b''
            while True:
                f = rd.next()
                if f.type == kvs1.CHUNK:
                    answer += f.payload
                elif f.type == kvs1.END:
                    break
                else:
                    raise RuntimeError('conversation %d turn %d: frame type %d status %d: %s'
                                       % (c, t, f.type, f.status, f.text()))
            b = f.end_backend_id()
            lines.append((c, t, b, prev, f.end_cached_tokens()))
            prev = b
            prompt += answer + ('Question %d?' % t).encode()
        s.close()
    except Exception as e:  # reported below, failing the test
        errors.append('conversation %d: %r' % (c, e))


threads = [threading.Thread(target=conversation, args=(c,)) for c in range(1, 17)]
for th in threads:
    th.start()
for th in threads:
    th.join()
for e in errors:
    print('error:', e)
later = [x for x in lines if x[3] is not None]
print('later %d moved %d cached %d errors %d' % (len(later), sum(1 for x in later if x[2] != x[3]),
                                                 sum(x[4] for x in lines), len(errors)))
PY
) || kvs_fail "client failed: $out"
echo "$out"
res=$(tail -n 1 <<<"$out")
assert_eq "client errors" "$(awk '{ print $8 }' <<<"$res")" 0
assert_eq "later turns answered" "$(awk '{ print $2 }' <<<"$res")" 48
assert_le "later turns that moved (hint looked up first: 13-18)" "$(awk '{ print $4 }' <<<"$res")" 4
echo "PASS test_hint_turns"
