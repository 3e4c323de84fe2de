import { type Config, type Loaded, redactUrl, redactWebhookUrl } from './load.ts';
import type { OptionSpec } from './options.ts';

/** A secret as it may be shown: a URL without its password, anything else as ***. */
export function maskSecret(spec: OptionSpec, value: unknown): unknown {
  if (value === undefined || value === '') return value;
  if (spec.key === 'httpUrl') return redactWebhookUrl(String(value));
  if (!spec.secret) return value;
  return spec.key === 'databaseUrl' ? redactUrl(String(value)) : '***';
}

/** The resolved options of one command, secrets masked, with where each value came from. */
export function resolvedOptions(
  specs: readonly OptionSpec[],
  loaded: Pick<Loaded, 'config' | 'sources'>,
): { key: string; value: unknown; source: string; env?: string }[] {
  return specs
    .filter((s) => s.key !== 'config' && !s.hidden)
    .map((s) => ({
      key: s.key,
      value: maskSecret(s, (loaded.config as unknown as Record<string, unknown>)[s.key as keyof Config]),
      source: loaded.sources[s.key] ?? 'default',
      ...(s.env ? { env: s.env } : {}),
    }));
}

/**
 * `config print` as YAML: one `key: value` line per option (JSON values are YAML flow scalars,
 * so the output can be saved as a config file) with the source as a comment; unset options are
 * commented out.
 */
export function formatResolved(
  command: string,
  configFile: string | undefined,
  rows: ReturnType<typeof resolvedOptions>,
): string {
  const width = Math.max(...rows.map((r) => r.key.length + 2 + JSON.stringify(r.value ?? null).length));
  const lines = [
    `# outbox-relay ${command}: resolved configuration (flags > config file > environment > defaults); secrets masked`,
    `# config file: ${configFile ?? '(none)'}`,
  ];
  for (const r of rows) {
    const from = r.source === 'environment' && r.env ? `environment ${r.env}` : r.source;
    if (r.value === undefined) lines.push(`# ${r.key}: (unset)`);
    else lines.push(`${`${r.key}: ${JSON.stringify(r.value)}`.padEnd(width)}  # ${from}`);
  }
  return lines.join('\n');
}
