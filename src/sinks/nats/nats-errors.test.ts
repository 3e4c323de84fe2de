import { JetStreamApiError, jserrors } from '@nats-io/jetstream/internal';
import { errors } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { classifyNatsError, NATS_SINK_CODES, NatsSinkError, PERMANENT_JS_CODES } from './nats-errors.ts';

const api = (err_code: number, description: string, code = 400) =>
  new JetStreamApiError({ code, err_code, description });

describe('classifyNatsError', () => {
  it('each permanent JetStream code is permanent', () => {
    for (const code of Object.keys(PERMANENT_JS_CODES).map(Number)) {
      const c = classifyNatsError(api(code, 'x'));
      expect(c.class).toBe('permanent');
      expect(c.reason).toBe(`JS_${code}`);
    }
    expect(classifyNatsError(api(10054, 'message size exceeds maximum allowed')).message).toMatch(
      /max_msg_size/,
    );
  });

  it('a full stream that discards new messages is permanent; other store failures are transient', () => {
    for (const d of [
      'maximum messages exceeded',
      'maximum bytes exceeded',
      'maximum messages per subject exceeded',
    ])
      expect(classifyNatsError(api(10077, d, 503))).toMatchObject({
        class: 'permanent',
        reason: 'STREAM_FULL',
      });
    expect(classifyNatsError(api(10077, 'error opening msg block file', 503))).toMatchObject({
      class: 'transient',
      reason: 'JS_10077',
    });
    expect(classifyNatsError(api(10047, 'insufficient storage resources available', 500)).class).toBe(
      'transient',
    );
  });

  it("a message over the server's max_payload is permanent", () => {
    const e = errors.InvalidArgumentError.format('payload', 'max_payload size exceeded');
    expect(classifyNatsError(e)).toMatchObject({ class: 'permanent', reason: 'MAX_PAYLOAD' });
  });

  it('connection trouble, timeouts and no responders are transient', () => {
    expect(classifyNatsError(new errors.TimeoutError())).toMatchObject({
      class: 'transient',
      reason: 'TimeoutError',
    });
    expect(classifyNatsError(new errors.ClosedConnectionError()).class).toBe('transient');
    const noResponders = new jserrors.JetStreamNotEnabled('jetstream is not enabled', {
      cause: new errors.RequestError('no responders', { cause: new errors.NoRespondersError('s') }),
    });
    expect(classifyNatsError(noResponders)).toMatchObject({
      class: 'transient',
      reason: 'JetStreamNotEnabled',
    });
    expect(classifyNatsError(new Error('?')).class).toBe('transient');
    expect(classifyNatsError('not even an error').class).toBe('transient');
  });

  it('a publish permission violation is permanent; the sink’s own codes follow their table', () => {
    const e = new errors.PermissionViolationError('denied', 'publish', 'a.b');
    expect(classifyNatsError(e)).toMatchObject({ class: 'permanent', reason: 'PermissionViolationError' });
    for (const [code, { permanent }] of Object.entries(NATS_SINK_CODES))
      expect(classifyNatsError(new NatsSinkError(code as keyof typeof NATS_SINK_CODES, 'm'))).toMatchObject({
        class: permanent ? 'permanent' : 'transient',
        reason: code,
      });
  });

  it("refusals of the subject (no stream, a bad stream, a sealed one, no permission) are destination-wide; a message's own are not", () => {
    const wide = (e: unknown) => classifyNatsError(e).destinationWide === true;
    expect(wide(new NatsSinkError('NO_STREAM', 'm'))).toBe(true);
    expect(wide(new NatsSinkError('STREAM_CONFIG', 'm'))).toBe(true);
    expect(wide(new NatsSinkError('INVALID_SUBJECT', 'm'))).toBe(true);
    expect(wide(api(10109, 'stream is sealed'))).toBe(true);
    expect(wide(new errors.PermissionViolationError('denied', 'publish', 'a.b'))).toBe(true);
    expect(wide(new NatsSinkError('INVALID_MESSAGE', 'm'))).toBe(false);
    expect(wide(api(10054, 'message size exceeds maximum allowed'))).toBe(false);
    expect(wide(api(10077, 'maximum messages exceeded', 503))).toBe(false);
    expect(wide(new NatsSinkError('NO_PUBACK', 'm'))).toBe(false);
  });
});
