import { defineConfig } from 'vitest/config';

// The suite's pure helpers (not part of `npm test`): npx vitest run --config chaos/vitest.config.ts
export default defineConfig({
  test: { include: ['chaos/**/*.test.ts'], root: '.' },
});
