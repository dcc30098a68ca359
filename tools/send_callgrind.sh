#!/bin/bash
# Main-thread instructions per message of tools/send_cost.py (issue 18 item 2), under
# callgrind: the difference between a run of 640 and one of 2,560 messages, so the start-up
# (imports, broker load) cancels out. Deterministic: the load of the machine does not move it.
#
#   tools/send_callgrind.sh <src dir> single|batch|run      (about 4 minutes)
#
# ARIANE_COST_SETTLE=1 (passed on to send_cost.py) settles the collector as a broker does.
set -euo pipefail
src=$1
mode=$2
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-$here/../.venv/bin/python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for n in 640 2560; do
    PYTHONPATH=$src valgrind --tool=callgrind --separate-threads=yes \
        --callgrind-out-file="$out/cg.$n.%p" "$python" "$here/send_cost.py" "$n" 1 "$mode" \
        >/dev/null 2>"$out/log.$n"
done
"$python" - "$out" "$mode" <<'PY'
import glob, sys
out, mode = sys.argv[1], sys.argv[2]
def main_thread(n):
    for path in glob.glob(f"{out}/cg.{n}.*-01"):
        for line in open(path):
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    raise SystemExit(f"no callgrind output for {n}")
per = {"single": 1, "batch": 64, "run": 100}[mode]
msgs = (2560 // per - 640 // per) * per
print(f"{mode}: {(main_thread(2560) - main_thread(640)) / msgs:,.0f} instructions per message (main thread)")
PY
