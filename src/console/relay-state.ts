import type { Sample } from '../observability/health.ts';

export type ConsoleState =
  | 'active'
  | 'broker outage'
  | 'database outage'
  | 'poison position'
  | 'standby'
  | 'starting'
  | 'stopping'
  | 'stopped';

export interface StateView {
  state: ConsoleState;
  /** ok: all is well; warn: waiting on purpose (standby, starting); bad: events are not flowing. */
  tone: 'ok' | 'warn' | 'bad';
  /** One line an operator understands: what it means and what to do. */
  explanation: string;
  detail: string | null;
}

/**
 * The relay's state in an operator's words, from the same sample /readyz reads:
 *  - streaming                     → active (or broker outage while publishes fail transiently);
 *  - standby                       → another relay holds the slot;
 *  - waiting at a poison position   → poison position (an error that recurs at one WAL position:
 *                                    the sample's poisonPosition, or a reason that says so);
 *  - waiting, broker               → broker outage; waiting otherwise → database outage;
 *  - starting / stopping / stopped as they are.
 */
export function describeState(s: Sample): StateView {
  const detail = s.waitingReason;
  switch (s.state) {
    case 'streaming':
      return s.brokerOutage
        ? {
            state: 'broker outage',
            tone: 'bad',
            explanation:
              'Publishing fails with transient errors; the relay retries the same batch and confirms nothing until the broker is back.',
            detail,
          }
        : {
            state: 'active',
            tone: 'ok',
            explanation: 'This relay holds the slot and streams events to the broker.',
            detail,
          };
    case 'standby':
      return {
        state: 'standby',
        tone: 'warn',
        explanation: 'Another relay is active on the slot; this one takes over when it stops.',
        detail,
      };
    case 'waiting':
      if (s.poisonPosition || (detail && /poison/i.test(detail))) {
        return {
          state: 'poison position',
          tone: 'bad',
          explanation:
            'The stream fails again and again at the same WAL position. See docs/operations.md for the way out.',
          detail,
        };
      }
      if (detail && /broker|kafka|sink/i.test(detail)) {
        return {
          state: 'broker outage',
          tone: 'bad',
          explanation: 'The broker cannot be reached; the relay retries with back-off.',
          detail,
        };
      }
      return {
        state: 'database outage',
        tone: 'bad',
        explanation: 'PostgreSQL cannot be reached or streamed from; the relay retries with back-off.',
        detail,
      };
    case 'starting':
      return { state: 'starting', tone: 'warn', explanation: 'Preflight checks and slot setup.', detail };
    case 'stopping':
      return {
        state: 'stopping',
        tone: 'warn',
        explanation: 'Draining in-flight events before exit.',
        detail,
      };
    case 'stopped':
      return { state: 'stopped', tone: 'bad', explanation: 'The relay loop has ended.', detail };
  }
}
