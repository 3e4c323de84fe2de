import {
  CompressionTypes,
  Kafka,
  KafkaJSConnectionError,
  logLevel,
  type Message,
  type PartitionerArgs,
  Partitioners,
} from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/observability/logger.ts';
import { TransactionalPublisher } from '../../src/sinks/kafka/kafka-transactions.ts';
import { PartitionLedger } from '../../src/sinks/kafka/partition-acks.ts';
import { kafkaTransactions } from '../support/exactly-once.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';

/**
 * A commit whose answer was lost, when Kafka's transaction markers disagree: the events committed,
 * the progress record's part aborted. After a broker's kill -9, the progress topic's commit marker
 * can go missing (a hanging transaction; once in CI, with 46 events sent twice), and the runbook's
 * `kafka-transactions.sh abort` (docs/operations.md#hanging-transaction) then aborts that part of
 * a transaction whose events stay committed. Here the same state is made on the real broker with
 * Kafka's own admin client: the progress partition's part is aborted while the transaction is
 * open, then the relay's commit goes through and its answer is dropped. The relay must tell the
 * outcome from the events themselves, not send them again.
 */
let kafka: KafkaHarness;
beforeAll(async () => {
  kafka = await startKafka();
  await kafka.createTopic('outbox.event.Marked', 1);
});
afterAll(async () => {
  await kafka?.stop();
});

/** A kafkajs client whose producers' next commit runs `before` first and then loses its answer. */
function losingCommitAnswer(client: Kafka) {
  const arm: { before: (() => Promise<void>) | null; lost: number; failed?: unknown } = {
    before: null,
    lost: 0,
  };
  const wrapped = new Proxy(client, {
    get(target, prop, receiver) {
      if (prop !== 'producer') return Reflect.get(target, prop, receiver);
      return (config: Parameters<Kafka['producer']>[0]) => {
        const p = target.producer(config);
        const transaction = p.transaction.bind(p);
        p.transaction = async () => {
          const txn = await transaction();
          const commit = txn.commit.bind(txn);
          txn.commit = async () => {
            const before = arm.before;
            if (!before) return commit();
            arm.before = null;
            try {
              await before();
              await commit();
            } catch (e) {
              arm.failed = e;
              throw e;
            }
            arm.lost++;
            throw new KafkaJSConnectionError('Connection error: the answer to EndTxn was lost (test)');
          };
          return txn;
        };
        return p;
      };
    },
  });
  return { kafka: wrapped, arm };
}

function messages(ids: number[]): Message[] {
  return ids.map((id) => ({ key: 'k', value: String(id), event: { id: String(id) } }) as unknown as Message);
}

describe('exactly-once: a commit of unknown outcome whose progress record was aborted by hand', () => {
  it('takes the transaction as committed from its events: none is sent again, the progress carries their ids', async () => {
    const topic = kafka.topic('outbox.event.Marked');
    const progressTopic = kafka.topic('progress-markers');
    const client = new Kafka({ brokers: kafka.brokers, logLevel: logLevel.NOTHING });
    const { kafka: losing, arm } = losingCommitAnswer(client);
    const ledger = new PartitionLedger();
    const producerConfig = {
      createPartitioner: () => {
        const partition = Partitioners.DefaultPartitioner();
        return (args: PartitionerArgs) => {
          const p = partition(args);
          ledger.record(args.topic, p);
          return p;
        };
      },
    };
    const t = new TransactionalPublisher(
      losing,
      producerConfig,
      { transactionalId: `markers-${Date.now()}`, progressTopic, transactionTimeoutMs: 60_000 },
      silentLogger(),
    );
    const send = { timeout: 30_000, compression: CompressionTypes.None };
    // As the stream does: a batch whose publish failed is published again.
    const publish = async (ids: number[]) => {
      const batch = ids.map((id) => ({ event: { id: String(id) } }));
      for (let attempt = 1; ; attempt++) {
        try {
          await t.publish(batch, [[{ topic, messages: messages(ids) }]], true, send, ledger);
          return;
        } catch (e) {
          if (attempt >= 3) throw e;
        }
      }
    };
    await t.start();
    expect((await t.committed())?.published ?? '{}').toBe('{}');
    await publish([1, 2]);

    arm.before = async () => {
      // The transaction is open: its events and its progress record are written. Abort the
      // progress partition's part, as `kafka-transactions.sh abort` does for a hanging one.
      const described = await kafkaTransactions(['describe', kafka.brokers.join(','), progressTopic, '0']);
      const open = / transaction start (\d+) /.exec(
        described.out.split('\n').find((l) => !/ transaction start -1 /.test(l)) ?? '',
      );
      expect(open, described.out).not.toBeNull();
      const aborted = await kafkaTransactions([
        'abort',
        kafka.brokers.join(','),
        progressTopic,
        '0',
        open![1]!,
      ]);
      expect(aborted.status, aborted.out).toBe(0);
    };
    await publish([3, 4, 5]);
    expect(arm.failed).toBeUndefined();
    expect(arm.lost).toBe(1);
    await publish([6]);
    expect(t.fenced).toBeNull();

    const values = (await kafka.readAll('outbox.event.Marked')).map((r) => Number(r.value!.toString()));
    expect(values).toEqual([1, 2, 3, 4, 5, 6]);
    // PostgreSQL records what committed() returns at a stream start: the ids of the transaction
    // whose progress record was aborted are in it.
    const committed = await t.committed();
    expect(committed?.published).toMatch(/^\{.*\}$/);
    const covered = (committed?.published ?? '')
      .slice(1, -1)
      .split('),')
      .filter((r) => r !== '')
      .flatMap((r) => {
        const [lo, hi] = r.replace(/[[)]/g, '').split(',').map(Number);
        return Array.from({ length: hi! - lo! }, (_, i) => lo! + i);
      });
    for (const id of [3, 4, 5]) expect(covered).toContain(id);
    await t.stop();
  }, 180_000);
});
