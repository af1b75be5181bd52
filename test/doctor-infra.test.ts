// `pds doctor` on what the server stands on: the quick start's defaults pass (development mode,
// the local PLC log); the database and Redis answer a round trip; S3 buckets are checked by a
// probe object (s3rver on loopback), a missing one failing with what to do; DNS for the host name
// and the handle wildcard through a loopback nameserver; the public URL's TLS certificate.
import { randomBytes } from 'node:crypto'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { CreateBucketCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { runCli } from './cli-run.js'
import { describe, dialect, redisUrl, startTestPds, tempDir, type TestPds } from './harness.js'
import { startNameserver, type Nameserver } from './tripwire.js'

type S3rverLike = { run(): Promise<{ port: number }>; close(): Promise<void> }
const lineOf = (out: string, check: string) => out.split('\n').find((l) => l.split(/\s+/)[1] === check) ?? ''

describe('pds doctor: infrastructure', { timeout: 120_000 }, () => {
  let pds: TestPds
  let srv: S3rverLike
  let s3: S3Client
  let endpoint: string
  let dns: Nameserver
  beforeAll(async () => {
    pds = await startTestPds()
    const { default: S3rver } = (await import('s3rver')) as { default: new (o: object) => S3rverLike }
    srv = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: tempDir('s3rver-') })
    endpoint = `http://127.0.0.1:${(await srv.run()).port}`
    s3 = new S3Client({
      region: 'us-east-1',
      endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    })
    await s3.send(new CreateBucketCommand({ Bucket: 'doctor-blobs' }))
    dns = await startNameserver({ 'pds.doctor.example': '127.0.0.1' })
  })
  afterAll(async () => {
    s3?.destroy()
    await srv?.close()
    await dns?.close()
    await pds?.stop()
  })

  it('passes on the quick start: development mode, the local PLC log, no relays, console email', async () => {
    const r = await runCli(pds.env, 'doctor')
    expect(r.code, r.out + r.err).toBe(0)
    expect(lineOf(r.out, 'plc-directory')).toMatch(/^ok .*development mode: DIDs live in this server's own log/)
    expect(lineOf(r.out, 'database')).toMatch(
      dialect === 'sqlite' ? /^ok .*SQLite at .*pds\.sqlite answered in \d+ ms/ : /^ok .*PostgreSQL .* answered in \d+ ms/,
    )
    expect(lineOf(r.out, 'public-url')).toMatch(/^ok /)
    expect(lineOf(r.out, 'tls')).toMatch(/^ok .*plain http: fine in development mode/)
    expect(lineOf(r.out, 'dns')).toMatch(/^ok .*development mode/)
    expect(
      r.out
        .trim()
        .split('\n')
        .every((l) => /^(ok|warn|fail) /.test(l)),
    ).toBe(true)
  })

  it('writes, reads and deletes a probe object in each bucket; a missing one fails with what to do', async () => {
    const s3Env = (kind: 'BLOBSTORE' | 'BACKUP', bucket: string) => ({
      [`PDS_${kind}_S3_BUCKET`]: bucket,
      [`PDS_${kind}_S3_ENDPOINT`]: endpoint,
      [`PDS_${kind}_S3_FORCE_PATH_STYLE`]: 'true',
      [`PDS_${kind}_S3_ACCESS_KEY_ID`]: 'S3RVER',
      [`PDS_${kind}_S3_SECRET_ACCESS_KEY`]: 'S3RVER',
      // S3 backups are sealed on this machine: the key comes with the bucket
      ...(kind === 'BACKUP' ? { PDS_BACKUP_ENCRYPTION_KEY: randomBytes(32).toString('hex') } : {}),
    })
    const good = await runCli({ ...pds.env, ...s3Env('BLOBSTORE', 'doctor-blobs') }, 'doctor')
    expect(lineOf(good.out, 'blob-bucket')).toMatch(/^ok .*S3 bucket "doctor-blobs" took, gave back and deleted a probe object/)
    expect(good.code, good.out).toBe(0)
    // nothing left behind
    expect((await s3.send(new ListObjectsV2Command({ Bucket: 'doctor-blobs' }))).Contents ?? []).toEqual([])

    const missing = await runCli({ ...pds.env, ...s3Env('BLOBSTORE', 'doctor-blobs'), ...s3Env('BACKUP', 'no-such-backups') }, 'doctor')
    expect(missing.code).toBe(1)
    expect(lineOf(missing.out, 'blob-bucket')).toMatch(/^ok /)
    expect(lineOf(missing.out, 'backup-bucket')).toMatch(
      /^fail .*S3 bucket "no-such-backups" at 127\.0\.0\.1:\d+ does not exist: create it or fix PDS_BACKUP_S3_BUCKET/,
    )

    const refused = await runCli({ ...pds.env, ...s3Env('BLOBSTORE', 'doctor-blobs'), PDS_BLOBSTORE_S3_ACCESS_KEY_ID: 'WRONG' }, 'doctor')
    expect(refused.code).toBe(1)
    expect(lineOf(refused.out, 'blob-bucket')).toMatch(/^fail .*refused the credentials \(InvalidAccessKeyId\)/)
  })

  it.skipIf(!redisUrl)('round-trips Redis, and fails on one that does not answer', async () => {
    const ok = await runCli({ ...pds.env, PDS_REDIS_URL: redisUrl! }, 'doctor')
    expect(lineOf(ok.out, 'redis')).toMatch(/^ok .*wrote, read and deleted a key in \d+ ms/)
    const down = await runCli({ ...pds.env, PDS_REDIS_URL: 'redis://127.0.0.1:1' }, 'doctor')
    expect(down.code).toBe(1)
    expect(lineOf(down.out, 'redis')).toMatch(/^fail .*Redis at 127\.0\.0\.1:1 is not reachable/)
  })

  it('looks up the host name and the handle wildcard, and checks the public URL over TLS', async () => {
    // a self-signed certificate on loopback: what a proxy without a real certificate presents
    const dir = tempDir('pds-tls-')
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    )
    const https = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) }, (_req, res) =>
      res.end('{}'),
    )
    await new Promise<void>((r) => https.listen(0, '127.0.0.1', r))
    try {
      const r = await runCli(
        {
          ...pds.env,
          PDS_HOSTNAME: 'pds.doctor.example',
          PDS_DEV_MODE: 'false',
          PDS_DID_PLC_URL: 'local',
          PDS_CRAWLERS: '',
          PDS_SERVICE_HANDLE_DOMAINS: '.pds.doctor.example',
          PDS_DNS_NAMESERVERS: dns.address,
          PDS_PUBLIC_URL: `https://localhost:${(https.address() as AddressInfo).port}`,
        },
        'doctor',
      )
      expect(r.code).toBe(1)
      expect(lineOf(r.out, 'dns')).toBe('ok    dns            pds.doctor.example has 127.0.0.1')
      expect(lineOf(r.out, 'dns-wildcard')).toMatch(
        /^fail .*\*\.pds\.doctor\.example has no wildcard A or AAAA record: add one pointing at this server/,
      )
      expect(lineOf(r.out, 'tls')).toMatch(/^fail .*self[- ]signed.*: check the reverse proxy's certificate/i)
      expect(lineOf(r.out, 'plc-directory')).toMatch(/^warn .*set PDS_DID_PLC_URL=https:\/\/plc\.directory/)
    } finally {
      https.close()
    }
  })
})
