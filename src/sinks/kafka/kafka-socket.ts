import net from 'node:net';
import tls from 'node:tls';
import type { ISocketFactory } from 'kafkajs';

/** kafkajs' keep-alive delay (src/network/socketFactory.js). */
const KEEP_ALIVE_DELAY_MS = 60_000;

/**
 * kafkajs' default socket factory, with TCP_NODELAY on, as Apache Kafka's own clients set it.
 * kafkajs leaves Nagle's algorithm on: a request written while earlier bytes on the connection
 * are not yet acknowledged — the tail of a large Produce request, or a request right behind
 * another — waits in the kernel for that acknowledgement, which the broker may delay (delayed
 * ACK, up to 40 ms on Linux). The relay writes whole requests: nothing is gained by holding back.
 */
export const noDelaySocketFactory: ISocketFactory = ({ host, port, ssl, onConnect }) => {
  const socket = ssl
    ? tls.connect(Object.assign({ host, port }, !net.isIP(host) ? { servername: host } : {}, ssl), onConnect)
    : net.connect({ host, port }, onConnect);
  socket.setKeepAlive(true, KEEP_ALIVE_DELAY_MS);
  socket.setNoDelay(true);
  return socket;
};
