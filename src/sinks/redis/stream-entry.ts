/**
 * What the Redis sink writes for one event, pure: the stream's name, the dedup key, the entry's
 * fields, and the Lua script that stores the entry once (docs/sinks.md, Redis Streams).
 */
import type { OutboundMessage } from '../../route/event.ts';

/**
 * The dedup script. KEYS[1] the stream, KEYS[2] the event's dedup key; ARGV[1] the key's TTL (ms),
 * ARGV[2] MAXLEN (0: no trimming), ARGV[3…] the entry's field, value pairs.
 *
 * - The dedup key exists: the event was stored by an earlier attempt. Its TTL is renewed — a write,
 *   so that a WAIT after this batch also covers the earlier attempt's XADD (it comes before in
 *   the replication stream) — and the answer is {'duplicate', the stored entry id}.
 * - Otherwise XADD, then SET the dedup key to the new entry id. Both or neither: a refused XADD
 *   (WRONGTYPE, OOM) wrote nothing; a refused SET (OOM cannot refuse it once the script wrote,
 *   but anything may fail) deletes the entry again. A script's writes are not rolled back by an
 *   error, hence pcall and the explicit undo. Answer {'stored', entry id}.
 *
 * A script runs atomically on one node: no other client sees the key without the entry, and two
 * attempts of one event (a timed-out one still queued behind a frozen server, and its re-send)
 * cannot both find the key missing.
 */
export const DEDUP_SCRIPT = `local seen = redis.call('GET', KEYS[2])
if seen then
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
  return {'duplicate', seen}
end
local args = {KEYS[1]}
if ARGV[2] ~= '0' then
  args[#args + 1] = 'MAXLEN'
  args[#args + 1] = '~'
  args[#args + 1] = ARGV[2]
end
args[#args + 1] = '*'
for i = 3, #ARGV do args[#args + 1] = ARGV[i] end
local id = redis.pcall('XADD', unpack(args))
if type(id) == 'table' and id.err then return id end
local ok = redis.pcall('SET', KEYS[2], id, 'PX', ARGV[1])
if type(ok) == 'table' and ok.err then
  redis.call('XDEL', KEYS[1], id)
  return ok
end
return {'stored', id}`;

/** The prefix of a header's field: `h:traceparent`. Never the prefix of the fixed fields. */
export const HEADER_PREFIX = 'h:';

/** Headers that are fixed fields already (`id`, `type`). */
const AS_FIELDS = new Set(['id', 'event_type']);

/**
 * The stream of an event: --redis-stream-template with {topic}, {aggregate_type} and {event_type}
 * filled in. Other braces stay: `{orders}.events` is a name with a hash tag.
 */
export function streamFor(template: string, m: Pick<OutboundMessage, 'topic' | 'event'>): string {
  if (template === '{topic}') return m.topic;
  return template
    .replaceAll('{topic}', m.topic)
    .replaceAll('{aggregate_type}', m.event.aggregateType)
    .replaceAll('{event_type}', m.event.eventType);
}

/**
 * The part of a key Redis Cluster hashes: the text between the first `{` and the next `}` when
 * that is not empty, else the whole key (the cluster specification's rule).
 */
export function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return key;
  const close = key.indexOf('}', open + 1);
  if (close < 0 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

/**
 * The dedup key of an event stored to `stream`: in the stream's hash slot (same hash tag), so the
 * script touches keys of one slot only — what a cluster would need; single-node Redis ignores it.
 */
export function dedupKey(stream: string, id: string): string {
  const tag = hashTag(stream);
  return tag === stream ? `{${stream}}:dedup:${id}` : `${stream}:dedup:${id}`;
}

/** The entry's field, value pairs: id, type, the other headers as h:<name>, the value (absent for a tombstone). */
export function entryFields(m: OutboundMessage): (string | Buffer)[] {
  const out: (string | Buffer)[] = ['id', m.event.eventId, 'type', m.event.eventType];
  for (const k in m.headers) {
    if (AS_FIELDS.has(k) || !Object.hasOwn(m.headers, k)) continue;
    out.push(HEADER_PREFIX + k, m.headers[k]!);
  }
  if (m.value !== null) out.push('value', m.value);
  return out;
}

/**
 * The most fields (names and values) one entry may have: the dedup script passes the stream,
 * MAXLEN ~ N, '*' and the fields to XADD through Lua's unpack, which refuses 8,000 values or more
 * ("too many results to unpack").
 */
export const MAX_ENTRY_FIELDS = 7_800;

/** The largest argument of the command, in bytes (Redis refuses one over proto-max-bulk-len). */
export function largestArgument(args: readonly (string | Buffer)[]): number {
  let max = 0;
  for (const a of args) {
    const n = typeof a === 'string' ? Buffer.byteLength(a) : a.length;
    if (n > max) max = n;
  }
  return max;
}
