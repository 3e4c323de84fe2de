import pg from 'pg';

/**
 * A pool whose connections never crash the process when the server goes away.
 *
 * pg-pool listens for 'error' only on idle clients; a client checked out with `pool.connect()`
 * has no listener between two queries, so a connection reset there (PostgreSQL restarting,
 * pg_terminate_backend) is an unhandled 'error' event and the process dies. Every client gets a
 * permanent listener instead: the error surfaces as the rejection of the next query, which the
 * callers already retry with back-off.
 *
 * And a statement never outlives its relay: with client_connection_check_interval (PostgreSQL
 * 14+) the server notices within a second that the client is gone and cancels what it was
 * running. Without it, a relay killed while its outcome UPDATE waited on a row lock left the
 * statement to run when the lock went — possibly after a restarted relay had published the row,
 * marking it 'failed' behind its back (found by test/integration/crash-points.test.ts). It is set
 * as part of connecting (CheckedClient), before the pool hands the client out.
 */
export function createPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool({ ...config, Client: CheckedClient as unknown as typeof pg.Client });
  pool.on('error', () => {}); // an idle client's error: the next checkout gets a new connection
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  return pool;
}

const CHECK_CONNECTION = `SELECT set_config('client_connection_check_interval', '1000', false)
  WHERE current_setting('server_version_num')::int >= 140000`;

/** A client that sets client_connection_check_interval once connected (a server without it, 13, skips it). */
class CheckedClient extends pg.Client {
  // biome-ignore lint/suspicious/noExplicitAny: pg's overloads (promise, or callback as pg-pool calls it).
  override connect(callback?: (...args: any[]) => void): any {
    const connected = super.connect().then(() =>
      super.query(CHECK_CONNECTION).then(
        () => {},
        () => {},
      ),
    );
    if (!callback) return connected.then(() => this);
    connected.then(
      () => callback(null),
      (e: Error) => callback(e),
    );
    return undefined;
  }
}
