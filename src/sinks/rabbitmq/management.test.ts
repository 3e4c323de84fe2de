import { describe, expect, it } from 'vitest';
import { classicQueues, managementRequest } from './management.ts';

const bind = (destination: string, routing_key = '#', destination_type = 'queue') => ({
  destination,
  destination_type,
  routing_key,
});

describe('classicQueues', () => {
  it('names the classic queues bound to the exchange, with their binding keys; quorum and stream queues pass', () => {
    const out = classicQueues(
      [bind('orders', 'outbox.event.Order'), bind('orders', 'outbox.event.Invoice'), bind('q2'), bind('s')],
      [
        { name: 'orders', type: 'classic', durable: true },
        { name: 'q2', type: 'quorum', durable: true },
        { name: 's', type: 'stream', durable: true },
      ],
    );
    expect(out).toEqual([
      { queue: 'orders', routingKeys: ['outbox.event.Order', 'outbox.event.Invoice'], durable: true },
    ]);
  });

  it('an exchange-to-exchange binding is not a queue; a queue without a type (old brokers) is classic', () => {
    expect(classicQueues([bind('other-exchange', '#', 'exchange')], [])).toEqual([]);
    expect(classicQueues([bind('old')], [{ name: 'old', durable: false }])).toEqual([
      { queue: 'old', routingKeys: ['#'], durable: false },
    ]);
  });
});

describe('managementRequest', () => {
  it("takes the management URL's credentials, else the AMQP URL's; the vhost from the AMQP URL", () => {
    const own = managementRequest('http://admin:s%40cret@rabbit:15672/', 'amqp://relay:pw@rabbit:5672/%2F');
    expect(own.base).toBe('http://rabbit:15672');
    expect(own.vhost).toBe('/');
    expect(Buffer.from(own.authorization.slice(6), 'base64').toString()).toBe('admin:s@cret');
    const reused = managementRequest('https://rabbit:15671', 'amqps://relay:pw@rabbit/orders');
    expect(reused.vhost).toBe('orders');
    expect(Buffer.from(reused.authorization.slice(6), 'base64').toString()).toBe('relay:pw');
    expect(managementRequest('http://rabbit:15672', 'amqp://rabbit').vhost).toBe('/');
  });
});
