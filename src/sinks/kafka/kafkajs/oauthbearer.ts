import { createRequire } from 'node:module';
import type { TokenCache } from '../oauth-token.ts';

// kafkajs spreads its error classes into module.exports, which Node's ESM named-export detection
// for CommonJS does not see: required.
const { KafkaJSSASLAuthenticationError } = createRequire(import.meta.url)(
  'kafkajs',
) as typeof import('kafkajs');

/**
 * SASL/OAUTHBEARER for kafkajs (its `sasl.authenticationProvider`), in place of kafkajs' own,
 * which reads nothing of the broker's answer: a broker that refuses a token (expired, badly
 * signed, wrong audience) answers the client's first message with an error challenge
 * ({"status":"invalid_token"}, RFC 7628 §3.2.2), which kafkajs takes for success — it then sends
 * its next request on a connection the broker still holds in authentication, and the broker closes
 * it ("Unexpected Kafka request … during SASL authentication"): a bare "connection closed", retried
 * with the same token for as long as the token lives.
 *
 * Here the challenge is read. A refusal is completed as the RFC asks (the client answers %x01, the
 * broker then fails the exchange), the refused token dropped from the cache, and a
 * KafkaJSSASLAuthenticationError raised naming the broker and its status: kafkajs does not retry
 * it, the relay classifies it as transient (the credentials, not an event) and retries with a
 * newly fetched token.
 */

const SOH = '\u0001';

type Bytes = { encode: () => Promise<Buffer> };
type SaslAuthenticate = (args: {
  request: Bytes;
  response?: { decode: (b: Buffer) => Promise<Buffer>; parse: (b: Buffer) => Promise<Buffer> };
}) => Promise<Buffer | undefined>;

/** A SASL message as kafkajs' SaslAuthenticate request takes it: BYTES (int32 length, then the bytes). */
function bytes(b: Buffer): Bytes {
  return {
    encode: async () => {
      const out = Buffer.alloc(4 + b.length);
      out.writeInt32BE(b.length, 0);
      b.copy(out, 4);
      return out;
    },
  };
}

/** The server's SASL bytes as kafkajs hands them over: BYTES again. */
const serverBytes = {
  decode: async (b: Buffer) =>
    b.length >= 4 ? b.subarray(4, 4 + Math.max(0, b.readInt32BE(0))) : Buffer.alloc(0),
  parse: async (b: Buffer) => b,
};

/** The client's first message (RFC 7628 §3.1): GS2 header, the token, then the SASL extensions. */
export function initialResponse(token: string, extensions: Record<string, string> = {}): string {
  let ext = '';
  for (const [k, v] of Object.entries(extensions)) ext += `${SOH}${k}=${v}`;
  return `n,,${SOH}auth=Bearer ${token}${ext}${SOH}${SOH}`;
}

export function oauthBearerAuthenticator(tokens: TokenCache, extensions: Record<string, string> = {}) {
  return ({
    host,
    port,
    saslAuthenticate,
  }: {
    host: string;
    port: number;
    saslAuthenticate: SaslAuthenticate;
  }) => ({
    authenticate: async (): Promise<void> => {
      const token = await tokens.token();
      const challenge = await saslAuthenticate({
        request: bytes(Buffer.from(initialResponse(token, extensions))),
        response: serverBytes,
      });
      if (!challenge || challenge.length === 0) return;
      tokens.invalidate(token);
      let status = challenge.toString('utf8').slice(0, 300);
      try {
        status = (JSON.parse(status) as { status?: string }).status ?? status;
      } catch {
        // Not JSON: shown as it is (it holds no secret: the broker's error, never the token).
      }
      // The broker fails the exchange once the client acknowledges the error.
      await saslAuthenticate({ request: bytes(Buffer.from(SOH)), response: serverBytes }).catch(() => {});
      throw new (KafkaJSSASLAuthenticationError as unknown as new (m: string) => Error)(
        `SASL OAUTHBEARER: the broker ${host}:${port} refused the token (${status}); the broker's log says why (expiry, signature, audience, issuer)`,
      );
    },
  });
}
