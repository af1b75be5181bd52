import { defineConfig } from 'vitest/config'

// `make test-interop`: test/interop/ against the reference PDS (bench/peer/, started by the tests
// themselves). Our side runs on SQLite, and on PostgreSQL when PDS_TEST_POSTGRES_URL is set.
// Not part of `make test` (vitest.config.ts excludes test/interop/).
export default defineConfig({
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
