// InitProducerId v1: hands out producer ids for idempotent producers (epoch 0). A transactional id
// keeps its producer id and gets its epoch bumped, though transactions themselves are not supported.
import { type Reader, Writer } from '../codec.ts';
import type { ApiSpec, RequestContext } from './types.ts';

function handle(ctx: RequestContext, r: Reader): Writer {
  const transactionalId = r.nullableString();
  r.int32(); // transaction_timeout_ms
  const { producerId, epoch } = ctx.state.initProducerId(transactionalId);
  return new Writer().int32(0).int16(0).int64(producerId).int16(epoch);
}

export const initProducerId: ApiSpec = {
  key: 22,
  name: 'InitProducerId',
  minVersion: 1,
  maxVersion: 1,
  handle,
};
