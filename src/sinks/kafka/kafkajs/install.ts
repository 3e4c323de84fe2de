import type { Kafka } from 'kafkajs';
import type { Logger } from '../../../observability/logger.ts';
import { patchedKafkaClass } from './client.ts';
import { type KafkajsPatchName, kafkajsVersion, missingInternals, TESTED_KAFKAJS } from './internals.ts';
import { installProduceEncoder } from './produce-hook.ts';
import { installRequestQueueCheck } from './request-queue.ts';

/** What each patch does, when it is off (the start-up log's words; README.md says more). */
const WITHOUT: Record<KafkajsPatchName, string> = {
  'send-messages':
    "kafkajs' own sendMessages is used: a partition whose leader moved mid-request may be reported sent without an acknowledgement (the sink's own partition check still refuses such a send)",
  'produce-encoder': 'records are encoded by kafkajs itself (slower, same bytes)',
  'request-queue': "its request queue's idle timer runs (1,000 wake-ups a second per connection)",
  'log-levels': "kafkajs' lines about an event's permanent refusal are logged at warn, not debug",
};

export interface KafkajsPatches {
  /** kafkajs' client class with the relay's sendMessages; null: kafkajs' own class. */
  Client: typeof Kafka | null;
  active: KafkajsPatchName[];
  inactive: { patch: KafkajsPatchName; missing: string[] }[];
}

let done: KafkajsPatches | null = null;

/**
 * The one place the relay's kafkajs patches are installed (each once per process): a patch whose
 * internals (internals.ts) are all as expected is installed, any other left out. Says at start,
 * in one line, which are active; a warning names each one left out, what is missing and what
 * that costs. Called by the Kafka sink's constructor.
 */
export function installKafkajsPatches(log: Logger): KafkajsPatches {
  const first = done === null;
  done ??= install();
  const version = kafkajsVersion();
  if (first) {
    log.info(
      { kafkajs: version, active: done.active, inactive: done.inactive.map((p) => p.patch) },
      `kafkajs ${version}: patches active: ${done.active.join(', ') || 'none'}`,
    );
    if (version !== TESTED_KAFKAJS)
      log.warn(
        { kafkajs: version, tested: TESTED_KAFKAJS },
        `kafkajs ${version} is not the version the relay's patches were tested with (${TESTED_KAFKAJS}): src/sinks/kafka/kafkajs/README.md says how to check an upgrade`,
      );
    for (const { patch, missing } of done.inactive)
      log.warn(
        { patch, missing },
        `kafkajs patch ${patch} is off: this kafkajs does not look as expected; ${WITHOUT[patch]}`,
      );
  }
  return done;
}

function install(): KafkajsPatches {
  const r: KafkajsPatches = { Client: null, active: [], inactive: [] };
  const attempt = (patch: KafkajsPatchName, run: () => boolean) => {
    const missing = missingInternals(patch);
    if (missing.length === 0 && run()) r.active.push(patch);
    else
      r.inactive.push({ patch, missing: missing.length > 0 ? missing : ['its own install check refused'] });
  };
  attempt('send-messages', () => {
    r.Client = patchedKafkaClass();
    return r.Client !== null;
  });
  attempt('produce-encoder', installProduceEncoder);
  attempt('request-queue', installRequestQueueCheck);
  // Read when log.ts loads (nothing to install): reported so that its absence is seen.
  attempt('log-levels', () => true);
  return r;
}
