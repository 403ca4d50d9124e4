#!/usr/bin/env bash
# TTFT p90 / p99 of one `kvsplice-bench sim` run per quarter of its
# requests by arrival, per policy (docs/EVALUATION.md, "The cold start in
# the overload cells"): what a whole run's percentiles mix, a start with
# empty caches and the running fleet after it.
#
#   scripts/sim-quarters.sh BUILD SIM-OPTIONS...
#   e.g. scripts/sim-quarters.sh build --workload contexts --backends 3 \
#        --requests 4000 --rate 11.3438 --seed 1 --policies sglang,kvsplice
# Percentiles by nearest rank (the value at floor(n x q) of the sorted n).
set -euo pipefail

BUILD=${1:?usage: sim-quarters.sh BUILD SIM-OPTIONS...}
shift
dump=$(mktemp /tmp/sim-quarters.XXXXXX)
trap 'rm -f "$dump"' EXIT
"$BUILD/kvsplice-bench" sim "$@" --dump "$dump" --json >/dev/null
python3 - "$dump" <<'PY'
import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))


def pct(t, q):
    t = sorted(t)
    return t[min(len(t) - 1, int(len(t) * q))]


print('policy: whole run | quarters 1-4 | after the first (p90 / p99 ms)')
for pol in dict.fromkeys(x['policy'] for x in rows):
    r = [x for x in rows if x['policy'] == pol]
    n = len(r)

    def part(lo, hi):
        t = [float(x['ttft_ms']) for x in r if lo <= int(x['request']) < hi]
        return '%.0f / %.0f' % (pct(t, .9), pct(t, .99))
    quarters = ', '.join(part(q * n // 4, (q + 1) * n // 4) for q in range(4))
    print('%s: %s | %s | %s' % (pol, part(0, n), quarters, part(n // 4, n)))
PY
