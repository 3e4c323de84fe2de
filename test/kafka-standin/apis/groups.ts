// FindCoordinator v2 and the group membership APIs (JoinGroup v5, SyncGroup v3, Heartbeat v3,
// LeaveGroup v3). The state machine itself lives in ../groups.ts.
import { type Reader, Writer } from '../codec.ts';
import { KafkaErrorCode } from '../errors.ts';
import type { ApiSpec, RequestContext } from './types.ts';

const COORDINATOR_GROUP = 0;
const COORDINATOR_TRANSACTION = 1;

function handleFindCoordinator(ctx: RequestContext, r: Reader): Writer {
  const { state } = ctx;
  r.string(); // key: group or transactional id; this broker coordinates all of them
  const keyType = r.int8();
  const w = new Writer().int32(0);
  if (keyType !== COORDINATOR_GROUP && keyType !== COORDINATOR_TRANSACTION) {
    return w
      .int16(KafkaErrorCode.INVALID_REQUEST)
      .nullableString(`unknown key type ${keyType}`)
      .int32(-1)
      .string('')
      .int32(-1);
  }
  return w.int16(0).nullableString(null).int32(state.nodeId).string(state.options.host).int32(state.port);
}

async function handleJoin(ctx: RequestContext, r: Reader): Promise<Writer> {
  const req = {
    groupId: r.string(),
    sessionTimeoutMs: r.int32(),
    rebalanceTimeoutMs: r.int32(),
    memberId: r.string(),
    groupInstanceId: r.nullableString(),
    protocolType: r.string(),
    protocols: r.array((p) => ({ name: p.string(), metadata: Buffer.from(p.bytes()) })),
    clientId: ctx.header.clientId ?? '',
  };
  const res = await ctx.state.groups.join(req);
  const w = new Writer().int32(0).int16(res.errorCode).int32(res.generationId);
  w.string(res.protocolName).string(res.leaderId).string(res.memberId);
  w.array(res.members, (w, m) => {
    w.string(m.memberId).nullableString(m.groupInstanceId).bytes(m.metadata);
  });
  return w;
}

async function handleSync(ctx: RequestContext, r: Reader): Promise<Writer> {
  const groupId = r.string();
  const generationId = r.int32();
  const memberId = r.string();
  r.nullableString(); // group_instance_id: static membership is not implemented
  const assignments = new Map(r.array((a) => [a.string(), Buffer.from(a.bytes())] as const));
  const res = await ctx.state.groups.sync(groupId, generationId, memberId, assignments);
  return new Writer().int32(0).int16(res.errorCode).bytes(res.assignment);
}

function handleHeartbeat(ctx: RequestContext, r: Reader): Writer {
  const groupId = r.string();
  const generationId = r.int32();
  const memberId = r.string();
  r.nullableString(); // group_instance_id
  return new Writer().int32(0).int16(ctx.state.groups.heartbeat(groupId, generationId, memberId));
}

function handleLeave(ctx: RequestContext, r: Reader): Writer {
  const groupId = r.string();
  const members = r.array((m) => ({ memberId: m.string(), groupInstanceId: m.nullableString() }));
  const w = new Writer().int32(0).int16(0);
  w.array(members, (w, m) => {
    w.string(m.memberId).nullableString(m.groupInstanceId).int16(ctx.state.groups.leave(groupId, m.memberId));
  });
  return w;
}

export const findCoordinator: ApiSpec = {
  key: 10,
  name: 'FindCoordinator',
  minVersion: 2,
  maxVersion: 2,
  handle: handleFindCoordinator,
};
export const joinGroup: ApiSpec = {
  key: 11,
  name: 'JoinGroup',
  minVersion: 5,
  maxVersion: 5,
  handle: handleJoin,
};
export const heartbeat: ApiSpec = {
  key: 12,
  name: 'Heartbeat',
  minVersion: 3,
  maxVersion: 3,
  handle: handleHeartbeat,
};
export const leaveGroup: ApiSpec = {
  key: 13,
  name: 'LeaveGroup',
  minVersion: 3,
  maxVersion: 3,
  handle: handleLeave,
};
export const syncGroup: ApiSpec = {
  key: 14,
  name: 'SyncGroup',
  minVersion: 3,
  maxVersion: 3,
  handle: handleSync,
};
