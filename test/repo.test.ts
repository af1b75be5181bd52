import { readCar, readCarWithRoot, verifyRepoCar, verifyRecords } from '@atproto/repo'
import * as dagCbor from '@ipld/dag-cbor'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describe, newAgent as createAgent, startTestPds, xrpc, type TestPds } from './harness.js'

let pds: TestPds
const newAgent = () => createAgent(pds.url, 'repo')

async function signingKey(did: string) {
  const doc = (await xrpc(pds.url, 'com.atproto.identity.resolveDid', { params: { did } })).body.didDoc
  return 'did:key:' + doc.verificationMethod[0].publicKeyMultibase
}

async function exportRepo(did: string) {
  const res = await fetch(`${pds.url}/xrpc/com.atproto.sync.getRepo?did=${did}`)
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toContain('application/vnd.ipld.car')
  return new Uint8Array(await res.arrayBuffer())
}

const post = (text: string) => ({ $type: 'app.bsky.feed.post', text, createdAt: new Date().toISOString() })

describe('repositories', () => {
  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(() => pds?.stop())

  it('creates an empty signed repository with the account', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const latest = await agent.com.atproto.sync.getLatestCommit({ did })
    expect(latest.data.rev).toMatch(/^[a-z2-7]{13}$/)
    const car = await exportRepo(did)
    const verified = await verifyRepoCar(car, did, await signingKey(did))
    expect(verified.creates).toEqual([])
    expect(verified.commit.rev).toBe(latest.data.rev)
    const { root, blocks } = await readCarWithRoot(car)
    const commit = dagCbor.decode<any>(blocks.get(root)!)
    expect(commit).toMatchObject({ did, version: 3, rev: latest.data.rev })
  })

  it('creates, reads, lists, updates and deletes records through AtpAgent', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const created = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: post('hello') })
    expect(created.data.uri).toMatch(new RegExp(`^at://${did}/app.bsky.feed.post/[a-z2-7]{13}$`))
    expect(created.data.validationStatus).toBe('valid')
    const rkey = created.data.uri.split('/').pop()!
    const got = await agent.com.atproto.repo.getRecord({ repo: did, collection: 'app.bsky.feed.post', rkey })
    expect(got.data.cid).toBe(created.data.cid)
    expect((got.data.value as any).text).toBe('hello')

    const put = await agent.com.atproto.repo.putRecord({ repo: did, collection: 'app.bsky.feed.post', rkey, record: post('edited') })
    expect(put.data.cid).not.toBe(created.data.cid)
    const again = await agent.com.atproto.repo.getRecord({ repo: agent.session!.handle, collection: 'app.bsky.feed.post', rkey })
    expect((again.data.value as any).text).toBe('edited')

    await agent.com.atproto.repo.putRecord({
      repo: did,
      collection: 'app.bsky.actor.profile',
      rkey: 'self',
      record: { $type: 'app.bsky.actor.profile', displayName: 'Me' },
    })
    const desc = await agent.com.atproto.repo.describeRepo({ repo: did })
    expect(desc.data.collections).toEqual(['app.bsky.actor.profile', 'app.bsky.feed.post'])
    expect(desc.data.handleIsCorrect).toBe(true)

    const del = await agent.com.atproto.repo.deleteRecord({ repo: did, collection: 'app.bsky.feed.post', rkey })
    expect(del.data.commit?.rev).toBeTruthy()
    await expect(agent.com.atproto.repo.getRecord({ repo: did, collection: 'app.bsky.feed.post', rkey })).rejects.toMatchObject({
      error: 'RecordNotFound',
    })
    const list = await agent.com.atproto.repo.listRecords({ repo: did, collection: 'app.bsky.feed.post' })
    expect(list.data.records).toEqual([])
    // unknown records and repositories are 404
    const gone = await xrpc(pds.url, 'com.atproto.repo.getRecord', { params: { repo: did, collection: 'app.bsky.feed.post', rkey } })
    expect([gone.status, gone.body.error]).toEqual([404, 'RecordNotFound'])
    for (const nsid of ['com.atproto.repo.getRecord', 'com.atproto.repo.listRecords', 'com.atproto.repo.describeRepo']) {
      const params = { repo: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa', collection: 'app.bsky.feed.post', rkey }
      const res = await xrpc(pds.url, nsid, { params })
      expect([nsid, res.status, res.body.error]).toEqual([nsid, 404, 'RepoNotFound'])
    }
  })

  it('pages listRecords newest first, and oldest first with reverse', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const rkeys: string[] = []
    for (let i = 0; i < 7; i++) {
      const r = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: post(`p${i}`) })
      rkeys.push(r.data.uri.split('/').pop()!)
    }
    const seen: string[] = []
    let cursor: string | undefined
    for (let i = 0; i < 10; i++) {
      const page = await agent.com.atproto.repo.listRecords({ repo: did, collection: 'app.bsky.feed.post', limit: 3, cursor })
      seen.push(...page.data.records.map((r) => r.uri.split('/').pop()!))
      cursor = page.data.cursor
      if (!cursor) break
    }
    expect(seen).toEqual([...rkeys].reverse())
    const rev = await agent.com.atproto.repo.listRecords({ repo: did, collection: 'app.bsky.feed.post', limit: 100, reverse: true })
    expect(rev.data.records.map((r) => r.uri.split('/').pop())).toEqual(rkeys)
  })

  it('refuses more than 200 writes in one applyWrites with InvalidRequest, writing nothing', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const create = (i: number) => ({
      $type: 'com.atproto.repo.applyWrites#create' as const,
      collection: 'app.bsky.feed.post',
      rkey: `k${i}`,
      value: post(`${i}`),
    })
    const writes = Array.from({ length: 201 }, (_, i) => create(i))
    await expect(agent.com.atproto.repo.applyWrites({ repo: did, writes })).rejects.toMatchObject({
      status: 400,
      error: 'InvalidRequest',
      message: expect.stringMatching(/200/),
    })
    const list = await agent.com.atproto.repo.listRecords({ repo: did, collection: 'app.bsky.feed.post' })
    expect(list.data.records).toEqual([])
    const res = await agent.com.atproto.repo.applyWrites({ repo: did, writes: writes.slice(0, 200) })
    expect(res.data.results).toHaveLength(200)
  })

  it('applies writes all together or not at all', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const res = await agent.com.atproto.repo.applyWrites({
      repo: did,
      writes: [
        { $type: 'com.atproto.repo.applyWrites#create', collection: 'app.bsky.feed.post', rkey: 'aaa', value: post('a') },
        { $type: 'com.atproto.repo.applyWrites#create', collection: 'app.bsky.feed.post', rkey: 'bbb', value: post('b') },
      ],
    })
    expect(res.data.results?.map((r) => r.$type)).toEqual([
      'com.atproto.repo.applyWrites#createResult',
      'com.atproto.repo.applyWrites#createResult',
    ])
    const before = await agent.com.atproto.sync.getLatestCommit({ did })
    // the second write is invalid: the first must not land either
    await expect(
      agent.com.atproto.repo.applyWrites({
        repo: did,
        writes: [
          { $type: 'com.atproto.repo.applyWrites#delete', collection: 'app.bsky.feed.post', rkey: 'aaa' },
          {
            $type: 'com.atproto.repo.applyWrites#create',
            collection: 'app.bsky.feed.post',
            rkey: 'ccc',
            value: { $type: 'app.bsky.feed.post', text: 5 },
          },
        ],
      }),
    ).rejects.toMatchObject({ status: 400 })
    const after = await agent.com.atproto.sync.getLatestCommit({ did })
    expect(after.data).toEqual(before.data)
    const list = await agent.com.atproto.repo.listRecords({ repo: did, collection: 'app.bsky.feed.post' })
    expect(list.data.records.map((r) => r.uri.split('/').pop())).toEqual(['bbb', 'aaa'])

    const mixed = await agent.com.atproto.repo.applyWrites({
      repo: did,
      writes: [
        { $type: 'com.atproto.repo.applyWrites#update', collection: 'app.bsky.feed.post', rkey: 'aaa', value: post('a2') },
        { $type: 'com.atproto.repo.applyWrites#delete', collection: 'app.bsky.feed.post', rkey: 'bbb' },
      ],
    })
    expect(mixed.data.results?.map((r) => r.$type)).toEqual([
      'com.atproto.repo.applyWrites#updateResult',
      'com.atproto.repo.applyWrites#deleteResult',
    ])
  })

  it('refuses stale swapCommit and swapRecord with InvalidSwap', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const first = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'sw', record: post('1') })
    const stale = first.data.commit!.cid
    await agent.com.atproto.repo.putRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'sw', record: post('2') })
    await expect(
      agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: post('x'), swapCommit: stale }),
    ).rejects.toMatchObject({ error: 'InvalidSwap', status: 400 })
    await expect(
      agent.com.atproto.repo.putRecord({
        repo: did,
        collection: 'app.bsky.feed.post',
        rkey: 'sw',
        record: post('3'),
        swapRecord: first.data.cid,
      }),
    ).rejects.toMatchObject({ error: 'InvalidSwap' })
    await expect(
      agent.com.atproto.repo.putRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'sw', record: post('3'), swapRecord: null }),
    ).rejects.toMatchObject({ error: 'InvalidSwap' })
    await expect(
      agent.com.atproto.repo.deleteRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'sw', swapRecord: first.data.cid }),
    ).rejects.toMatchObject({ error: 'InvalidSwap' })
    const cur = await agent.com.atproto.repo.getRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'sw' })
    expect((cur.data.value as any).text).toBe('2')
    const ok = await agent.com.atproto.repo.putRecord({
      repo: did,
      collection: 'app.bsky.feed.post',
      rkey: 'sw',
      record: post('3'),
      swapRecord: cur.data.cid,
    })
    expect(ok.data.cid).toBeTruthy()
  })

  it('validates known record types and accepts unknown ones as unknown', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const bad = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
      headers: { authorization: `Bearer ${agent.session!.accessJwt}` },
      body: { repo: did, collection: 'app.bsky.feed.post', record: { $type: 'app.bsky.feed.post', text: 42 } },
    })
    expect(bad.status).toBe(400)
    expect(bad.body.error).toBe('InvalidRequest')
    const unknown = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'com.example.thing', record: { anything: 'goes' } })
    expect(unknown.data.validationStatus).toBe('unknown')
    await expect(
      agent.com.atproto.repo.createRecord({ repo: did, collection: 'com.example.thing', record: { anything: 'goes' }, validate: true }),
    ).rejects.toMatchObject({ status: 400 })
    const skipped = await agent.com.atproto.repo.createRecord({
      repo: did,
      collection: 'app.bsky.feed.post',
      record: { $type: 'app.bsky.feed.post', text: 42 },
      validate: false,
    })
    expect(skipped.data.validationStatus).toBeUndefined()
    for (const [collection, rkey] of [
      ['not an nsid', 'x'],
      ['com.example.thing', 'bad/key'],
      ['com.example.thing', '..'],
    ]) {
      const r = await xrpc(pds.url, 'com.atproto.repo.putRecord', {
        headers: { authorization: `Bearer ${agent.session!.accessJwt}` },
        body: { repo: did, collection, rkey, record: { a: 1 } },
      })
      expect(r.status, `${collection} ${rkey}`).toBe(400)
    }
    const mismatched = await xrpc(pds.url, 'com.atproto.repo.createRecord', {
      headers: { authorization: `Bearer ${agent.session!.accessJwt}` },
      body: { repo: did, collection: 'com.example.thing', record: { $type: 'com.example.other' } },
    })
    expect(mismatched.status).toBe(400)
  })

  it('returns bytes and links in a record value in their JSON forms, as written', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const value = {
      $type: 'com.example.shapes',
      bytes: { $bytes: 'aGVsbG8gd29ybGQ' },
      link: { $link: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm' },
      nested: [{ n: 1, ok: true, none: null }],
    }
    const created = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'com.example.shapes', record: value })
    const rkey = created.data.uri.split('/').pop()!
    const res = await fetch(`${pds.url}/xrpc/com.atproto.repo.getRecord?repo=${did}&collection=com.example.shapes&rkey=${rkey}`)
    expect(((await res.json()) as any).value).toEqual(value)
    const list = await fetch(`${pds.url}/xrpc/com.atproto.repo.listRecords?repo=${did}&collection=com.example.shapes`)
    expect(((await list.json()) as any).records.map((r: { value: unknown }) => r.value)).toEqual([value])
  })

  it('answers getRecord and listRecords from the index row as it would from the blocks, byte for byte', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const records = [
      post('plain'),
      post('héllo "quoted" \\ ☃ 😀\n'),
      {
        $type: 'com.example.shapes',
        bytes: { $bytes: 'AQID' },
        link: { $link: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm' },
      },
      { $type: 'com.example.shapes', '10': 'a key a JS object reorders', b: [1, -2, null, true, { z: 'last' }] },
    ]
    for (const [i, record] of records.entries()) {
      const collection = record.$type
      await agent.com.atproto.repo.putRecord({ repo: did, collection, rkey: `r${i}`, record })
    }
    const bodies = async () => {
      const out: string[] = []
      for (const collection of ['app.bsky.feed.post', 'com.example.shapes']) {
        out.push(await (await fetch(`${pds.url}/xrpc/com.atproto.repo.listRecords?repo=${did}&collection=${collection}`)).text())
      }
      for (const [i, record] of records.entries()) {
        const q = `repo=${did}&collection=${record.$type}&rkey=r${i}`
        out.push(await (await fetch(`${pds.url}/xrpc/com.atproto.repo.getRecord?${q}`)).text())
      }
      return out
    }
    const db = pds.services.db
    const kept = await db.selectFrom('record').select('value_json').where('did', '=', did).execute()
    expect(kept.map((r) => r.value_json).filter((j) => typeof j === 'string')).toHaveLength(records.length)
    const fromRows = await bodies()
    expect(fromRows.slice(2).map((b) => JSON.parse(b).value)).toEqual(records)
    // rows written before the value was kept on them are read from their blocks
    await db.updateTable('record').set({ value_json: null }).where('did', '=', did).execute()
    expect(await bodies()).toEqual(fromRows)
  })

  it('serves the new value after putRecord and nothing after deleteRecord, in getRecord and listRecords', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const read = async () => {
      const one = await xrpc(pds.url, 'com.atproto.repo.getRecord', { params: { repo: did, collection: 'app.bsky.feed.post', rkey: 'k1' } })
      const list = await xrpc(pds.url, 'com.atproto.repo.listRecords', { params: { repo: did, collection: 'app.bsky.feed.post' } })
      return { one: one.status === 200 ? one.body.value.text : one.body.error, list: list.body.records.map((r: any) => r.value.text) }
    }
    await agent.com.atproto.repo.putRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'k1', record: post('first') })
    expect(await read()).toEqual({ one: 'first', list: ['first'] })
    await agent.com.atproto.repo.putRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'k1', record: post('second') })
    expect(await read()).toEqual({ one: 'second', list: ['second'] })
    await agent.com.atproto.repo.deleteRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'k1' })
    expect(await read()).toEqual({ one: 'RecordNotFound', list: [] })
  })

  it('pages listRecords with a cursor in both directions, every record once', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const rkeys = ['a1', 'a2', 'a3', 'a4', 'a5']
    for (const rkey of rkeys)
      await agent.com.atproto.repo.putRecord({ repo: did, collection: 'app.bsky.feed.post', rkey, record: post(rkey) })
    for (const reverse of [false, true]) {
      const seen: string[] = []
      let cursor: string | undefined
      do {
        const params: Record<string, string> = {
          repo: did,
          collection: 'app.bsky.feed.post',
          limit: '2',
          ...(reverse ? { reverse: 'true' } : {}),
        }
        if (cursor) params.cursor = cursor
        const page = await xrpc(pds.url, 'com.atproto.repo.listRecords', { params })
        expect(page.status).toBe(200)
        seen.push(...page.body.records.map((r: any) => r.value.text))
        cursor = page.body.cursor
      } while (cursor)
      expect(seen).toEqual(reverse ? rkeys : [...rkeys].reverse())
    }
  })

  it("refuses writes to another account's repository", async () => {
    const a = await newAgent()
    const b = await newAgent()
    await expect(
      a.com.atproto.repo.createRecord({ repo: b.session!.did, collection: 'app.bsky.feed.post', record: post('x') }),
    ).rejects.toMatchObject({ status: 401 })
  })

  it('exports a repository that @atproto/repo verifies, every commit signed by the DID document key', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const uris: string[] = []
    for (let i = 0; i < 20; i++) {
      const r = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', record: post(`n${i}`) })
      uris.push(r.data.uri)
    }
    await agent.com.atproto.repo.deleteRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: uris[3].split('/').pop()! })
    const car = await exportRepo(did)
    const verified = await verifyRepoCar(car, did, await signingKey(did))
    const paths = verified.creates.map((c) => `at://${did}/${c.collection}/${c.rkey}`).sort()
    expect(paths).toEqual(uris.filter((_, i) => i !== 3).sort())
    const latest = await agent.com.atproto.sync.getLatestCommit({ did })
    expect(verified.commit.rev).toBe(latest.data.rev)
    // a different key does not verify
    const { Secp256k1Keypair } = await import('@atproto/crypto')
    await expect(verifyRepoCar(car, did, (await Secp256k1Keypair.create()).did())).rejects.toThrow()
  })

  it('keeps a value several records share until the last of them is deleted or changed', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const same = { $type: 'app.bsky.feed.post', text: 'same words', createdAt: '2026-11-27T01:00:00.000Z' }
    const create = (rkey: string) => ({
      $type: 'com.atproto.repo.applyWrites#create' as const,
      collection: 'app.bsky.feed.post',
      rkey,
      value: same,
    })
    // two in one commit, a third in a later one
    await agent.com.atproto.repo.applyWrites({ repo: did, writes: [create('a'), create('b')] })
    const c = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'c', record: same })
    const value = c.data.cid
    const blockOfValue = async () => (await xrpc(pds.url, 'com.atproto.sync.getBlocks', { params: { did, cids: value } })).status
    // every block the repository counts is in its export, and the export verifies with these records
    const check = async (rkeys: string[]) => {
      const car = await exportRepo(did)
      const verified = await verifyRepoCar(car, did, await signingKey(did))
      expect(verified.creates.map((r) => r.rkey).sort()).toEqual(rkeys)
      const { blocks } = await readCarWithRoot(car)
      const status = await agent.com.atproto.server.checkAccountStatus()
      expect(status.data.repoBlocks).toBe(blocks.size)
    }
    await check(['a', 'b', 'c'])

    await agent.com.atproto.repo.deleteRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'a' })
    await check(['b', 'c'])
    expect(await blockOfValue()).toBe(200)
    await agent.com.atproto.repo.putRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'b', record: post('other words') })
    await check(['b', 'c'])
    const proof = await fetch(`${pds.url}/xrpc/com.atproto.sync.getRecord?did=${did}&collection=app.bsky.feed.post&rkey=c`)
    const claims = await verifyRecords(new Uint8Array(await proof.arrayBuffer()), did, await signingKey(did))
    expect(claims[0].record?.text).toBe('same words')

    await agent.com.atproto.repo.deleteRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'c' })
    await check(['b'])
    expect(await blockOfValue()).toBe(400)
    // the value again: stored anew
    await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'd', record: same })
    await check(['b', 'd'])
    expect(await blockOfValue()).toBe(200)
  })

  it('exports only the blocks written after `since`', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    for (let i = 0; i < 5; i++) await agent.com.atproto.repo.createRecord({ repo: did, collection: 'com.example.s', record: { i } })
    const mid = await agent.com.atproto.sync.getLatestCommit({ did })
    const last = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'com.example.s', rkey: 'last', record: { i: 99 } })
    const full = await readCarWithRoot(await exportRepo(did))
    const res = await fetch(`${pds.url}/xrpc/com.atproto.sync.getRepo?did=${did}&since=${mid.data.rev}`)
    const diff = await readCarWithRoot(new Uint8Array(await res.arrayBuffer()))
    expect(diff.root.toString()).toBe(last.data.commit!.cid)
    expect(diff.blocks.size).toBeLessThan(full.blocks.size)
    expect(diff.blocks.has(diff.root)).toBe(true)
  })

  it('serves a record proof and blocks', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const r = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'proof', record: post('p') })
    const res = await fetch(`${pds.url}/xrpc/com.atproto.sync.getRecord?did=${did}&collection=app.bsky.feed.post&rkey=proof`)
    expect(res.status).toBe(200)
    const claims = await verifyRecords(new Uint8Array(await res.arrayBuffer()), did, await signingKey(did))
    expect(claims).toHaveLength(1)
    expect(claims[0].record?.text).toBe('p')
    const blocks = await fetch(`${pds.url}/xrpc/com.atproto.sync.getBlocks?did=${did}&cids=${r.data.cid}`)
    expect(blocks.status).toBe(200)
    const got = await readCar(new Uint8Array(await blocks.arrayBuffer()))
    expect(got.blocks.cids().map(String)).toEqual([r.data.cid])
    const missing = await xrpc(pds.url, 'com.atproto.sync.getBlocks', {
      params: { did, cids: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm' },
    })
    expect(missing.status).toBe(400)
  })

  it('answers getRepoStatus, listRepos and the sync status errors', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const status = await agent.com.atproto.sync.getRepoStatus({ did })
    expect(status.data).toMatchObject({ did, active: true })
    expect(status.data.rev).toBeTruthy()
    const repos = await agent.com.atproto.sync.listRepos({ limit: 1000 })
    expect(repos.data.repos.find((r) => r.did === did)).toMatchObject({ active: true })

    const unknown = await xrpc(pds.url, 'com.atproto.sync.getRepo', { params: { did: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa' } })
    expect(unknown.status).toBe(404)
    expect(unknown.body.error).toBe('RepoNotFound')
    await pds.services.db.updateTable('account').set({ status: 'deactivated' }).where('did', '=', did).execute()
    const deact = await xrpc(pds.url, 'com.atproto.sync.getRepo', { params: { did } })
    expect(deact.body.error).toBe('RepoDeactivated')
    expect((await xrpc(pds.url, 'com.atproto.sync.getRepoStatus', { params: { did } })).body).toMatchObject({
      active: false,
      status: 'deactivated',
    })
    await pds.services.db.updateTable('account').set({ status: 'takendown' }).where('did', '=', did).execute()
    expect((await xrpc(pds.url, 'com.atproto.sync.getLatestCommit', { params: { did } })).body.error).toBe('RepoTakendown')
    await pds.services.db.updateTable('account').set({ status: 'deleted' }).where('did', '=', did).execute()
    expect((await xrpc(pds.url, 'com.atproto.sync.getRepo', { params: { did } })).body.error).toBe('RepoNotFound')
  })

  it('appends a #commit event per write with the official body', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const before = await agent.com.atproto.sync.getLatestCommit({ did })
    const r = await agent.com.atproto.repo.createRecord({ repo: did, collection: 'app.bsky.feed.post', rkey: 'ev', record: post('e') })
    const rows = await pds.services.db.selectFrom('event').selectAll().where('did', '=', did).orderBy('seq').execute()
    expect(rows.map((e) => e.type)).toEqual(['identity', 'account', 'commit', 'sync', 'commit'])
    const body = dagCbor.decode<any>(rows[4].payload)
    expect(body.repo).toBe(did)
    expect(body.rev).toBe(r.data.commit!.rev)
    expect(body.since).toBe(before.data.rev)
    expect(body.commit.toString()).toBe(r.data.commit!.cid)
    expect(body.ops).toHaveLength(1)
    expect(body.ops[0].action).toBe('create')
    expect(body.ops[0].path).toBe('app.bsky.feed.post/ev')
    expect(body.ops[0].cid.toString()).toBe(r.data.cid)
    expect(body.prevData).toBeTruthy()
    expect(body).toMatchObject({ blobs: [], rebase: false, tooBig: false })
    expect(body.seq).toBeUndefined()
    const { root } = await readCarWithRoot(body.blocks)
    expect(root.toString()).toBe(r.data.commit!.cid)
  })
})

describe('write serialization and large commits', () => {
  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(() => pds?.stop())

  it('serializes concurrent writes to one repository: all land, revs strictly increase, the repo verifies', async () => {
    const agent = await newAgent()
    const did = agent.session!.did
    const other = await newAgent()
    const results = await Promise.all([
      ...Array.from({ length: 24 }, (_, i) =>
        agent.com.atproto.repo.createRecord({ repo: did, collection: 'com.example.par', rkey: `k${i}`, record: { i } }),
      ),
      ...Array.from({ length: 6 }, (_, i) =>
        other.com.atproto.repo.createRecord({ repo: other.session!.did, collection: 'com.example.par', record: { i } }),
      ),
    ])
    const revs = results.slice(0, 24).map((r) => r.data.commit!.rev)
    expect(new Set(revs).size).toBe(24)
    const car = await exportRepo(did)
    const verified = await verifyRepoCar(car, did, await signingKey(did))
    expect(verified.creates).toHaveLength(24)
    const events = await pds.services.db
      .selectFrom('event')
      .selectAll()
      .where('did', '=', did)
      .where('type', '=', 'commit')
      .orderBy('seq')
      .execute()
    const bodies = events.map((e) => dagCbor.decode<any>(e.payload))
    // each commit's `since` is the previous commit's rev: one chain, no lost update
    for (let i = 1; i < bodies.length; i++) expect(bodies[i].since).toBe(bodies[i - 1].rev)
  })

  it('emits #sync instead of #commit beyond the lexicon limits', async () => {
    const { appendCommitOrSync } = await import('../src/repo/events.js')
    const { BlockMap } = await import('@atproto/repo')
    const blocks = new BlockMap()
    const commit = await blocks.add({ did: 'did:plc:x', version: 3, rev: '3l2a', data: null, prev: null })
    const ops = Array.from({ length: 201 }, (_, i) => ({ action: 'create' as const, path: `a.b.c/${i}`, cid: commit }))
    const small = await pds.services.db.transact((trx) =>
      appendCommitOrSync(trx, { did: 'did:plc:x', rev: '3l2a', since: null, commit, blocks, ops: ops.slice(0, 200), prevData: null }),
    )
    expect(small.type).toBe('commit')
    const big = await pds.services.db.transact((trx) =>
      appendCommitOrSync(trx, { did: 'did:plc:x', rev: '3l2a', since: null, commit, blocks, ops, prevData: null }),
    )
    expect(big.type).toBe('sync')
    const row = await pds.services.db.selectFrom('event').selectAll().where('seq', '=', big.seq).executeTakeFirstOrThrow()
    const body = dagCbor.decode<any>(row.payload)
    expect(Object.keys(body).sort()).toEqual(['blocks', 'did', 'rev'])
    const { root } = await readCarWithRoot(body.blocks)
    expect(root.toString()).toBe(commit.toString())
  })
})
