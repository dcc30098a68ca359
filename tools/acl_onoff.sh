#!/usr/bin/env bash
# Usage (from the repository root): flock /tmp/ariane-bench.lock tools/acl_onoff.sh [rounds]
# Starts two `ariane standalone` clusters on free ports (one with aclEnable=true and an admin
# account), runs `ariane bench producer` on three workloads, alternating off/on (order swapped
# every round), `rounds` rounds (default 3) of 6 s, and prints per run msg/s and the CPU per
# message of the bench client and of the broker process (µs). Stops if a cluster is gone, so
# a run never measures some other cluster that holds the port.
# ACL on/off throughput, alternating runs, one invocation (docs/benchmarks.md § ACL).
set -u
A=${ARIANE:-.venv/bin/ariane}
PY=${PYTHON:-.venv/bin/python}
ROUNDS=${1:-3}
D=$(mktemp -d); mkdir -p $D/home/conf
cat > $D/home/conf/plain_acl.yml <<YML
accounts:
  - accessKey: benchuser
    secretKey: bench-secret
    admin: true
YML
printf 'aclEnable=true\nrocketmqHome=%s\n' "$D/home" > $D/acl.conf
read -r NS1 BR1 NS2 BR2 < <($PY - <<'PY'
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
PY
)
$A standalone --data-dir $D/plain --namesrv-port $NS1 --broker-port $BR1 --proxy-port -1 > $D/plain.log 2>&1 & P1=$!
$A standalone --data-dir $D/acl --namesrv-port $NS2 --broker-port $BR2 --proxy-port -1 --broker-conf $D/acl.conf > $D/acl.log 2>&1 & P2=$!
sleep 8
B1=$(pgrep -P $P1 -f 'ariane broker'); B2=$(pgrep -P $P2 -f 'ariane broker')
alive() { kill -0 $P1 $P2 $B1 $B2 2>/dev/null; }
if [ -z "$B1" ] || [ -z "$B2" ] || ! alive; then
  echo "a cluster did not start:"; tail -5 $D/plain.log $D/acl.log; kill $P1 $P2 2>/dev/null; wait; rm -rf "$D"; exit 1
fi
W1="--size 1024 --async --concurrency 256"; W2="--size 128 --async --concurrency 256"; W3="--size 1024 --batch 64 --async --concurrency 16"
echo "ports off $NS1/$BR1, on $NS2/$BR2; columns: msg/s, client CPU µs/msg, broker CPU µs/msg"
cat /proc/loadavg
for r in $(seq 1 $ROUNDS); do
  i=0
  for w in "$W1" "$W2" "$W3"; do
    i=$((i+1))
    if [ $((r % 2)) = 1 ]; then modes="off on"; else modes="on off"; fi
    for mode in $modes; do
      if [ $mode = off ]; then ns=127.0.0.1:$NS1; bp=$B1; extra=""; else ns=127.0.0.1:$NS2; bp=$B2; extra="--access-key benchuser --secret-key bench-secret"; fi
      alive || { echo "a cluster stopped: see $D"; exit 1; }
      out=$($A bench producer -n $ns --topic Bench$i $w --duration 6 --json --broker-pid $bp $extra 2>/dev/null | tail -1)
      echo "round $r w$i $mode $(echo "$out" | python3 -c 'import sys,json; d=json.loads(sys.stdin.read()); print(round(d.get("msgs_per_s",0)), d.get("client_cpu_us_per_msg"), d.get("broker_cpu_us_per_msg"), "failed=%s" % d.get("failed"))' 2>/dev/null || echo "$out")"
    done
  done
  cat /proc/loadavg
done
kill $P1 $P2; wait; rm -rf "$D"
