import { createRequire, Module } from 'node:module';
import type { Kafka } from 'kafkajs';
import { createSendMessages } from './send-messages.ts';

/**
 * kafkajs' client class with the relay's own `sendMessages` (kafkajs/send-messages.ts: per-
 * partition acknowledgement accounting, the fix of the lost-partition retry bug, and the linear
 * grouping). kafkajs offers no option for it and its modules capture the function when they load,
 * so this loads a second copy of the producer chain (src/index.js → producer/index.js →
 * producer/messageProducer.js) that requires the replacement; every other module (cluster,
 * protocol, errors, consumer, admin) is the one already loaded, so errors keep their classes.
 * kafkajs' module cache is restored right after: everyone else who requires kafkajs gets it
 * unchanged. When anything is not as expected (another kafkajs layout), it returns null and the
 * caller uses kafkajs' own class — the sink's own acknowledgement check (partition-acks.ts) still
 * refuses a send whose responses leave a partition out.
 */

const require = createRequire(import.meta.url);
let loaded: typeof Kafka | null | undefined;

export function patchedKafkaClass(): typeof Kafka | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  try {
    const send = require.resolve('kafkajs/src/producer/sendMessages.js');
    const chain = [
      'kafkajs/src/producer/messageProducer.js',
      'kafkajs/src/producer/index.js',
      'kafkajs/src/index.js',
    ].map((p) => require.resolve(p));
    if (typeof require(send) !== 'function') return null;
    for (const p of chain) require(p);
    const cache = require.cache;
    const saved = [send, ...chain].map((p) => cache[p]);
    try {
      const replacement = new Module(send);
      replacement.filename = send;
      replacement.loaded = true;
      replacement.exports = createSendMessages;
      cache[send] = replacement;
      for (const p of chain) delete cache[p];
      const Fresh = require('kafkajs/src/index.js') as typeof Kafka;
      if (typeof Fresh === 'function' && typeof Fresh.prototype.producer === 'function') loaded = Fresh;
    } finally {
      [send, ...chain].forEach((p, i) => {
        cache[p] = saved[i];
      });
    }
  } catch {
    loaded = null;
  }
  return loaded;
}
