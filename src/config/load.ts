import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ErrorCode, RelayError } from '../errors.ts';
import { checkTopicTemplate } from '../route/router.ts';
import { isValueFormat, VALUE_FORMATS, type ValueFormat } from '../route/value-format.ts';
import { type Command, OPTIONS, type OptionSpec, optionsFor } from './options.ts';

/** The resolved configuration: every option with its default applied. */
export interface Config {
  databaseUrl: string;
  schema: string;
  table: string;
  publication: string;
  slot: string;
  standbyPollMs: number;
  sink: 'kafka' | 'stdout';
  kafkaBrokers: string[];
  kafkaClientId: string;
  kafkaSsl: boolean;
  kafkaSslCaFile?: string;
  kafkaSslCertFile?: string;
  kafkaSslKeyFile?: string;
  kafkaSaslMechanism: 'none' | 'plain' | 'scram-sha-256' | 'scram-sha-512';
  kafkaSaslUsername?: string;
  kafkaSaslPassword?: string;
  kafkaCompression: 'none' | 'gzip';
  kafkaAutoCreateTopics: boolean;
  kafkaRequestTimeoutMs: number;
  topicTemplate: string;
  topicOverrides: Record<string, string>;
  valueFormat: ValueFormat;
  valueFormatOverrides: Record<string, ValueFormat>;
  batchSize: number;
  batchBytes: number;
  lingerMs: number;
  maxInflightEvents: number;
  maxInflightBytes: number;
  markPublished: boolean;
  statusIntervalMs: number;
  retryInitialMs: number;
  retryMaxMs: number;
  shutdownTimeoutMs: number;
  ordering: 'strict' | 'relaxed';
  maxAttempts: number;
  failureBackoffMs: number;
  failureBackoffFactor: number;
  failureBackoffMaxMs: number;
  deadLetterTopic?: string;
  sweepIntervalMs: number;
  sweepBatchSize: number;
  slotCheckIntervalMs: number;
  slotWarnBytes: number;
  slotCriticalBytes: number;
  heartbeatIntervalMs: number;
  prune: boolean;
  retentionPublishedMs: number;
  retentionDeadMs?: number;
  pruneIntervalMs: number;
  pruneBatchSize: number;
  config?: string;
  demoEvents?: number;
  demoFollow?: boolean;
  /** Operator commands (src/ops/). */
  json: boolean;
  status?: string[];
  since?: string;
  until?: string;
  aggregateType?: string;
  aggregateId?: string;
  eventId?: string;
  afterId?: number;
  limit: number;
  filter: boolean;
  resetAttempts: boolean;
  yes: boolean;
  dryRun: boolean;
  replayBatchSize: number;
  logLevel: string;
  logFormat: 'auto' | 'json' | 'pretty';
  http: boolean;
  httpPort: number;
  httpHost: string;
  /** Operator console (src/console/). */
  console: boolean;
  consoleToken?: string;
}

export interface Loaded {
  config: Config;
  positionals: string[];
  help: boolean;
}

type Source = 'flag' | 'config file' | 'environment';

const OPS_COMMANDS: readonly Command[] = ['status', 'events', 'replay', 'slot'];

function invalid(spec: OptionSpec, source: Source, why: string): RelayError {
  const where = source === 'flag' ? `--${spec.flag}` : source === 'environment' ? spec.env : `"${spec.key}"`;
  return new RelayError(ErrorCode.CONFIG_INVALID, `${where} (${source}): ${why}`, {
    details: { option: spec.key },
  });
}

function parseValue(spec: OptionSpec, raw: unknown, source: Source): unknown {
  const show = spec.secret ? '(hidden)' : JSON.stringify(raw);
  switch (spec.type) {
    case 'string':
      if (typeof raw !== 'string') throw invalid(spec, source, `expected text, got ${show}`);
      return raw;
    case 'int': {
      const n =
        typeof raw === 'number'
          ? raw
          : typeof raw === 'string' && /^\s*-?\d+\s*$/.test(raw)
            ? Number(raw)
            : NaN;
      if (!Number.isSafeInteger(n)) throw invalid(spec, source, `expected a whole number, got ${show}`);
      if (spec.min !== undefined && n < spec.min)
        throw invalid(spec, source, `must be at least ${spec.min}, got ${n}`);
      return n;
    }
    case 'bool': {
      if (typeof raw === 'boolean') return raw;
      const s = String(raw).trim().toLowerCase();
      if (['1', 'true', 'yes', 'on'].includes(s)) return true;
      if (['0', 'false', 'no', 'off'].includes(s)) return false;
      throw invalid(spec, source, `expected true or false, got ${show}`);
    }
    case 'enum': {
      if (typeof raw !== 'string' || !spec.values!.includes(raw)) {
        throw invalid(spec, source, `expected one of ${spec.values!.join(', ')}, got ${show}`);
      }
      return raw;
    }
    case 'list': {
      const items = Array.isArray(raw) ? raw : typeof raw === 'string' ? [raw] : null;
      if (!items || items.some((i) => typeof i !== 'string'))
        throw invalid(spec, source, `expected a list, got ${show}`);
      return (items as string[])
        .flatMap((i) => i.split(','))
        .map((i) => i.trim())
        .filter((i) => i !== '');
    }
    case 'map': {
      if (raw && typeof raw === 'object' && !Array.isArray(raw)) {
        for (const [k, v] of Object.entries(raw)) {
          if (typeof v !== 'string')
            throw invalid(spec, source, `value of ${JSON.stringify(k)} must be text`);
        }
        return { ...(raw as Record<string, string>) };
      }
      const items = Array.isArray(raw) ? raw : typeof raw === 'string' ? [raw] : [];
      const out: Record<string, string> = {};
      for (const item of (items as string[]).flatMap((i) => String(i).split(','))) {
        if (item.trim() === '') continue;
        const eq = item.indexOf('=');
        if (eq <= 0 || eq === item.length - 1) {
          throw invalid(spec, source, `expected KEY=VALUE, got ${JSON.stringify(item)}`);
        }
        out[item.slice(0, eq).trim()] = item.slice(eq + 1).trim();
      }
      return out;
    }
  }
}

function readSecretFile(spec: OptionSpec, path: string, source: Source): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (e) {
    throw invalid(spec, source, `cannot read the file ${JSON.stringify(path)}: ${(e as Error).message}`);
  }
}

export function loadConfig(command: Command, argv: string[], env: NodeJS.ProcessEnv = process.env): Loaded {
  const specs = optionsFor(command);
  const parseOptions: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
  };
  for (const s of specs) {
    if (s.type === 'bool') {
      parseOptions[s.flag] = { type: 'boolean' };
      parseOptions[`no-${s.flag}`] = { type: 'boolean' };
    } else {
      parseOptions[s.flag] = { type: 'string', multiple: s.type === 'list' || s.type === 'map' };
    }
    if (s.secret) parseOptions[`${s.flag}-file`] = { type: 'string' };
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options: parseOptions, allowPositionals: true, strict: true });
  } catch (e) {
    throw new RelayError(
      ErrorCode.CONFIG_INVALID,
      `${(e as Error).message.replace(/\. To specify.*$/s, '')} (see \`outbox-relay ${command} --help\`)`,
    );
  }
  const flags = parsed.values as Record<string, unknown>;

  const fromFlags: Record<string, unknown> = {};
  const fromEnv: Record<string, unknown> = {};
  for (const s of specs) {
    if (s.type === 'bool' && flags[`no-${s.flag}`]) fromFlags[s.key] = false;
    else if (flags[s.flag] !== undefined) fromFlags[s.key] = parseValue(s, flags[s.flag], 'flag');
    else if (s.secret && typeof flags[`${s.flag}-file`] === 'string') {
      fromFlags[s.key] = readSecretFile(s, flags[`${s.flag}-file`] as string, 'flag');
    }
    if (s.env && env[s.env] !== undefined && env[s.env] !== '')
      fromEnv[s.key] = parseValue(s, env[s.env], 'environment');
    else if (s.secret && s.env && env[`${s.env}_FILE`]) {
      fromEnv[s.key] = readSecretFile(s, env[`${s.env}_FILE`]!, 'environment');
    }
  }

  const fromFile: Record<string, unknown> = {};
  const configPath = (fromFlags.config ?? fromEnv.config) as string | undefined;
  if (configPath) {
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(configPath, 'utf8'));
    } catch (e) {
      throw new RelayError(
        ErrorCode.CONFIG_INVALID,
        `config file ${JSON.stringify(configPath)}: ${(e as Error).message}`,
      );
    }
    if (!json || typeof json !== 'object' || Array.isArray(json)) {
      throw new RelayError(
        ErrorCode.CONFIG_INVALID,
        `config file ${JSON.stringify(configPath)}: expected a JSON object`,
      );
    }
    const known = new Map(specs.map((s) => [s.key, s]));
    // The operator commands read the relay's own config file: options of `run` are not theirs to reject.
    const shared = OPS_COMMANDS.includes(command) ? new Set(OPTIONS.map((o) => o.key)) : new Set<string>();
    for (const [k, v] of Object.entries(json)) {
      const s = known.get(k);
      if (!s && shared.has(k)) continue;
      if (!s) {
        throw new RelayError(
          ErrorCode.CONFIG_INVALID,
          `config file ${JSON.stringify(configPath)}: unknown option "${k}" for \`${command}\` (known: ${[...known.keys()].join(', ')})`,
        );
      }
      fromFile[k] = parseValue(s, v, 'config file');
    }
  }

  const config: Record<string, unknown> = {};
  for (const s of specs) {
    const v = fromFlags[s.key] ?? fromFile[s.key] ?? fromEnv[s.key] ?? s.default;
    config[s.key] = Array.isArray(v) ? [...v] : v && typeof v === 'object' ? { ...v } : v;
  }
  if (config.kafkaBrokers === undefined) config.kafkaBrokers = [];
  const loaded: Loaded = {
    config: config as unknown as Config,
    positionals: parsed.positionals,
    help: !!flags.help,
  };
  if (!loaded.help) validate(command, loaded.config, specs);
  return loaded;
}

function validate(command: Command, c: Config, specs: OptionSpec[]): void {
  const spec = (key: string) => specs.find((s) => s.key === key)!;
  const fail = (key: string, why: string) => {
    const s = spec(key);
    return new RelayError(ErrorCode.CONFIG_INVALID, `--${s.flag}${s.env ? ` / ${s.env}` : ''}: ${why}`, {
      details: { option: key },
    });
  };
  if (command !== 'demo') {
    if (!c.databaseUrl) throw fail('databaseUrl', 'is required (e.g. postgres://relay@db:5432/app)');
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
    if (c.retryMaxMs < c.retryInitialMs) throw fail('retryMaxMs', 'must not be below --retry-initial-ms');
    if (c.failureBackoffMaxMs < c.failureBackoffMs) {
      throw fail('failureBackoffMaxMs', 'must not be below --failure-backoff-ms');
    }
    if (c.slotWarnBytes > 0 && c.slotCriticalBytes > 0 && c.slotCriticalBytes < c.slotWarnBytes) {
      throw fail('slotCriticalBytes', 'must not be below --slot-warn-bytes (or 0 to turn it off)');
    }
    if (c.deadLetterTopic) {
      const d = checkTopicTemplate(c.deadLetterTopic);
      if (d || c.deadLetterTopic.includes('{'))
        throw fail('deadLetterTopic', `${JSON.stringify(c.deadLetterTopic)} is not a topic name`);
    }
  }
  if (command === 'run' && c.sink === 'kafka') {
    if (c.kafkaBrokers.length === 0)
      throw fail('kafkaBrokers', 'is required with --sink kafka (e.g. kafka-1:9092,kafka-2:9092)');
    for (const b of c.kafkaBrokers) {
      if (!/^[^:\s]+:\d+$/.test(b)) throw fail('kafkaBrokers', `${JSON.stringify(b)} is not host:port`);
    }
    if (c.kafkaSaslMechanism !== 'none' && (!c.kafkaSaslUsername || !c.kafkaSaslPassword)) {
      throw fail(
        'kafkaSaslMechanism',
        `${c.kafkaSaslMechanism} needs --kafka-sasl-username and a password (KAFKA_SASL_PASSWORD)`,
      );
    }
    if (!!c.kafkaSslCertFile !== !!c.kafkaSslKeyFile) {
      throw fail('kafkaSslCertFile', 'mutual TLS needs both --kafka-ssl-cert-file and --kafka-ssl-key-file');
    }
  }
}

/** Replaces the password of a connection URL, for logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable url)';
  }
}
