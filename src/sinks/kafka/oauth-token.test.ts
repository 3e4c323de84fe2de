import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../dev/local-kafka.ts';
import {
  clientCredentialsFetcher,
  commandFetcher,
  jwtExpiry,
  type OAuthToken,
  OAuthTokenError,
  parseCommandOutput,
  presignedUrlExpiry,
  refreshAt,
  TokenCache,
} from './oauth-token.ts';

const jwt = (claims: object) =>
  `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;

describe('refreshAt', () => {
  it('reuses a token until 20 % of its life is left, and at least 15 s before it expires', () => {
    expect(refreshAt({ value: 't', expiresAt: 3_600_000 }, 0)).toBe(3_600_000 - 720_000);
    expect(refreshAt({ value: 't', expiresAt: 20_000 }, 0)).toBe(5_000);
    // Shorter than the margin: never reused.
    expect(refreshAt({ value: 't', expiresAt: 10_000 }, 0)).toBeLessThan(0);
  });
  it('never reuses a token of unknown expiry', () => {
    expect(refreshAt({ value: 't', expiresAt: null }, 1234)).toBe(1234);
  });
});

describe('token expiry from the token itself', () => {
  it("reads a JWT's exp", () => {
    expect(jwtExpiry(jwt({ sub: 'x', exp: 1700000000 }))).toBe(1_700_000_000_000);
    expect(jwtExpiry(jwt({ sub: 'x' }))).toBeNull();
    expect(jwtExpiry('opaque-token')).toBeNull();
    expect(jwtExpiry('a.%%%.c')).toBeNull();
  });
  it('reads an MSK IAM presigned URL (X-Amz-Date + X-Amz-Expires)', () => {
    const url =
      'https://kafka.eu-west-1.amazonaws.com/?Action=kafka-cluster%3AConnect&X-Amz-Date=20261125T230000Z&X-Amz-Expires=900&X-Amz-Signature=abc';
    expect(presignedUrlExpiry(Buffer.from(url).toString('base64url'))).toBe(
      Date.UTC(2026, 10, 25, 23, 15, 0),
    );
    expect(presignedUrlExpiry(Buffer.from('https://x/?a=1').toString('base64url'))).toBeNull();
  });
});

describe('parseCommandOutput', () => {
  it('takes a bare token, or JSON with token/access_token and expires_in/expiry_ms', () => {
    expect(parseCommandOutput('abc\n', 0)).toEqual({ value: 'abc', expiresAt: null });
    expect(parseCommandOutput('{"token":"abc","expires_in":60}', 1000)).toEqual({
      value: 'abc',
      expiresAt: 61_000,
    });
    expect(parseCommandOutput('{"access_token":"abc","expiry_ms":5}', 0)).toEqual({
      value: 'abc',
      expiresAt: 5,
    });
    const t = jwt({ exp: 10 });
    expect(parseCommandOutput(t, 0)).toEqual({ value: t, expiresAt: 10_000 });
  });
  it('refuses empty or ambiguous output without echoing it (it may hold a secret)', () => {
    expect(() => parseCommandOutput('', 0)).toThrow(OAuthTokenError);
    expect(() => parseCommandOutput('two words-secret', 0)).toThrow(/no token/);
    expect(() => parseCommandOutput('two words-secret', 0)).not.toThrow(/secret/);
    expect(() => parseCommandOutput('{"token":', 0)).toThrow(/not/);
  });
});

describe('TokenCache', () => {
  it('fetches once for concurrent callers, reuses until refreshAt, refetches after, and after invalidate', async () => {
    let now = 0;
    let n = 0;
    const cache = new TokenCache(
      async (): Promise<OAuthToken> => {
        n++;
        return { value: `t${n}`, expiresAt: now + 100_000 };
      },
      () => now,
    );
    expect(await Promise.all([cache.token(), cache.token(), cache.token()])).toEqual(['t1', 't1', 't1']);
    now = 79_999;
    expect(await cache.token()).toBe('t1');
    now = 80_000;
    expect(await cache.token()).toBe('t2');
    cache.invalidate('t1');
    expect(await cache.token(), 'another token than the cached one: kept').toBe('t2');
    cache.invalidate('t2');
    expect(await cache.token()).toBe('t3');
    expect(cache.fetches).toBe(3);
  });
  it('a failed fetch is not cached: the next call tries again', async () => {
    let fail = true;
    const cache = new TokenCache(async () => {
      if (fail) throw new OAuthTokenError('down');
      return { value: 'ok', expiresAt: null };
    });
    await expect(cache.token()).rejects.toThrow('down');
    fail = false;
    expect(await cache.token()).toBe('ok');
  });
});

async function withServer(
  handle: (req: IncomingMessage, body: string) => { status: number; body: string },
  run: (url: string) => Promise<void>,
) {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => {
      body += d;
    });
    req.on('end', () => {
      const r = handle(req, body);
      res.writeHead(r.status, { 'content-type': 'application/json' }).end(r.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}/token`);
  } finally {
    await new Promise((r) => server.close(r));
  }
}

describe('clientCredentialsFetcher (a real HTTP server)', () => {
  it('posts the client credentials grant with HTTP Basic client authentication, scope and audience', async () => {
    let seen: { auth?: string; body?: string } = {};
    await withServer(
      (req, body) => {
        seen = { auth: req.headers.authorization, body };
        return { status: 200, body: JSON.stringify({ access_token: 'tok', expires_in: 300 }) };
      },
      async (url) => {
        const before = Date.now();
        const t = await clientCredentialsFetcher({
          tokenUrl: url,
          clientId: 'relay',
          clientSecret: 's3cr:et',
          scope: 'kafka',
          audience: 'cluster-1',
        })();
        expect(t.value).toBe('tok');
        expect(t.expiresAt).toBeGreaterThanOrEqual(before + 300_000);
      },
    );
    expect(seen.auth).toBe(`Basic ${Buffer.from('relay:s3cr%3Aet').toString('base64')}`);
    expect(Object.fromEntries(new URLSearchParams(seen.body))).toEqual({
      grant_type: 'client_credentials',
      scope: 'kafka',
      audience: 'cluster-1',
    });
  });
  it('an error answer names the endpoint and the OAuth error, never the secret', async () => {
    await withServer(
      () => ({ status: 401, body: '{"error":"invalid_client","error_description":"bad secret"}' }),
      async (url) => {
        const e = await clientCredentialsFetcher({
          tokenUrl: url,
          clientId: 'relay',
          clientSecret: 'hunter2',
        })().catch((x: unknown) => x as Error);
        expect(e).toBeInstanceOf(OAuthTokenError);
        expect((e as Error).message).toContain('answered 401 (invalid_client: bad secret)');
        expect((e as Error).message).not.toContain('hunter2');
      },
    );
  });
  it('an endpoint that is down is a clear, retriable error', async () => {
    const e = await clientCredentialsFetcher({
      tokenUrl: `http://127.0.0.1:${await freePort()}/token`,
      clientId: 'relay',
      clientSecret: 'hunter2',
    })().catch((x: unknown) => x as OAuthTokenError);
    expect(e).toBeInstanceOf(OAuthTokenError);
    expect((e as OAuthTokenError).retriable).toBe(true);
    expect((e as Error).message).toMatch(/cannot be reached \(ECONNREFUSED\)/);
  });
});

describe('commandFetcher', () => {
  it('runs the command and reads its output', async () => {
    expect(await commandFetcher(`echo '{"token":"abc","expires_in":60}'`)()).toMatchObject({ value: 'abc' });
  });
  it('a failing command: its exit code and the end of its stderr, never its stdout', async () => {
    const e = await commandFetcher('echo leaked-token; echo "no credentials" >&2; exit 3')().catch(
      (x: unknown) => x as Error,
    );
    expect(e).toBeInstanceOf(OAuthTokenError);
    expect((e as Error).message).toMatch(/exited with 3: no credentials/);
    expect((e as Error).message).not.toContain('leaked-token');
  });
});
