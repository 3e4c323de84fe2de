/**
 * The Kafka floor: bench/KafkaFloor.java (Kafka's own Java producer, nothing else) sending
 * relay-shaped records at the live rate, acks=all, idempotent, linger.ms=0, on the same broker;
 * one process for every floors pass. Its JVM's JIT counts in the warm-up rule like the broker's.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { javaBinary, kafkaCacheDir, kafkaVersionFromEnv } from '../src/dev/local-kafka.ts';
import { javaProgram } from './java-program.ts';
import { watchChild } from './proc.ts';

const SOURCE = fileURLToPath(new URL('./KafkaFloor.java', import.meta.url));

/** One acked record: when it was sent (ms since the epoch) and its send → ack (ms). */
export type FloorSend = { at: number; ms: number };

export type KafkaFloorProcess = {
  pid: number;
  /** Resolves once the producer is built (its first pass fetches the topic's metadata). */
  ready: Promise<void>;
  /** Starts a pass: sends paced at the rate from now on. */
  /** Starts a pass, paced at `rate` (events/s; absent: the rate given at launch). */
  begin: (rate?: number) => void;
  /** Ends the pass: every acked record of it, once flushed. */
  end: () => Promise<FloorSend[]>;
  /** Closes its stdin: it closes the producer and exits. */
  stop: () => Promise<void>;
};

/** One long-lived producer (warm after its first pass, as the relay is) for every floors pass. */
export function startKafkaFloor(
  bootstrap: string[],
  topic: string,
  rate: number,
  valueBytes = 500,
): KafkaFloorProcess {
  const libs = join(kafkaCacheDir(), kafkaVersionFromEnv(), 'libs');
  const java = javaBinary();
  const child = spawn(
    java,
    [
      '-Xmx256m',
      ...javaProgram(SOURCE, libs, java),
      bootstrap.join(','),
      topic,
      String(rate),
      String(valueBytes),
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  const w = watchChild(child);
  const until = async (what: string, ok: () => boolean) => {
    while (!ok()) {
      if (w.code !== undefined)
        throw new Error(`KafkaFloor.java exited ${w.code} before ${what}:\n${w.err.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const ready = until('starting', () => w.out.startsWith('ready\n')).then(() => {
    w.out = '';
  });
  ready.catch(() => {});
  return {
    pid: child.pid!,
    ready,
    begin: (rate) => child.stdin!.write(rate ? `start ${rate.toFixed(1)}\n` : 'start\n'),
    end: async () => {
      child.stdin!.write('stop\n');
      await until('the end of a pass', () => w.out.endsWith('end\n'));
      const report = w.out;
      w.out = '';
      return parseFloorLines(report);
    },
    stop: async () => {
      child.stdin!.end();
      await w.exited;
    },
  };
}

/** A pass's report: "<sent at ms> <send → ack ms>" per acked record, then "end". */
export function parseFloorLines(text: string): FloorSend[] {
  const sends: FloorSend[] = [];
  for (const line of text.split('\n')) {
    const space = line.indexOf(' ');
    if (space < 0) continue;
    sends.push({ at: Number(line.slice(0, space)), ms: Number(line.slice(space + 1)) });
  }
  return sends;
}
