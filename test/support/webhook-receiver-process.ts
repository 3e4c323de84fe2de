/**
 * The webhook receiver (webhook-receiver.ts) as a process of its own, for the chaos scenarios:
 * kill -9, SIGSTOP and a restart on the same port need a process. Every accepted event is appended
 * to the journal before its 2xx is sent.
 *
 *   node test/support/webhook-receiver-process.ts <port> <secrets file> <journal file>
 *
 * Prints "listening <port>" once it takes connections.
 */
import { readFileSync } from 'node:fs';
import { WebhookReceiver } from './webhook-receiver.ts';

const [port, secretsFile, journal] = process.argv.slice(2);
if (!port || !secretsFile || !journal) {
  console.error('usage: webhook-receiver-process.ts <port> <secrets file> <journal file>');
  process.exit(64);
}
const secrets = readFileSync(secretsFile, 'utf8')
  .split(/[\s,]+/)
  .filter(Boolean);
await WebhookReceiver.start(secrets, { port: Number(port), journal });
console.log(`listening ${port}`);
