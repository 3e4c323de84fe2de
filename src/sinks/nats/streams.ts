/**
 * What the NATS sink needs of a JetStream stream, as pure rules (unit-tested with plain values):
 * - file storage: a memory stream loses every message when its server restarts, after the
 *   relay confirmed them;
 * - a duplicate window at least the relay's retry horizon: a batch is re-sent at most
 *   --retry-max-ms (back-off) plus --nats-timeout-ms (the PubAck wait) after an attempt whose
 *   messages may have been stored; within the window JetStream drops the re-sent copies by
 *   Nats-Msg-Id. (An outage longer than the window still gives duplicates, never losses.)
 */
export interface StreamFacts {
  name: string;
  storage: string;
  /** Nanoseconds, as JetStream reports it. */
  duplicateWindowNs: number;
  subjects: readonly string[];
}

export function retryHorizonMs(c: { retryMaxMs: number; natsTimeoutMs: number }): number {
  return c.retryMaxMs + c.natsTimeoutMs;
}

/** null when the stream keeps the promise; else what is wrong and how to fix it. */
export function streamProblem(s: StreamFacts, horizonMs: number): string | null {
  if (s.storage !== 'file')
    return `stream ${s.name} has ${s.storage} storage: its messages are lost when the server restarts, after the relay confirmed them; use a file-backed stream (nats stream add --storage file)`;
  const windowMs = s.duplicateWindowNs / 1e6;
  if (windowMs < horizonMs)
    return `stream ${s.name} has a duplicate window of ${windowMs} ms, below the relay's retry horizon of ${horizonMs} ms (--retry-max-ms + --nats-timeout-ms): re-sent events would be stored twice; raise it (nats stream edit ${s.name} --dupe-window ${Math.ceil(horizonMs / 1000)}s) or lower --retry-max-ms`;
  return null;
}

/** Whether two NATS subject patterns (tokens split by '.', '*' one token, '>' the rest) can match one subject. */
export function subjectsOverlap(a: string, b: string): boolean {
  const x = a.split('.');
  const y = b.split('.');
  for (let i = 0; ; i++) {
    const p = x[i];
    const q = y[i];
    if (p === undefined || q === undefined) return p === q;
    if (p === '>' || q === '>') return true;
    if (p !== '*' && q !== '*' && p !== q) return false;
  }
}

/**
 * The subjects a topic template can produce, as a pattern: a token with a placeholder becomes
 * '*' (an aggregate type with dots in it spans more tokens: such subjects are checked when first
 * published).
 */
export function templatePattern(template: string): string {
  return template
    .split('.')
    .map((t) => (t.includes('{') ? '*' : t))
    .join('.');
}

/** A literal subject NATS accepts for publishing: non-empty tokens, no wildcards, no whitespace. */
export function isPublishSubject(s: string): boolean {
  return s.length > 0 && !/[\s*>]/.test(s) && !s.split('.').includes('');
}
