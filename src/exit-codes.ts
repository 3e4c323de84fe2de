import { ErrorCode, type RelayError } from './errors.ts';

/** Distinct exit codes (sysexits.h values) so supervisors can tell causes apart. */
export const EXIT = {
  OK: 0,
  /** Bad command line. */
  USAGE: 64,
  /** A dependency is gone for good (slot invalidated) — data may need a replay. */
  UNAVAILABLE: 69,
  /** A bug: an error the relay did not expect. */
  SOFTWARE: 70,
  /** Exactly-once: a newer relay fenced this one's transactional producer (EX_TEMPFAIL). */
  FENCED: 75,
  /** EX_TEMPFAIL for an operator command that lost a race (OpsConflictError): nothing changed, run it again. */
  TEMPFAIL: 75,
  /** Bad configuration or a database that is not set up for the relay (preflight). */
  CONFIG: 78,
  /** Second signal: exit at once without draining. */
  INTERRUPTED: 130,
} as const;

export function exitCodeFor(e: RelayError): number {
  switch (e.code) {
    case ErrorCode.SLOT_INVALIDATED:
    case ErrorCode.DATABASE_UNAVAILABLE:
    case ErrorCode.TIMELINE_CHANGED:
    case ErrorCode.BROKER_UNAVAILABLE:
      return EXIT.UNAVAILABLE;
    case ErrorCode.PRODUCER_FENCED:
      return EXIT.FENCED;
    case ErrorCode.PROTOCOL_VIOLATION:
      return EXIT.SOFTWARE;
    default:
      return EXIT.CONFIG;
  }
}
