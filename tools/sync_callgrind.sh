#!/bin/bash
# Instructions per message of tools/sync_cost.py (issue 18: SYNC_FLUSH single sends), under
# callgrind: the difference between a run of 4 and one of 12 waves of 1,000 sends, so the
# start-up (imports, broker load) cancels out; the event loop's thread and all threads.
#
#   tools/sync_callgrind.sh <src dir>      (about 3 minutes)
set -euo pipefail
src=$1
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-$here/../.venv/bin/python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for n in 4 12; do
    PYTHONPATH=$src valgrind --tool=callgrind --separate-threads=yes \
        --callgrind-out-file="$out/cg.$n.%p" "$python" "$here/sync_cost.py" "$n" 10 \
        >"$out/out.$n" 2>"$out/log.$n"
done
"$python" - "$out" <<'PY'
import glob, sys
out = sys.argv[1]
def counts(n):
    per = {}
    for path in glob.glob(f"{out}/cg.{n}.*"):
        for line in open(path):
            if line.startswith(("totals:", "summary:")):
                per[path.rsplit("-", 1)[1]] = int(line.split()[1])
                break
    return per
a, b = counts(4), counts(12)
msgs = (12 - 4) * 1000
print(f"sync: main thread {(b['01'] - a['01']) / msgs:,.0f} instructions per message,"
      f" all threads {(sum(b.values()) - sum(a.values())) / msgs:,.0f}")
for t in sorted(b):
    print(f"  thread {t}: {(b[t] - a.get(t, 0)) / msgs:,.0f}")
PY
cat "$out/out.12"
