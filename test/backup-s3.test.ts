// Scheduled backups to S3 (s3rver on loopback): a server on a short interval uploads backups with
// the manifest last and keeps the newest PDS_BACKUP_KEEP complete ones; `pds restore --s3 latest`
// makes a data directory a new server serves from (SQLite; on PostgreSQL the database is
// pg_dump's job, so there the blobs and the manifest travel). Also `pds status` with S3 blobs.
import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import pg from 'pg'
import { pino } from 'pino'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { runCli } from './cli-run.js'
import { bearer, describe, dialect, newAccount, startTestPds, tempDir, xrpc, type TestPds } from './harness.js'

type S3rverLike = { run(): Promise<{ port: number }>; close(): Promise<void> }

let srv: S3rverLike
let client: S3Client
let endpoint: string
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

beforeAll(async () => {
  const { default: S3rver } = (await import('s3rver')) as { default: new (o: object) => S3rverLike }
  srv = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: tempDir('s3rver-') })
  endpoint = `http://127.0.0.1:${(await srv.run()).port}`
  client = new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  })
})
afterAll(async () => {
  client?.destroy()
  await srv?.close()
})

async function bucket(name: string) {
  await client.send(new CreateBucketCommand({ Bucket: name }))
  return name
}

const KEY_A = randomBytes(32).toString('hex')
const KEY_B = randomBytes(32).toString('base64')

const s3Env = (kind: 'BACKUP' | 'BLOBSTORE', bucketName: string) => ({
  [`PDS_${kind}_S3_BUCKET`]: bucketName,
  [`PDS_${kind}_S3_ENDPOINT`]: endpoint,
  [`PDS_${kind}_S3_FORCE_PATH_STYLE`]: 'true',
  [`PDS_${kind}_S3_ACCESS_KEY_ID`]: 'S3RVER',
  [`PDS_${kind}_S3_SECRET_ACCESS_KEY`]: 'S3RVER',
  ...(kind === 'BACKUP' ? { PDS_BACKUP_ENCRYPTION_KEY: KEY_A } : {}),
})

const object = async (b: string, key: string) =>
  Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: b, Key: key }))).Body!.transformToByteArray())

async function keys(bucketName: string, prefix = '') {
  const out: string[] = []
  let token: string | undefined
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: bucketName, Prefix: prefix, ContinuationToken: token }))
    out.push(...(page.Contents ?? []).map((o) => o.Key!))
    token = page.IsTruncated ? page.NextContinuationToken : undefined
  } while (token)
  return out
}

const completeBackups = async (b: string) =>
  (await keys(b, 'backups/'))
    .filter((k) => k.endsWith('/manifest.json'))
    .map((k) => k.split('/')[1])
    .sort()

async function uploadBlob(url: string, jwt: string, bytes: Uint8Array) {
  const res = await fetch(`${url}/xrpc/com.atproto.repo.uploadBlob`, {
    method: 'POST',
    headers: { ...bearer(jwt), 'content-type': 'application/octet-stream' },
    body: bytes,
  })
  expect(res.status).toBe(200)
  return ((await res.json()) as any).blob
}

describe('backups to S3', () => {
  it('uploads on a schedule, keeps the newest complete ones, and restores the latest', async () => {
    const b = await bucket(`bk-${dialect}-${Date.now().toString(36)}`)
    // an upload that never finished, newer than anything: it holds no backup, so it neither counts
    // towards the kept ones nor is it what `latest` means
    const unfinished = '2999-01-01T00-00-00-000Z'
    await client.send(new PutObjectCommand({ Bucket: b, Key: `backups/${unfinished}/blobs/partial`, Body: 'partial' }))
    const logLines: string[] = []
    const logger = pino({ level: 'info' }, new Writable({ write: (c, _e, cb) => (logLines.push(String(c)), cb()) }))
    const env = { ...s3Env('BACKUP', b), PDS_BACKUP_KEEP: '2' }
    const pds = await startTestPds(env, { logger, backups: { intervalMs: 1500, checkMs: 200 } })
    let restored: TestPds | undefined
    const target = join(tempDir('pds-s3-restore-'), 'data')
    try {
      const u = await newAccount(pds.url, 'bks3')
      const bytes = new Uint8Array(3000).map((_, i) => (i * 7) % 256)
      const blob = await uploadBlob(pds.url, u.accessJwt, bytes)
      const pic = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
        headers: bearer(u.accessJwt),
        body: { repo: u.did, collection: 'com.example.pic', record: { $type: 'com.example.pic', img: blob } },
      })
      expect(pic.status).toBe(200)

      // a record written between runs until three scheduled backups have completed
      const written: { rkey: string; cid: string; at: number }[] = []
      const seen = new Set<string>()
      for (let i = 0; seen.size < 3 && i < 200; i++) {
        const r = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
          headers: bearer(u.accessJwt),
          body: { repo: u.did, collection: 'com.example.note', rkey: `n${i}`, record: { i } },
        })
        expect(r.status).toBe(200)
        written.push({ rkey: `n${i}`, cid: r.body.cid, at: Date.now() })
        for (const name of await completeBackups(b)) seen.add(name)
        await sleep(250)
      }
      expect(seen.size, 'three scheduled backups').toBeGreaterThanOrEqual(3)
      const signingKey = (
        await pds.services.db.selectFrom('signing_key').select('private_key_hex').where('did', '=', u.did).executeTakeFirstOrThrow()
      ).private_key_hex
      await pds.close()

      // only the newest two complete backups are left; the unfinished upload is untouched
      const left = await completeBackups(b)
      expect(left).toEqual([...seen].sort().slice(-2))
      const all = await keys(b, 'backups/')
      expect(new Set(all.map((k) => k.split('/')[1]))).toEqual(new Set([...left, unfinished]))
      expect(readdirSync(join(pds.dataDir, 'backup-tmp')), 'the temporary directories are gone').toEqual([])
      const uploaded = logLines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'backup uploaded')
      expect(uploaded.length).toBeGreaterThanOrEqual(3)
      for (const l of uploaded)
        expect(l).toMatchObject({ key: expect.stringMatching(/^backups\/.+\/$/), bytes: expect.any(Number), ms: expect.any(Number) })
      expect(logLines.join('')).not.toContain('S3RVER')

      const latest = left[1]
      // what the bucket holds is sealed: no SQLite file, no signing key, no readable manifest
      for (const key of await keys(b, `backups/${latest}/`)) {
        const bytes = await object(b, key)
        expect(bytes.subarray(0, 8).toString(), key).toBe('PDSBKUP1')
        expect(bytes.includes('SQLite format 3'), key).toBe(false)
        expect(bytes.includes(signingKey), key).toBe(false)
        expect(bytes.includes(Buffer.from(signingKey, 'hex')), key).toBe(false)
        expect(bytes.includes('"files"'), key).toBe(false)
      }
      const m = join(tempDir('pds-s3-manifest-'), 'b')
      const fetched = await runCli({ ...pds.env, PDS_DATA_DIRECTORY: join(m, 'unused') }, 'restore', '--s3', latest, join(m, 'dl'))
      expect(fetched.code, fetched.err).toBe(0)
      const manifest = JSON.parse(readFileSync(join(m, 'dl', 'manifest.json'), 'utf8'))
      const paths = manifest.files.map((f: { path: string }) => f.path).sort()
      expect(paths).toContain(`blobs/${blob.ref.$link}`)
      if (dialect === 'sqlite') expect(paths).toContain('pds.sqlite')
      expect((await keys(b, `backups/${latest}/`)).sort()).toEqual([...paths, 'manifest.json'].map((p) => `backups/${latest}/${p}`).sort())

      const r = await runCli({ ...pds.env, PDS_DATA_DIRECTORY: target }, 'restore', '--s3', 'latest', '--json')
      expect(r.code, r.err).toBe(0)
      expect(JSON.parse(r.out)).toMatchObject({ backup: latest, seq: manifest.seq })
      expect(existsSync(join(target, 'blobs', blob.ref.$link))).toBe(true)
      if (dialect === 'sqlite') {
        restored = await startTestPds({}, { dataDir: target })
        const before = written.filter((w) => w.at < Date.parse(manifest.startedAt))
        expect(before.length).toBeGreaterThanOrEqual(2)
        for (const w of before) {
          const got = await xrpc(restored.url, 'com.atproto.repo.getRecord', {
            params: { repo: u.did, collection: 'com.example.note', rkey: w.rkey },
          })
          expect([got.status, got.body.cid], w.rkey).toEqual([200, w.cid])
        }
        const blobRes = await fetch(`${restored.url}/xrpc/com.atproto.sync.getBlob?did=${u.did}&cid=${blob.ref.$link}`)
        expect(blobRes.status).toBe(200)
        expect(new Uint8Array(await blobRes.arrayBuffer())).toEqual(bytes)
      }
      // a backup name that is not there is one clear line
      const missing = await runCli({ ...pds.env, PDS_DATA_DIRECTORY: join(target, 'x') }, 'restore', '--s3', unfinished)
      expect([missing.code, missing.err.trim()]).toEqual([1, `pds: no complete backup ${unfinished} under s3://${b}/backups/`])
    } finally {
      await restored?.stop()
      await pds.stop()
      rmSync(join(target, '..'), { recursive: true, force: true })
    }
  }, 120_000)

  it('pds backup --s3 uploads one backup now', async () => {
    const b = await bucket(`now-${dialect}-${Date.now().toString(36)}`)
    const pds = await startTestPds(s3Env('BACKUP', b), { backups: { intervalMs: 3_600_000, checkMs: 3_600_000 } })
    try {
      await newAccount(pds.url, 'bknow')
      const r = await runCli(pds.env, 'backup', '--s3', '--json')
      expect(r.code, r.err).toBe(0)
      const out = JSON.parse(r.out)
      expect(out.key).toMatch(/^backups\/.+\/$/)
      expect(await completeBackups(b)).toEqual([out.key.split('/')[1]])
      expect(r.out + r.err).not.toContain('S3RVER')
    } finally {
      await pds.stop()
    }
  }, 60_000)

  it('restores with the key that sealed it, or with it as the previous key after a rotation; another key or an altered object is refused', async () => {
    const b = await bucket(`key-${dialect}-${Date.now().toString(36)}`)
    const pds = await startTestPds(s3Env('BACKUP', b), { backups: { intervalMs: 3_600_000, checkMs: 3_600_000 } })
    const root = tempDir('pds-s3-keys-')
    try {
      const u = await newAccount(pds.url, 'bkkey')
      await uploadBlob(pds.url, u.accessJwt, new Uint8Array(700).fill(9))
      const made = await runCli(pds.env, 'backup', '--s3', '--json')
      expect(made.code, made.err).toBe(0)
      const name = JSON.parse(made.out).key.split('/')[1]
      const restore = (n: number, extra: Record<string, string>, ...args: string[]) =>
        runCli({ ...pds.env, PDS_DATA_DIRECTORY: join(root, `data${n}`), ...extra }, 'restore', '--s3', name, ...args)

      // another key: nothing restored, and the line says why
      const wrong = await restore(1, { PDS_BACKUP_ENCRYPTION_KEY: KEY_B })
      expect(wrong.code).toBe(1)
      expect(wrong.err.trim()).toMatch(/^pds: backups\/.+ was encrypted with another key than PDS_BACKUP_ENCRYPTION_KEY$/)
      expect(existsSync(join(root, 'data1'))).toBe(false)

      // rotated: the new key seals from now on, the old one still opens what it sealed
      const rotated = await restore(2, { PDS_BACKUP_ENCRYPTION_KEY: KEY_B, PDS_BACKUP_ENCRYPTION_KEY_PREVIOUS: KEY_A }, join(root, 'dl2'))
      expect(rotated.code, rotated.err).toBe(0)
      const dl = join(root, 'dl2')
      for (const e of ['.', ...(readdirSync(dl, { recursive: true }) as string[])]) {
        const st = statSync(join(dl, e))
        expect([e, (st.mode & 0o777).toString(8)]).toEqual([e, st.isDirectory() ? '700' : '600'])
      }
      expect(readdirSync(dl, { recursive: true }).some((e) => String(e).endsWith('.sealed'))).toBe(false)
      const manifest = JSON.parse(readFileSync(join(dl, 'manifest.json'), 'utf8'))
      for (const f of manifest.files) expect(existsSync(join(root, 'data2', f.path)), f.path).toBe(true)

      // one byte of one object changed in the bucket
      const victim = `backups/${name}/manifest.json`
      const bytes = await object(b, victim)
      bytes[bytes.length - 20] ^= 1
      await client.send(new PutObjectCommand({ Bucket: b, Key: victim, Body: bytes }))
      const altered = await restore(3, {})
      expect([altered.code, altered.err.trim()]).toEqual([
        1,
        `pds: ${victim} failed authentication: it was altered or damaged after the backup; refusing to restore it`,
      ])
      expect(existsSync(join(root, 'data3'))).toBe(false)
      // a plaintext object put in its place is refused too
      writeFileSync(join(root, 'plain'), '{}')
      await client.send(new PutObjectCommand({ Bucket: b, Key: victim, Body: readFileSync(join(root, 'plain')) }))
      const plain = await restore(4, {})
      expect([plain.code, plain.err.trim()]).toEqual([1, `pds: ${victim} is not an encrypted backup object; refusing to restore it`])
    } finally {
      await pds.stop()
      rmSync(root, { recursive: true, force: true })
    }
  }, 60_000)

  it.skipIf(dialect !== 'postgres')(
    'on PostgreSQL one process at a time backs up',
    async () => {
      const b = await bucket(`lock-${Date.now().toString(36)}`)
      const pds = await startTestPds(s3Env('BACKUP', b), { backups: { intervalMs: 3_600_000, checkMs: 3_600_000 } })
      const other = new pg.Client({ connectionString: pds.env.PDS_DB_POSTGRES_URL })
      await other.connect()
      try {
        await other.query(`set search_path to "${pds.env.PDS_DB_POSTGRES_SCHEMA}"`)
        // another process in the middle of a backup holds the lock
        await other.query(`select pg_advisory_lock(hashtextextended('pds:backup-s3' || ':' || current_schema(), 0))`)
        const busy = await runCli(pds.env, 'backup', '--s3')
        expect([busy.code, busy.err.trim()]).toEqual([1, 'pds: another process is backing up to S3 right now; try again later'])
        expect(await completeBackups(b)).toEqual([])
        await other.query(`select pg_advisory_unlock_all()`)
        expect((await runCli(pds.env, 'backup', '--s3')).code).toBe(0)
        expect(await completeBackups(b)).toHaveLength(1)
      } finally {
        await other.end()
        await pds.stop()
      }
    },
    60_000,
  )

  it('a bad backup setting stops the start with one line naming it', async () => {
    const pds = await startTestPds()
    try {
      const cases: [Record<string, string>, string][] = [
        [{ ...s3Env('BACKUP', 'some-bucket'), PDS_BACKUP_KEEP: '0' }, 'config error: PDS_BACKUP_KEEP: '],
        [{ ...s3Env('BACKUP', 'some-bucket'), PDS_BACKUP_INTERVAL_HOURS: 'daily' }, 'config error: PDS_BACKUP_INTERVAL_HOURS: '],
        [{ ...s3Env('BACKUP', 'some-bucket'), PDS_BACKUP_S3_PREFIX: 'nightly' }, 'config error: PDS_BACKUP_S3_PREFIX: '],
        [{ PDS_BACKUP_KEEP: '3' }, 'config error: PDS_BACKUP_KEEP: set PDS_BACKUP_S3_BUCKET too, or unset it'],
        // a backup leaves the machine encrypted or not at all
        [
          { ...s3Env('BACKUP', 'some-bucket'), PDS_BACKUP_ENCRYPTION_KEY: '' },
          'config error: PDS_BACKUP_ENCRYPTION_KEY: required with PDS_BACKUP_S3_BUCKET, 32 bytes (openssl rand -hex 32)',
        ],
        [
          { ...s3Env('BACKUP', 'some-bucket'), PDS_BACKUP_ENCRYPTION_KEY: 'abcd' },
          'config error: PDS_BACKUP_ENCRYPTION_KEY: must be 32 bytes',
        ],
        [
          { ...s3Env('BACKUP', 'some-bucket'), PDS_BACKUP_ENCRYPTION_KEY_PREVIOUS: KEY_A.slice(2) },
          'config error: PDS_BACKUP_ENCRYPTION_KEY_PREVIOUS: must be 32 bytes',
        ],
      ]
      for (const [extra, line] of cases) {
        const r = await runCli({ ...pds.env, ...extra }, 'status')
        expect(r.code).toBe(1)
        expect(r.err.trim().split('\n')).toHaveLength(1)
        expect(r.err).toContain(line)
      }
    } finally {
      await pds.stop()
    }
  }, 60_000)

  it('pds status counts blob bytes in the S3 blob store', async () => {
    const b = await bucket(`blobs-${dialect}-${Date.now().toString(36)}`)
    const pds = await startTestPds(s3Env('BLOBSTORE', b))
    try {
      const u = await newAccount(pds.url, 'bkst')
      const blob = await uploadBlob(pds.url, u.accessJwt, new Uint8Array(5000).fill(3))
      const rec = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
        headers: bearer(u.accessJwt),
        body: { repo: u.did, collection: 'com.example.pic', record: { $type: 'com.example.pic', img: blob } },
      })
      expect(rec.status).toBe(200)
      const r = await runCli(pds.env, 'status', '--json')
      expect(r.code, r.err).toBe(0)
      expect(JSON.parse(r.out).blobBytes).toBe(5000)
    } finally {
      await pds.stop()
    }
  }, 60_000)
})
