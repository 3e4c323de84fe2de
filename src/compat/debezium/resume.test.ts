import { describe, expect, it } from 'vitest';
import { UsageError } from '../../config/usage-error.ts';
import {
  AmbiguousOffsetsError,
  fileEntries,
  type OffsetsEntry,
  parseOffsetsKey,
  parseOffsetsValue,
  pickOffsets,
} from './offsets.ts';
import { DebeziumResume } from './resume.ts';

/** Feeds transactions [commitLsn, event lsns…] through the rule; the lsns published. */
function run(r: DebeziumResume<bigint>, txns: [bigint, ...bigint[]][]): bigint[] {
  const out: bigint[] = [];
  for (const [commit, ...events] of txns) {
    r.begin(commit);
    for (const e of events) out.push(...r.event(e, e));
    out.push(...r.commit());
  }
  return out;
}

describe('resuming after Debezium (WalPositionLocator)', () => {
  it('skips transactions committed at or before lsn_commit, and the changes up to lsn_proc in its transaction', () => {
    // T1 processed whole; T2 processed up to 210; T3 not at all.
    const r = new DebeziumResume<bigint>(210n, 150n);
    expect(
      run(r, [
        [150n, 100n, 110n],
        [300n, 200n, 210n, 220n, 230n],
        [400n, 350n],
      ]),
    ).toEqual([220n, 230n, 350n]);
  });

  it('an interleaved transaction below lsn_proc that does not hold it is published whole, in order', () => {
    // T2 (changes 120, 130) committed after the transaction holding lsn_proc = 205.
    const r = new DebeziumResume<bigint>(205n, 190n);
    expect(
      run(r, [
        [250n, 200n, 205n, 210n],
        [260n, 120n, 130n],
      ]),
    ).toEqual([210n, 120n, 130n]);
  });

  it('lsn_proc at a transaction end: nothing of it again, the next one whole', () => {
    const r = new DebeziumResume<bigint>(230n, 300n);
    expect(
      run(r, [
        [300n, 200n, 230n],
        [400n, 310n, 320n],
      ]),
    ).toEqual([310n, 320n]);
  });
});

describe("Debezium's offsets", () => {
  const file = Buffer.concat([
    Buffer.from([0xac, 0xed, 0x00, 0x05, 0x73, 0x72]),
    Buffer.from('java.util.HashMap\u0005\u0007'),
    Buffer.from('["bench-debezium-outbox",{"server":"app"}]'),
    Buffer.from([0x75, 0x71, 0x00, 0x7e]),
    Buffer.from(
      '{"lsn_proc":26797496,"messageType":"INSERT","lsn_commit":26797400,"lsn":26797496,"txId":811}',
    ),
  ]);

  it('reads lsn_proc and lsn_commit out of a standalone offsets file (JSON inside Java serialisation)', () => {
    expect(pickOffsets(fileEntries(file, 'offsets.dat'), {}, 'the file')).toEqual({
      lsnProc: 26797496n,
      lsnCommit: 26797400n,
      server: 'app',
      connector: 'bench-debezium-outbox',
      where: 'offsets.dat',
    });
    expect(() => pickOffsets(fileEntries(file, 'f'), { server: 'other' }, 'the file')).toThrow(
      /of topic.prefix other in the file; it holds offsets of bench-debezium-outbox \(topic.prefix app\)/,
    );
    expect(() => pickOffsets(fileEntries(Buffer.from('{}'), 'f'), {}, 'the file')).toThrow(
      /no Debezium PostgreSQL offsets/,
    );
  });

  it('a value saved alone matches any connector; LSNs above 2^53 stay exact', () => {
    const big = '{"lsn_proc":18446744073709551000,"lsn_commit":18446744073709550000}';
    expect(pickOffsets(fileEntries(Buffer.from(big), 'v.json'), { server: 'app' }, 'v.json')).toMatchObject({
      lsnProc: 18446744073709551000n,
      lsnCommit: 18446744073709550000n,
      connector: null,
    });
  });

  it('several connectors: the one named, else an error listing them (a usage error, exit 64)', () => {
    const entries: OffsetsEntry[] = [
      { connector: 'a', server: 'app', value: '{"lsn_proc":10,"lsn_commit":9}', where: 'p0@1' },
      { connector: 'b', server: 'app', value: '{"lsn_proc":20,"lsn_commit":19}', where: 'p3@7' },
      { connector: 'files', server: 'x', value: '{"position":3}', where: 'p1@0' },
    ];
    expect(pickOffsets(entries, { connector: 'b' }, 't')).toMatchObject({ lsnProc: 20n, where: 'p3@7' });
    let error: unknown;
    try {
      pickOffsets(entries, { server: 'app' }, 'the offsets topic connect-offsets');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(AmbiguousOffsetsError);
    expect(error).toBeInstanceOf(UsageError);
    expect((error as Error).message).toMatch(
      /several Debezium PostgreSQL connectors: a \(topic.prefix app\), b \(topic.prefix app\)\. Name one with --debezium-connector/,
    );
    // Only one PostgreSQL connector: picked without a name (the other key is not Debezium's PostgreSQL).
    expect(pickOffsets(entries.slice(1), {}, 't')).toMatchObject({ connector: 'b' });
  });

  it('a tombstone (offsets reset) is refused, naming where it was', () => {
    const entries: OffsetsEntry[] = [
      { connector: 'a', server: 'app', value: null, where: 'partition 4 offset 9' },
    ];
    expect(() => pickOffsets(entries, {}, 't')).toThrow(
      /offsets of a \(topic.prefix app\) were reset \(a tombstone at partition 4 offset 9\)/,
    );
  });

  it('keys: only a Debezium source partition, the whole key', () => {
    expect(parseOffsetsKey('["c\\"q",{"server":"ü"}]')).toEqual({ connector: 'c"q', server: 'ü' });
    expect(parseOffsetsKey('["c",{"server":"s"}] trailing')).toBeNull();
    expect(parseOffsetsKey('["c",{"filename":"f"}]')).toBeNull();
    expect(parseOffsetsValue('{"lsn":5}')).toBeNull();
  });
});
