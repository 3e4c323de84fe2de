import { describe, expect, it } from 'vitest';
import type { OutboundMessage } from '../../route/event.ts';
import { batchBody, batchId } from './batch-body.ts';
import { urlFor } from './http-sink.ts';
import { eventHeaders, headerField, headerName } from './request-headers.ts';

function message(
  headers: Record<string, string>,
  value: string | null = '{"a":1}',
  topic = 't',
): OutboundMessage {
  return {
    topic,
    key: 'k1',
    value: value === null ? null : Buffer.from(value),
    headers,
    timestamp: Date.parse('2026-01-02T03:04:05.006Z'),
    bytes: 0,
    event: {
      id: '1',
      eventId: '00000000-0000-0000-0000-000000000001',
      aggregateType: 'Order',
      aggregateId: 'k1',
      eventType: 'Created',
      payload: null,
      contentType: 'application/json',
      headers: {},
      traceparent: null,
      createdAt: new Date(0),
      lsn: 0n,
      commitTimeMs: 0,
      xid: 0,
    },
  };
}

/** What node:http and undici accept as a header name and value (RFC 9110 token, field-value). */
const NAME = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
const VALUE = /^[\x20-\x7e\t]*$/;

describe('event headers as HTTP headers', () => {
  it('names are prefixed and lowercased; bytes outside a token are %xx of their UTF-8', () => {
    expect(headerName('tenant')).toBe('outbox-header-tenant');
    expect(headerName('X-Tenant')).toBe('outbox-header-x-tenant');
    expect(headerName('tenant id')).toBe('outbox-header-tenant%20id');
    expect(headerName('a:b\r\nc')).toBe('outbox-header-a%3ab%0d%0ac');
    expect(headerName('100%')).toBe('outbox-header-100%25');
    expect(headerName('ключ')).toBe(`outbox-header-${encodeURIComponent('ключ').toLowerCase()}`);
  });

  it('printable ASCII values go as they are; any other value goes starred, RFC 8187-encoded, every byte kept', () => {
    expect(headerField('h', 'acme corp')).toEqual(['h', 'acme corp']);
    expect(headerField('h', '')).toEqual(['h', '']);
    expect(headerField('h', 'Köln')).toEqual(['h*', "UTF-8''K%C3%B6ln"]);
    expect(headerField('h', 'a\r\nset-cookie: x')).toEqual(['h*', "UTF-8''a%0D%0Aset-cookie%3A%20x"]);
    expect(headerField('h', ' padded ')).toEqual(['h*', "UTF-8''%20padded%20"]);
    const [, v] = headerField('h', "it's (ok)*\u0000\ud800");
    expect(v).toMatch(VALUE);
    expect(decodeURIComponent(v.slice("UTF-8''".length))).toBe("it's (ok)*\u0000\ufffd");
  });

  it('hostile rows give headers HTTP can carry, with the topic, and a valid traceparent as itself', () => {
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const h = eventHeaders(
      message(
        { id: 'x', 'bad\nname': 'v\r\n', emoji: '🎉', traceparent: tp, 'content-type': 'text/plain' },
        'x',
        'a b/ü',
      ),
    );
    for (const [k, v] of Object.entries(h)) {
      expect(k).toMatch(NAME);
      expect(v).toMatch(VALUE);
    }
    expect(h['outbox-topic*']).toBe("UTF-8''a%20b%2F%C3%BC");
    expect(h['outbox-header-bad%0aname*']).toBe("UTF-8''v%0D%0A");
    expect(h['outbox-header-emoji*']).toBe("UTF-8''%F0%9F%8E%89");
    expect(h.traceparent).toBe(tp);
    expect(eventHeaders(message({ traceparent: 'nonsense' })).traceparent).toBeUndefined();
  });

  it('names that differ only by case all arrive: those with capitals keep them, escaped', () => {
    const h = eventHeaders(
      message({
        Tenant: 'a',
        tenant: 'b',
        TENANT: 'c',
        'Content-Type': 'x',
        'content-type': 'y',
        Other: 'z',
      }),
    );
    expect(h['outbox-header-tenant']).toBe('b');
    expect(h['outbox-header-%54enant']).toBe('a');
    expect(h['outbox-header-%54%45%4e%41%4e%54']).toBe('c');
    expect(h['outbox-header-%43ontent-%54ype']).toBe('x');
    expect(h['outbox-header-content-type']).toBe('y');
    // A capital with no lowercase twin is simply lowercased.
    expect(h['outbox-header-other']).toBe('z');
    for (const k of Object.keys(h)) expect(k).toMatch(NAME);
  });
});

describe('batch body', () => {
  it('a JSON array: JSON values byte for byte, others base64, null as null; the id names the events', () => {
    const json = message({ 'content-type': 'application/json' }, '{"seq": 1}');
    const text = message({ 'content-type': 'text/plain' }, 'héllo');
    const broken = message({ 'content-type': 'application/json' }, '{"seq":');
    const tomb = message({}, null);
    const body = batchBody([json, text, broken, tomb]);
    expect(body.includes(Buffer.from('"data":{"seq": 1}}'))).toBe(true);
    const arr = JSON.parse(body.toString()) as Record<string, unknown>[];
    expect(arr).toHaveLength(4);
    expect(arr[0]).toMatchObject({
      id: json.event.eventId,
      topic: 't',
      type: 'Created',
      aggregate_type: 'Order',
      aggregate_id: 'k1',
      timestamp: '2026-01-02T03:04:05.006Z',
      content_type: 'application/json',
      data: { seq: 1 },
    });
    expect(Buffer.from(arr[1]!.data_base64 as string, 'base64').toString()).toBe('héllo');
    expect(Buffer.from(arr[2]!.data_base64 as string, 'base64').toString()).toBe('{"seq":');
    expect(arr[3]!.data).toBeNull();
    expect(batchId([json, text])).toBe(batchId([json, text]));
    expect(batchId([json, text])).not.toBe(batchId([json]));
    expect(batchId([json])).toMatch(/^batch_[A-Za-z0-9_-]{32}$/);
  });
});

describe('urlFor', () => {
  it('fills the placeholders percent-encoded; a lone surrogate does not throw', () => {
    const m = message({}, '{}', 'a b/ü');
    expect(urlFor('https://h/{topic}?t={event_type}&a={aggregate_type}', m)).toBe(
      'https://h/a%20b%2F%C3%BC?t=Created&a=Order',
    );
    expect(urlFor('https://h/{topic}', { ...m, topic: 'x\ud800' })).toBe('https://h/x%EF%BF%BD');
    expect(urlFor('https://h/fixed', m)).toBe('https://h/fixed');
  });
});
