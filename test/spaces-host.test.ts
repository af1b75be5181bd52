// The space host across two servers sharing a PLC directory: the authority on A governs a space
// (simplespace), a member on B gets a delegation token from B and the app exchanges it at A for a
// DPoP-bound credential, B's write notifications reach A's writer set, and a registered syncer
// stand-in hears of writes and of the deletion; a space created again starts afresh. Bad tokens,
// proofs and inputs get named 4xx.
import { randomBytes } from 'node:crypto'
import { createRequire } from 'node:module'
import { TID } from '@atproto/common'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type AtpBaseClient } from '../src/generated/client/index.js'
import { bearer, describe, newAccount, startTestPds, xrpc, type TestPds } from './harness.js'
import { newKey, proof, startStandIn, type Key } from './space-stand-in.js'

const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')

const hash32 = () => ({ $bytes: randomBytes(32).toString('base64').replace(/=+$/, '') })

describe('space host across two servers', () => {
  let plc: any
  let a: TestPds
  let b: TestPds
  let standIn: Awaited<ReturnType<typeof startStandIn>>
  let alice: Awaited<ReturnType<typeof newAccount>>
  let bob: Awaited<ReturnType<typeof newAccount>>
  let carol: Awaited<ReturnType<typeof newAccount>>
  let ca: AtpBaseClient
  let cb: AtpBaseClient
  let space: string

  beforeAll(async () => {
    plc = PlcServer.create({ db: Database.mock(), port: 0 })
    const plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
    a = await startTestPds({ PDS_DID_PLC_URL: plcUrl })
    b = await startTestPds({ PDS_DID_PLC_URL: plcUrl, PDS_HOSTNAME: 'pds2.localhost' })
    standIn = await startStandIn()
    alice = await newAccount(a.url, 'alice')
    bob = await newAccount(b.url, 'bob')
    carol = await newAccount(b.url, 'carol')
    ca = a.client()
    cb = b.client()
  }, 60_000)
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await standIn?.close()
    await plc?.destroy()
  })

  const asAlice = () => ({ headers: bearer(alice.accessJwt) })
  const pub = () => a.env.PDS_PUBLIC_URL
  const credUrl = () => `${pub()}/xrpc/com.atproto.space.getSpaceCredential`

  /** the app's exchange: a delegation token from the user's PDS, a credential from A */
  async function credentialFor(user: { accessJwt: string }, key: Key, forSpace = space, opts: { clientAttestation?: string } = {}) {
    const { token } = (await cb.com.atproto.space.getDelegationToken({ space: forSpace }, { headers: bearer(user.accessJwt) })).data
    return exchange(token, key, forSpace, opts)
  }
  async function exchange(token: string, key: Key, forSpace = space, opts: { clientAttestation?: string; proof?: string } = {}) {
    return xrpc(a.url, 'com.atproto.space.getSpaceCredential', {
      body: { space: forSpace, ...(opts.clientAttestation ? { clientAttestation: opts.clientAttestation } : {}) },
      headers: { authorization: `Bearer ${token}`, dpop: opts.proof ?? (await proof(key, 'POST', credUrl())) },
    })
  }
  async function listRepos(credential: string, key: Key, forSpace = space, headers: Record<string, string> = {}) {
    const url = `${pub()}/xrpc/com.atproto.space.listRepos`
    return xrpc(a.url, 'com.atproto.space.listRepos', {
      params: { space: forSpace },
      headers: { authorization: `DPoP ${credential}`, dpop: await proof(key, 'GET', url, { credential }), ...headers },
    })
  }
  /** a write notification from `user` (on B) to the authority, as B would send it */
  async function notify(user: { did: string; accessJwt: string }, body: Record<string, unknown>) {
    const { token } = (
      await cb.com.atproto.server.getServiceAuth(
        { aud: alice.did, lxm: 'com.atproto.space.notifyWrite' },
        { headers: bearer(user.accessJwt) },
      )
    ).data
    return xrpc(a.url, 'com.atproto.space.notifyWrite', { body, headers: bearer(token) })
  }

  it('creates a space for its owner and refuses a second one, bad policies and bad keys', async () => {
    const created = await ca.com.atproto.simplespace.createSpace(
      {
        type: 'com.example.group',
        policy: { $type: 'com.atproto.simplespace.defs#memberListPolicy' },
        appAccess: { $type: 'com.atproto.simplespace.defs#open' },
      },
      asAlice(),
    )
    space = created.data.uri
    expect(space).toMatch(new RegExp(`^at://${alice.did}/space/com.example.group/[a-z0-9]{13}$`))
    const got = await ca.com.atproto.simplespace.getSpace({ space }, asAlice())
    expect(got.data.policy).toEqual({ $type: 'com.atproto.simplespace.defs#memberListPolicy' })

    const skey = space.split('/').pop()!
    const again = await xrpc(a.url, 'com.atproto.simplespace.createSpace', {
      body: {
        type: 'com.example.group',
        skey,
        policy: { $type: 'com.atproto.simplespace.defs#publicPolicy' },
        appAccess: { $type: 'com.atproto.simplespace.defs#open' },
      },
      headers: bearer(alice.accessJwt),
    })
    expect([again.status, again.body.error]).toEqual([400, 'SpaceAlreadyExists'])
    const badPolicy = await xrpc(a.url, 'com.atproto.simplespace.createSpace', {
      body: { type: 'com.example.group', policy: { $type: 'com.example.nope' }, appAccess: { $type: 'com.atproto.simplespace.defs#open' } },
      headers: bearer(alice.accessJwt),
    })
    expect([badPolicy.status, badPolicy.body.error]).toEqual([400, 'UnsupportedPolicy'])
    const badApp = await xrpc(a.url, 'com.atproto.simplespace.createSpace', {
      body: {
        type: 'com.example.group',
        policy: { $type: 'com.atproto.simplespace.defs#managingAppPolicy', managingApp: 'https://app.example' },
        appAccess: { $type: 'com.atproto.simplespace.defs#open' },
      },
      headers: bearer(alice.accessJwt),
    })
    expect([badApp.status, badApp.body.error]).toEqual([400, 'UnsupportedPolicy'])
    for (const bad of [`${space}/`, `at://${alice.did}/space/com.example.group/..`, `at://alice.test/space/com.example.group/x`, 'nope']) {
      const res = await xrpc(a.url, 'com.atproto.simplespace.getSpace', { params: { space: bad }, headers: bearer(alice.accessJwt) })
      expect([res.status, res.body.error]).toEqual([400, 'InvalidRequest'])
    }
    const unknown = await xrpc(a.url, 'com.atproto.simplespace.getSpace', {
      params: { space: `at://${alice.did}/space/com.example.group/none` },
      headers: bearer(alice.accessJwt),
    })
    expect([unknown.status, unknown.body.error]).toEqual([400, 'SpaceNotFound'])
  })

  it('keeps a private member list only its owner manages', async () => {
    await ca.com.atproto.simplespace.addMember({ space, did: bob.did }, asAlice())
    await ca.com.atproto.simplespace.addMember({ space, did: bob.did }, asAlice())
    const list = await ca.com.atproto.simplespace.listMembers({ space }, asAlice())
    expect(list.data.members).toEqual([{ did: bob.did }])
    // bob is an account of B: on A his token is nobody's, and nothing changes
    const intruder = await newAccount(a.url, 'mallory')
    const res = await xrpc(a.url, 'com.atproto.simplespace.addMember', {
      body: { space, did: intruder.did },
      headers: bearer(intruder.accessJwt),
    })
    expect([res.status, res.body.error]).toEqual([400, 'NotSpaceOwner'])
    const members = await xrpc(a.url, 'com.atproto.simplespace.listMembers', { params: { space }, headers: bearer(intruder.accessJwt) })
    expect([members.status, members.body.error]).toEqual([400, 'NotSpaceOwner'])
    expect((await ca.com.atproto.simplespace.listMembers({ space }, asAlice())).data.members).toEqual([{ did: bob.did }])
  })

  it("exchanges a member's delegation token for a DPoP-bound credential once", async () => {
    const key = await newKey()
    const { token } = (await cb.com.atproto.space.getDelegationToken({ space }, { headers: bearer(bob.accessJwt) })).data
    const header = JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString())
    expect(header.typ).toBe('atproto-space-delegation+jwt')
    const first = await exchange(token, key)
    expect(first.status).toBe(200)
    const claims = JSON.parse(Buffer.from(first.body.credential.split('.')[1], 'base64url').toString())
    expect(claims).toMatchObject({ iss: alice.did, sub: space, cnf: { jkt: expect.any(String) } })
    expect(claims.exp - claims.iat).toBe(7200)
    const replayed = await exchange(token, key)
    expect([replayed.status, replayed.body.error]).toEqual([401, 'JwtReplayed'])
  })

  it('refuses non-members, other spaces, unknown spaces and proofs with ath', async () => {
    const key = await newKey()
    const carolTry = await credentialFor(carol, key)
    expect([carolTry.status, carolTry.body.error]).toEqual([400, 'UserNotAuthorized'])

    const other = `at://${alice.did}/space/com.example.group/other`
    const { token } = (await cb.com.atproto.space.getDelegationToken({ space: other }, { headers: bearer(bob.accessJwt) })).data
    const mismatch = await xrpc(a.url, 'com.atproto.space.getSpaceCredential', {
      body: { space },
      headers: { authorization: `Bearer ${token}`, dpop: await proof(key, 'POST', credUrl()) },
    })
    expect([mismatch.status, mismatch.body.error]).toEqual([400, 'InvalidDelegationToken'])
    const unknown = await credentialFor(bob, key, other)
    expect([unknown.status, unknown.body.error]).toEqual([400, 'SpaceNotFound'])

    const withAth = await exchange(
      (await cb.com.atproto.space.getDelegationToken({ space }, { headers: bearer(bob.accessJwt) })).data.token,
      key,
      space,
      {
        proof: await proof(key, 'POST', credUrl(), { credential: 'x' }),
      },
    )
    expect([withAth.status, withAth.body.error]).toEqual([401, 'BadDpopProof'])
    const noProof = await xrpc(a.url, 'com.atproto.space.getSpaceCredential', {
      body: { space },
      headers: {
        authorization: `Bearer ${(await cb.com.atproto.space.getDelegationToken({ space }, { headers: bearer(bob.accessJwt) })).data.token}`,
      },
    })
    expect([noProof.status, noProof.body.error]).toEqual([401, 'MissingDpopProof'])
    const stale = await exchange(
      (await cb.com.atproto.space.getDelegationToken({ space }, { headers: bearer(bob.accessJwt) })).data.token,
      key,
      space,
      {
        proof: await proof(key, 'POST', credUrl(), { iat: Math.floor(Date.now() / 1000) - 120 }),
      },
    )
    expect([stale.status, stale.body.error]).toEqual([401, 'DpopProofExpired'])
    // a session token is no delegation token
    const session = await exchange(bob.accessJwt, key)
    expect([session.status, session.body.error]).toEqual([401, 'BadJwtType'])
  })

  it("learns the writer set from B's notifications and shows it to credential holders", async () => {
    const rev = TID.nextStr()
    const hash = hash32()
    expect((await notify(bob, { space, repo: bob.did, rev, hash })).status).toBe(200)
    // from a non-member: refused, never listed
    const refused = await notify(carol, { space, repo: carol.did, rev: TID.nextStr(), hash: hash32() })
    expect(refused.status).toBe(403)
    // naming another writer than the token's issuer
    const forged = await notify(carol, { space, repo: bob.did, rev: TID.nextStr(), hash: hash32() })
    expect(forged.status).toBe(403)
    // a space A does not govern: accepted and ignored
    const elsewhere = await notify(bob, {
      space: `at://${alice.did}/space/com.example.group/none`,
      repo: bob.did,
      rev: TID.nextStr(),
      hash: hash32(),
    })
    expect(elsewhere.status).toBe(200)

    const key = await newKey()
    const { credential } = (await credentialFor(bob, key)).body
    const listed = await listRepos(credential, key)
    expect(listed.status).toBe(200)
    expect(listed.body.repos).toEqual([{ did: bob.did, rev, hash }])
  })

  it('refuses credentials as Bearer, without or with foreign proofs, replayed, or for another space', async () => {
    const key = await newKey()
    const { credential } = (await credentialFor(bob, key)).body
    const url = `${pub()}/xrpc/com.atproto.space.listRepos`
    const asBearer = await xrpc(a.url, 'com.atproto.space.listRepos', { params: { space }, headers: bearer(credential) })
    expect(asBearer.status).toBe(400)
    expect(asBearer.body.error).toBe('InvalidToken')
    const noProof = await xrpc(a.url, 'com.atproto.space.listRepos', {
      params: { space },
      headers: { authorization: `DPoP ${credential}` },
    })
    expect([noProof.status, noProof.body.error]).toEqual([401, 'MissingDpopProof'])
    const foreign = await listRepos(credential, key, space, { dpop: await proof(await newKey(), 'GET', url, { credential }) })
    expect([foreign.status, foreign.body.error]).toEqual([401, 'DpopKeyMismatch'])
    const withoutAth = await listRepos(credential, key, space, { dpop: await proof(key, 'GET', url) })
    expect([withoutAth.status, withoutAth.body.error]).toEqual([401, 'BadDpopProof'])
    const once = await proof(key, 'GET', url, { credential })
    const first = await listRepos(credential, key, space, { dpop: once })
    expect(first.status).toBe(200)
    const replay = await listRepos(credential, key, space, { dpop: once })
    expect([replay.status, replay.body.error]).toEqual([401, 'JwtReplayed'])
    const other = await listRepos(credential, key, `at://${alice.did}/space/com.example.group/other`)
    expect([other.status, other.body.error]).toEqual([400, 'InvalidCredential'])
    const tampered = credential.slice(0, -4) + (credential.endsWith('AAAA') ? 'BBBB' : 'AAAA')
    const bad = await listRepos(tampered, key)
    expect([bad.status, bad.body.error]).toEqual([401, 'BadJwtSignature'])
  })

  it('fans write notifications out to a registered syncer, and the deletion', async () => {
    const key = await newKey()
    const { credential } = (await credentialFor(bob, key)).body
    const regUrl = `${pub()}/xrpc/com.atproto.space.registerNotify`
    const unresolvable = await xrpc(a.url, 'com.atproto.space.registerNotify', {
      body: { space, service: 'did:web:nowhere.invalid#syncer' },
      headers: { authorization: `DPoP ${credential}`, dpop: await proof(key, 'POST', regUrl, { credential }) },
    })
    expect([unresolvable.status, unresolvable.body.error]).toEqual([400, 'ServiceNotResolvable'])
    const service = `${standIn.did}#syncer`
    const reg = await xrpc(a.url, 'com.atproto.space.registerNotify', {
      body: { space, service },
      headers: { authorization: `DPoP ${credential}`, dpop: await proof(key, 'POST', regUrl, { credential }) },
    })
    expect(reg.status).toBe(200)
    expect(Date.parse(reg.body.expiresAt) - Date.now()).toBeGreaterThan(23 * 3600 * 1000)

    const rev = TID.nextStr()
    const hash = hash32()
    expect((await notify(bob, { space, repo: bob.did, rev, hash })).status).toBe(200)
    const heard = await standIn.next('com.atproto.space.notifyWrite', (b) => b.rev === rev)
    expect(heard.body).toEqual({ space, repo: bob.did, rev, hash })
    const auth = JSON.parse(Buffer.from(heard.auth!.slice(7).split('.')[1], 'base64url').toString())
    expect(auth).toMatchObject({ iss: alice.did, aud: service, lxm: 'com.atproto.space.notifyWrite' })

    await ca.com.atproto.simplespace.deleteSpace({ space }, asAlice())
    const deleted = await standIn.next('com.atproto.space.notifySpaceDeleted')
    expect(deleted.body).toEqual({ space })
    await ca.com.atproto.simplespace.deleteSpace({ space }, asAlice())
    const again = await credentialFor(bob, await newKey())
    expect([again.status, again.body.error]).toEqual([400, 'SpaceDeleted'])
    const repos = await listRepos(credential, key)
    expect([repos.status, repos.body.error]).toEqual([400, 'SpaceNotFound'])
    const gone = await xrpc(a.url, 'com.atproto.simplespace.getSpace', { params: { space }, headers: bearer(alice.accessJwt) })
    expect([gone.status, gone.body.error]).toEqual([400, 'SpaceNotFound'])
    const never = await xrpc(a.url, 'com.atproto.simplespace.deleteSpace', {
      body: { space: `at://${alice.did}/space/com.example.group/never` },
      headers: bearer(alice.accessJwt),
    })
    expect([never.status, never.body.error]).toEqual([400, 'SpaceNotFound'])
  })

  it('asks the managing app, and denies when it cannot be asked', async () => {
    const managed = (
      await ca.com.atproto.simplespace.createSpace(
        {
          type: 'com.example.forum',
          skey: 'self',
          policy: { $type: 'com.atproto.simplespace.defs#managingAppPolicy', managingApp: `${standIn.did}#app` },
          appAccess: { $type: 'com.atproto.simplespace.defs#open' },
        },
        asAlice(),
      )
    ).data.uri
    standIn.authorize([bob.did])
    const ok = await credentialFor(bob, await newKey(), managed)
    expect(ok.status).toBe(200)
    const asked = await standIn.next('com.atproto.simplespace.checkUserAccess', (q) => q.user === bob.did)
    const claims = JSON.parse(Buffer.from(asked.auth!.slice(7).split('.')[1], 'base64url').toString())
    expect(claims).toMatchObject({ iss: alice.did, aud: `${standIn.did}#app`, lxm: 'com.atproto.simplespace.checkUserAccess' })
    const no = await credentialFor(carol, await newKey(), managed)
    expect([no.status, no.body.error]).toEqual([400, 'UserNotAuthorized'])

    await ca.com.atproto.simplespace.updateSpace(
      { space: managed, policy: { $type: 'com.atproto.simplespace.defs#managingAppPolicy', managingApp: 'did:web:nowhere.invalid' } },
      asAlice(),
    )
    const closed = await credentialFor(bob, await newKey(), managed)
    expect([closed.status, closed.body.error]).toEqual([400, 'UserNotAuthorized'])
    // the authority itself is always admitted
    const own = (await ca.com.atproto.space.getDelegationToken({ space: managed }, asAlice())).data.token
    expect((await exchange(own, await newKey(), managed)).status).toBe(200)

    await ca.com.atproto.simplespace.updateSpace(
      {
        space: managed,
        appAccess: { $type: 'com.atproto.simplespace.defs#allowList', allowed: ['https://app.example/client-metadata.json'] },
      },
      asAlice(),
    )
    const noApp = await exchange(
      (await ca.com.atproto.space.getDelegationToken({ space: managed }, asAlice())).data.token,
      await newKey(),
      managed,
    )
    expect([noApp.status, noApp.body.error]).toEqual([400, 'AppNotAuthorized'])
    const badAttestation = await exchange(
      (await ca.com.atproto.space.getDelegationToken({ space: managed }, asAlice())).data.token,
      await newKey(),
      managed,
      {
        clientAttestation: 'not.a.jwt',
      },
    )
    expect([badAttestation.status, badAttestation.body.error]).toEqual([400, 'InvalidClientAttestation'])
  })

  it('starts a space created again afresh, whatever a request racing its deletion left behind', async () => {
    const create = () =>
      ca.com.atproto.simplespace.createSpace(
        {
          type: 'com.example.group',
          skey: 'again',
          policy: { $type: 'com.atproto.simplespace.defs#memberListPolicy' },
          appAccess: { $type: 'com.atproto.simplespace.defs#open' },
        },
        asAlice(),
      )
    const again = (await create()).data.uri
    await ca.com.atproto.simplespace.deleteSpace({ space: again }, asAlice())
    // what an addMember, a write notification and a registration through another process leave
    // when they commit just after the deletion cleared the space
    const db = a.services.db
    await db.insertInto('space_member').values({ space: again, did: bob.did }).execute()
    await db
      .insertInto('space_writer')
      .values({ space: again, did: bob.did, rev: TID.nextStr(), hash: Buffer.from(randomBytes(32)) })
      .execute()
    const expires = new Date(Date.now() + 3600_000).toISOString()
    await db
      .insertInto('space_notify')
      .values({ space: again, service: `${standIn.did}#syncer`, expires_at: expires })
      .execute()

    expect((await create()).data.uri).toBe(again)
    expect((await ca.com.atproto.simplespace.listMembers({ space: again }, asAlice())).data.members).toEqual([])
    const bobTry = await credentialFor(bob, await newKey(), again)
    expect([bobTry.status, bobTry.body.error]).toEqual([400, 'UserNotAuthorized'])
    const key = await newKey()
    const own = (await ca.com.atproto.space.getDelegationToken({ space: again }, asAlice())).data.token
    const { credential } = (await exchange(own, key, again)).body
    const repos = await listRepos(credential, key, again)
    expect([repos.status, repos.body.repos]).toEqual([200, []])
    // the old registration is gone: deleting the space again tells nobody
    const heard = standIn.received.length
    await ca.com.atproto.simplespace.deleteSpace({ space: again }, asAlice())
    await new Promise((r) => setTimeout(r, 300))
    expect(standIn.received.slice(heard).filter((r) => r.body?.space === again)).toEqual([])
  })
})
