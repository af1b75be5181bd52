import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

// `make test-interop`: test/interop/ against the reference PDS (bench/peer/, started by the tests
// themselves). Our side runs on SQLite, and on PostgreSQL when PDS_TEST_POSTGRES_URL is set.
// Not part of `make test` (vitest.config.ts excludes test/interop/).
export default defineConfig({
  // `#src/…` imports (package.json "imports") are the sources here, as for tsc; plain Node loads dist/
  resolve: { alias: [{ find: /^#src\//, replacement: fileURLToPath(new URL('./src/', import.meta.url)) }] },
  test: {
    testTimeout: 120_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    projects: [
      {
        extends: true,
        test: { name: 'interop-sqlite', include: ['test/interop/**/*.test.ts'], env: { PDS_TEST_DIALECT: 'sqlite' } },
      },
      {
        extends: true,
        test: { name: 'interop-postgres', include: ['test/interop/**/*.test.ts'], env: { PDS_TEST_DIALECT: 'postgres' } },
      },
    ],
  },
})
