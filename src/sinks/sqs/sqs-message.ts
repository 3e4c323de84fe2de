/**
 * One event as one SendMessageBatch entry, pure (no I/O): the body, the message attributes, the
 * FIFO group and deduplication ids, and the size SQS counts. Rows are hostile input: whatever a
 * row holds either becomes a valid entry or a SqsSinkError for that event alone.
 *
 * Attributes. SQS takes at most 10 per message, names of at most 256 characters of
 * [A-Za-z0-9_.-] (no leading, trailing or doubled period, none starting with "AWS." or
 * "Amazon."), non-empty values. The relay's own headers (id, event_type, aggregate_type,
 * aggregate_id, content-type, traceparent) come first, then the row's in their order. A name is
 * made valid by replacing each other character with '_' (and prefixing 'x-' to a reserved
 * prefix); a header whose made-valid name is taken already, or that does not fit in the first 9
 * (10 when all fit), goes into one more attribute, `outbox_headers`, a JSON object of the
 * original names and values — nothing is dropped. Empty values are left out (SQS refuses them).
 *
 * Size. SQS counts the body plus, per attribute, its name, its data type and its value (UTF-8).
 */
import { createHash } from 'node:crypto';
import type { OutboundMessage } from '../../route/event.ts';
import { HEADER } from '../../route/router.ts';
import { dedupId } from '../dedup-id.ts';
import { SqsSinkError } from './sqs-errors.ts';

export const MAX_ATTRIBUTES = 10;
export const OVERFLOW_ATTRIBUTE = 'outbox_headers';

export interface SqsAttribute {
  DataType: 'String';
  StringValue: string;
}

export interface SqsEntry {
  MessageBody: string;
  MessageAttributes?: Record<string, SqsAttribute>;
  MessageGroupId?: string;
  MessageDeduplicationId?: string;
}

export interface PreparedEntry {
  entry: SqsEntry;
  /** What SQS counts against the message and batch size limits. */
  bytes: number;
}

const OWN_FIRST: readonly string[] = [
  HEADER.id,
  HEADER.eventType,
  HEADER.aggregateType,
  HEADER.aggregateId,
  HEADER.contentType,
  HEADER.traceparent,
];

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A valid attribute name for `name` (may differ from it). */
export function attributeName(name: string): string {
  let n = name.replace(/[^A-Za-z0-9_.-]/g, '_').replace(/\.{2,}/g, '.');
  n = n.replace(/^\.+|\.+$/g, '');
  if (n === '') n = '_';
  if (/^(aws|amazon)\./i.test(n)) n = `x-${n}`;
  return n.slice(0, 256);
}

/** FIFO ids are 1–128 characters of ASCII punctuation and alphanumerics; other keys are hashed (the same key, the same id). */
export function fifoId(s: string): string {
  if (s.length >= 1 && s.length <= 128 && /^[!-~]+$/.test(s)) return s;
  return `sha256-${createHash('sha256').update(s).digest('hex')}`;
}

export function attributesOf(
  headers: Readonly<Record<string, unknown>>,
): Record<string, SqsAttribute> | undefined {
  const names = Object.keys(headers);
  const ordered = [
    ...OWN_FIRST.filter((n) => Object.hasOwn(headers, n)),
    ...names.filter((n) => !OWN_FIRST.includes(n)),
  ];
  const usable = ordered.filter((n) => typeof headers[n] === 'string' && headers[n] !== '');
  const room = usable.length <= MAX_ATTRIBUTES ? MAX_ATTRIBUTES : MAX_ATTRIBUTES - 1;
  const out: Record<string, SqsAttribute> = {};
  let overflow: Record<string, string> | null = null;
  let count = 0;
  for (const n of usable) {
    const v = headers[n] as string;
    const a = attributeName(n);
    if (count < room && !Object.hasOwn(out, a) && a !== OVERFLOW_ATTRIBUTE) {
      out[a] = { DataType: 'String', StringValue: v };
      count++;
    } else (overflow ??= {})[n] = v;
  }
  if (overflow) out[OVERFLOW_ATTRIBUTE] = { DataType: 'String', StringValue: JSON.stringify(overflow) };
  return count === 0 && !overflow ? undefined : out;
}

export function sizeOf(e: SqsEntry): number {
  let n = Buffer.byteLength(e.MessageBody);
  for (const [name, a] of Object.entries(e.MessageAttributes ?? {}))
    n += Buffer.byteLength(name) + a.DataType.length + Buffer.byteLength(a.StringValue);
  return n;
}

/**
 * The entry of `m` for a queue (`fifo`: its URL ends in .fifo), or a SqsSinkError for this event
 * (SQS_INVALID_MESSAGE, SQS_MESSAGE_TOO_LARGE). Never throws.
 */
export function prepareEntry(
  m: OutboundMessage,
  fifo: boolean,
  maxBytes: number,
): PreparedEntry | SqsSinkError {
  try {
    if (m.value === null || m.value.length === 0)
      return new SqsSinkError(
        'SQS_INVALID_MESSAGE',
        `event ${m.event.eventId} has no value (a tombstone): an SQS message body cannot be empty`,
      );
    let body: string;
    try {
      body = utf8.decode(m.value);
    } catch {
      return new SqsSinkError(
        'SQS_INVALID_MESSAGE',
        `event ${m.event.eventId}'s value is not UTF-8 text, which an SQS body must be: use a text --value-format (json), or base64-encode the payload`,
      );
    }
    const entry: SqsEntry = { MessageBody: body };
    const attributes = attributesOf(m.headers);
    if (attributes) entry.MessageAttributes = attributes;
    if (fifo) {
      entry.MessageGroupId = fifoId(m.key ?? '');
      entry.MessageDeduplicationId = fifoId(dedupId(m));
    }
    const bytes = sizeOf(entry);
    if (bytes > maxBytes)
      return new SqsSinkError(
        'SQS_MESSAGE_TOO_LARGE',
        `event ${m.event.eventId} is ${bytes} bytes as an SQS message (body and attributes), over --sqs-max-message-bytes ${maxBytes}: SQS would refuse it; store the payload elsewhere (S3) and send a reference`,
      );
    return { entry, bytes };
  } catch (e) {
    return new SqsSinkError('SQS_INVALID_MESSAGE', `event cannot be an SQS message: ${String(e)}`, {
      cause: e,
    });
  }
}
