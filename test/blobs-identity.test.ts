import { verifyRepoCar } from '@atproto/repo'
import * as dagCbor from '@ipld/dag-cbor'
import { createHash } from 'node:crypto'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { sweepBlobs } from '../src/blob/blobstore-gc.js'
import { describe, newAgent as createAgent, startTestPds, xrpc, type TestPds } from './harness.js'

let pds: TestPds
const newAgent = () => createAgent(pds.url, 'blob')

const png = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.from('not really a png')])

const GRACE = 3600_000
const collectBlobs = async (services: TestPds['services'], now = Date.now()) => (await sweepBlobs(services, GRACE, now)).removed.length

describe('blobs', () => {
  beforeAll(async () => {
    pds = await startTestPds({ PDS_BLOB_UPLOAD_LIMIT: '1000' })
  })
  afterAll(() => pds?.stop())

  it('round-trips a blob referenced by a record, with safe headers', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const up = await agent.com.atproto.repo.uploadBlob(png, { encoding: 'image/png' })
    expect(up.data.blob.mimeType).toBe('image/png')
    expect(up.data.blob.size).toBe(png.length)
    const cid = up.data.blob.ref.toString()
    expect(cid).toMatch(/^bafkrei/)
    await agent.com.atproto.repo.createRecord({
      repo: did,
      collection: 'app.bsky.feed.post',
      record: {
        $type: 'app.bsky.feed.post',
        text: 'pic',
        createdAt: new Date().toISOString(),
        embed: { $type: 'app.bsky.embed.images', images: [{ alt: 'x', image: up.data.blob }] },
      },
    })
    const res = await fetch(`${pds.url}/xrpc/com.atproto.sync.getBlob?did=${did}&cid=${cid}`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('image/png')
    expect(res.headers.get('x-content-type-options')).toBe('nosniff')
    expect(res.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox")
    expect(Buffer.from(await res.arrayBuffer()).equals(png)).toBe(true)
    const list = await agent.com.atproto.sync.listBlobs({ did })
    expect(list.data.cids).toEqual([cid])
    // referenced: never collected, even long after the grace period
    expect(await collectBlobs(pds.services, Date.now() + 10 * GRACE)).toBe(0)
    expect((await fetch(`${pds.url}/xrpc/com.atproto.sync.getBlob?did=${did}&cid=${cid}`)).status).toBe(200)
  })

  it('answers 404 BlobNotFound for an unknown blob', async () => {
    const agent = await newAgent()
    const r = await xrpc(pds.url, 'com.atproto.sync.getBlob', {
      params: { did: agent.session!.did, cid: 'bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy' },
    })
    expect(r.status).toBe(404)
    expect(r.body.error).toBe('BlobNotFound')
  })

  it('refuses an upload over PDS_BLOB_UPLOAD_LIMIT with 413', async () => {
    const agent = await newAgent()
    const r = await xrpc(pds.url, 'com.atproto.repo.uploadBlob', {
      headers: { authorization: `Bearer ${agent.session!.accessJwt}`, 'content-type': 'application/octet-stream' },
      body: 'x'.repeat(1001),
    })
    expect(r.status).toBe(413)
  })

  it('refuses a record referencing a blob that was never uploaded', async () => {
    const agent = await newAgent()
    const bytes = Buffer.from('never uploaded')
    const digest = createHash('sha256').update(bytes).digest()
    const { CID } = await import('multiformats/cid')
    const Digest = await import('multiformats/hashes/digest')
    const cid = CID.createV1(0x55, Digest.create(0x12, digest)).toString()
    const r = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
      headers: { authorization: `Bearer ${agent.session!.accessJwt}` },
      body: {
        repo: agent.session!.did,
        collection: 'com.example.thing',
        record: { file: { $type: 'blob', ref: { $link: cid }, mimeType: 'text/plain', size: bytes.length } },
      },
    })
    expect(r.status).toBe(400)
  })

  it('collects an unreferenced upload after the grace period', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const up = await agent.com.atproto.repo.uploadBlob(Buffer.from('orphan ' + Math.random()), { encoding: 'text/plain' })
    const cid = up.data.blob.ref.toString()
    expect(await collectBlobs(pds.services)).toBe(0)
    expect(await collectBlobs(pds.services, Date.now() + GRACE + 1000)).toBeGreaterThanOrEqual(1)
    expect(await pds.services.blobstore.has(cid)).toBe(false)
    expect((await xrpc(pds.url, 'com.atproto.sync.getBlob', { params: { did, cid } })).status).toBe(404)
  })
})

describe('handles and identity', () => {
  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(() => pds?.stop())

  it('updates the handle with a new PLC operation and an #identity event', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const n = did.slice(-6)
    await agent.com.atproto.identity.updateHandle({ handle: `renamed${n}.test` })
    const resolved = await agent.com.atproto.identity.resolveHandle({ handle: `renamed${n}.test` })
    expect(resolved.data.did).toBe(did)
    const doc = (await agent.com.atproto.identity.resolveDid({ did })).data.didDoc as any
    expect(doc.alsoKnownAs).toEqual([`at://renamed${n}.test`])
    const ops = await pds.services.db.selectFrom('plc_operation').selectAll().where('did', '=', did).orderBy('seq').execute()
    expect(ops.map((o) => o.seq)).toEqual([0, 1])
    expect(JSON.parse(ops[1].operation).prev).toBe(ops[0].cid)
    const events = await pds.services.db.selectFrom('event').selectAll().where('did', '=', did).orderBy('seq').execute()
    const last = events[events.length - 1]
    expect(last.type).toBe('identity')
    expect(dagCbor.decode(last.payload)).toEqual({ did, handle: `renamed${n}.test` })
    const session = await agent.com.atproto.server.getSession()
    expect(session.data.handle).toBe(`renamed${n}.test`)
    // the repository still verifies and describeRepo agrees with the document
    const desc = await agent.com.atproto.repo.describeRepo({ repo: did })
    expect(desc.data.handleIsCorrect).toBe(true)
  })

  it('refuses a taken, malformed or foreign-domain handle', async () => {
    const a = await newAgent()
    const b = await newAgent()
    await expect(a.com.atproto.identity.updateHandle({ handle: b.session!.handle })).rejects.toMatchObject({ error: 'HandleNotAvailable' })
    const bad = await xrpc(pds.url, 'com.atproto.identity.updateHandle', {
      headers: { authorization: `Bearer ${a.session!.accessJwt}` },
      body: { handle: 'someone.example.com' },
    })
    expect(bad.status).toBe(400)
    const ops = await pds.services.db.selectFrom('plc_operation').select('seq').where('did', '=', a.session!.did).execute()
    expect(ops).toHaveLength(1)
  })

  it('recommends DID credentials naming this server and the account key', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const rec = await agent.com.atproto.identity.getRecommendedDidCredentials()
    const doc = (await agent.com.atproto.identity.resolveDid({ did })).data.didDoc as any
    expect(rec.data.rotationKeys).toEqual([pds.services.rotationKey.did()])
    expect(rec.data.alsoKnownAs).toEqual([`at://${agent.session!.handle}`])
    expect(rec.data.verificationMethods).toEqual({ atproto: `did:key:${doc.verificationMethod[0].publicKeyMultibase}` })
    expect(rec.data.services).toEqual({ atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: pds.env.PDS_PUBLIC_URL } })
  })

  it('answers DidNotFound for a DID not hosted here', async () => {
    const r = await xrpc(pds.url, 'com.atproto.identity.resolveDid', { params: { did: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa' } })
    expect(r.status).toBe(404)
    expect(r.body.error).toBe('DidNotFound')
  })

  it('keeps the repository verifiable across a handle change', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    await agent.com.atproto.repo.createRecord({ repo: did, collection: 'com.example.thing', record: { a: 'b' } })
    const n = did.slice(-6)
    await agent.com.atproto.identity.updateHandle({ handle: `again${n}.test` })
    const car = new Uint8Array(await (await fetch(`${pds.url}/xrpc/com.atproto.sync.getRepo?did=${did}`)).arrayBuffer())
    const doc = (await agent.com.atproto.identity.resolveDid({ did })).data.didDoc as any
    const v = await verifyRepoCar(car, did, 'did:key:' + doc.verificationMethod[0].publicKeyMultibase)
    expect(v.creates).toHaveLength(1)
  })
})
