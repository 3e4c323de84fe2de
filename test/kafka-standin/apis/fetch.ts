// Fetch v11, full fetches only (no incremental fetch sessions, KIP-227: the response's session id 0
// tells the client none was created). Long-polls like a broker: answers once min_bytes are available,
// on error, or after max_wait_ms.
import { type Reader, Writer } from '../codec.ts';
import { KafkaErrorCode } from '../errors.ts';
import type { BrokerState } from '../state.ts';
import type { ApiSpec, RequestContext } from './types.ts';

interface FetchPartition {
  readonly index: number;
  readonly fetchOffset: number;
  readonly maxBytes: number;
}

interface FetchTopic {
  readonly name: string;
  readonly partitions: readonly FetchPartition[];
}

interface PartitionData {
  readonly index: number;
  readonly errorCode: number;
  readonly highWatermark: number;
  readonly chunks: readonly Buffer[];
  readonly bytes: number;
}

interface Collected {
  readonly topics: readonly { name: string; partitions: PartitionData[] }[];
  readonly bytes: number;
  readonly batches: number;
  readonly hasError: boolean;
}

function collect(state: BrokerState, topics: readonly FetchTopic[], maxBytes: number): Collected {
  let bytes = 0;
  let batches = 0;
  let hasError = false;
  const out = topics.map((t) => ({
    name: t.name,
    partitions: t.partitions.map((p): PartitionData => {
      const failed = (errorCode: number): PartitionData => {
        hasError = true;
        return { index: p.index, errorCode, highWatermark: -1, chunks: [], bytes: 0 };
      };
      const injected = state.topicError(t.name, 'read');
      if (injected !== 0) return failed(injected);
      const log = state.partition(t.name, p.index);
      if (log === undefined) return failed(KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
      if (p.fetchOffset < 0 || p.fetchOffset > log.highWatermark) {
        return failed(KafkaErrorCode.OFFSET_OUT_OF_RANGE);
      }
      const limit = Math.max(0, Math.min(p.maxBytes, maxBytes - bytes));
      // KIP-74: the first batch of the response goes out even when larger than the limits.
      const read = log.read(p.fetchOffset, limit, bytes === 0);
      bytes += read.bytes;
      batches += read.chunks.length;
      return {
        index: p.index,
        errorCode: 0,
        highWatermark: log.highWatermark,
        chunks: read.chunks,
        bytes: read.bytes,
      };
    }),
  }));
  return { topics: out, bytes, batches, hasError };
}

/** Resolves when `ready()` holds after an append, after `ms`, or when the client disconnects. */
function waitForData(
  state: BrokerState,
  signal: AbortSignal,
  ms: number,
  ready: () => boolean,
): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      unsubscribe();
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const unsubscribe = state.onAppend(() => {
      if (ready()) done();
    });
    signal.addEventListener('abort', done);
    if (signal.aborted) done();
  });
}

async function handle(ctx: RequestContext, r: Reader): Promise<Writer> {
  const { state } = ctx;
  state.stats.fetchRequests++;
  r.int32(); // replica_id: always a consumer (-1) here
  const maxWaitMs = r.int32();
  const minBytes = r.int32();
  const maxBytes = r.int32();
  r.int8(); // isolation_level: without transactions both levels read the same data
  const sessionId = r.int32();
  r.int32(); // session_epoch
  const topics: FetchTopic[] = r.array((t) => ({
    name: t.string(),
    partitions: t.array((p) => {
      const index = p.int32();
      p.int32(); // current_leader_epoch: our only leader epoch is 0, nothing to fence
      const fetchOffset = p.int64();
      p.int64(); // log_start_offset: only followers send a real one
      return { index, fetchOffset, maxBytes: p.int32() };
    }),
  }));
  r.array((t) => [t.string(), t.array((p) => p.int32())]); // forgotten_topics_data: sessions only
  r.string(); // rack_id

  const w = new Writer();
  w.int32(0); // throttle_time_ms
  if (sessionId !== 0) {
    // We never hand out session ids, so any the client names is unknown.
    w.int16(KafkaErrorCode.FETCH_SESSION_ID_NOT_FOUND).int32(0).int32(0);
    return w;
  }

  let result = collect(state, topics, maxBytes);
  const immediate = result.bytes >= minBytes || result.hasError || topics.length === 0 || maxWaitMs <= 0;
  if (!immediate) {
    await waitForData(state, ctx.connectionClosed, maxWaitMs, () => {
      const c = collect(state, topics, maxBytes);
      return c.bytes >= minBytes || c.hasError;
    });
    result = collect(state, topics, maxBytes);
  }
  state.stats.fetchedBatches += result.batches;

  w.int16(0).int32(0); // error_code, session_id
  w.array(result.topics, (w, t) => {
    w.string(t.name);
    w.array(t.partitions, (w, p) => {
      const ok = p.errorCode === 0;
      w.int32(p.index)
        .int16(p.errorCode)
        .int64(p.highWatermark)
        .int64(p.highWatermark) // last_stable_offset: no open transactions, so the high watermark
        .int64(ok ? 0 : -1) // log_start_offset
        .int32(0) // aborted_transactions: none
        .int32(-1) // preferred_read_replica: read from the leader
        .int32(p.bytes);
      for (const c of p.chunks) w.raw(c);
    });
  });
  return w;
}

export const fetch: ApiSpec = { key: 1, name: 'Fetch', minVersion: 11, maxVersion: 11, handle };
