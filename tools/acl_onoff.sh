#!/usr/bin/env bash
# Usage (from the repository root):
#   flock /tmp/ariane-bench.lock tools/acl_onoff.sh [rounds] [seconds]
#   WORKLOADS="1" flock /tmp/ariane-bench.lock tools/acl_onoff.sh 12 4   # 1 KiB singles only
# Starts two `ariane standalone` clusters on free ports (one with aclEnable=true and an admin
# account), runs `ariane bench producer` on the workloads (WORKLOADS, default "1 2 3": 1 KiB
# singles, 128 B singles, batches of 64 x 1 KiB), each round an off/on pair per workload back
# to back with the order swapped every round, `rounds` rounds (default 12) of `seconds` s
# (default 4), and prints per run msg/s and the CPU per message of the bench client and of the
# broker process (µs); at the end tools/acl_onoff_summary.py prints per workload the on/off
# ratio of every round, their median (with a distribution-free interval), the pooled ratio and the CPU per
# message off and on. Stops if a cluster is gone, so a run never measures some other cluster
# that holds the port. RUNS_OUT=<file> keeps the raw runs.
# INTERLEAVE=1: one process per workload sends to both clusters in alternating slices of
# `seconds` s instead (tools/acl_interleave.py: warm producers, pairs a few seconds apart, no
# interpreter start per run, broker CPU from the threads' schedstat); e.g.
#   INTERLEAVE=1 WORKLOADS=1 flock /tmp/ariane-bench.lock tools/acl_onoff.sh 40 1.5
# CONTROL=1 (with INTERLEAVE=1): an A/A run, the second cluster without ACL and its producer
# unsigned: the "on/off" ratios then show what two like clusters differ by.
# ACL on/off throughput, alternating runs, one invocation (docs/benchmarks.md § ACL).
set -u
A=${ARIANE:-.venv/bin/ariane}
PY=${PYTHON:-.venv/bin/python}
ROUNDS=${1:-12}
SECONDS_PER_RUN=${2:-4}
WORKLOADS=${WORKLOADS:-1 2 3}
TOOLS=$(cd "$(dirname "$0")" && pwd)
D=$(mktemp -d); mkdir -p $D/home/conf
cat > $D/home/conf/plain_acl.yml <<YML
accounts:
  - accessKey: benchuser
    secretKey: bench-secret
    admin: true
YML
printf 'aclEnable=true\nrocketmqHome=%s\n' "$D/home" > $D/acl.conf
ACLCONF="--broker-conf $D/acl.conf"; [ -n "${CONTROL:-}" ] && ACLCONF=""
read -r NS1 BR1 NS2 BR2 < <($PY - <<'PY'
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
PY
)
$A standalone --data-dir $D/plain --namesrv-port $NS1 --broker-port $BR1 --proxy-port -1 > $D/plain.log 2>&1 & P1=$!
$A standalone --data-dir $D/acl --namesrv-port $NS2 --broker-port $BR2 --proxy-port -1 $ACLCONF > $D/acl.log 2>&1 & P2=$!
sleep 8
B1=$(pgrep -P $P1 -f 'ariane broker'); B2=$(pgrep -P $P2 -f 'ariane broker')
alive() { kill -0 $P1 $P2 $B1 $B2 2>/dev/null; }
if [ -z "$B1" ] || [ -z "$B2" ] || ! alive; then
  echo "a cluster did not start:"; tail -5 $D/plain.log $D/acl.log; kill $P1 $P2 2>/dev/null; wait; rm -rf "$D"; exit 1
fi
IWL=("" "1024 1 256" "128 1 256" "1024 64 16")  # size batch concurrency, for INTERLEAVE=1
WL=("" "--size 1024 --async --concurrency 256" "--size 128 --async --concurrency 256" "--size 1024 --batch 64 --async --concurrency 16")
NAME=("" "w1-1KiB-single" "w2-128B-single" "w3-batch64x1KiB")
RUNS=${RUNS_OUT:-$D/runs.txt}
: > "$RUNS"
echo "ports off $NS1/$BR1, on $NS2/$BR2; $ROUNDS rounds of ${SECONDS_PER_RUN} s, workloads $WORKLOADS"
echo "columns: round workload mode msg/s client-CPU-µs/msg broker-CPU-µs/msg failed"
cat /proc/loadavg
if [ -n "${INTERLEAVE:-}" ]; then
  for i in $WORKLOADS; do
    alive || { echo "a cluster stopped: see $D"; exit 1; }
    $PY "$TOOLS/acl_interleave.py" 127.0.0.1:$NS1 $B1 127.0.0.1:$NS2 $B2 $ROUNDS $SECONDS_PER_RUN ${NAME[$i]} ${IWL[$i]} ${CONTROL:+control} | tee -a "$RUNS"
    cat /proc/loadavg
  done
  ROUNDS=0
fi
for r in $(seq 1 $ROUNDS); do
  for i in $WORKLOADS; do
    if [ $((r % 2)) = 1 ]; then modes="off on"; else modes="on off"; fi
    for mode in $modes; do
      if [ $mode = off ]; then ns=127.0.0.1:$NS1; bp=$B1; extra=""; else ns=127.0.0.1:$NS2; bp=$B2; extra="--access-key benchuser --secret-key bench-secret"; fi
      alive || { echo "a cluster stopped: see $D"; exit 1; }
      out=$($A bench producer -n $ns --topic Bench$i ${WL[$i]} --duration $SECONDS_PER_RUN --json --broker-pid $bp $extra 2>/dev/null | tail -1)
      line=$(echo "$out" | $PY -c '
import sys, json
d = json.loads(sys.stdin.read()); n = d["sent"]
print(n, d["seconds"], d["client_cpu_us_per_msg"] * n / 1e6, d["broker_cpu_us_per_msg"] * n / 1e6, d["failed"])
print(round(d["msgs_per_s"]), d["client_cpu_us_per_msg"], d["broker_cpu_us_per_msg"], d["failed"])' 2>/dev/null)
      if [ -z "$line" ]; then echo "round $r ${NAME[$i]} $mode: no result: $out"; continue; fi
      echo "$r ${NAME[$i]} $mode $(echo "$line" | head -1)" >> "$RUNS"
      echo "round $r ${NAME[$i]} $mode $(echo "$line" | tail -1)"
    done
  done
  cat /proc/loadavg
done
echo "== summary (on/off: throughput of the signed runs over the unsigned ones)"
$PY "$TOOLS/acl_onoff_summary.py" "$RUNS"
kill $P1 $P2; wait; rm -rf "$D"
