// Metadata v6. One broker (node 0) that is controller, leader and only replica of every partition.
import { type Reader, Writer } from '../codec.ts';
import { KafkaErrorCode } from '../errors.ts';
import { type TopicLog, topicNameError } from '../log.ts';
import type { BrokerState } from '../state.ts';
import type { ApiSpec, RequestContext } from './types.ts';

type TopicEntry = { name: string; errorCode: number; topic?: TopicLog };

function resolveTopic(state: BrokerState, name: string, allowAutoCreate: boolean): TopicEntry {
  const injected = state.topicError(name, 'metadata');
  if (injected !== 0) return { name, errorCode: injected };
  if (topicNameError(name) !== null) return { name, errorCode: KafkaErrorCode.INVALID_TOPIC_EXCEPTION };
  let topic = state.topics.get(name);
  // Auto-creation needs both the broker setting and the client's consent (KIP-361).
  if (topic === undefined && state.options.autoCreateTopics && allowAutoCreate) {
    topic = state.createTopic(name, state.options.defaultPartitions);
  }
  if (topic === undefined) return { name, errorCode: KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION };
  return { name, errorCode: 0, topic };
}

function handle(ctx: RequestContext, r: Reader): Writer {
  const { state } = ctx;
  const requested = r.nullableArray((t) => t.string());
  const allowAutoCreate = r.bool();
  // A null list means every topic; like a broker, leave out the ones the client may not see.
  const entries: TopicEntry[] =
    requested === null
      ? [...state.topics.values()]
          .filter((t) => state.topicError(t.name, 'metadata') === 0)
          .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
          .map((topic) => ({ name: topic.name, errorCode: 0, topic }))
      : [...new Set(requested)].map((name) => resolveTopic(state, name, allowAutoCreate));

  const w = new Writer();
  w.int32(0); // throttle_time_ms
  w.array([state.nodeId], (w, id) => {
    w.int32(id).string(state.options.host).int32(state.port).nullableString(null);
  });
  w.nullableString(state.clusterId);
  w.int32(state.nodeId); // controller_id
  w.array(entries, (w, e) => {
    w.int16(e.errorCode).string(e.name).bool(false);
    w.array(e.topic?.partitions ?? [], (w, p) => {
      w.int16(0).int32(p.partition).int32(state.nodeId);
      w.int32(1).int32(state.nodeId); // replicas
      w.int32(1).int32(state.nodeId); // isr
      w.int32(0); // offline_replicas
    });
  });
  return w;
}

export const metadata: ApiSpec = { key: 3, name: 'Metadata', minVersion: 6, maxVersion: 6, handle };
