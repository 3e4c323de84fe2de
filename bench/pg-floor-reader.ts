/**
 * The PostgreSQL floor's reader, a process of its own (as the relay is): streams a slot with the
 * relay's pgoutput options (ReplicationConnection, the relay's own connection code) and does
 * nothing per message but note when each INSERT arrived, by the sequence number in its payload.
 * Confirms what it received at every keepalive that asks and once a second. One long-lived process
 * (warm after its first pass, as the relay is): a line "dump FILE" on stdin writes the receipt
 * times so far (a Float64Array, ms since the epoch, NaN = not received) to FILE, forgets them and
 * answers "dumped"; EOF exits.
 *
 *   node bench/pg-floor-reader.ts URL SLOT PUBLICATION CAPACITY
 */
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { ReplicationConnection, walStartOf } from '../src/replication/connection.ts';
import type { Lsn } from '../src/replication/lsn.ts';
import { now } from './clock.ts';
import { insertRelid, insertSeq, relationColumn } from './pgoutput-seq.ts';

const [url, slot, publication, capacity] = process.argv.slice(2);
const received = new Float64Array(Number(capacity)).fill(Number.NaN);
const payloadColumn = new Map<number, number>();
let last: Lsn = 0n;

const conn = await ReplicationConnection.open(url!);
const commands = createInterface({ input: process.stdin });
commands.on('line', (line) => {
  const [cmd, file] = line.trim().split(' ');
  if (cmd !== 'dump' || !file) return;
  writeFileSync(file, new Uint8Array(received.buffer));
  received.fill(Number.NaN);
  process.stdout.write('dumped\n');
});
commands.on('close', () => process.exit(0));
const confirm = setInterval(() => conn.sendStatus(last, last), 1000);
confirm.unref();
await conn.stream(
  { slot: slot!, publication: publication! },
  {
    onData(data, start, end) {
      const at = now();
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
