/**
 * What the Redis sink's start (and `outbox-relay check --sink redis`) warns about, from the
 * server's INFO, pure. Warnings, not refusals: a cache-like Redis may be what the operator chose,
 * but then the relay's acknowledgement promises less than the slot's confirmation implies.
 *
 * - appendonly no: an acknowledged entry is in memory only; a restart loses what came after the
 *   last RDB snapshot, and the relay, which confirmed it, never sends it again.
 * - a maxmemory-policy other than noeviction (with maxmemory set): Redis may evict a stream (allkeys-*)
 *   or the dedup keys, which have a TTL (volatile-*), so re-sends are stored twice.
 * - --redis-wait-replicas N with fewer than N replicas connected: every batch will wait and fail.
 */

/** `field:value` of an INFO text. */
export function infoField(info: string, field: string): string | undefined {
  const m = new RegExp(`^${field}:(.*?)\\r?$`, 'm').exec(info);
  return m?.[1];
}

export function preflightWarnings(info: string, waitReplicas: number): string[] {
  const out: string[] = [];
  if (infoField(info, 'aof_enabled') !== '1')
    out.push(
      'Redis has no append-only file (appendonly no): an entry the relay counts as delivered is in memory only, and a restart of Redis loses what came after its last RDB snapshot, which the relay will not send again. Turn it on: CONFIG SET appendonly yes (and appendonly yes in redis.conf), appendfsync everysec or always (docs/sinks.md, Redis Streams)',
    );
  const policy = infoField(info, 'maxmemory_policy');
  const maxmemory = Number(infoField(info, 'maxmemory') ?? '0');
  if (maxmemory > 0 && policy && policy !== 'noeviction')
    out.push(
      `Redis evicts keys when full (maxmemory-policy ${policy}): it may delete a stream${policy.startsWith('volatile') ? "'s dedup keys (they have a TTL), so re-sent events are stored twice" : ' or its dedup keys'}. Use CONFIG SET maxmemory-policy noeviction: a full Redis then refuses writes (OOM) and the relay waits (docs/sinks.md, Redis Streams)`,
    );
  const replicas = Number(infoField(info, 'connected_slaves') ?? '0');
  if (waitReplicas > replicas)
    out.push(
      `--redis-wait-replicas ${waitReplicas} but Redis has ${replicas} replica(s) connected: every batch will wait and be sent again until enough replicas connect (INFO replication)`,
    );
  return out;
}
