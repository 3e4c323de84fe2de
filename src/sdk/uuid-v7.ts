import { getRandomValues } from 'node:crypto';

/**
 * UUID version 7 (RFC 9562 §5.7): 48-bit Unix milliseconds, version 7, 12 bits `rand_a`, variant 10,
 * 62 bits `rand_b`. Why v7 for event ids: they sort by creation time, so the outbox's event_id index
 * and a consumer inbox's primary key stay append-mostly instead of splitting random B-tree pages.
 *
 * Written here rather than taken from the `uuid` package (whose v7, from uuid 10, is RFC 9562 too):
 * the SDK runs inside the applications that insert events, and 60 lines tested against the RFC's
 * layout and ordering (uuid-v7.test.ts) cost them less than one more dependency to vet and update.
 *
 * Monotonic within a process (RFC 9562 §6.2, method 1): `rand_a` is a counter, seeded at random in its
 * lower half each new millisecond and incremented for each id in the same millisecond. When it runs
 * out, or the clock steps back, the timestamp is carried forward by one millisecond instead, so ids
 * from one generator are strictly increasing as strings and as bytes.
 */
export function createUuidV7(
  clock: () => number = Date.now,
  random: (bytes: Uint8Array) => void = (b) => getRandomValues(b),
): () => string {
  let lastMs = -1;
  let counter = 0;
  const bytes = new Uint8Array(16);
  return () => {
    let ms = Math.floor(clock());
    random(bytes);
    if (ms > lastMs) {
      // Seed below 2048 so at least 2048 ids fit in one millisecond before the carry.
      counter = (((bytes[6]! & 0x07) << 8) | bytes[7]!) & 0x7ff;
    } else {
      ms = lastMs;
      if (++counter > 0xfff) {
        ms += 1;
        counter = 0;
      }
    }
    lastMs = ms;
    if (ms < 0 || ms > 0xffff_ffff_ffff) throw new RangeError(`uuidv7: timestamp ${ms} is outside 48 bits`);
    // 48-bit big-endian milliseconds; split because JS bit operators work on 32 bits.
    const hi = Math.floor(ms / 0x1_0000_0000);
    const lo = ms >>> 0;
    bytes[0] = hi >>> 8;
    bytes[1] = hi & 0xff;
    bytes[2] = lo >>> 24;
    bytes[3] = (lo >>> 16) & 0xff;
    bytes[4] = (lo >>> 8) & 0xff;
    bytes[5] = lo & 0xff;
    bytes[6] = 0x70 | (counter >>> 8);
    bytes[7] = counter & 0xff;
    bytes[8] = 0x80 | (bytes[8]! & 0x3f);
    const hex = Buffer.from(bytes).toString('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  };
}

/** A time-ordered UUID v7 from the process-wide generator. */
export const uuidv7: () => string = createUuidV7();

/** The Unix milliseconds of a UUID v7 (e.g. to see when an event id was minted). */
export function uuidV7Time(uuid: string): number {
  if (!UUID_V7.test(uuid)) throw new TypeError(`not a UUID v7: ${JSON.stringify(uuid)}`);
  return Number.parseInt(uuid.slice(0, 8) + uuid.slice(9, 13), 16);
}

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
