/**
 * PostgreSQL's CPU during a drain, split by who spends it: the walsender (logical decoding of the
 * slot), client backends (the relay's own statements: marking rows, relay state, sweeper) and the
 * server's background processes (WAL writer, checkpointer, autovacuum…). Read from /proc/PID/stat
 * of the postmaster's children: the list every 250 ms, the known ones every 25 ms. A backend that
 * exits during the window (pg_recvlogical's walsender does, at --endpos) is reconciled with the
 * postmaster's cutime + cstime, which grows by a reaped child's whole CPU. The walsender is the
 * slot's active_pid; the bench's own connections are excluded by pid.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { childrenOf, cmdline, procStat, reapedChildrenCpu } from './proc.ts';

/**
 * `backgroundBy`: the background share by process kind (the title's words after "postgres: ",
 * a database name left out: `autovacuum worker`, `walwriter`, `checkpointer`…; `exited` for
 * children reaped in the window that were not the walsender).
 */
export type PgCpu = {
  walsender: number;
  statements: number;
  background: number;
  backgroundBy: Record<string, number>;
};

/** Kinds named by two words: `autovacuum worker`, `logical replication`, `background writer`. */
const TWO_WORDS = new Set(['autovacuum', 'logical', 'background']);

/**
 * A background process's kind from its title: `postgres: autovacuum worker db` → `autovacuum
 * worker`, `postgres: 15/main: walwriter` (a cluster_name before it) → `walwriter`.
 */
export function processKind(title: string): string {
  const words = title
    .replace(/^postgres:\s*(?:[^\s:]+:\s+)?/, '')
    .trim()
    .split(/\s+/);
  return words.slice(0, TWO_WORDS.has(words[0]!) ? 2 : 1).join(' ') || '?';
}

type Seen = { title: string; first: number; last: number };

export function postmasterPid(dataDir: string): number {
  return Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
}

export class PgCpuSampler {
  readonly #postmaster: number;
  readonly #exclude: Set<number>;
  readonly #seen = new Map<number, Seen>();
  #timer: NodeJS.Timeout | undefined;
  #fast: NodeJS.Timeout | undefined;
  #walsender: number | null = null;
  #reaped0 = 0;

  readonly #reapedIsWalsender: boolean;

  /** `reapedIsWalsender`: every backend that exits in the window is the walsender (pg_recvlogical's). */
  constructor(postmaster: number, exclude: number[], reapedIsWalsender = false) {
    this.#postmaster = postmaster;
    this.#exclude = new Set(exclude);
    this.#reapedIsWalsender = reapedIsWalsender;
  }

  /** Records every backend's CPU now (a backend first seen later counts from 0). */
  start(): void {
    this.#reaped0 = reapedChildrenCpu(this.#postmaster);
    this.#sample(true);
    this.#timer = setInterval(() => this.#sample(false), 250);
    this.#fast = setInterval(() => this.#refresh(), 25);
  }

  /** The walsender to attribute decoding to (the slot's active_pid), once known. */
  setWalsender(pid: number): void {
    this.#walsender = pid;
    if (!this.#seen.has(pid)) {
      const st = procStat(pid);
      if (st) this.#seen.set(pid, { title: cmdline(pid), first: 0, last: st.cpu });
    }
  }

  stop(): PgCpu {
    clearInterval(this.#timer);
    clearInterval(this.#fast);
    this.#sample(false);
    const out: PgCpu = { walsender: 0, statements: 0, background: 0, backgroundBy: {} };
    const background = (kind: string, cpu: number) => {
      out.background += cpu;
      if (cpu > 0) out.backgroundBy[kind] = (out.backgroundBy[kind] ?? 0) + cpu;
    };
    // Whole-life CPU of children reaped in the window, minus what their last samples showed: the
    // CPU they spent after it. Attributed to the walsender when it is among them.
    const exited = [...this.#seen].filter(([pid]) => procStat(pid) === null);
    const unseen = Math.max(
      0,
      reapedChildrenCpu(this.#postmaster) - this.#reaped0 - exited.reduce((n, [, s]) => n + s.last, 0),
    );
    const walsenderExited = exited.some(([pid, s]) => this.#isWalsender(pid, s));
    if (walsenderExited || this.#reapedIsWalsender) out.walsender += unseen;
    else background('exited', unseen);
    for (const [pid, s] of this.#seen) {
      const used = s.last - s.first;
      if (this.#isWalsender(pid, s)) out.walsender += used;
      else if (s.title.includes('walsender'))
        background('walsender', used); // another slot's (none in a drain)
      else if (isClientBackend(s.title)) out.statements += used;
      else background(processKind(s.title), used);
    }
    return out;
  }

  #isWalsender(pid: number, s: Seen): boolean {
    return pid === this.#walsender || (this.#walsender === null && s.title.includes('walsender'));
  }

  #refresh(): void {
    for (const [pid, s] of this.#seen) {
      const st = procStat(pid);
      if (st) s.last = st.cpu;
    }
  }

  #sample(initial: boolean): void {
    for (const pid of childrenOf(this.#postmaster)) {
      if (this.#exclude.has(pid)) continue;
      const st = procStat(pid);
      if (!st) continue;
      const s = this.#seen.get(pid);
      if (s) s.last = st.cpu;
      else this.#seen.set(pid, { title: cmdline(pid), first: initial ? st.cpu : 0, last: st.cpu });
    }
  }
}

/** "postgres: USER DB HOST(PORT) STATE": a client backend; background workers have fixed titles. */
function isClientBackend(title: string): boolean {
  return /^postgres: \S+ \S+ (\[local\]|\d[\d.:]*\(\d+\)|\S+\(\d+\))/.test(title);
}
