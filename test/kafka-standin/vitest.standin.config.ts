// Runs only the stand-in's own tests, without the repository's Postgres globalSetup:
//   npx vitest run --config test/kafka-standin/vitest.standin.config.ts
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/kafka-standin/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
  },
});
