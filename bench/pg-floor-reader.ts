/**
 * The PostgreSQL floor's reader, a process of its own (as the relay is): streams a slot with the
 * relay's pgoutput options (ReplicationConnection, the relay's own connection code) and does
 * nothing per message but note when each INSERT arrived, by the sequence number in its payload.
 * Confirms what it received at every keepalive that asks and once a second. On SIGTERM it writes
 * the receipt times (a Float64Array, ms since the epoch, NaN = not received) to OUT and exits.
 *
 *   node bench/pg-floor-reader.ts URL SLOT PUBLICATION CAPACITY OUT
 */
import { writeFileSync } from 'node:fs';
import { ReplicationConnection, walStartOf } from '../src/replication/connection.ts';
import type { Lsn } from '../src/replication/lsn.ts';
import { insertRelid, insertSeq, relationColumn } from './pgoutput-seq.ts';

const [url, slot, publication, capacity, out] = process.argv.slice(2);
const received = new Float64Array(Number(capacity)).fill(Number.NaN);
const payloadColumn = new Map<number, number>();
let last: Lsn = 0n;

const conn = await ReplicationConnection.open(url!);
process.on('SIGTERM', () => {
  writeFileSync(out!, new Uint8Array(received.buffer));
  process.exit(0);
});
const confirm = setInterval(() => conn.sendStatus(last, last), 1000);
confirm.unref();
await conn.stream(
  { slot: slot!, publication: publication! },
  {
    onData(data, start, end) {
      const at = performance.timeOrigin + performance.now();
      const relid = insertRelid(data, start);
      if (relid >= 0) {
        const seq = insertSeq(data, start, end, payloadColumn.get(relid) ?? -1);
        if (seq >= 0 && seq < received.length && Number.isNaN(received[seq]!)) received[seq] = at;
      } else {
        const r = relationColumn(data, start, end, 'payload');
        if (r) payloadColumn.set(r.relid, r.index);
      }
      last = walStartOf(data, start);
    },
    onKeepalive(walEnd, replyRequested) {
      if (walEnd > last) last = walEnd;
      if (replyRequested) conn.sendStatus(last, last);
    },
  },
);
