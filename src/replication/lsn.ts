/**
 * Log sequence numbers are 64-bit byte positions in the WAL, written `HI/LO` in hex.
 * They are compared as bigint: gluing the hex halves as text sorts `1/0` below
 * `0/FFFFFFFF` (the bug design.md §2 names in another outbox library).
 */
export type Lsn = bigint;

export const ZERO_LSN: Lsn = 0n;

const LSN_TEXT = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/;

export function parseLsn(text: string): Lsn {
  const m = LSN_TEXT.exec(text.trim());
  if (!m) throw new TypeError(`not an LSN: ${JSON.stringify(text)} (expected HI/LO in hex, e.g. 0/16B3748)`);
  return (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`);
}

export function formatLsn(lsn: Lsn): string {
  const hi = Number(lsn >> 32n);
  const lo = Number(lsn & 0xffffffffn);
  return `${hi.toString(16).toUpperCase()}/${lo.toString(16).toUpperCase()}`;
}

/** Reads an LSN written as two big-endian uint32 halves (the wire form). */
export function readLsn(buf: Buffer, offset: number): Lsn {
  return buf.readBigUInt64BE(offset);
}

export function maxLsn(a: Lsn, b: Lsn): Lsn {
  return a > b ? a : b;
}
