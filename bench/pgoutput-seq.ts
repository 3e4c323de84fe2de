/**
 * The least a logical-decoding reader can do per message and still time each event (the PG floor,
 * bench/pg-floor-reader.ts): from a RELATION message, where the payload column is; from an
 * INSERT, the sequence number at the start of its payload (bench/backlog.ts payload()), in text
 * (bytea hex, '\x3132…') or binary (the bytes) format. No other column is read, nothing allocated.
 */
const RELATION = 0x52; // 'R': relid (4), namespace\0, name\0, replica identity (1), ncols (2), columns
const INSERT = 0x49; // 'I': relid (4), 'N', ncols (2), then per column a kind byte (+ int32 length + bytes)
const TEXT = 0x74; // 't'
const BINARY = 0x62; // 'b'
const NULL = 0x6e; // 'n'

/** The relation's OID and the index of its `column` (-1 if absent); null for any other message. */
export function relationColumn(
  data: Buffer,
  start: number,
  end: number,
  column: string,
): { relid: number; index: number } | null {
  if (data[start] !== RELATION) return null;
  const relid = data.readUInt32BE(start + 1);
  let off = data.indexOf(0, start + 5) + 1; // after the namespace
  off = data.indexOf(0, off) + 1; // after the name
  off += 1; // replica identity
  const ncols = data.readUInt16BE(off);
  off += 2;
  for (let i = 0; i < ncols && off < end; i++) {
    const nameEnd = data.indexOf(0, off + 1);
    if (data.toString('utf8', off + 1, nameEnd) === column) return { relid, index: i };
    off = nameEnd + 1 + 8; // type OID, typmod
  }
  return { relid, index: -1 };
}

/** The relation OID of an INSERT (-1 for any other message). */
export function insertRelid(data: Buffer, start: number): number {
  return data[start] === INSERT ? data.readUInt32BE(start + 1) : -1;
}

/** The decimal number leading column `index`'s value of an INSERT; -1 if there is none. */
export function insertSeq(data: Buffer, start: number, end: number, index: number): number {
  let off = start + 8; // tag, relid, 'N', ncols
  for (let i = 0; off < end; i++) {
    const kind = data[off++];
    if (kind === NULL) {
      if (i === index) return -1;
      continue;
    }
    if (kind !== TEXT && kind !== BINARY) return -1; // 'u' (unchanged TOAST): not in an INSERT
    const len = data.readInt32BE(off);
    off += 4;
    if (i === index) return leadingNumber(data, off, off + len, kind === TEXT);
    off += len;
  }
  return -1;
}

/** Digits at the start of a bytea: its bytes, or in text format the hex after '\x'. */
function leadingNumber(data: Buffer, from: number, to: number, hex: boolean): number {
  let n = 0;
  let digits = 0;
  if (hex) {
    for (let i = from + 2; i + 1 < to; i += 2) {
      const d = (data[i]! - 48) * 16 + (data[i + 1]! - 48); // '3' '0'…'3' '9': ASCII digits
      if (data[i] !== 0x33 || d < 48 || d > 57) break;
      n = n * 10 + d - 48;
      digits++;
    }
  } else
    for (let i = from; i < to && data[i]! >= 48 && data[i]! <= 57; i++, digits++) n = n * 10 + data[i]! - 48;
  return digits ? n : -1;
}
