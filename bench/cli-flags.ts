/**
 * Flags of the bench's commands (`npm run bench`, `npm run soak`): --help lists them with their
 * defaults; an unknown flag or a bad value is a usage error (exit 64, as the relay's own CLI).
 */
import { parseArgs } from 'node:util';

type Flags<O> = { [K in keyof O]: O[K] extends { type: 'string' } ? string : boolean };

type StringOrBool = { type: 'string'; default: string } | { type: 'boolean'; default: boolean };

export function parseFlags<O extends Record<string, StringOrBool>>(
  command: string,
  summary: string,
  options: O,
): Flags<O> {
  let values: Record<string, unknown>;
  try {
    values = parseArgs({ options: { ...options, help: { type: 'boolean', default: false } } }).values;
  } catch (e) {
    usageError(command, (e as Error).message);
  }
  if (values.help) {
    const flags = Object.entries(options).map(
      ([name, o]) => `  --${name.padEnd(18)} default ${JSON.stringify(o.default)}`,
    );
    process.stdout.write(`${command} [-- flags]: ${summary}\n${flags.join('\n')}\n`);
    process.exit(0);
  }
  return values as Flags<O>;
}

/** Exits 64 with what is wrong and where the flags are listed. */
export function usageError(command: string, message: string): never {
  process.stderr.write(`${command}: ${message}\n(${command} -- --help lists the flags)\n`);
  process.exit(64);
}
