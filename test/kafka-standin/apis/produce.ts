// Produce v7 (the newest kafkajs 2.2.4 speaks; v3-v7 share the request layout, v5+ add
// log_start_offset to the response).
import { type Reader, Writer } from '../codec.ts';
import { errorName, KafkaErrorCode } from '../errors.ts';
import { COMPRESSION_NAMES, validateProducedBatch } from '../record-batch.ts';
import type { BrokerState } from '../state.ts';
import type { ApiSpec, RequestContext } from './types.ts';

interface PartitionResult {
  readonly index: number;
  readonly errorCode: number;
  readonly baseOffset: number;
}

function producePartition(state: BrokerState, topicName: string, index: number, records: Buffer | null) {
  const fail = (code: number, reason: string): PartitionResult => {
    state.countRejected(code);
    state.options.log(`produce ${topicName}[${index}] rejected with ${errorName(code)}: ${reason}`);
    return { index, errorCode: code, baseOffset: -1 };
  };
  const injected = state.topicError(topicName, 'produce');
  if (injected !== 0) return fail(injected, 'injected with setTopicError');
  const topic = state.topics.get(topicName);
  const log = topic?.partitions[index];
  if (topic === undefined || log === undefined) {
    return fail(KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 'no such topic or partition');
  }
  if (records === null) return fail(KafkaErrorCode.INVALID_RECORD, 'null record set');
  const valid = validateProducedBatch(records, state.maxMessageBytes(topic));
  if (!valid.ok) return fail(valid.code, valid.reason);
  const result = log.append(records, valid.header);
  if (result.kind === 'error') return fail(result.code, result.reason);
  if (result.kind === 'duplicate') {
    state.stats.duplicateBatches++;
  } else {
    state.stats.producedBatches++;
    state.stats.producedRecords += valid.header.recordCount;
    state.stats.producedBytes += records.length;
    const codec = COMPRESSION_NAMES[valid.header.compression] ?? String(valid.header.compression);
    const byCodec = state.stats.producedBatchesByCompression;
    byCodec[codec] = (byCodec[codec] ?? 0) + 1;
  }
  return { index, errorCode: 0, baseOffset: result.baseOffset };
}

function handle(ctx: RequestContext, r: Reader): Writer | null {
  const { state } = ctx;
  state.stats.produceRequests++;
  r.nullableString(); // transactional_id: transactional batches are refused per batch anyway
  const acks = r.int16();
  r.int32(); // timeout_ms: a single in-memory replica never waits for acknowledgements
  const topics = r.array((t) => ({
    name: t.string(),
    partitions: t.array((p) => ({ index: p.int32(), records: p.nullableBytes() })),
  }));
  const acksValid = acks === -1 || acks === 0 || acks === 1;
  const results = topics.map((t) => ({
    name: t.name,
    partitions: t.partitions.map((p) =>
      acksValid
        ? producePartition(state, t.name, p.index, p.records)
        : { index: p.index, errorCode: KafkaErrorCode.INVALID_REQUIRED_ACKS, baseOffset: -1 },
    ),
  }));
  state.notifyAppend();
  if (acks === 0) {
    // No response for acks=0; a broker signals a failed partition the only way left: by
    // closing the connection, so the client at least refreshes metadata and reconnects.
    if (results.some((t) => t.partitions.some((p) => p.errorCode !== 0))) ctx.closeConnection();
    return null;
  }

  const w = new Writer();
  w.array(results, (w, t) => {
    w.string(t.name);
    w.array(t.partitions, (w, p) => {
      const log = p.errorCode === 0 ? state.partition(t.name, p.index) : undefined;
      w.int32(p.index)
        .int16(p.errorCode)
        .int64(p.baseOffset)
        .int64(-1) // log_append_time: -1 because topics use CreateTime
        .int64(log ? 0 : -1); // log_start_offset: nothing is ever deleted
    });
  });
  w.int32(0); // throttle_time_ms
  return w;
}

export const produce: ApiSpec = { key: 0, name: 'Produce', minVersion: 7, maxVersion: 7, handle };
