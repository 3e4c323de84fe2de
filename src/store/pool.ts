import pg from 'pg';

/**
 * A pool whose connections never crash the process when the server goes away.
 *
 * pg-pool listens for 'error' only on idle clients; a client checked out with `pool.connect()`
 * has no listener between two queries, so a connection reset there (PostgreSQL restarting,
 * pg_terminate_backend) is an unhandled 'error' event and the process dies. Every client gets a
 * permanent listener instead: the error surfaces as the rejection of the next query, which the
 * callers already retry with back-off.
 */
export function createPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('error', () => {}); // an idle client's error: the next checkout gets a new connection
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  return pool;
}
