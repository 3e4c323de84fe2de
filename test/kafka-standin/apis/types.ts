import type { Reader, Writer } from '../codec.ts';
import type { BrokerState } from '../state.ts';

export interface RequestHeader {
  readonly apiKey: number;
  readonly apiVersion: number;
  readonly correlationId: number;
  readonly clientId: string | null;
}

export interface RequestContext {
  readonly state: BrokerState;
  readonly header: RequestHeader;
  /** Aborted when the client's connection goes away, so long waits (Fetch) can stop early. */
  readonly connectionClosed: AbortSignal;
  /** Drops the client's connection once the handler returns (no response is sent). */
  readonly closeConnection: () => void;
}

/** Returns the response body, or null when the protocol says no response is sent (Produce acks=0). */
export type Handler = (ctx: RequestContext, body: Reader) => Writer | null | Promise<Writer | null>;

export type ApiName =
  | 'Produce'
  | 'Fetch'
  | 'ListOffsets'
  | 'Metadata'
  | 'OffsetCommit'
  | 'OffsetFetch'
  | 'FindCoordinator'
  | 'JoinGroup'
  | 'Heartbeat'
  | 'LeaveGroup'
  | 'SyncGroup'
  | 'ApiVersions'
  | 'CreateTopics'
  | 'DeleteTopics'
  | 'InitProducerId';

export interface ApiSpec {
  readonly key: number;
  readonly name: ApiName;
  readonly minVersion: number;
  readonly maxVersion: number;
  readonly handle: Handler;
}
