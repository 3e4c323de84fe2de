import type { ColumnsMode } from '../../replication/columns-tuple.ts';
/**
 * The Debezium preset's options, by their Debezium names: the Outbox Event Router's
 * (`transforms.<name>.…` in a connector's properties, `debezium.transforms.<name>.…` in Debezium
 * Server's; the prefix may be left out) and the converters' (Kafka Connect's `key.converter`,
 * `value.converter`, `header.converter` with `….schemas.enable`; Debezium Server's
 * `debezium.format.key|value|header`). Pure: a map of properties in, the resolved routing or an
 * error naming the property out.
 */
import type { JsonNullBehavior } from './expand-json.ts';
import { compileJavaRegex, parseJavaReplacement, type Replacement } from './java-regex.ts';

export type Converter = { kind: 'json'; schemasEnable: boolean } | { kind: 'string' };

export interface AdditionalField {
  field: string;
  placement: 'header' | 'envelope' | 'partition';
  alias: string;
}

export interface DebeziumRouting {
  fieldEventId: string;
  fieldEventKey: string | null;
  fieldEventType: string;
  fieldEventTimestamp: string | null;
  fieldPayload: string;
  routeByField: string;
  topicRegex: RegExp;
  topicReplacement: Replacement;
  tombstoneOnEmptyPayload: boolean;
  /** `table.expand.json.payload`: a JSON payload becomes structured JSON with an inferred schema (expand-json.ts). */
  expandJsonPayload: boolean;
  /** `table.json.payload.null.behavior`: null fields of an expanded payload left out, or kept as optional bytes. */
  jsonNullBehavior: JsonNullBehavior;
  additional: AdditionalField[];
  keyConverter: Converter;
  valueConverter: Converter;
  headerConverter: Converter;
  /** The connector's `topic.prefix`: names the envelope's schema (with an envelope placement). */
  topicPrefix: string;
  /**
   * The connector's `extended.headers.enabled` (Debezium 3, default true): every record starts
   * with the `__debezium.context.*` headers (connectorLogicalName = topic.prefix, taskId,
   * connectorName, runId).
   */
  contextHeaders: boolean;
}

const ROUTER_DEFAULTS: Record<string, string> = {
  'table.field.event.id': 'id',
  'table.field.event.key': 'aggregateid',
  'table.field.event.type': 'type',
  'table.field.event.payload': 'payload',
  'route.by.field': 'aggregatetype',
  'route.topic.regex': '(?<routedByValue>.*)',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: Debezium's placeholder syntax.
  'route.topic.replacement': 'outbox.event.${routedByValue}',
  'route.tombstone.on.empty.payload': 'false',
  'table.expand.json.payload': 'false',
  'table.json.payload.null.behavior': 'ignore',
  'table.op.invalid.behavior': 'warn',
  'table.field.additional.missing': 'error',
};

/** Router options accepted and without effect on the records the relay writes (and why, for the docs). */
const NO_EFFECT = new Set([
  'table.field.event.type', // unused by Debezium since DBZ-2014 (kept for configurations that name it)
  'table.op.invalid.behavior', // the relay's publication sends inserts only
  'table.field.additional.missing',
  'tracing.span.context.field',
  'tracing.operation.name',
  'tracing.with.context.field.only',
  'type',
]);

const CONVERTERS: Record<string, Converter['kind']> = {
  'org.apache.kafka.connect.json.JsonConverter': 'json',
  'org.apache.kafka.connect.storage.StringConverter': 'string',
  'org.apache.kafka.connect.storage.SimpleHeaderConverter': 'string',
  json: 'json',
  string: 'string',
  simplestring: 'string',
};

/** A property of the preset that cannot be used; `property` is its Debezium name. */
export class DebeziumOptionError extends Error {
  readonly property: string;
  constructor(property: string, message: string) {
    super(`${property}: ${message}`);
    this.property = property;
  }
}

function bool(props: Record<string, string>, key: string, fallback: boolean): boolean {
  const v = props[key];
  if (v === undefined) return fallback;
  if (/^true$/i.test(v.trim())) return true;
  if (/^false$/i.test(v.trim())) return false;
  throw new DebeziumOptionError(key, `${JSON.stringify(v)} is not true or false`);
}

/**
 * Normalises a connector's or Debezium Server's property names: `transforms.<name>.x` and
 * `debezium.transforms.<name>.x` become `x` when `transforms[.<name>].type` is the EventRouter
 * (or no type is given); `debezium.source.x` becomes `x`.
 */
export function normaliseProperties(input: Readonly<Record<string, string>>): {
  props: Record<string, string>;
  server: boolean;
} {
  const props: Record<string, string> = {};
  let server = false;
  for (const [rawKey, v] of Object.entries(input)) {
    let k = rawKey.trim();
    if (k.startsWith('debezium.')) {
      server = true;
      k = k.slice('debezium.'.length);
      if (k.startsWith('source.')) k = k.slice('source.'.length);
    }
    const t = /^transforms\.[^.]+\.(.+)$/.exec(k);
    if (t) k = t[1]!;
    props[k] = v.trim();
  }
  return { props, server };
}

function converter(
  props: Record<string, string>,
  role: 'key' | 'value' | 'header',
  server: boolean,
): Converter {
  // Debezium Server: debezium.format.<role> (json by default for all three).
  const serverFormat = props[`format.${role}`];
  const connectName = props[`${role}.converter`];
  const property = connectName !== undefined ? `${role}.converter` : `format.${role}`;
  const name =
    connectName ?? serverFormat ?? (role === 'header' && !server ? 'SimpleHeaderConverter' : 'json');
  const kind = CONVERTERS[name] ?? (name === 'SimpleHeaderConverter' ? 'string' : undefined);
  if (!kind)
    throw new DebeziumOptionError(
      property,
      `${JSON.stringify(name)} is not supported by the preset (org.apache.kafka.connect.json.JsonConverter, org.apache.kafka.connect.storage.StringConverter, SimpleHeaderConverter for headers; Debezium Server: json)`,
    );
  if (kind === 'string') return { kind };
  const schemas = props[`${role}.converter.schemas.enable`] ?? props[`format.${role}.schemas.enable`];
  return {
    kind,
    schemasEnable:
      schemas === undefined
        ? true
        : bool({ [`${role}.converter.schemas.enable`]: schemas }, `${role}.converter.schemas.enable`, true),
  };
}

/** Resolves the preset from Debezium properties (normalised or not); throws DebeziumOptionError. */
export function debeziumRouting(input: Readonly<Record<string, string>>): DebeziumRouting {
  const { props, server } = normaliseProperties(input);
  const get = (k: string): string => props[k] ?? ROUTER_DEFAULTS[k]!;
  const type = props.type;
  if (type !== undefined && type !== 'io.debezium.transforms.outbox.EventRouter')
    throw new DebeziumOptionError(
      'transforms.<name>.type',
      `${type} is not io.debezium.transforms.outbox.EventRouter`,
    );
  const nulls = get('table.json.payload.null.behavior').trim().toLowerCase();
  if (nulls !== 'ignore' && nulls !== 'optional_bytes')
    throw new DebeziumOptionError(
      'table.json.payload.null.behavior',
      `${JSON.stringify(nulls)} is not ignore or optional_bytes`,
    );
  if (props['table.field.event.schema.version'])
    throw new DebeziumOptionError(
      'table.field.event.schema.version',
      'versioned envelope schemas are not supported yet',
    );
  const regexText = get('route.topic.regex');
  let topicRegex: RegExp;
  let topicReplacement: Replacement;
  try {
    topicRegex = compileJavaRegex(regexText);
  } catch (e) {
    throw new DebeziumOptionError('route.topic.regex', (e as Error).message);
  }
  try {
    topicReplacement = parseJavaReplacement(get('route.topic.replacement'), topicRegex);
  } catch (e) {
    throw new DebeziumOptionError('route.topic.replacement', (e as Error).message);
  }
  const additional: AdditionalField[] = [];
  for (const entry of (props['table.fields.additional.placement'] ?? '').split(',')) {
    if (entry.trim() === '') continue;
    const [field, placement, alias] = entry.split(':').map((s) => s.trim());
    if (!field || (placement !== 'header' && placement !== 'envelope' && placement !== 'partition'))
      throw new DebeziumOptionError(
        'table.fields.additional.placement',
        `${JSON.stringify(entry)}: each entry is column:header|envelope|partition[:alias]`,
      );
    additional.push({ field, placement, alias: alias || field });
  }
  const key = props['table.field.event.key'];
  for (const k of Object.keys(props)) {
    if (
      k in ROUTER_DEFAULTS ||
      NO_EFFECT.has(k) ||
      /^(key|value|header)\.converter(\.schemas\.enable)?$/.test(k) ||
      /^format\.(key|value|header)(\.schemas\.enable)?$/.test(k) ||
      [
        'table.fields.additional.placement',
        'table.field.event.timestamp',
        'table.field.event.schema.version',
        'topic.prefix',
        'extended.headers.enabled',
      ].includes(k)
    )
      continue;
    // Connector and worker properties (database.*, slot.name, plugin.name…) are the relay's own
    // options: accepted in the same file, without effect here.
    if (
      /^(connector\.class|name|tasks\.max|database\.|slot\.|plugin\.|publication\.|snapshot\.|table\.include|schema\.include|offset\.|bootstrap\.|transforms$|sink\.|source\.|format\.|producer\.|binary\.|heartbeat\.|poll\.|max\.|signal\.|errors\.|listeners|plugin)/.test(
        k,
      )
    )
      continue;
    throw new DebeziumOptionError(k, 'not an option of the Outbox Event Router or of the converters');
  }
  const binary = props['binary.handling.mode'];
  if (binary !== undefined && binary !== 'bytes')
    throw new DebeziumOptionError('binary.handling.mode', `${binary} is not supported (bytes, the default)`);
  return {
    fieldEventId: get('table.field.event.id'),
    fieldEventKey: key === '' ? null : (key ?? ROUTER_DEFAULTS['table.field.event.key']!),
    fieldEventType: get('table.field.event.type'),
    fieldEventTimestamp: props['table.field.event.timestamp'] || null,
    fieldPayload: get('table.field.event.payload'),
    routeByField: get('route.by.field'),
    topicRegex,
    topicReplacement,
    tombstoneOnEmptyPayload: bool(props, 'route.tombstone.on.empty.payload', false),
    expandJsonPayload: bool(props, 'table.expand.json.payload', false),
    jsonNullBehavior: nulls,
    additional,
    keyConverter: converter(props, 'key', server),
    valueConverter: converter(props, 'value', server),
    headerConverter: converter(props, 'header', server),
    topicPrefix: props['topic.prefix'] ?? '',
    contextHeaders: bool(props, 'extended.headers.enabled', true),
  };
}

/** The columns the stream's decoder takes the pipeline's own fields from. */
export function columnsModeOf(r: DebeziumRouting): ColumnsMode {
  return {
    eventId: r.fieldEventId,
    key: r.fieldEventKey,
    routeBy: r.routeByField,
    type: r.fieldEventType,
    payload: r.fieldPayload,
  };
}
