import { describe, expect, it } from 'vitest';
import { type CpuProfile, type Frame, shares, stageOf, stageTimes } from './live-stages.ts';

const ROOT = 'file:///repo';
const f = (functionName: string, path: string): Frame => ({
  functionName,
  url: path ? `${ROOT}/${path}` : '',
});
const session = f('#onData', 'src/stream/session.ts');

describe('stageOf', () => {
  it('charges a frame to its file', () => {
    expect(stageOf([f('decode', 'src/replication/decoder.ts'), session])).toBe('decode');
    expect(stageOf([f('route', 'src/route/router.ts'), session])).toBe('route');
    expect(stageOf([f('encodeProduceBody', 'src/sinks/produce-encoder.ts'), session])).toBe('encode');
    expect(stageOf([f('crc32c', 'src/sinks/crc32c.ts')])).toBe('encode');
    expect(stageOf([f('publish', 'src/sinks/kafka.ts'), session])).toBe('send');
    expect(stageOf([f('record', 'src/outcome/record.ts')])).toBe('progress');
    expect(stageOf([f('save', 'src/lifecycle/progress.ts')])).toBe('progress');
  });

  it('matches the Kafka sink in src/sinks/kafka/ as in src/sinks/kafka*.ts', () => {
    expect(stageOf([f('publish', 'src/sinks/kafka/sink.ts')])).toBe('send');
    expect(stageOf([f('encodeProduceBody', 'src/sinks/kafka/produce-encoder.ts')])).toBe('encode');
    expect(stageOf([f('x', 'src/sinks/kafka/codecs.ts')])).toBe('encode');
  });

  it("charges the compiled relay's frames (dist/*.js, the bench's default) as their sources'", () => {
    const dist = f('#onData', 'dist/stream/session.js');
    expect(stageOf([f('decode', 'dist/replication/decoder.js'), dist])).toBe('decode');
    expect(stageOf([f('encodeProduceBody', 'dist/sinks/kafka/produce-encoder.js'), dist])).toBe('encode');
    expect(stageOf([f('#sendStatus', 'dist/stream/session.js')])).toBe('status');
    expect(stageOf([f('record', 'dist/outcome/record.js')])).toBe('progress');
    expect(stageOf([f('query', 'node_modules/pg/lib/client.js'), dist])).toBe('other');
  });

  it('charges a library frame to the innermost frame of ours that called it', () => {
    const write = f('writeBigUInt64BE', 'node:internal/buffer');
    expect(stageOf([write, f('sendStatus', 'src/replication/connection.ts'), session])).toBe('status');
    expect(stageOf([write, f('#sendStatus', 'src/stream/session.ts')])).toBe('status');
    expect(
      stageOf([f('query', 'node_modules/pg/lib/client.js'), f('save', 'src/lifecycle/progress.ts')]),
    ).toBe('progress');
    expect(
      stageOf([
        f('parse', 'node_modules/pg-protocol/dist/parser.js'),
        f('push', 'src/replication/copy-reader.ts'),
      ]),
    ).toBe('decode');
  });

  it("splits kafkajs into its protocol's encoders and the rest", () => {
    expect(stageOf([f('encode', 'node_modules/kafkajs/src/protocol/encoder.js')])).toBe('encode');
    expect(stageOf([f('decode', 'node_modules/kafkajs/src/protocol/decoder.js')])).toBe('send');
    expect(stageOf([f('send', 'node_modules/kafkajs/src/network/connection.js')])).toBe('send');
  });

  it("charges pg's frames with nothing of ours on the stack to progress (a statement's reply), else other", () => {
    const parse = f('parse', 'node_modules/pg-protocol/dist/parser.js');
    expect(stageOf([parse, f('onread', 'node:net')])).toBe('progress');
    expect(stageOf([parse, f('mark', 'src/lifecycle/statuses.ts')])).toBe('other');
    expect(stageOf([f('tick', 'src/observability/metrics.ts')])).toBe('other');
    expect(stageOf([f('(program)', '')])).toBe('other');
  });

  it('counts garbage collection apart and idle not at all', () => {
    expect(stageOf([f('(garbage collector)', '')])).toBe('gc');
    expect(stageOf([f('(idle)', '')])).toBeNull();
  });
});

describe('stageTimes', () => {
  // root → session → decoder; root → idle; root → GC. Samples every 1,000 µs from 10,000.
  const profile: CpuProfile = {
    startTime: 10_000,
    nodes: [
      { id: 1, callFrame: f('(root)', ''), children: [2, 4, 5] },
      { id: 2, callFrame: session, children: [3] },
      { id: 3, callFrame: f('decode', 'src/replication/decoder.ts') },
      { id: 4, callFrame: f('(idle)', '') },
      { id: 5, callFrame: f('(garbage collector)', '') },
    ],
    samples: [3, 3, 4, 5, 2, 3],
    timeDeltas: [1000, 1000, 1000, 1000, 1000, 1000],
  };

  it('sums the samples of each stage inside the windows, idle left out', () => {
    const all = stageTimes(profile, [[0, 100_000]]);
    expect(all).toMatchObject({ decode: 3000, gc: 1000, other: 1000, send: 0 });
    expect(shares(all)).toMatchObject({ decode: 0.6, gc: 0.2, other: 0.2 });
  });

  it('leaves out the samples outside the windows', () => {
    // Samples at 11,000 … 16,000: the window holds 14,000 (GC) … 16,000 (session, decoder).
    expect(stageTimes(profile, [[13_500, 16_000]])).toMatchObject({ decode: 1000, gc: 1000, other: 1000 });
    expect(shares(stageTimes(profile, []))).toMatchObject({ decode: 0, other: 0 });
  });
});
