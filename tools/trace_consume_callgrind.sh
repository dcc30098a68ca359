#!/bin/bash
# Instructions per traced delivery of tools/trace_consume_cost.py (issue 15) under callgrind:
# the difference between runs of 10,000 and 30,000 deliveries / 20,000 (the start-up cancels
# out), traced and with the hooks skipped (the message construction); the traced part is
# their difference. Deterministic (PYTHONHASHSEED=0): the machine's load does not move it.
# Keeps the callgrind files of the 30,000-delivery traced run in $KEEP when set.
#
#   tools/trace_consume_callgrind.sh <src dir> [nokeys]      (about 3 minutes)
set -euo pipefail
src=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-$here/../.venv/bin/python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
trap 'tail -n 5 "$out"/log.* >&2' ERR
for mode in trace skip; do
    for n in 10000 30000; do
        # one BLAS thread: numpy's idle workers would add a varying count
        PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=$src valgrind --tool=callgrind \
            --callgrind-out-file="$out/cg.$mode.$n" "$python" "$here/trace_consume_cost.py" \
            "$n" "$mode" "$@" >"$out/stdout.$mode.$n" 2>"$out/log.$mode.$n"
    done
done
if [ -n "${KEEP:-}" ]; then cp "$out/cg.trace.30000" "$KEEP"; fi
"$python" - "$out" <<'PY'
import sys
out = sys.argv[1]
def total(mode, n):
    for line in open(f"{out}/cg.{mode}.{n}"):
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise SystemExit(f"no callgrind output for {mode} {n}")
per = {m: (total(m, 30000) - total(m, 10000)) / 20000 for m in ("trace", "skip")}
print(f"traced driver {per['trace']:,.0f}, hooks skipped {per['skip']:,.0f}, "
      f"traced part {per['trace'] - per['skip']:,.0f} instructions per delivery")
PY
