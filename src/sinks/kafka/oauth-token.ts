import { spawn } from 'node:child_process';
import type { Config } from '../../config/load.ts';

/**
 * Tokens for SASL/OAUTHBEARER (docs/kafka.md, "Authentication"): from an OIDC token endpoint
 * (client credentials grant) or from a command that prints one (AWS MSK IAM and other signers).
 *
 * When kafkajs asks for a token: it authenticates every new connection, and re-authenticates a
 * connection in band (KIP-368) before the first request sent less than 10 s
 * (kafkajs' reauthenticationThreshold) before the session lifetime the broker announced — the
 * token's remaining life, or the broker's connections.max.reauth.ms if shorter. So a token handed
 * out must have comfortably more than 10 s left, or every request would re-authenticate.
 *
 * The rule (refreshAt, pure): a token is reused until `max(20 % of its life, 15 s)` before it
 * expires (Java's client refreshes at 80 % of the life, sasl.login.refresh.window.factor), then the
 * next request for one fetches a new one; concurrent requests share one fetch. A token of unknown
 * expiry is never reused. A token the broker refused is dropped (invalidate), so the retry fetches
 * a fresh one rather than offering the refused one again.
 *
 * Failures (endpoint down, 4xx/5xx, a command that fails) throw OAuthTokenError: transient for the
 * relay (retry, nothing advances). Secrets never appear in its message: not the client secret, not
 * a token, not the command's output (only the end of its stderr).
 */

export interface OAuthToken {
  value: string;
  /** ms since epoch; null when neither the source nor the token says. */
  expiresAt: number | null;
}

export interface ClientCredentials {
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  scope?: string;
  audience?: string;
}

export type TokenFetcher = () => Promise<OAuthToken>;

export class OAuthTokenError extends Error {
  override name = 'OAuthTokenError';
  readonly retriable = true;
}

const MIN_MARGIN_MS = 15_000;

/** When a token obtained at `obtainedAt` should be replaced (ms since epoch). Pure. */
export function refreshAt(token: OAuthToken, obtainedAt: number): number {
  if (token.expiresAt === null) return obtainedAt;
  const life = token.expiresAt - obtainedAt;
  return token.expiresAt - Math.max(life * 0.2, MIN_MARGIN_MS);
}

/** The `exp` claim of a JWT, in ms; null when `token` is not a JWT with one. Pure. */
export function jwtExpiry(token: string): number | null {
  const parts = token.split('.');
  if (parts.length !== 3) return null;
  try {
    const claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof claims.exp === 'number' && Number.isFinite(claims.exp) ? claims.exp * 1000 : null;
  } catch {
    return null;
  }
}

/**
 * The expiry of an AWS MSK IAM token (base64url of a presigned URL with X-Amz-Date and
 * X-Amz-Expires); null otherwise. Pure.
 */
export function presignedUrlExpiry(token: string): number | null {
  let url: URL;
  try {
    url = new URL(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  const date = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(
    url.searchParams.get('X-Amz-Date') ?? '',
  );
  const seconds = Number(url.searchParams.get('X-Amz-Expires'));
  if (!date || !Number.isFinite(seconds) || seconds <= 0) return null;
  const [, y, mo, d, h, mi, s] = date.map(Number) as number[];
  return Date.UTC(y!, mo! - 1, d!, h!, mi!, s!) + seconds * 1000;
}

/**
 * A token command's output: a JSON object ({"token" or "access_token", and "expires_in" in seconds
 * or "expiry_ms" since epoch}) or the bare token (its expiry read from the token when it is a JWT
 * or an MSK presigned URL). Pure.
 */
export function parseCommandOutput(out: string, now: number): OAuthToken {
  const text = out.trim();
  if (text.startsWith('{')) {
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw new OAuthTokenError('the token command printed something that starts like JSON but is not');
    }
    const value = o.token ?? o.access_token;
    if (typeof value !== 'string' || value === '')
      throw new OAuthTokenError('the token command printed JSON without a "token" (or "access_token")');
    const expiresAt =
      typeof o.expiry_ms === 'number'
        ? o.expiry_ms
        : typeof o.expires_in === 'number'
          ? now + o.expires_in * 1000
          : expiryOf(value);
    return { value, expiresAt };
  }
  if (text === '' || /\s/.test(text))
    throw new OAuthTokenError(
      'the token command printed no token (expected one line: the token, or a JSON object with "token")',
    );
  return { value: text, expiresAt: expiryOf(text) };
}

function expiryOf(token: string): number | null {
  return jwtExpiry(token) ?? presignedUrlExpiry(token);
}

/** The client credentials grant (RFC 6749 §4.4), the client authenticated with HTTP Basic as Kafka's Java client does. */
export function clientCredentialsFetcher(c: ClientCredentials, timeoutMs = 10_000): TokenFetcher {
  const basic = Buffer.from(
    `${encodeURIComponent(c.clientId)}:${encodeURIComponent(c.clientSecret)}`,
  ).toString('base64');
  return async () => {
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (c.scope) form.set('scope', c.scope);
    if (c.audience) form.set('audience', c.audience);
    const now = Date.now();
    let res: Response;
    try {
      res = await fetch(c.tokenUrl, {
        method: 'POST',
        headers: {
          authorization: `Basic ${basic}`,
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: form,
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      throw new OAuthTokenError(
        `OAUTHBEARER: the token endpoint ${c.tokenUrl} cannot be reached (${cause?.code ?? cause?.message ?? (e as Error).message}); retrying`,
      );
    }
    const text = await res.text().catch(() => '');
    if (!res.ok) {
      // An OAuth error response names the problem (invalid_client, invalid_scope); it holds no secret.
      let why = text.slice(0, 300);
      try {
        const o = JSON.parse(text) as { error?: string; error_description?: string };
        if (o.error) why = o.error_description ? `${o.error}: ${o.error_description}` : o.error;
      } catch {
        // Not JSON: the start of the body.
      }
      throw new OAuthTokenError(
        `OAUTHBEARER: the token endpoint ${c.tokenUrl} answered ${res.status}${why ? ` (${why})` : ''}; check --kafka-oauth-client-id, the client secret and --kafka-oauth-scope; retrying`,
      );
    }
    let body: { access_token?: unknown; expires_in?: unknown };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      throw new OAuthTokenError(`OAUTHBEARER: the token endpoint ${c.tokenUrl} answered with no JSON`);
    }
    if (typeof body.access_token !== 'string' || body.access_token === '')
      throw new OAuthTokenError(
        `OAUTHBEARER: the token endpoint ${c.tokenUrl} answered with no access_token`,
      );
    const expiresIn = Number(body.expires_in);
    return {
      value: body.access_token,
      expiresAt:
        body.expires_in !== undefined && Number.isFinite(expiresIn)
          ? now + expiresIn * 1000
          : jwtExpiry(body.access_token),
    };
  };
}

/** Runs `command` through the shell; its standard output is the token (parseCommandOutput). */
export function commandFetcher(command: string, timeoutMs = 30_000): TokenFetcher {
  return () =>
    new Promise((resolve, reject) => {
      const now = Date.now();
      const child = spawn(command, { shell: true, stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
      const out: Buffer[] = [];
      let err = '';
      child.stdout.on('data', (d: Buffer) => out.push(d));
      child.stderr.on('data', (d: Buffer) => {
        err = (err + d.toString()).slice(-300);
      });
      child.on('error', (e) =>
        reject(new OAuthTokenError(`OAUTHBEARER: --kafka-oauth-token-command cannot run: ${e.message}`)),
      );
      child.on('close', (code, signal) => {
        if (code !== 0) {
          const how = signal ? `was stopped by ${signal}` : `exited with ${code}`;
          return reject(
            new OAuthTokenError(
              `OAUTHBEARER: --kafka-oauth-token-command ${how}${err.trim() ? `: ${err.trim()}` : ''}; retrying`,
            ),
          );
        }
        try {
          resolve(parseCommandOutput(Buffer.concat(out).toString('utf8'), now));
        } catch (e) {
          reject(e);
        }
      });
    });
}

/** A cached token from `fetch`, refreshed by refreshAt's rule; one fetch at a time. */
export class TokenCache {
  readonly #fetch: TokenFetcher;
  readonly #now: () => number;
  #current: { token: OAuthToken; refreshAt: number } | null = null;
  #inFlight: Promise<OAuthToken> | null = null;
  /** Tokens obtained so far (tests, logs). */
  fetches = 0;

  constructor(fetch: TokenFetcher, now: () => number = Date.now) {
    this.#fetch = fetch;
    this.#now = now;
  }

  async token(): Promise<string> {
    const c = this.#current;
    if (c && this.#now() < c.refreshAt) return c.token.value;
    this.#inFlight ??= this.#fetch()
      .then((token) => {
        this.fetches++;
        this.#current = { token, refreshAt: refreshAt(token, this.#now()) };
        return token;
      })
      .finally(() => {
        this.#inFlight = null;
      });
    return (await this.#inFlight).value;
  }

  /** Drops `token` if it is the cached one (the broker refused it): the next token() fetches a new one. */
  invalidate(token: string): void {
    if (this.#current?.token.value === token) this.#current = null;
  }
}

/** The token cache of --kafka-sasl-mechanism oauthbearer (null for other mechanisms). */
export function oauthTokens(
  c: Pick<
    Config,
    | 'kafkaSaslMechanism'
    | 'kafkaOauthTokenUrl'
    | 'kafkaOauthClientId'
    | 'kafkaOauthClientSecret'
    | 'kafkaOauthScope'
    | 'kafkaOauthAudience'
    | 'kafkaOauthTokenCommand'
  >,
): TokenCache | null {
  if (c.kafkaSaslMechanism !== 'oauthbearer') return null;
  if (c.kafkaOauthTokenCommand) return new TokenCache(commandFetcher(c.kafkaOauthTokenCommand));
  return new TokenCache(
    clientCredentialsFetcher({
      tokenUrl: c.kafkaOauthTokenUrl ?? '',
      clientId: c.kafkaOauthClientId ?? '',
      clientSecret: c.kafkaOauthClientSecret ?? '',
      scope: c.kafkaOauthScope,
      audience: c.kafkaOauthAudience,
    }),
  );
}
