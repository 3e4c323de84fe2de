// OffsetCommit v5 and OffsetFetch v4: committed consumer-group offsets, kept with the group.
import { type Reader, Writer } from '../codec.ts';
import { KafkaErrorCode } from '../errors.ts';
import type { ApiSpec, RequestContext } from './types.ts';

function handleCommit(ctx: RequestContext, r: Reader): Writer {
  const { state } = ctx;
  const groupId = r.string();
  const generationId = r.int32();
  const memberId = r.string();
  const topics = r.array((t) => ({
    name: t.string(),
    partitions: t.array((p) => ({ index: p.int32(), offset: p.int64(), metadata: p.nullableString() })),
  }));
  const groupError = state.groups.canCommit(groupId, generationId, memberId);
  const w = new Writer().int32(0);
  w.array(topics, (w, t) => {
    w.string(t.name);
    w.array(t.partitions, (w, p) => {
      let code = groupError;
      if (code === 0 && state.partition(t.name, p.index) === undefined) {
        code = KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION;
      }
      if (code === 0)
        state.groups.commit(groupId, t.name, p.index, { offset: p.offset, metadata: p.metadata });
      w.int32(p.index).int16(code);
    });
  });
  return w;
}

function handleFetch(ctx: RequestContext, r: Reader): Writer {
  const { state } = ctx;
  const groupId = r.string();
  const requested = r.nullableArray((t) => ({ name: t.string(), partitions: t.array((p) => p.int32()) }));
  const committed = state.groups.committed(groupId);
  // A null topic list asks for every committed offset of the group.
  const topics =
    requested ?? [...committed].map(([name, byPartition]) => ({ name, partitions: [...byPartition.keys()] }));
  const w = new Writer().int32(0);
  w.array(topics, (w, t) => {
    w.string(t.name);
    w.array(t.partitions, (w, index) => {
      const c = committed.get(t.name)?.get(index);
      // No commit yet: offset -1 and empty metadata, without an error.
      w.int32(index)
        .int64(c?.offset ?? -1)
        .nullableString(c ? c.metadata : '')
        .int16(0);
    });
  });
  w.int16(0);
  return w;
}

export const offsetCommit: ApiSpec = {
  key: 8,
  name: 'OffsetCommit',
  minVersion: 5,
  maxVersion: 5,
  handle: handleCommit,
};
export const offsetFetch: ApiSpec = {
  key: 9,
  name: 'OffsetFetch',
  minVersion: 4,
  maxVersion: 4,
  handle: handleFetch,
};
