/**
 * The bench's clock for commit and receipt times: the wall clock — what Kafka's LogAppendTime,
 * the NATS server, Redis, ElasticMQ and the bench's other processes stamp with — at
 * sub-millisecond resolution.
 *
 * `performance.timeOrigin + performance.now()` alone is the wall clock as it was when the process
 * started: when the wall clock is stepped later (a virtual machine's clock set by its host), every
 * time stamped by another process is that far from it. In one full run (docs/benchmarks.md, "Stop
 * 51") every latency read on another process's clock came out ~5,025 ms — the relay's, the PG
 * floor's, Debezium's, NATS' — while those read in the bench's own process (webhook receiver,
 * RabbitMQ consumer, exactly-once consumer) were a few ms. So this clock follows Date.now(): it is
 * re-anchored whenever it is more than 2 ms away from it (Date.now() has whole milliseconds), and
 * clockSteps() lists each step it followed.
 */
/** One step the clock followed: when (ms since the epoch) and by how much (ms). */
export type ClockStep = { at: number; ms: number };

let offset = 0;
const steps: ClockStep[] = [];

export function now(): number {
  let t = 0;
  for (let tries = 0; tries < 3; tries++) {
    // Date.now() read between two readings of the monotonic clock: a process preempted between
    // them (a busy 2-core machine: +6 ms, then −6 ms at the next call) is not a step. Only a
    // reading taken within a millisecond is compared.
    const before = performance.now();
    const wall = Date.now();
    const after = performance.now();
    t = performance.timeOrigin + before + offset;
    if (after - before > 1) continue;
    if (wall - t > 2 || t - wall > 2) {
      offset += wall - t;
      steps.push({ at: wall, ms: wall - t });
      return wall;
    }
    return t;
  }
  return t;
}

/** The wall clock's steps this process followed. */
export function clockSteps(): readonly ClockStep[] {
  return steps;
}

/** A line for the report when the wall clock was stepped during the run, else ''. */
export function clockStepNote(): string {
  if (steps.length === 0) return '';
  const list = steps.map(
    (s) => `${s.ms >= 0 ? '+' : ''}${s.ms.toFixed(0)} ms at ${new Date(s.at).toISOString()}`,
  );
  return `the wall clock was stepped during the run (${list.join(', ')}): latencies of commits on both sides of a step are off by it; the bench's clock followed it (bench/clock.ts)`;
}
