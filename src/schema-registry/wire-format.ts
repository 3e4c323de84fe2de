/**
 * The Confluent wire format of a Schema Registry value (docs/kafka.md, "Schema Registry"), as
 * Confluent's and Apicurio's Protobuf deserializers read it:
 *
 *   byte 0      magic byte 0
 *   bytes 1–4   the schema id, 32-bit big-endian
 *   then        Protobuf only: the message indexes — the path of the message type within the
 *               .proto file (top-level index, then nested indexes) — as a zigzag varint count
 *               followed by each index as a zigzag varint; the common [0] (the file's first
 *               message) is the single byte 0
 *   then        the serialized message
 *
 * Pure; the header of a subject is built once (frameHeader) and copied in front of each value.
 */

export const MAGIC_BYTE = 0;

/** Zigzag varint (Confluent's ByteUtils.writeVarint): 0 → 0, 1 → 2, -1 → 1, 2 → 4. */
function zigzagVarint(n: number, out: number[]): void {
  let v = (n << 1) ^ (n >> 31);
  v >>>= 0;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
}

/** The message-indexes part: [0] → 00; [1] → 02 02; [1, 0] → 04 02 00. */
export function messageIndexes(indexes: readonly number[]): Buffer {
  if (indexes.length === 1 && indexes[0] === 0) return Buffer.from([0]);
  const out: number[] = [];
  zigzagVarint(indexes.length, out);
  for (const i of indexes) zigzagVarint(i, out);
  return Buffer.from(out);
}

/** Magic byte, schema id and (Protobuf) message indexes: what precedes every value of a subject. */
export function frameHeader(schemaId: number, indexes: readonly number[] | null): Buffer {
  if (!Number.isInteger(schemaId) || schemaId < 0 || schemaId > 0xffff_ffff)
    throw new RangeError(`schema id ${schemaId} does not fit the wire format's 4 bytes`);
  const id = Buffer.alloc(5);
  id[0] = MAGIC_BYTE;
  id.writeUInt32BE(schemaId, 1);
  return indexes ? Buffer.concat([id, messageIndexes(indexes)]) : id;
}

/** header + value in one new buffer. */
export function frame(header: Buffer, value: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(header.length + value.length);
  header.copy(out, 0);
  out.set(value, header.length);
  return out;
}

function readZigzagVarint(b: Uint8Array, at: number): [value: number, next: number] {
  let v = 0;
  let shift = 0;
  let i = at;
  for (; i < b.length && shift < 35; shift += 7) {
    const byte = b[i++]!;
    v |= (byte & 0x7f) << shift;
    if (byte < 0x80) return [(v >>> 1) ^ -(v & 1), i];
  }
  throw new RangeError('truncated varint in the message indexes');
}

/**
 * The Protobuf message of a value, without its Confluent framing if it has one. Unambiguous: a
 * serialized Protobuf message never starts with byte 0 (no field has number 0), so a leading 0 is
 * the magic byte. For consumers of envelope-protobuf values written with or without a registry.
 */
export function unframeProtobuf(value: Uint8Array): Uint8Array {
  if (value.length === 0 || value[0] !== MAGIC_BYTE) return value;
  if (value.length < 6) throw new RangeError('a Confluent-framed value shorter than its header');
  let [count, at] = readZigzagVarint(value, 5);
  for (; count > 0; count--) at = readZigzagVarint(value, at)[1];
  return value.subarray(at);
}
