// The S3 bucket slow or unreachable: the blob store's requests go through a gate in front of an
// S3-protocol server (s3rver, on loopback) that can stop answering or refuse connections. An
// upload the bucket does not take answers 504 UpstreamTimeout (no answer) or 503
// TemporarilyUnavailable (refused: try again) within the store's deadlines and records nothing;
// getBlob answers 504 or 502 UpstreamFailure; both work again once it is back.
import { createServer, connect, type Server, type Socket } from 'node:net'
import { createHash } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { CreateBucketCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3'
import { CID } from 'multiformats/cid'
import * as Digest from 'multiformats/hashes/digest'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, newAccount, startTestPds, tempDir, xrpc, type TestPds } from './harness.js'

type S3rverLike = { run(): Promise<{ port: number }>; close(): Promise<void> }

/** a TCP gate to `target`: `open` passes connections through, `hang` accepts and never answers, `refuse` is not listening */
class Gate {
  mode: 'open' | 'hang' | 'refuse' = 'open'
  port = 0
  private server: Server = createServer((s) => this.accept(s))
  private sockets = new Set<Socket>()

  constructor(private target: number) {}

  async start() {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r))
    this.port = (this.server.address() as AddressInfo).port
    return this
  }

  private track(s: Socket) {
    this.sockets.add(s)
    s.on('close', () => this.sockets.delete(s))
    s.on('error', () => s.destroy())
  }

  private accept(client: Socket) {
    this.track(client)
    if (this.mode !== 'open') return
    const upstream = connect(this.target, '127.0.0.1')
    this.track(upstream)
    client.pipe(upstream).pipe(client)
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
  }

  /** switches mode; connections the client keeps alive are cut, so none slips past the new mode */
  async set(mode: Gate['mode']) {
    for (const s of this.sockets) s.destroy()
    if (this.mode === 'refuse' && mode !== 'refuse') await new Promise<void>((r) => this.server.listen(this.port, '127.0.0.1', r))
    if (mode === 'refuse' && this.mode !== 'refuse') await new Promise<void>((r) => this.server.close(() => r()))
    this.mode = mode
  }

  async stop() {
    for (const s of this.sockets) s.destroy()
    if (this.mode !== 'refuse') await new Promise<void>((r) => this.server.close(() => r()))
  }
}

const cidOf = (bytes: Buffer) => CID.createV1(0x55, Digest.create(0x12, createHash('sha256').update(bytes).digest())).toString()
const DEADLINE_MS = 1000

describe('S3 bucket slow or unreachable', () => {
  let s3: S3rverLike
  let client: S3Client
  let gate: Gate
  let pds: TestPds
  let acct: Awaited<ReturnType<typeof newAccount>>
  const bucket = 'pds-blobs-faults'

  beforeAll(async () => {
    const { default: S3rver } = (await import('s3rver')) as { default: new (o: object) => S3rverLike }
    s3 = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: tempDir('s3rver-') })
    const { port } = await s3.run()
    client = new S3Client({
      region: 'us-east-1',
      endpoint: `http://127.0.0.1:${port}`,
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    })
    await client.send(new CreateBucketCommand({ Bucket: bucket }))
    gate = await new Gate(port).start()
    pds = await startTestPds({
      PDS_BLOBSTORE_S3_BUCKET: bucket,
      PDS_BLOBSTORE_S3_REGION: 'us-east-1',
      PDS_BLOBSTORE_S3_ENDPOINT: `http://127.0.0.1:${gate.port}`,
      PDS_BLOBSTORE_S3_FORCE_PATH_STYLE: 'true',
      PDS_BLOBSTORE_S3_ACCESS_KEY_ID: 'S3RVER',
      PDS_BLOBSTORE_S3_SECRET_ACCESS_KEY: 'S3RVER',
      PDS_BLOBSTORE_S3_UPLOAD_TIMEOUT_MS: String(DEADLINE_MS),
      PDS_BLOBSTORE_S3_TIMEOUT_MS: String(DEADLINE_MS),
    })
    acct = await newAccount(pds.url, 's3fault')
  })
  afterAll(async () => {
    await pds?.stop()
    await gate?.stop()
    client?.destroy()
    await s3?.close()
  })

  const upload = async (bytes: Buffer) => {
    const t0 = Date.now()
    const res = await fetch(`${pds.url}/xrpc/com.atproto.repo.uploadBlob`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acct.accessJwt}`, 'content-type': 'application/octet-stream' },
      body: bytes,
    })
    return { status: res.status, body: (await res.json()) as { error?: string; blob?: { ref: { $link: string } } }, ms: Date.now() - t0 }
  }
  const getBlob = async (cid: string) => {
    const t0 = Date.now()
    const res = await fetch(`${pds.url}/xrpc/com.atproto.sync.getBlob?did=${acct.did}&cid=${cid}`)
    const bytes = Buffer.from(await res.arrayBuffer())
    return {
      status: res.status,
      bytes,
      error: res.ok ? undefined : (JSON.parse(bytes.toString()) as { error: string }).error,
      ms: Date.now() - t0,
    }
  }
  const stored = async (cid: string) =>
    ((await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `blocks/${cid}` }))).Contents ?? []).length > 0
  const unique = (label: string) => Buffer.from(`${label} ${Math.random()} ${Date.now()}`)

  for (const [mode, status, error] of [
    ['hang', 504, 'UpstreamTimeout'],
    ['refuse', 503, 'TemporarilyUnavailable'],
  ] as const) {
    it(`answers uploadBlob ${status} ${error} when the bucket ${mode === 'hang' ? 'stops answering' : 'refuses connections'}, and records nothing`, async () => {
      const bytes = unique(`upload while ${mode}`)
      const cid = cidOf(bytes)
      await gate.set(mode)
      let refused: Awaited<ReturnType<typeof upload>>
      try {
        refused = await upload(bytes)
      } finally {
        await gate.set('open')
      }
      expect([refused.status, refused.body.error]).toEqual([status, error])
      // within the deadline and the SDK's few retries, not the client's patience
      expect(refused.ms).toBeLessThan(8 * DEADLINE_MS)
      expect((await getBlob(cid)).status).toBe(404)
      expect(await stored(cid)).toBe(false)

      const ok = await upload(bytes)
      expect(ok.status).toBe(200)
      expect(ok.body.blob?.ref.$link).toBe(cid)
      expect((await getBlob(cid)).bytes.equals(bytes)).toBe(true)
    })
  }

  it('answers getBlob 504 UpstreamTimeout while the bucket stops answering, 502 UpstreamFailure while it refuses, and serves it again after', async () => {
    const bytes = unique('stored before the outage')
    const up = await upload(bytes)
    expect(up.status).toBe(200)
    const cid = up.body.blob!.ref.$link
    expect((await getBlob(cid)).status).toBe(200)
    try {
      await gate.set('hang')
      const slow = await getBlob(cid)
      expect([slow.status, slow.error]).toEqual([504, 'UpstreamTimeout'])
      expect(slow.ms).toBeLessThan(8 * DEADLINE_MS)
      await gate.set('refuse')
      const down = await getBlob(cid)
      expect([down.status, down.error]).toEqual([502, 'UpstreamFailure'])
      expect(down.ms).toBeLessThan(8 * DEADLINE_MS)
    } finally {
      await gate.set('open')
    }
    const back = await getBlob(cid)
    expect(back.status).toBe(200)
    expect(back.bytes.equals(bytes)).toBe(true)
    // the rest of the server never depended on the bucket
    expect((await xrpc(pds.url, 'com.atproto.server.describeServer')).status).toBe(200)
  })
})
