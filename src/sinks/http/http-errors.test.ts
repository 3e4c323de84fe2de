import { describe, expect, it } from 'vitest';
import {
  classifyHttpError,
  HTTP_SINK_CODES,
  type HttpSinkCode,
  HttpSinkError,
  parseRetryAfter,
  RETRY_AFTER_MAX_MS,
  requestFailure,
  statusCode,
} from './http-errors.ts';

describe('statusCode', () => {
  it('2xx is delivered; 408, 429 and 5xx are retried; 3xx and the other 4xx fail the event', () => {
    for (const s of [200, 201, 202, 204, 299]) expect(statusCode(s)).toBeNull();
    for (const s of [408, 429, 500, 502, 503, 504, 599]) expect(statusCode(s)).toBe('RETRYABLE_STATUS');
    for (const s of [300, 301, 302, 307, 308]) expect(statusCode(s)).toBe('REDIRECT');
    for (const s of [400, 401, 403, 404, 405, 409, 410, 413, 422, 431, 499, 100, 600, 999])
      expect(statusCode(s)).toBe('REFUSED');
  });
});

describe('classifyHttpError', () => {
  it("the sink's own codes follow their table, a status naming the reason", () => {
    for (const [code, { permanent }] of Object.entries(HTTP_SINK_CODES))
      expect(classifyHttpError(new HttpSinkError(code as HttpSinkCode, 'm'))).toMatchObject({
        class: permanent ? 'permanent' : 'transient',
        reason: code,
      });
    expect(classifyHttpError(new HttpSinkError('REFUSED', 'HTTP 400', { status: 400 }))).toMatchObject({
      class: 'permanent',
      reason: 'HTTP_400',
      message: 'HTTP 400',
    });
    expect(
      classifyHttpError(
        new HttpSinkError('RETRYABLE_STATUS', 'HTTP 429', { status: 429, retryAfterMs: 2000 }),
      ),
    ).toEqual({ class: 'transient', reason: 'HTTP_429', message: 'HTTP 429', retryAfterMs: 2000 });
  });

  it('a request undici refuses to build (a header it cannot carry) is the event’s, permanent; anything unknown is transient', () => {
    const invalid = Object.assign(new Error('invalid header value'), { code: 'UND_ERR_INVALID_ARG' });
    expect(classifyHttpError(invalid)).toMatchObject({ class: 'permanent', reason: 'INVALID_EVENT' });
    const reset = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
    expect(classifyHttpError(reset)).toMatchObject({ class: 'transient', reason: 'UND_ERR_SOCKET' });
    expect(classifyHttpError('?').class).toBe('transient');
  });
});

describe('requestFailure', () => {
  it('no answer: invalid request → INVALID_EVENT; the deadline → TIMEOUT; else CONNECTION with the cause', () => {
    const invalid = Object.assign(new Error('bad'), { code: 'UND_ERR_INVALID_ARG' });
    expect(requestFailure(invalid, true, 100).code).toBe('INVALID_EVENT');
    const aborted = Object.assign(new Error('This operation was aborted'), { name: 'AbortError' });
    expect(requestFailure(aborted, true, 100)).toMatchObject({ code: 'TIMEOUT' });
    expect(requestFailure(aborted, true, 100).message).toMatch(/no answer within 100 ms/);
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const e = requestFailure(refused, false, 100);
    expect(e).toMatchObject({ code: 'CONNECTION', cause: refused });
    expect(classifyHttpError(e).class).toBe('transient');
    const own = new HttpSinkError('REFUSED', 'x', { status: 400 });
    expect(requestFailure(own, true, 100)).toBe(own);
    // undici raises it reading the answer (its headers past 16 KiB): the event may have arrived.
    const overflow = Object.assign(new Error('Headers Overflow Error'), { code: 'UND_ERR_HEADERS_OVERFLOW' });
    const o = requestFailure(overflow, false, 100);
    expect(o).toMatchObject({ code: 'CONNECTION', cause: overflow });
    expect(o.message).toMatch(/answer could not be read: its headers are larger than 16 KiB.*sent again/);
    expect(classifyHttpError(o).class).toBe('transient');
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  it('seconds or an HTTP-date, bounded; anything else is no advice', () => {
    expect(parseRetryAfter('3', now)).toBe(3000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('86400', now)).toBe(RETRY_AFTER_MAX_MS);
    for (const v of [undefined, '', '-1', '1.5', 'soon', '2026-01-01'])
      expect(parseRetryAfter(v, now)).toBeUndefined();
  });
});
