// Consumer-group coordinator, after Kafka's classic GroupCoordinator state machine:
//   Empty -> PreparingRebalance -> CompletingRebalance -> Stable -> PreparingRebalance ...
// A rebalance completes when every known member has (re)joined or the rebalance timeout fires; Stable
// members learn about a pending rebalance from Heartbeat/SyncGroup answering REBALANCE_IN_PROGRESS.
import { randomUUID } from 'node:crypto';
import { KafkaErrorCode } from './errors.ts';

type GroupState = 'Empty' | 'PreparingRebalance' | 'CompletingRebalance' | 'Stable';

export interface GroupProtocol {
  readonly name: string;
  readonly metadata: Buffer;
}

export interface JoinRequest {
  readonly groupId: string;
  readonly sessionTimeoutMs: number;
  readonly rebalanceTimeoutMs: number;
  readonly memberId: string;
  readonly groupInstanceId: string | null;
  readonly protocolType: string;
  readonly protocols: readonly GroupProtocol[];
  readonly clientId: string;
}

export interface JoinResult {
  readonly errorCode: number;
  readonly generationId: number;
  readonly protocolName: string;
  readonly leaderId: string;
  readonly memberId: string;
  readonly members: readonly { memberId: string; groupInstanceId: string | null; metadata: Buffer }[];
}

export interface SyncResult {
  readonly errorCode: number;
  readonly assignment: Buffer;
}

export interface CommittedOffset {
  readonly offset: number;
  readonly metadata: string | null;
}

interface Member {
  readonly memberId: string;
  groupInstanceId: string | null;
  sessionTimeoutMs: number;
  rebalanceTimeoutMs: number;
  protocolType: string;
  protocols: readonly GroupProtocol[];
  assignment: Buffer;
  awaitingJoin: ((r: JoinResult) => void) | null;
  awaitingSync: ((r: SyncResult) => void) | null;
  sessionTimer: NodeJS.Timeout | null;
}

interface Group {
  readonly id: string;
  state: GroupState;
  generationId: number;
  protocolType: string | null;
  protocolName: string | null;
  leaderId: string | null;
  readonly members: Map<string, Member>;
  /** Member ids handed out with MEMBER_ID_REQUIRED that have not joined yet. */
  readonly pendingMemberIds: Map<string, NodeJS.Timeout>;
  rebalanceTimer: NodeJS.Timeout | null;
  /** No join completes before this time (group.initial.rebalance.delay.ms for an empty group). */
  holdUntil: number;
  readonly offsets: Map<string, Map<number, CommittedOffset>>;
}

export interface GroupCoordinatorOptions {
  readonly initialRebalanceDelayMs: number;
  readonly minSessionTimeoutMs: number;
  readonly maxSessionTimeoutMs: number;
}

const EMPTY = Buffer.alloc(0);

function failedJoin(errorCode: number, memberId = ''): JoinResult {
  return { errorCode, generationId: -1, protocolName: '', leaderId: '', memberId, members: [] };
}

export class GroupCoordinator {
  private readonly groups = new Map<string, Group>();
  private readonly options: GroupCoordinatorOptions;

  constructor(options: GroupCoordinatorOptions) {
    this.options = options;
  }

  private group(id: string): Group {
    let g = this.groups.get(id);
    if (g === undefined) {
      g = {
        id,
        state: 'Empty',
        generationId: 0,
        protocolType: null,
        protocolName: null,
        leaderId: null,
        members: new Map(),
        pendingMemberIds: new Map(),
        rebalanceTimer: null,
        holdUntil: 0,
        offsets: new Map(),
      };
      this.groups.set(id, g);
    }
    return g;
  }

  join(req: JoinRequest): Promise<JoinResult> {
    if (req.groupId === '') return Promise.resolve(failedJoin(KafkaErrorCode.INVALID_GROUP_ID));
    const { minSessionTimeoutMs, maxSessionTimeoutMs } = this.options;
    if (req.sessionTimeoutMs < minSessionTimeoutMs || req.sessionTimeoutMs > maxSessionTimeoutMs) {
      return Promise.resolve(failedJoin(KafkaErrorCode.INVALID_SESSION_TIMEOUT, req.memberId));
    }
    const g = this.group(req.groupId);
    if (!this.protocolsCompatible(g, req)) {
      return Promise.resolve(failedJoin(KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.memberId));
    }
    if (req.memberId === '') {
      // JoinGroup v4+: hand out an id and make the client come back with it (KIP-394).
      const memberId = `${req.clientId}-${randomUUID()}`;
      const expiry = setTimeout(() => g.pendingMemberIds.delete(memberId), req.sessionTimeoutMs);
      expiry.unref();
      g.pendingMemberIds.set(memberId, expiry);
      return Promise.resolve(failedJoin(KafkaErrorCode.MEMBER_ID_REQUIRED, memberId));
    }
    let m = g.members.get(req.memberId);
    if (m === undefined) {
      const pending = g.pendingMemberIds.get(req.memberId);
      if (pending === undefined) {
        return Promise.resolve(failedJoin(KafkaErrorCode.UNKNOWN_MEMBER_ID, req.memberId));
      }
      clearTimeout(pending);
      g.pendingMemberIds.delete(req.memberId);
      m = {
        memberId: req.memberId,
        groupInstanceId: req.groupInstanceId,
        sessionTimeoutMs: req.sessionTimeoutMs,
        rebalanceTimeoutMs: req.rebalanceTimeoutMs,
        protocolType: req.protocolType,
        protocols: req.protocols,
        assignment: EMPTY,
        awaitingJoin: null,
        awaitingSync: null,
        sessionTimer: null,
      };
      g.members.set(m.memberId, m);
    } else {
      m.groupInstanceId = req.groupInstanceId;
      m.sessionTimeoutMs = req.sessionTimeoutMs;
      m.rebalanceTimeoutMs = req.rebalanceTimeoutMs;
      m.protocolType = req.protocolType;
      m.protocols = req.protocols;
    }
    const member = m;
    // While a member waits in JoinGroup the rebalance timeout, not its session, decides its fate.
    this.stopSession(member);
    member.awaitingJoin?.(failedJoin(KafkaErrorCode.REBALANCE_IN_PROGRESS, member.memberId));
    const result = new Promise<JoinResult>((resolve) => {
      member.awaitingJoin = resolve;
    });
    if (g.state !== 'PreparingRebalance') this.prepareRebalance(g);
    this.tryCompleteJoin(g);
    return result;
  }

  sync(groupId: string, generationId: number, memberId: string, assignments: Map<string, Buffer>) {
    const g = this.groups.get(groupId);
    const m = g?.members.get(memberId);
    if (g === undefined || m === undefined) {
      return Promise.resolve({ errorCode: KafkaErrorCode.UNKNOWN_MEMBER_ID, assignment: EMPTY });
    }
    if (generationId !== g.generationId) {
      return Promise.resolve({ errorCode: KafkaErrorCode.ILLEGAL_GENERATION, assignment: EMPTY });
    }
    if (g.state === 'PreparingRebalance') {
      return Promise.resolve({ errorCode: KafkaErrorCode.REBALANCE_IN_PROGRESS, assignment: EMPTY });
    }
    this.startSession(g, m);
    if (g.state === 'Stable') return Promise.resolve({ errorCode: 0, assignment: m.assignment });
    // CompletingRebalance: followers wait for the leader's assignment.
    m.awaitingSync?.({ errorCode: KafkaErrorCode.REBALANCE_IN_PROGRESS, assignment: EMPTY });
    const result = new Promise<SyncResult>((resolve) => {
      m.awaitingSync = resolve;
    });
    if (memberId === g.leaderId) {
      for (const member of g.members.values()) member.assignment = assignments.get(member.memberId) ?? EMPTY;
      g.state = 'Stable';
      for (const member of g.members.values()) {
        const reply = member.awaitingSync;
        member.awaitingSync = null;
        reply?.({ errorCode: 0, assignment: member.assignment });
      }
    }
    return result;
  }

  heartbeat(groupId: string, generationId: number, memberId: string): number {
    const g = this.groups.get(groupId);
    const m = g?.members.get(memberId);
    if (g === undefined || m === undefined) return KafkaErrorCode.UNKNOWN_MEMBER_ID;
    if (generationId !== g.generationId) return KafkaErrorCode.ILLEGAL_GENERATION;
    this.startSession(g, m);
    return g.state === 'PreparingRebalance' ? KafkaErrorCode.REBALANCE_IN_PROGRESS : 0;
  }

  leave(groupId: string, memberId: string): number {
    const g = this.groups.get(groupId);
    const m = g?.members.get(memberId);
    if (g === undefined || m === undefined) return KafkaErrorCode.UNKNOWN_MEMBER_ID;
    this.removeMember(g, m);
    return 0;
  }

  /** Request-level validation of OffsetCommit; 0 means the offsets may be stored. */
  canCommit(groupId: string, generationId: number, memberId: string): number {
    const g = this.groups.get(groupId);
    if (generationId < 0 && memberId === '') {
      // A commit from outside the group protocol (admin, standalone consumer): only for empty groups.
      return g === undefined || g.members.size === 0 ? 0 : KafkaErrorCode.UNKNOWN_MEMBER_ID;
    }
    const m = g?.members.get(memberId);
    if (g === undefined || m === undefined) return KafkaErrorCode.UNKNOWN_MEMBER_ID;
    if (generationId !== g.generationId) return KafkaErrorCode.ILLEGAL_GENERATION;
    if (g.state === 'CompletingRebalance') return KafkaErrorCode.REBALANCE_IN_PROGRESS;
    this.startSession(g, m);
    return 0;
  }

  commit(groupId: string, topic: string, partition: number, value: CommittedOffset): void {
    const offsets = this.group(groupId).offsets;
    let byPartition = offsets.get(topic);
    if (byPartition === undefined) offsets.set(topic, (byPartition = new Map()));
    byPartition.set(partition, value);
  }

  committed(groupId: string): ReadonlyMap<string, ReadonlyMap<number, CommittedOffset>> {
    return this.groups.get(groupId)?.offsets ?? new Map();
  }

  /** Kafka drops committed offsets of a deleted topic. */
  forgetTopic(topic: string): void {
    for (const g of this.groups.values()) g.offsets.delete(topic);
  }

  describe(groupId: string): { state: GroupState; generationId: number; members: string[] } | undefined {
    const g = this.groups.get(groupId);
    return g && { state: g.state, generationId: g.generationId, members: [...g.members.keys()] };
  }

  close(): void {
    for (const g of this.groups.values()) {
      if (g.rebalanceTimer) clearTimeout(g.rebalanceTimer);
      for (const t of g.pendingMemberIds.values()) clearTimeout(t);
      for (const m of g.members.values()) this.stopSession(m);
    }
  }

  private protocolsCompatible(g: Group, req: JoinRequest): boolean {
    if (req.protocolType === '' || req.protocols.length === 0) return false;
    if (g.members.size === 0) return true;
    if (g.protocolType !== null && g.protocolType !== req.protocolType) return false;
    const others = [...g.members.values()].filter((m) => m.memberId !== req.memberId);
    return req.protocols.some((p) => others.every((m) => m.protocols.some((q) => q.name === p.name)));
  }

  private prepareRebalance(g: Group): void {
    for (const m of g.members.values()) {
      const reply = m.awaitingSync;
      m.awaitingSync = null;
      reply?.({ errorCode: KafkaErrorCode.REBALANCE_IN_PROGRESS, assignment: EMPTY });
    }
    const wasEmpty = g.state === 'Empty';
    g.state = 'PreparingRebalance';
    const delay = this.options.initialRebalanceDelayMs;
    g.holdUntil = wasEmpty && delay > 0 ? Date.now() + delay : 0;
    const timeout = Math.max(0, ...[...g.members.values()].map((m) => m.rebalanceTimeoutMs));
    if (g.rebalanceTimer) clearTimeout(g.rebalanceTimer);
    g.rebalanceTimer = setTimeout(
      () => this.onRebalanceTimeout(g),
      Math.max(timeout, g.holdUntil - Date.now()),
    );
    g.rebalanceTimer.unref();
    if (g.holdUntil > 0) setTimeout(() => this.tryCompleteJoin(g), delay).unref();
  }

  private onRebalanceTimeout(g: Group): void {
    g.rebalanceTimer = null;
    if (g.state !== 'PreparingRebalance') return;
    for (const m of [...g.members.values()]) {
      if (m.awaitingJoin === null) {
        this.stopSession(m);
        g.members.delete(m.memberId);
      }
    }
    g.holdUntil = 0;
    this.completeJoin(g);
  }

  private tryCompleteJoin(g: Group): void {
    if (g.state !== 'PreparingRebalance' || Date.now() < g.holdUntil) return;
    for (const m of g.members.values()) if (m.awaitingJoin === null) return;
    this.completeJoin(g);
  }

  private completeJoin(g: Group): void {
    if (g.rebalanceTimer) clearTimeout(g.rebalanceTimer);
    g.rebalanceTimer = null;
    g.generationId++;
    if (g.members.size === 0) {
      g.state = 'Empty';
      g.protocolType = g.protocolName = g.leaderId = null;
      return;
    }
    const members = [...g.members.values()];
    const protocolName = selectProtocol(members);
    g.protocolType = members[0]!.protocolType;
    g.protocolName = protocolName;
    if (g.leaderId === null || !g.members.has(g.leaderId)) g.leaderId = members[0]!.memberId;
    g.state = 'CompletingRebalance';
    const leaderView = members.map((m) => ({
      memberId: m.memberId,
      groupInstanceId: m.groupInstanceId,
      metadata: m.protocols.find((p) => p.name === protocolName)?.metadata ?? EMPTY,
    }));
    for (const m of members) {
      m.assignment = EMPTY;
      const reply = m.awaitingJoin;
      m.awaitingJoin = null;
      this.startSession(g, m);
      reply?.({
        errorCode: 0,
        generationId: g.generationId,
        protocolName,
        leaderId: g.leaderId,
        memberId: m.memberId,
        members: m.memberId === g.leaderId ? leaderView : [],
      });
    }
  }

  private removeMember(g: Group, m: Member): void {
    this.stopSession(m);
    m.awaitingJoin?.(failedJoin(KafkaErrorCode.UNKNOWN_MEMBER_ID, m.memberId));
    m.awaitingSync?.({ errorCode: KafkaErrorCode.UNKNOWN_MEMBER_ID, assignment: EMPTY });
    m.awaitingJoin = m.awaitingSync = null;
    g.members.delete(m.memberId);
    if (g.leaderId === m.memberId) g.leaderId = null;
    if (g.state === 'Stable' || g.state === 'CompletingRebalance') this.prepareRebalance(g);
    this.tryCompleteJoin(g);
  }

  private startSession(g: Group, m: Member): void {
    this.stopSession(m);
    m.sessionTimer = setTimeout(() => {
      m.sessionTimer = null;
      if (g.members.get(m.memberId) === m) this.removeMember(g, m);
    }, m.sessionTimeoutMs);
    m.sessionTimer.unref();
  }

  private stopSession(m: Member): void {
    if (m.sessionTimer) clearTimeout(m.sessionTimer);
    m.sessionTimer = null;
  }
}

/** Kafka's vote: each member picks its most preferred protocol among those every member supports. */
function selectProtocol(members: readonly Member[]): string {
  const candidates = members[0]!.protocols
    .map((p) => p.name)
    .filter((name) => members.every((m) => m.protocols.some((p) => p.name === name)));
  const votes = new Map<string, number>();
  for (const m of members) {
    const choice = m.protocols.find((p) => candidates.includes(p.name))?.name;
    if (choice !== undefined) votes.set(choice, (votes.get(choice) ?? 0) + 1);
  }
  let best = candidates[0] ?? '';
  for (const [name, n] of votes) if (n > (votes.get(best) ?? 0)) best = name;
  return best;
}
