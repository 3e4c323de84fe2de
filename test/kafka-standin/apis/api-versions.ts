// ApiVersions v0-v2. Each other API is advertised with exactly the one version implemented: kafkajs
// uses min(its newest, the broker's max), so these are the newest versions kafkajs 2.2.4 knows.
import { type Reader, Writer } from '../codec.ts';
import { KafkaErrorCode } from '../errors.ts';
import type { ApiSpec, RequestContext } from './types.ts';

export const API_VERSIONS_KEY = 18;
export const API_VERSIONS_MAX = 2;

function writeBody(w: Writer, errorCode: number, specs: readonly ApiSpec[]): Writer {
  w.int16(errorCode);
  w.array(specs, (w, s) => {
    w.int16(s.key).int16(s.minVersion).int16(s.maxVersion);
  });
  return w;
}

export function apiVersions(others: readonly ApiSpec[]): ApiSpec {
  const self: ApiSpec = {
    key: API_VERSIONS_KEY,
    name: 'ApiVersions',
    minVersion: 0,
    maxVersion: API_VERSIONS_MAX,
    handle: (ctx: RequestContext, _r: Reader) => {
      const w = writeBody(new Writer(), 0, all);
      if (ctx.header.apiVersion >= 1) w.int32(0); // throttle_time_ms
      return w;
    },
  };
  const all = [...others, self].sort((a, b) => a.key - b.key);
  return self;
}

/**
 * What a broker answers to an ApiVersions version it does not know: UNSUPPORTED_VERSION in the v0
 * layout, with the supported list, so the client can retry with a version both sides speak.
 */
export function unsupportedApiVersionsBody(specs: readonly ApiSpec[]): Writer {
  return writeBody(new Writer(), KafkaErrorCode.UNSUPPORTED_VERSION, specs);
}
