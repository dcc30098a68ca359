// Consume with npm rocketmq-client-nodejs (gRPC); one JSON line per delivery.
// --kind simple|push, --expect N acks, --fail-times K (first K deliveries of each message are
// refused: simple -> ChangeInvisibleDuration 1 s, push -> FAILURE), --timeout seconds,
// --ak/--sk: sign with these credentials (ACL).
'use strict';
const crypto = require('crypto');
const { SimpleConsumer, PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : dflt;
}

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n');
}

const silent = { info() {}, warn() {}, error() {}, debug() {} };

async function main() {
  const endpoint = arg('endpoint');
  const group = arg('group');
  const topic = arg('topic');
  const kind = arg('kind', 'simple');
  const expect = Number(arg('expect', '1'));
  const failTimes = Number(arg('fail-times', '0'));
  const deadline = Date.now() + Number(arg('timeout', '60')) * 1000;
  const seen = new Map();
  const acked = new Set();
  const describe = (m, n) => ({
    event: 'msg', id: m.messageId, topic: m.topic, tag: m.tag, keys: [...m.keys].sort(),
    props: Object.fromEntries(m.properties), attempt: m.deliveryAttempt, size: m.body.length,
    sha: crypto.createHash('sha256').update(m.body).digest('hex'), seen: n,
    corrupted: Boolean(m.corrupted), group: m.messageGroup || null, at: Date.now() / 1000,
  });
  const note = (m) => { const n = (seen.get(m.messageId) || 0) + 1; seen.set(m.messageId, n); return n; };
  const subscriptions = new Map([[topic, '*']]);
  const ak = arg('ak', '');
  const creds = ak ? { sessionCredentials: { accessKey: ak, accessSecret: arg('sk', '') } } : {};
  let consumer;
  if (kind === 'push') {
    consumer = new PushConsumer({
      endpoints: endpoint, namespace: '', consumerGroup: group, subscriptions, logger: silent,
      ...creds,
      messageListener: {
        async consume(m) {
          const n = note(m);
          emit(describe(m, n));
          if (n <= failTimes) return ConsumeResult.FAILURE;
          acked.add(m.messageId);
          return ConsumeResult.SUCCESS;
        },
      },
    });
    await consumer.startup();
    emit({ event: 'started' });
    while (acked.size < expect && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  } else {
    consumer = new SimpleConsumer({
      endpoints: endpoint, namespace: '', consumerGroup: group, subscriptions, logger: silent,
      awaitDuration: 5000, ...creds,
    });
    await consumer.startup();
    emit({ event: 'started' });
    while (acked.size < expect && Date.now() < deadline) {
      for (const m of await consumer.receive(16, 15000)) {
        const n = note(m);
        emit(describe(m, n));
        if (n <= failTimes) { await consumer.changeInvisibleDuration(m, 1000); continue; }
        await consumer.ack(m);
        acked.add(m.messageId);
      }
    }
  }
  await new Promise((r) => setTimeout(r, 500));
  await consumer.shutdown();
  emit({ event: 'done', acked: acked.size });
}

main().then(() => process.exit(0), (err) => {
  emit({ event: 'error', error: String(err && err.stack || err) });
  process.exit(1);
});
