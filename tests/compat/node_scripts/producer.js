// Send messages with npm rocketmq-client-nodejs (gRPC) and print one JSON line per message
// (runs with the machine's Node.js from its own folder; see tests/compat/conftest.py).
// Bodies are bodyOf(i, size), the same bytes as tests/support/grpc5.body_of.
'use strict';
const crypto = require('crypto');
const { Producer } = require('rocketmq-client-nodejs');
// apache.rocketmq.v2.TransactionResolution (the package does not export the enum)
const COMMIT = 1;
const ROLLBACK = 2;

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : dflt;
}

function bodyOf(i, size) {
  const seed = crypto.createHash('sha256').update(`body-${i}`).digest();
  const out = Buffer.alloc(size);
  for (let k = 0; k < size; k += seed.length) seed.copy(out, k, 0, Math.min(seed.length, size - k));
  return out;
}

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n');
}

const silent = { info() {}, warn() {}, error() {}, debug() {} };

async function main() {
  const endpoint = arg('endpoint');
  const topic = arg('topic');
  const count = Number(arg('count', '10'));
  const mode = arg('mode', 'normal');
  const sizes = arg('sizes', '16').split(',').map(Number);
  const checked = [];
  const checker = {
    async check(view) {
      const i = Number(view.properties.get('i'));
      checked.push(i);
      emit({ event: 'checked', i, id: view.messageId });
      return i % 2 === 0 ? COMMIT : ROLLBACK;
    },
  };
  const producer = new Producer({
    endpoints: endpoint, namespace: '', topics: [topic], logger: silent,
    checker: mode === 'check' || mode === 'commit' ? checker : undefined,
  });
  await producer.startup();
  emit({ event: 'started' });
  for (let i = 0; i < count; i++) {
    const message = {
      topic, body: bodyOf(i, sizes[i % sizes.length]), tag: `Tag${i % 3}`, keys: [`key-${i}`],
      properties: new Map([['i', String(i)], ['utf', 'h\u00e9']]),
    };
    if (mode === 'fifo') message.messageGroup = `g${i % 3}`;
    if (mode === 'delay') message.deliveryTimestamp = new Date(Date.now() + Number(arg('delay-ms', '0')));
    if (mode === 'commit' || mode === 'check') {
      const tx = producer.beginTransaction();
      const receipt = await producer.send(message, tx);
      emit({ event: 'sent', i, id: receipt.messageId, tx: receipt.transactionId });
      if (mode === 'commit') await tx.commit();
      continue;
    }
    const receipt = await producer.send(message);
    emit({ event: 'sent', i, id: receipt.messageId, offset: receipt.offset, at: Date.now() / 1000 });
  }
  const linger = Number(arg('linger', '0')) * 1000;
  const deadline = Date.now() + linger;
  while (Date.now() < deadline && !(mode === 'check' && checked.length >= count)) {
    await new Promise((r) => setTimeout(r, 100));
  }
  // the last answers (EndTransaction) go out after the checker returns
  if (mode === 'check') await new Promise((r) => setTimeout(r, 1500));
  await producer.shutdown();
  emit({ event: 'done' });
}

main().then(() => process.exit(0), (err) => {
  emit({ event: 'error', error: String(err && err.stack || err) });
  process.exit(1);
});
