/**
 * Reading back what the SQS sink stored, from a client of the test's own (never the relay's):
 * ReceiveMessage then DeleteMessageBatch until the queue is empty. A FIFO queue hands out a
 * group's messages in the order it stored them, and no later message of a group while an earlier
 * one is in flight, so the order read is the order stored per key.
 */
import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import type { LocalElasticMq } from '../../src/dev/local-elasticmq.ts';

/** ElasticMQ checks no signature; the relay's default chain finds these in the environment. */
export const ELASTICMQ_ENV = {
  AWS_ACCESS_KEY_ID: 'test',
  AWS_SECRET_ACCESS_KEY: 'test',
  AWS_REGION: 'elasticmq',
} as const;

export function readerFor(q: LocalElasticMq): SQSClient {
  return new SQSClient({
    endpoint: q.endpoint,
    region: 'elasticmq',
    credentials: { accessKeyId: 'reader', secretAccessKey: 'reader' },
  });
}

/** Every message of the queue, in the order received; the queue is empty afterwards. */
export async function drainQueue(client: SQSClient, url: string): Promise<Message[]> {
  const out: Message[] = [];
  let empty = 0;
  while (empty < 2) {
    const r = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: 120,
        WaitTimeSeconds: 0,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    const got = r.Messages ?? [];
    if (got.length === 0) {
      empty++;
      continue;
    }
    empty = 0;
    out.push(...got);
    await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: got.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
  }
  return out;
}

/** Messages stored and not yet received (visible + in flight). */
export async function queueLength(client: SQSClient, url: string): Promise<number> {
  const r = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(r.Attributes?.ApproximateNumberOfMessages ?? 0) +
    Number(r.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
  );
}
