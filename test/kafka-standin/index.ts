// Public surface of the Kafka wire-protocol stand-in (test infrastructure only).
export type { ApiName } from './apis/types.ts';
export { errorName, KafkaErrorCode } from './errors.ts';
export type { RecordHeader } from './record-batch.ts';
export type { Fault } from './server.ts';
export {
  type CommittedOffsetInfo,
  KafkaStandIn,
  type StandInStatsSnapshot,
  type StoredRecord,
} from './stand-in.ts';
export { DEFAULT_MAX_MESSAGE_BYTES, type StandInOptions, type StandInStats } from './state.ts';
