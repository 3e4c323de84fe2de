import { UsageError } from '../config/usage-error.ts';

/**
 * Bad operator input (unknown status, malformed time, an id that does not exist): the
 * command prints the message, changes nothing and exits 64 (usage), like any usage error.
 */
export class OpsInputError extends UsageError {
  constructor(message: string, help?: string) {
    super(message, help);
    this.name = 'OpsInputError';
  }
}

/**
 * Bad input of one kind: what it names (an event id, a slot) does not exist. Still a usage error
 * (exit 64); the console answers it 404 where other bad input is 400.
 */
export class OpsNotFoundError extends OpsInputError {
  constructor(message: string, help?: string) {
    super(message, help);
    this.name = 'OpsNotFoundError';
  }
}

/**
 * A race, not bad input: the statement would have changed fewer rows than the command selected
 * (one changed status meanwhile — the sweeper published it, another operator resolved it). It is
 * rolled back, nothing changed, and the same command may well succeed when run again: exit 75
 * (EX_TEMPFAIL, "try again"), where 64 would tell a script its command line is wrong.
 */
export class OpsConflictError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OpsConflictError';
  }
}

/** Row ids are bigints: digits only, kept as text (JavaScript numbers lose precision past 2^53). */
export function parseIds(texts: readonly string[]): string[] {
  const ids: string[] = [];
  for (const t of texts) {
    for (const part of t.split(',')) {
      const s = part.trim();
      if (s === '') continue;
      if (!/^\d{1,19}$/.test(s) || BigInt(s) > 9223372036854775807n) {
        throw new OpsInputError(`${JSON.stringify(s)} is not an event id (the outbox row's numeric id)`);
      }
      ids.push(BigInt(s).toString());
    }
  }
  return [...new Set(ids)];
}
