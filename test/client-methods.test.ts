// Methods today's clients call beyond the core account and repository set: the sign-up helpers,
// full identity resolution, the deprecated sync reads and describeServer's upload limit. Every call
// goes through AtpAgent or the generated client, both of which validate the response against the
// official lexicons.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { AtpAgent, ComAtprotoTempCheckHandleAvailability } from '@atproto/api'
import { readCar, verifyRepoCar } from '@atproto/repo'
import { CID } from 'multiformats/cid'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ADMIN_PASSWORD, describe, newAgent as createAgent, startTestPds, xrpc, type TestPds } from './harness.js'

let pds: TestPds
const newAgent = (prefix = 'cm') => createAgent(pds.url, prefix)
const basic = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` }
const post = (text: string) => ({ $type: 'app.bsky.feed.post', text, createdAt: new Date().toISOString() })

/** the XRPC error name a client call fails with */
async function errorOf(call: Promise<unknown>): Promise<string | undefined> {
  try {
    await call
  } catch (err) {
    return (err as { error?: string }).error
  }
  throw new Error('the call succeeded')
}

/** a did:web identity served from a loopback port; `doc.alsoKnownAs` can be changed later */
async function foreignIdentity() {
  let server: Server
  const port = await new Promise<number>((resolve) => {
    server = createServer((req, res) => {
      if (req.url !== '/.well-known/did.json') return res.writeHead(404).end()
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(doc))
    }).listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port))
  })
  const did = `did:web:127.0.0.1%3A${port}`
  const doc = { '@context': ['https://www.w3.org/ns/did/v1'], id: did, alsoKnownAs: ['at://nobody.example'], service: [] }
  return { did, doc, close: () => new Promise((r) => server.close(r)) }
}

describe("methods today's clients call", () => {
  beforeAll(async () => {
    pds = await startTestPds({ PDS_BLOB_UPLOAD_LIMIT: '5000000' })
  })
  afterAll(() => pds?.stop())

  it('answers checkSignupQueue with activated for a signed-in account, and only for one', async () => {
    const agent = await newAgent()
    expect((await agent.com.atproto.temp.checkSignupQueue()).data).toEqual({ activated: true })
    const generated = pds.client().com.atproto.temp.checkSignupQueue(undefined, {
      headers: { authorization: `Bearer ${agent.session!.accessJwt}` },
    })
    expect((await generated).data).toEqual({ activated: true })
    expect(await errorOf(pds.client().com.atproto.temp.checkSignupQueue())).toBe('AuthMissing')
    // a deactivated account is refused, as on every method migration does not need
    await agent.com.atproto.server.deactivateAccount({})
    expect(await errorOf(agent.com.atproto.temp.checkSignupQueue())).toBe('AccountDeactivated')
  })

  it('checks handle availability with the sign-up rules and suggests free handles', async () => {
    const taken = await newAgent('avail')
    const takenHandle = taken.session!.handle
    const anon = new AtpAgent({ service: pds.url })
    const check = (handle: string, extra: { email?: string; birthDate?: string } = {}) =>
      anon.com.atproto.temp.checkHandleAvailability({ handle, ...extra }).then((r) => r.data)

    const free = await check('Newcomer.test')
    expect(free.handle).toBe('Newcomer.test')
    expect(ComAtprotoTempCheckHandleAvailability.isResultAvailable(free.result)).toBe(true)

    const gone = await check(takenHandle, { email: 'Jo.Smith@example.com', birthDate: '1990-04-01T00:00:00.000Z' })
    expect(ComAtprotoTempCheckHandleAvailability.isResultUnavailable(gone.result)).toBe(true)
    const suggestions = (gone.result as ComAtprotoTempCheckHandleAvailability.ResultUnavailable).suggestions
    expect(suggestions.length).toBeGreaterThan(0)
    expect(suggestions.map((s) => s.method)).toEqual(expect.arrayContaining(['birth-year', 'email']))
    expect(suggestions.map((s) => s.handle)).toContain('josmith.test')
    for (const s of suggestions) {
      expect(s.handle).toMatch(/^[a-z0-9-]{3,18}\.test$/)
      expect(ComAtprotoTempCheckHandleAvailability.isResultAvailable((await check(s.handle)).result)).toBe(true)
    }
    // the generated client agrees, and a reserved name is unavailable too
    const reserved = await pds.client().com.atproto.temp.checkHandleAvailability({ handle: 'admin.test' })
    expect(reserved.data.result.$type).toBe('com.atproto.temp.checkHandleAvailability#resultUnavailable')

    // what createAccount refuses outright is the same 400
    expect(await errorOf(check('someone.example.com'))).toBe('UnsupportedDomain')
    expect(await errorOf(check('ab.test'))).toBe('InvalidHandle')
    expect(await errorOf(check('a.b.test'))).toBe('InvalidHandle')
    expect(await errorOf(check('fine.test', { email: 'not an address' }))).toBe('InvalidEmail')
    const bad = await xrpc(pds.url, 'com.atproto.temp.checkHandleAvailability', { params: { handle: 'no spaces.test' } })
    expect([bad.status, bad.body.error]).toEqual([400, 'InvalidRequest'])

    // "available" means createAccount takes it
    await anon.createAccount({ handle: 'newcomer.test', email: 'newcomer@example.com', password: 'long enough password' })
    expect(ComAtprotoTempCheckHandleAvailability.isResultUnavailable((await check('newcomer.test')).result)).toBe(true)
  })

  it('rate-limits handle checks by address', async () => {
    const limited = await startTestPds(
      { PDS_RATE_LIMITS_ENABLED: 'true' },
      { rateLimits: { prefix: `rl-${Date.now()}`, limits: { handleCheck: [{ durationMs: 60_000, points: 3 }] } } },
    )
    try {
      const anon = new AtpAgent({ service: limited.url })
      for (let i = 0; i < 3; i++) await anon.com.atproto.temp.checkHandleAvailability({ handle: `person${i}.test` })
      expect(await errorOf(anon.com.atproto.temp.checkHandleAvailability({ handle: 'person9.test' }))).toBe('RateLimitExceeded')
    } finally {
      await limited.stop()
    }
  })

  it('resolves a full identity from a handle or a DID, the handle verified both ways', async () => {
    const agent = await newAgent('ident')
    const { did, handle } = agent.session!
    const anon = new AtpAgent({ service: pds.url })
    const byHandle = (await anon.com.atproto.identity.resolveIdentity({ identifier: handle.toUpperCase() })).data
    expect(byHandle.did).toBe(did)
    expect(byHandle.handle).toBe(handle)
    expect((byHandle.didDoc as { id: string }).id).toBe(did)
    expect((byHandle.didDoc as { alsoKnownAs: string[] }).alsoKnownAs).toEqual([`at://${handle}`])
    const byDid = (await pds.client().com.atproto.identity.resolveIdentity({ identifier: did })).data
    expect(byDid).toEqual(byHandle)

    // a DID elsewhere whose document claims this server's handle gets no handle
    const foreign = await foreignIdentity()
    try {
      foreign.doc.alsoKnownAs = [`at://${handle}`]
      const claimed = (await anon.com.atproto.identity.resolveIdentity({ identifier: foreign.did })).data
      expect([claimed.did, claimed.handle]).toEqual([foreign.did, 'handle.invalid'])
      expect(claimed.didDoc).toEqual(foreign.doc)
    } finally {
      await foreign.close()
    }

    expect(await errorOf(anon.com.atproto.identity.resolveIdentity({ identifier: 'nobody-here.test' }))).toBe('HandleNotFound')
    expect(await errorOf(anon.com.atproto.identity.resolveIdentity({ identifier: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa' }))).toBe('DidNotFound')
    const subject = { $type: 'com.atproto.admin.defs#repoRef', did }
    const down = await xrpc(pds.url, 'com.atproto.admin.updateSubjectStatus', {
      body: { subject, takedown: { applied: true } },
      headers: basic,
    })
    expect(down.status).toBe(200)
    expect(await errorOf(anon.com.atproto.identity.resolveIdentity({ identifier: did }))).toBe('DidDeactivated')
    expect(await errorOf(anon.com.atproto.identity.resolveIdentity({ identifier: handle }))).toBe('DidDeactivated')
  })

  it('refreshes an identity past the cache, for signed-in callers', async () => {
    const agent = await newAgent('refresh')
    const foreign = await foreignIdentity()
    try {
      const anon = new AtpAgent({ service: pds.url })
      const resolve = async () => (await anon.com.atproto.identity.resolveIdentity({ identifier: foreign.did })).data.didDoc
      expect(await resolve()).toEqual(foreign.doc)
      const before = structuredClone(foreign.doc)
      foreign.doc.alsoKnownAs = ['at://moved.example']
      // cached: the old document until someone asks for a refresh
      expect(await resolve()).toEqual(before)
      expect(await errorOf(anon.com.atproto.identity.refreshIdentity({ identifier: foreign.did }))).toBe('AuthMissing')
      const refreshed = (await agent.com.atproto.identity.refreshIdentity({ identifier: foreign.did })).data
      expect(refreshed).toEqual({ did: foreign.did, handle: 'handle.invalid', didDoc: foreign.doc })
      expect(await resolve()).toEqual(foreign.doc)
      // the same for this server's own accounts, through the generated client
      const own = await pds
        .client()
        .com.atproto.identity.refreshIdentity(
          { identifier: agent.session!.handle },
          { headers: { authorization: `Bearer ${agent.session!.accessJwt}` }, encoding: 'application/json' },
        )
      expect([own.data.did, own.data.handle]).toEqual([agent.session!.did, agent.session!.handle])
      expect(await errorOf(agent.com.atproto.identity.refreshIdentity({ identifier: 'nobody-here.test' }))).toBe('HandleNotFound')
    } finally {
      await foreign.close()
    }
  })

  it('answers the deprecated getHead with the current commit, gated like the other sync reads', async () => {
    const agent = await newAgent('head')
    const did = agent.session!.did
    const anon = new AtpAgent({ service: pds.url })
    const head = async () => (await anon.com.atproto.sync.getHead({ did })).data.root
    expect(await head()).toBe((await anon.com.atproto.sync.getLatestCommit({ did })).data.cid)
    const written = await agent.com.atproto.repo.createRecord({
      repo: did,
      collection: 'app.bsky.feed.post',
      record: post('moves the head'),
    })
    expect(await head()).toBe(written.data.commit!.cid)
    expect((await pds.client().com.atproto.sync.getHead({ did })).data.root).toBe(written.data.commit!.cid)
    expect(await errorOf(anon.com.atproto.sync.getHead({ did: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa' }))).toBe('RepoNotFound')
    await agent.com.atproto.server.deactivateAccount({})
    expect(await errorOf(anon.com.atproto.sync.getHead({ did }))).toBe('RepoDeactivated')
  })

  it('exports the deprecated getCheckout as a verifiable CAR of the current records only', async () => {
    const agent = await newAgent('checkout')
    const did = agent.session!.did
    const kept = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: post('kept') })
    const dropped = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: post('dropped') })
    await agent.com.atproto.repo.deleteRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: dropped.data.uri.split('/').pop()! })
    const anon = new AtpAgent({ service: pds.url })
    const { data: car, headers } = await anon.com.atproto.sync.getCheckout({ did })
    expect(headers['content-type']).toContain('application/vnd.ipld.car')
    const doc = (await anon.com.atproto.identity.resolveDid({ did })).data.didDoc as {
      verificationMethod: { publicKeyMultibase: string }[]
    }
    const verified = await verifyRepoCar(car, did, `did:key:${doc.verificationMethod[0].publicKeyMultibase}`)
    expect(verified.creates.map((c) => `at://${did}/${c.collection}/${c.rkey}`)).toEqual([kept.data.uri])
    expect(verified.commit.rev).toBe((await anon.com.atproto.sync.getLatestCommit({ did })).data.rev)
    // no block of the deleted record travels along
    const { blocks } = await readCar(car)
    expect(blocks.has(CID.parse(kept.data.cid))).toBe(true)
    expect(blocks.has(CID.parse(dropped.data.cid))).toBe(false)
    const generated = await pds.client().com.atproto.sync.getCheckout({ did })
    expect(Buffer.from(generated.data).equals(Buffer.from(car))).toBe(true)
    expect(await errorOf(anon.com.atproto.sync.getCheckout({ did: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa' }))).toBe('RepoNotFound')
  })

  it('names the blob upload limit in describeServer', async () => {
    const anon = new AtpAgent({ service: pds.url })
    expect((await anon.com.atproto.server.describeServer()).data.blobUploadLimit).toBe(5_000_000)
    expect((await pds.client().com.atproto.server.describeServer()).data.blobUploadLimit).toBe(5_000_000)
  })
})
