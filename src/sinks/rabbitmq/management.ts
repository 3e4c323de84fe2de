/**
 * The queue-type check of the RabbitMQ preflight (issue 23): a queue bound to the relay's exchange
 * should be a quorum queue. A classic queue lives on one node: when that node's disk is lost, so
 * are messages the broker confirmed — after the relay confirmed the slot past them. (Mirrored
 * classic queues are deprecated, and still drop confirmed messages on some failovers.)
 *
 * AMQP 0-9-1 cannot list an exchange's bindings or tell a queue's type, and `rabbitmqctl` runs on
 * the broker's host only: the management plugin's HTTP API is what a remote relay can ask. So the
 * check runs when --rabbitmq-management-url is set and is skipped otherwise (docs/sinks.md). It
 * only warns: the relay's promise (confirmed = stored by the broker) holds with either type, the
 * difference is what the broker keeps when a node dies. An unreachable API is a warning too.
 *
 * Split as elsewhere: classicQueues is the pure verdict over what the API answered, boundQueues
 * the I/O, warnClassicQueues what the sink's start logs.
 */
import type { Logger } from '../../observability/logger.ts';

/** What GET /api/exchanges/{vhost}/{name}/bindings/source answers, per binding (the fields used). */
export interface Binding {
  destination: string;
  destination_type: string;
  routing_key: string;
}

/** What GET /api/queues/{vhost}/{name} answers (the fields used). */
export interface QueueInfo {
  name: string;
  /** 'classic', 'quorum' or 'stream'; absent on old brokers (classic). */
  type?: string;
  durable?: boolean;
}

/** The queues bound to the exchange (directly) that are classic, each with its binding keys. */
export function classicQueues(
  bindings: readonly Binding[],
  queues: readonly QueueInfo[],
): { queue: string; routingKeys: string[]; durable: boolean }[] {
  const byName = new Map(queues.map((q) => [q.name, q]));
  const keys = new Map<string, string[]>();
  for (const b of bindings) {
    if (b.destination_type !== 'queue') continue;
    const list = keys.get(b.destination) ?? [];
    list.push(b.routing_key);
    keys.set(b.destination, list);
  }
  const out: { queue: string; routingKeys: string[]; durable: boolean }[] = [];
  for (const [queue, routingKeys] of keys) {
    const q = byName.get(queue);
    if (!q || (q.type ?? 'classic') === 'classic')
      out.push({ queue, routingKeys, durable: q?.durable ?? true });
  }
  return out;
}

/**
 * The API's base URL without credentials, and the Authorization header: the management URL's own
 * user and password, else the AMQP URL's (the same user usually has the management tag).
 * fetch refuses URLs with credentials in them.
 */
export function managementRequest(
  managementUrl: string,
  amqpUrl: string,
): { base: string; vhost: string; authorization: string } {
  const m = new URL(managementUrl);
  const a = new URL(amqpUrl);
  const user = decodeURIComponent(m.username || a.username || 'guest');
  const pass = decodeURIComponent(m.username ? m.password : a.password || (a.username ? '' : 'guest'));
  m.username = '';
  m.password = '';
  // amqp://host/ is the vhost "/" (as amqplib takes it); a path names a vhost, %2F is "/".
  const path = a.pathname.replace(/^\//, '');
  const vhost = path === '' ? '/' : decodeURIComponent(path);
  return {
    base: m.toString().replace(/\/+$/, ''),
    vhost,
    authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`,
  };
}

/** Asks the management API which queues are bound to `exchange`, and their types. */
export async function boundQueues(
  managementUrl: string,
  amqpUrl: string,
  exchange: string,
  timeoutMs: number,
): Promise<{ bindings: Binding[]; queues: QueueInfo[]; vhost: string }> {
  const r = managementRequest(managementUrl, amqpUrl);
  const get = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${r.base}${path}`, {
      headers: { authorization: r.authorization },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${res.statusText}`);
    return (await res.json()) as T;
  };
  const v = encodeURIComponent(r.vhost);
  const bindings = await get<Binding[]>(
    `/api/exchanges/${v}/${encodeURIComponent(exchange)}/bindings/source`,
  );
  const names = [
    ...new Set(bindings.filter((b) => b.destination_type === 'queue').map((b) => b.destination)),
  ];
  const queues = await Promise.all(
    names.map((q) => get<QueueInfo>(`/api/queues/${v}/${encodeURIComponent(q)}`)),
  );
  return { bindings, queues, vhost: r.vhost };
}

/** The preflight's part (RabbitMqSink.start): warnings only; an API that does not answer is one too. */
export async function warnClassicQueues(
  log: Logger,
  managementUrl: string,
  amqpUrl: string,
  exchange: string,
  timeoutMs: number,
): Promise<void> {
  if (exchange === '') return;
  try {
    const { bindings, queues, vhost } = await boundQueues(managementUrl, amqpUrl, exchange, timeoutMs);
    const classic = classicQueues(bindings, queues);
    for (const q of classic)
      log.warn(
        { exchange, queue: q.queue, routingKeys: q.routingKeys, vhost },
        `queue ${JSON.stringify(q.queue)} bound to exchange ${JSON.stringify(exchange)} is a classic queue: it lives on one node, and messages the broker confirmed (and the relay then confirmed to PostgreSQL) are lost with that node's disk; declare it with x-queue-type=quorum (docs/sinks.md#rabbitmq)`,
      );
    if (bindings.length === 0)
      log.warn(
        { exchange, vhost },
        `no queue is bound to exchange ${JSON.stringify(exchange)}: every event will fail UNROUTABLE until one is`,
      );
    else if (classic.length === 0)
      log.info(
        { exchange, queues: queues.map((q) => q.name) },
        'RabbitMQ: every queue bound to the exchange is a quorum or stream queue',
      );
  } catch (e) {
    log.warn(
      { exchange, err: (e as Error).message },
      'RabbitMQ management API did not answer: the queue-type check (classic vs quorum) is skipped',
    );
  }
}
