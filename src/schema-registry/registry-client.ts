/**
 * A Schema Registry through the Confluent-compatible REST API (Confluent Schema Registry itself;
 * Apicurio Registry at /apis/ccompat/v7; Redpanda, Karapace). Two calls:
 *   POST /subjects/{subject}/versions   register (returns the id; the existing id when this schema
 *                                       is registered already — registering is idempotent)
 *   POST /subjects/{subject}            look up without registering (--no-schema-registry-auto-register)
 *
 * What an answer means for the events (RegistryError.permanent):
 *   409                 the schema is incompatible with the subject's history (its compatibility
 *                       rule): permanent for the events of that subject until someone changes the
 *                       rule or the subject
 *   422                 the registry finds the schema invalid: permanent (same)
 *   404 on a look-up    the schema is not registered under the subject and auto-registration is
 *                       off: permanent (same)
 *   401, 403            the relay's credentials: every event would meet it — transient, the fix named
 *   5xx, 429, network   an outage: transient (retry, nothing advances), like a broker outage
 */
import type { RegisteredSchema } from './envelope-schema.ts';

export interface RegistryClientOptions {
  url: string;
  username?: string;
  password?: string;
  timeoutMs?: number;
}

export class RegistryError extends Error {
  override name = 'SchemaRegistryError';
  /** SCHEMA_INCOMPATIBLE, SCHEMA_INVALID, SCHEMA_NOT_REGISTERED, REGISTRY_UNAUTHORIZED, REGISTRY_UNAVAILABLE. */
  readonly reason: string;
  readonly permanent: boolean;

  constructor(reason: string, message: string, permanent: boolean) {
    super(message);
    this.reason = reason;
    this.permanent = permanent;
  }
}

export class RegistryClient {
  readonly #base: string;
  readonly #headers: Record<string, string>;
  readonly #timeoutMs: number;
  /** Requests sent (tests). */
  requests = 0;

  constructor(o: RegistryClientOptions) {
    this.#base = o.url.replace(/\/+$/, '');
    this.#headers = {
      'content-type': 'application/vnd.schemaregistry.v1+json',
      accept: 'application/vnd.schemaregistry.v1+json, application/json',
    };
    if (o.username !== undefined)
      this.#headers.authorization = `Basic ${Buffer.from(`${o.username}:${o.password ?? ''}`).toString('base64')}`;
    this.#timeoutMs = o.timeoutMs ?? 10_000;
  }

  /** The id of `schema` under `subject`: registered when `register`, else looked up. */
  async idOf(subject: string, schema: RegisteredSchema, register: boolean): Promise<number> {
    const path = `/subjects/${encodeURIComponent(subject)}${register ? '/versions' : ''}`;
    const body = JSON.stringify({ schemaType: schema.schemaType, schema: schema.schema });
    const where = `the schema registry ${this.#base} (subject ${subject})`;
    let res: Response;
    this.requests++;
    try {
      res = await fetch(`${this.#base}${path}`, {
        method: 'POST',
        headers: this.#headers,
        body,
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      throw new RegistryError(
        'REGISTRY_UNAVAILABLE',
        `${where} cannot be reached (${cause?.code ?? cause?.message ?? (e as Error).message}); retrying, nothing advances`,
        false,
      );
    }
    const text = await res.text().catch(() => '');
    if (res.ok) {
      const id = (JSON.parse(text) as { id?: unknown }).id;
      if (typeof id !== 'number' || !Number.isInteger(id))
        throw new RegistryError(
          'REGISTRY_UNAVAILABLE',
          `${where} answered without a schema id: ${text.slice(0, 200)}`,
          false,
        );
      return id;
    }
    const said = registryMessage(text);
    switch (res.status) {
      case 409:
        throw new RegistryError(
          'SCHEMA_INCOMPATIBLE',
          `${where} refuses the outbox.v1.Envelope schema as incompatible with the subject's history (${said}). Fix: relax the subject's compatibility rule or register under another subject (--schema-registry-subject-strategy), then \`outbox-relay events resend\` the failed events`,
          true,
        );
      case 422:
        throw new RegistryError('SCHEMA_INVALID', `${where} finds the schema invalid (${said})`, true);
      case 404:
        if (!register)
          throw new RegistryError(
            'SCHEMA_NOT_REGISTERED',
            `${where}: the outbox.v1.Envelope schema is not registered under this subject and --no-schema-registry-auto-register is set (${said}). Fix: register it (proto/outbox/v1/envelope.proto), then \`outbox-relay events resend\` the failed events`,
            true,
          );
        break;
      case 401:
      case 403:
        throw new RegistryError(
          'REGISTRY_UNAUTHORIZED',
          `${where} refuses the relay's credentials (${res.status}: ${said}). Fix: --schema-registry-username and the password (SCHEMA_REGISTRY_PASSWORD_FILE); nothing is failed meanwhile`,
          false,
        );
    }
    throw new RegistryError(
      'REGISTRY_UNAVAILABLE',
      `${where} answered ${res.status} (${said}); retrying, nothing advances`,
      false,
    );
  }
}

/** The registry's own error text ({"error_code": …, "message": …}), shortened. */
function registryMessage(text: string): string {
  try {
    const o = JSON.parse(text) as { message?: unknown; error_code?: unknown };
    if (typeof o.message === 'string')
      return `${o.error_code !== undefined ? `${o.error_code} ` : ''}${o.message.slice(0, 300)}`;
  } catch {
    // Not JSON.
  }
  return text.slice(0, 300) || 'no details';
}
