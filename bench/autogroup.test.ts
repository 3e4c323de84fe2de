import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyAutogroup } from './autogroup.ts';

const knob = (value: string | null) => {
  const path = join(mkdtempSync(join(tmpdir(), 'autogroup-')), 'sched_autogroup_enabled');
  if (value !== null) writeFileSync(path, `${value}\n`);
  return path;
};

describe('bench --autogroup', () => {
  it('off: turns the autogroups off for the run and puts the value back once, dropping its handlers', () => {
    const path = knob('1');
    const before = process.listenerCount('SIGTERM');
    const s = applyAutogroup('off', path);
    expect(readFileSync(path, 'utf8')).toBe('0');
    expect(s.note).toMatch(/turned off for this run/);
    expect(process.listenerCount('SIGTERM')).toBe(before + 1);
    s.restore();
    expect(readFileSync(path, 'utf8')).toBe('1');
    expect(process.listenerCount('SIGTERM')).toBe(before);
    writeFileSync(path, '1 changed since');
    s.restore();
    expect(readFileSync(path, 'utf8')).toBe('1 changed since');
  });

  it('keep, already off, or no knob: the machine is left as it is, and the note says so', () => {
    const on = knob('1');
    expect(applyAutogroup('keep', on).note).toMatch(/on \(--autogroup keep\)/);
    expect(readFileSync(on, 'utf8')).toBe('1\n');
    const off = knob('0');
    expect(applyAutogroup('off', off).note).toMatch(/off \(as the machine had them\)/);
    expect(readFileSync(off, 'utf8')).toBe('0\n');
    expect(applyAutogroup('off', knob(null)).note).toMatch(/no session autogroups/);
  });
});
