import { type Command, OPTIONS, type OptionSpec, optionsFor } from './options.ts';

function defaultText(s: OptionSpec): string {
  if (s.default === undefined) return '';
  if (Array.isArray(s.default)) return s.default.length ? s.default.join(',') : '';
  if (typeof s.default === 'object') return Object.keys(s.default).length ? JSON.stringify(s.default) : '';
  return String(s.default);
}

function flagText(s: OptionSpec): string {
  if (s.type === 'bool') return `--${s.flag} / --no-${s.flag}`;
  const metavar =
    s.type === 'enum' ? s.values!.join('|') : s.type === 'int' ? 'N' : s.type === 'map' ? 'K=V' : 'VALUE';
  return `--${s.flag} ${metavar}`;
}

/** Option reference for one command, grouped, from the schema. */
export function optionsHelp(command: Command): string {
  const lines: string[] = [];
  let group = '';
  for (const s of optionsFor(command)) {
    if (s.group !== group) {
      group = s.group;
      lines.push('', `${group}:`);
    }
    const def = defaultText(s);
    const meta = [s.env ? `env ${s.env}` : '', def ? `default ${def}` : ''].filter(Boolean).join('; ');
    lines.push(`  ${flagText(s)}`, `      ${s.doc}${meta ? ` [${meta}]` : ''}`);
  }
  return lines.join('\n');
}

/** docs/configuration.md's table, generated from the schema (a test keeps the doc current). */
export function optionsMarkdown(): string {
  const rows = [
    '| flag | environment | config key | default | commands | meaning |',
    '|---|---|---|---|---|---|',
  ];
  for (const s of OPTIONS) {
    const esc = (t: string) => t.replace(/\|/g, '\\|');
    rows.push(
      `| \`${esc(flagText(s))}\` | ${s.env ? `\`${s.env}\`` : ''} | \`${s.key}\` | ${defaultText(s) ? `\`${esc(defaultText(s))}\`` : ''} | ${s.commands.join(', ')} | ${esc(s.doc)} |`,
    );
  }
  return rows.join('\n');
}
