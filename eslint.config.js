// Type-aware lint over the server, tests, bench and codegen; layout is Prettier's job, not ESLint's.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'
import { layersConfig } from './eslint/layers.js'

const nodeGlobals = Object.fromEntries(
  [
    'process',
    'Buffer',
    'URL',
    'URLSearchParams',
    'setTimeout',
    'clearTimeout',
    'setInterval',
    'clearInterval',
    'console',
    'fetch',
    'AbortController',
    'AbortSignal',
    'TextEncoder',
    'TextDecoder',
    'performance',
    'structuredClone',
    'queueMicrotask',
    'setImmediate',
    'Response',
    'Request',
    'Headers',
    'FormData',
    'Blob',
    'crypto',
  ].map((n) => [n, 'readonly']),
)

export default tseslint.config(
  { ignores: ['src/generated/**', 'dist/**', 'node_modules/**', 'bench/peer/**', 'test/network/**', '.tools/**', 'native/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: nodeGlobals,
      parserOptions: { project: './tsconfig.check.json', tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // Callbacks handed to express, ws and timers may be async: their rejections are caught inside.
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      // Decoded CBOR/JSON and test responses are untyped on purpose; narrowing each access adds noise, not safety.
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      // Handlers and interface methods are async to satisfy a Promise-returning contract.
      '@typescript-eslint/require-await': 'off',
      // Empty catch blocks mark best-effort cleanup.
      'no-empty': ['error', { allowEmptyCatch: true }],
      // CIDs, URLs and search params are stringified on purpose; no-base-to-string still catches '[object Object]'.
      '@typescript-eslint/restrict-template-expressions': 'off',
      '@typescript-eslint/restrict-plus-operands': 'off',
      // A write failure is stored as caught (unknown) and rethrown unchanged to every later caller.
      '@typescript-eslint/only-throw-error': ['error', { allowThrowingUnknown: true, allowThrowingAny: true }],
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true, allowThrowingAny: true }],
    },
  },
  // src/ imports down its layers only, and in no cycle (eslint/layers.js)
  layersConfig(),
  {
    // raw SQL text is for bulk inserts and cursors, inside db/; every other query is Kysely's
    files: ['src/**/*.ts'],
    ignores: ['src/db/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '(^#src/|/)db/raw(\\.js)?$', message: 'Write the query with Kysely (prepared() when it is hot); raw SQL stays in db/.' }] },
      ],
    },
  },
  {
    // Plain-JS bench scripts and configs are outside the TypeScript program.
    files: ['**/*.js'],
    extends: [tseslint.configs.disableTypeChecked],
  },
)
