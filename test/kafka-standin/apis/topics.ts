// CreateTopics v3 and DeleteTopics v1, with a single broker's validation rules.
import { type Reader, Writer } from '../codec.ts';
import { KafkaErrorCode } from '../errors.ts';
import { topicNameError } from '../log.ts';
import type { BrokerState } from '../state.ts';
import type { ApiSpec, RequestContext } from './types.ts';

interface CreatableTopic {
  readonly name: string;
  readonly numPartitions: number;
  readonly replicationFactor: number;
  readonly assignments: readonly { partition: number; replicas: number[] }[];
  readonly configs: readonly { name: string; value: string | null }[];
}

type Outcome = { errorCode: number; message: string | null };

function validate(
  state: BrokerState,
  t: CreatableTopic,
): Outcome & { partitions: number; maxMessageBytes?: number } {
  const fail = (errorCode: number, message: string) => ({ errorCode, message, partitions: 0 });
  const badName = topicNameError(t.name);
  if (badName) return fail(KafkaErrorCode.INVALID_TOPIC_EXCEPTION, badName);
  if (state.topics.has(t.name))
    return fail(KafkaErrorCode.TOPIC_ALREADY_EXISTS, `Topic '${t.name}' already exists.`);
  if (t.assignments.length > 0 && (t.numPartitions !== -1 || t.replicationFactor !== -1)) {
    return fail(
      KafkaErrorCode.INVALID_REQUEST,
      'both a replica assignment and partitions/replication factor given',
    );
  }
  for (const a of t.assignments) {
    if (a.replicas.length === 0 || a.replicas.some((id) => id !== state.nodeId)) {
      return fail(
        KafkaErrorCode.INVALID_REPLICA_ASSIGNMENT,
        `partition ${a.partition}: only broker ${state.nodeId} exists`,
      );
    }
  }
  const partitions =
    t.assignments.length > 0
      ? t.assignments.length
      : t.numPartitions === -1
        ? state.options.defaultPartitions
        : t.numPartitions;
  if (partitions < 1)
    return fail(KafkaErrorCode.INVALID_PARTITIONS, 'Number of partitions must be larger than 0.');
  const rf = t.replicationFactor === -1 ? 1 : t.replicationFactor;
  if (rf < 1)
    return fail(KafkaErrorCode.INVALID_REPLICATION_FACTOR, 'Replication factor must be larger than 0.');
  if (rf > 1 && t.assignments.length === 0) {
    return fail(
      KafkaErrorCode.INVALID_REPLICATION_FACTOR,
      `Replication factor: ${rf} larger than available brokers: 1.`,
    );
  }
  let maxMessageBytes: number | undefined;
  for (const c of t.configs) {
    if (c.name !== 'max.message.bytes' || c.value === null) continue; // other configs: accepted, no effect
    maxMessageBytes = Number(c.value);
    if (!Number.isInteger(maxMessageBytes) || maxMessageBytes < 0) {
      return fail(
        KafkaErrorCode.INVALID_CONFIG,
        `Invalid value ${c.value} for configuration max.message.bytes`,
      );
    }
  }
  return { errorCode: 0, message: null, partitions, maxMessageBytes };
}

function handleCreate(ctx: RequestContext, r: Reader): Writer {
  const { state } = ctx;
  const topics: CreatableTopic[] = r.array((t) => ({
    name: t.string(),
    numPartitions: t.int32(),
    replicationFactor: t.int16(),
    assignments: t.array((a) => ({ partition: a.int32(), replicas: a.array((x) => x.int32()) })),
    configs: t.array((c) => ({ name: c.string(), value: c.nullableString() })),
  }));
  r.int32(); // timeout_ms: creation is immediate
  const validateOnly = r.bool();
  const counts = new Map<string, number>();
  for (const t of topics) counts.set(t.name, (counts.get(t.name) ?? 0) + 1);

  const outcomes = topics.map((t): Outcome & { name: string } => {
    if ((counts.get(t.name) ?? 0) > 1) {
      return {
        name: t.name,
        errorCode: KafkaErrorCode.INVALID_REQUEST,
        message: 'topic named more than once',
      };
    }
    const v = validate(state, t);
    if (v.errorCode === 0 && !validateOnly) state.createTopic(t.name, v.partitions, v.maxMessageBytes);
    return { name: t.name, errorCode: v.errorCode, message: v.message };
  });

  const w = new Writer();
  w.int32(0); // throttle_time_ms
  w.array(outcomes, (w, o) => {
    w.string(o.name).int16(o.errorCode).nullableString(o.message);
  });
  return w;
}

function handleDelete(ctx: RequestContext, r: Reader): Writer {
  const { state } = ctx;
  const names = r.array((t) => t.string());
  r.int32(); // timeout_ms
  const w = new Writer();
  w.int32(0); // throttle_time_ms
  w.array(names, (w, name) => {
    w.string(name).int16(state.deleteTopic(name) ? 0 : KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
  });
  return w;
}

export const createTopics: ApiSpec = {
  key: 19,
  name: 'CreateTopics',
  minVersion: 3,
  maxVersion: 3,
  handle: handleCreate,
};
export const deleteTopics: ApiSpec = {
  key: 20,
  name: 'DeleteTopics',
  minVersion: 1,
  maxVersion: 1,
  handle: handleDelete,
};
