import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

// The whole suite runs twice: on SQLite, and on PostgreSQL when PDS_TEST_POSTGRES_URL is set
// (otherwise that project's suites report skipped). Tests that do not touch the store
// (*.nodb.test.ts) run once. test/interop/ (against the reference PDS) runs apart: `make test-interop`
// with vitest.interop.config.ts.
export default defineConfig({
  // `#src/…` imports (package.json "imports") are the sources here, as for tsc; plain Node loads dist/
  resolve: { alias: [{ find: /^#src\//, replacement: fileURLToPath(new URL('./src/', import.meta.url)) }] },
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'sqlite',
          include: ['test/**/*.test.ts'],
          exclude: ['test/interop/**', '**/node_modules/**'],
          env: { PDS_TEST_DIALECT: 'sqlite' },
        },
      },
      {
        extends: true,
        test: {
          name: 'postgres',
          include: ['test/**/*.test.ts'],
          exclude: ['test/**/*.nodb.test.ts', 'test/interop/**', '**/node_modules/**'],
          env: { PDS_TEST_DIALECT: 'postgres' },
        },
      },
    ],
  },
})
