// Blobs on S3 (against s3rver, an S3-protocol server this test starts on loopback) and on disk:
// serving, takedowns, and the sweeper that removes what no record references, racing uploads of
// the same bytes; `pds blobs gc` run as an operator runs it.
import { spawn } from 'node:child_process'
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { type AtpAgent } from '@atproto/api'
import { CreateBucketCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { sweepBlobs } from '../src/blob/blobstore-gc.js'
import { ADMIN_PASSWORD, describe, newAgent, startTestPds, tempDir, xrpc, type TestPds } from './harness.js'

const CLI = new URL('../dist/cli/index.js', import.meta.url).pathname
const GRACE_MS = 1000
const admin = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` }

type S3rverLike = { run(): Promise<{ port: number }>; close(): Promise<void> }

async function startS3() {
  const { default: S3rver } = (await import('s3rver')) as { default: new (o: object) => S3rverLike }
  const srv = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: tempDir('s3rver-') })
  const { port } = await srv.run()
  const endpoint = `http://127.0.0.1:${port}`
  const client = new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  })
  const bucket = 'pds-blobs'
  await client.send(new CreateBucketCommand({ Bucket: bucket }))
  const env = {
    PDS_BLOBSTORE_S3_BUCKET: bucket,
    PDS_BLOBSTORE_S3_REGION: 'us-east-1',
    PDS_BLOBSTORE_S3_ENDPOINT: endpoint,
    PDS_BLOBSTORE_S3_FORCE_PATH_STYLE: 'true',
    PDS_BLOBSTORE_S3_ACCESS_KEY_ID: 'S3RVER',
    PDS_BLOBSTORE_S3_SECRET_ACCESS_KEY: 'S3RVER',
  }
  const keys = async (prefix: string) =>
    ((await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }))).Contents ?? []).map((o) => o.Key!)
  const put = (Key: string, Body: string) => client.send(new PutObjectCommand({ Bucket: bucket, Key, Body }))
  return { env, keys, put, stop: async () => (client.destroy(), await srv.close()) }
}

function cli(pds: TestPds, ...args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...pds.env }, stdio: 'pipe' })
    let out = ''
    let err = ''
    child.stdout.on('data', (c) => (out += c))
    child.stderr.on('data', (c) => (err += c))
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, out, err })
    })
  })
}

const getBlob = (pds: TestPds, did: string, cid: string) => fetch(`${pds.url}/xrpc/com.atproto.sync.getBlob?did=${did}&cid=${cid}`)
const unique = (label: string) => Buffer.from(`${label} ${Math.random()} ${Date.now()}`)
const later = () => Date.now() + GRACE_MS + 60_000

async function post(agent: AtpAgent, blob: unknown) {
  const res = await agent.com.atproto.repo.createRecord({
    repo: agent.session!.did,
    collection: 'app.bsky.feed.post',
    record: {
      $type: 'app.bsky.feed.post',
      text: 'pic',
      createdAt: new Date().toISOString(),
      embed: { $type: 'app.bsky.embed.images', images: [{ alt: 'x', image: blob }] },
    },
  })
  return res.data.uri.split('/').pop()!
}

async function upload(agent: AtpAgent, bytes: Buffer, encoding = 'image/png') {
  const up = await agent.com.atproto.repo.uploadBlob(bytes, { encoding })
  return { blob: up.data.blob, cid: up.data.blob.ref.toString() }
}

// the same behaviour whichever store holds the bytes
function sweeperSuite(kind: 'disk' | 's3') {
  let pds: TestPds
  let s3: Awaited<ReturnType<typeof startS3>> | undefined
  const agent = () => newAgent(pds.url, `gc${kind}`)
  const sweep = (now = later()) => sweepBlobs(pds.services, GRACE_MS, now)

  beforeAll(async () => {
    if (kind === 's3') s3 = await startS3()
    pds = await startTestPds({ ...s3?.env, PDS_BLOB_GRACE_SECONDS: String(GRACE_MS / 1000), PDS_METRICS: 'true' })
  })
  afterAll(async () => {
    await pds?.stop()
    await s3?.stop()
  })

  it('serves a referenced blob with the same bytes and headers', async () => {
    const a = await agent()
    const did = a.session!.did
    const bytes = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), unique('png')])
    const { blob, cid } = await upload(a, bytes)
    await post(a, blob)
    const res = await getBlob(pds, did, cid)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('image/png')
    expect(res.headers.get('content-length')).toBe(String(bytes.length))
    expect(res.headers.get('x-content-type-options')).toBe('nosniff')
    expect(res.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox")
    expect(Buffer.from(await res.arrayBuffer())).toEqual(bytes)
    // referenced: kept however late the sweep
    await sweep()
    expect((await getBlob(pds, did, cid)).status).toBe(200)
    if (s3) {
      expect(await s3.keys('blocks/')).toContain(`blocks/${cid}`)
      expect(await s3.keys('tmp/')).toEqual([])
    }
  })

  it('hides a taken-down blob and serves it again once the takedown is lifted', async () => {
    const a = await agent()
    const did = a.session!.did
    const bytes = unique('moderated')
    const { blob, cid } = await upload(a, bytes, 'text/plain')
    await post(a, blob)
    const subject = { $type: 'com.atproto.admin.defs#repoBlobRef', did, cid }
    const set = (applied: boolean) =>
      xrpc(pds.url, 'com.atproto.admin.updateSubjectStatus', { headers: admin, body: { subject, takedown: { applied } } })
    expect((await set(true)).status).toBe(200)
    expect((await getBlob(pds, did, cid)).status).toBe(404)
    expect((await set(false)).status).toBe(200)
    expect(Buffer.from(await (await getBlob(pds, did, cid)).arrayBuffer())).toEqual(bytes)
  })

  it('sweeps an upload no record used, only after the grace period', async () => {
    const a = await agent()
    const did = a.session!.did
    const { cid } = await upload(a, unique('orphan'), 'text/plain')
    await sweep(Date.now())
    expect((await getBlob(pds, did, cid)).status).toBe(200)
    const { removed } = await sweep()
    expect(removed.map((r) => r.cid)).toContain(cid)
    expect(await pds.services.blobstore.has(cid)).toBe(false)
    expect((await getBlob(pds, did, cid)).status).toBe(404)
  })

  it('sweeps a blob once the last record referencing it is deleted', async () => {
    const a = await agent()
    const did = a.session!.did
    const { blob, cid } = await upload(a, unique('shared'), 'text/plain')
    const first = await post(a, blob)
    const second = await post(a, blob)
    const del = (rkey: string) => a.com.atproto.repo.deleteRecord({ repo: did, collection: 'app.bsky.feed.post', rkey })
    await del(first)
    await sweep()
    expect((await getBlob(pds, did, cid)).status).toBe(200)
    await del(second)
    const { removed } = await sweep()
    expect(removed.map((r) => r.cid)).toContain(cid)
    expect(await pds.services.blobstore.has(cid)).toBe(false)
  })

  it('keeps bytes uploaded again while the sweeper removes them', async () => {
    const a = await agent()
    const did = a.session!.did
    const bytes = unique('race')
    const { blob, cid } = await upload(a, bytes, 'text/plain')
    // the second upload's bytes are in place, its row not yet: the sweep runs right then
    const store = pds.services.blobstore
    const commit = store.commit.bind(store)
    let hook: (() => Promise<unknown>) | undefined = () => sweep()
    store.commit = async (staged) => {
      await commit(staged)
      const h = hook
      hook = undefined
      if (h) await h()
    }
    try {
      await upload(a, bytes, 'text/plain')
    } finally {
      store.commit = commit
    }
    expect(hook).toBeUndefined()
    expect(Buffer.from(await (await getBlob(pds, did, cid)).arrayBuffer())).toEqual(bytes)
    await post(a, blob)
    expect((await getBlob(pds, did, cid)).status).toBe(200)

    // and truly concurrent, a few times over
    for (let i = 0; i < 5; i++) {
      const again = unique(`race ${i}`)
      const { cid: c } = await upload(a, again, 'text/plain')
      // the first upload is past its grace period, the second one is not
      const past = new Date(Date.now() - GRACE_MS - 60_000).toISOString()
      await pds.services.db.updateTable('blob').set({ created_at: past }).where('cid', '=', c).execute()
      const [, second] = await Promise.all([sweep(Date.now()), upload(a, again, 'text/plain')])
      expect(second.cid).toBe(c)
      const res = await getBlob(pds, did, c)
      expect(res.status).toBe(200)
      expect(Buffer.from(await res.arrayBuffer())).toEqual(again)
    }
  })

  it('removes temporary uploads a crash left behind, after a day', async () => {
    if (s3) await s3.put('tmp/left-by-a-crash', 'partial')
    else {
      mkdirSync(join(pds.services.config.blobDir, 'tmp'), { recursive: true })
      writeFileSync(join(pds.services.config.blobDir, 'tmp', 'left-by-a-crash'), 'partial')
    }
    const stray = async () => (s3 ? (await s3.keys('tmp/')).length : readdirSync(join(pds.services.config.blobDir, 'tmp')).length)
    expect((await sweep()).staged).toBe(0)
    expect(await stray()).toBe(1)
    expect((await sweep(Date.now() + 25 * 3600_000)).staged).toBe(1)
    expect(await stray()).toBe(0)
  })

  it('removes the blobs of a deleted account', async () => {
    const a = await agent()
    const did = a.session!.did
    const { blob, cid } = await upload(a, unique('deleted account'), 'text/plain')
    await post(a, blob)
    const del = await xrpc(pds.url, 'com.atproto.admin.deleteAccount', { headers: admin, body: { did } })
    expect(del.status).toBe(200)
    const { removed } = await sweep(Date.now())
    expect(removed).toContainEqual(expect.objectContaining({ cid, reason: 'account deleted' }))
    expect(await pds.services.blobstore.has(cid)).toBe(false)
  })

  it('reports stored bytes in metrics and `pds blobs gc` lists, then removes, unused blobs', async () => {
    await sweep()
    const metric = async () => {
      const text = await (await fetch(`${pds.url}/metrics`)).text()
      return Number(/^pds_blobstore_bytes (\d+)/m.exec(text)?.[1])
    }
    const before = await metric()
    expect(before).toBeGreaterThan(0)

    const a = await agent()
    const bytes = unique('for the cli')
    const { cid } = await upload(a, bytes, 'text/plain')
    // past the 1 s grace period of the CLI's environment
    await new Promise((r) => setTimeout(r, GRACE_MS + 200))
    const dry = await cli(pds, 'blobs', 'gc', '--dry-run')
    expect(dry.code, dry.err).toBe(0)
    expect(dry.out).toContain(`${cid}  ${bytes.length} bytes  ${a.session!.did}  unreferenced`)
    expect(dry.out).toMatch(/would remove 1 blob, \d+ bytes freed/)
    expect(await pds.services.blobstore.has(cid)).toBe(true)

    const run = await cli(pds, 'blobs', 'gc')
    expect(run.code, run.err).toBe(0)
    expect(run.out).toContain(cid)
    expect(run.out).toContain(`removed 1 blob, ${bytes.length} bytes freed`)
    expect(await pds.services.blobstore.has(cid)).toBe(false)
    expect((await cli(pds, 'blobs', 'gc', '--dry-run')).out).toContain('would remove 0 blobs')
  })
}

describe('blobs on S3', () => sweeperSuite('s3'))
describe('blob sweeper on disk', () => sweeperSuite('disk'))

describe('S3 uploads in parts', () => {
  let pds: TestPds
  let s3: Awaited<ReturnType<typeof startS3>>
  beforeAll(async () => {
    s3 = await startS3()
    pds = await startTestPds(s3.env)
  })
  afterAll(async () => {
    await pds?.stop()
    await s3?.stop()
  })

  it('streams a blob larger than one part and serves it whole', async () => {
    const a = await newAgent(pds.url, 'parts')
    const bytes = Buffer.alloc(9 * 1024 * 1024 + 17)
    for (let i = 0; i < bytes.length; i += 4096) bytes.write(`${i}`, i)
    const { blob, cid } = await upload(a, bytes, 'application/octet-stream')
    await post(a, blob)
    const res = await getBlob(pds, a.session!.did, cid)
    expect(res.headers.get('content-length')).toBe(String(bytes.length))
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true)
    expect(await s3.keys('tmp/')).toEqual([])
  })
})
