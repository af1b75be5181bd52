// Scheduled backups to S3 (s3rver on loopback): a server on a short interval uploads backups with
// the manifest last and keeps the newest PDS_BACKUP_KEEP complete ones; `pds restore --s3 latest`
// makes a data directory a new server serves from (SQLite; on PostgreSQL the database is
// pg_dump's job, so there the blobs and the manifest travel). Also `pds status` with S3 blobs.
import { existsSync, readdirSync, rmSync } from 'node:fs'
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

const s3Env = (kind: 'BACKUP' | 'BLOBSTORE', bucketName: string) => ({
  [`PDS_${kind}_S3_BUCKET`]: bucketName,
  [`PDS_${kind}_S3_ENDPOINT`]: endpoint,
  [`PDS_${kind}_S3_FORCE_PATH_STYLE`]: 'true',
  [`PDS_${kind}_S3_ACCESS_KEY_ID`]: 'S3RVER',
  [`PDS_${kind}_S3_SECRET_ACCESS_KEY`]: 'S3RVER',
})

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
      const manifest = JSON.parse(
        await (await client.send(new GetObjectCommand({ Bucket: b, Key: `backups/${latest}/manifest.json` }))).Body!.transformToString(),
      )
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
