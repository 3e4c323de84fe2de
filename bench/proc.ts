import type { ChildProcess } from 'node:child_process';
/** Process accounting from /proc (Linux): CPU seconds, peak RSS, a process's children. */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/PID/stat (USER_HZ, 100 on Linux). */
const TICKS = 100;

export type Stat = { ppid: number; cpu: number };

/** ppid and utime + stime (seconds) of a process; null if it is gone. */
export function procStat(pid: number): Stat | null {
  try {
    const f = statFields(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    return { ppid: Number(f[1]), cpu: (Number(f[11]) + Number(f[12])) / TICKS };
  } catch {
    return null;
  }
}

/** The fields of a /proc stat line after the command name (field 3, the state, is [0]). */
function statFields(text: string): string[] {
  return text.slice(text.lastIndexOf(') ') + 2).split(' ');
}

/** cutime + cstime: the CPU of the children a process has reaped (seconds). */
export function reapedChildrenCpu(pid: number): number {
  try {
    const f = statFields(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    return (Number(f[13]) + Number(f[14])) / TICKS;
  } catch {
    return Number.NaN;
  }
}

export function cpuSeconds(pid: number): number {
  return procStat(pid)?.cpu ?? Number.NaN;
}

/** The write syscalls (write, writev…: syscw of /proc/PID/io) a process has made; NaN if it is gone. */
export function writeSyscalls(pid: number): number {
  try {
    const m = /^syscw: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
    return m ? Number(m[1]) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/**
 * A process's seconds on a CPU and runnable but waiting for one (its run-queue delay):
 * /proc/PID/schedstat. NaN if it is gone.
 */
export function schedSeconds(pid: number): { run: number; wait: number } {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ').map(Number);
    return { run: run! / 1e9, wait: wait! / 1e9 };
  } catch {
    return { run: Number.NaN, wait: Number.NaN };
  }
}

/** The machine's busy and total CPU ticks so far, all cores (/proc/stat's first line). */
export function machineTicks(): { busy: number; total: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  // idle and iowait are the not-busy ones.
  return { busy: total - f[3]! - f[4]!, total };
}

export function peakRssMb(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
  } catch {
    return '';
  }
}

/** Pids whose parent is `parent`. */
export function childrenOf(parent: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    if (procStat(pid)?.ppid === parent) out.push(pid);
  }
  return out;
}

/** Load average and what else is busy on the machine: printed with the figures. */
export function machineNote(): string {
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  let busy = '';
  try {
    busy = execFileSync('ps', ['-eo', 'pcpu,args', '--sort=-pcpu', '--no-headers'], { encoding: 'utf8' })
      .split('\n')
      .slice(0, 6)
      .map((l) => l.trim().replace(/\s+/, '% ').slice(0, 70))
      .filter(Boolean)
      .join(', ');
  } catch {
    // No ps: the load average says enough.
  }
  return `load average ${load}${busy ? `; busiest processes (lifetime %CPU): ${busy}` : ''}`;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU seconds of a JVM's JIT compiler threads (HotSpot's "C1/C2 CompilerThreadN"); 0 if it is gone. */
export function jitCpuSeconds(pid: number): number {
  let sum = 0;
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  for (const tid of tasks) {
    try {
      if (!readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').includes('CompilerThre')) continue;
      const f = statFields(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'));
      sum += (Number(f[11]) + Number(f[12])) / TICKS;
    } catch {
      // the thread ended
    }
  }
  return sum;
}

/**
 * A probe for "the JVMs' JIT compilers are done with this workload": true once their compiler
 * threads used less than `share` of a core in each of the last `calls` intervals between calls
 * (call it about once a second). One quiet second was not enough: the broker compiled in bursts.
 */
export function jitQuiet(pids: number[], share = 0.05, calls = 3): () => boolean {
  const total = () => pids.reduce((s, p) => s + jitCpuSeconds(p), 0);
  let cpu = total();
  let at = performance.now();
  let quiet = 0;
  return () => {
    const c = total();
    const now = performance.now();
    quiet = (c - cpu) / ((now - at) / 1000) < share ? quiet + 1 : 0;
    cpu = c;
    at = now;
    return quiet >= calls;
  };
}

/** A driven child process's output and exit, watched: stdout kept whole (the caller consumes it), stderr's first 100 kB. */
export interface WatchedChild {
  out: string;
  err: string;
  /** The exit code once it exited (null: killed by a signal); undefined while it runs. */
  code: number | null | undefined;
  readonly exited: Promise<void>;
}

export function watchChild(child: ChildProcess): WatchedChild {
  let exit!: () => void;
  const w: WatchedChild = { out: '', err: '', code: undefined, exited: new Promise<void>((r) => (exit = r)) };
  child.stdout!.on('data', (d: Buffer) => {
    w.out += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    if (w.err.length < 100_000) w.err += d.toString();
  });
  child.on('exit', (c) => {
    w.code = c;
    exit();
  });
  return w;
}
