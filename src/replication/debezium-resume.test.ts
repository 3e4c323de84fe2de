import { describe, expect, it } from 'vitest';
import { parseDebeziumOffsets } from './debezium-offsets.ts';
import { DebeziumResume } from './debezium-resume.ts';

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
  it('reads lsn_proc and lsn_commit out of a standalone offsets file (JSON inside Java serialisation)', () => {
    const file = Buffer.concat([
      Buffer.from([0xac, 0xed, 0x00, 0x05, 0x73, 0x72]),
      Buffer.from('java.util.HashMap\u0005\u0007'),
      Buffer.from('["bench-debezium-outbox",{"server":"app"}]'),
      Buffer.from([0x75, 0x71, 0x00, 0x7e]),
      Buffer.from(
        '{"lsn_proc":26797496,"messageType":"INSERT","lsn_commit":26797400,"lsn":26797496,"txId":811}',
      ),
    ]);
    expect(parseDebeziumOffsets(file)).toEqual({ lsnProc: 26797496n, lsnCommit: 26797400n, server: 'app' });
    expect(() => parseDebeziumOffsets(file, 'other')).toThrow(/for server other/);
    expect(() => parseDebeziumOffsets(Buffer.from('{}'))).toThrow(/no Debezium PostgreSQL offsets/);
  });
});
