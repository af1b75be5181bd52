// Account migration between two servers on two loopback ports sharing one PLC directory
// (@did-plc/server in-process): the reserved-key flow step by step (requestAccountMigrate,
// reserveSigningKey, createAccount with plcOp, importRepo, blobs, PLC, activate), and what must
// fail on the way.
import { createRequire } from 'node:module'
import { randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { AtpAgent } from '@atproto/api'
import { Secp256k1Keypair } from '@atproto/crypto'
import { BlockMap, blocksToCarFile, MemoryBlockstore, Repo, verifyRepoCar, WriteOpAction } from '@atproto/repo'
import { TID } from '@atproto/common'
import * as dagCbor from '@ipld/dag-cbor'
import { CID } from 'multiformats/cid'
import { sha256 } from 'multiformats/hashes/sha2'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { bearer, describe, OFF_NETWORK, PASSWORD, startTestPds, xrpc, type TestPds } from './harness.js'
import { didForGenesis, opCid, signOp, type UnsignedPlcOp } from '../src/identity/plc.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'
import { subscribe, type Frame } from './firehose-client.js'
import { createPlcIdentity } from './plc-identity.js'

const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')
const RECORDS = 200
const BLOBS = 20

let plc: any
let plcUrl: string
let sink: MailSink
let origin: TestPds
let dest: TestPds
let failNextImport = false

const call = (pds: TestPds, nsid: string, token: string | undefined, opts: Parameters<typeof xrpc>[2] = {}) =>
  xrpc(pds.url, nsid, { ...opts, headers: { ...(token ? bearer(token) : {}), ...opts.headers } })

async function raw(url: string, init: RequestInit = {}) {
  const res = await fetch(url, init)
  return { status: res.status, bytes: new Uint8Array(await res.arrayBuffer()), headers: res.headers }
}

async function importCar(token: string, car: Uint8Array, contentType = 'application/vnd.ipld.car') {
  const res = await fetch(`${dest.url}/xrpc/com.atproto.repo.importRepo`, {
    method: 'POST',
    headers: { ...bearer(token), 'content-type': contentType },
    body: car,
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : undefined }
}

const types = (frames: Frame[], did: string) =>
  frames.filter((f) => f.op === 1 && (f.body.repo ?? f.body.did) === did).map((f) => f.t + (f.t === '#account' ? `:${f.body.active}` : ''))

/** a syntactically valid did:plc nobody owns */
const fakeDid = () => 'did:plc:' + Array.from(randomBytes(24), (b) => 'abcdefghijklmnopqrstuvwxyz234567'[b % 32]).join('')

/** a DID the test controls: its rotation key and the signing key of its "old server" */
const plcIdentity = (handle: string) => createPlcIdentity(plcUrl, handle)

/** opFor signed by the identity's rotation key over its newest operation: proof of control */
async function provenOp(id: Awaited<ReturnType<typeof plcIdentity>>, signingKey: string, handle: string) {
  const { sig: _sig, ...unsigned } = opFor(signingKey, handle, { rotationKeys: [id.rotation.did()], prev: await opCid(id.head) })
  return signOp(unsigned as UnsignedPlcOp, id.rotation)
}

// a fresh DID joining dest with a reserved key (deactivated, migrating in)
async function joinMigrating(name: string) {
  const id = await plcIdentity(`${name}.test`)
  const did = id.did
  const key = (await call(dest, 'com.atproto.server.reserveSigningKey', undefined, { body: { did } })).body.signingKey
  const joined = await call(dest, 'com.atproto.server.createAccount', undefined, {
    body: { handle: `${name}.test`, email: `${name}@example.com`, password: PASSWORD, did, plcOp: await provenOp(id, key, `${name}.test`) },
  })
  expect(joined.status).toBe(200)
  return { did, jwt: joined.body.accessJwt as string, signingKey: key as string }
}

/** the repository signing key `dest` holds for `did` (the reserved one it took over) */
async function accountKey(did: string) {
  const row = await dest.services.db.selectFrom('signing_key').select('private_key_hex').where('did', '=', did).executeTakeFirstOrThrow()
  return Secp256k1Keypair.import(row.private_key_hex)
}
/** an operation that passes createAccount's structural checks for `dest` (its signature proves nothing) */
const opFor = (signingKey: string, handle: string, over: Record<string, unknown> = {}) => ({
  type: 'plc_operation',
  rotationKeys: ['did:key:zQ3shP8A6bb1JZ4CTjQEWdK6MapQ5Z9FsW4mTpx2ehz9fJPEW'],
  verificationMethods: { atproto: `did:key:${signingKey}` },
  alsoKnownAs: [`at://${handle}`],
  services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: dest.env.PDS_PUBLIC_URL } },
  prev: 'bafyreigbtj4x7ip5legnfznufuopl4sg4knzc2cof6duas4b3q2fy6swua',
  sig: 'c2lnbmF0dXJl',
  ...over,
})

describe('account migration', () => {
  beforeAll(async () => {
    plc = PlcServer.create({ db: Database.mock(), port: 0 })
    plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
    sink = await startMailSink()
    origin = await startTestPds({ PDS_DID_PLC_URL: plcUrl, ...sinkEnv(sink) })
    dest = await startTestPds(
      { PDS_DID_PLC_URL: plcUrl, PDS_HOSTNAME: 'pds2.localhost', ...sinkEnv(sink) },
      {
        testHooks: {
          importRepo: {
            afterRecordsIndexed: () => {
              if (failNextImport) {
                failNextImport = false
                throw new Error('injected failure halfway through the import')
              }
            },
          },
        },
      },
    )
  })
  afterAll(async () => {
    await origin?.stop()
    await dest?.stop()
    await sink?.close()
    await plc?.destroy()
  })

  it('moves an account with 200 records and 20 shared blobs, all-or-nothing, in ten steps', async () => {
    // the account on the origin, with records and blobs (each blob referenced by three records)
    const created = await call(origin, 'com.atproto.server.createAccount', undefined, {
      body: { handle: 'mover.test', email: 'mover@example.com', password: PASSWORD },
    })
    expect(created.status).toBe(200)
    const did: string = created.body.did
    const blobs: { ref: any; bytes: Uint8Array }[] = []
    for (let i = 0; i < BLOBS; i++) {
      const bytes = randomBytes(1000 + i * 37)
      const res = await fetch(`${origin.url}/xrpc/com.atproto.repo.uploadBlob`, {
        method: 'POST',
        headers: { ...bearer(created.body.accessJwt), 'content-type': 'image/jpeg' },
        body: bytes,
      })
      expect(res.status).toBe(200)
      blobs.push({ ref: ((await res.json()) as any).blob, bytes: new Uint8Array(bytes) })
    }
    const values: Record<string, any> = {}
    for (let batch = 0; batch < RECORDS / 50; batch++) {
      const writes = []
      for (let j = 0; j < 50; j++) {
        const i = batch * 50 + j
        const rkey = `r${String(i).padStart(4, '0')}`
        const value: any = { $type: 'com.example.post', text: `post ${i}`, n: i }
        if (i < BLOBS * 3) value.image = blobs[i % BLOBS].ref
        values[rkey] = value
        writes.push({ $type: 'com.atproto.repo.applyWrites#create', collection: 'com.example.post', rkey, value })
      }
      const res = await call(origin, 'com.atproto.repo.applyWrites', created.body.accessJwt, { body: { repo: did, writes } })
      expect(res.status).toBe(200)
    }

    // 1. log in on the origin
    const login = await call(origin, 'com.atproto.server.createSession', undefined, {
      body: { identifier: 'mover.test', password: PASSWORD },
    })
    expect(login.status).toBe(200)
    const originJwt: string = login.body.accessJwt

    // 2. requestAccountMigrate
    const migrate = await call(origin, 'com.atproto.server.requestAccountMigrate', originJwt, { body: { to: dest.url } })
    expect(migrate.status).toBe(200)
    expect(migrate.body.destination).toEqual({ did: 'did:web:pds2.localhost', endpoint: dest.env.PDS_PUBLIC_URL })
    const migrationToken: string = migrate.body.token
    const claims = JSON.parse(Buffer.from(migrationToken.split('.')[1], 'base64url').toString())
    expect(claims.iss).toBe(did)
    expect(claims.aud).toBe('did:web:pds2.localhost')
    expect(claims.lxm).toBeUndefined()
    expect(claims.exp - claims.iat).toBe(3600)
    // status unchanged: the user still logs in on the origin
    const still = await call(origin, 'com.atproto.server.checkAccountStatus', originJwt)
    expect(still.body.active).toBe(true)

    // 3. reserveSigningKey on the destination (no auth)
    const reserved = await call(dest, 'com.atproto.server.reserveSigningKey', undefined, { body: { did } })
    expect(reserved.status).toBe(200)
    const signingKey: string = reserved.body.signingKey
    expect(signingKey).toMatch(/^z/)

    // 4. requestPlcOperationSignature: a token by email
    const before = sink.received.length
    expect((await call(origin, 'com.atproto.identity.requestPlcOperationSignature', originJwt, { method: 'POST' })).status).toBe(200)
    await sink.waitFor(before + 1)
    const emailToken = sink.tokenFor('mover@example.com')

    // 5. signPlcOperation pointing at the destination; published to the directory
    const signed = await call(origin, 'com.atproto.identity.signPlcOperation', originJwt, {
      body: {
        token: emailToken,
        verificationMethods: { atproto: `did:key:${signingKey}` },
        services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: dest.env.PDS_PUBLIC_URL } },
      },
    })
    expect(signed.status).toBe(200)
    const plcOp = signed.body.operation
    expect(plcOp.alsoKnownAs).toEqual(['at://mover.test'])
    const plcDoc: any = await (await fetch(`${plcUrl}/${did}`)).json()
    expect(plcDoc.service[0].serviceEndpoint).toBe(dest.env.PDS_PUBLIC_URL)
    // the token is spent
    const again = await call(origin, 'com.atproto.identity.signPlcOperation', originJwt, { body: { token: emailToken } })
    expect(again.status).toBe(401)
    expect(again.body.error).toBe('InvalidToken')

    // 6. createAccount on the destination with the DID and the signed operation
    const joined = await call(dest, 'com.atproto.server.createAccount', undefined, {
      body: { handle: 'mover.test', email: 'mover@example.com', password: PASSWORD, did, plcOp },
    })
    expect(joined.status).toBe(200)
    expect(joined.body.did).toBe(did)
    expect(joined.body.didDoc.verificationMethod[0].publicKeyMultibase).toBe(signingKey)
    const destJwt: string = joined.body.accessJwt
    const status0 = await call(dest, 'com.atproto.server.checkAccountStatus', destJwt)
    expect(status0.body.active).toBe(false)
    expect(status0.body.status).toBe('deactivated')
    // a deactivated account may import but not write
    const write = await call(dest, 'com.atproto.repo.createRecord', destJwt, {
      body: { repo: did, collection: 'com.example.post', record: { text: 'too early' } },
    })
    expect(write.status).toBe(403)

    // 7. getRepo on the origin with the migration token
    const exported = await raw(`${origin.url}/xrpc/com.atproto.sync.getRepo?did=${did}`, { headers: bearer(migrationToken) })
    expect(exported.status).toBe(200)

    // 8. importRepo: an injected failure halfway leaves nothing behind; the retry just works
    const eventsBefore = await dest.services.db.selectFrom('event').select('seq').where('did', '=', did).execute()
    failNextImport = true
    const failed = await importCar(destJwt, exported.bytes)
    expect(failed.status).toBeGreaterThanOrEqual(500)
    const db = dest.services.db
    expect(await db.selectFrom('record').select('uri').where('did', '=', did).execute()).toEqual([])
    expect(await db.selectFrom('record_blob').select('record_uri').where('did', '=', did).execute()).toEqual([])
    expect(await db.selectFrom('repo_block').select('cid').where('did', '=', did).execute()).toEqual([])
    expect(await db.selectFrom('repo_root').select('cid').where('did', '=', did).execute()).toEqual([])
    expect(await db.selectFrom('event').select('seq').where('did', '=', did).execute()).toEqual(eventsBefore)
    const imported = await importCar(destJwt, exported.bytes)
    expect(imported.status).toBe(200)
    // a second import is refused
    const twice = await importCar(destJwt, exported.bytes)
    expect(twice.status).toBe(400)
    expect(twice.body.error).toBe('RepoNotEmpty')

    // 9. blob reconciliation: both ids list the same; one upload clears every record naming a CID
    const first = await call(dest, 'com.atproto.sync.listMissingBlobs', destJwt, { params: { limit: '1000' } })
    const official = await call(dest, 'com.atproto.repo.listMissingBlobs', destJwt, { params: { limit: '1000' } })
    expect(first.status).toBe(200)
    expect(official.body).toEqual(first.body)
    expect(first.body.blobs).toHaveLength(BLOBS * 3)
    expect(new Set(first.body.blobs.map((b: any) => b.cid)).size).toBe(BLOBS)
    // a page holds at most `limit` references, and one CID's references may continue on the next
    const paged = await call(dest, 'com.atproto.sync.listMissingBlobs', destJwt, { params: { limit: '7' } })
    expect(paged.body.blobs).toEqual(first.body.blobs.slice(0, 7))
    const next = await call(dest, 'com.atproto.sync.listMissingBlobs', destJwt, { params: { limit: '7', cursor: paged.body.cursor } })
    expect(next.body.blobs).toEqual(first.body.blobs.slice(7, 14))
    let rounds = 0
    for (;;) {
      const page = await call(dest, 'com.atproto.sync.listMissingBlobs', destJwt, { params: { limit: '5' } })
      if (!page.body.blobs.length) break
      expect(++rounds).toBeLessThanOrEqual(BLOBS)
      for (const cid of new Set<string>(page.body.blobs.map((b: any) => b.cid))) {
        const got = await raw(`${origin.url}/xrpc/com.atproto.sync.getBlob?did=${did}&cid=${cid}`, { headers: bearer(migrationToken) })
        expect(got.status).toBe(200)
        const up = await fetch(`${dest.url}/xrpc/com.atproto.repo.uploadBlob`, {
          method: 'POST',
          headers: { ...bearer(destJwt), 'content-type': got.headers.get('content-type')! },
          body: got.bytes,
        })
        expect(up.status).toBe(200)
      }
    }
    // five references a page, three records a CID: two CIDs cleared a round
    expect(rounds).toBe(10)
    // uploaded blobs are referenced at once, never garbage-collected
    const unref = await db.selectFrom('blob').select('cid').where('did', '=', did).where('referenced', '=', 0).execute()
    expect(unref).toEqual([])

    // 10. activateAccount
    expect((await call(dest, 'com.atproto.server.activateAccount', destJwt, { method: 'POST' })).status).toBe(200)
    const status1 = await call(dest, 'com.atproto.server.checkAccountStatus', destJwt)
    expect(status1.body.active).toBe(true)
    expect(status1.body.indexedRecords).toBe(RECORDS)
    expect(status1.body.expectedBlobs).toBe(BLOBS)
    expect(status1.body.importedBlobs).toBe(BLOBS)
    const row = await db.selectFrom('account').select(['migration_state', 'status']).where('did', '=', did).executeTakeFirstOrThrow()
    expect(row).toEqual({ migration_state: 'migrating-in', status: 'active' })

    // every record and blob is readable on the destination
    let cursor: string | undefined
    let seen = 0
    do {
      const page = await call(dest, 'com.atproto.repo.listRecords', undefined, {
        params: { repo: did, collection: 'com.example.post', limit: '100', ...(cursor ? { cursor } : {}) },
      })
      for (const r of page.body.records) {
        const rkey = r.uri.split('/').pop()
        expect(r.value).toEqual(values[rkey])
        seen++
      }
      cursor = page.body.cursor
    } while (cursor)
    expect(seen).toBe(RECORDS)
    for (const b of blobs) {
      const got = await raw(`${dest.url}/xrpc/com.atproto.sync.getBlob?did=${did}&cid=${b.ref.ref.$link}`)
      expect(got.status).toBe(200)
      expect(Buffer.from(got.bytes).equals(Buffer.from(b.bytes))).toBe(true)
    }
    // getRepo on the destination verifies against the key the DID document names
    const data: any = await (await fetch(`${plcUrl}/${did}/data`)).json()
    expect(data.verificationMethods.atproto).toBe(`did:key:${signingKey}`)
    const car = await raw(`${dest.url}/xrpc/com.atproto.sync.getRepo?did=${did}`)
    expect((await verifyRepoCar(car.bytes, did, data.verificationMethods.atproto)).creates).toHaveLength(RECORDS)
    // the destination now answers sessions with the document
    const destLogin = await call(dest, 'com.atproto.server.createSession', undefined, { body: { identifier: did, password: PASSWORD } })
    expect(destLogin.body.didDoc.id).toBe(did)

    // both firehoses show the events in the order the calls happened
    const originHose = await subscribe(origin.url, 0)
    const destHose = await subscribe(dest.url, 0)
    try {
      await originHose.until((f) => types(f, did).includes('#identity') && types(f, did).length >= 9)
      const o = types(originHose.frames, did)
      expect(o.slice(0, 3)).toEqual(['#identity', '#account:true', '#commit'])
      expect(o.slice(-2)).toEqual(['#account:false', '#identity'])
      const accountEv = originHose.frames.find((f) => f.t === '#account' && f.body.did === did && f.body.active === false)!
      expect(accountEv.body.status).toBe('deactivated')
      await destHose.until((f) => types(f, did).length >= 6)
      // going live tells relays the imported repository: #sync of the commit getRepo serves
      expect(types(destHose.frames, did)).toEqual(['#identity', '#account:false', '#commit', '#account:true', '#identity', '#sync'])
      const commit = destHose.frames.find((f) => f.t === '#commit' && f.body.repo === did)!
      expect(commit.body.ops).toHaveLength(RECORDS)
      expect(commit.body.ops.every((op: any) => op.action === 'create')).toBe(true)
    } finally {
      originHose.close()
      destHose.close()
    }
  })

  it('refuses createAccount with a DID: structural checks first, each with its own error', async () => {
    const create = (body: Record<string, unknown>) => call(dest, 'com.atproto.server.createAccount', undefined, { body })
    const base = { handle: 'neg.test', email: 'neg@example.com', password: PASSWORD }
    const id = await plcIdentity('neg.test')
    const did = id.did
    // 1. not a did:plc
    let res = await create({ ...base, did: 'did:plc:UPPERCASEISNOTALLOWED1234', plcOp: {} })
    expect([res.status, res.body.error]).toEqual([400, 'InvalidRequest'])
    res = await create({ ...base, did: 'did:web:example.com', plcOp: {} })
    expect([res.status, res.body.error]).toEqual([400, 'InvalidRequest'])
    // 3. no reservation (checked before the operation)
    res = await create({ ...base, did, plcOp: {} })
    expect([res.status, res.body.error]).toEqual([400, 'MissingReservedKey'])
    const key1 = (await call(dest, 'com.atproto.server.reserveSigningKey', undefined, { body: { did } })).body.signingKey
    // a second reservation overwrites the first
    const key = (await call(dest, 'com.atproto.server.reserveSigningKey', undefined, { body: { did } })).body.signingKey
    expect(key).not.toBe(key1)
    res = await create({ ...base, did, plcOp: opFor(key1, 'neg.test') })
    expect([res.status, res.body.error]).toEqual([400, 'MismatchedSigningKey'])
    // 4. the operation's structure
    const cases: [Record<string, unknown>, string][] = [
      [{ type: 'create' }, 'IncompatibleDidDoc'],
      [{ sig: '' }, 'IncompatibleDidDoc'],
      [{ prev: null }, 'IncompatibleDidDoc'],
      [{ rotationKeys: [] }, 'IncompatibleDidDoc'],
      [{ verificationMethods: { atproto: 'did:key:zQ3shunrelated' } }, 'MismatchedSigningKey'],
      [
        { services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: 'https://elsewhere.example' } } },
        'MismatchedServiceEndpoint',
      ],
      [{ services: {} }, 'IncompatibleDidDoc'],
      [{ alsoKnownAs: ['at://someone-else.test'] }, 'IncompatibleDidDoc'],
    ]
    for (const [over, error] of cases) {
      res = await create({ ...base, did, plcOp: opFor(key, 'neg.test', over) })
      expect([res.status, res.body.error, JSON.stringify(over)]).toEqual([400, error, JSON.stringify(over)])
    }
    expect(await dest.services.db.selectFrom('account').select('did').where('did', '=', did).execute()).toEqual([])
    // structurally fine, but its signature proves nothing: InvalidRequest, after the checks above
    res = await create({ ...base, did, plcOp: opFor(key, 'neg.test') })
    expect([res.status, res.body.error]).toEqual([400, 'InvalidRequest'])
    // signed by the DID's rotation key: deactivated, migrating-in, no repository
    res = await create({ ...base, did, plcOp: await provenOp(id, key, 'neg.test') })
    expect(res.status).toBe(200)
    const acct = await dest.services.db.selectFrom('account').selectAll().where('did', '=', did).executeTakeFirstOrThrow()
    expect([acct.status, acct.migration_state]).toEqual(['deactivated', 'migrating-in'])
    expect(await dest.services.db.selectFrom('repo_root').select('did').where('did', '=', did).execute()).toEqual([])
    expect(await dest.services.db.selectFrom('reserved_signing_key').select('did').where('did', '=', did).execute()).toEqual([])
    // 2. the DID exists now
    await call(dest, 'com.atproto.server.reserveSigningKey', undefined, { body: { did } })
    res = await create({ ...base, handle: 'neg2.test', email: 'neg2@example.com', did, plcOp: opFor(key, 'neg2.test') })
    expect([res.status, res.body.error]).toEqual([400, 'AccountAlreadyExists'])
  })

  it('refuses bad CARs with InvalidCar and bad commits with InvalidRequest, leaving nothing', async () => {
    const { did, jwt } = await joinMigrating('badcar')

    // a repository signed by a key the DID never named
    const stranger = await Secp256k1Keypair.create()
    const build = async (repoDid: string) => {
      const storage = new MemoryBlockstore()
      const repo = await Repo.create(storage, repoDid, stranger, [
        { action: WriteOpAction.Create, collection: 'com.example.post', rkey: TID.nextStr(), record: { text: 'hi' } },
      ])
      return { root: repo.cid, blocks: storage.blocks }
    }
    const good = await build(did)
    const expectErr = async (car: Uint8Array, error: string, contentType?: string) => {
      const res = await importCar(jwt, car, contentType)
      expect([res.status, res.body?.error]).toEqual([400, error])
    }
    await expectErr(new Uint8Array(randomBytes(64)), 'InvalidCar')
    // a block whose bytes do not hash to its CID
    const tampered = new BlockMap()
    good.blocks.forEach((bytes, cid) => tampered.set(cid, cid.equals(good.root) ? bytes : new Uint8Array([...bytes, 0])))
    await expectErr(await blocksToCarFile(good.root, tampered), 'InvalidCar')
    // the root block is missing
    const rootless = new BlockMap()
    good.blocks.forEach((bytes, cid) => !cid.equals(good.root) && rootless.set(cid, bytes))
    await expectErr(await blocksToCarFile(good.root, rootless), 'InvalidCar')
    // the root is not a commit
    const notCommit = new BlockMap()
    const junk = dagCbor.encode({ hello: 'world' })
    const junkCid = CID.createV1(dagCbor.code, await sha256.digest(junk))
    notCommit.set(junkCid, junk)
    await expectErr(await blocksToCarFile(junkCid, notCommit), 'InvalidRequest')
    // a commit of another DID
    const other = await build(fakeDid())
    await expectErr(await blocksToCarFile(other.root, other.blocks), 'InvalidRequest')
    // the right DID, signed by an unrelated key
    await expectErr(await blocksToCarFile(good.root, good.blocks), 'InvalidRequest')
    // a JSON body is not a CAR
    const json = await fetch(`${dest.url}/xrpc/com.atproto.repo.importRepo`, {
      method: 'POST',
      headers: { ...bearer(jwt), 'content-type': 'application/json' },
      body: '{}',
    })
    expect(json.status).toBe(400)
    const db = dest.services.db
    expect(await db.selectFrom('record').select('uri').where('did', '=', did).execute()).toEqual([])
    expect(await db.selectFrom('repo_block').select('cid').where('did', '=', did).execute()).toEqual([])
  })

  it('refuses a commit whose signature is all zeroes with InvalidRequest', async () => {
    const { did, jwt } = await joinMigrating('zerosig')
    const storage = new MemoryBlockstore()
    const repo = await Repo.create(storage, did, await Secp256k1Keypair.create(), [])
    const commit = { ...dagCbor.decode<Record<string, unknown>>(storage.blocks.get(repo.cid)!), sig: new Uint8Array(64) }
    const bytes = dagCbor.encode(commit)
    const cid = CID.createV1(dagCbor.code, await sha256.digest(bytes))
    const blocks = new BlockMap()
    storage.blocks.forEach((b, c) => !c.equals(repo.cid) && blocks.set(c, b))
    blocks.set(cid, bytes)
    const res = await importCar(jwt, await blocksToCarFile(cid, blocks))
    expect([res.status, res.body?.error]).toEqual([400, 'InvalidRequest'])
  })

  it('runs one import at a time: another arriving meanwhile gets 429', async () => {
    const first = await joinMigrating('slow')
    const second = await joinMigrating('queued')
    // the first import's body trickles in and stays open until the second has its answer
    let finish!: () => void
    const held = new Promise<void>((r) => (finish = r))
    const body = new ReadableStream<Uint8Array>({
      async start(ctl) {
        ctl.enqueue(new Uint8Array([0x01]))
        await held
        ctl.close()
      },
    })
    const slow = fetch(`${dest.url}/xrpc/com.atproto.repo.importRepo`, {
      method: 'POST',
      headers: { ...bearer(first.jwt), 'content-type': 'application/vnd.ipld.car' },
      body,
      duplex: 'half',
    })
    try {
      let res: Awaited<ReturnType<typeof importCar>> | undefined
      for (let i = 0; i < 100 && res?.status !== 429; i++) {
        await new Promise((r) => setTimeout(r, 50))
        res = await importCar(second.jwt, new Uint8Array([0x01]))
      }
      expect([res?.status, res?.body?.error]).toEqual([429, 'RateLimitExceeded'])
    } finally {
      finish()
    }
    expect((await slow).status).toBe(400)
    // once the first is done, the next one is read
    expect((await importCar(second.jwt, new Uint8Array([0x01]))).body?.error).toBe('InvalidCar')
  })

  it('refuses a bad prev and a broken tree, and indexes the blob references of every record form', async () => {
    const { did, jwt, signingKey: reserved } = await joinMigrating('tree')
    const db = dest.services.db
    const key = await accountKey(did)
    const cidOf = async (bytes: Uint8Array) => CID.createV1(dagCbor.code, await sha256.digest(bytes))
    const blob = async (s: string) => CID.createV1(0x55, await sha256.digest(new TextEncoder().encode(s)))
    const [b1, b2, b3] = [await blob('one'), await blob('two'), await blob('three')]
    const records: Record<string, any>[] = [
      { text: 'plain' },
      { image: { $type: 'blob', ref: b1, mimeType: 'image/png', size: 3 } },
      { legacy: { cid: b2.toString(), mimeType: 'image/jpeg' } },
      { big: 2 ** 40, nested: [{ $type: 'blob', ref: b3, mimeType: 'image/png', size: 3 }] }, // a 64-bit integer: the full decoder
    ]
    const storage = new MemoryBlockstore()
    const repo = await Repo.create(
      storage,
      did,
      key,
      records.map((record, i) => ({ action: WriteOpAction.Create as const, collection: 'com.example.post', rkey: `r${i}`, record })),
    )
    const commitOver = async (data: unknown, over: Record<string, unknown> = {}) => {
      const unsigned: Record<string, unknown> = { did, version: 3, data, rev: TID.nextStr(), prev: null, ...over }
      for (const k of Object.keys(unsigned)) if (unsigned[k] === undefined) delete unsigned[k]
      const bytes = dagCbor.encode({ ...unsigned, sig: await key.sign(dagCbor.encode(unsigned)) })
      return { cid: await cidOf(bytes), bytes }
    }
    const carWith = async (commit: { cid: CID; bytes: Uint8Array }, change: (m: BlockMap) => void = () => {}) => {
      const blocks = new BlockMap()
      storage.blocks.forEach((bytes, cid) => blocks.set(cid, bytes))
      blocks.set(commit.cid, commit.bytes)
      change(blocks)
      return blocksToCarFile(commit.cid, blocks)
    }
    const expectErr = async (car: Uint8Array, error: string, message: RegExp) => {
      const res = await importCar(jwt, car)
      expect([res.status, res.body?.error]).toEqual([400, error])
      expect(res.body.message).toMatch(message)
    }
    const data = repo.data.pointer
    await expectErr(await carWith(await commitOver(data, { prev: 'not a cid' })), 'InvalidRequest', /prev/)
    await expectErr(await carWith(await commitOver(data, { prev: undefined })), 'InvalidRequest', /prev/)
    await expectErr(await carWith(await commitOver(data, { rev: 'not-a-tid' })), 'InvalidRequest', /rev/)
    // a record's block missing
    const leaf = (await repo.data.leaves())[1]
    await expectErr(await carWith(await commitOver(data), (m) => m.delete(leaf.value)), 'InvalidCar', /missing block/)
    // a tree whose keys are out of order
    const k = (s: string) => new TextEncoder().encode(s)
    const node = dagCbor.encode({
      l: null,
      e: [
        { p: 0, k: k('com.example.post/b'), v: leaf.value, t: null },
        { p: 17, k: k('a'), v: leaf.value, t: null },
      ],
    })
    const nodeCid = await cidOf(node)
    await expectErr(await carWith(await commitOver(nodeCid), (m) => m.set(nodeCid, node)), 'InvalidCar', /out of order/)
    // a record that is not DAG-CBOR
    const junk = new Uint8Array([0xa1, 0x61, 0x61, 0xff])
    const junkCid = await cidOf(junk)
    const junkNode = dagCbor.encode({ l: null, e: [{ p: 0, k: k('com.example.post/x'), v: junkCid, t: null }] })
    const junkNodeCid = await cidOf(junkNode)
    await expectErr(
      await carWith(await commitOver(junkNodeCid), (m) => {
        m.set(junkNodeCid, junkNode)
        m.set(junkCid, junk)
      }),
      'InvalidCar',
      /not DAG-CBOR/,
    )
    expect(await db.selectFrom('record').select('uri').where('did', '=', did).execute()).toEqual([])
    expect(await db.selectFrom('repo_block').select('cid').where('did', '=', did).execute()).toEqual([])

    // the good one, with an unreachable extra block that is not kept
    const extra = dagCbor.encode({ unreachable: true })
    const extraCid = await cidOf(extra)
    const res = await importCar(jwt, await carWith(await commitOver(data), (m) => m.set(extraCid, extra)))
    expect(res.status).toBe(200)
    const refs = await db
      .selectFrom('record_blob')
      .select(['blob_cid', 'record_uri'])
      .where('did', '=', did)
      .orderBy('record_uri')
      .execute()
    expect(refs).toEqual([
      { blob_cid: b1.toString(), record_uri: `at://${did}/com.example.post/r1` },
      { blob_cid: b2.toString(), record_uri: `at://${did}/com.example.post/r2` },
      { blob_cid: b3.toString(), record_uri: `at://${did}/com.example.post/r3` },
    ])
    const rows = await db.selectFrom('record').select(['uri', 'cid', 'collection', 'rkey']).where('did', '=', did).orderBy('uri').execute()
    expect(rows.map((r) => [r.collection, r.rkey])).toEqual(records.map((_, i) => ['com.example.post', `r${i}`]))
    const root = await db.selectFrom('repo_root').selectAll().where('did', '=', did).executeTakeFirstOrThrow()
    const stored = await db.selectFrom('repo_block').select('cid').where('did', '=', did).execute()
    expect(stored.map((b) => b.cid)).not.toContain(extraCid.toString())
    expect([root.record_count, root.block_count]).toEqual([4, stored.length])
    expect((await call(dest, 'com.atproto.server.activateAccount', jwt, { method: 'POST' })).status).toBe(200)
    const car = await raw(`${dest.url}/xrpc/com.atproto.sync.getRepo?did=${did}`)
    expect((await verifyRepoCar(car.bytes, did, `did:key:${reserved}`)).creates).toHaveLength(4)
  })

  it('imports records that share a value, and keeps it until the last of them is deleted', async () => {
    const { did, jwt } = await joinMigrating('shared')
    const key = await accountKey(did)
    const same = { $type: 'com.example.post', text: 'said three times' }
    const repo = await Repo.create(
      new MemoryBlockstore(),
      did,
      key,
      ['a', 'b', 'c', 'd'].map((rkey) => ({
        action: WriteOpAction.Create as const,
        collection: 'com.example.post',
        rkey,
        record: rkey === 'd' ? { $type: 'com.example.post', text: 'once' } : same,
      })),
    )
    const blocks = new BlockMap()
    ;(repo.storage as MemoryBlockstore).blocks.forEach((bytes, cid) => blocks.set(cid, bytes))
    expect((await importCar(jwt, await blocksToCarFile(repo.cid, blocks))).status).toBe(200)
    expect((await call(dest, 'com.atproto.server.activateAccount', jwt, { method: 'POST' })).status).toBe(200)
    const value = (
      await call(dest, 'com.atproto.repo.getRecord', undefined, { params: { repo: did, collection: 'com.example.post', rkey: 'a' } })
    ).body.cid
    const exported = async () => {
      const car = await raw(`${dest.url}/xrpc/com.atproto.sync.getRepo?did=${did}`)
      expect(car.status).toBe(200)
      return (await verifyRepoCar(car.bytes, did, key.did())).creates.map((r) => r.rkey).sort()
    }
    const remove = (rkey: string) =>
      call(dest, 'com.atproto.repo.deleteRecord', jwt, { body: { repo: did, collection: 'com.example.post', rkey } })
    const blockOfValue = async () => (await call(dest, 'com.atproto.sync.getBlocks', jwt, { params: { did, cids: value } })).status
    expect(await exported()).toEqual(['a', 'b', 'c', 'd'])
    for (const rkey of ['a', 'b']) expect((await remove(rkey)).status).toBe(200)
    expect(await exported()).toEqual(['c', 'd'])
    expect(await blockOfValue()).toBe(200)
    expect((await remove('c')).status).toBe(200)
    expect(await exported()).toEqual(['d'])
    expect(await blockOfValue()).toBe(400)
  })

  it('pages listMissingBlobs by reference: never more than limit, one CID split across pages', async () => {
    const { did, jwt } = await joinMigrating('pager')
    const key = await accountKey(did)
    const blob = async (s: string) => CID.createV1(0x55, await sha256.digest(new TextEncoder().encode(s)))
    const [shared, single] = [await blob('shared'), await blob('single')]
    const image = (ref: CID) => ({ $type: 'blob', ref, mimeType: 'image/png', size: 6 })
    // five records name one blob, a sixth another
    const records = [...[0, 1, 2, 3, 4].map((n) => ({ n, image: image(shared) })), { n: 5, image: image(single) }]
    const storage = new MemoryBlockstore()
    const repo = await Repo.create(
      storage,
      did,
      key,
      records.map((record, i) => ({ action: WriteOpAction.Create as const, collection: 'com.example.post', rkey: `p${i}`, record })),
    )
    const unsigned = { did, version: 3, data: repo.data.pointer, rev: TID.nextStr(), prev: null }
    const commit = dagCbor.encode({ ...unsigned, sig: await key.sign(dagCbor.encode(unsigned)) })
    const commitCid = CID.createV1(dagCbor.code, await sha256.digest(commit))
    const blocks = new BlockMap()
    storage.blocks.forEach((bytes, cid) => blocks.set(cid, bytes))
    blocks.set(commitCid, commit)
    expect((await importCar(jwt, await blocksToCarFile(commitCid as never, blocks))).status).toBe(200)

    const headers = { authorization: `Bearer ${jwt}` }
    const agent = new AtpAgent({ service: dest.url })
    const byId = {
      repo: (limit: number, cursor?: string) => agent.com.atproto.repo.listMissingBlobs({ limit, cursor }, { headers }),
      sync: (limit: number, cursor?: string) => dest.client().com.atproto.sync.listMissingBlobs({ limit, cursor }, { headers }),
    }
    const all = (await byId.repo(1000)).data
    expect(all.cursor).toBeUndefined()
    expect(all.blobs).toHaveLength(6)
    expect(all.blobs.filter((b) => b.cid === shared.toString())).toHaveLength(5)
    for (const list of Object.values(byId)) {
      for (const limit of [1, 2, 4, 5]) {
        const seen: { cid: string; recordUri: string }[] = []
        let cursor: string | undefined
        for (let round = 0; round < 10; round++) {
          const page = (await list(limit, cursor)).data
          expect(page.blobs.length).toBeLessThanOrEqual(limit)
          seen.push(...page.blobs)
          cursor = page.cursor
          if (!cursor) break
          // a page ending with a CID's last reference names just that CID
          const last = page.blobs[page.blobs.length - 1]
          const continues = all.blobs[seen.length]?.cid === last.cid
          expect(cursor === last.cid).toBe(!continues)
        }
        expect(cursor).toBeUndefined()
        expect(seen).toEqual(all.blobs)
      }
    }
  })

  it('answers requestPlcOperationSignature with an empty JSON object', async () => {
    const agent = new AtpAgent({ service: origin.url })
    await agent.createAccount({ handle: 'empty.test', email: 'empty@example.com', password: PASSWORD })
    const n = sink.received.length
    const res = await agent.com.atproto.identity.requestPlcOperationSignature()
    expect((res as { data?: unknown }).data).toEqual({})
    expect(res.headers['content-type']).toMatch(/^application\/json/)
    const generated = await origin.client().com.atproto.identity.requestPlcOperationSignature(undefined, {
      headers: { authorization: `Bearer ${agent.session!.accessJwt}` },
    })
    expect((generated as { data?: unknown }).data).toEqual({})
    await sink.waitFor(n + 2)
    expect(sink.received.slice(n).map((m) => m.body.to)).toEqual(['empty@example.com', 'empty@example.com'])
  })

  it('answers BadDestination for every way the destination fails to resolve, changing nothing', async () => {
    const acct = await call(origin, 'com.atproto.server.createAccount', undefined, {
      body: { handle: 'stayer.test', email: 'stayer@example.com', password: PASSWORD },
    })
    const jwt = acct.body.accessJwt
    const servers: Server[] = []
    const serve = async (handler: Parameters<typeof createServer>[1]) => {
      const s = createServer(handler)
      servers.push(s)
      await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()))
      return `http://127.0.0.1:${(s.address() as AddressInfo).port}`
    }
    try {
      const html = await serve((_q, r) => r.writeHead(200, { 'content-type': 'text/html' }).end('<html>hello</html>'))
      const noService = await serve((_q, r) =>
        r.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'did:web:nothing.test', service: [] })),
      )
      const noId = await serve((_q, r) =>
        r
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ service: [{ type: 'AtprotoPersonalDataServer', serviceEndpoint: 'https://x.test' }] })),
      )
      const notFound = await serve((_q, r) => r.writeHead(404).end())
      const hangup = await serve((q) => q.socket.destroy())
      const closed = await serve(() => {})
      servers.pop()!.close()
      for (const to of [html, noService, noId, notFound, hangup, closed, 'not a url', origin.url]) {
        const res = await call(origin, 'com.atproto.server.requestAccountMigrate', jwt, { body: { to } })
        expect([to, res.status, res.body.error]).toEqual([to, 400, 'BadDestination'])
      }
      const row = await origin.services.db
        .selectFrom('account')
        .select('migration_state')
        .where('did', '=', acct.body.did)
        .executeTakeFirstOrThrow()
      expect(row.migration_state).toBe('none')
    } finally {
      for (const s of servers) s.close()
    }
  })

  it('requires https unless the server itself runs on localhost', async () => {
    const remote = await startTestPds({ PDS_HOSTNAME: 'pds.example.com', PDS_PUBLIC_URL: 'https://pds.example.com', ...OFF_NETWORK })
    try {
      const acct = await call(remote, 'com.atproto.server.createAccount', undefined, {
        body: { handle: 'remote.test', email: 'remote@example.com', password: PASSWORD },
      })
      const res = await call(remote, 'com.atproto.server.requestAccountMigrate', acct.body.accessJwt, { body: { to: dest.url } })
      expect([res.status, res.body.error]).toEqual([400, 'BadDestination'])
      expect(res.body.message).toContain('https')
    } finally {
      await remote.stop()
    }
  })

  it('lets the migration token read a deactivated repository, and only its own', async () => {
    const acct = await call(origin, 'com.atproto.server.createAccount', undefined, {
      body: { handle: 'leaver.test', email: 'leaver@example.com', password: PASSWORD },
    })
    const did = acct.body.did
    const jwt = acct.body.accessJwt
    const token = (await call(origin, 'com.atproto.server.requestAccountMigrate', jwt, { body: { to: dest.url } })).body.token
    expect((await call(origin, 'com.atproto.server.deactivateAccount', jwt, { body: {} })).status).toBe(200)
    const anon = await call(origin, 'com.atproto.sync.getRepo', undefined, { params: { did } })
    expect(anon.body.error).toBe('RepoDeactivated')
    const withToken = await raw(`${origin.url}/xrpc/com.atproto.sync.getRepo?did=${did}`, { headers: bearer(token) })
    expect(withToken.status).toBe(200)
    // a token with another audience than the recorded destination is refused
    const { mintMigrationToken } = await import('../src/move/origin.js')
    const wrongAud = await mintMigrationToken(origin.services.tokenKeys, did, 'did:web:elsewhere.test')
    const refused = await call(origin, 'com.atproto.sync.getRepo', wrongAud, { params: { did } })
    expect([refused.status, refused.body.error]).toEqual([401, 'InvalidToken'])
    // other bearer tokens leave public reads anonymous
    const other = await call(origin, 'com.atproto.sync.getRepo', 'not-a-jwt', { params: { did: 'did:plc:unknownunknownunknown234' } })
    expect(other.body.error).toBe('RepoNotFound')
  })
  it('accepts a commit signed by a key the DID named earlier (PLC audit log), re-signs it, and emits #sync beyond 200 ops', async () => {
    // an identity the test controls: genesis naming an old repository key, registered upstream
    const rotation = await Secp256k1Keypair.create({ exportable: true })
    const oldKey = await Secp256k1Keypair.create({ exportable: true })
    const genesis: UnsignedPlcOp = {
      type: 'plc_operation',
      rotationKeys: [rotation.did()],
      verificationMethods: { atproto: oldKey.did() },
      alsoKnownAs: ['at://big.test'],
      services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: 'https://old.example.com' } },
      prev: null,
    }
    const g = await signOp(genesis, rotation)
    const did = didForGenesis(g)
    expect(
      (await fetch(`${plcUrl}/${did}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(g) }))
        .status,
    ).toBe(200)
    const reservedKey = (await call(dest, 'com.atproto.server.reserveSigningKey', undefined, { body: { did } })).body.signingKey
    const update = await signOp(
      {
        ...genesis,
        verificationMethods: { atproto: `did:key:${reservedKey}` },
        services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: dest.env.PDS_PUBLIC_URL } },
        prev: await opCid(g),
      },
      rotation,
    )
    expect(
      (await fetch(`${plcUrl}/${did}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(update) }))
        .status,
    ).toBe(200)
    const joined = await call(dest, 'com.atproto.server.createAccount', undefined, {
      body: { handle: 'big.test', email: 'big@example.com', password: PASSWORD, did, plcOp: update },
    })
    expect(joined.status).toBe(200)

    // a 250-record repository signed with the old key
    const storage = new MemoryBlockstore()
    const writes = Array.from({ length: 250 }, (_, i) => ({
      action: WriteOpAction.Create as const,
      collection: 'com.example.post' as const,
      rkey: `k${String(i).padStart(4, '0')}`,
      record: { text: `big ${i}` },
    }))
    const repo = await Repo.create(storage, did, oldKey, writes)
    const res = await importCar(joined.body.accessJwt, await blocksToCarFile(repo.cid, storage.blocks))
    expect(res.status).toBe(200)
    expect((await call(dest, 'com.atproto.server.activateAccount', joined.body.accessJwt, { method: 'POST' })).status).toBe(200)

    const car = await raw(`${dest.url}/xrpc/com.atproto.sync.getRepo?did=${did}`)
    expect((await verifyRepoCar(car.bytes, did, `did:key:${reservedKey}`)).creates).toHaveLength(250)
    const hose = await subscribe(dest.url, 0)
    try {
      await hose.until((f) => types(f, did).length >= 6)
      expect(types(hose.frames, did)).toEqual(['#identity', '#account:false', '#sync', '#account:true', '#identity', '#sync'])
    } finally {
      hose.close()
    }
  })

  it('signs PLC operations over the latest one, following the handle, and refuses a bad token', async () => {
    const acct = await call(origin, 'com.atproto.server.createAccount', undefined, {
      body: { handle: 'signer.test', email: 'signer@example.com', password: PASSWORD },
    })
    const { did, accessJwt: jwt } = acct.body
    const bad = await call(origin, 'com.atproto.identity.signPlcOperation', jwt, { body: { token: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' } })
    expect([bad.status, bad.body.error]).toEqual([401, 'InvalidToken'])
    const n = sink.received.length
    await call(origin, 'com.atproto.identity.requestPlcOperationSignature', jwt, { method: 'POST' })
    await sink.waitFor(n + 1)
    const mail = sink.received[sink.received.length - 1].body
    expect(mail.to).toBe('signer@example.com')
    expect(mail.text).toContain('15 minutes')
    const db = origin.services.db
    const latest = await db.selectFrom('plc_operation').selectAll().where('did', '=', did).orderBy('seq', 'desc').executeTakeFirstOrThrow()
    const res = await call(origin, 'com.atproto.identity.signPlcOperation', jwt, {
      body: {
        token: sink.tokenFor('signer@example.com').toLowerCase(),
        alsoKnownAs: ['at://signed.test'],
        rotationKeys: [(await Secp256k1Keypair.create()).did()],
      },
    })
    expect(res.status).toBe(200)
    expect(res.body.operation.prev).toBe(latest.cid)
    // omitted fields carried forward
    expect(res.body.operation.services).toEqual(JSON.parse(latest.operation).services)
    const stored = await db.selectFrom('plc_operation').selectAll().where('did', '=', did).orderBy('seq', 'desc').executeTakeFirstOrThrow()
    expect(stored.seq).toBe(latest.seq + 1)
    expect(JSON.parse(stored.operation)).toEqual(res.body.operation)
    // published upstream; the handle follows alsoKnownAs[0]
    expect(((await (await fetch(`${plcUrl}/${did}/log`)).json()) as any).length).toBe(2)
    const session = await call(origin, 'com.atproto.server.getSession', jwt)
    expect(session.body.handle).toBe('signed.test')
    // the server's own rotation key was removed: accepted, and now it can sign nothing more
    await call(origin, 'com.atproto.identity.requestPlcOperationSignature', jwt, { method: 'POST' })
    await sink.waitFor(n + 2)
    const after = await call(origin, 'com.atproto.identity.signPlcOperation', jwt, { body: { token: sink.tokenFor('signer@example.com') } })
    expect(after.status).toBe(400)
  })

  it('reserves for the caller when authenticated and needs a did otherwise', async () => {
    const anon = await call(dest, 'com.atproto.server.reserveSigningKey', undefined, { body: {} })
    expect([anon.status, anon.body.error]).toEqual([400, 'InvalidRequest'])
    const acct = await call(dest, 'com.atproto.server.createAccount', undefined, {
      body: { handle: 'reserver.test', email: 'reserver@example.com', password: PASSWORD },
    })
    const res = await call(dest, 'com.atproto.server.reserveSigningKey', acct.body.accessJwt, {
      body: { did: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa' },
    })
    expect(res.status).toBe(200)
    const row = await dest.services.db
      .selectFrom('reserved_signing_key')
      .selectAll()
      .where('public_key_multibase', '=', res.body.signingKey)
      .executeTakeFirstOrThrow()
    expect(row.did).toBe(acct.body.did)
  })
})
