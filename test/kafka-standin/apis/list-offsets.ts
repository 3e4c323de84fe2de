// ListOffsets v3: -1 = latest (high watermark), -2 = earliest (0: nothing is ever deleted),
// otherwise the first offset whose record timestamp is >= the given one.
import { type Reader, Writer } from '../codec.ts';
import { KafkaErrorCode } from '../errors.ts';
import type { ApiSpec, RequestContext } from './types.ts';

const LATEST = -1;
const EARLIEST = -2;

function handle(ctx: RequestContext, r: Reader): Writer {
  const { state } = ctx;
  r.int32(); // replica_id
  r.int8(); // isolation_level: without transactions both levels see the high watermark
  const topics = r.array((t) => ({
    name: t.string(),
    partitions: t.array((p) => ({ index: p.int32(), timestamp: p.int64() })),
  }));
  const w = new Writer();
  w.int32(0); // throttle_time_ms
  w.array(topics, (w, t) => {
    w.string(t.name);
    w.array(t.partitions, (w, p) => {
      const injected = state.topicError(t.name, 'read');
      const log = state.partition(t.name, p.index);
      const errorCode = injected || (log ? 0 : KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION);
      let timestamp = -1;
      let offset = -1;
      if (errorCode === 0 && log) {
        if (p.timestamp === LATEST) offset = log.highWatermark;
        else if (p.timestamp === EARLIEST) offset = 0;
        else {
          const found = log.offsetForTimestamp(p.timestamp);
          if (found) ({ offset, timestamp } = found);
        }
      }
      w.int32(p.index).int16(errorCode).int64(timestamp).int64(offset);
    });
  });
  return w;
}

export const listOffsets: ApiSpec = { key: 2, name: 'ListOffsets', minVersion: 3, maxVersion: 3, handle };
