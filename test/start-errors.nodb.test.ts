// The mistakes an operator makes at start, on the server process as it runs (`node dist/bin.js`):
// each stops it with exit 1 and one line on stderr saying what is wrong and what to do, never a
// stack trace. PostgreSQL cases use the local server (PDS_TEST_POSTGRES_URL) with names it does not
// have; S3 cases an s3rver on loopback; the unwritable data directory runs the server as `nobody`
// and the full disk uses a small tmpfs (both need root, as `make test` has).
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { explainStartError } from '../src/startup-errors.js'
import { freePort, postgresUrl, tempDir, testEnv } from './harness.js'

const BIN = new URL('../dist/bin.js', import.meta.url).pathname
const root = process.getuid?.() === 0

function start(env: Record<string, string>, opts: { uid?: number } = {}): Promise<{ code: number | null; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
      ...(opts.uid !== undefined ? { uid: opts.uid, gid: opts.uid } : {}),
    })
    let err = ''
    child.stderr.on('data', (c) => (err += c))
    // a server that started after all would run forever: bounded (generously: the machine may be busy)
    const timer = setTimeout(() => child.kill('SIGKILL'), 100_000)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, err })
    })
  })
}

/** exit 1, one line, no stack trace, and the line matches */
async function refuses(env: Record<string, string>, line: RegExp, opts: { uid?: number } = {}) {
  const r = await start(env, opts)
  const lines = r.err.trim().split('\n')
  expect(lines, r.err).toHaveLength(1)
  expect(lines[0]).toMatch(/^pds: cannot start: /)
  expect(lines[0]).toMatch(line)
  expect(r.err).not.toMatch(/\n\s+at /)
  expect(r.code).toBe(1)
  return lines[0]
}

const baseEnv = async (extra: Record<string, string> = {}) => {
  const env = await testEnv(await freePort(), tempDir(), extra)
  // these cases are about SQLite or name their own PostgreSQL
  delete env.PDS_DB_POSTGRES_URL
  delete env.PDS_DB_POSTGRES_SCHEMA
  return { ...env, ...extra }
}

describe('mistakes at start: one line, exit 1', { timeout: 120_000 }, () => {
  it('a port already in use', async () => {
    const taken = createServer()
    const port = await new Promise<number>((r) => taken.listen(0, '127.0.0.1', () => r((taken.address() as { port: number }).port)))
    try {
      const env = await baseEnv({ PDS_PORT: String(port) })
      const line = await refuses(env, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`))
      expect(line).toContain('PDS_PORT')
    } finally {
      taken.close()
    }
  })

  describe.skipIf(!postgresUrl)('PostgreSQL', () => {
    const pg = (change: (u: URL) => void) => {
      const u = new URL(postgresUrl!)
      change(u)
      return u.toString()
    }
    it('unreachable', async () => {
      const env = await baseEnv({ PDS_DB_POSTGRES_URL: pg((u) => (u.port = '1')) })
      await refuses(env, /PostgreSQL at 127\.0\.0\.1:1 is not reachable \(connection refused\): start it or fix PDS_DB_POSTGRES_URL/)
    })
    it('an unknown database', async () => {
      const env = await baseEnv({ PDS_DB_POSTGRES_URL: pg((u) => (u.pathname = '/no_such_db_here')) })
      await refuses(env, /has no database "no_such_db_here": create it \(createdb no_such_db_here\)/)
    })
    it('an unknown role, its password never printed', async () => {
      const env = await baseEnv({
        PDS_DB_POSTGRES_URL: pg((u) => {
          u.username = 'no_such_role_here'
          u.password = 'sekrit-password'
        }),
      })
      const line = await refuses(env, /has no role "no_such_role_here": create it/)
      expect(line).not.toContain('sekrit')
    })
  })

  it('a wrong PostgreSQL password (the mapping; the local server trusts every connection)', () => {
    const config = {
      port: 2583,
      bind: '0.0.0.0',
      dataDir: '/var/lib/pds',
      blobDir: '/var/lib/pds/blobs',
      db: { kind: 'postgres' as const, url: 'postgres://pds:wrong@db.internal:5433/pds', schema: 'public' },
    }
    const err = Object.assign(new Error('password authentication failed for user "pds"'), { code: '28P01' })
    const line = explainStartError('database', err, config)
    expect(line).toBe('PostgreSQL at db.internal:5433 refused the password of role "pds": fix PDS_DB_POSTGRES_URL')
  })

  it('Redis unreachable', async () => {
    const env = await baseEnv({ PDS_REDIS_URL: 'redis://127.0.0.1:1' })
    await refuses(env, /Redis at 127\.0\.0\.1:1 is not reachable \(connection refused\)/)
  })

  describe('S3', () => {
    type S3rverLike = { run(): Promise<{ port: number }>; close(): Promise<void> }
    let srv: S3rverLike
    let endpoint: string
    beforeAll(async () => {
      const { default: S3rver } = (await import('s3rver')) as { default: new (o: object) => S3rverLike }
      srv = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: tempDir('s3rver-') })
      endpoint = `http://127.0.0.1:${(await srv.run()).port}`
      const client = new S3Client({
        region: 'us-east-1',
        endpoint,
        forcePathStyle: true,
        credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      })
      await client.send(new CreateBucketCommand({ Bucket: 'start-blobs' }))
      client.destroy()
    })
    afterAll(() => srv?.close())
    const s3 = (bucket: string, key = 'S3RVER') => ({
      PDS_BLOBSTORE_S3_BUCKET: bucket,
      PDS_BLOBSTORE_S3_ENDPOINT: endpoint,
      PDS_BLOBSTORE_S3_FORCE_PATH_STYLE: 'true',
      PDS_BLOBSTORE_S3_ACCESS_KEY_ID: key,
      PDS_BLOBSTORE_S3_SECRET_ACCESS_KEY: 'S3RVER',
    })
    it('a missing bucket', async () => {
      await refuses(await baseEnv(s3('no-such-bucket')), /S3 bucket "no-such-bucket" at 127\.0\.0\.1:\d+ does not exist: create it/)
    })
    it('refused credentials', async () => {
      await refuses(
        await baseEnv(s3('start-blobs', 'WRONGKEY')),
        /S3 bucket "start-blobs" at .* refused the credentials \(InvalidAccessKeyId\)/,
      )
    })
  })

  it.skipIf(!root)('a data directory the service user cannot write', async () => {
    const parent = tempDir('pds-unwritable-')
    chmodSync(parent, 0o700)
    const env = await baseEnv({ PDS_DATA_DIRECTORY: join(parent, 'data') })
    await refuses(env, /the data directory is not writable by this user \(nobody\): .*data.* \(EACCES\)/, { uid: 65534 })
    expect(existsSync(join(parent, 'data'))).toBe(false)
  })

  describe.skipIf(!root)('a full disk', () => {
    const mnt = tempDir('pds-full-')
    let mounted = false
    beforeAll(() => {
      mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', mnt]).status === 0
      if (mounted) spawnSync('dd', ['if=/dev/zero', `of=${join(mnt, 'fill')}`, 'bs=4k'])
    })
    afterAll(() => {
      if (mounted) spawnSync('umount', [mnt])
      rmSync(mnt, { recursive: true, force: true })
    })
    it('when generating secrets and when creating the database, leaving no half-written secrets', async (ctx) => {
      if (!mounted) return ctx.skip()
      const data = join(mnt, 'data')
      const env = await baseEnv({ PDS_DATA_DIRECTORY: data })
      const noSecrets = { ...env }
      for (const k of ['PDS_JWT_SECRET', 'PDS_OAUTH_SIGNING_KEY', 'PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX']) delete noSecrets[k]
      await refuses(noSecrets, new RegExp(`the disk holding ${data}/secrets\\.json is full`))
      expect(existsSync(join(data, 'secrets.json'))).toBe(false)
      expect(readdirSync(data).filter((f) => f.includes('secrets'))).toEqual([])
      await refuses(env, new RegExp(`the disk holding ${data}.* is full: free some space`))
    })
  })

  it('a data directory path that is a file', async () => {
    const file = join(tempDir(), 'not-a-dir')
    writeFileSync(file, '')
    const env = await baseEnv({ PDS_DATA_DIRECTORY: file })
    await refuses(env, /not-a-dir is not a directory: set PDS_DATA_DIRECTORY/)
  })
})
