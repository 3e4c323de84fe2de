/**
 * kafkajs 2.2 schedules its idle request-queue check with a negative delay, which Node ≥ 23
 * clamps to 1 ms and reports as TimeoutNegativeWarning on every send. Not harmless — it is a
 * 1 ms loop per connection, which the Kafka sink removes (kafkajs/request-queue.ts) — but a
 * kafkajs client running before a sink installed that (the bench's and tests' own clients) still
 * warns; this hides only that one warning (every other warning still reaches the default
 * handler). Idempotent.
 */
let installed = false;

export function hideKafkajsTimeoutWarnings(): void {
  if (installed) return;
  installed = true;
  const emitWarning = process.emitWarning.bind(process);
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    const name = warning instanceof Error ? warning.name : type;
    if (name === 'TimeoutNegativeWarning') return;
    (emitWarning as (...a: unknown[]) => void)(warning, ...rest);
  }) as typeof process.emitWarning;
}
