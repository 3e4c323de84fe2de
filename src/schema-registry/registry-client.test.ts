import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from '../dev/local-kafka.ts';
import { envelopeSchema } from './envelope-schema.ts';
import { RegistryClient, RegistryError } from './registry-client.ts';

/** A real HTTP server answering `status` and `body`; records what it was sent. */
async function withRegistry(
  status: number,
  body: unknown,
  run: (url: string, seen: { path?: string; auth?: string; body?: string }) => Promise<void>,
) {
  const seen: { path?: string; auth?: string; body?: string } = {};
  const server = createServer((req, res) => {
    let b = '';
    req.on('data', (d) => {
      b += d;
    });
    req.on('end', () => {
      Object.assign(seen, { path: req.url, auth: req.headers.authorization, body: b });
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}/apis/ccompat/v7/`, seen);
  } finally {
    await new Promise((r) => server.close(r));
  }
}

const idOf = (url: string, register = true, auth?: { username: string; password: string }) =>
  new RegistryClient({ url, ...auth })
    .idOf('orders-value', envelopeSchema(), register)
    .catch((e: unknown) => e);

describe('RegistryClient (a real HTTP server)', () => {
  it('registers the envelope under the subject with basic auth and returns the id', async () => {
    await withRegistry(200, { id: 42 }, async (url, seen) => {
      expect(await idOf(url, true, { username: 'key', password: 'p4ss' })).toBe(42);
      expect(seen.path).toBe('/apis/ccompat/v7/subjects/orders-value/versions');
      expect(seen.auth).toBe(`Basic ${Buffer.from('key:p4ss').toString('base64')}`);
      expect(JSON.parse(seen.body!)).toEqual({ schemaType: 'PROTOBUF', schema: envelopeSchema().schema });
    });
  });

  it('without auto-registration, looks the schema up (POST /subjects/{subject})', async () => {
    await withRegistry(200, { id: 7, version: 1 }, async (url, seen) => {
      expect(await idOf(url, false)).toBe(7);
      expect(seen.path).toBe('/apis/ccompat/v7/subjects/orders-value');
    });
  });

  const cases: [number, unknown, boolean, string, boolean][] = [
    [409, { error_code: 409, message: 'Incompatible' }, true, 'SCHEMA_INCOMPATIBLE', true],
    [422, { error_code: 42201, message: 'Invalid schema' }, true, 'SCHEMA_INVALID', true],
    [404, { error_code: 40403, message: 'Schema not found' }, false, 'SCHEMA_NOT_REGISTERED', true],
    [401, { message: 'Unauthorized' }, true, 'REGISTRY_UNAUTHORIZED', false],
    [503, { message: 'busy' }, true, 'REGISTRY_UNAVAILABLE', false],
    [500, 'oops', true, 'REGISTRY_UNAVAILABLE', false],
  ];
  for (const [status, body, register, reason, permanent] of cases) {
    it(`${status}${register ? '' : ' (look-up)'} → ${reason}, ${permanent ? 'permanent' : 'transient'}`, async () => {
      await withRegistry(status, body, async (url) => {
        const e = (await idOf(url, register, { username: 'key', password: 'p4ss' })) as RegistryError;
        expect(e).toBeInstanceOf(RegistryError);
        expect(e.reason).toBe(reason);
        expect(e.permanent).toBe(permanent);
        expect(e.message).toContain('subject orders-value');
        expect(e.message).not.toContain('p4ss');
      });
    });
  }

  it('a registry that cannot be reached is transient', async () => {
    const e = (await idOf(`http://127.0.0.1:${await freePort()}`)) as RegistryError;
    expect(e).toMatchObject({ reason: 'REGISTRY_UNAVAILABLE', permanent: false });
    expect(e.message).toMatch(/cannot be reached \(ECONNREFUSED\)/);
  });
});
