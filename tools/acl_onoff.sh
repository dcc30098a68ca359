#!/usr/bin/env bash
# Usage (from the repository root): flock /tmp/ariane-bench.lock tools/acl_onoff.sh
# Starts two `ariane standalone` clusters (ports 23876/23911 and 24876/24911, one with
# aclEnable=true and an admin account), runs `ariane bench producer` on three workloads,
# alternating off/on (order swapped every round), three rounds of 6 s, and prints msg/s per run.
# ACL on/off throughput, alternating runs, one invocation (docs/benchmarks.md § ACL).
set -u
A=${ARIANE:-.venv/bin/ariane}
D=$(mktemp -d); mkdir -p $D/home/conf
cat > $D/home/conf/plain_acl.yml <<YML
accounts:
  - accessKey: benchuser
    secretKey: bench-secret
    admin: true
YML
printf 'aclEnable=true\nrocketmqHome=%s\n' "$D/home" > $D/acl.conf
$A standalone --data-dir $D/plain --namesrv-port 23876 --broker-port 23911 --proxy-port -1 > $D/plain.log 2>&1 & P1=$!
$A standalone --data-dir $D/acl --namesrv-port 24876 --broker-port 24911 --proxy-port -1 --broker-conf $D/acl.conf > $D/acl.log 2>&1 & P2=$!
sleep 8
W1="--size 1024 --async --concurrency 256"; W2="--size 128 --async --concurrency 256"; W3="--size 1024 --batch 64 --async --concurrency 16"
cat /proc/loadavg
for r in 1 2 3; do
  i=0
  for w in "$W1" "$W2" "$W3"; do
    i=$((i+1))
    if [ $((r % 2)) = 1 ]; then modes="off on"; else modes="on off"; fi
    for mode in $modes; do
      if [ $mode = off ]; then ns=127.0.0.1:23876; extra=""; else ns=127.0.0.1:24876; extra="--access-key benchuser --secret-key bench-secret"; fi
      out=$($A bench producer -n $ns --topic Bench$i $w --duration 6 --json $extra 2>/dev/null | tail -1)
      echo "round $r w$i $mode $(echo "$out" | python3 -c 'import sys,json; d=json.loads(sys.stdin.read()); print(round(d.get("msgs_per_s",0)))' 2>/dev/null || echo "$out")"
    done
  done
  cat /proc/loadavg
done
kill $P1 $P2; wait; rm -rf "$D"
