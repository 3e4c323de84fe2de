/**
 * `p`, or a rejection with `timedOut()` after `ms`: the one bound of a call whose client does
 * not bound it as a whole (a server that accepts the connection and never answers). At the
 * timeout `onTimeout` runs (to drop what the call may hang on) and `p` is left to settle
 * unobserved; a value it still produces is handed to `late` (to close what it opened).
 */
export function within<T>(
  p: Promise<T>,
  ms: number,
  timedOut: () => unknown,
  hooks: { onTimeout?: () => void; late?: (v: T) => void } = {},
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      hooks.onTimeout?.();
      reject(timedOut());
    }, ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        if (expired) hooks.late?.(v);
        else resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
