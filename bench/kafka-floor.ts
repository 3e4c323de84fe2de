/**
 * The Kafka floor: bench/KafkaFloor.java (Kafka's own Java producer, nothing else) sending
 * relay-shaped records at the live rate, acks=all, idempotent, linger.ms=0, on the same broker.
 * Its JVM's JIT counts in the warm-up rule like the broker's.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { javaBinary, kafkaCacheDir, kafkaVersionFromEnv } from '../src/dev/local-kafka.ts';

const SOURCE = fileURLToPath(new URL('./KafkaFloor.java', import.meta.url));
const CLASSES = fileURLToPath(new URL('../.tmp/kafka-floor-classes', import.meta.url));

/**
 * The class path and main class: compiled once with javac beside java (each floors pass would
 * otherwise compile the source in its JVM, seconds of CPU on the shared cores, inside its
 * warm-up), or the source file itself when there is no javac.
 */
function program(libs: string, java: string): string[] {
  const javac = join(dirname(java), 'javac');
  const compiled = join(CLASSES, 'KafkaFloor.class');
  if (!existsSync(compiled) || statSync(compiled).mtimeMs < statSync(SOURCE).mtimeMs) {
    mkdirSync(CLASSES, { recursive: true });
    const r = spawnSync(existsSync(javac) ? javac : 'javac', ['-d', CLASSES, '-cp', join(libs, '*'), SOURCE]);
    if (r.status !== 0) return ['-cp', join(libs, '*'), SOURCE];
  }
  return ['-cp', `${join(libs, '*')}:${CLASSES}`, 'KafkaFloor'];
}

/** One acked record: when it was sent (ms since the epoch) and its send → ack (ms). */
export type FloorSend = { at: number; ms: number };

export type KafkaFloorProcess = {
  pid: number;
  /** Resolves once the producer is built and about to send its first record. */
  ready: Promise<void>;
  /** Closes its stdin: it flushes, closes the producer and reports every acked record. */
  stop: () => Promise<FloorSend[]>;
};

export function startKafkaFloor(bootstrap: string[], topic: string, rate: number, valueBytes = 500) {
  const libs = join(kafkaCacheDir(), kafkaVersionFromEnv(), 'libs');
  const java = javaBinary();
  const child = spawn(
    java,
    ['-Xmx256m', ...program(libs, java), bootstrap.join(','), topic, String(rate), String(valueBytes)],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => {
    if (err.length < 100_000) err += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.on('exit', r));
  const ready = new Promise<void>((resolve, reject) => {
    const check = setInterval(() => {
      if (out.startsWith('ready\n')) {
        clearInterval(check);
        resolve();
      }
    }, 20);
    void exited.then((code) => {
      clearInterval(check);
      reject(new Error(`KafkaFloor.java exited ${code} before sending:\n${err.slice(-3000)}`));
    });
  });
  ready.catch(() => {});
  return {
    pid: child.pid!,
    ready,
    stop: async (): Promise<FloorSend[]> => {
      child.stdin!.end();
      const code = await exited;
      if (code !== 0) throw new Error(`KafkaFloor.java exited ${code}:\n${err.slice(-3000)}`);
      return parseFloorLines(out);
    },
  } satisfies KafkaFloorProcess;
}

/** KafkaFloor.java's report: "ready", then "<sent at ms> <send → ack ms>" per acked record. */
export function parseFloorLines(text: string): FloorSend[] {
  const sends: FloorSend[] = [];
  for (const line of text.split('\n')) {
    const space = line.indexOf(' ');
    if (space < 0) continue;
    sends.push({ at: Number(line.slice(0, space)), ms: Number(line.slice(space + 1)) });
  }
  return sends;
}
