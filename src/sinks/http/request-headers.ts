/**
 * An event's headers as HTTP headers. Rows are hostile input (design.md §7): a header name or
 * value may hold anything, and HTTP carries neither CR/LF nor characters beyond Latin-1 (undici
 * throws on them). So every name and value is made safe here, reversibly, and never thrown on:
 *
 * - name: `outbox-header-` + the name lowercased, each byte outside HTTP's token characters (and
 *   `%` itself) written %xx of its UTF-8 (`tenant id` → `outbox-header-tenant%20id`; lowercase hex,
 *   as the whole name is lowercase). HTTP names ignore case, so where the event has names that
 *   differ only by case (`Tenant` and `tenant`: a row's own `Content-Type` beside the relay's
 *   `content-type`), those with capitals keep them, escaped (`Tenant` → `outbox-header-%54enant`):
 *   no value is lost, and the lowercase one stays as it is.
 * - value: as it is when it is printable ASCII without leading or trailing blanks; otherwise the
 *   name gets a `*` and the value is RFC 8187's extended form, `UTF-8''` + percent-encoded UTF-8
 *   (`outbox-header-city*: UTF-8''K%C3%B6ln`), which keeps every byte.
 *
 * The topic goes as `outbox-topic` (same encoding), a valid W3C `traceparent` as itself too.
 */
import type { OutboundMessage } from '../../route/event.ts';
import { HttpSinkError } from './http-errors.ts';

export const HEADER_PREFIX = 'outbox-header-';

/** RFC 9110 tchar, without `%` (the escape): these bytes stay as they are in a name. */
const TOKEN = /^[a-z0-9!#$&'*+\-.^_`|~]*$/;
/** Sent as it is: printable ASCII, no blank at either end (HTTP parsers strip those). */
const PLAIN_VALUE = /^(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?$/;
const ATTR_CHAR = /[A-Za-z0-9!#$&+\-.^_`|~]/;
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** %XX of each UTF-8 byte `keep` does not keep (lone surrogates become U+FFFD: nothing throws). */
function percentEncode(s: string, keep: (ch: string) => boolean, hex: (h: string) => string): string {
  let out = '';
  for (const byte of Buffer.from(s, 'utf8')) {
    const ch = String.fromCharCode(byte);
    out += byte < 0x80 && keep(ch) ? ch : `%${hex(byte.toString(16).padStart(2, '0'))}`;
  }
  return out;
}

/** `keepCase`: capitals are escaped (%xx), not lowercased — for names whose lowercase another name shares. */
export function headerName(name: string, keepCase = false): string {
  const n = keepCase ? name : name.toLowerCase();
  if (TOKEN.test(n)) return `${HEADER_PREFIX}${n}`;
  return (
    HEADER_PREFIX +
    percentEncode(
      n,
      (ch) => TOKEN.test(ch),
      (h) => h,
    )
  );
}

/** [name, value] with the value safe to send: as it is, or the name starred and the value RFC 8187-encoded. */
export function headerField(name: string, value: string): [string, string] {
  if (PLAIN_VALUE.test(value)) return [name, value];
  return [
    `${name}*`,
    `UTF-8''${percentEncode(
      value,
      (ch) => ATTR_CHAR.test(ch),
      (h) => h.toUpperCase(),
    )}`,
  ];
}

/**
 * The HTTP headers carrying one event's headers and topic (not the signature, not the content
 * type: the sink adds those). Throws INVALID_EVENT if two names still came out the same (the
 * encoding above is meant to make that impossible).
 */
export function eventHeaders(m: OutboundMessage, into: Record<string, string> = {}): Record<string, string> {
  const [tn, tv] = headerField('outbox-topic', m.topic);
  into[tn] = tv;
  // How many names share each lowercase form (only when some name has capitals): those with
  // capitals among them keep them, escaped.
  let shared: Map<string, number> | null = null;
  for (const k in m.headers)
    if (Object.hasOwn(m.headers, k) && k !== k.toLowerCase()) {
      shared = new Map();
      for (const n of Object.keys(m.headers))
        shared.set(n.toLowerCase(), (shared.get(n.toLowerCase()) ?? 0) + 1);
      break;
    }
  for (const k in m.headers) {
    if (!Object.hasOwn(m.headers, k)) continue;
    const raw: unknown = m.headers[k];
    const value = typeof raw === 'string' ? raw : JSON.stringify(raw ?? null);
    const keepCase = shared !== null && k !== k.toLowerCase() && shared.get(k.toLowerCase())! > 1;
    const [name, v] = headerField(headerName(k, keepCase), value);
    const plain = name.endsWith('*') ? name.slice(0, -1) : name;
    if (into[plain] !== undefined || into[`${plain}*`] !== undefined)
      throw new HttpSinkError(
        'INVALID_EVENT',
        `the event's header ${JSON.stringify(k)} and another one would be the same HTTP header ${JSON.stringify(plain)}: rename one in the outbox row`,
      );
    into[name] = v;
  }
  const tp = m.headers.traceparent;
  if (typeof tp === 'string' && TRACEPARENT.test(tp)) into.traceparent = tp;
  return into;
}
