// Spaces across two servers end to end: a member on B writes into a space whose authority is on
// A; B's repo host notifies A, A's writer set shows the writer and A fans the write out to a
// registered syncer, which then pulls the member's repo from B with a credential minted by A and
// verifies it (signature, LtHash, blocks). A writer the space does not admit is never listed.
import { createRequire } from 'node:module'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { verifySpaceCar } from '../src/space/car.js'
import { bearer, describe, newAccount, startTestPds, xrpc, type TestPds } from './harness.js'
import { newKey, proof, startStandIn, type Key } from './space-stand-in.js'

const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')
const S = 'com.atproto.space'
const COL = 'com.example.group.post'

describe('spaces between two servers', () => {
  let plc: any
  let plcUrl: string
  let a: TestPds
  let b: TestPds
  let syncer: Awaited<ReturnType<typeof startStandIn>>
  let alice: Awaited<ReturnType<typeof newAccount>>
  let bob: Awaited<ReturnType<typeof newAccount>>
  let carol: Awaited<ReturnType<typeof newAccount>>
  let space: string
  const key = { current: undefined as unknown as Key }
  let credential: string

  beforeAll(async () => {
    plc = PlcServer.create({ db: Database.mock(), port: 0 })
    plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
    a = await startTestPds({ PDS_DID_PLC_URL: plcUrl })
    b = await startTestPds({ PDS_DID_PLC_URL: plcUrl, PDS_HOSTNAME: 'pds2.localhost' })
    syncer = await startStandIn()
    alice = await newAccount(a.url, 'alice')
    bob = await newAccount(b.url, 'bob')
    carol = await newAccount(b.url, 'carol')
    space = (
      await xrpc(a.url, 'com.atproto.simplespace.createSpace', {
        body: {
          type: 'com.example.group',
          skey: 'self',
          policy: { $type: 'com.atproto.simplespace.defs#memberListPolicy' },
          appAccess: { $type: 'com.atproto.simplespace.defs#open' },
        },
        headers: bearer(alice.accessJwt),
      })
    ).body.uri
    await xrpc(a.url, 'com.atproto.simplespace.addMember', { body: { space, did: bob.did }, headers: bearer(alice.accessJwt) })
    // the syncer acts for the authority: its delegation token from A, exchanged at A
    key.current = await newKey()
    const { token } = (await xrpc(a.url, `${S}.getDelegationToken`, { params: { space }, headers: bearer(alice.accessJwt) })).body
    const credUrl = `${a.env.PDS_PUBLIC_URL}/xrpc/${S}.getSpaceCredential`
    const exchanged = await xrpc(a.url, `${S}.getSpaceCredential`, {
      body: { space },
      headers: { authorization: `Bearer ${token}`, dpop: await proof(key.current, 'POST', credUrl) },
    })
    credential = exchanged.body.credential
  }, 60_000)
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await syncer?.close()
    await plc?.destroy()
  })

  /** a call with the space credential and a fresh proof for `host` */
  async function withCredential(
    host: TestPds,
    nsid: string,
    params: Record<string, string>,
    opts: { cred?: string; method?: 'GET' | 'POST'; body?: unknown } = {},
  ) {
    const cred = opts.cred ?? credential
    const method = opts.method ?? 'GET'
    const dpop = await proof(key.current, method, `${host.env.PDS_PUBLIC_URL}/xrpc/${nsid}`, { credential: cred })
    return xrpc(host.url, nsid, { method, params, body: opts.body, headers: { authorization: `DPoP ${cred}`, dpop } })
  }
  const write = (user: { did: string; accessJwt: string }, rkey: string, text: string) =>
    xrpc(b.url, `${S}.createRecord`, {
      body: { space, repo: user.did, collection: COL, rkey, record: { $type: COL, text, createdAt: new Date().toISOString() } },
      headers: bearer(user.accessJwt),
    })

  it("carries a member's write from B to A's writer set and to the syncer, which pulls and verifies it", async () => {
    const reg = await withCredential(a, `${S}.registerNotify`, {}, { method: 'POST', body: { space, service: `${syncer.did}#syncer` } })
    expect(reg.status).toBe(200)

    expect((await write(bob, 'first', 'hello')).status).toBe(200)
    expect((await write(bob, 'second', 'again')).status).toBe(200)
    const latest = (await xrpc(b.url, `${S}.getLatestCommit`, { params: { space, repo: bob.did }, headers: bearer(bob.accessJwt) })).body
      .commit
    const heard = await syncer.next(`${S}.notifyWrite`, (n) => n.repo === bob.did && n.rev === latest.rev)
    expect(heard.body).toEqual({ space, repo: bob.did, rev: latest.rev, hash: latest.hash })

    // the syncer's side: who wrote, then each writer's repo from its own host
    const repos = await withCredential(a, `${S}.listRepos`, { space })
    expect(repos.status).toBe(200)
    expect(repos.body.repos).toEqual([{ did: bob.did, rev: latest.rev, hash: latest.hash }])
    // the CAR as bytes
    const carUrl = `${S}.getRepo`
    const car = await fetch(`${b.url}/xrpc/${carUrl}?${new URLSearchParams({ space, repo: bob.did })}`, {
      headers: {
        authorization: `DPoP ${credential}`,
        dpop: await proof(key.current, 'GET', `${b.env.PDS_PUBLIC_URL}/xrpc/${carUrl}`, { credential }),
      },
    })
    expect(car.status).toBe(200)
    expect(car.headers.get('content-type')).toContain('application/vnd.ipld.car')
    const doc = (await (await fetch(`${plcUrl}/${bob.did}/data`)).json()) as { verificationMethods: { atproto: string } }
    const verified = await verifySpaceCar(new Uint8Array(await car.arrayBuffer()), {
      space,
      author: bob.did,
      didKey: doc.verificationMethods.atproto,
    })
    expect(verified.entries.map((e) => e.rkey).sort()).toEqual(['first', 'second'])
    expect(Buffer.from(verified.commit.hash).toString('base64').replace(/=+$/, '')).toBe(latest.hash.$bytes)
    const rec = await withCredential(b, `${S}.getRecord`, { space, repo: bob.did, collection: COL, rkey: 'first' })
    expect(rec.body.value.text).toBe('hello')
  })

  it('never lists a writer the space does not admit, though B keeps the write', async () => {
    expect((await write(carol, 'x', 'uninvited')).status).toBe(200)
    const own = await xrpc(b.url, `${S}.getRecord`, {
      params: { space, repo: carol.did, collection: COL, rkey: 'x' },
      headers: bearer(carol.accessJwt),
    })
    expect(own.status).toBe(200)
    const repos = await withCredential(a, `${S}.listRepos`, { space })
    expect(repos.body.repos.map((r: { did: string }) => r.did)).toEqual([bob.did])
  })

  it("refuses to read B's repos with a bad credential, a foreign proof or another space", async () => {
    const asBearer = await xrpc(b.url, `${S}.getRecord`, {
      params: { space, repo: bob.did, collection: COL, rkey: 'first' },
      headers: bearer(credential),
    })
    expect([asBearer.status, asBearer.body.error]).toEqual([400, 'InvalidToken'])
    const url = `${b.env.PDS_PUBLIC_URL}/xrpc/${S}.getRecord`
    const foreign = await xrpc(b.url, `${S}.getRecord`, {
      params: { space, repo: bob.did, collection: COL, rkey: 'first' },
      headers: { authorization: `DPoP ${credential}`, dpop: await proof(await newKey(), 'GET', url, { credential }) },
    })
    expect([foreign.status, foreign.body.error]).toEqual([401, 'DpopKeyMismatch'])
    const other = await withCredential(b, `${S}.getRecord`, {
      space: space.replace(/self$/, 'other'),
      repo: bob.did,
      collection: COL,
      rkey: 'first',
    })
    expect([other.status, other.body.error]).toEqual([400, 'InvalidCredential'])
    const forged = credential.split('.').slice(0, 2).join('.') + '.' + Buffer.alloc(64, 1).toString('base64url')
    const bad = await withCredential(b, `${S}.getRecord`, { space, repo: bob.did, collection: COL, rkey: 'first' }, { cred: forged })
    expect([bad.status, bad.body.error]).toEqual([401, 'BadJwtSignature'])
    // the owner's session still reads only its own repo
    const notMine = await xrpc(b.url, `${S}.getRecord`, {
      params: { space, repo: bob.did, collection: COL, rkey: 'first' },
      headers: bearer(carol.accessJwt),
    })
    expect([notMine.status, notMine.body.error]).toEqual([400, 'RepoNotFound'])
  })

  it("deletes the space: the syncer is told, the authority's own records go, members keep theirs", async () => {
    const mine = await xrpc(a.url, `${S}.createRecord`, {
      body: {
        space,
        repo: alice.did,
        collection: COL,
        rkey: 'own',
        record: { $type: COL, text: 'mine', createdAt: new Date().toISOString() },
      },
      headers: bearer(alice.accessJwt),
    })
    expect(mine.status).toBe(200)
    expect((await xrpc(a.url, 'com.atproto.simplespace.deleteSpace', { body: { space }, headers: bearer(alice.accessJwt) })).status).toBe(
      200,
    )
    await syncer.next(`${S}.notifySpaceDeleted`)
    const gone = await xrpc(a.url, `${S}.getLatestCommit`, { params: { space, repo: alice.did }, headers: bearer(alice.accessJwt) })
    expect([gone.status, gone.body.error]).toEqual([400, 'RepoNotFound'])
    const kept = await xrpc(b.url, `${S}.getRecord`, {
      params: { space, repo: bob.did, collection: COL, rkey: 'first' },
      headers: bearer(bob.accessJwt),
    })
    expect(kept.status).toBe(200)
  })
})
