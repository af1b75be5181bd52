// Permissioned repos on their own PDS, through the clients an app uses: @atproto/xrpc's client
// with the generated client's lexicons, over a password session or an OAuth session of the official
// @atproto/oauth-client-node holding a `space:` permission. Writes, reads, the signed commit and
// the CAR a syncer verifies, the operation log's pages, atomic batches, every named error of
// these methods, and the switch that turns Spaces off.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { XRPCError, XrpcClient } from '@atproto/xrpc'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { didDocFor } from '../src/account/store.js'
import { schemas } from '../src/generated/client/lexicons.js'
import { commitFromJson, verifyCommit, type SignedCommit } from '../src/space/commit.js'
import { verifySpaceCar } from '../src/space/car.js'
import { LtHash } from '../src/space/lthash.js'
import { ADMIN_PASSWORD, describe, newAccount, startTestPds, xrpc, type TestPds } from './harness.js'
import { officialClient, signInOfficial } from './official-client.js'
import { startNameserver, type Nameserver } from './tripwire.js'

const S = 'com.atproto.space'
const TYPE = 'com.example.forum'
const COL = 'com.example.forum.post'
const LIKE = 'com.example.forum.like'

// the lexicons as the generated client has them (this server's own package)
const LEX = schemas

let pds: TestPds
let plc: Server
let plcUrl: string
// where the space type's declaration is found: a `_lexicon` TXT record naming its publisher
let dns: Nameserver
const txt: Record<string, string[]> = {}

const sessionClient = (token: string) => new XrpcClient({ service: pds.url, headers: { authorization: `Bearer ${token}` } }, LEX)
const post = (text: string, extra: Record<string, unknown> = {}) => ({ $type: COL, text, ...extra })

/** the client hands bytes over decoded; JSON carries them as {"$bytes"} */
const asCommit = (c: unknown): SignedCommit =>
  (c as { hash?: unknown }).hash instanceof Uint8Array ? (c as SignedCommit) : commitFromJson(c)

/** the error a call answers with: HTTP status and XRPC error name */
async function failure(p: Promise<unknown>): Promise<{ status: number; error: string }> {
  try {
    await p
  } catch (err) {
    if (err instanceof XRPCError) return { status: err.status, error: err.error }
    throw err
  }
  throw new Error('the call succeeded')
}

async function didKeyOf(did: string): Promise<string> {
  const doc = (await didDocFor(pds.services.db, did)) as { verificationMethod: { id: string; publicKeyMultibase: string }[] }
  return `did:key:${doc.verificationMethod.find((v) => v.id.endsWith('#atproto'))!.publicKeyMultibase}`
}

async function spaceAccount(prefix: string) {
  const acct = await newAccount(pds.url, prefix)
  const space = `at://${acct.did}/space/${TYPE}/main`
  return { ...acct, space, client: sessionClient(acct.accessJwt) }
}

async function listAll(client: XrpcClient, space: string, repo: string) {
  const records: { collection: string; rkey: string; cid: string; value?: unknown }[] = []
  let cursor: string | undefined
  for (let i = 0; i < 50; i++) {
    const res = await client.call(`${S}.listRecords`, { space, repo, limit: 2, cursor })
    records.push(...res.data.records)
    cursor = res.data.cursor
    if (!cursor) break
  }
  return records
}

describe('Spaces: the repo host', () => {
  beforeAll(async () => {
    // the directory the official OAuth client resolves the accounts' documents from
    plc = createServer(async (req, res) => {
      if (req.method === 'POST') {
        req.resume()
        return res.writeHead(200).end()
      }
      const did = decodeURIComponent((req.url ?? '/').slice(1))
      const doc = did.includes('/') ? undefined : await didDocFor(pds.services.db, did)
      if (!doc) return res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"DID not registered"}')
      res.writeHead(200, { 'content-type': 'application/did+ld+json' }).end(JSON.stringify(doc))
    })
    await new Promise<void>((resolve) => plc.listen(0, '127.0.0.1', resolve))
    plcUrl = `http://127.0.0.1:${(plc.address() as AddressInfo).port}`
    dns = await startNameserver({}, txt)
    pds = await startTestPds({ PDS_DID_PLC_URL: plcUrl, PDS_ADMIN_PASSWORD: ADMIN_PASSWORD, PDS_DNS_NAMESERVERS: dns.address })
    // the forum type's declaration, published as a lexicon record by its publisher
    const publisher = await newAccount(pds.url, 'sprpub')
    txt['_lexicon.example.com'] = [`did=${publisher.did}`]
    const published = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
      headers: { authorization: `Bearer ${publisher.accessJwt}` },
      body: {
        repo: publisher.did,
        collection: 'com.atproto.lexicon.schema',
        rkey: TYPE,
        record: {
          $type: 'com.atproto.lexicon.schema',
          lexicon: 1,
          id: TYPE,
          defs: { main: { type: 'space', key: 'any', name: 'Forum', collections: [COL, LIKE] } },
        },
      },
    })
    expect(published.status, published.text).toBe(200)
  })
  afterAll(async () => {
    await pds?.stop()
    await new Promise((resolve) => plc?.close(resolve))
    await dns?.close()
  })

  it('writes records and reads them back; the commit verifies against the LtHash of listRecords', async () => {
    const a = await spaceAccount('sprw')
    const created = await a.client.call(
      `${S}.createRecord`,
      {},
      { space: a.space, repo: a.did, collection: COL, rkey: 'one', record: post('first') },
    )
    expect(created.data.uri).toBe(`${a.space}/${a.did}/${COL}/one`)
    expect(created.data.validationStatus).toBe('unknown')
    await a.client.call(`${S}.createRecord`, {}, { space: a.space, repo: a.did, collection: COL, record: post('second') })
    const put = await a.client.call(
      `${S}.putRecord`,
      {},
      { space: a.space, repo: a.did, collection: COL, rkey: 'one', record: post('first, edited') },
    )
    expect(put.data.cid).not.toBe(created.data.cid)
    await a.client.call(`${S}.putRecord`, {}, { space: a.space, repo: a.did, collection: COL, rkey: 'three', record: post('third') })
    await a.client.call(`${S}.deleteRecord`, {}, { space: a.space, repo: a.did, collection: COL, rkey: 'three' })

    const got = await a.client.call(`${S}.getRecord`, { space: a.space, repo: a.did, collection: COL, rkey: 'one' })
    expect(got.data).toEqual({ uri: created.data.uri, cid: put.data.cid, value: post('first, edited') })

    const records = await listAll(a.client, a.space, a.did)
    expect(records.map((r) => r.rkey)).toHaveLength(2)
    expect(records.find((r) => r.rkey === 'one')?.value).toEqual(post('first, edited'))
    // newest path first, reverse flips
    const reversed = await a.client.call(`${S}.listRecords`, { space: a.space, repo: a.did, reverse: true })
    expect(reversed.data.records.map((r: { rkey: string }) => r.rkey)).toEqual(records.map((r) => r.rkey).reverse())
    const bare = await a.client.call(`${S}.listRecords`, { space: a.space, repo: a.did, excludeValues: true })
    expect(bare.data.records.every((r: { value?: unknown }) => r.value === undefined)).toBe(true)

    const hash = new LtHash()
    for (const r of records) hash.addRecord(r.collection, r.rkey, r.cid)
    const first = await a.client.call(`${S}.getLatestCommit`, { space: a.space, repo: a.did })
    const second = await a.client.call(`${S}.getLatestCommit`, { space: a.space, repo: a.did })
    const c1 = asCommit(first.data.commit)
    const c2 = asCommit(second.data.commit)
    await verifyCommit(c1, { space: a.space, author: a.did, didKey: await didKeyOf(a.did), hash: hash.digest() })
    // fresh ikm at every hand-out, the same digest
    expect(Buffer.from(c1.ikm).equals(Buffer.from(c2.ikm))).toBe(false)
    expect(Buffer.from(c1.hash).equals(Buffer.from(c2.hash))).toBe(true)
    expect(c1.rev).toBe(c2.rev)
    // on the wire: bytes as {"$bytes": base64 without padding}
    const raw = await xrpc(pds.url, `${S}.getLatestCommit`, {
      params: { space: a.space, repo: a.did },
      headers: { authorization: `Bearer ${a.accessJwt}` },
    })
    expect(raw.body.commit.ver).toBe(1)
    expect(raw.body.commit.hash.$bytes).toMatch(/^[A-Za-z0-9+/]{43}$/)
    await verifyCommit(commitFromJson(raw.body.commit), {
      space: a.space,
      author: a.did,
      didKey: await didKeyOf(a.did),
      hash: hash.digest(),
    })

    // the repo's own space only
    const spaces = await a.client.call(`${S}.listSpaces`, {})
    expect(spaces.data.spaces).toEqual([{ uri: a.space }])
    expect((await a.client.call(`${S}.listSpaces`, { type: 'com.example.other' })).data.spaces).toEqual([])
  })

  it('lists the spaces an account created as authority and those it holds a repo in, not deleted ones', async () => {
    const owner = await spaceAccount('sprls')
    const writer = await spaceAccount('sprlw')
    const create = (type: string, skey: string) =>
      owner.client.call(
        'com.atproto.simplespace.createSpace',
        {},
        {
          type,
          skey,
          policy: { $type: 'com.atproto.simplespace.defs#memberListPolicy' },
          appAccess: { $type: 'com.atproto.simplespace.defs#open' },
        },
      )
    // created, never written to: listed for its authority
    const quiet = (await create(TYPE, 'quiet')).data.uri
    const other = (await create('com.example.other', 'b')).data.uri
    const gone = (await create(TYPE, 'gone')).data.uri
    await owner.client.call('com.atproto.simplespace.deleteSpace', {}, { space: gone })
    // created and written to by its authority: listed once
    const busy = (await create(TYPE, 'busy')).data.uri
    await owner.client.call(`${S}.createRecord`, {}, { space: busy, repo: owner.did, collection: COL, record: post('mine') })
    // another's space the owner wrote into, and the owner's space another wrote into
    await owner.client.call(`${S}.createRecord`, {}, { space: writer.space, repo: owner.did, collection: COL, record: post('there') })
    await writer.client.call(`${S}.createRecord`, {}, { space: quiet, repo: writer.did, collection: COL, record: post('here') })

    const all = [busy, other, quiet, writer.space].sort()
    expect((await owner.client.call(`${S}.listSpaces`, {})).data).toEqual({ spaces: all.map((uri) => ({ uri })) })
    const pages: string[] = []
    let cursor: string | undefined
    for (let i = 0; i < 10; i++) {
      const page = (await owner.client.call(`${S}.listSpaces`, { limit: 2, cursor })).data
      pages.push(...page.spaces.map((s: { uri: string }) => s.uri))
      cursor = page.cursor
      if (!cursor) break
    }
    expect(pages).toEqual(all)
    expect((await owner.client.call(`${S}.listSpaces`, { type: 'com.example.other' })).data.spaces).toEqual([{ uri: other }])
    expect((await owner.client.call(`${S}.listSpaces`, { did: writer.did })).data.spaces).toEqual([{ uri: writer.space }])
    expect((await owner.client.call(`${S}.listSpaces`, { type: TYPE, did: owner.did })).data.spaces).toEqual(
      [busy, quiet].sort().map((uri) => ({ uri })),
    )
    // the writer holds a repo in the owner's space: listed for it too, but not the owner's others
    expect((await writer.client.call(`${S}.listSpaces`, {})).data.spaces).toEqual([quiet].map((uri) => ({ uri })))
  })

  it('serves the repo as a CAR a syncer verifies, with and without values', async () => {
    const a = await spaceAccount('sprcar')
    for (const t of ['a', 'bb', 'c']) {
      await a.client.call(`${S}.createRecord`, {}, { space: a.space, repo: a.did, collection: COL, rkey: t, record: post(t) })
    }
    const didKey = await didKeyOf(a.did)
    const full = await a.client.call(`${S}.getRepo`, { space: a.space, repo: a.did })
    const car = await verifySpaceCar(new Uint8Array(full.data as Uint8Array), { space: a.space, author: a.did, didKey })
    expect(car.entries.map((e) => e.rkey).sort()).toEqual(['a', 'bb', 'c'])
    expect(car.records).toHaveLength(3)
    const bare = await a.client.call(`${S}.getRepo`, { space: a.space, repo: a.did, excludeValues: true })
    const index = await verifySpaceCar(new Uint8Array(bare.data as Uint8Array), { space: a.space, author: a.did, didKey })
    expect(index.entries).toHaveLength(3)
    expect(index.records).toHaveLength(0)
    // a commit signed over one space does not verify as another's
    await expect(verifySpaceCar(new Uint8Array(full.data as Uint8Array), { space: `${a.space}x`, author: a.did, didKey })).rejects.toThrow()
  })

  it('pages the operation log: a full page has a cursor, the head page the commit; superseded values are left out', async () => {
    const a = await spaceAccount('sprops')
    const w = (action: string, rkey: string, value?: unknown) => ({ $type: `${S}.applyWrites#${action}`, collection: COL, rkey, value })
    await a.client.call(
      `${S}.applyWrites`,
      {},
      { space: a.space, repo: a.did, writes: [w('create', 'x', post('x1')), w('create', 'y', post('y1'))] },
    )
    await a.client.call(`${S}.applyWrites`, {}, { space: a.space, repo: a.did, writes: [w('update', 'x', post('x2'))] })
    await a.client.call(`${S}.applyWrites`, {}, { space: a.space, repo: a.did, writes: [w('delete', 'y')] })

    const page1 = await a.client.call(`${S}.listRepoOps`, { space: a.space, repo: a.did, limit: 2 })
    expect(page1.data.ops).toHaveLength(2)
    expect(page1.data.cursor).toBeDefined()
    expect(page1.data.commit).toBeUndefined()
    const [x1, y1] = page1.data.ops
    expect(x1.rev).toBe(y1.rev)
    expect(x1.prev).toBeNull()
    // x was updated since and y deleted: neither create carries its value any more
    expect(x1.value).toBeUndefined()
    expect(y1.value).toBeUndefined()
    const page2 = await a.client.call(`${S}.listRepoOps`, { space: a.space, repo: a.did, limit: 2, cursor: page1.data.cursor })
    expect(page2.data.ops).toHaveLength(2)
    const [x2, yDel] = page2.data.ops
    expect(x2.value).toEqual(post('x2'))
    expect(x2.prev).toBe(x1.cid)
    expect(yDel.cid).toBeNull()
    expect(yDel.prev).toBe(y1.cid)
    expect(x2.rev < yDel.rev).toBe(true)
    // the page ended the log without being full... or was full: either way the next one is the head
    const head = page2.data.cursor
      ? await a.client.call(`${S}.listRepoOps`, { space: a.space, repo: a.did, limit: 2, cursor: page2.data.cursor })
      : page2
    expect(head.data.cursor).toBeUndefined()
    const commit = asCommit(head.data.commit)
    expect(commit.rev).toBe(yDel.rev)
    await verifyCommit(commit, { space: a.space, author: a.did, didKey: await didKeyOf(a.did) })
    // since is exclusive; excludeValues drops every value
    const since = await a.client.call(`${S}.listRepoOps`, { space: a.space, repo: a.did, since: x1.rev })
    expect(since.data.ops.map((o: { rkey: string }) => o.rkey)).toEqual(['x', 'y'])
    const bare = await a.client.call(`${S}.listRepoOps`, { space: a.space, repo: a.did, excludeValues: true })
    expect(bare.data.ops.every((o: { value?: unknown }) => o.value === undefined)).toBe(true)
    expect(await failure(a.client.call(`${S}.listRepoOps`, { space: a.space, repo: a.did, cursor: 'nonsense' }))).toEqual({
      status: 400,
      error: 'MalformedCursor',
    })
  })

  it('applies a batch atomically: one failing write leaves nothing written', async () => {
    const a = await spaceAccount('spratom')
    const w = (action: string, rkey: string, value?: unknown) => ({ $type: `${S}.applyWrites#${action}`, collection: COL, rkey, value })
    const before = await failure(a.client.call(`${S}.getLatestCommit`, { space: a.space, repo: a.did }))
    expect(before).toEqual({ status: 400, error: 'RepoNotFound' })
    // the second create of the same path, in the same batch
    expect(
      await failure(
        a.client.call(
          `${S}.applyWrites`,
          {},
          { space: a.space, repo: a.did, writes: [w('create', 'k', post('1')), w('create', 'k', post('2'))] },
        ),
      ),
    ).toEqual({ status: 400, error: 'RecordAlreadyExists' })
    expect(
      await failure(
        a.client.call(
          `${S}.applyWrites`,
          {},
          { space: a.space, repo: a.did, writes: [w('create', 'k', post('1')), w('update', 'gone', post('2'))] },
        ),
      ),
    ).toEqual({ status: 400, error: 'RecordNotFound' })
    expect(
      await failure(
        a.client.call(`${S}.applyWrites`, {}, { space: a.space, repo: a.did, writes: [w('create', 'k', post('1')), w('delete', 'gone')] }),
      ),
    ).toEqual({ status: 400, error: 'RecordNotFound' })
    expect((await a.client.call(`${S}.listRecords`, { space: a.space, repo: a.did })).data.records).toEqual([])
    expect(await failure(a.client.call(`${S}.getLatestCommit`, { space: a.space, repo: a.did }))).toEqual({
      status: 400,
      error: 'RepoNotFound',
    })
    // an empty batch changes nothing; a good one commits every write under one rev
    expect((await a.client.call(`${S}.applyWrites`, {}, { space: a.space, repo: a.did, writes: [] })).data.results).toEqual([])
    const ok = await a.client.call(
      `${S}.applyWrites`,
      {},
      { space: a.space, repo: a.did, writes: [w('create', 'k', post('1')), w('create', 'l', post('2'))] },
    )
    expect(ok.data.results.map((r: { $type: string }) => r.$type)).toEqual([
      `${S}.applyWrites#createResult`,
      `${S}.applyWrites#createResult`,
    ])
    const ops = await a.client.call(`${S}.listRepoOps`, { space: a.space, repo: a.did })
    expect(new Set(ops.data.ops.map((o: { rev: string }) => o.rev)).size).toBe(1)
  })

  it('answers the named errors and writes nothing on bad input', async () => {
    const a = await spaceAccount('sprerr')
    const b = await spaceAccount('sprerr')
    const base = { space: a.space, repo: a.did, collection: COL }
    await a.client.call(`${S}.createRecord`, {}, { ...base, rkey: 'r', record: post('r') })
    expect(await failure(a.client.call(`${S}.createRecord`, {}, { ...base, rkey: 'r', record: post('again') }))).toEqual({
      status: 400,
      error: 'RecordAlreadyExists',
    })
    // another account's repo: 403 for a write, absent for a read
    expect(await failure(b.client.call(`${S}.createRecord`, {}, { ...base, record: post('x') }))).toEqual({
      status: 403,
      error: 'Forbidden',
    })
    expect(await failure(b.client.call(`${S}.getRecord`, { ...base, rkey: 'r' }))).toEqual({ status: 400, error: 'RepoNotFound' })
    expect(await failure(b.client.call(`${S}.getLatestCommit`, { space: a.space, repo: a.did }))).toEqual({
      status: 400,
      error: 'RepoNotFound',
    })
    expect(await failure(a.client.call(`${S}.getRecord`, { ...base, rkey: 'absent' }))).toEqual({ status: 400, error: 'RecordNotFound' })
    expect(
      await failure(
        a.client.call(`${S}.getBlob`, { space: a.space, repo: a.did, cid: 'bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy' }),
      ),
    ).toEqual({
      status: 400,
      error: 'BlobNotFound',
    })
    // a never-written repo lists nothing and has no commit or CAR
    const other = `at://${a.did}/space/${TYPE}/other`
    expect((await a.client.call(`${S}.listRecords`, { space: other, repo: a.did })).data.records).toEqual([])
    expect(await failure(a.client.call(`${S}.getRepo`, { space: other, repo: a.did }))).toEqual({ status: 400, error: 'RepoNotFound' })
    expect(await failure(a.client.call(`${S}.listRepoOps`, { space: other, repo: a.did }))).toEqual({ status: 400, error: 'RepoNotFound' })
    // deleting what is absent succeeds without a new rev
    const rev = asCommit((await a.client.call(`${S}.getLatestCommit`, { space: a.space, repo: a.did })).data.commit).rev
    await a.client.call(`${S}.deleteRecord`, {}, { ...base, rkey: 'absent' })
    expect(asCommit((await a.client.call(`${S}.getLatestCommit`, { space: a.space, repo: a.did })).data.commit).rev).toBe(rev)

    // malformed input, sent raw as a client that does not check would
    const raw = (nsid: string, body: unknown) => xrpc(pds.url, nsid, { body, headers: { authorization: `Bearer ${a.accessJwt}` } })
    for (const space of [
      `at://${a.did}/space/${TYPE}/main/`,
      `at://${a.did}/space/${TYPE}/..`,
      `at://alice.test/space/${TYPE}/main`,
      `at://${a.did}/spaces/${TYPE}/main`,
    ]) {
      const res = await raw(`${S}.createRecord`, { space, repo: a.did, collection: COL, record: post('bad') })
      expect([res.status, res.body?.error], space).toEqual([400, 'InvalidRequest'])
    }
    const wrongType = await raw(`${S}.createRecord`, { ...base, record: { $type: 'com.example.other', text: 'x' } })
    expect([wrongType.status, wrongType.body?.error]).toEqual([400, 'InvalidRequest'])
    const noType = await raw(`${S}.createRecord`, { ...base, record: { text: 'x' } })
    expect([noType.status, noType.body?.error]).toEqual([400, 'InvalidRequest'])
    const unknownSchema = await raw(`${S}.createRecord`, { ...base, validate: true, record: post('x') })
    expect([unknownSchema.status, unknownSchema.body?.error]).toEqual([400, 'InvalidRequest'])
    const badBlob = await raw(`${S}.createRecord`, {
      ...base,
      record: post('x', {
        image: {
          $type: 'blob',
          ref: { $link: 'bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy' },
          mimeType: 'image/png',
          size: 3,
        },
      }),
    })
    expect([badBlob.status, badBlob.body?.error]).toEqual([400, 'InvalidRequest'])
    const tooMany = await raw(`${S}.applyWrites`, {
      space: a.space,
      repo: a.did,
      writes: Array.from({ length: 201 }, (_, i) => ({
        $type: `${S}.applyWrites#create`,
        collection: COL,
        rkey: `k${i}`,
        value: post('x'),
      })),
    })
    expect([tooMany.status, tooMany.body?.error]).toEqual([400, 'InvalidRequest'])
    expect((await a.client.call(`${S}.listRecords`, { space: a.space, repo: a.did })).data.records).toHaveLength(1)
  })

  it('serves a blob only through the space a record of it references', async () => {
    const a = await spaceAccount('sprblob')
    const bytes = new TextEncoder().encode('space blob bytes')
    const up = await xrpc(pds.url, 'com.atproto.repo.uploadBlob', {
      body: Buffer.from(bytes).toString('latin1'),
      headers: { authorization: `Bearer ${a.accessJwt}`, 'content-type': 'text/plain' },
    })
    expect(up.status, up.text).toBe(200)
    const blob = up.body.blob
    await a.client.call(
      `${S}.createRecord`,
      {},
      { space: a.space, repo: a.did, collection: COL, rkey: 'b', record: post('with blob', { file: blob }) },
    )
    const listed = await a.client.call(`${S}.listBlobs`, { space: a.space, repo: a.did })
    expect(listed.data.cids).toEqual([blob.ref.$link])
    const res = await fetch(`${pds.url}/xrpc/${S}.getBlob?space=${encodeURIComponent(a.space)}&repo=${a.did}&cid=${blob.ref.$link}`, {
      headers: { authorization: `Bearer ${a.accessJwt}` },
    })
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toContain('text/plain')
    expect(res.headers.get('x-content-type-options')).toBe('nosniff')
    expect(res.headers.get('content-disposition')).toContain('attachment')
    expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.from(bytes))).toBe(true)
    const other = `at://${a.did}/space/${TYPE}/elsewhere`
    expect(await failure(a.client.call(`${S}.getBlob`, { space: other, repo: a.did, cid: blob.ref.$link }))).toEqual({
      status: 400,
      error: 'BlobNotFound',
    })
  })

  it('refuses writes of a deactivated or taken-down account and answers others with the repo status', async () => {
    const a = await spaceAccount('sprlife')
    await a.client.call(`${S}.createRecord`, {}, { space: a.space, repo: a.did, collection: COL, rkey: 'r', record: post('r') })
    const off = await xrpc(pds.url, 'com.atproto.server.deactivateAccount', {
      body: {},
      headers: { authorization: `Bearer ${a.accessJwt}` },
    })
    expect(off.status, off.text).toBe(200)
    const write = await failure(a.client.call(`${S}.createRecord`, {}, { space: a.space, repo: a.did, collection: COL, record: post('x') }))
    expect(write.status).toBeGreaterThanOrEqual(400)
    expect(write.status).toBeLessThan(500)
    // its own reads still work
    expect((await a.client.call(`${S}.getRecord`, { space: a.space, repo: a.did, collection: COL, rkey: 'r' })).data.value).toEqual(
      post('r'),
    )
  })

  it('deletes the permissioned repos of a deleted account', async () => {
    const a = await spaceAccount('sprdel')
    await a.client.call(`${S}.createRecord`, {}, { space: a.space, repo: a.did, collection: COL, rkey: 'r', record: post('r') })
    const del = await xrpc(pds.url, 'com.atproto.admin.deleteAccount', {
      body: { did: a.did },
      headers: { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` },
    })
    expect(del.status, del.text).toBe(200)
    const left = await pds.services.db.selectFrom('space_record').select('rkey').where('did', '=', a.did).execute()
    expect(left).toEqual([])
  })

  it('lets an OAuth app with a space: permission write and read its own repo, and refuses what was not granted with 403', async () => {
    const a = await newAccount(pds.url, 'sproauth')
    const space = `at://${a.did}/space/${TYPE}/main`
    const scope = `atproto space:${TYPE}?collection=${COL}&action=read_self&action=create`
    const session = await signInOfficial(officialClient(pds.url, plcUrl, scope), pds.url, a.handle, scope)
    // the token carries the authority as the user's DID
    expect((await session.getTokenInfo(false)).scope).toContain(`space:${TYPE}?authority=${a.did}`)
    const app = new XrpcClient(session, LEX)

    await app.call(`${S}.createRecord`, {}, { space, repo: a.did, collection: COL, rkey: 'mine', record: post('from the app') })
    expect((await app.call(`${S}.getRecord`, { space, repo: a.did, collection: COL, rkey: 'mine' })).data.value).toEqual(
      post('from the app'),
    )
    // not granted: deleting, replacing, another collection, another authority's space, listing all spaces
    const refusedWith = { status: 403, error: 'InsufficientScope' }
    expect(await failure(app.call(`${S}.deleteRecord`, {}, { space, repo: a.did, collection: COL, rkey: 'mine' }))).toEqual(refusedWith)
    expect(
      await failure(app.call(`${S}.putRecord`, {}, { space, repo: a.did, collection: COL, rkey: 'mine', record: post('edit') })),
    ).toEqual(refusedWith)
    expect(await failure(app.call(`${S}.createRecord`, {}, { space, repo: a.did, collection: LIKE, record: { $type: LIKE } }))).toEqual(
      refusedWith,
    )
    const elsewhere = `at://did:plc:${'e'.repeat(24)}/space/${TYPE}/main`
    expect(await failure(app.call(`${S}.createRecord`, {}, { space: elsewhere, repo: a.did, collection: COL, record: post('x') }))).toEqual(
      refusedWith,
    )
    expect(await failure(app.call(`${S}.listSpaces`, {}))).toEqual(refusedWith)
    expect((await app.call(`${S}.listSpaces`, { type: TYPE, did: a.did })).data.spaces).toEqual([{ uri: space }])
    // nothing of the refused writes happened
    const records = (await app.call(`${S}.listRecords`, { space, repo: a.did })).data.records
    expect(records.map((r: { rkey: string }) => r.rkey)).toEqual(['mine'])
    expect(records[0].value).toEqual(post('from the app'))
  })
})

describe('Spaces switched off', () => {
  let off: TestPds
  beforeAll(async () => {
    off = await startTestPds({ PDS_SPACES_ENABLED: 'false' })
  })
  afterAll(async () => {
    await off?.stop()
  })

  it('answers every space method with 501', async () => {
    const a = await newAccount(off.url, 'sproff')
    const client = new XrpcClient({ service: off.url, headers: { authorization: `Bearer ${a.accessJwt}` } }, LEX)
    const space = `at://${a.did}/space/${TYPE}/main`
    expect(await failure(client.call(`${S}.createRecord`, {}, { space, repo: a.did, collection: COL, record: post('x') }))).toEqual({
      status: 501,
      error: 'MethodNotImplemented',
    })
    expect(await failure(client.call(`${S}.listSpaces`, {}))).toEqual({ status: 501, error: 'MethodNotImplemented' })
    const simple = await xrpc(off.url, 'com.atproto.simplespace.getSpace', {
      params: { space },
      headers: { authorization: `Bearer ${a.accessJwt}` },
    })
    expect(simple.status).toBe(501)
  })
})
