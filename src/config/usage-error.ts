/**
 * A bad command line — an unknown flag, a bad flag value, a missing or extra argument: the
 * command prints the message and where to read the right usage, changes nothing and exits 64.
 * (A bad config file or environment variable is a RelayError CONFIG_INVALID: exit 78.)
 */
export class UsageError extends Error {
  /** The command whose help explains the right usage (`outbox-relay <help> --help`), e.g. `events list`. */
  help: string | undefined;

  constructor(message: string, help?: string) {
    super(message);
    this.name = 'UsageError';
    this.help = help;
  }
}

export function isUsageError(e: unknown): e is UsageError {
  return e instanceof UsageError;
}
