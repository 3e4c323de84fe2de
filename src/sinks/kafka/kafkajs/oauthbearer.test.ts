import { describe, expect, it } from 'vitest';
import { TokenCache } from '../oauth-token.ts';
import { initialResponse, oauthBearerAuthenticator } from './oauthbearer.ts';

/** A server's SASL answer as kafkajs hands it over: BYTES (int32 length, then the bytes). */
const answer = (text: string) => {
  const b = Buffer.from(text);
  const out = Buffer.alloc(4 + b.length);
  out.writeInt32BE(b.length, 0);
  b.copy(out, 4);
  return out;
};

type Exchange = {
  request: { encode: () => Promise<Buffer> };
  response?: { decode: (b: Buffer) => Promise<Buffer>; parse: (b: Buffer) => Promise<Buffer> };
};

/** Runs the authenticator against a scripted broker; returns what the client sent. */
async function exchange(server: string[], tokens: TokenCache, extensions?: Record<string, string>) {
  const sent: string[] = [];
  const saslAuthenticate = async ({ request, response }: Exchange) => {
    const raw = await request.encode();
    expect(raw.readInt32BE(0)).toBe(raw.length - 4);
    sent.push(raw.subarray(4).toString());
    const reply = answer(server.shift() ?? '');
    return response ? response.parse(await response.decode(reply)) : undefined;
  };
  const auth = oauthBearerAuthenticator(tokens, extensions)({ host: 'b1', port: 9093, saslAuthenticate });
  const error = await auth.authenticate().then(
    () => null,
    (e: unknown) => e as Error,
  );
  return { sent, error };
}

describe('OAUTHBEARER for kafkajs', () => {
  it('the initial response of RFC 7628: GS2 header, the bearer token, extensions, two ^A', () => {
    expect(initialResponse('tok')).toBe('n,,\u0001auth=Bearer tok\u0001\u0001');
    expect(initialResponse('tok', { logicalCluster: 'lkc-1', identityPoolId: 'pool-2' })).toBe(
      'n,,\u0001auth=Bearer tok\u0001logicalCluster=lkc-1\u0001identityPoolId=pool-2\u0001\u0001',
    );
  });

  it('an empty answer is success; the token stays cached', async () => {
    let n = 0;
    const tokens = new TokenCache(async () => ({ value: `t${++n}`, expiresAt: Date.now() + 3_600_000 }));
    const { sent, error } = await exchange([''], tokens, { logicalCluster: 'lkc-1' });
    expect(error).toBeNull();
    expect(sent).toEqual(['n,,\u0001auth=Bearer t1\u0001logicalCluster=lkc-1\u0001\u0001']);
    expect(await tokens.token()).toBe('t1');
  });

  it("an error challenge is a refusal: answered with ^A, the token dropped, a SASL authentication error naming the broker's status", async () => {
    let n = 0;
    const tokens = new TokenCache(async () => ({ value: `t${++n}`, expiresAt: Date.now() + 3_600_000 }));
    const { sent, error } = await exchange(['{"status":"invalid_token"}', ''], tokens);
    expect(sent).toEqual(['n,,\u0001auth=Bearer t1\u0001\u0001', '\u0001']);
    expect(error?.name).toBe('KafkaJSSASLAuthenticationError');
    expect(error?.message).toMatch(/the broker b1:9093 refused the token \(invalid_token\)/);
    expect(error?.message).not.toContain('t1');
    expect(await tokens.token(), 'the refused token is not offered again').toBe('t2');
  });
});
