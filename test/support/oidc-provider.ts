/**
 * A small OpenID provider on loopback for the OAUTHBEARER tests: the JWKS the broker validates
 * against (GET /jwks) and the client credentials token endpoint the relay calls (POST /token).
 * Tokens are RS256 JWTs (sub = the client id, aud, iss, iat, exp) signed with a key of the JWKS.
 *
 * `mode` makes it misbehave on purpose:
 *   ok        valid tokens of `lifetimeS` seconds
 *   down      503 on /token (the JWKS stays up: it is the broker's, not the relay's, dependency)
 *   expired   tokens whose exp is already past (expires_in still claims `lifetimeS`)
 *   wrong-key tokens signed with a key the JWKS does not hold
 */
import { createPrivateKey, generateKeyPairSync, type KeyObject, randomUUID, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ProviderMode = 'ok' | 'down' | 'expired' | 'wrong-key';

export interface IssuedToken {
  token: string;
  at: number;
  exp: number;
}

export class OidcProvider {
  readonly issuer: string;
  readonly audience = 'outbox-kafka';
  mode: ProviderMode = 'ok';
  lifetimeS: number;
  /** Tokens handed out (any mode but down), and refused requests. */
  readonly issued: IssuedToken[] = [];
  refused = 0;
  readonly #server: Server;
  readonly #clients: Record<string, string>;
  readonly #key: KeyObject;
  readonly #otherKey: KeyObject;
  readonly #jwk: Record<string, unknown>;

  private constructor(server: Server, clients: Record<string, string>, lifetimeS: number) {
    this.#server = server;
    this.#clients = clients;
    this.lifetimeS = lifetimeS;
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    this.#key = privateKey;
    this.#otherKey = createPrivateKey(
      generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'pem', type: 'pkcs8' }),
    );
    this.#jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'k1', alg: 'RS256', use: 'sig' };
    const { port } = server.address() as AddressInfo;
    this.issuer = `http://127.0.0.1:${port}`;
  }

  static async start(clients: Record<string, string>, lifetimeS = 300): Promise<OidcProvider> {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const p = new OidcProvider(server, clients, lifetimeS);
    server.on('request', (req, res) => {
      let body = '';
      req.on('data', (d) => {
        body += d;
      });
      req.on('end', () => {
        const r = p.#handle(req.method ?? '', req.url ?? '', req.headers.authorization, body);
        res.writeHead(r.status, { 'content-type': 'application/json' }).end(JSON.stringify(r.body));
      });
    });
    return p;
  }

  get jwksUrl(): string {
    return `${this.issuer}/jwks`;
  }

  get tokenUrl(): string {
    return `${this.issuer}/token`;
  }

  #handle(method: string, url: string, auth: string | undefined, body: string) {
    if (method === 'GET' && url === '/jwks') return { status: 200, body: { keys: [this.#jwk] } };
    if (method !== 'POST' || url !== '/token') return { status: 404, body: { error: 'not_found' } };
    if (this.mode === 'down') {
      this.refused++;
      return { status: 503, body: { error: 'temporarily_unavailable' } };
    }
    const [id, secret] = Buffer.from((auth ?? '').replace(/^Basic /, ''), 'base64')
      .toString()
      .split(':')
      .map(decodeURIComponent);
    const form = new URLSearchParams(body);
    if (!id || this.#clients[id] === undefined || this.#clients[id] !== secret) {
      this.refused++;
      return {
        status: 401,
        body: { error: 'invalid_client', error_description: 'unknown client or bad secret' },
      };
    }
    if (form.get('grant_type') !== 'client_credentials') {
      this.refused++;
      return { status: 400, body: { error: 'unsupported_grant_type' } };
    }
    const now = Math.floor(Date.now() / 1000);
    const exp = this.mode === 'expired' ? now - 60 : now + this.lifetimeS;
    const token = this.sign(
      {
        sub: id,
        aud: this.audience,
        iss: this.issuer,
        iat: this.mode === 'expired' ? now - 120 : now,
        exp,
        jti: randomUUID(),
        // No scope asked, no scope claim: Kafka's validator refuses an empty one.
        ...(form.get('scope') ? { scope: form.get('scope') } : {}),
      },
      this.mode === 'wrong-key' ? this.#otherKey : this.#key,
    );
    this.issued.push({ token, at: Date.now(), exp: exp * 1000 });
    return {
      status: 200,
      body: { access_token: token, token_type: 'Bearer', expires_in: this.lifetimeS },
    };
  }

  sign(claims: Record<string, unknown>, key: KeyObject = this.#key): string {
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const input = `${b64({ alg: 'RS256', typ: 'JWT', kid: 'k1' })}.${b64(claims)}`;
    return `${input}.${sign('sha256', Buffer.from(input), key).toString('base64url')}`;
  }

  async stop(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((r) => this.#server.close(r));
  }
}
