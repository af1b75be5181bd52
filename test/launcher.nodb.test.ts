// `pds` as installed (package.json's bin) run by an operator whose PATH starts with the machine's
// own, older Node: it must still run the CLI on the Node the native modules were built for.
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { describe, startTestPds, tempDir, testEnv } from './harness.js'

const ROOT = new URL('..', import.meta.url).pathname
const BIN = join(ROOT, JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).bin.pds)
const SYSTEM_NODE = '/usr/bin/node'

function run(bin: string, args: string[], env: Record<string, string> = {}) {
  // the machine's Node first on the PATH, as in an operator's shell
  const r = spawnSync(bin, args, { env: { PATH: `/usr/bin:/bin:${process.env.PATH}`, ...env }, encoding: 'utf8', timeout: 20_000 })
  return { code: r.status, out: r.stdout ?? '', err: (r.stderr ?? '') + (r.error ? String(r.error) : '') }
}

describe('pds launcher', () => {
  it.skipIf(!existsSync(SYSTEM_NODE))('runs the CLI, native store included, with an older Node first on the PATH', async () => {
    const dataDir = tempDir()
    try {
      // the CLI manages a store the server made; it never creates one
      await (await startTestPds({}, { dataDir })).close()
      const env = await testEnv(2583, dataDir)
      const status = run(BIN, ['status', '--json'], env)
      expect(status.code, status.err).toBe(0)
      const body = JSON.parse(status.out)
      expect(body.database).toBe('sqlite')
      expect(body.repos).toBe(0)
      expect(run(BIN, ['--help']).out).toMatch(/^usage: pds/)
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })

  it('says in one line to build first when the build is missing', () => {
    const root = tempDir('pds-launcher-')
    try {
      mkdirSync(join(root, 'bin'))
      copyFileSync(BIN, join(root, 'bin', 'pds'))
      copyFileSync(join(ROOT, 'Makefile'), join(root, 'Makefile'))
      const r = run(join(root, 'bin', 'pds'), ['status'])
      expect(r.code).toBe(1)
      expect(r.err.trim().split('\n')).toHaveLength(1)
      expect(r.err).toMatch(/^pds: .*run make build first/)
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})
