import type { Logger } from '../observability/logger.ts';
import type { StreamHandlers } from '../replication/connection.ts';

/** How the server will stream (ReplicationConnection's onStart). */
export type StreamStart = Parameters<NonNullable<StreamHandlers['onStart']>>[0];

/** What this server was asked for: said at every start, so a log shows it per version. */
export function logStreamStart(log: Logger, s: StreamStart): void {
  const o = Object.fromEntries(s.options);
  log.info(
    {
      server_version: s.serverVersion,
      proto_version: Number(o.proto_version),
      binary: s.binary,
      messages: !!o.messages,
    },
    `replication on PostgreSQL ${s.serverVersion ?? '(version unknown)'}: pgoutput proto_version ${o.proto_version}, ${s.binary ? 'binary' : 'text'} values${o.messages ? ', logical messages (heartbeats)' : ''}${s.unconverted ? ', SQL_ASCII unconverted' : ''}`,
  );
}
