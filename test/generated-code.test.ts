/**
 * src/gen/ is committed: the package runs it as it is. This regenerates it from proto/ with the
 * pinned buf and protoc-gen-es (no network: the plugin is local) and fails when the committed
 * code is stale — run `npm run gen` and commit the result.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'node_modules', '.bin');
const out = mkdtempSync(join(tmpdir(), 'outbox-gen-'));

afterAll(() => rmSync(out, { recursive: true, force: true }));

function files(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

describe('generated protobuf code', () => {
  it('src/gen/ is what `npm run gen` makes of proto/', () => {
    const r = spawnSync(join(BIN, 'buf'), ['generate', '--template', 'buf.gen.yaml', '-o', out], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { ...process.env, PATH: `${BIN}:${process.env.PATH}` },
    });
    expect(r.status, `buf generate failed: ${r.stderr}`).toBe(0);
    const fresh = join(out, 'src', 'gen');
    const committed = join(ROOT, 'src', 'gen');
    expect(files(committed)).toEqual(files(fresh));
    for (const f of files(fresh)) {
      expect(readFileSync(join(committed, f), 'utf8'), `${f} is stale: run npm run gen`).toBe(
        readFileSync(join(fresh, f), 'utf8'),
      );
    }
  });

  it('proto/ passes buf lint', () => {
    const r = spawnSync(join(BIN, 'buf'), ['lint'], { cwd: ROOT, encoding: 'utf8' });
    expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
  });
});
