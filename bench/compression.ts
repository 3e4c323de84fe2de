/**
 * The compression section of `npm run bench` (issue 24): the bulk backlog drained into Kafka once
 * per codec per round (--kafka-compression none, gzip, snappy, lz4, zstd, interleaved so each
 * round compares drains seconds apart), each codec into a topic of its own, whose record
 * batches on the broker's disk are what the relay sent (the topic's compression.type is
 * `producer`): their bytes per event are the wire's, less the Produce request's framing.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const compressionTopic = (codec: string) => `outbox.compression.${codec}`;

/** The relay's flags for a codec's drain. */
export function compressionArgs(codec: string): string[] {
  return ['--kafka-compression', codec, '--topic-template', compressionTopic(codec)];
}

/** Bytes of `topic`'s log segments under a broker's directory (every partition, every node). */
export function storedBytes(brokerDir: string, topic: string): number {
  const partition = new RegExp(`^${topic.replace(/\./g, '\\.')}-\\d+$`);
  let total = 0;
  const walk = (dir: string, depth: number): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const path = join(dir, e.name);
      if (partition.test(e.name)) {
        for (const f of readdirSync(path)) if (f.endsWith('.log')) total += statSync(join(path, f)).size;
      } else if (depth < 4) walk(path, depth + 1);
    }
  };
  walk(brokerDir, 0);
  return total;
}
