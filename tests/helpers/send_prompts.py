# send_prompts.py PORT SOURCE TAG N: N requests from address SOURCE,
# prompts TAG-0 .. TAG-(N-1) of 2048 bytes (32 blocks: 4 checkpoint routes
# each), one after another on one connection; prints how many got their
# END (an ERROR ends the run with its text). The tenant tests' client:
# SOURCE binds the request to a tenant (--tenant-source).
import sys
import kvs1
port, src, tag, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
s = kvs1.connect(port, src)
r, ends = kvs1.Reader(s), 0
for i in range(n):
    s.sendall(kvs1.request((f"{tag}-{i} " * 400).encode()[:2048], i + 1))
    f = r.until_end()
    if f.type == kvs1.ERROR:
        sys.exit(f"ERROR: {f.text()}")
    ends += 1
print(ends)
