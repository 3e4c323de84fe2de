import { readFileSync } from 'node:fs';
import { EnvelopeSchema } from '../gen/outbox/v1/envelope_pb.ts';

/**
 * The schema the relay registers for envelope-protobuf values: the text of
 * proto/outbox/v1/envelope.proto (shipped in the package; the generated code is built from it),
 * the fully-qualified name of its message (RecordNameStrategy's subject), and the message's path in
 * the file (the wire format's message indexes). The file imports only google/protobuf/timestamp.proto,
 * which registries know without a reference.
 */
export interface RegisteredSchema {
  schemaType: 'PROTOBUF';
  schema: string;
  recordName: string;
  messageIndexes: number[];
}

let cached: RegisteredSchema | undefined;

export function envelopeSchema(): RegisteredSchema {
  if (cached) return cached;
  // src/schema-registry/ and dist/schema-registry/ are both two levels below the package root.
  const schema = readFileSync(new URL('../../proto/outbox/v1/envelope.proto', import.meta.url), 'utf8');
  const index = EnvelopeSchema.file.messages.indexOf(EnvelopeSchema);
  if (index < 0) throw new Error(`${EnvelopeSchema.typeName} is not a top-level message of its file`);
  cached = { schemaType: 'PROTOBUF', schema, recordName: EnvelopeSchema.typeName, messageIndexes: [index] };
  return cached;
}
