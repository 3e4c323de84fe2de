import { describe, expect, it } from 'vitest';
import { clusterIdFor } from './local-kafka.ts';

describe('clusterIdFor', () => {
  it('is 22 URL-safe base64 characters and never starts with "-" (kafka-storage would read an option)', () => {
    // 0xf8 → base64url '-' as the first character.
    const id = clusterIdFor(Buffer.alloc(16, 0xf8));
    expect(id).toHaveLength(22);
    expect(id.startsWith('-')).toBe(false);
    expect(id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(clusterIdFor(Buffer.alloc(16, 0))).toBe('AAAAAAAAAAAAAAAAAAAAAA');
  });
});
