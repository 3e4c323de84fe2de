import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { presetFactsOf } from '../compat/facts.ts';
import { ErrorCode, RelayError } from '../errors.ts';
import { checkTopicTemplate } from '../route/router.ts';
import { parseTopicOverride } from '../route/topic-settings.ts';
import { isValueFormat, VALUE_FORMATS, type ValueFormat } from '../route/value-format.ts';
import { parseSecrets } from '../sinks/http/webhook-signature.ts';
import { checkQueueUrlTemplate } from '../sinks/sqs/queue-url.ts';
import {
  type Command,
  type ConfigOf,
  flagSpellings,
  OPTIONS,
  type OptionSpec,
  optionsFor,
  SUBCOMMANDS,
} from './options.ts';
import { UsageError } from './usage-error.ts';

/**
 * The resolved configuration: every option of OPTIONS as a field, with its default applied.
 * Derived from the table (options.ts ConfigOf: a field per key, typed by the option's type, an
 * enum by its values), so the two cannot drift. Four fields say more than the table can:
 */
export type Config = Omit<
  ConfigOf,
  'databaseUrl' | 'kafkaBrokers' | 'natsServers' | 'valueFormatOverrides'
> & {
  /** No default, yet present wherever it is read: validate() refuses a database command without it. */
  databaseUrl: string;
  /** No default (--help shows none): loadConfig makes them [] when not given. */
  kafkaBrokers: string[];
  natsServers: string[];
  /** A map whose values validate() checks are value formats (route/value-format.ts). */
  valueFormatOverrides: Record<string, ValueFormat>;
};

export interface Loaded {
  config: Config;
  positionals: string[];
  help: boolean;
  /** Where each option's value came from. */
  sources: Record<string, Source | 'default'>;
}

export type Source = 'flag' | 'config file' | 'environment';

/** What to read for the right usage: the command's own help page, and the option reference. */
export function configFix(help: string): string {
  return `see \`outbox-relay ${help} --help\` or docs/configuration.md`;
}

/** A bad flag is a usage error (64); a bad file or environment value is bad configuration (78). */
function invalid(spec: OptionSpec, source: Source, why: string, help: string): Error {
  const where = source === 'flag' ? `--${spec.flag}` : source === 'environment' ? spec.env : `"${spec.key}"`;
  if (source === 'flag') return new UsageError(`${where} (flag): ${why}`, help);
  return new RelayError(ErrorCode.CONFIG_INVALID, `${where} (${source}): ${why}`, {
    details: { option: spec.key },
    fix: configFix(help),
  });
}

function parseValue(spec: OptionSpec, raw: unknown, source: Source, help: string): unknown {
  const invalid_ = (why: string) => invalid(spec, source, why, help);
  const show = spec.secret ? '(hidden)' : JSON.stringify(raw);
  switch (spec.type) {
    case 'string':
      if (typeof raw !== 'string') throw invalid_(`expected text, got ${show}`);
      return raw;
    case 'int': {
      const n =
        typeof raw === 'number'
          ? raw
          : typeof raw === 'string' && /^\s*-?\d+\s*$/.test(raw)
            ? Number(raw)
            : NaN;
      if (!Number.isSafeInteger(n)) throw invalid_(`expected a whole number, got ${show}`);
      if (spec.min !== undefined && n < spec.min) throw invalid_(`must be at least ${spec.min}, got ${n}`);
      return n;
    }
    case 'bool': {
      if (typeof raw === 'boolean') return raw;
      const s = String(raw).trim().toLowerCase();
      if (['1', 'true', 'yes', 'on'].includes(s)) return true;
      if (['0', 'false', 'no', 'off'].includes(s)) return false;
      throw invalid_(`expected true or false, got ${show}`);
    }
    case 'enum': {
      if (typeof raw !== 'string' || !spec.values!.includes(raw)) {
        throw invalid_(`expected one of ${spec.values!.join(', ')}, got ${show}`);
      }
      return raw;
    }
    case 'list': {
      const items = Array.isArray(raw) ? raw : typeof raw === 'string' ? [raw] : null;
      if (!items || items.some((i) => typeof i !== 'string')) throw invalid_(`expected a list, got ${show}`);
      return (items as string[])
        .flatMap((i) => i.split(','))
        .map((i) => i.trim())
        .filter((i) => i !== '');
    }
    case 'map': {
      if (raw && typeof raw === 'object' && !Array.isArray(raw)) {
        for (const [k, v] of Object.entries(raw)) {
          if (typeof v !== 'string') throw invalid_(`value of ${JSON.stringify(k)} must be text`);
        }
        return { ...(raw as Record<string, string>) };
      }
      const items = Array.isArray(raw) ? raw : typeof raw === 'string' ? [raw] : [];
      const out: Record<string, string> = {};
      const entries = (i: unknown) => String(i).split(spec.commaValues ? /,(?=[^,=]+=)/ : ',');
      for (const item of (items as string[]).flatMap(entries)) {
        if (item.trim() === '') continue;
        const eq = item.indexOf('=');
        if (eq <= 0 || eq === item.length - 1) {
          throw invalid_(`expected KEY=VALUE, got ${JSON.stringify(item)}`);
        }
        out[item.slice(0, eq).trim()] = item.slice(eq + 1).trim();
      }
      return out;
    }
  }
}

function readSecretFile(spec: OptionSpec, path: string, source: Source, help: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (e) {
    throw invalid(
      spec,
      source,
      `cannot read the file ${JSON.stringify(path)}: ${(e as Error).message}`,
      help,
    );
  }
}

/** A config file: JSON or YAML (YAML is a superset of JSON, so one parser reads both). */
function readConfigFile(path: string, help: string): Record<string, unknown> {
  const bad = (why: string) =>
    new RelayError(ErrorCode.CONFIG_INVALID, `config file ${JSON.stringify(path)}: ${why}`, {
      fix: configFix(help),
    });
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw bad((e as Error).message);
  }
  let doc: unknown;
  try {
    // yaml is required here, not imported: only a relay given a config file loads it (issue 39, item 4).
    const { parse } = createRequire(import.meta.url)('yaml') as typeof import('yaml');
    doc = parse(text, { prettyErrors: true });
  } catch (e) {
    throw bad(`not valid JSON or YAML: ${(e as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw bad('expected a JSON object or a YAML mapping');
  return doc as Record<string, unknown>;
}

/**
 * Flags > config file > environment > defaults, for one command (and subcommand: `events list`
 * takes only its own flags). Throws UsageError for a bad command line, RelayError
 * CONFIG_INVALID for a bad file, environment or combination.
 */
/** --max-inflight-events' default with --delivery exactly-once (docs/delivery.md, throughput). */
export const EXACTLY_ONCE_MAX_INFLIGHT_EVENTS = 40_000;

export function loadConfig(
  command: Command,
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  opts: { sub?: string; validate?: boolean } = {},
): Loaded {
  const { sub, validate: check = true } = opts;
  const specs = optionsFor(command, sub);
  const help = sub ? `${command} ${sub}` : command;
  const parseOptions: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
  };
  for (const s of specs) {
    if (s.type === 'bool') {
      parseOptions[s.flag] = { type: 'boolean' };
      if (s.negatable) parseOptions[`no-${s.flag}`] = { type: 'boolean' };
    } else {
      parseOptions[s.flag] = { type: 'string', multiple: s.type === 'list' || s.type === 'map' };
    }
    if (s.secret) parseOptions[`${s.flag}-file`] = { type: 'string' };
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options: parseOptions, allowPositionals: true, strict: true });
  } catch (e) {
    const message = (e as Error).message.replace(/\. To specify.*$/s, '');
    const unknown = /^Unknown option '--([^'=]+)'/.exec(message)?.[1];
    throw new UsageError(
      unknown ? `${message}${unknownFlagHint(unknown, Object.keys(parseOptions), command, sub)}` : message,
      help,
    );
  }
  const flags = parsed.values as Record<string, unknown>;
  // Only events and slot take words after the command (a subcommand, ids): a stray word
  // (`run stdout` meaning `run --sink stdout`) is a bad command line, not something to ignore.
  if (!SUBCOMMANDS[command] && parsed.positionals.length > 0 && !flags.help) {
    throw new UsageError(`${command} takes no arguments, got ${parsed.positionals.join(' ')}`, help);
  }

  const fromFlags: Record<string, unknown> = {};
  const fromEnv: Record<string, unknown> = {};
  for (const s of specs) {
    if (s.type === 'bool' && s.negatable && flags[`no-${s.flag}`]) fromFlags[s.key] = false;
    else if (flags[s.flag] !== undefined) fromFlags[s.key] = parseValue(s, flags[s.flag], 'flag', help);
    else if (s.secret && typeof flags[`${s.flag}-file`] === 'string') {
      fromFlags[s.key] = readSecretFile(s, flags[`${s.flag}-file`] as string, 'flag', help);
    }
    if (s.env && env[s.env] !== undefined && env[s.env] !== '')
      fromEnv[s.key] = parseValue(s, env[s.env], 'environment', help);
    else if (s.secret && s.env && env[`${s.env}_FILE`]) {
      fromEnv[s.key] = readSecretFile(s, env[`${s.env}_FILE`]!, 'environment', help);
    }
  }

  const fromFile: Record<string, unknown> = {};
  const configPath = (fromFlags.config ?? fromEnv.config) as string | undefined;
  if (configPath) {
    const known = new Map(specs.map((s) => [s.key, s]));
    // One file serves every command: keys of other commands (or subcommands) are not this one's to reject.
    const everyKey = new Set(OPTIONS.map((o) => o.key));
    for (const [k, v] of Object.entries(readConfigFile(configPath, help))) {
      const s = known.get(k);
      if (s) fromFile[k] = parseValue(s, v, 'config file', help);
      else if (!everyKey.has(k)) {
        throw new RelayError(
          ErrorCode.CONFIG_INVALID,
          `config file ${JSON.stringify(configPath)}: unknown option "${k}"${didYouMean(k, [...everyKey], (n) => `"${n}"`)}`,
          { details: { option: k }, fix: configFix(help) },
        );
      }
    }
  }

  const config: Record<string, unknown> = {};
  const sources: Loaded['sources'] = {};
  for (const s of specs) {
    const [v, from] =
      fromFlags[s.key] !== undefined
        ? [fromFlags[s.key], 'flag' as const]
        : fromFile[s.key] !== undefined
          ? [fromFile[s.key], 'config file' as const]
          : fromEnv[s.key] !== undefined
            ? [fromEnv[s.key], 'environment' as const]
            : [s.default, 'default' as const];
    config[s.key] = Array.isArray(v) ? [...v] : v && typeof v === 'object' ? { ...v } : v;
    sources[s.key] = from;
  }
  // Exactly-once: room for a transaction of --kafka-transaction-batches batches in flight while
  // the next one is read (a default only: a bound the user set is kept).
  if (config.delivery === 'exactly-once' && sources.maxInflightEvents === 'default')
    config.maxInflightEvents = EXACTLY_ONCE_MAX_INFLIGHT_EVENTS;
  if (config.kafkaBrokers === undefined) config.kafkaBrokers = [];
  if (config.natsServers === undefined) config.natsServers = [];
  const loaded: Loaded = {
    config: config as unknown as Config,
    positionals: parsed.positionals,
    help: !!flags.help,
    sources,
  };
  if (!loaded.help && check) validate(command, loaded.config, specs, help, sources);
  return loaded;
}

/**
 * What to say about an unknown flag: the command's own flag it is a near miss of
 * (`did you mean --kafka-brokers?`), or the commands that do take it (`status --kafka-brokers`).
 */
function unknownFlagHint(flag: string, known: string[], command: Command, sub?: string): string {
  const near = didYouMean(flag, known, (n) => `--${n}`);
  if (near) return near;
  const owners = OPTIONS.filter((o) => !o.hidden && flagSpellings(o).includes(flag));
  if (owners.length === 0) return '';
  const where = [
    ...new Set(
      owners.flatMap((o) =>
        o.commands.flatMap((c) =>
          c === 'events' && o.subcommands ? o.subcommands.map((x) => `events ${x}`) : [c],
        ),
      ),
    ),
  ].filter((c) => c !== (sub ? `${command} ${sub}` : command));
  return ` (not an option of ${sub ? `${command} ${sub}` : command}; ${where.join(', ')} take${where.length === 1 ? 's' : ''} it)`;
}

/** ` (did you mean x?)` for a near miss (edit distance 1–2), else nothing. */
function didYouMean(word: string, candidates: string[], show: (name: string) => string): string {
  const best = closest(word, candidates);
  return best === undefined ? '' : ` (did you mean ${show(best)}?)`;
}

/** The candidate nearest to `word` (edit distance 1–2, case-insensitive), if any. */
function closest(word: string, candidates: string[]): string | undefined {
  const distance = (a: string, b: string): number => {
    const d = Array.from({ length: b.length + 1 }, (_, i) => i);
    for (let i = 1; i <= a.length; i++) {
      let prev = d[0]!;
      d[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const cur = d[j]!;
        d[j] = Math.min(d[j]! + 1, d[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
        prev = cur;
      }
    }
    return d[b.length]!;
  };
  const best = candidates
    .map((c) => [c, distance(word.toLowerCase(), c.toLowerCase())] as const)
    .sort((x, y) => x[1] - y[1])[0];
  return best && best[1] <= 2 ? best[0] : undefined;
}

/**
 * The checks a value's type cannot express, and those across options. A value that is wrong on
 * its own (a broker that is not host:port, a bad slot name) and came from a flag is a bad command
 * line (UsageError, exit 64), as a flag of the wrong type is; from a config file or the
 * environment, or a combination of options, it is bad configuration (exit 78). Without `sources`
 * every problem is configuration.
 */
export function validate(
  command: Command,
  c: Config,
  specs: OptionSpec[],
  help: string = command,
  sources: Loaded['sources'] = {},
): void {
  const spec = (key: string) => specs.find((s) => s.key === key)!;
  /** A combination of options, or a required one missing: configuration. */
  const need = (key: string, why: string) => {
    const s = spec(key);
    return new RelayError(ErrorCode.CONFIG_INVALID, `--${s.flag}${s.env ? ` / ${s.env}` : ''}: ${why}`, {
      details: { option: key },
      fix: configFix(help),
    });
  };
  /** One option's value is wrong on its own: usage when it came from a flag. */
  const fail = (key: string, why: string) =>
    sources[key] === 'flag' ? new UsageError(`--${spec(key).flag} (flag): ${why}`, help) : need(key, why);
  if (c.markPublished === false)
    throw need(
      'markPublished',
      "was removed: the relay records published events in the slot's progress record (one statement per batch), so the truthful status costs no row writes; drop the option (docs/outbox-table.md, 'Status')",
    );
  if (command !== 'demo') {
    if (!c.databaseUrl) throw need('databaseUrl', 'is required (e.g. postgres://relay@db:5432/app)');
    if (!/^postgres(ql)?:\/\//.test(c.databaseUrl)) {
      throw fail('databaseUrl', 'must start with postgres:// or postgresql://');
    }
  }
  for (const key of ['schema', 'table', 'publication', 'slot'] as const) {
    if (!c[key]) throw fail(key, 'must not be empty');
  }
  if (!/^[a-z0-9_]{1,63}$/.test(c.slot)) {
    throw fail(
      'slot',
      `${JSON.stringify(c.slot)} is not a valid slot name (lower-case letters, digits and _, at most 63)`,
    );
  }
  if (command === 'run' || command === 'demo') {
    const t = checkTopicTemplate(c.topicTemplate);
    if (t) throw fail('topicTemplate', `${JSON.stringify(c.topicTemplate)}: ${t}`);
    for (const [type, topic] of Object.entries(c.topicOverrides)) {
      const o = checkTopicTemplate(topic);
      if (o) throw fail('topicOverrides', `${type}=${topic}: ${o}`);
    }
    for (const [type, format] of Object.entries(c.valueFormatOverrides)) {
      if (!isValueFormat(format))
        throw fail(
          'valueFormatOverrides',
          `${type}=${format}: the format must be one of ${VALUE_FORMATS.join(', ')}`,
        );
    }
    if (c.schemaRegistryUrl !== undefined) validateSchemaRegistry(c, need, fail);
    presetFactsOf(c).validateRun?.(c, fail);
    if (c.retryMaxMs < c.retryInitialMs) throw need('retryMaxMs', 'must not be below --retry-initial-ms');
    if (c.failureBackoffMaxMs < c.failureBackoffMs) {
      throw need('failureBackoffMaxMs', 'must not be below --failure-backoff-ms');
    }
    if (c.slotWarnBytes > 0 && c.slotCriticalBytes > 0 && c.slotCriticalBytes < c.slotWarnBytes) {
      throw need('slotCriticalBytes', 'must not be below --slot-warn-bytes (or 0 to turn it off)');
    }
    if (c.deadLetterTopic) {
      const d = checkTopicTemplate(c.deadLetterTopic);
      if (d || c.deadLetterTopic.includes('{'))
        throw fail('deadLetterTopic', `${JSON.stringify(c.deadLetterTopic)} is not a topic name`);
    }
  }
  if ((command === 'run' || command === 'check') && c.sink === 'kafka') {
    for (const [type, settings] of Object.entries(c.kafkaTopicOverrides ?? {})) {
      try {
        parseTopicOverride(settings);
      } catch (e) {
        throw fail('kafkaTopicOverrides', `${type}=${settings}: ${(e as Error).message}`);
      }
    }
  }
  if (command === 'run' && c.delivery === 'exactly-once') {
    if (c.sink !== 'kafka')
      throw need(
        'delivery',
        `exactly-once needs --sink kafka (Kafka transactions); ${c.sink} is at-least-once`,
      );
    if (
      !c.kafkaProgressTopic ||
      checkTopicTemplate(c.kafkaProgressTopic) ||
      c.kafkaProgressTopic.includes('{')
    )
      throw fail('kafkaProgressTopic', `${JSON.stringify(c.kafkaProgressTopic)} is not a topic name`);
    const noEos = presetFactsOf(c).noExactlyOnce;
    if (noEos) throw need('delivery', noEos);
  }
  if (command === 'run' && c.sink === 'kafka') validateKafkaClient(c, need, fail, 'with --sink kafka');
  if (command === 'migrate') validateCutover(c, need, fail);
  if (command === 'run' && c.sink === 'nats') {
    if (c.natsServers.length === 0)
      throw fail('natsServers', 'is required with --sink nats (e.g. nats://nats-1:4222,nats://nats-2:4222)');
    for (const u of c.natsServers) {
      if (!/^(nats|tls):\/\/[^\s/]+$|^[^:\s/]+:\d+$/.test(u))
        throw fail('natsServers', `${JSON.stringify(redactUrl(u))} is not nats://host:port`);
    }
    if (!!c.natsUser !== !!c.natsPassword)
      throw fail(
        'natsUser',
        'user and password go together: set both --nats-user and NATS_PASSWORD, or neither',
      );
    if (c.natsToken && c.natsUser)
      throw fail('natsToken', 'choose one way to authenticate: a token or a user and password');
  }
  if ((command === 'run' || command === 'check') && c.sink === 'http') validateHttp(c, fail);
  if (command === 'run' && c.sink === 'rabbitmq') {
    if (!c.rabbitmqUrl)
      throw fail(
        'rabbitmqUrl',
        'is required with --sink rabbitmq (e.g. RABBITMQ_URL=amqp://relay:secret@rabbit:5672/%2F)',
      );
    if (!/^amqps?:\/\//.test(c.rabbitmqUrl)) throw fail('rabbitmqUrl', 'must start with amqp:// or amqps://');
    if (c.rabbitmqManagementUrl !== undefined && !/^https?:\/\/[^/]/.test(c.rabbitmqManagementUrl))
      throw fail('rabbitmqManagementUrl', 'must be the management API, http(s)://host:15672');
    // '' is the default exchange (routing key = queue name).
    const e = c.rabbitmqExchange === '' ? null : checkTopicTemplate(c.rabbitmqExchange);
    if (e) throw fail('rabbitmqExchange', `${JSON.stringify(c.rabbitmqExchange)}: ${e}`);
  }
  if ((command === 'run' || command === 'check') && c.sink === 'redis') {
    if (!c.redisUrl)
      throw fail('redisUrl', 'is required with --sink redis (e.g. REDIS_URL=redis://:secret@redis:6379/0)');
    if (!/^rediss?:\/\/[^/]/.test(c.redisUrl))
      throw fail('redisUrl', 'must be redis://[user:password@]host:port[/db] or rediss://… (TLS)');
    // redis://SECRET@host: Redis clients take a lone user part as a user name, not a password —
    // the server refuses the login and the secret would be logged as a user name. Not echoed.
    if (/^rediss?:\/\/[^:/@]+@/.test(c.redisUrl))
      throw fail(
        'redisUrl',
        'has a user part and no password (redis://X@host): Redis clients read X as a user name, not the password. Write the password after a colon: redis://:PASSWORD@host:6379/0 (or redis://USER:PASSWORD@host with an ACL user)',
      );
    if (command === 'run' && c.redisStreamTemplate.trim() === '')
      throw fail('redisStreamTemplate', 'is empty: name a stream, e.g. {topic} or outbox:{aggregate_type}');
    // A re-send within the retry horizon must find the event's dedup key (docs/sinks.md, Redis Streams).
    const horizonS = Math.ceil((c.retryMaxMs + c.redisTimeoutMs) / 1000);
    if (command === 'run' && c.redisDedupTtlS < horizonS)
      throw fail(
        'redisDedupTtlS',
        `${c.redisDedupTtlS} s is below the retry horizon of ${horizonS} s (--retry-max-ms + --redis-timeout-ms): a re-sent event could be stored twice; raise it (the default is 86400, 1 day) or lower --retry-max-ms`,
      );
  }
  if ((command === 'run' || command === 'check') && c.sink === 'sqs') {
    if (!c.sqsQueueUrlTemplate)
      throw fail(
        'sqsQueueUrlTemplate',
        'is required with --sink sqs (e.g. https://sqs.eu-west-1.amazonaws.com/123456789012/{aggregate_type}.fifo)',
      );
    const q = checkQueueUrlTemplate(c.sqsQueueUrlTemplate);
    if (q) throw fail('sqsQueueUrlTemplate', `${JSON.stringify(c.sqsQueueUrlTemplate)}: ${q}`);
    if (c.sqsEndpoint !== undefined && !/^https?:\/\/[^/\s]+\/?$/.test(c.sqsEndpoint))
      throw fail('sqsEndpoint', `${JSON.stringify(c.sqsEndpoint)} is not http(s)://host[:port]`);
  }
}

/** Builds the error of a check: `need` for a combination, `fail` for one option's own value (validate's). */
type Check = (key: string, why: string) => Error;

/** --sink http: a URL template that makes http(s) URLs, and Standard Webhooks secrets (never shown). */
function validateHttp(c: Config, fail: Check): void {
  const url = c.httpUrl;
  if (!url)
    throw fail('httpUrl', 'is required with --sink http (e.g. WEBHOOK_URL=https://hooks.example/{topic})');
  const unknown = /\{(?!(?:topic|aggregate_type|event_type)\})[^}]*\}?/.exec(url);
  if (unknown)
    throw fail(
      'httpUrl',
      `unknown placeholder ${JSON.stringify(unknown[0])}: use {topic}, {aggregate_type} or {event_type}`,
    );
  let u: URL | null = null;
  try {
    u = new URL(url.replace(/\{[a-z_]+\}/g, 'x'));
  } catch {}
  if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:'))
    throw fail('httpUrl', `${JSON.stringify(redactWebhookUrl(url))} is not an http:// or https:// URL`);
  if (u.username || u.password)
    throw fail('httpUrl', 'must not hold credentials: receivers authenticate the relay by the signature');
  if (!c.httpSecret)
    throw fail(
      'httpSecret',
      'is required with --sink http: set WEBHOOK_SECRET_FILE (or --http-secret-file) to a file holding a Standard Webhooks secret, whsec_<base64> (make one: echo "whsec_$(openssl rand -base64 32)")',
    );
  try {
    parseSecrets(c.httpSecret);
  } catch (e) {
    throw fail('httpSecret', (e as Error).message);
  }
  if (c.httpCaFile !== undefined && !existsSync(c.httpCaFile))
    throw fail('httpCaFile', `${JSON.stringify(c.httpCaFile)} does not exist`);
}

/** Kafka's connection options: brokers as host:port, SASL with its credentials, mutual TLS with both files. */
function validateKafkaClient(c: Config, need: Check, fail: Check, when: string): void {
  if (c.kafkaBrokers.length === 0)
    throw need('kafkaBrokers', `is required ${when} (e.g. kafka-1:9092,kafka-2:9092)`);
  for (const b of c.kafkaBrokers) {
    if (!/^[^:\s]+:\d+$/.test(b)) throw fail('kafkaBrokers', `${JSON.stringify(b)} is not host:port`);
  }
  if (c.kafkaSaslMechanism === 'oauthbearer') validateOAuth(c, need, fail);
  else if (c.kafkaSaslMechanism !== 'none' && (!c.kafkaSaslUsername || !c.kafkaSaslPassword)) {
    throw need(
      'kafkaSaslMechanism',
      `${c.kafkaSaslMechanism} needs --kafka-sasl-username and a password (KAFKA_SASL_PASSWORD)`,
    );
  }
  if (!!c.kafkaSslCertFile !== !!c.kafkaSslKeyFile) {
    throw need('kafkaSslCertFile', 'mutual TLS needs both --kafka-ssl-cert-file and --kafka-ssl-key-file');
  }
}

/** migrate's cutover from Debezium: one source of offsets, with --compat debezium; a topic needs Kafka's options. */
function validateCutover(c: Config, need: Check, fail: Check): void {
  if (c.debeziumOffsets !== undefined && c.debeziumOffsetsTopic !== undefined)
    throw fail(
      'debeziumOffsetsTopic',
      "give either --debezium-offsets (a file) or --debezium-offsets-topic (the distributed worker's topic), not both",
    );
  for (const key of ['debeziumOffsets', 'debeziumOffsetsTopic', 'debeziumConnector'] as const)
    if (c[key] !== undefined && !presetFactsOf(c).cutover)
      throw need(key, 'belongs to the cutover from Debezium: add --compat debezium');
  if (
    c.debeziumConnector !== undefined &&
    c.debeziumOffsets === undefined &&
    c.debeziumOffsetsTopic === undefined
  )
    throw need(
      'debeziumConnector',
      'picks whose offsets the cutover reads: give --debezium-offsets <file> or --debezium-offsets-topic <topic> too',
    );
  if (c.debeziumOffsetsTopic !== undefined)
    validateKafkaClient(c, need, fail, "to read --debezium-offsets-topic (the Connect cluster's brokers)");
}

/** --schema-registry-url: an http(s) URL, something to frame, and a password only with a user. */
function validateSchemaRegistry(c: Config, need: Check, fail: Check): void {
  if (!/^https?:\/\/[^\s/]+/.test(c.schemaRegistryUrl ?? ''))
    throw fail('schemaRegistryUrl', `${JSON.stringify(c.schemaRegistryUrl)} is not an http(s) URL`);
  const formats = [c.valueFormat, ...Object.values(c.valueFormatOverrides)];
  if (!formats.includes('envelope-protobuf'))
    throw need(
      'schemaRegistryUrl',
      'frames envelope-protobuf values only, and no event has that format: set --value-format envelope-protobuf (or a --value-format-override TYPE=envelope-protobuf), or drop the option',
    );
  if (c.schemaRegistryPassword !== undefined && !c.schemaRegistryUsername)
    throw need('schemaRegistryUsername', 'is required with a registry password');
}

/** --kafka-sasl-mechanism oauthbearer: a token endpoint with its client, or a token command; not both. */
function validateOAuth(c: Config, need: Check, fail: Check): void {
  const { kafkaOauthTokenUrl: url, kafkaOauthTokenCommand: command } = c;
  if (url && command)
    throw need('kafkaOauthTokenCommand', 'give either --kafka-oauth-token-url or a token command, not both');
  if (!url && !command)
    throw need(
      'kafkaSaslMechanism',
      'oauthbearer needs --kafka-oauth-token-url (with --kafka-oauth-client-id and a client secret) or --kafka-oauth-token-command',
    );
  for (const [k, v] of Object.entries(c.kafkaOauthExtensions)) {
    // RFC 7628 §3.1: key = 1*(ALPHA), value = 1*(VCHAR / SP / HTAB / CR / LF); "auth" is the token's.
    if (!/^[A-Za-z]+$/.test(k) || k === 'auth')
      throw fail(
        'kafkaOauthExtensions',
        `${JSON.stringify(k)}: an extension name is letters only, and not "auth"`,
      );
    if (!/^[\x21-\x7e \t\r\n]+$/.test(v))
      throw fail('kafkaOauthExtensions', `${k}: the value may hold only printable ASCII and spaces`);
  }
  if (url) {
    if (!/^https?:\/\/[^\s/]+/.test(url))
      throw fail('kafkaOauthTokenUrl', `${JSON.stringify(url)} is not an http(s) URL`);
    if (!c.kafkaOauthClientId) throw need('kafkaOauthClientId', 'is required with --kafka-oauth-token-url');
    if (!c.kafkaOauthClientSecret)
      throw need(
        'kafkaOauthClientSecret',
        'is required with --kafka-oauth-token-url: set KAFKA_OAUTH_CLIENT_SECRET_FILE (or --kafka-oauth-client-secret-file) to a file holding it',
      );
  }
}

/**
 * A webhook URL as logs, errors and pages may show it: scheme, host and port, and the path with
 * every segment that looks like a credential replaced by *** (16 or more characters of letters
 * and digits together, as Slack's, Discord's or Teams' webhook URLs carry their token), every
 * query value replaced by *** (Azure Functions' `?code=`, `?sig=`), placeholders ({topic}) as
 * written. Never the user-info part. The URL itself still goes to the receiver unchanged.
 */
export function redactWebhookUrl(url: string): string {
  const m = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)([^?#]*)(\?[^#]*)?/i.exec(url);
  if (!m) return '(unparsable url)';
  const authority = m[2]!.slice(m[2]!.lastIndexOf('@') + 1);
  const path = m[3]!
    .split('/')
    .map((seg) => (looksLikeCredential(seg) ? '***' : seg))
    .join('/');
  const query = m[4]
    ? `?${m[4]
        .slice(1)
        .split('&')
        .map((kv) => (kv.includes('=') ? `${kv.slice(0, kv.indexOf('='))}=***` : kv ? '***' : kv))
        .join('&')}`
    : '';
  return `${m[1]}${authority}${path}${query}`;
}

function looksLikeCredential(segment: string): boolean {
  let s = segment;
  try {
    s = decodeURIComponent(segment);
  } catch {}
  if (/^\{[a-z_]+\}$/.test(s)) return false;
  return s.length >= 16 && /[0-9]/.test(s) && /[A-Za-z]/.test(s);
}

/**
 * Replaces the password of a connection URL, for logs: the password part, a lone user part of a
 * Redis URL (where it would be a mistaken password: load refuses it, but a log must not show it),
 * and query parameters that name a secret (`?password=`, which Redis clients also read).
 */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    else if (u.username && /^rediss?:$/.test(u.protocol)) u.username = '***';
    for (const k of new Set(u.searchParams.keys()))
      if (/pass|secret|token|key|auth/i.test(k)) u.searchParams.set(k, '***');
    return u.toString();
  } catch {
    return '(unparsable url)';
  }
}
