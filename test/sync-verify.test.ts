// Every firehose event verifies as a validating relay checks it (Sync 1.1): two servers sharing one
// PLC directory, each followed by a SyncVerifier from seq 0 while every write pattern the server
// has runs: single writes, batches of 1 and 200, a deep tree, deletes down to the empty tree,
// identical rewrites, deactivation and activation, an import and a migration in.
import { createRequire } from 'node:module'
import { Secp256k1Keypair } from '@atproto/crypto'
import { blocksToCarFile, MemoryBlockstore, MST, Repo, WriteOpAction } from '@atproto/repo'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, newAccount, PASSWORD, startTestPds, xrpc, type TestPds } from './harness.js'
import { subscribe, type Consumer } from './firehose-client.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'
import { opCid, signOp, type UnsignedPlcOp } from '../src/identity/plc.js'
import { SyncVerifier } from './sync-verifier.js'
import { createPlcIdentity } from './plc-identity.js'

const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')
const COLL = 'com.example.note'

type Hose = { pds: TestPds; consumer: Consumer; verifier: SyncVerifier }

let plc: any
let plcUrl: string
let sink: MailSink
let origin: Hose
let dest: Hose
let alice: { did: string; accessJwt: string }

const call = (pds: TestPds, nsid: string, token: string | undefined, opts: Parameters<typeof xrpc>[2] = {}) =>
  xrpc(pds.url, nsid, { ...opts, headers: { ...(token ? bearer(token) : {}), ...opts.headers } })

/** the signing key the DID document names now */
async function currentKey(did: string): Promise<string> {
  const res = await fetch(`${plcUrl}/${did}/data`)
  if (res.status !== 200) throw new Error(`no DID document for ${did}: ${res.status}`)
  return ((await res.json()) as any).verificationMethods.atproto
}

async function follow(pds: TestPds): Promise<Hose> {
  return { pds, consumer: await subscribe(pds.url, 0), verifier: new SyncVerifier(currentKey) }
}

/** waits for the server's newest event and verifies everything up to it; nothing may fail */
async function settle(h: Hose) {
  const row = await h.pds.services.db.selectFrom('event').select('seq').orderBy('seq', 'desc').limit(1).executeTakeFirst()
  const newest = row?.seq ?? 0
  await h.consumer.until((frames) => frames.some((f) => f.body?.seq === newest), 20_000)
  await h.verifier.feed(h.consumer.frames)
  expect(h.verifier.failures).toEqual([])
}

/** the relay's view of `did` equals the server's latest commit */
async function inStep(h: Hose, did: string) {
  const latest = await call(h.pds, 'com.atproto.sync.getLatestCommit', undefined, { params: { did } })
  expect(latest.status).toBe(200)
  expect(h.verifier.repo(did)?.rev).toBe(latest.body.rev)
}

const applyWrites = (token: string, did: string, writes: unknown[]) =>
  call(origin.pds, 'com.atproto.repo.applyWrites', token, { body: { repo: did, writes } })
const create = (rkey: string, value: Record<string, unknown>) => ({
  $type: 'com.atproto.repo.applyWrites#create',
  collection: COLL,
  rkey,
  value,
})
const update = (rkey: string, value: Record<string, unknown>) => ({
  $type: 'com.atproto.repo.applyWrites#update',
  collection: COLL,
  rkey,
  value,
})
const del = (rkey: string) => ({ $type: 'com.atproto.repo.applyWrites#delete', collection: COLL, rkey })
const note = (text: string) => ({ $type: COLL, text })
const key = (i: number) => `k${String(i).padStart(5, '0')}`

describe('every firehose event verifies (Sync 1.1)', () => {
  beforeAll(async () => {
    plc = PlcServer.create({ db: Database.mock(), port: 0 })
    plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
    sink = await startMailSink()
    origin = await follow(await startTestPds({ PDS_DID_PLC_URL: plcUrl, ...sinkEnv(sink) }))
    dest = await follow(await startTestPds({ PDS_DID_PLC_URL: plcUrl, PDS_HOSTNAME: 'pds2.localhost', ...sinkEnv(sink) }))
    alice = await newAccount(origin.pds.url, 'sv')
  })
  afterAll(async () => {
    origin?.consumer.close()
    dest?.consumer.close()
    await origin?.pds.stop()
    await dest?.pds.stop()
    await sink?.close()
    await plc?.destroy()
  })

  it('verifies account creation and single creates, updates and deletes', async () => {
    const { did, accessJwt } = alice
    for (const rkey of ['a', 'b', 'c']) {
      const res = await call(origin.pds, 'com.atproto.repo.createRecord', accessJwt, {
        body: { repo: did, collection: COLL, rkey, record: note(rkey) },
      })
      expect(res.status).toBe(200)
    }
    const put = await call(origin.pds, 'com.atproto.repo.putRecord', accessJwt, {
      body: { repo: did, collection: COLL, rkey: 'b', record: note('b2') },
    })
    expect(put.status).toBe(200)
    const gone = await call(origin.pds, 'com.atproto.repo.deleteRecord', accessJwt, { body: { repo: did, collection: COLL, rkey: 'c' } })
    expect(gone.status).toBe(200)
    await settle(origin)
    // the reference's order on creation: identity, account, the first commit, then a #sync
    expect(origin.verifier.eventsOf(did).map((e) => e.t)).toEqual([
      '#identity',
      '#account',
      '#commit',
      '#sync',
      ...Array(5).fill('#commit'),
    ])
    await inStep(origin, did)
  })

  it('emits nothing for a write that changes nothing, and answers with the current commit', async () => {
    const { did, accessJwt } = alice
    expect((await applyWrites(accessJwt, did, [create('s1', note('s1')), create('s2', note('s2'))])).status).toBe(200)
    await settle(origin)
    const before = (await call(origin.pds, 'com.atproto.sync.getLatestCommit', undefined, { params: { did } })).body
    const stored = (
      await call(origin.pds, 'com.atproto.repo.getRecord', undefined, { params: { repo: did, collection: COLL, rkey: 's2' } })
    ).body
    const events = origin.verifier.eventsOf(did).length

    const same = await call(origin.pds, 'com.atproto.repo.putRecord', accessJwt, {
      body: { repo: did, collection: COLL, rkey: 's2', record: note('s2') },
    })
    expect(same.status).toBe(200)
    expect(same.body.uri).toBe(stored.uri)
    expect(same.body.cid).toBe(stored.cid)
    expect(same.body.commit).toEqual(before)

    const batch = await applyWrites(accessJwt, did, [update('s1', note('s1')), update('s2', note('s2'))])
    expect(batch.status).toBe(200)
    expect(batch.body.commit).toEqual(before)
    expect(batch.body.results.map((r: any) => r.cid)).toHaveLength(2)
    await settle(origin)
    expect(origin.verifier.eventsOf(did)).toHaveLength(events)
    expect((await call(origin.pds, 'com.atproto.sync.getLatestCommit', undefined, { params: { did } })).body).toEqual(before)

    // inside a batch with a real write, the unchanged update is left out of the commit
    const mixed = await applyWrites(accessJwt, did, [update('s1', note('s1')), create('d', note('d'))])
    expect(mixed.status).toBe(200)
    expect(mixed.body.commit.rev > before.rev).toBe(true)
    await settle(origin)
    const last = origin.consumer.frames.filter((f) => f.t === '#commit' && f.body.repo === did).at(-1)!
    expect(last.body.ops.map((op: any) => [op.action, op.path])).toEqual([['create', `${COLL}/d`]])
    expect(last.body.since).toBe(before.rev)
    await inStep(origin, did)
  })

  it('verifies batches of 1 and 200, a deep tree and deletes down to the empty tree', { timeout: 180_000 }, async () => {
    const { did, accessJwt } = alice
    expect((await applyWrites(accessJwt, did, [create(key(0), note('one'))])).status).toBe(200)
    // 2,000 records: several MST levels
    for (let b = 0; b < 10; b++) {
      const writes = Array.from({ length: 200 }, (_, j) => create(key(b * 200 + j + 1), note(`n${b * 200 + j + 1}`)))
      expect((await applyWrites(accessJwt, did, writes)).status).toBe(200)
    }
    await settle(origin)
    // 200 updates and 200 deletes spread over the tree, then single ones
    expect(
      (
        await applyWrites(
          accessJwt,
          did,
          Array.from({ length: 200 }, (_, j) => update(key(j * 10), note(`u${j}`))),
        )
      ).status,
    ).toBe(200)
    expect(
      (
        await applyWrites(
          accessJwt,
          did,
          Array.from({ length: 200 }, (_, j) => del(key(j * 10 + 5))),
        )
      ).status,
    ).toBe(200)
    for (const i of [1, 999, 2000]) {
      expect(
        (await call(origin.pds, 'com.atproto.repo.deleteRecord', accessJwt, { body: { repo: did, collection: COLL, rkey: key(i) } }))
          .status,
      ).toBe(200)
    }
    await settle(origin)
    const commits = origin.verifier.eventsOf(did).filter((e) => e.t === '#commit')
    expect(commits.filter((e) => e.ops === 200).length).toBeGreaterThanOrEqual(12)

    // everything goes, 200 at a time
    const left: string[] = []
    let cursor: string | undefined
    do {
      const page = await call(origin.pds, 'com.atproto.repo.listRecords', undefined, {
        params: { repo: did, collection: COLL, limit: '100', ...(cursor ? { cursor } : {}) },
      })
      for (const r of page.body.records) left.push(r.uri.split('/').pop())
      cursor = page.body.cursor
    } while (cursor)
    for (let i = 0; i < left.length; i += 200) {
      expect((await applyWrites(accessJwt, did, left.slice(i, i + 200).map(del))).status).toBe(200)
    }
    await settle(origin)
    const empty = await (await MST.create(new MemoryBlockstore())).getPointer()
    expect(origin.verifier.repo(did)?.data).toBe(empty.toString())
    await inStep(origin, did)
  })

  it('verifies deactivation and activation: activation sends the current commit', async () => {
    const { did, accessJwt } = alice
    expect((await call(origin.pds, 'com.atproto.server.deactivateAccount', accessJwt, { body: {} })).status).toBe(200)
    expect((await call(origin.pds, 'com.atproto.server.activateAccount', accessJwt, { method: 'POST' })).status).toBe(200)
    await settle(origin)
    expect(
      origin.verifier
        .eventsOf(did)
        .slice(-4)
        .map((e) => e.t),
    ).toEqual(['#account', '#account', '#identity', '#sync'])
    await inStep(origin, did)
    // the next commit follows the #sync
    expect((await applyWrites(accessJwt, did, [create('after', note('after'))])).status).toBe(200)
    await settle(origin)
    await inStep(origin, did)
  })

  it('verifies imports signed by the old key, a #sync beyond the limits, and the activation after them', async () => {
    // within both limits; beyond 200 ops; beyond 2,000,000 bytes of blocks with 150 ops
    for (const [records, pad] of [
      [50, 0],
      [300, 0],
      [150, 20_000],
    ]) {
      const name = `imp${records}`
      const id = await plcIdentity(`${name}.test`)
      const reserved = (await call(dest.pds, 'com.atproto.server.reserveSigningKey', undefined, { body: { did: id.did } })).body.signingKey
      const joined = await call(dest.pds, 'com.atproto.server.createAccount', undefined, {
        body: {
          handle: `${name}.test`,
          email: `${name}@example.com`,
          password: PASSWORD,
          did: id.did,
          plcOp: await movedOp(id, reserved, `${name}.test`),
        },
      })
      expect(joined.status).toBe(200)
      // the repository as the old server signed it
      const storage = new MemoryBlockstore()
      const writes = Array.from({ length: records }, (_, i) => ({
        action: WriteOpAction.Create,
        collection: COLL,
        rkey: key(i),
        record: { ...note(`i${i}`), pad: 'x'.repeat(pad) },
      }))
      const repo = await Repo.create(storage, id.did, id.atproto, writes as never)
      const car = await blocksToCarFile(repo.cid, storage.blocks)
      const imported = await fetch(`${dest.pds.url}/xrpc/com.atproto.repo.importRepo`, {
        method: 'POST',
        headers: { ...bearer(joined.body.accessJwt), 'content-type': 'application/vnd.ipld.car' },
        body: car,
      })
      expect(imported.status).toBe(200)
      expect((await call(dest.pds, 'com.atproto.server.activateAccount', joined.body.accessJwt, { method: 'POST' })).status).toBe(200)
      await settle(dest)
      const kinds = dest.verifier.eventsOf(id.did).map((e) => e.t)
      // within the limits the import is one #commit of creates; beyond them a #sync
      const small = records <= 200 && records * pad < 2_000_000
      expect(kinds).toEqual(['#identity', '#account', small ? '#commit' : '#sync', '#account', '#identity', '#sync'])
      await inStep(dest, id.did)
    }
  })

  it('re-signs the current commit at activation when the account key changed since the import', async () => {
    const id = await plcIdentity('rekey.test')
    const reserved = (await call(dest.pds, 'com.atproto.server.reserveSigningKey', undefined, { body: { did: id.did } })).body.signingKey
    const joined = await call(dest.pds, 'com.atproto.server.createAccount', undefined, {
      body: {
        handle: 'rekey.test',
        email: 'rekey@example.com',
        password: PASSWORD,
        did: id.did,
        plcOp: await movedOp(id, reserved, 'rekey.test'),
      },
    })
    expect(joined.status).toBe(200)
    const storage = new MemoryBlockstore()
    const repo = await Repo.create(storage, id.did, id.atproto, [
      { action: WriteOpAction.Create, collection: COLL, rkey: 'r', record: note('r') },
    ] as never)
    const imported = await fetch(`${dest.pds.url}/xrpc/com.atproto.repo.importRepo`, {
      method: 'POST',
      headers: { ...bearer(joined.body.accessJwt), 'content-type': 'application/vnd.ipld.car' },
      body: await blocksToCarFile(repo.cid, storage.blocks),
    })
    expect(imported.status).toBe(200)
    // a relay has taken the import's event (signed by the key of that moment) before the rotation
    await settle(dest)
    const importedRev = dest.verifier.repo(id.did)!.rev
    // the account's key is rotated (as an operator would) and the DID document follows
    const next = await Secp256k1Keypair.create({ exportable: true })
    await dest.pds.services.db
      .updateTable('signing_key')
      .set({ private_key_hex: Buffer.from(await next.export()).toString('hex'), public_key_multibase: next.did().replace(/^did:key:/, '') })
      .where('did', '=', id.did)
      .execute()
    const head: any = await (await fetch(`${plcUrl}/${id.did}/log/last`)).json()
    const rotated = await movedOp({ ...id, head }, next.did().replace(/^did:key:/, ''), 'rekey.test')
    const res = await fetch(`${plcUrl}/${id.did}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(rotated),
    })
    expect(res.status).toBe(200)
    expect(await currentKey(id.did)).toBe(next.did())
    expect((await call(dest.pds, 'com.atproto.server.activateAccount', joined.body.accessJwt, { method: 'POST' })).status).toBe(200)
    await settle(dest)
    expect(dest.verifier.eventsOf(id.did).at(-1)?.t).toBe('#sync')
    const latest = (await call(dest.pds, 'com.atproto.sync.getLatestCommit', undefined, { params: { did: id.did } })).body
    expect(latest.rev > importedRev).toBe(true)
    await inStep(dest, id.did)
    // the account writes on under the new key
    expect(
      (
        await call(dest.pds, 'com.atproto.repo.createRecord', joined.body.accessJwt, {
          body: { repo: id.did, collection: COLL, record: note('after') },
        })
      ).status,
    ).toBe(200)
    await settle(dest)
    await inStep(dest, id.did)
  })

  it('verifies a migration in on both servers', { timeout: 60_000 }, async () => {
    const created = await call(origin.pds, 'com.atproto.server.createAccount', undefined, {
      body: { handle: 'mover.test', email: 'mover@example.com', password: PASSWORD },
    })
    expect(created.status).toBe(200)
    const did: string = created.body.did
    const originJwt: string = created.body.accessJwt
    expect(
      (
        await applyWrites(
          originJwt,
          did,
          Array.from({ length: 30 }, (_, i) => create(key(i), note(`m${i}`))),
        )
      ).status,
    ).toBe(200)
    await settle(origin)

    const migrationToken = (await call(origin.pds, 'com.atproto.server.requestAccountMigrate', originJwt, { body: { to: dest.pds.url } }))
      .body.token
    const signingKey = (await call(dest.pds, 'com.atproto.server.reserveSigningKey', undefined, { body: { did } })).body.signingKey
    const mails = sink.received.length
    expect((await call(origin.pds, 'com.atproto.identity.requestPlcOperationSignature', originJwt, { method: 'POST' })).status).toBe(200)
    await sink.waitFor(mails + 1)
    const signed = await call(origin.pds, 'com.atproto.identity.signPlcOperation', originJwt, {
      body: {
        token: sink.tokenFor('mover@example.com'),
        verificationMethods: { atproto: `did:key:${signingKey}` },
        services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: dest.pds.env.PDS_PUBLIC_URL } },
      },
    })
    expect(signed.status).toBe(200)
    const joined = await call(dest.pds, 'com.atproto.server.createAccount', undefined, {
      body: { handle: 'mover.test', email: 'mover@example.com', password: PASSWORD, did, plcOp: signed.body.operation },
    })
    expect(joined.status).toBe(200)
    const destJwt: string = joined.body.accessJwt
    const exported = await fetch(`${origin.pds.url}/xrpc/com.atproto.sync.getRepo?did=${did}`, { headers: bearer(migrationToken) })
    expect(exported.status).toBe(200)
    const imported = await fetch(`${dest.pds.url}/xrpc/com.atproto.repo.importRepo`, {
      method: 'POST',
      headers: { ...bearer(destJwt), 'content-type': 'application/vnd.ipld.car' },
      body: new Uint8Array(await exported.arrayBuffer()),
    })
    expect(imported.status).toBe(200)
    expect((await call(dest.pds, 'com.atproto.server.activateAccount', destJwt, { method: 'POST' })).status).toBe(200)
    expect((await call(origin.pds, 'com.atproto.server.deactivateAccount', originJwt, { body: {} })).status).toBe(200)

    await settle(dest)
    await settle(origin)
    // a relay following the destination learns the imported repository when the account goes live
    const kinds = dest.verifier.eventsOf(did).map((e) => e.t)
    expect(kinds.slice(-3)).toEqual(['#account', '#identity', '#sync'])
    await inStep(dest, did)
    // and the account writes on from there
    expect(
      (await call(dest.pds, 'com.atproto.repo.createRecord', destJwt, { body: { repo: did, collection: COLL, record: note('moved') } }))
        .status,
    ).toBe(200)
    await settle(dest)
    await inStep(dest, did)
  })
})

/** a DID the test controls: its rotation key and the signing key of its "old server" */
const plcIdentity = (handle: string) => createPlcIdentity(plcUrl, handle)

/** the identity moved to dest with the reserved key, signed by its rotation key */
async function movedOp(id: Awaited<ReturnType<typeof plcIdentity>>, signingKey: string, handle: string) {
  const unsigned: UnsignedPlcOp = {
    type: 'plc_operation',
    rotationKeys: [id.rotation.did()],
    verificationMethods: { atproto: `did:key:${signingKey}` },
    alsoKnownAs: [`at://${handle}`],
    services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: dest.pds.env.PDS_PUBLIC_URL } },
    prev: await opCid(id.head),
  }
  return signOp(unsigned, id.rotation)
}
