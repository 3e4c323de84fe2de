import pino from 'pino';

export type Logger = pino.Logger;

export interface LoggerOptions {
  level: string;
  format: 'auto' | 'json' | 'pretty';
  /** Defaults to stderr, so stdout stays clean for the stdout sink. */
  destination?: number;
}

/**
 * Structured JSON logs on stderr (pretty when stderr is a terminal; without colours under NO_COLOR).
 * Secrets never reach a log line: config values are logged only through redacted summaries,
 * and these paths are redacted as a second line of defence.
 */
export async function createLogger(opts: LoggerOptions): Promise<Logger> {
  const fd = opts.destination ?? 2;
  const pretty = opts.format === 'pretty' || (opts.format === 'auto' && process.stderr.isTTY);
  const base: pino.LoggerOptions = {
    level: opts.level,
    base: { service: 'outbox-relay' },
    redact: {
      paths: [
        'password',
        '*.password',
        'databaseUrl',
        '*.databaseUrl',
        'kafkaSaslPassword',
        'kafkaOauthClientSecret',
        'schemaRegistryPassword',
      ],
      censor: '***',
    },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (pretty) {
    try {
      const { default: pinoPretty } = await import('pino-pretty');
      return pino(
        base,
        pinoPretty({ destination: fd, colorize: useColor(), translateTime: 'SYS:HH:MM:ss.l' }),
      );
    } catch {
      // pino-pretty is a dependency; should it be missing (a pruned install), fall back to JSON.
    }
  }
  return pino(base, pino.destination({ fd, sync: false }));
}

/** Colours unless NO_COLOR is set to anything but the empty string (https://no-color.org). */
export function useColor(env: NodeJS.ProcessEnv = process.env): boolean {
  return !env.NO_COLOR;
}

/** A logger that drops everything (tests, library use). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
