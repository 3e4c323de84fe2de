import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { optionsMarkdown } from './help.ts';
import { OPTIONS } from './options.ts';

describe('docs/configuration.md', () => {
  it('holds the generated option table of the current schema (run `npm run docs:config`)', () => {
    const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    expect(doc).toContain(optionsMarkdown());
  });

  it('documents every option with its flag and environment variable', () => {
    const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    for (const o of OPTIONS) {
      // A removed option is named in the prose ("Removed options"), not in the table.
      expect(doc).toContain(`--${o.flag}`);
      if (o.env) expect(doc).toContain(o.env);
    }
  });
});
