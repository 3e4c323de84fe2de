import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseSecrets, sign } from './webhook-signature.ts';

/** The test vector the Standard Webhooks reference libraries all check (svix, standardwebhooks). */
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

describe('Standard Webhooks signature', () => {
  it("reproduces the standard's published test vector", () => {
    const keys = parseSecrets(VECTOR.secret);
    expect(sign(keys, VECTOR.id, VECTOR.timestamp, Buffer.from(VECTOR.body))).toBe(VECTOR.signature);
  });

  it('the whsec_ prefix is optional, as in the reference libraries', () => {
    expect(parseSecrets(VECTOR.secret.slice('whsec_'.length))).toEqual(parseSecrets(VECTOR.secret));
  });

  it('several secrets (a rotation) give one space-separated signature each, in the order given', () => {
    const other = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const keys = parseSecrets(`${VECTOR.secret}\n${other}`);
    expect(keys).toHaveLength(2);
    expect(parseSecrets(`${VECTOR.secret}, ${other}`)).toEqual(keys);
    const header = sign(keys, VECTOR.id, VECTOR.timestamp, Buffer.from(VECTOR.body));
    const [a, b] = header.split(' ');
    expect(a).toBe(VECTOR.signature);
    const mac = createHmac('sha256', Buffer.alloc(32, 7))
      .update(`${VECTOR.id}.${VECTOR.timestamp}.${VECTOR.body}`)
      .digest('base64');
    expect(b).toBe(`v1,${mac}`);
  });

  it('refuses what is not a secret, naming its position and never its text', () => {
    expect(() => parseSecrets('')).toThrow(/no secret/);
    for (const bad of ['whsec_short', 'hunter2!hunter2!hunter2!hunter2!', `whsec_${'A'.repeat(100)}`]) {
      let caught: unknown;
      try {
        parseSecrets(`${VECTOR.secret} ${bad}`);
      } catch (e) {
        caught = e;
      }
      expect((caught as Error).message).toMatch(/secret 2 of 2 is not a Standard Webhooks secret/);
      expect((caught as Error).message).not.toContain(bad);
    }
  });
});
