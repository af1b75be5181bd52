// Spaces through account lifecycles, across two servers sharing a PLC directory: a syncer holding
// a credential minted by A reads members' repos on B, and is answered RepoDeactivated or
// RepoTakendown while a member is switched off (the member still reads its own); A serves no
// space of an authority that is deactivated or taken down, and serves it again once it is back;
// deleting an account through the emailed-token flow or the operator's method takes its
// permissioned repos with it, leaves the spaces it governed as tombstones, and tells their
// registered syncers once the deletion committed.
import { createRequire } from 'node:module'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ADMIN_PASSWORD, bearer, describe, newAccount, PASSWORD, startTestPds, xrpc, type TestPds } from './harness.js'
import { startMailSink, sinkEnv, type MailSink } from './mail-sink.js'
import { newKey, proof, startStandIn, type Key } from './space-stand-in.js'

const { PlcServer, Database } = createRequire(import.meta.url)('@did-plc/server')
const S = 'com.atproto.space'
const SS = 'com.atproto.simplespace'
const COL = 'com.example.group.post'
const MEMBER_LIST = { $type: `${SS}.defs#memberListPolicy` }
const OPEN = { $type: `${SS}.defs#open` }
const admin = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` }

type Account = Awaited<ReturnType<typeof newAccount>>
type Cred = { credential: string; key: Key }

describe('spaces through account lifecycles', () => {
  let plc: any
  let a: TestPds
  let b: TestPds
  let mail: MailSink
  let syncer: Awaited<ReturnType<typeof startStandIn>>

  beforeAll(async () => {
    plc = PlcServer.create({ db: Database.mock(), port: 0 })
    const plcUrl = `http://127.0.0.1:${(await plc.start()).address().port}`
    mail = await startMailSink()
    a = await startTestPds({ PDS_DID_PLC_URL: plcUrl, ...sinkEnv(mail) })
    b = await startTestPds({ PDS_DID_PLC_URL: plcUrl, PDS_HOSTNAME: 'pds2.localhost' })
    syncer = await startStandIn()
  }, 60_000)
  afterAll(async () => {
    await a?.stop()
    await b?.stop()
    await syncer?.close()
    await mail?.close()
    await plc?.destroy()
  })

  /** a space `owner` (on A) governs, with `members` on its list */
  async function governedSpace(owner: Account, skey: string, members: Account[]) {
    const created = await xrpc(a.url, `${SS}.createSpace`, {
      body: { type: 'com.example.group', skey, policy: MEMBER_LIST, appAccess: OPEN },
      headers: bearer(owner.accessJwt),
    })
    expect(created.status, created.text).toBe(200)
    for (const m of members) {
      const added = await xrpc(a.url, `${SS}.addMember`, {
        body: { space: created.body.uri, did: m.did },
        headers: bearer(owner.accessJwt),
      })
      expect(added.status, added.text).toBe(200)
    }
    return created.body.uri as string
  }

  /** `user` (an account of `home`) asks its PDS for a delegation token and exchanges it at A */
  async function exchange(home: TestPds, user: Account, space: string) {
    const key = await newKey()
    const token = await xrpc(home.url, `${S}.getDelegationToken`, { params: { space }, headers: bearer(user.accessJwt) })
    expect(token.status, token.text).toBe(200)
    const url = `${a.env.PDS_PUBLIC_URL}/xrpc/${S}.getSpaceCredential`
    const res = await xrpc(a.url, `${S}.getSpaceCredential`, {
      body: { space },
      headers: { authorization: `Bearer ${token.body.token}`, dpop: await proof(key, 'POST', url) },
    })
    return { res, key }
  }
  async function credentialOf(home: TestPds, user: Account, space: string): Promise<Cred> {
    const { res, key } = await exchange(home, user, space)
    expect(res.status, res.text).toBe(200)
    return { credential: res.body.credential, key }
  }

  /** a call with a space credential and a fresh proof for `host` */
  async function withCredential(host: TestPds, cred: Cred, nsid: string, params: Record<string, string>, body?: unknown) {
    const method = body === undefined ? 'GET' : 'POST'
    const dpop = await proof(cred.key, method, `${host.env.PDS_PUBLIC_URL}/xrpc/${nsid}`, { credential: cred.credential })
    return xrpc(host.url, nsid, { method, params, body, headers: { authorization: `DPoP ${cred.credential}`, dpop } })
  }
  const answer = (r: { status: number; body: any }) => [r.status, r.body?.error]

  const write = (host: TestPds, user: Account, space: string, rkey: string, extra: Record<string, unknown> = {}) =>
    xrpc(host.url, `${S}.createRecord`, {
      body: {
        space,
        repo: user.did,
        collection: COL,
        rkey,
        record: { $type: COL, text: rkey, createdAt: new Date().toISOString(), ...extra },
      },
      headers: bearer(user.accessJwt),
    })

  /** every read a syncer makes of `repo`, with the credential, answered by B */
  const syncerReads = (cred: Cred, space: string, repo: string) =>
    Promise.all([
      withCredential(b, cred, `${S}.getRecord`, { space, repo, collection: COL, rkey: 'r1' }),
      withCredential(b, cred, `${S}.listRecords`, { space, repo }),
      withCredential(b, cred, `${S}.getRepo`, { space, repo }),
      withCredential(b, cred, `${S}.getLatestCommit`, { space, repo }),
      withCredential(b, cred, `${S}.listRepoOps`, { space, repo }),
      withCredential(b, cred, `${S}.listBlobs`, { space, repo }),
    ])

  it('answers a syncer RepoDeactivated for a deactivated member, who still reads its own, and again once it is back', async () => {
    const alice = await newAccount(a.url, 'lcauth')
    const bob = await newAccount(b.url, 'lcbob')
    const space = await governedSpace(alice, 'deact', [bob])
    expect((await write(b, bob, space, 'r1')).status).toBe(200)
    const cred = await credentialOf(a, alice, space)
    for (const r of await syncerReads(cred, space, bob.did)) expect(r.status, r.text).toBe(200)

    expect((await xrpc(b.url, 'com.atproto.server.deactivateAccount', { body: {}, headers: bearer(bob.accessJwt) })).status).toBe(200)
    for (const r of await syncerReads(cred, space, bob.did)) expect(answer(r)).toEqual([400, 'RepoDeactivated'])
    const own = await xrpc(b.url, `${S}.getRecord`, {
      params: { space, repo: bob.did, collection: COL, rkey: 'r1' },
      headers: bearer(bob.accessJwt),
    })
    expect(own.status, own.text).toBe(200)
    const refused = await write(b, bob, space, 'r2')
    expect(answer(refused)).toEqual([403, 'AccountDeactivated'])

    expect((await xrpc(b.url, 'com.atproto.server.activateAccount', { method: 'POST', headers: bearer(bob.accessJwt) })).status).toBe(200)
    const back = await withCredential(b, cred, `${S}.listRecords`, { space, repo: bob.did })
    expect(back.body.records.map((r: { rkey: string }) => r.rkey)).toEqual(['r1'])
  })

  it('answers a syncer RepoTakendown for a taken-down member and refuses its writes', async () => {
    const alice = await newAccount(a.url, 'lcauth')
    const dave = await newAccount(b.url, 'lcdave')
    const space = await governedSpace(alice, 'takedown', [dave])
    expect((await write(b, dave, space, 'r1')).status).toBe(200)
    const cred = await credentialOf(a, alice, space)
    const subject = { $type: 'com.atproto.admin.defs#repoRef', did: dave.did }
    const down = await xrpc(b.url, 'com.atproto.admin.updateSubjectStatus', {
      body: { subject, takedown: { applied: true, ref: 'case-1' } },
      headers: admin,
    })
    expect(down.status, down.text).toBe(200)
    for (const r of await syncerReads(cred, space, dave.did)) expect(answer(r)).toEqual([400, 'RepoTakendown'])
    expect(answer(await write(b, dave, space, 'r2'))).toEqual([403, 'AccountTakedown'])
    const rows = await b.services.db.selectFrom('space_record').select('rkey').where('did', '=', dave.did).execute()
    expect(rows.map((r) => r.rkey)).toEqual(['r1'])

    await xrpc(b.url, 'com.atproto.admin.updateSubjectStatus', { body: { subject, takedown: { applied: false } }, headers: admin })
    const back = await withCredential(b, cred, `${S}.getRecord`, { space, repo: dave.did, collection: COL, rkey: 'r1' })
    expect(back.status, back.text).toBe(200)
  })

  it('serves no space of a deactivated authority, keeps its members, and serves them again once it is back', async () => {
    const alice = await newAccount(a.url, 'lcauth')
    const bob = await newAccount(b.url, 'lcbob')
    const space = await governedSpace(alice, 'paused', [bob])
    const held = await credentialOf(b, bob, space)
    // listed among the authority's spaces though it wrote nothing there, so a move finds it
    const listed = await xrpc(a.url, `${S}.listSpaces`, { headers: bearer(alice.accessJwt) })
    expect(listed.body.spaces).toEqual([{ uri: space }])

    expect((await xrpc(a.url, 'com.atproto.server.deactivateAccount', { body: {}, headers: bearer(alice.accessJwt) })).status).toBe(200)
    expect(answer((await exchange(b, bob, space)).res)).toEqual([400, 'SpaceNotFound'])
    // a credential minted before: the host hands out nothing more under it
    expect(answer(await withCredential(a, held, `${S}.listRepos`, { space }))).toEqual([400, 'SpaceNotFound'])
    expect(answer(await withCredential(a, held, `${SS}.getSpace`, { space }))).toEqual([400, 'SpaceNotFound'])
    const reg = await withCredential(a, held, `${S}.registerNotify`, {}, { space, service: `${syncer.did}#syncer` })
    expect(answer(reg)).toEqual([400, 'SpaceNotFound'])
    // nor does the authority manage it while switched off
    const add = await xrpc(a.url, `${SS}.addMember`, { body: { space, did: alice.did }, headers: bearer(alice.accessJwt) })
    expect(answer(add)).toEqual([403, 'AccountDeactivated'])
    const own = await xrpc(a.url, `${S}.getDelegationToken`, { params: { space }, headers: bearer(alice.accessJwt) })
    expect(answer(own)).toEqual([403, 'AccountDeactivated'])

    expect((await xrpc(a.url, 'com.atproto.server.activateAccount', { method: 'POST', headers: bearer(alice.accessJwt) })).status).toBe(200)
    expect((await exchange(b, bob, space)).res.status).toBe(200)
    const members = await xrpc(a.url, `${SS}.listMembers`, { params: { space }, headers: bearer(alice.accessJwt) })
    expect(members.body.members).toEqual([{ did: bob.did }])
  })

  it('serves no space of a taken-down authority and tells its syncers nothing, until the takedown is lifted', async () => {
    const erin = await newAccount(a.url, 'lcerin')
    const bob = await newAccount(b.url, 'lcbob')
    const space = await governedSpace(erin, 'moderated', [bob])
    const held = await credentialOf(a, erin, space)
    const service = `${syncer.did}#syncer`
    expect((await withCredential(a, held, `${S}.registerNotify`, {}, { space, service })).status).toBe(200)

    const subject = { $type: 'com.atproto.admin.defs#repoRef', did: erin.did }
    const down = await xrpc(a.url, 'com.atproto.admin.updateSubjectStatus', {
      body: { subject, takedown: { applied: true, ref: 'case-2' } },
      headers: admin,
    })
    expect(down.status, down.text).toBe(200)
    expect(answer((await exchange(b, bob, space)).res)).toEqual([400, 'SpaceNotFound'])
    expect(answer(await withCredential(a, held, `${S}.listRepos`, { space }))).toEqual([400, 'SpaceNotFound'])
    const unreg = await withCredential(a, held, `${S}.unregisterNotify`, {}, { space, service })
    expect(answer(unreg)).toEqual([400, 'SpaceNotFound'])
    // a member's write still lands on B, and A learns the writer, but nobody is told in erin's name
    expect((await write(b, bob, space, 'during')).status).toBe(200)
    await new Promise((r) => setTimeout(r, 300))
    expect(syncer.received.filter((n) => n.body?.space === space)).toEqual([])

    await xrpc(a.url, 'com.atproto.admin.updateSubjectStatus', { body: { subject, takedown: { applied: false } }, headers: admin })
    const again = await exchange(b, bob, space)
    expect(again.res.status, again.res.text).toBe(200)
    const writers = await withCredential(a, { credential: again.res.body.credential, key: again.key }, `${S}.listRepos`, { space })
    expect(writers.body.repos.map((r: { did: string }) => r.did)).toEqual([bob.did])
  })

  it("deletes an account's permissioned repos through the emailed-token flow and tombstones the spaces it governed", async () => {
    const frank = await newAccount(a.url, 'lcfrank')
    const alice = await newAccount(a.url, 'lcauth')
    const bob = await newAccount(b.url, 'lcbob')
    const hosted = await governedSpace(frank, 'frank', [bob])
    const elsewhere = await governedSpace(alice, 'alice', [frank])
    const held = await credentialOf(a, frank, hosted)
    expect((await withCredential(a, held, `${S}.registerNotify`, {}, { space: hosted, service: `${syncer.did}#syncer` })).status).toBe(200)
    expect((await write(b, bob, hosted, 'kept')).status).toBe(200)
    await syncer.next(`${S}.notifyWrite`, (n) => n.space === hosted && n.repo === bob.did)
    // frank writes in his own space and in alice's, one record with a blob
    const up = await xrpc(a.url, 'com.atproto.repo.uploadBlob', {
      body: 'frank blob bytes',
      headers: { ...bearer(frank.accessJwt), 'content-type': 'text/plain' },
    })
    expect(up.status, up.text).toBe(200)
    expect((await write(a, frank, hosted, 'own')).status).toBe(200)
    expect((await write(a, frank, elsewhere, 'r1', { file: up.body.blob })).status).toBe(200)
    const mine = async (table: 'space_repo' | 'space_record' | 'space_op' | 'space_record_blob' | 'space_writer') =>
      (await a.services.db.selectFrom(table).select('space').where('did', '=', frank.did).execute()).length
    expect(await mine('space_record_blob')).toBe(1)
    expect(await mine('space_writer')).toBeGreaterThan(0)

    expect(
      (await xrpc(a.url, 'com.atproto.server.requestAccountDelete', { method: 'POST', headers: bearer(frank.accessJwt) })).status,
    ).toBe(200)
    const token = mail.tokenFor(frank.email)
    const del = await xrpc(a.url, 'com.atproto.server.deleteAccount', {
      body: { did: frank.did, password: PASSWORD, token },
      headers: bearer(frank.accessJwt),
    })
    expect(del.status, del.text).toBe(200)
    const deleted = await syncer.next(`${S}.notifySpaceDeleted`, (n) => n.space === hosted)
    expect(deleted.body).toEqual({ space: hosted })
    const auth = JSON.parse(Buffer.from(deleted.auth!.slice(7).split('.')[1], 'base64url').toString())
    expect(auth).toMatchObject({ iss: frank.did, aud: `${syncer.did}#syncer`, lxm: `${S}.notifySpaceDeleted` })

    for (const table of ['space_repo', 'space_record', 'space_op', 'space_record_blob', 'space_writer'] as const)
      expect(await mine(table)).toBe(0)
    const config = await a.services.db.selectFrom('space_config').select('deleted_at').where('space', '=', hosted).executeTakeFirstOrThrow()
    expect(config.deleted_at).not.toBeNull()
    for (const table of ['space_member', 'space_writer', 'space_notify'] as const) {
      expect(await a.services.db.selectFrom(table).select('space').where('space', '=', hosted).execute()).toEqual([])
    }
    expect(answer((await exchange(b, bob, hosted)).res)).toEqual([400, 'SpaceDeleted'])
    expect(answer(await withCredential(a, held, `${S}.listRepos`, { space: hosted }))).toEqual([400, 'SpaceNotFound'])
    // alice's space no longer lists frank as a writer; bob keeps his repo in frank's old space
    const aliceCred = await credentialOf(a, alice, elsewhere)
    expect((await withCredential(a, aliceCred, `${S}.listRepos`, { space: elsewhere })).body.repos).toEqual([])
    const kept = await xrpc(b.url, `${S}.getRecord`, {
      params: { space: hosted, repo: bob.did, collection: COL, rkey: 'kept' },
      headers: bearer(bob.accessJwt),
    })
    expect(kept.status, kept.text).toBe(200)
  })

  it("tells a deleted authority's syncers once, for its live spaces only, when the operator deletes it", async () => {
    const gina = await newAccount(a.url, 'lcgina')
    const live = await governedSpace(gina, 'live', [])
    const gone = await governedSpace(gina, 'gone', [])
    const service = `${syncer.did}#syncer`
    for (const space of [live, gone]) {
      const cred = await credentialOf(a, gina, space)
      expect((await withCredential(a, cred, `${S}.registerNotify`, {}, { space, service })).status).toBe(200)
    }
    const dropped = await xrpc(a.url, `${SS}.deleteSpace`, { body: { space: gone }, headers: bearer(gina.accessJwt) })
    expect(dropped.status, dropped.text).toBe(200)
    await syncer.next(`${S}.notifySpaceDeleted`, (n) => n.space === gone)

    const del = await xrpc(a.url, 'com.atproto.admin.deleteAccount', { body: { did: gina.did }, headers: admin })
    expect(del.status, del.text).toBe(200)
    await syncer.next(`${S}.notifySpaceDeleted`, (n) => n.space === live)
    // a second deletion changes nothing and tells nobody again
    expect((await xrpc(a.url, 'com.atproto.admin.deleteAccount', { body: { did: gina.did }, headers: admin })).status).toBe(200)
    await new Promise((r) => setTimeout(r, 300))
    const heard = syncer.received.filter((n) => n.lxm === `${S}.notifySpaceDeleted` && [live, gone].includes(n.body?.space))
    expect(heard.map((n) => n.body.space).sort()).toEqual([gone, live].sort())
  })
})
